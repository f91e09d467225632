//! Command-line shells around the core: each subcommand wires the same admission and planner
//! functions to a different source of input.

pub mod certs;
pub mod check;
pub mod parallel;
pub mod plan;
pub mod report;
pub mod review;
pub mod runtime_ttl;
pub mod serve;
pub mod state;
pub mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "trainguard",
    version = crate::build_info::LONG_VERSION,
    about = "Admission webhook and companion controller for Kubeflow training workloads",
    long_about = "Admission webhook and companion controller for Kubeflow training workloads.\n\n\
        Start with `trainguard serve --dev` to run the webhook on localhost with self-generated \
        certificates, or `trainguard validate` to check TrainJob manifests in CI.",
    propagate_version = true
)]
pub struct Cli {
    /// Log format: human-readable text or one JSON object per line.
    #[arg(long, global = true, env = "TRAINGUARD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTPS admission webhook (and, in a cluster, the companion controller).
    Serve(Box<serve::ServeArgs>),
    /// Check TrainJob manifests offline with the webhook's rules (for CI).
    Validate(validate::ValidateArgs),
    /// Answer one AdmissionReview from a file or stdin, exactly as `serve` would.
    Review(review::ReviewArgs),
    /// Print what the companion controller would do for a snapshot of objects.
    Plan(plan::PlanArgs),
    /// Generate a CA and serving certificate for the webhook Service.
    Certs(certs::CertsArgs),
}

impl Cli {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.command {
            Command::Serve(args) => serve::run(*args, self.log_format),
            Command::Validate(args) => validate::run(args),
            Command::Review(args) => review::run(args),
            Command::Plan(args) => plan::run(args),
            Command::Certs(args) => certs::run(args),
        }
    }
}
