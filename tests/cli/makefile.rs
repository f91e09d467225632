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

/// `make fuzz` runs every target with the knobs docs/operations.md names: FUZZ_SECONDS for each
/// target's time and FUZZ_SANITIZER (default `none`: the AddressSanitizer build did not finish on
/// the 2-core machine), so `make fuzz FUZZ_SECONDS=1200` means what it says for both targets.
#[test]
fn fuzz_runs_each_target_with_the_documented_knobs() {
    let text = makefile();
    assert!(text.lines().any(|l| l == "FUZZ_SANITIZER ?= none"), "FUZZ_SANITIZER defaults to none");
    assert!(text.lines().any(|l| l.starts_with("FUZZ_SECONDS ?= ")), "a FUZZ_SECONDS default");
    let recipe: Vec<&str> =
        text.split("\nfuzz:\n").nth(1).expect("a fuzz target").lines().take_while(|l| l.starts_with('\t')).collect();
    let runs: Vec<&&str> = recipe.iter().filter(|l| l.contains("fuzz run")).collect();
    let targets: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    assert_eq!(runs.len(), targets.len(), "one run per target: {runs:?}");
    for target in targets {
        let run = runs
            .iter()
            .find(|l| l.contains(&format!(" {target} corpus/{target}")))
            .unwrap_or_else(|| panic!("make fuzz does not run {target}: {runs:?}"));
        assert!(run.contains("-s $(FUZZ_SANITIZER)"), "{run}");
        assert!(run.contains("-max_total_time=$(FUZZ_SECONDS)"), "{run}");
    }
}
