//! The committed fixtures are exactly what `examples/gen_fixtures` writes: edit the table in
//! `crates/test-support/src/cases.rs`, run `cargo run --example gen_fixtures`, commit both.

use crate::{builders, cases};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "run `cargo run --example gen_fixtures` and commit the result";

#[test]
fn committed_fixtures_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = cases::all_files();
    let mut stale = Vec::new();
    for file in &files {
        match std::fs::read_to_string(root.join(&file.path)) {
            Ok(on_disk) if on_disk == file.contents => {}
            Ok(_) => stale.push(format!("{} differs", file.path)),
            Err(e) => stale.push(format!("{}: {e}", file.path)),
        }
    }
    assert!(stale.is_empty(), "{REGENERATE}:\n{}", stale.join("\n"));
}

#[test]
fn no_fixture_file_without_a_case() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let wanted: BTreeSet<String> = cases::all_files().into_iter().map(|f| f.path).collect();
    let mut extra = Vec::new();
    for dir in ["fixtures/admission", "fixtures/bench"] {
        for path in walk(&root.join(dir)) {
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
            if !wanted.contains(&rel) {
                extra.push(rel);
            }
        }
    }
    assert!(extra.is_empty(), "{REGENERATE} (it removes these):\n{}", extra.join("\n"));
}

/// Every case name is unique, and so is every request uid (logs and audit lines tell them apart).
#[test]
fn case_names_and_uids_are_unique() {
    let all = cases::all_cases();
    let names: BTreeSet<String> = all.iter().map(|c| format!("{}/{}", c.dir, c.name)).collect();
    assert_eq!(names.len(), all.len());
    let uids: Vec<&str> = all
        .iter()
        .filter_map(|c| match &c.body {
            builders::Body::Review(r) => Some(r.uid.as_str()),
            _ => None,
        })
        .collect();
    let unique: BTreeSet<&str> = uids.iter().copied().collect();
    assert_eq!(unique.len(), uids.len(), "two cases share a request uid");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
