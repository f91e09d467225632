//! `trainguard plan`: the dry run of the companion controller (docs/controller.md (`trainguard plan`)). Reads objects
//! as `kubectl get -o yaml|json` prints them and prints, one JSON object a line, every action the
//! planner would take at `--now` and when it would next wake. Touches no cluster.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use k8s_openapi::jiff::Timestamp;

use crate::controller::config::PlannerArgs;
use crate::manifests::{Limits, read_documents};
use trainguard_core::planner::objects::SnapshotBuilder;
use trainguard_core::planner::{PlanInput, TokenBucket, plan_all};

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

/// Whole-cluster snapshots (`kubectl get pods -A -o yaml`) are large; the bound is against accidents.
const MAX_SNAPSHOT_FILE_BYTES: u64 = 512 << 20;

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits { max_file_bytes: MAX_SNAPSHOT_FILE_BYTES, ..Limits::default() };
    let mut builder = SnapshotBuilder::default();
    // The reader's errors carry their cause in the message already: no chain.
    let documents = read_documents(&args.snapshot, &limits).map_err(|e| anyhow::anyhow!("{e}"))?;
    for document in documents {
        builder.add(&document.value).with_context(|| format!("{}:{}", document.source, document.line))?;
    }
    let (snapshot, loaded) = builder.finish();
    let now = args.now.unwrap_or_else(Timestamp::now);
    let config = args.planner.plan_config();
    for warning in args.planner.deprecations() {
        eprintln!("trainguard plan: warning: {warning}");
    }
    eprintln!(
        "trainguard plan: {} object(s) used, {} ignored, planning at {now} in {} mode{}{}",
        loaded.used,
        loaded.ignored,
        config.mode.as_str(),
        match config.mode {
            crate::controller::config::Mode::Report => " (writes shown as would-…; --controller-mode=act plans them)",
            crate::controller::config::Mode::Act => "",
        },
        if snapshot.nodes_listed() { "" } else { " (no nodes in the snapshot: node failures are not judged)" }
    );
    let first_seen = Default::default();
    let input = PlanInput {
        snapshot: &snapshot,
        now,
        config: &config,
        first_seen_suspended: &first_seen,
        first_failed: &Default::default(),
    };
    let mut bucket = TokenBucket::per_minute(config.max_force_deletes_per_minute);
    let plan = plan_all(&input, &mut bucket);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (_, key_plan) in plan {
        for action in key_plan.actions {
            serde_json::to_writer(&mut out, &action.to_line(config.mode))?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
