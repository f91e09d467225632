use std::process::ExitCode;

use clap::Parser;
use trainguard::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("trainguard: {err:#}");
            ExitCode::from(2)
        }
    }
}
