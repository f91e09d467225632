//! `trainguard validate` — not built yet.

use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct ValidateArgs {}

pub fn run(_args: ValidateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("trainguard validate is not implemented yet")
}
