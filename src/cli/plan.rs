//! `trainguard plan`: the dry run of the companion controller (controller spec §5). Reads objects
//! as `kubectl get -o yaml|json` prints them and prints, one JSON object a line, every action the
//! planner would take at `--now` and when it would next wake. Touches no cluster.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use k8s_openapi::jiff::Timestamp;

use crate::controller::config::PlannerArgs;
use crate::controller::objects::snapshot_from_values;
use crate::controller::plan::{PlanInput, TokenBucket, plan_all};

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Objects to plan for: YAML (multi-document) or JSON files, `kind: List` included, as
    /// `kubectl get -o yaml` prints them; directories are read for *.yaml, *.yml, *.json; `-` is
    /// stdin. Jobs, TrainJobs, JobSets, Pods, Nodes and Kueue Workloads are used; other kinds are
    /// ignored.
    #[arg(long = "snapshot", value_name = "PATH", required = true, num_args = 1..)]
    pub snapshot: Vec<PathBuf>,

    /// The instant to plan at, RFC 3339 (e.g. 2025-01-01T00:10:00Z); default: now.
    #[arg(long, value_name = "RFC3339", value_parser = parse_now)]
    pub now: Option<Timestamp>,

    #[command(flatten)]
    pub planner: PlannerArgs,
}

fn parse_now(text: &str) -> Result<Timestamp, String> {
    text.parse::<Timestamp>().map_err(|e| format!("not an RFC 3339 time ({e}); e.g. 2025-01-01T00:10:00Z"))
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let documents = reader::read_documents(&args.snapshot)?;
    let values: Vec<&serde_json::Value> = documents.iter().map(|d| &d.value).collect();
    let (snapshot, loaded) = snapshot_from_values(values.iter().copied()).context("reading the snapshot")?;
    let now = args.now.unwrap_or_else(Timestamp::now);
    let config = args.planner.plan_config();
    eprintln!(
        "trainguard plan: {} object(s) used, {} ignored, planning at {now}{}",
        loaded.used,
        loaded.ignored,
        if snapshot.nodes_listed() { "" } else { " (no nodes in the snapshot: node failures are not judged)" }
    );
    let first_seen = Default::default();
    let input = PlanInput { snapshot: &snapshot, now, config: &config, first_seen_suspended: &first_seen };
    let mut bucket = TokenBucket::per_minute(config.max_force_deletes_per_minute);
    let plan = plan_all(&input, &mut bucket);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (_, key_plan) in plan {
        for action in key_plan.actions {
            serde_json::to_writer(&mut out, &action.to_line())?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A small manifest reader for `plan` (files, directories, stdin; YAML multi-document, JSON,
/// `kind: List`). `crate::manifests` (the `validate` reader) replaces it once merged.
mod reader {
    use std::io::Read;
    use std::path::{Path, PathBuf};

    use anyhow::{Context, bail};
    use serde_json::Value;

    // Whole-cluster snapshots (`kubectl get pods -A -o yaml`) are large; the bound is against accidents.
    const MAX_FILE_BYTES: u64 = 512 << 20;

    pub struct Document {
        pub value: Value,
    }

    pub fn read_documents(paths: &[PathBuf]) -> anyhow::Result<Vec<Document>> {
        let mut documents = Vec::new();
        for path in paths {
            for file in expand(path)? {
                let text = read(&file)?;
                let name = file.display().to_string();
                for value in parse(&text).with_context(|| format!("{name}: not YAML or JSON"))? {
                    flatten(value, &mut documents);
                }
            }
        }
        Ok(documents)
    }

    fn expand(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
        if path.as_os_str() == "-" || !path.is_dir() {
            return Ok(vec![path.to_path_buf()]);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{}: cannot read the directory", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
                let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                !hidden && p.is_file() && matches!(ext, "yaml" | "yml" | "json")
            })
            .collect();
        files.sort();
        Ok(files)
    }

    fn read(path: &Path) -> anyhow::Result<String> {
        let mut bytes = Vec::new();
        if path.as_os_str() == "-" {
            std::io::stdin().take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).context("reading stdin")?;
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
            file.take(MAX_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("{}: cannot read", path.display()))?;
        }
        if bytes.len() as u64 > MAX_FILE_BYTES {
            bail!("{}: larger than {} MiB", path.display(), MAX_FILE_BYTES >> 20);
        }
        String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Vec<Value>> {
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(text).into_iter::<Value>().collect();
            return Ok(values?);
        }
        let values: Vec<Value> = serde_saphyr::from_multiple(text)?;
        Ok(values.into_iter().filter(|v| !v.is_null()).collect())
    }

    /// `kind: List` (and any `*List` with `items`, as kubectl treats them) becomes its items.
    fn flatten(value: Value, out: &mut Vec<Document>) {
        let is_list = value.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
            && value.get("items").is_some_and(Value::is_array);
        match value {
            Value::Object(mut map) if is_list => {
                if let Some(Value::Array(items)) = map.remove("items") {
                    for item in items {
                        flatten(item, out);
                    }
                }
            }
            Value::Array(items) => items.into_iter().for_each(|i| flatten(i, out)),
            other => out.push(Document { value: other }),
        }
    }
}
