//! Records the git commit the binary is built from, for `--version`, the startup log line and
//! the `trainguard_build_info` gauge. Outside a git checkout (a Docker build, a crates.io
//! package) `TRAINGUARD_GIT_COMMIT` names it, else it is "unknown".
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a build script: a panic is its failure report")]

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=TRAINGUARD_GIT_COMMIT");
    let commit = match std::env::var("TRAINGUARD_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself (a branch switch) and the file of the branch it
            // names (a commit). `--git-path` resolves both in a worktree too, where .git is a file.
            for path in ["HEAD", "packed-refs"] {
                watch(git(&["rev-parse", "--git-path", path]));
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(git(&["rev-parse", "--git-path", &branch]));
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string())
        }
    };
    println!("cargo:rustc-env=TRAINGUARD_GIT_COMMIT={commit}");
}

fn watch(path: Option<String>) {
    // A watched path that does not exist would rerun the script on every build.
    if let Some(path) = path.map(PathBuf::from).filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
