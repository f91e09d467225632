//! `trainguard plan` — not built yet.

use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct PlanArgs {}

pub fn run(_args: PlanArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("trainguard plan is not implemented yet")
}
