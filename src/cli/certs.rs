//! `trainguard certs` — not built yet.

use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct CertsArgs {}

pub fn run(_args: CertsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("trainguard certs is not implemented yet")
}
