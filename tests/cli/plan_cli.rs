//! `trainguard plan` on snapshot fixtures shaped as `kubectl get -o yaml|json` prints them
//! (tests/data/plan): the output is checked line by line against the expected JSON lines.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/plan");

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainguard")).arg("plan").args(args).output().expect("runs")
}

fn data(name: &str) -> String {
    Path::new(DATA).join(name).display().to_string()
}

#[test]
fn fixtures_line_by_line() {
    // (snapshot, extra flags, expected output)
    let cases: &[(&str, &[&str], &str)] = &[
        ("ttl-and-suspend.yaml", &["--now", "2025-01-01T00:05:00Z"], "ttl-and-suspend.expected.jsonl"),
        (
            "ttl-and-suspend.yaml",
            &["--now", "2025-01-01T00:05:00Z", "--stash-ttl-on-stuck-suspend"],
            "ttl-and-suspend.stash.expected.jsonl",
        ),
        ("node-failure.yaml", &["--now", "2025-01-01T00:06:00Z"], "node-failure.early.expected.jsonl"),
        ("node-failure.yaml", &["--now", "2025-01-01T00:08:00Z"], "node-failure.expected.jsonl"),
        // A staggered outage over small zones: the cluster-wide brake, counting late nodes at once.
        ("brake.yaml", &["--now", "2025-01-01T00:08:10Z"], "brake.expected.jsonl"),
        (
            "restore.json",
            &["--now", "2025-01-01T00:10:00Z", "--controller-mode", "report"],
            "restore.report.expected.jsonl",
        ),
        // TrainJob TTL (due, pending, bad annotation, suspended, unfinished); a Succeeded pod keeps
        // its phase; the default leaves a Ready=False node's pod alone; Kueue's pod past its window.
        ("upstream-gaps.yaml", &["--now", "2025-01-01T00:08:00Z"], "upstream-gaps.expected.jsonl"),
        (
            "upstream-gaps.yaml",
            &["--now", "2025-01-01T00:08:00Z", "--node-failure=not-ready"],
            "upstream-gaps.not-ready.expected.jsonl",
        ),
        // Inside Kueue's window (deletion 00:05:45 + 1m + 30s) with a shorter --force-delete-after.
        (
            "upstream-gaps.yaml",
            &["--now", "2025-01-01T00:06:30Z", "--force-delete-after=30s"],
            "upstream-gaps.kueue-window.expected.jsonl",
        ),
    ];
    for (snapshot, flags, expected) in cases {
        let mut args = vec!["--snapshot".to_string(), data(snapshot)];
        // The expected plans are act mode's, asked for as a user must; report mode is the default.
        if !flags.contains(&"--controller-mode") {
            args.extend(["--controller-mode".to_string(), "act".to_string()]);
        }
        args.extend(flags.iter().map(|s| s.to_string()));
        let out = plan(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{snapshot}: {}", String::from_utf8_lossy(&out.stderr));
        let got = String::from_utf8(out.stdout).unwrap();
        let want = std::fs::read_to_string(data(expected)).unwrap();
        let (got, want): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w): (Value, Value) = (serde_json::from_str(g).unwrap(), serde_json::from_str(w).unwrap());
            assert_eq!(g, w, "{expected} line {}", i + 1);
        }
        assert_eq!(got.len(), want.len(), "{expected}: line count\n{}", got.join("\n"));
    }
}

#[test]
fn every_line_has_the_fields_spec_5_requires() {
    for snapshot in ["ttl-and-suspend.yaml", "node-failure.yaml", "brake.yaml", "restore.json", "upstream-gaps.yaml"] {
        let out = plan(&[
            "--snapshot",
            &data(snapshot),
            "--now",
            "2025-01-01T00:08:00Z",
            "--stash-ttl-on-stuck-suspend",
            "--controller-mode=act",
        ]);
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            for field in ["action", "kind", "namespace", "name", "uid", "rule", "reason"] {
                assert!(v[field].is_string(), "{snapshot}: {field} missing in {line}");
            }
            let action = v["action"].as_str().unwrap();
            assert!(
                ["delete-job", "force-delete-pod", "patch-pod-status", "patch-job", "event", "requeue"]
                    .contains(&action),
                "{line}"
            );
            assert!(["ttl", "suspend", "node-failure"].contains(&v["rule"].as_str().unwrap()), "{line}");
            if action == "requeue" {
                assert!(v["at"].as_str().unwrap().parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{line}");
            }
            if action.starts_with("patch-") {
                assert!(v["patch"].is_object(), "{line}");
            }
        }
    }
}

/// Without `--controller-mode`, and with `report`, no line is a write: each is `would-…`, and the
/// same plan as act mode's otherwise (the same objects, in the same order).
#[test]
fn report_is_the_default_and_prints_no_writes() {
    const WRITES: [&str; 4] = ["delete-job", "force-delete-pod", "patch-pod-status", "patch-job"];
    for snapshot in ["ttl-and-suspend.yaml", "node-failure.yaml", "upstream-gaps.yaml", "restore.json"] {
        let base = ["--snapshot", &data(snapshot), "--now", "2025-01-01T00:08:00Z"].map(str::to_string);
        let run = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().map(String::as_str).chain(extra.iter().copied()).collect();
            let out = plan(&args);
            assert!(out.status.success(), "{snapshot}");
            let lines: Vec<Value> =
                String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            (lines, String::from_utf8(out.stderr).unwrap())
        };
        let (default, stderr) = run(&[]);
        let (report, _) = run(&["--controller-mode=report"]);
        let (act, act_stderr) = run(&["--controller-mode=act"]);
        assert_eq!(default, report, "{snapshot}: report is the default");
        assert!(stderr.contains("in report mode"), "{snapshot}: {stderr}");
        assert!(act_stderr.contains("in act mode"), "{snapshot}: {act_stderr}");
        assert_eq!(default.len(), act.len(), "{snapshot}");
        let mut would = 0;
        for (r, a) in default.iter().zip(&act) {
            let (r_action, a_action) = (r["action"].as_str().unwrap(), a["action"].as_str().unwrap());
            assert!(!WRITES.contains(&r_action), "{snapshot}: report mode printed a write: {r}");
            if WRITES.contains(&a_action) {
                assert_eq!(r_action, format!("would-{a_action}"), "{snapshot}");
                would += 1;
            }
            assert_eq!((&r["kind"], &r["name"], &r["rule"]), (&a["kind"], &a["name"], &a["rule"]), "{snapshot}");
        }
        assert!(would > 0, "{snapshot}: the fixture plans some write in act mode");
    }
}

#[test]
fn several_files_a_directory_and_stdin() {
    // The directory holds all the fixtures; the same objects from files give the same plan.
    let dir = plan(&["--snapshot", DATA, "--now", "2025-01-01T00:08:00Z"]);
    let files = plan(&[
        "--snapshot",
        &data("brake.yaml"),
        &data("node-failure.yaml"),
        &data("restore.json"),
        &data("ttl-and-suspend.yaml"),
        &data("upstream-gaps.yaml"),
        "--now",
        "2025-01-01T00:08:00Z",
    ]);
    assert!(dir.status.success() && files.status.success());
    assert_eq!(String::from_utf8_lossy(&dir.stdout), String::from_utf8_lossy(&files.stdout));
    assert!(String::from_utf8_lossy(&dir.stdout).lines().count() >= 8);

    let mut child = Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .args(["plan", "--snapshot", "-", "--now", "2025-01-01T00:10:00Z"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(std::fs::read(data("restore.json")).unwrap().as_slice()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"restore-ttl\""));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad_yaml = dir.path().join("bad.yaml");
    std::fs::write(&bad_yaml, "apiVersion: v1\nkind: [unclosed\n").unwrap();
    let bad_object = dir.path().join("bad-object.yaml");
    std::fs::write(
        &bad_object,
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: a, namespace: ml, uid: u}\n\
         spec: {runPolicy: {suspend: maybe}}\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--snapshot".into(), "/nonexistent/x.yaml".into()], "/nonexistent/x.yaml: cannot read"),
        (vec!["--snapshot".into(), bad_yaml.display().to_string()], "bad.yaml:2:"),
        (
            vec!["--snapshot".into(), bad_object.display().to_string()],
            "bad-object.yaml:1: PyTorchJob ml/a: spec.runPolicy.suspend",
        ),
        (vec!["--snapshot".into(), data("restore.json"), "--now".into(), "yesterday".into()], "not an RFC 3339 time"),
        (
            vec!["--snapshot".into(), data("restore.json"), "--force-delete-after".into(), "2 minutes".into()],
            "invalid duration",
        ),
    ];
    for (args, want) in cases {
        let out = plan(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn deprecated_node_unhealthy_reads_as_not_ready_with_a_warning() {
    let snapshot = data("upstream-gaps.yaml");
    let base = ["--snapshot", snapshot.as_str(), "--now", "2025-01-01T00:08:00Z"];
    let not_ready = plan(&[&base[..], &["--node-failure=not-ready"]].concat());
    let old = plan(&[&base[..], &["--node-failure=node-unhealthy"]].concat());
    let from_env = Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .arg("plan")
        .args(base)
        .env("TRAINGUARD_NODE_FAILURE", "node-unhealthy")
        .output()
        .expect("runs");
    for out in [&not_ready, &old, &from_env] {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(old.stdout, not_ready.stdout);
    assert_eq!(from_env.stdout, not_ready.stdout);
    assert!(String::from_utf8_lossy(&not_ready.stdout).contains("\"reason\":\"node-not-ready\""));
    for out in [&old, &from_env] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("warning: --node-failure=node-unhealthy is deprecated"), "{stderr}");
    }
    assert!(!String::from_utf8_lossy(&not_ready.stderr).contains("deprecated"));
}
