//! AdmissionReview bytes → `trainguard_core::admission::review` (decode + decide + response), on both
//! endpoints and both `--suspend-rule` settings, against a cluster where the gate has evidence.
//! The answer is checked with the same properties as tests/admission/fuzz_review.rs: no panic, uid echoed,
//! bounded non-empty denial messages, and a mutating patch that applies and is idempotent.
#![no_main]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a fuzz target: a panic is its failure report")]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use trainguard_core::admission::{Endpoint, RulesConfig, SuspendRule};
use trainguard::cluster::{ChildJobState, JobSetState, StaticView};

use trainguard_test_support::fuzz as review_check;

/// `ml-team/llama` (the name the seeds use) has a running JobSet, an active child Job and a
/// terminating one, so every gate rule (G1–G5) has something to find.
static CLUSTER: LazyLock<StaticView> = LazyLock::new(|| {
    let jobset = JobSetState { deleting: false, replicated_jobs: vec![("node".into(), 2), ("launcher".into(), 0)] };
    let mut view = StaticView::new().with_jobset("ml-team", "llama", jobset);
    view.insert_job("ml-team", "llama", ChildJobState { name: "llama-node-0".into(), active: 4, ..Default::default() });
    view.insert_job(
        "ml-team",
        "llama",
        ChildJobState { name: "llama-node-1".into(), terminating: Some(3), deleting: true, ..Default::default() },
    );
    view
});

static CONFIGS: LazyLock<[RulesConfig; 2]> = LazyLock::new(|| {
    [RulesConfig::default(), RulesConfig { suspend_rule: SuspendRule::New, ..RulesConfig::default() }]
});

fuzz_target!(|body: &[u8]| {
    for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
        for config in CONFIGS.iter() {
            if let Err(problem) = review_check::check(endpoint, body, config, &*CLUSTER) {
                panic!("{endpoint:?} {:?}: {problem}", config.suspend_rule);
            }
        }
    }
});
