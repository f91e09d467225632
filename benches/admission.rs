//! Decision path: parse + rules + response encode, on the ~5 KB and ~150 KB reviews.
//! `make bench` runs it; figures go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

use trainguard_test_support::payloads;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trainguard_core::admission::{Endpoint, RulesConfig, review};

// The server's allocator (src/main.rs): the decision's few allocations cost what they cost there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn decision_path(c: &mut Criterion) {
    let rules = RulesConfig::default();
    let view = payloads::stopped_jobset_view();
    let cases = [
        ("small_unchanged", payloads::small_update(), "U1"),
        ("small_gated", payloads::small_gated(), "allow-gate"),
        ("small_denied", payloads::small_denied(), "U2"),
        ("small_retimed", payloads::small_retimed(), "U1"),
        ("small_create", payloads::small_create(), "allow-create"),
        ("large_unchanged", payloads::large_update(), "U1"),
        ("large_unchanged_restamped", payloads::large_update_restamped(), "U1"),
        ("large_gated", payloads::large_gated(), "allow-gate"),
    ];
    let mut group = c.benchmark_group("decision_path");
    for (name, body, rule) in &cases {
        let reviewed = review(Endpoint::Validate, body, &rules, &view).expect("valid review");
        assert_eq!(reviewed.decision.rule(), *rule, "{name}: {}", reviewed.decision.message());
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("{name}_{}B", body.len()), |b| {
            b.iter(|| review(Endpoint::Validate, black_box(body), &rules, &view).unwrap().body.len())
        });
    }
    group.finish();

    // Breakdown: the one-pass decode alone, and skipping the whole body without reading anything.
    type Envelope<'a> = trainguard_core::model::ReviewEnvelope<
        'a,
        Box<trainguard_core::model::object_only::ObjectOnly<trainguard_core::model::TrainJobView<'a>>>,
    >;
    let mut group = c.benchmark_group("decode_only");
    for (name, body, _) in [&cases[0], &cases[5]] {
        group.bench_function(format!("serde_json_{name}_{}B", body.len()), |b| {
            b.iter(|| serde_json::from_slice::<Envelope<'_>>(black_box(body)).unwrap().request.is_some())
        });
        group.bench_function(format!("serde_json_ignored_any_{}B", body.len()), |b| {
            b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(body)).is_ok())
        });
    }
    group.finish();
}

criterion_group!(benches, decision_path);
criterion_main!(benches);
