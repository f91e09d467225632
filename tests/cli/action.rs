//! The GitHub Action (`action.yml`) as a runner executes it: its two shell steps, run by bash
//! with the environment GitHub sets, against a release laid out as the release workflow makes
//! it (tarball + SHA256SUMS) and served by a stand-in `gh` (no network here).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn action() -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap()).unwrap()
}

/// A release of this build, as .github/workflows/release.yml lays it out.
fn release(dir: &Path, arch: &str, tamper: bool) {
    let name = format!("trainguard-{}-linux-{arch}", env!("CARGO_PKG_VERSION"));
    let stage = dir.join("stage").join(&name);
    std::fs::create_dir_all(&stage).unwrap();
    // A link to this build rather than a copy: gzip of a debug binary would take most of the test.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_trainguard"), stage.join("trainguard")).unwrap();
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let tar = files.join(format!("{name}.tar.gz"));
    let ok = Command::new("tar").arg("-C").arg(dir.join("stage")).arg("-czf").arg(&tar).arg(&name).status().unwrap();
    assert!(ok.success());
    let sums = Command::new("sha256sum").arg(format!("{name}.tar.gz")).current_dir(&files).output().unwrap();
    let mut sums = String::from_utf8(sums.stdout).unwrap();
    if tamper {
        sums = format!("{}{}", "0".repeat(64), &sums[64..]);
    }
    std::fs::write(files.join("SHA256SUMS"), sums).unwrap();
}

/// `gh release download TAG --repo R --dir D --clobber --pattern P…`, from `files/`; logs its call.
fn fake_gh(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/usr/bin/env bash
set -euo pipefail
echo "$*" >> "{log}"
[ "$1 $2" = "release download" ] || exit 64
shift 3
out=""; patterns=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) out="$2"; shift 2 ;;
    --pattern) patterns+=("$2"); shift 2 ;;
    --repo) shift 2 ;;
    *) shift ;;
  esac
done
for p in "${{patterns[@]}}"; do cp "{files}/$p" "$out/"; done
"#,
        log = dir.join("gh.log").display(),
        files = dir.join("files").display()
    );
    let gh = bin.join("gh");
    std::fs::write(&gh, script).unwrap();
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Runs step `index` of the action with `env` the way a runner does: `bash -e {0}`.
fn run_step(index: usize, dir: &Path, env: &[(&str, String)], path_prefix: &str) -> Output {
    let steps = action()["runs"]["steps"].clone();
    let step = &steps[index];
    assert_eq!(step["shell"], "bash");
    let script = step["run"].as_str().unwrap();
    assert!(!script.contains("${{"), "expressions go through env:, never into the script");
    let declared: Vec<String> = step["env"].as_object().unwrap().keys().cloned().collect();
    for (k, _) in env.iter().filter(|(k, _)| !k.starts_with("RUNNER_") && !k.starts_with("GITHUB_")) {
        assert!(declared.iter().any(|d| d == k), "step {index} does not declare {k}");
    }
    Command::new("bash")
        .args(["-e", "-c", script])
        .env("PATH", format!("{path_prefix}:{}", std::env::var("PATH").unwrap()))
        .env("RUNNER_TEMP", dir.join("runner-temp"))
        .env("RUNNER_OS", "Linux")
        .env("GITHUB_PATH", dir.join("github-path"))
        // The validate fixtures mix the overrides fields of several Trainer releases.
        .env("TRAINGUARD_SCHEMA", "off")
        .envs(env.iter().map(|(k, v)| (*k, v.clone())))
        .current_dir(repo())
        .output()
        .unwrap()
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no release binary for {other}"),
    }
}

fn download(dir: &Path, version: &str) -> Output {
    let bin = fake_gh(dir);
    std::fs::create_dir_all(dir.join("runner-temp")).unwrap();
    let env = [
        ("GH_TOKEN", "token".to_string()),
        ("VERSION", version.to_string()),
        ("REPOSITORY", "owner/trainguard".to_string()),
    ];
    run_step(0, dir, &env, bin.to_str().unwrap())
}

#[test]
fn inputs_have_defaults_that_need_no_placeholder() {
    let a = action();
    let inputs = a["inputs"].as_object().unwrap();
    for (name, want) in [
        ("version", "${{ github.action_ref }}"),
        ("repository", "${{ github.action_repository }}"),
        ("token", "${{ github.token }}"),
        ("paths", "."),
        ("trainer-version", ""),
    ] {
        assert_eq!(inputs[name]["default"], want, "{name}");
    }
    assert_eq!(a["runs"]["using"], "composite");
}

/// docs/ci.md names every input of the action, and its GitLab job fails a run that checked no
/// TrainJob (`--strict`), as the Action's example does.
#[test]
fn the_docs_name_every_input_and_the_gitlab_job_is_strict() {
    let docs = std::fs::read_to_string(repo().join("docs/ci.md")).unwrap();
    let inputs_paragraph = docs.split("\nInputs: ").nth(1).expect("the Inputs paragraph");
    let inputs_paragraph = inputs_paragraph.split("\n\n").next().unwrap();
    for name in action()["inputs"].as_object().unwrap().keys() {
        assert!(inputs_paragraph.contains(&format!("`{name}`")), "docs/ci.md does not name the input {name}");
    }
    let gitlab = docs.split("## GitLab CI").nth(1).expect("the GitLab section");
    let job = gitlab.split("```yaml").nth(1).unwrap().split("```").next().unwrap();
    let run = job.lines().find(|l| l.contains("trainguard validate")).expect("the validate line");
    assert!(run.contains("--strict"), "{run}");
}

#[test]
fn downloads_the_release_checks_it_and_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    release(dir, arch(), false);
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let out = download(dir, &version);
    assert!(out.status.success(), "download step: {}", String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(dir.join("gh.log")).unwrap();
    assert!(log.starts_with(&format!("release download {version} --repo owner/trainguard")), "{log}");
    let added = std::fs::read_to_string(dir.join("github-path")).unwrap();
    let bin_dir = added.trim();
    assert!(Path::new(bin_dir).join("trainguard").exists(), "{bin_dir}");

    // (manifests, expected exit, expected output)
    let rows = repo().join("tests/data/validate/rows");
    let cases = [(rows.join("create-ok"), 0, "1 allowed"), (rows.join("create-bad-name"), 1, "::error file=")];
    for (paths, code, want) in cases {
        let env = [
            ("PATHS", paths.display().to_string()),
            ("GIT_BASE", String::new()),
            ("ARGS", String::new()),
            ("BASE_REF", String::new()),
        ];
        let out = run_step(1, dir, &env, bin_dir);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}: {stdout}{}",
            paths.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(want), "{}: {stdout}", paths.display());
        assert!(stdout.contains(&format!("trainguard {}", env!("CARGO_PKG_VERSION"))), "prints its version: {stdout}");
    }
}

#[test]
fn refuses_a_bad_checksum_or_a_version_that_is_not_a_tag() {
    let cases =
        [(true, format!("v{}", env!("CARGO_PKG_VERSION")), "FAILED"), (false, "main".to_string(), "not a release tag")];
    for (tamper, version, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        release(tmp.path(), arch(), tamper);
        let out = download(tmp.path(), &version);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{version} tamper={tamper}: {all}");
        assert!(all.contains(want), "{version} tamper={tamper}: {all}");
        assert!(!tmp.path().join("github-path").exists(), "nothing put on PATH");
    }
}
