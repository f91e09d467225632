//! One part of answering a review, repeated N times, for `benches/instructions.py --parts`: it
//! runs this under callgrind with two values of N and divides the difference, which gives the
//! instructions one review costs in each part, without TLS, HTTP or the runtime.
//!
//! - `skip`: one pass over the whole body that reads nothing (`IgnoredAny` through serde_json),
//!   the least a decoder that looks at every byte once costs;
//! - `decode`: the one-pass decode of the envelope and both objects into the rules' views;
//! - `review`: the whole answer (decode, rules, response bytes), as the server calls it.
//!
//! The payloads are the Criterion bench's (`crates/test-support/src/payloads.rs`); each review is checked to be
//! decided by the rule its name stands for.
//!
//! Usage: review_parts skip|decode|review small|gated|denied|retimed|create|large|restamped N
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

use trainguard_test_support::payloads;

use std::hint::black_box;

use trainguard_core::admission::{Endpoint, RulesConfig, review};
use trainguard_core::model::TrainJobView;
use trainguard_core::model::object_only::ObjectOnly;

// The server's allocator (src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Envelope<'a> = trainguard_core::model::ReviewEnvelope<'a, Box<ObjectOnly<TrainJobView<'a>>>>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: review_parts skip|decode|review small|gated|denied|retimed|create|large|restamped N";
    let [_, part, payload, n] = args.as_slice() else { panic!("{usage}") };
    let (body, rule) = match payload.as_str() {
        "small" => (payloads::small_update(), "U1"),
        "gated" => (payloads::small_gated(), "allow-gate"),
        "denied" => (payloads::small_denied(), "U2"),
        "retimed" => (payloads::small_retimed(), "U1"),
        "create" => (payloads::small_create(), "allow-create"),
        "large" => (payloads::large_update(), "U1"),
        "restamped" => (payloads::large_update_restamped(), "U1"),
        _ => panic!("{usage}"),
    };
    let n: usize = n.parse().unwrap_or_else(|_| panic!("{usage}"));
    let rules = RulesConfig::default();
    let view = payloads::stopped_jobset_view();
    let decided = review(Endpoint::Validate, &body, &rules, &view).expect("a valid review");
    assert_eq!(decided.decision.rule(), rule, "{payload}: {}", decided.decision.message());
    // The skip must take the whole body, or the count would be of an early error.
    serde_json::from_slice::<serde::de::IgnoredAny>(&body).expect("the whole body skips");

    let mut total = 0;
    for _ in 0..n {
        total += match part.as_str() {
            "skip" => usize::from(serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&body)).is_ok()),
            "decode" => usize::from(
                serde_json::from_slice::<Envelope<'_>>(black_box(&body)).expect("decodes").request.is_some(),
            ),
            "review" => review(Endpoint::Validate, black_box(&body), &rules, &view).expect("answers").body.len(),
            _ => panic!("{usage}"),
        };
    }
    // Printed so that no repetition can be optimised away.
    println!("{total}");
}
