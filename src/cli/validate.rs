//! `trainguard validate` — the webhook's validating rules over TrainJob manifests, offline, for
//! CI. Files are streamed one at a time; only the old TrainJobs (to match new against old) are
//! held in memory.

use std::collections::HashMap;
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::value::RawValue;

use super::check::{self, Checked, Context, OldObject};
use super::parallel;
use super::report::{OutputFormat, Reporter};
use super::state;
use crate::cluster::{ClusterView, Offline};
use crate::config::RulesArgs;
use crate::manifests::{self, Document, Limits, ManifestError, RawFile, Source};

#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 all allowed, 1 any TrainJob denied, 2 unusable input.\n\
    See docs/ci.md for what offline verdicts mean and how to run this in CI.")]
pub struct ValidateArgs {
    /// Manifests to check: files, directories (searched for *.yaml, *.yml, *.json) or - for stdin.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,

    /// Manifests before the change (repeatable). A TrainJob with the same namespace and name
    /// there is checked as an UPDATE of it, any other as a CREATE.
    #[arg(long = "old", value_name = "PATH")]
    pub old: Vec<PathBuf>,

    /// Read the old manifests from the same PATHs at this git revision (e.g. origin/main).
    #[arg(long, value_name = "REF", conflicts_with = "old")]
    pub git_base: Option<String>,

    /// Cluster objects as `kubectl get -o yaml` prints them (repeatable): JobSets, batch Jobs
    /// and live TrainJobs. With it the JobSet gate sees them; without it the gate is offline.
    #[arg(long = "state", value_name = "PATH")]
    pub state: Vec<PathBuf>,

    /// Namespace of objects that name none.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub namespace: String,

    /// Deny an UPDATE whose allow rests on cluster state that was not given (no --state).
    #[arg(long)]
    pub strict: bool,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,

    /// Print denials and errors only.
    #[arg(long, short)]
    pub quiet: bool,

    /// Largest file read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,

    #[command(flatten)]
    pub rules: RulesArgs,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits { max_file_bytes: args.max_file_bytes, ..Limits::default() };
    let config = args.rules.rules_config();
    let state = if args.state.is_empty() { None } else { Some(state::load(&args.state, &limits, &args.namespace)?) };
    let cluster: &dyn ClusterView = match &state {
        Some(state) => &state.view,
        None => &Offline,
    };
    let ctx = Context {
        config: &config,
        cluster,
        offline: state.is_none(),
        strict: args.strict,
        default_namespace: &args.namespace,
    };
    let mut reporter =
        Reporter::new(args.output, args.quiet, BufWriter::with_capacity(64 * 1024, io::stdout().lock()), io::stderr());
    let mut write_error = None;
    let workers = parallel::workers();

    // The old set: read (in parallel) and indexed before any new file is checked.
    let mut old = OldSet::default();
    let mut add_old = |file: Result<Vec<(Key, OldEntry)>, ManifestError>| match file {
        Ok(entries) => old.extend(entries),
        Err(e) => keep_first(&mut write_error, report_manifest_error(&mut reporter, &e, false)),
    };
    if let Some(rev) = &args.git_base {
        let files = manifests::files_at_revision(rev, &args.paths, &limits)
            .with_context(|| format!("reading the old manifests at {rev}"))?;
        let prefix = format!("{rev}:");
        let work = |file: Result<RawFile, ManifestError>| {
            file.and_then(|f| f.parse(&limits)).map(|docs| old_entries(docs, &prefix, &args.namespace))
        };
        parallel::ordered_map(files, workers, WINDOW, work, &mut add_old);
    }
    let old_sources = manifests::sources(&args.old)?;
    let work =
        |source: Source| manifests::read_source(&source, &limits).map(|docs| old_entries(docs, "", &args.namespace));
    parallel::ordered_map(old_sources.into_iter(), workers, WINDOW, work, &mut add_old);

    // The new set, checked in parallel, printed in file order.
    let live = state.as_ref().map(|s| &s.live_trainjobs);
    let new_sources = manifests::sources(&args.paths)?;
    let work = |source: Source| check_file(&source, &limits, &old, live, &ctx);
    parallel::ordered_map(new_sources.into_iter(), workers, WINDOW, work, |findings| {
        for finding in findings {
            let written = match finding {
                Finding::Skipped => {
                    reporter.skipped();
                    Ok(())
                }
                Finding::Checked(checked) => reporter.checked(&checked),
                Finding::Error { message, file, line } => reporter.input_error(&message, file.as_deref(), line),
            };
            keep_first(&mut write_error, written);
        }
    });
    if let Some(e) = write_error {
        return Err(e).context("writing the report");
    }
    let counts = reporter.finish()?;
    Ok(ExitCode::from(counts.exit_code()))
}

/// Files in flight at once: enough to keep every core busy, few enough to stay small.
const WINDOW: usize = 64;

fn keep_first(slot: &mut Option<io::Error>, result: io::Result<()>) {
    if let Err(e) = result {
        slot.get_or_insert(e);
    }
}

type Out<'a> = Reporter<BufWriter<io::StdoutLock<'a>>, io::Stderr>;

/// What checking one file found, in document order.
enum Finding {
    Checked(Checked),
    Skipped,
    Error { message: String, file: Option<String>, line: Option<usize> },
}

fn check_file(
    source: &Source,
    limits: &Limits,
    old: &OldSet,
    live: Option<&HashMap<Key, Document>>,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    match manifests::read_source(source, limits) {
        Err(e) => vec![manifest_error(&e, true)],
        Ok(documents) => documents.into_iter().map(|doc| check_document(doc, old, live, ctx)).collect(),
    }
}

fn check_document(doc: Document, old: &OldSet, live: Option<&HashMap<Key, Document>>, ctx: &Context<'_>) -> Finding {
    if !state::is_trainjob(&doc) {
        return Finding::Skipped;
    }
    let key = check::key(&doc, ctx.default_namespace);
    let old_entry = if key.1.is_empty() { None } else { old.find(&key, &doc.source) };
    let live_doc = live.and_then(|l| l.get(&key));
    // The old object with the live running state, when --state has the TrainJob (docs/ci.md).
    let merged: Option<(Box<RawValue>, &str, usize)> = live_doc.map(|live| {
        let json = check::with_running_state(old_entry.map(|e| &*e.json), &live.value, &key.0);
        match old_entry {
            Some(e) => (json, e.source.as_str(), e.line),
            None => (json, live.source.as_str(), live.line),
        }
    });
    let old_object = match (&merged, old_entry) {
        (Some((json, source, line)), _) => Some(OldObject { source, line: *line, json }),
        (None, Some(e)) => Some(OldObject { source: &e.source, line: e.line, json: &e.json }),
        (None, None) => None,
    };
    let source = doc.source.clone();
    match check::check(doc, old_object, ctx) {
        Ok(checked) => Finding::Checked(checked),
        Err(failure) => {
            let file = (failure.source_name == source).then_some(source);
            Finding::Error { message: failure.to_string(), file, line: Some(failure.line) }
        }
    }
}

/// `in_change`: the file belongs to the change itself, so an annotation may point at it.
fn manifest_error(e: &ManifestError, in_change: bool) -> Finding {
    Finding::Error {
        message: e.to_string(),
        file: e.source_name().filter(|_| in_change).map(str::to_string),
        line: e.position().map(|(line, _)| line),
    }
}

fn report_manifest_error(reporter: &mut Out<'_>, e: &ManifestError, in_change: bool) -> io::Result<()> {
    match manifest_error(e, in_change) {
        Finding::Error { message, file, line } => reporter.input_error(&message, file.as_deref(), line),
        _ => Ok(()),
    }
}

/// The TrainJobs of an old file, as the JSON the rules read. `rev_prefix` (`REV:`) is cut from
/// the source to get the path inside the tree.
fn old_entries(documents: Vec<Document>, rev_prefix: &str, default_namespace: &str) -> Vec<(Key, OldEntry)> {
    documents
        .into_iter()
        .filter(state::is_trainjob)
        .filter_map(|doc| {
            let key = check::key(&doc, default_namespace);
            if key.1.is_empty() {
                return None;
            }
            let path = doc.source.strip_prefix(rev_prefix).unwrap_or(&doc.source).to_string();
            let json = check::to_request_json(doc.value, &key.0);
            Some((key, OldEntry { path, source: doc.source, line: doc.line, json }))
        })
        .collect()
}

/// The old TrainJobs, by (namespace, name).
#[derive(Default)]
struct OldSet {
    by_key: HashMap<Key, Vec<OldEntry>>,
}

/// (namespace, name).
type Key = (String, String);

struct OldEntry {
    /// The path inside the tree (without `REV:`), to prefer an old object from the same file.
    path: String,
    source: String,
    line: usize,
    json: Box<RawValue>,
}

impl OldSet {
    fn extend(&mut self, entries: Vec<(Key, OldEntry)>) {
        for (key, entry) in entries {
            self.by_key.entry(key).or_default().push(entry);
        }
    }

    /// The old object for `key`: the one in the same file if several match, else the first read.
    fn find(&self, key: &Key, new_source: &str) -> Option<&OldEntry> {
        let entries = self.by_key.get(key)?;
        entries.iter().find(|e| e.path == new_source).or_else(|| entries.first())
    }
}
