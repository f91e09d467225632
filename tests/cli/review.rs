//! `trainguard review`: one AdmissionReview in, the response out, byte for byte what the
//! admission core (the function `serve` calls) answers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use trainguard::cluster::{ClusterView, Offline, StaticView};
use trainguard::manifests;
use trainguard_core::admission::{self, Endpoint, RulesConfig, SuspendRule};

/// The binary under test; `TRAINGUARD_BIN` overrides it (see tests/cli/validate.rs).
fn bin() -> PathBuf {
    std::env::var_os("TRAINGUARD_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_trainguard")), PathBuf::from)
}

fn review(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(bin())
        .arg("review")
        // These fixtures mix the overrides fields of several Trainer releases; the schema check
        // has its own test below and says `--schema on` there.
        .env("TRAINGUARD_SCHEMA", "off")
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run trainguard");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    out
}

fn trainjob(suspend: bool, gpu: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml-team"},
        "spec": {
            "suspend": suspend,
            "runtimeRef": {"name": "torch-distributed"},
            "podSpecOverrides": [{"targetJobs": [{"name": "node"}], "nodeSelector": {"gpu": gpu}}]
        }
    })
}

fn request(operation: &str, object: Value, old: Option<Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "7f0c0b44-9c5e-4a53-a1d2-1c1b1e0b7a01",
        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
        "operation": operation,
        "namespace": "ml-team",
        "name": "llama",
        "object": object,
    });
    if let Some(old) = old {
        request["oldObject"] = old;
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

/// Same bytes as the admission core, the right exit status, and the verdict that matters.
#[test]
fn answers_exactly_as_the_admission_core() {
    let state = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate/rows/g1-jobset-active/state.yaml"),
    )
    .unwrap();
    let state_docs = manifests::parse("state.yaml", &state, manifests::Format::Yaml, &Default::default()).unwrap();
    let mut known = StaticView::new();
    known.add_objects(state_docs.iter().map(|d| &d.value)).unwrap();

    let running_change = request("UPDATE", trainjob(false, "h100"), Some(trainjob(false, "a100")));
    let suspended_change = request("UPDATE", trainjob(true, "h100"), Some(trainjob(true, "a100")));
    let resume_change = request("UPDATE", trainjob(false, "h100"), Some(trainjob(true, "a100")));
    let create = request(
        "CREATE",
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml-team"}, "spec": {"runtimeRef": {"name": "x"}}}),
        None,
    );
    let bad_type = request("CREATE", json!({"metadata": {"name": "llama"}, "spec": {"suspend": "yes"}}), None);
    let new_rule = RulesConfig { suspend_rule: SuspendRule::New, ..RulesConfig::default() };

    // (what, args, body, endpoint, config, cluster, exit, text the response holds)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [u8], Endpoint, RulesConfig, &'a dyn ClusterView, i32, &'a str);
    let cases: Vec<Case> = vec![
        ("U2 denied", &[], &running_change, Endpoint::Validate, RulesConfig::default(), &Offline, 1, "\"code\":403"),
        (
            "U3 offline warning",
            &[],
            &suspended_change,
            Endpoint::Validate,
            RulesConfig::default(),
            &Offline,
            0,
            "was not consulted",
        ),
        (
            "U3 with --state",
            &["--state", "rows/g1-jobset-active/state.yaml"],
            &suspended_change,
            Endpoint::Validate,
            RulesConfig::default(),
            &known,
            1,
            "has 2 active jobs",
        ),
        (
            "U4 --suspend-rule new",
            &["--suspend-rule", "new"],
            &resume_change,
            Endpoint::Validate,
            new_rule,
            &Offline,
            1,
            "--suspend-rule=new",
        ),
        (
            "mutating defaults",
            &["--webhook", "mutate"],
            &create,
            Endpoint::Mutate,
            RulesConfig::default(),
            &Offline,
            0,
            "\"patchType\":\"JSONPatch\"",
        ),
        (
            "undecodable object",
            &[],
            &bad_type,
            Endpoint::Validate,
            RulesConfig::default(),
            &Offline,
            1,
            "spec.suspend: invalid type: string",
        ),
    ];
    for (what, args, body, endpoint, config, cluster, exit, contains) in cases {
        let out = review(args, body);
        let want = admission::review(endpoint, body, &config, cluster).expect("a decodable review").body;
        assert_eq!(out.status.code(), Some(exit), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, want, "{what}: not the core's bytes");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(contains),
            "{what}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn reads_a_file_as_well_as_stdin() {
    let body = request("UPDATE", trainjob(false, "h100"), Some(trainjob(false, "a100")));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("review.json");
    std::fs::write(&path, &body).unwrap();
    let from_file = review(&[path.to_str().unwrap()], b"");
    let from_stdin = review(&["-"], &body);
    assert_eq!(from_file.status.code(), Some(1));
    assert_eq!(from_file.stdout, from_stdin.stdout);
}

#[test]
fn what_the_server_would_refuse_is_exit_2() {
    let cases: &[(&str, &[&str], &[u8], &str)] = &[
        ("not JSON", &[], b"\x00\x01garbage", "request body is not valid JSON"),
        ("no request", &[], br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#, "has no request"),
        (
            "not a review",
            &[],
            br#"{"apiVersion":"v1","kind":"Pod"}"#,
            "expected an admission.k8s.io/v1 AdmissionReview",
        ),
        ("too large", &["--max-body-bytes", "10"], br#"{"apiVersion":"admission.k8s.io/v1"}"#, "larger than 10 bytes"),
        ("missing file", &["no-such.json"], b"", "no-such.json: cannot read"),
    ];
    for (what, args, body, want) in cases {
        let out = review(args, body);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(out.stdout.is_empty(), "{what}");
        assert!(stderr.contains(want), "{what}: {stderr}");
    }
}
