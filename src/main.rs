use std::process::ExitCode;

use clap::Parser;
use trainguard::cli::Cli;

// glibc's malloc was ~9 % of a request's CPU under load (many small, short-lived allocations
// across hyper, rustls and the decision); mimalloc halves that (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
