//! `trainguard review` — answers one AdmissionReview from a file or stdin through the same
//! function `serve` calls ([`admission::review`]), and prints the response body: the server's,
//! byte for byte. No schema check: in a cluster the API server has applied the TrainJob schema
//! before any webhook sees the object (`validate` checks it on manifests). For debugging a
//! reported denial, and for tests.

use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};

use super::state_file;

use super::args::RulesArgs;
use crate::cluster::{ClusterView, Offline};
use crate::manifests::Limits;
use trainguard_core::admission::{self, Endpoint};

/// Largest request read, as the server's default body limit (docs/webhook.md §1).
pub(crate) const DEFAULT_MAX_BODY_BYTES: u64 = 7 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Webhook {
    /// The validating webhook (`/validate-trainer-kubeflow-org-v1alpha1-trainjob`).
    #[default]
    Validate,
    /// The mutating (defaulting) webhook (`/mutate-trainer-kubeflow-org-v1alpha1-trainjob`).
    Mutate,
}

#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 allowed, 1 denied, 2 not an AdmissionReview trainguard can answer \
    (the server would answer HTTP 4xx).")]
pub struct ReviewArgs {
    /// The AdmissionReview request (JSON), or - for stdin.
    #[arg(value_name = "FILE", default_value = "-")]
    pub(crate) file: PathBuf,

    /// Which webhook answers.
    #[arg(long, value_enum, default_value_t)]
    pub webhook: Webhook,

    /// Cluster objects as `kubectl get -o yaml` prints them (repeatable): JobSets and batch Jobs
    /// for the JobSet gate. Without it the gate is offline, as `serve --offline`. (Live
    /// TrainJobs are not needed: the request's oldObject is the live object.)
    #[arg(long = "state", value_name = "PATH")]
    pub(crate) state: Vec<PathBuf>,

    /// Largest request read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: u64,

    #[command(flatten)]
    pub rules: RulesArgs,
}

pub fn run(args: ReviewArgs) -> anyhow::Result<ExitCode> {
    let config = args.rules.rules_config();
    let state =
        if args.state.is_empty() { None } else { Some(state_file::load(&args.state, &Limits::default(), "default")?) };
    let cluster: &dyn ClusterView = match &state {
        Some(state) => &state.view,
        None => &Offline,
    };
    let body = read_body(&args.file, args.max_body_bytes)?;
    let endpoint = match args.webhook {
        Webhook::Validate => Endpoint::Validate,
        Webhook::Mutate => Endpoint::Mutate,
    };
    let reviewed = admission::review(endpoint, &body, &config, cluster).context("cannot answer this request")?;
    let mut out = io::stdout().lock();
    out.write_all(&reviewed.body)?;
    if out.is_terminal() {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(ExitCode::from(if reviewed.decision.allowed() { 0 } else { 1 }))
}

fn read_body(file: &PathBuf, limit: u64) -> anyhow::Result<Vec<u8>> {
    let name = file.display();
    let reader: Box<dyn Read> = if file.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(file).with_context(|| format!("{name}: cannot read"))?)
    };
    let mut body = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut body).with_context(|| format!("{name}: cannot read"))?;
    anyhow::ensure!(
        body.len() as u64 <= limit,
        "{name}: request is larger than {limit} bytes (--max-body-bytes; the server answers 413)"
    );
    Ok(body)
}
