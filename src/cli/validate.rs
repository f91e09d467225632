//! `trainguard validate` — the webhook's validating rules over TrainJob manifests, offline, for
//! CI.
//!
//! Memory stays flat in the number of files: files are streamed, and with `--git-base` each new
//! file is read together with the same path at the base revision, so an object that stays in its
//! file is matched and dropped at once. Only objects that match nothing in their own file (moved
//! between files, created, or left behind in an old file) are held until the end.

use std::collections::HashMap;
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::value::RawValue;

use super::args::{RulesArgs, TrainerVersionArg};
use super::check::{self, Checked, Context, NewObject, OldObject};
use super::lines;
use super::parallel;
use super::report::{OutputFormat, Reporter};
use super::state_file;
use crate::cluster::{ClusterView, Offline};
use crate::manifests::{self, Document, GitBlob, Limits, ManifestError, RawFile, Revision, RevisionFiles, Source};
use trainguard_core::model::TrainJobView;
use trainguard_core::trainer::TrainerVersion;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    trainguard validate jobs/                                  every TrainJob under jobs/ as a CREATE\n  \
    trainguard validate --git-base origin/main jobs/           as UPDATEs of the same objects on main\n  \
    trainguard validate --old base/ -o github jobs/            annotations on a GitHub pull request\n  \
    trainguard validate -o sarif jobs/ > trainguard.sarif      for code scanning\n  \
    helm template RELEASE CHART | trainguard validate -        rendered manifests on stdin\n\n\
    Exit status: 0 all allowed (warnings too), 1 any TrainJob denied (or, with --strict, none \
    checked), 2 unusable input; every input is still checked and reported.\n\
    Docs: docs/ci.md in the trainguard repository (what offline verdicts mean, CI setups).")]
pub struct ValidateArgs {
    /// Manifests to check: files, directories (searched for *.yaml, *.yml, *.json) or - for stdin.
    #[arg(value_name = "PATH", required = true)]
    pub(crate) paths: Vec<PathBuf>,

    /// Manifests before the change (repeatable). A TrainJob with the same namespace and name
    /// there is checked as an UPDATE of it, any other as a CREATE.
    #[arg(long = "old", value_name = "PATH")]
    pub(crate) old: Vec<PathBuf>,

    /// Read the old manifests from the same PATHs at this git revision (e.g. origin/main).
    #[arg(long, value_name = "REF", conflicts_with = "old")]
    pub(crate) git_base: Option<String>,

    /// Cluster objects as `kubectl get -o yaml` prints them (repeatable): JobSets, batch Jobs
    /// and live TrainJobs. With it the JobSet gate sees them; without it the gate is offline.
    #[arg(long = "state", value_name = "PATH")]
    pub(crate) state: Vec<PathBuf>,

    /// Namespace of objects that name none.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub namespace: String,

    /// Deny an UPDATE whose allow rests on cluster state that was not given (no --state).
    #[arg(long)]
    pub(crate) strict: bool,

    /// Pass objects that only look like TrainJobs (kind within two edits of TrainJob, or kind
    /// TrainJob with another apiVersion) with a warning. Without it each is an input error: a
    /// typo there leaves the job unchecked, and the cluster has no such kind.
    #[arg(long, env = "TRAINGUARD_ALLOW_LOOK_ALIKES", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) allow_look_alikes: bool,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub(crate) output: OutputFormat,

    /// The SARIF log's `informationUri` (the tool's repository) and the base of its rules'
    /// `helpUri`s [default: the repository the binary was built from, when the build named it
    /// with TRAINGUARD_REPOSITORY_URL; else none]. Empty: none.
    #[arg(long, env = "TRAINGUARD_SARIF_INFORMATION_URI", value_name = "URI")]
    pub(crate) sarif_information_uri: Option<String>,

    /// Print denials and errors only.
    #[arg(long, short)]
    pub(crate) quiet: bool,

    /// Largest file read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_FILE_BYTES)]
    pub(crate) max_file_bytes: u64,

    #[command(flatten)]
    pub(crate) schema: SchemaArgs,

    #[command(flatten)]
    pub rules: RulesArgs,
}

/// The TrainJob schema check of `validate` and `review` (the webhook leaves unknown fields to the
/// API server).
#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    /// Kubeflow Trainer release whose TrainJob schema the manifests must fit: unknown,
    /// misplaced and other-release fields under spec, and wrongly typed values, are denied.
    #[arg(long, env = "TRAINGUARD_TRAINER_VERSION", value_enum, value_name = "VERSION", default_value_t)]
    pub(crate) trainer_version: TrainerVersionArg,

    /// `off`: skip the schema check (unknown fields pass, as the webhook lets them).
    #[arg(long, env = "TRAINGUARD_SCHEMA", value_enum, value_name = "on|off", default_value_t)]
    pub(crate) schema: SchemaCheck,
}

impl SchemaArgs {
    /// The release to check against, or `None` with `--schema off`.
    pub(crate) fn version(&self) -> Option<TrainerVersion> {
        (self.schema == SchemaCheck::On).then_some(self.trainer_version.into())
    }
}

/// `--schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum SchemaCheck {
    #[default]
    On,
    Off,
}

pub(crate) fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits { max_file_bytes: args.max_file_bytes, ..Limits::default() };
    let config = args.rules.rules_config();
    let (state, state_error) = load_state(&args, &limits);
    let ctx = Context {
        config: &config,
        cluster: state.as_ref().map_or(&Offline as &dyn ClusterView, |s| &s.view),
        offline: state.is_none(),
        strict: args.strict,
        default_namespace: &args.namespace,
        schema: args.schema.version(),
    };
    let live = state.as_ref().map(|s| &s.live_trainjobs);
    let information_uri = args.sarif_information_uri.as_deref().unwrap_or(BUILT_FROM_REPOSITORY);
    let mut out = Output::new(
        Reporter::new(args.output, args.quiet, BufWriter::with_capacity(64 * 1024, io::stdout().lock()), io::stderr())
            .with_information_uri(information_uri),
    );
    if let Some(message) = state_error {
        out.input_error(&message);
    }
    // A path that cannot be used is one record; the other paths are still checked.
    let (new_sources, unusable) = sources_of(&args.paths);
    for e in &unusable {
        out.emit(manifest_error(e, true));
    }
    let rev_prefix = args.git_base.as_ref().map(|rev| format!("{rev}:")).unwrap_or_default();
    let parse_old =
        |file: Result<Vec<Document>, ManifestError>| file.map(|docs| old_entries(docs, &rev_prefix, &args.namespace));
    let (earlier, mut paired_files, paired) = read_old_side(&args, &limits, &new_sources, &parse_old, &mut out);

    // Old objects left unmatched in the old version of a new file: known only as files go by.
    let mut later = OldSet::default();
    // New TrainJobs to match against `later` once every file is read.
    let mut pending: Vec<NewObject> = Vec::new();
    // The new files, checked in parallel and printed in order.
    let files = FileContext {
        limits: &limits,
        earlier: &earlier,
        later_possible: paired_files.is_some(),
        live,
        ctx: &ctx,
        parse_old: &parse_old,
        look_alikes_fail: !args.allow_look_alikes,
    };
    let items = new_sources.into_iter().zip(paired).map(|(source, is_paired)| {
        let old = if is_paired { paired_files.as_mut().and_then(Iterator::next) } else { None };
        (source, old)
    });
    let work = |(source, old): (Source, Option<Result<RawFile, ManifestError>>)| files.check_file(&source, old);
    parallel::ordered_map(items, parallel::workers(), WINDOW, work, |outcome| {
        outcome.findings.into_iter().for_each(|finding| out.emit(finding));
        later.extend(outcome.orphans);
        pending.extend(outcome.pending);
    });
    // A git failure at the end of the stream.
    for rest in paired_files.into_iter().flatten() {
        if let Err(e) = rest {
            out.emit(old_side_warning(&e));
        }
    }
    for new in pending {
        let old = later.find(&(new.namespace.clone(), new.name.clone()), &new.source);
        check_against(new, old, live, &ctx).into_iter().for_each(|finding| out.emit(finding));
    }
    out.finish(args.strict)
}

/// `--state`, loaded; when it cannot be, the run is checked offline instead, and the error (to
/// report once the reporter exists) alone makes it exit 2.
fn load_state(args: &ValidateArgs, limits: &Limits) -> (Option<state_file::State>, Option<String>) {
    if args.state.is_empty() {
        return (None, None);
    }
    match state_file::load(&args.state, limits, &args.namespace) {
        Ok(state) => (Some(state), None),
        Err(e) => (None, Some(format!("{e:#} (checked without cluster state)"))),
    }
}

/// The old side of every change (`--git-base`, `--old`): the old objects from files no new file
/// pairs with, read before any new file; the base version of each paired new file, to stream
/// alongside the new files in the same order; and which new files are paired.
fn read_old_side(
    args: &ValidateArgs,
    limits: &Limits,
    new_sources: &[Source],
    parse_old: &ParseOld<'_>,
    out: &mut Output<'_>,
) -> (OldSet, Option<RevisionFiles>, Vec<bool>) {
    let mut earlier = OldSet::default();
    let mut add_earlier = |file: Result<Vec<(Key, OldEntry)>, ManifestError>, out: &mut Output<'_>| match file {
        Ok(entries) => earlier.extend(entries),
        Err(e) => out.emit(old_side_warning(&e)),
    };
    let workers = parallel::workers();
    let mut paired_files = None;
    let mut base_error = None;
    let mut paired = vec![false; new_sources.len()];
    if let Some(rev) = &args.git_base {
        let base = Revision::resolve(rev).and_then(|revision| {
            let blobs = revision.list(&args.paths)?;
            let (order, unpaired_count) = pair_with_base(&revision, blobs, new_sources, &mut paired);
            Ok((revision.read(order, limits)?, unpaired_count))
        });
        match base {
            Ok((mut files, unpaired_count)) => {
                let work = |file: Result<RawFile, ManifestError>| parse_old(file.and_then(|f| f.parse(limits)));
                parallel::ordered_map(files.by_ref().take(unpaired_count), workers, WINDOW, work, |file| {
                    add_earlier(file, out)
                });
                paired_files = Some(files);
            }
            Err(e) => {
                // No old side at all: an error (exit 2), and every object is checked as a CREATE.
                paired.iter_mut().for_each(|p| *p = false);
                base_error =
                    Some(format!("reading the old manifests at {rev}: {e} (every TrainJob checked as a CREATE)"));
            }
        }
    }
    let (old_sources, unusable_old) = sources_of(&args.old);
    for e in unusable_old {
        add_earlier(Err(e), out);
    }
    let work = |source: Source| parse_old(manifests::read_source(&source, limits));
    parallel::ordered_map(old_sources.into_iter(), workers, WINDOW, work, |file| add_earlier(file, out));
    if let Some(message) = base_error {
        out.input_error(&message);
    }
    (earlier, paired_files, paired)
}

/// The reporter, and the first error writing to it: the run goes on (every finding is still
/// counted) and fails at the end.
struct Output<'a> {
    reporter: Reporter<BufWriter<io::StdoutLock<'a>>, io::Stderr>,
    write_error: Option<io::Error>,
}

impl<'a> Output<'a> {
    fn new(reporter: Reporter<BufWriter<io::StdoutLock<'a>>, io::Stderr>) -> Self {
        Output { reporter, write_error: None }
    }

    fn emit(&mut self, finding: DocumentResult) {
        let reporter = &mut self.reporter;
        let result = match finding {
            DocumentResult::Skipped => {
                reporter.skipped();
                Ok(())
            }
            DocumentResult::Checked(checked) => reporter.checked(&checked),
            DocumentResult::RuntimeWarning { message, file, line } => {
                reporter.skipped();
                reporter.runtime_warning(&message, &file, line)
            }
            DocumentResult::Error { message, file, line } => reporter.input_error(&message, file.as_deref(), line),
            DocumentResult::Warning { message, file, line } => reporter.input_warning(&message, file.as_deref(), line),
        };
        self.keep_first(result);
    }

    fn input_error(&mut self, message: &str) {
        let result = self.reporter.input_error(message, None, None);
        self.keep_first(result);
    }

    fn keep_first(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.write_error.get_or_insert(e);
        }
    }

    fn finish(self, strict: bool) -> anyhow::Result<ExitCode> {
        if let Some(e) = self.write_error {
            return Err(e).context("writing the report");
        }
        let counts = self.reporter.finish()?;
        Ok(ExitCode::from(counts.exit_code(strict)))
    }
}

/// The order to read the base in: files no new file pairs with (deleted, renamed) first, then
/// the base version of each new file, in the order the new files are checked. Marks `paired`
/// and returns the order and how many unpaired files lead it.
fn pair_with_base(
    revision: &Revision,
    blobs: Vec<GitBlob>,
    new_sources: &[Source],
    paired: &mut [bool],
) -> (Vec<GitBlob>, usize) {
    // An index into the listing, then the blobs moved out: the listing is never copied.
    let mut pairs = Vec::new();
    {
        let by_path: HashMap<&str, usize> = blobs.iter().enumerate().map(|(i, b)| (b.path.as_str(), i)).collect();
        let mut taken = vec![false; blobs.len()];
        for (source, is_paired) in new_sources.iter().zip(paired.iter_mut()) {
            if let Source::File(path) = source
                && let Some(&at) = by_path.get(revision.path_of(path).as_str())
                && !std::mem::replace(&mut taken[at], true)
            {
                pairs.push(at);
                *is_paired = true;
            }
        }
    }
    let mut blobs: Vec<Option<GitBlob>> = blobs.into_iter().map(Some).collect();
    let paired_blobs: Vec<GitBlob> = pairs.into_iter().filter_map(|at| blobs[at].take()).collect();
    let mut order: Vec<GitBlob> = blobs.into_iter().flatten().collect();
    let unpaired = order.len();
    order.extend(paired_blobs);
    (order, unpaired)
}

/// The repository the binary was built from (release builds set `TRAINGUARD_REPOSITORY_URL`,
/// e.g. `https://github.com/OWNER/trainguard`); empty when the build did not say.
const BUILT_FROM_REPOSITORY: &str = match option_env!("TRAINGUARD_REPOSITORY_URL") {
    Some(url) => url,
    None => "",
};

/// Files in flight at once: enough to keep every core busy, few enough to stay small.
const WINDOW: usize = 64;

/// The sources each path stands for, and the paths that cannot be used (missing, unreadable,
/// stdin given twice): each of those is reported on its own, the rest still read.
fn sources_of(paths: &[PathBuf]) -> (Vec<Source>, Vec<ManifestError>) {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    let mut stdin_seen = false;
    for path in paths {
        if path.as_os_str() == "-" && std::mem::replace(&mut stdin_seen, true) {
            errors.push(ManifestError::StdinTwice);
            continue;
        }
        match manifests::sources(std::slice::from_ref(path)) {
            Ok(found) => sources.extend(found),
            Err(e) => errors.push(e),
        }
    }
    (sources, errors)
}

/// What checking found, in document order.
enum DocumentResult {
    Checked(Box<Checked>),
    Skipped,
    /// A training runtime `validate` does not judge, with a warning about it (`runtime_ttl`).
    RuntimeWarning {
        message: String,
        file: String,
        line: usize,
    },
    Error {
        message: String,
        file: Option<String>,
        line: Option<usize>,
    },
    /// Used in part (an old side that cannot be read), or a near miss that was not checked.
    Warning {
        message: String,
        file: Option<String>,
        line: Option<usize>,
    },
}

/// What one new file (and the same path at the base) gave.
struct FileOutcome {
    findings: Vec<DocumentResult>,
    /// Old TrainJobs of the paired old file that no new object of the file matched.
    orphans: Vec<(Key, OldEntry)>,
    /// New TrainJobs that matched nothing yet.
    pending: Vec<NewObject>,
}

type ParseOld<'a> =
    dyn Fn(Result<Vec<Document>, ManifestError>) -> Result<Vec<(Key, OldEntry)>, ManifestError> + Sync + 'a;

/// What checking a new file needs; shared by the worker threads.
struct FileContext<'a> {
    limits: &'a Limits,
    earlier: &'a OldSet,
    /// Old objects may still turn up in later files (`--git-base`): unmatched ones wait.
    later_possible: bool,
    live: Option<&'a HashMap<Key, Document>>,
    ctx: &'a Context<'a>,
    parse_old: &'a ParseOld<'a>,
    /// A near miss (apiVersion or kind) is an input error, not a warning.
    look_alikes_fail: bool,
}

impl FileContext<'_> {
    fn check_file(&self, source: &Source, old_file: Option<Result<RawFile, ManifestError>>) -> FileOutcome {
        let mut outcome = FileOutcome { findings: Vec::new(), orphans: Vec::new(), pending: Vec::new() };
        let mut local = match old_file.map(|f| (self.parse_old)(f.and_then(|f| f.parse(self.limits)))) {
            None => Vec::new(),
            Some(Ok(entries)) => entries,
            Some(Err(e)) => {
                outcome.findings.push(old_side_warning(&e));
                Vec::new()
            }
        };
        let documents = match manifests::read_source(source, self.limits) {
            Ok(documents) => documents,
            Err(e) => {
                let mut finding = manifest_error(&e, true);
                if let (DocumentResult::Error { message, .. }, Source::File(path)) = (&mut finding, source)
                    && is_syntax_error(&e)
                    && looks_like_a_template(path)
                {
                    message.push_str(HELM_HINT);
                }
                outcome.findings.push(finding);
                outcome.orphans = local;
                return outcome;
            }
        };
        for doc in documents {
            if !state_file::is_trainjob(&doc) {
                let version = self.ctx.schema.unwrap_or_default();
                let near = near_miss(&doc);
                outcome.findings.push(match (super::runtime_ttl::warning(&doc, version), near) {
                    (Some(message), _) => DocumentResult::RuntimeWarning { message, file: doc.source, line: doc.line },
                    (None, Some(message)) if self.look_alikes_fail => DocumentResult::Error {
                        message: format!(
                            "{}:{}: {message}; fix it, or pass --allow-look-alikes if the file holds a look-alike \
                             on purpose",
                            doc.source, doc.line
                        ),
                        file: Some(doc.source.clone()),
                        line: Some(doc.line),
                    },
                    (None, Some(message)) => DocumentResult::Warning {
                        message: format!("{}:{}: {message}", doc.source, doc.line),
                        file: Some(doc.source.clone()),
                        line: Some(doc.line),
                    },
                    (None, None) => DocumentResult::Skipped,
                });
                continue;
            }
            let new = NewObject::from_document(doc, self.ctx.default_namespace);
            let key = (new.namespace.clone(), new.name.clone());
            // Objects named by generateName only are always created.
            let same_file = local.iter().position(|(k, _)| *k == key && !new.name.is_empty());
            let findings = if let Some(at) = same_file {
                let (_, entry) = local.remove(at);
                check_against(new, Some(&entry), self.live, self.ctx)
            } else if let Some(entry) = self.earlier.find(&key, &new.source).filter(|_| !new.name.is_empty()) {
                check_against(new, Some(entry), self.live, self.ctx)
            } else if self.later_possible && !new.name.is_empty() {
                outcome.pending.push(new);
                continue;
            } else {
                check_against(new, None, self.live, self.ctx)
            };
            outcome.findings.extend(findings);
        }
        outcome.orphans = local;
        outcome
    }
}

/// Checks `new` as an UPDATE of `old` (with the live running state from `--state`, see
/// docs/ci.md), or as a CREATE. An old object that does not decode is a warning, and `new` is
/// then checked as a CREATE.
fn check_against(
    new: NewObject,
    old: Option<&OldEntry>,
    live: Option<&HashMap<Key, Document>>,
    ctx: &Context<'_>,
) -> Vec<DocumentResult> {
    if let Some(entry) = old
        && let Err(e) = TrainJobView::decode(&entry.json)
    {
        let has_live = live.is_some_and(|l| l.contains_key(&(new.namespace.clone(), new.name.clone())));
        let instead = if has_live { "checked against the live TrainJob only" } else { "checked as a CREATE" };
        let warning = DocumentResult::Warning {
            message: format!(
                "{}:{}: old TrainJob {}/{} does not decode: {e} (old side unusable: {instead})",
                entry.source, entry.line, new.namespace, new.name
            ),
            file: None,
            line: None,
        };
        return vec![warning, check_one(new, None, live, ctx)];
    }
    vec![check_one(new, old, live, ctx)]
}

fn check_one(
    new: NewObject,
    old: Option<&OldEntry>,
    live: Option<&HashMap<Key, Document>>,
    ctx: &Context<'_>,
) -> DocumentResult {
    let live_doc = live.and_then(|l| l.get(&(new.namespace.clone(), new.name.clone())));
    let merged: Option<(Box<RawValue>, &str, usize)> = live_doc.map(|live| {
        let json = check::with_running_state(old.map(|e| &*e.json), &live.value, &new.namespace);
        match old {
            Some(e) => (json, e.source.as_str(), e.line),
            None => (json, live.source.as_str(), live.line),
        }
    });
    let old_object = match (&merged, old) {
        (Some((json, source, line)), _) => Some(OldObject { source, line: *line, json }),
        (None, Some(e)) => Some(OldObject { source: &e.source, line: e.line, json: &e.json }),
        (None, None) => None,
    };
    let source = new.source.clone();
    match check::check(new, old_object, ctx) {
        Ok(mut checked) => {
            locate_fields(&mut checked);
            DocumentResult::Checked(Box::new(checked))
        }
        Err(failure) => {
            let file = (failure.source_name == source).then_some(source);
            DocumentResult::Error { message: failure.to_string(), file, line: Some(failure.line) }
        }
    }
}

/// What a file with Go template syntax gets after its YAML error.
const HELM_HINT: &str = "; the file holds template syntax ({{ … }}): render it first, e.g. \
     helm template RELEASE CHART | trainguard validate -";

fn is_syntax_error(e: &ManifestError) -> bool {
    matches!(e, ManifestError::Yaml { .. } | ManifestError::Json { .. })
}

/// Whether the file holds `{{` (a Helm or other Go template), looking at its first 64 KiB.
fn looks_like_a_template(path: &std::path::Path) -> bool {
    use std::io::Read as _;
    let mut head = Vec::new();
    std::fs::File::open(path).and_then(|f| f.take(64 * 1024).read_to_end(&mut head)).is_ok()
        && head.windows(2).any(|w| w == b"{{")
}

/// The TrainJob kind and apiVersion `validate` checks.
const TRAINJOB_KIND: &str = "TrainJob";
const TRAINJOB_API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";

/// For an object that is not a TrainJob but looks like one (its kind is at most two edits from
/// `TrainJob`, case aside): what is wrong with its apiVersion and kind, with "did you mean".
fn near_miss(doc: &Document) -> Option<String> {
    let kind = doc.kind();
    let close =
        kind == TRAINJOB_KIND || trainguard_core::schema::edit_distance(&kind.to_ascii_lowercase(), "trainjob") <= 2;
    if !close || kind.is_empty() {
        return None;
    }
    let mut wrong = Vec::new();
    if doc.api_version() != TRAINJOB_API_VERSION {
        wrong.push(format!("apiVersion {:?} (did you mean apiVersion: {TRAINJOB_API_VERSION}?)", doc.api_version()));
    }
    if kind != TRAINJOB_KIND {
        wrong.push(format!("kind {kind:?} (did you mean kind: {TRAINJOB_KIND}?)"));
    }
    Some(format!("not checked: looks like a TrainJob but has {}", wrong.join(" and ")))
}

/// An old side that cannot be read: a warning, since the new objects are still checked (as
/// CREATEs where their old version was in it). Annotations never point at old files.
fn old_side_warning(e: &ManifestError) -> DocumentResult {
    DocumentResult::Warning {
        message: format!("{e} (old side unusable: TrainJobs whose old version it held are checked as CREATEs)"),
        file: None,
        line: None,
    }
}

/// Finds the line of each denied field in the manifest file (read again: denials are few, and
/// the file was not kept). Stdin cannot be read twice: its fields stay on the object's line.
fn locate_fields(checked: &mut Checked) {
    if checked.field_errors().is_empty() || checked.source == "-" {
        return;
    }
    let Ok(text) = std::fs::read_to_string(&checked.source) else { return };
    let lines = checked
        .field_errors()
        .iter()
        .filter_map(|e| lines::field_line(&text, checked.line, &e.path).map(|line| (e.path.clone(), line)))
        .collect();
    checked.field_lines = lines;
}

/// `in_change`: the file belongs to the change itself, so an annotation may point at it.
fn manifest_error(e: &ManifestError, in_change: bool) -> DocumentResult {
    DocumentResult::Error {
        message: e.to_string(),
        file: e.source_name().filter(|_| in_change).map(str::to_string),
        line: e.position().map(|(line, _)| line),
    }
}

/// The TrainJobs of an old file, as the JSON the rules read. `rev_prefix` (`REV:`) is cut from
/// the source to get the path inside the tree.
fn old_entries(documents: Vec<Document>, rev_prefix: &str, default_namespace: &str) -> Vec<(Key, OldEntry)> {
    documents
        .into_iter()
        .filter(state_file::is_trainjob)
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

/// (namespace, name).
type Key = (String, String);

/// Old TrainJobs by (namespace, name).
#[derive(Default)]
struct OldSet {
    by_key: HashMap<Key, Vec<OldEntry>>,
}

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

    /// The old object for `key`: the one from the same file if several match, else the first read.
    fn find(&self, key: &Key, new_source: &str) -> Option<&OldEntry> {
        let entries = self.by_key.get(key)?;
        entries.iter().find(|e| e.path == new_source).or_else(|| entries.first())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(api_version: &str, kind: &str) -> Document {
        let value = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "j"}});
        Document { source: "f.yaml".into(), line: 3, value }
    }

    #[test]
    fn near_misses_say_what_was_meant() {
        let v = TRAINJOB_API_VERSION;
        // (apiVersion, kind, warning contains; None: skipped silently)
        let cases: &[(&str, &str, Option<&str>)] = &[
            (v, "TrainJob", None), // a TrainJob: checked, never a near miss
            (
                "trainer.kubeflow.org/v1",
                "TrainJob",
                Some(
                    "apiVersion \"trainer.kubeflow.org/v1\" (did you mean apiVersion: trainer.kubeflow.org/v1alpha1?)",
                ),
            ),
            ("trainer.kubeflow.org/v1alpha1", "Trainjob", Some("kind \"Trainjob\" (did you mean kind: TrainJob?)")),
            ("trainer.kubeflow.org/v1alpha1", "TrainJobs", Some("did you mean kind: TrainJob?")),
            (
                "kubeflow.org/v1alpha1",
                "TranJob",
                Some(
                    "apiVersion \"kubeflow.org/v1alpha1\" (did you mean apiVersion: trainer.kubeflow.org/v1alpha1?) and kind",
                ),
            ),
            ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", None),
            ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", None),
            ("kubeflow.org/v1", "PyTorchJob", None),
            ("v1", "ConfigMap", None),
            ("v1", "", None),
        ];
        for (api_version, kind, want) in cases {
            let d = doc(api_version, kind);
            let got = if state_file::is_trainjob(&d) { None } else { near_miss(&d) };
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.contains(w), "{api_version} {kind}: {g}"),
                _ => panic!("{api_version} {kind}: got {got:?}, want {want:?}"),
            }
        }
    }
}
