//! Command-line shells around the core: each subcommand wires the same admission and planner
//! functions to a different source of input.

pub mod args;
pub mod certs;
pub mod check;
pub(crate) mod lines;
pub(crate) mod parallel;
pub mod plan;
pub(crate) mod report;
pub mod review;
pub(crate) mod runtime_ttl;
pub mod serve;
pub mod state_file;
pub(crate) mod validate;

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "trainguard",
    version = crate::build_info::LONG_VERSION,
    about = "Admission webhook and companion controller for Kubeflow training workloads",
    long_about = "Admission webhook and companion controller for Kubeflow training workloads.\n\n\
        Start with `trainguard serve --dev` to run the webhook on localhost with self-generated \
        certificates, or `trainguard validate` to check TrainJob manifests in CI.",
    after_help = "Examples:\n  \
        trainguard validate --git-base origin/main jobs/     check a change in CI\n  \
        helm template my-chart | trainguard validate -       check rendered manifests\n  \
        trainguard serve --dev                               the webhook on localhost\n  \
        trainguard completion bash > ~/.local/share/bash-completion/completions/trainguard\n\n\
        Docs: README.md and docs/ (ci.md, operations.md, webhook.md, controller.md) in the trainguard \
        repository, also at the source of the release you run.",
    propagate_version = true
)]
pub struct Cli {
    /// Log format: human-readable text or one JSON object per line.
    #[arg(long, global = true, env = "TRAINGUARD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,

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
    /// Print a shell completion script (bash, zsh, fish) to stdout.
    #[command(after_help = "Examples:\n  \
        trainguard completion bash > ~/.local/share/bash-completion/completions/trainguard\n  \
        trainguard completion zsh > \"${fpath[1]}/_trainguard\"\n  \
        trainguard completion fish > ~/.config/fish/completions/trainguard.fish")]
    Completion(CompletionArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum, env = "TRAINGUARD_COMPLETION_SHELL")]
    pub(crate) shell: Shell,
}

/// The shells `completion` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

fn completion(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    use clap::CommandFactory as _;
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // Generated into memory: clap_complete panics on a failed write, and a reader that stops
    // early (`| head`) is no error of ours.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "trainguard", &mut script);
    write_out(&mut std::io::stdout().lock(), &script)
}

/// Writes `bytes` and flushes; a closed pipe (the reader stopped, as `head` does) ends quietly.
fn write_out(out: &mut impl std::io::Write, bytes: &[u8]) -> anyhow::Result<ExitCode> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("writing the completion script"),
    }
}

impl Cli {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.command {
            Command::Serve(args) => serve::run(*args, self.log_format),
            Command::Validate(args) => validate::run(args),
            Command::Review(args) => review::run(args),
            Command::Plan(args) => plan::run(args),
            Command::Certs(args) => certs::run(args),
            Command::Completion(args) => completion(args),
        }
    }
}
