//! Every fixture through `trainguard_core::admission::review`, held to its expected verdict: HTTP
//! outcome, allowed, status code, audit rule, message, warnings, patch, uid echo, and the denial
//! format of docs/webhook.md §6 (see `common::check_verdict`).

use crate::support::fixtures as common;

use std::collections::BTreeSet;

use common::{Case, Observed, check_verdict, load_bench_cases, load_cases};
use serde_json::{Value, json};

fn failures(cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|case| {
            let outcome = case.run();
            let problems = check_verdict(case, &Observed::from_core(&outcome));
            (!problems.is_empty()).then(|| format!("{}:\n    {}", case.name, problems.join("\n    ")))
        })
        .collect()
}

#[test]
fn every_admission_fixture_gets_its_verdict() {
    let cases = load_cases();
    let failed = failures(&cases);
    assert!(failed.is_empty(), "{} of {} fixtures failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}

#[test]
fn bench_payloads_get_their_verdict_and_sizes() {
    let cases = load_bench_cases();
    let failed = failures(&cases);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let size = |name: &str| cases.iter().find(|c| c.name == name).map(|c| c.review.len()).expect("bench payload");
    let (small, large) = (size("small-update"), size("large-update"));
    assert!((4_000..8_000).contains(&small), "small-update is {small} bytes, meant to be ~5 KB");
    assert!((130_000..180_000).contains(&large), "large-update is {large} bytes, meant to be ~150 KB");
}

/// The table is complete: each overrides field name has every row of docs/webhook.md §3–§5 and §7.
#[test]
fn every_field_name_has_every_row() {
    let cases = load_cases();
    let rows = [
        "u0-status-subresource",
        "u1-metadata-only",
        "u1-respelled",
        "u1-absent-vs-empty-list",
        "u1-suspend-only",
        "u2-change-while-running",
        "u2-cluster-unknown",
        "u2-kueue-job",
        "u3-no-jobset",
        "u3-run-stopped",
        "u3-offline",
        "u3-cluster-unknown",
        "u3-kueue-restores",
        "u3-bad-shape",
        "u4-either-run-stopped",
        "u4-either-offline",
        "u4-new-denied",
        "u5-still-running",
        "u5-run-completed",
        "g1-jobset-active",
        "g2-jobset-deleting-u4",
        "g2-ignored-on-u3",
        "g3-child-job-active",
        "g4-trainjob-status-active",
        "g5-terminating-pods-u4",
        "g5-ignored-on-u3",
        "g5-terminating-unknown-u4",
        "g5-job-deleting-u4",
        "create-suspended",
        "create-unsuspended",
        "create-bad-shape",
        "mutate-defaults-added",
        "mutate-nothing-to-add",
        "mutate-runtimeref-partial",
    ];
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    let mut missing = Vec::new();
    for field in ["podSpecOverrides", "podTemplateOverrides", "runtimePatches"] {
        for row in rows {
            let name = format!("{field}/{row}");
            if !names.contains(name.as_str()) {
                missing.push(name);
            }
        }
    }
    assert!(missing.is_empty(), "missing fixtures: {missing:?}");
    // And every rule of docs/webhook.md §3–§5 decides at least one fixture.
    let rules: BTreeSet<&str> = cases.iter().flat_map(|c| c.expect.rule.split(',')).collect();
    for rule in ["U0", "U1", "U2", "G1", "G2", "G3", "G4", "G5", "M1", "M2", "O1", "shape", "name", "cluster-unknown"] {
        assert!(rules.contains(rule), "no fixture is decided by {rule}");
    }
}

/// docs/webhook.md §8: `dryRun: true` gets exactly the decision it would get otherwise.
#[test]
fn dry_run_gets_the_same_response() {
    for case in load_cases().iter().filter(|c| c.name.starts_with("general/dry-run-")) {
        let mut review: Value = serde_json::from_slice(&case.review).expect("fixture is JSON");
        assert_eq!(review["request"]["dryRun"], json!(true), "{}", case.name);
        let dry = case.run().expect("answered");
        assert!(dry.dry_run, "{}: Reviewed.dry_run", case.name);
        review["request"]["dryRun"] = json!(false);
        review["request"]["options"].as_object_mut().expect("options").remove("dryRun");
        let wet_case = Case { review: serde_json::to_vec(&review).expect("json"), ..case.clone() };
        let wet = wet_case.run().expect("answered");
        assert!(!wet.dry_run);
        assert_eq!(
            String::from_utf8_lossy(&dry.body),
            String::from_utf8_lossy(&wet.body),
            "{}: dry run answered differently",
            case.name
        );
    }
}

/// U1 and U0 never consult the cluster: the same fixtures give the same verdict with a cluster
/// whose state is unknown (which would deny any gated decision with 500).
#[test]
fn u0_and_u1_never_look_at_the_cluster() {
    let cases: Vec<Case> =
        load_cases().into_iter().filter(|c| c.expect.rule == "U0" || c.expect.rule == "U1").collect();
    assert!(cases.len() >= 10);
    for case in cases {
        let known = case.run().expect("answered");
        let unknown =
            trainguard_core::admission::review(case.endpoint(), &case.review, &case.config(), &common::UnknownCluster)
                .expect("answered");
        assert_eq!(known.body, unknown.body, "{}", case.name);
    }
}

/// CREATE never consults the cluster either (docs/webhook.md §5).
#[test]
fn create_never_looks_at_the_cluster() {
    let cases: Vec<Case> = load_cases().into_iter().filter(|c| c.name.contains("/create-")).collect();
    assert!(cases.len() >= 9);
    for case in cases {
        let mine = case.run().expect("answered");
        let unknown =
            trainguard_core::admission::review(case.endpoint(), &case.review, &case.config(), &common::UnknownCluster)
                .expect("answered");
        assert_eq!(mine.body, unknown.body, "{}", case.name);
    }
}

/// The `Reviewed` summary matches the request (the server logs and metrics read it).
#[test]
fn reviewed_summary_matches_the_request() {
    for case in load_cases() {
        let Ok(reviewed) = case.run() else { continue };
        let request: Value = serde_json::from_slice(&case.review).expect("answered reviews are JSON");
        let request = &request["request"];
        assert_eq!(Some(&*reviewed.uid), request["uid"].as_str(), "{}", case.name);
        assert_eq!(reviewed.namespace, request["namespace"].as_str().unwrap_or(""), "{}", case.name);
        assert_eq!(reviewed.name, request["name"].as_str().unwrap_or(""), "{}", case.name);
        let op = request["operation"].as_str().unwrap_or("");
        let expected_op = if ["CREATE", "UPDATE", "DELETE", "CONNECT"].contains(&op) { op } else { "UNKNOWN" };
        assert_eq!(reviewed.operation, expected_op, "{}", case.name);
        assert_eq!(reviewed.decision.allowed(), case.expect.allowed, "{}", case.name);
        assert_eq!(reviewed.decision.audit_rules(), case.expect.rule, "{}", case.name);
    }
}

/// O1 with other `--opt-out-groups` and other requesters: the label-adding fixture, re-sent.
#[test]
fn opt_out_groups_decide_who_may_set_the_label() {
    let cases = load_cases();
    let case = cases.iter().find(|c| c.name == "general/o1-label-added").expect("fixture");
    let review: Value = serde_json::from_slice(&case.review).expect("fixture is JSON");
    // (case, opt-out groups, request.userInfo.groups, allowed)
    let table: &[(&str, &[&str], Value, bool)] = &[
        ("default group, not a member", &["system:masters"], json!(["ml-team:editors"]), false),
        ("default group, member", &["system:masters"], json!(["system:authenticated", "system:masters"]), true),
        ("custom group, member", &["ml-platform"], json!(["ml-platform"]), true),
        ("custom group, masters no longer enough", &["ml-platform"], json!(["system:masters"]), false),
        ("several groups, one matches", &["a", "b"], json!(["b"]), true),
        ("empty list: nobody", &[], json!(["system:masters"]), false),
        ("no groups sent", &["system:masters"], Value::Null, false),
        ("group names match exactly", &["system:masters"], json!(["system:masters2", "System:Masters"]), false),
    ];
    for (name, allowed_groups, groups, want) in table {
        let mut body = review.clone();
        body["request"]["userInfo"]["groups"] = groups.clone();
        let config = trainguard_core::admission::RulesConfig {
            opt_out_groups: allowed_groups.iter().map(|g| g.to_string()).collect(),
            ..case.config()
        };
        let bytes = serde_json::to_vec(&body).unwrap();
        let got = trainguard_core::admission::review(case.endpoint(), &bytes, &config, case.cluster().as_ref())
            .expect("answered");
        assert_eq!(got.decision.allowed(), *want, "{name}: {}", got.decision.message());
        let rule = if *want { "U1" } else { "O1" };
        assert_eq!(got.decision.rule(), rule, "{name}");
        if !want {
            assert!(got.decision.message().contains("--opt-out-groups"), "{name}: names the flag");
            assert!(got.decision.message().contains("trainguard.io/webhook"), "{name}: names the label");
        }
    }
}
