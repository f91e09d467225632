//! `trainguard review` — not built yet.

use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct ReviewArgs {}

pub fn run(_args: ReviewArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("trainguard review is not implemented yet")
}
