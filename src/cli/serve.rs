//! `trainguard serve` — being built.

use std::process::ExitCode;

use clap::Args;

use crate::config::LogFormat;

#[derive(Debug, Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs, _log_format: LogFormat) -> anyhow::Result<ExitCode> {
    anyhow::bail!("trainguard serve is not implemented yet")
}
