//! The Makefile's targets as CONTRIBUTING.md and README.md promise them.

use std::path::Path;

fn makefile() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile")).unwrap()
}

/// Every target named after a directory of the repository (`fuzz`, `deploy`, `certs`) is phony:
/// otherwise make sees the directory, calls it up to date and runs nothing.
#[test]
fn targets_named_like_directories_are_phony() {
    let text = makefile();
    let phony: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix(".PHONY:")).flat_map(str::split_whitespace).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for line in text.lines() {
        let Some((target, _)) = line.split_once(':') else { continue };
        if target.is_empty()
            || target.contains([' ', '\t', '$', '.', '='])
            || line.contains(":=")
            || line.contains("?=")
        {
            continue;
        }
        if root.join(target).is_dir() {
            assert!(phony.contains(&target), "`make {target}` would do nothing: {target}/ exists and it is not .PHONY");
        }
    }
    assert!(phony.contains(&"fuzz"), "{phony:?}");
}

/// `make lint` type-checks the fuzz targets on stable, so a change to what they call breaks the
/// lint, not the next fuzzing session.
#[test]
fn lint_type_checks_the_fuzz_targets() {
    let text = makefile();
    let lint: Vec<&str> =
        text.split("\nlint:\n").nth(1).expect("a lint target").lines().take_while(|l| l.starts_with('\t')).collect();
    assert!(
        lint.iter().any(|l| l.contains("check --manifest-path fuzz/Cargo.toml") && l.contains("--no-default-features")),
        "{lint:?}"
    );
}

/// `make lint` keeps the core crate pure (its dependency tree checked for tokio, hyper, clap …)
/// and lints and tests the whole workspace, not only the root package.
#[test]
fn lint_checks_the_core_crate_and_the_whole_workspace() {
    let text = makefile();
    let target = |name: &str| -> Vec<String> {
        text.split(&format!("\n{name}:\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("a {name} target"))
            .lines()
            .take_while(|l| l.starts_with('\t'))
            .map(str::to_string)
            .collect()
    };
    let lint = target("lint");
    assert!(lint.iter().any(|l| l.contains("scripts/check-core-deps.sh")), "{lint:?}");
    assert!(lint.iter().any(|l| l.contains("clippy --workspace")), "{lint:?}");
    let test = target("test");
    assert!(test.iter().any(|l| l.contains("nextest run --workspace")), "{test:?}");
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-core-deps.sh")).unwrap();
    for forbidden in ["tokio", "hyper", "clap"] {
        assert!(script.contains(forbidden), "check-core-deps.sh does not forbid {forbidden}");
    }
}
