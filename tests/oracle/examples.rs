//! Each Trainer tag's own example TrainJobs (the YAML files of its module's examples/ and docs/
//! that scripts/oracle/build.sh copies into `examples-<tag>/`), as CREATEs against every release:
//! a newer tag's example on an older release's CRD carries fields that release drops or rejects,
//! which `validate --trainer-version` must refuse.
//!
//! They join the cases of [`super::trainguard_agrees_with_upstream`] (the schema check, field
//! path by field path), and [`validate_refuses_what_each_release_refuses_in_the_examples`] runs
//! the real `trainguard validate` binary on each file for each release.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use trainguard_core::trainer::TrainerVersion;

use super::{Case, api_paths, ask, oracle_dir, trainjobs_in};

/// One example file of one tag, as build.sh copied it.
struct ExampleFile {
    /// The tag whose module it comes from.
    tag: &'static str,
    /// The copy in `examples-<tag>/`.
    copy: PathBuf,
    /// Its path in the module (`examples/yaml/01-multi-node.yaml`).
    path: String,
    /// Its TrainJobs, in document order.
    trainjobs: Vec<Value>,
}

/// Every tag's example files, in tag and path order. Panics when build.sh has not copied them.
fn files(dir: &Path) -> Vec<ExampleFile> {
    let mut out = Vec::new();
    for version in TrainerVersion::ALL {
        let tag = version.tag();
        let examples = dir.join(format!("examples-{tag}"));
        let entries = std::fs::read_dir(&examples)
            .unwrap_or_else(|e| panic!("{}: {e} (run scripts/oracle/build.sh)", examples.display()));
        let mut copies: Vec<PathBuf> = entries.map(|e| e.expect("directory entry").path()).collect();
        copies.sort();
        for copy in copies {
            let name = copy.file_name().expect("a file name").to_string_lossy().into_owned();
            let trainjobs = trainjobs_in(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
            out.push(ExampleFile { tag, copy, path: name.replace("__", "/"), trainjobs });
        }
    }
    out
}

/// Every TrainJob of every tag's examples, as a CREATE.
pub(crate) fn cases(dir: &Path) -> Vec<Case> {
    files(dir)
        .into_iter()
        .flat_map(|file| {
            let (tag, path) = (file.tag, file.path);
            file.trainjobs.into_iter().enumerate().map(move |(i, new)| Case {
                id: format!("example {tag} {path}#{i}"),
                old: None,
                new,
                state: None,
                generated: false,
            })
        })
        .collect()
}

/// The binary under test; `TRAINGUARD_BIN` overrides it, as in tests/cli.
fn bin() -> PathBuf {
    std::env::var_os("TRAINGUARD_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_trainguard")), PathBuf::from)
}

/// `trainguard validate --trainer-version V -o json FILE`: exit code and the verdict lines.
fn validate(version: TrainerVersion, file: &Path) -> (i32, Vec<Value>) {
    let out = Command::new(bin())
        .args(["validate", "--trainer-version", version.name(), "-o", "json"])
        .arg(file)
        .env_remove("TRAINGUARD_SCHEMA")
        .env_remove("TRAINGUARD_TRAINER_VERSION")
        .env_remove("TRAINGUARD_SUSPEND_RULE")
        .env_remove("TRAINGUARD_ALLOWED_MANAGED_BY")
        .env_remove("TRAINGUARD_ALLOW_LOOK_ALIKES")
        .output()
        .expect("run trainguard");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{}: panic: {stderr}", file.display());
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", file.display())))
        .collect();
    (out.status.code().expect("exited, not killed"), lines)
}

/// Per tag and release: the TrainJobs, how many the API server refused, how many `validate`
/// judged the same way.
#[derive(Default)]
struct Count {
    trainjobs: usize,
    refused: usize,
    agreed: usize,
}

#[test]
fn validate_refuses_what_each_release_refuses_in_the_examples() {
    let dir = oracle_dir();
    let files = files(&dir);
    let cases = cases(&dir);
    assert!(!cases.is_empty(), "no example TrainJob in any tag's examples under {}", dir.display());
    let mut counts: BTreeMap<(&str, &str), Count> = BTreeMap::new();
    let mut differences = Vec::new();
    for version in TrainerVersion::ALL {
        let answers = ask(&dir, version, &cases);
        let mut answers = answers.iter();
        for file in &files {
            let (code, lines) = validate(version, &file.copy);
            let context = format!("{} {} [validate --trainer-version {}]", file.tag, file.path, version.name());
            let problems: Vec<&Value> =
                lines.iter().filter(|l| l.get("error").is_some() || l.get("warning").is_some()).collect();
            if !problems.is_empty() {
                differences.push(format!("{context}: input problems {problems:?}"));
            }
            let verdicts: Vec<&Value> = lines.iter().filter(|l| l.get("verdict").is_some()).collect();
            if verdicts.len() != file.trainjobs.len() {
                differences.push(format!(
                    "{context}: {} verdicts for {} TrainJobs: {lines:?}",
                    verdicts.len(),
                    file.trainjobs.len()
                ));
                answers.by_ref().take(file.trainjobs.len()).for_each(drop);
                continue;
            }
            let mut any_refused = false;
            for (i, verdict) in verdicts.iter().enumerate() {
                let answer = answers.next().expect("an answer per example TrainJob");
                assert_eq!(answer.id, format!("example {} {}#{i}", file.tag, file.path));
                let count = counts.entry((file.tag, version.tag())).or_default();
                count.trainjobs += 1;
                let refused = answer.refused();
                any_refused |= refused;
                count.refused += usize::from(refused);
                let denied = verdict["verdict"] == "denied";
                // A denial names the fields the API server names (its schema causes, the fields
                // it prunes); an allowed TrainJob names none.
                let fields: BTreeSet<String> = verdict["causes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["field"].as_str().map(str::to_string))
                    .collect();
                let api = if answer.decode.is_some() { BTreeSet::new() } else { api_paths(answer) };
                let same_fields = answer.decode.is_some() || fields == api;
                if denied == refused && same_fields {
                    count.agreed += 1;
                } else {
                    differences.push(format!(
                        "{context} #{i}: validate {} (rule {}, fields {fields:?}), API server {} {api:?} {}",
                        verdict["verdict"],
                        verdict["rule"],
                        if refused { "refuses" } else { "admits" },
                        answer.decode.as_deref().unwrap_or("")
                    ));
                }
            }
            let expected_code = i32::from(any_refused);
            if code != expected_code {
                differences.push(format!("{context}: exit status {code}, expected {expected_code}"));
            }
        }
    }
    for version in TrainerVersion::ALL {
        let of_tag: Vec<&ExampleFile> = files.iter().filter(|f| f.tag == version.tag()).collect();
        let trainjobs: usize = of_tag.iter().map(|f| f.trainjobs.len()).sum();
        eprintln!("examples of {}: {} files, {trainjobs} TrainJobs", version.tag(), of_tag.len());
    }
    for ((tag_of_examples, release), c) in &counts {
        eprintln!(
            "examples of {tag_of_examples} on {release}: {} TrainJobs, {} refused by the API server, validate agreed on {}",
            c.trainjobs, c.refused, c.agreed
        );
    }
    for d in &differences {
        eprintln!("  {d}");
    }
    assert!(differences.is_empty(), "{} differences between validate and the API server", differences.len());
}
