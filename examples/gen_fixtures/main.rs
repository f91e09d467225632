//! Writes the admission fixtures (`fixtures/admission/`, `fixtures/bench/`) from the table in
//! `crates/test-support/src/cases.rs`. Run `cargo run --example gen_fixtures` after changing the table; commit the files.
//! `tests/admission/fixtures_fresh.rs` fails while the committed files differ from what this produces.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a generator: a panic is its failure report")]

use trainguard_test_support::cases;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = cases::all_files();
    let wanted: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    if wanted.len() != files.len() {
        eprintln!("two cases write the same file");
        return ExitCode::FAILURE;
    }
    let mut written = 0;
    for file in &files {
        let path = root.join(&file.path);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(file.contents.as_str()) {
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(path.parent().expect("fixture files live in a directory"))
            .and_then(|()| std::fs::write(&path, &file.contents))
        {
            eprintln!("{}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        written += 1;
    }
    // Files of cases that no longer exist.
    let mut removed = 0;
    for dir in ["fixtures/admission", "fixtures/bench"] {
        for path in walk(&root.join(dir)) {
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
            if rel.ends_with(".json") && !wanted.contains(rel.as_str()) {
                if let Err(e) = std::fs::remove_file(&path) {
                    eprintln!("{}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                removed += 1;
            }
        }
    }
    println!("{} fixture files: {written} written, {removed} removed", files.len());
    ExitCode::SUCCESS
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
