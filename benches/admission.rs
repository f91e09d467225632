//! Decision path: parse + rules + response encode, on the ~5 KB and ~150 KB reviews.
//! `make bench` runs it; figures go to docs/benchmarks.md.

mod payloads;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trainguard::admission::{Endpoint, RulesConfig, review};

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

    // Breakdown: the one-pass decode alone (the fast decoder the server uses, and serde_json's
    // for comparison), and skipping the whole body without reading anything.
    type Envelope<'a> = trainguard::model::ReviewEnvelope<
        'a,
        Box<trainguard::model::object_only::ObjectOnly<trainguard::model::TrainJobView<'a>>>,
    >;
    let mut group = c.benchmark_group("decode_only");
    for (name, body, _) in [&cases[0], &cases[5]] {
        group.bench_function(format!("fastjson_{name}_{}B", body.len()), |b| {
            b.iter(|| trainguard::fastjson::from_slice::<Envelope<'_>>(black_box(body)).unwrap().request.is_some())
        });
        group.bench_function(format!("serde_json_{name}_{}B", body.len()), |b| {
            b.iter(|| serde_json::from_slice::<Envelope<'_>>(black_box(body)).unwrap().request.is_some())
        });
        group.bench_function(format!("fastjson_ignored_any_{}B", body.len()), |b| {
            b.iter(|| trainguard::fastjson::from_slice::<serde::de::IgnoredAny>(black_box(body)).is_ok())
        });
        group.bench_function(format!("serde_json_ignored_any_{}B", body.len()), |b| {
            b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(body)).is_ok())
        });
    }
    group.finish();
}

/// The denial's log line: through tracing-subscriber (what the server did before, and still
/// does when it cannot write the line itself) and formatted by hand, into buffers that are
/// thrown away (the batch writer's copy is the same for both).
fn denial_log_line(c: &mut Criterion) {
    use trainguard::config::LogFormat;
    use trainguard::log_line::Denial;
    let line = Denial {
        webhook: "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        uid: "2b9a1c5e-7d0f-4c1a-9e55-3f7d8a4b1c20",
        operation: "UPDATE",
        namespace: "ml-team",
        name: "llama",
        rule: "U2",
        dry_run: false,
        detail: "spec.runtimePatches: Forbidden: can only be changed while the TrainJob is suspended and its \
                 JobSet has no active or terminating pods; suspend the TrainJob first (spec.suspend: true)",
    };
    let mut group = c.benchmark_group("denial_log_line");
    for (name, format) in [("text", LogFormat::Text), ("json", LogFormat::Json)] {
        let filter = tracing_subscriber::EnvFilter::new("info");
        let subscriber = trainguard::telemetry::subscriber(format, filter, std::io::sink, false);
        tracing::subscriber::with_default(subscriber, || {
            group.bench_function(format!("tracing_subscriber_{name}"), |b| {
                b.iter(|| trainguard::server::routes::log_denial_event(black_box(&line)))
            });
        });
        let mut out = Vec::with_capacity(1024);
        group.bench_function(format!("by_hand_{name}"), |b| {
            b.iter(|| {
                out.clear();
                black_box(&line).write(format, "trainguard::server::routes", std::time::SystemTime::now(), &mut out);
                out.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decision_path, denial_log_line);
criterion_main!(benches);
