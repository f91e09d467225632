//! The planner's tables (docs/controller.md, "How it decides" through "Node failure"), time-stepped:
//! each case is a set of objects, shaped as `kubectl get -o json` prints them, and the exact actions
//! the planner takes at successive instants (seconds after T0). One test binary; one file per rule
//! family.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

mod jobset_loop;
mod node_failure;
mod ratelimit;
mod report;
mod suspend;
mod ttl;

use std::collections::HashMap;

use k8s_openapi::jiff::SignedDuration;
use serde_json::{Value, json};
use trainguard_core::planner::config::{Mode, NodeFailureMode, PlanConfig};
use trainguard_core::planner::facts::Str;
use trainguard_test_support::objects::*;

struct Case {
    name: &'static str,
    objects: Vec<Value>,
    config: PlanConfig,
    /// (now, expected short lines) — one planning pass each, same objects.
    steps: Vec<(i64, Vec<&'static str>)>,
}

fn case(name: &'static str, objects: Vec<Value>, steps: Vec<(i64, Vec<&'static str>)>) -> Case {
    Case { name, objects, config: PlanConfig::acting(), steps }
}

/// A case where the planner never acts, not even long after.
fn quiet(name: &'static str, objects: Vec<Value>) -> Case {
    case(name, objects, vec![(100_000, vec![])])
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in &cases {
        for (now, want) in &c.steps {
            let got = plan_lines(&c.objects, *now, &c.config);
            if got != *want {
                failures.push(format!("{} @+{now}:\n  got:  {got:#?}\n  want: {want:#?}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn cfg(f: impl FnOnce(&mut PlanConfig)) -> PlanConfig {
    let mut c = PlanConfig::acting();
    f(&mut c);
    c
}

/// What the planner does with the pod of `failed_node_world` once its force delete is due.
const A_FORCE_DELETED: [&str; 4] = [
    "patch-pod-status Pod ml/a-master-0 node-failure mark-failed-before-force-delete",
    "force-delete-pod Pod ml/a-master-0 node-failure node-unreachable",
    "event Pod ml/a-master-0 node-failure ForceDeletedStuckPod",
    "event PyTorchJob ml/a node-failure ForceDeletedStuckPod",
];

/// A job with one pod deleted by the taint manager at 300 on node n1, which became unreachable at 0.
fn failed_node_world() -> (Value, Value, Value) {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "n1"), 300);
    (job, pod, unreachable(node("n1", None), 0))
}
