//! Writes the `rules:` of every Role and ClusterRole under deploy/ (the kustomize files and the Helm
//! chart) and the binding after each from the API-call table in src/rbac.rs. Run `cargo run
//! --example gen_rbac` after changing the table; commit the files. `tests/cli/rbac.rs` fails while
//! they differ from what this writes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a generator: a panic is its failure report")]

use trainguard_binary_support::rbac;
use trainguard_test_support::repo_root;

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = repo_root();
    let files = rbac::files(root);
    let mut written = 0;
    for file in &files {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        match rbac::regenerate(&text) {
            Ok((generated, _)) if generated == text => {}
            Ok((generated, _)) => {
                std::fs::write(&path, generated).unwrap();
                println!("wrote {}", file.display());
                written += 1;
            }
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{} RBAC files: {written} written", files.len());
    ExitCode::SUCCESS
}
