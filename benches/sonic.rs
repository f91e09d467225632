//! Would sonic-rs do for `src/fastjson`? The one-pass decode of the hot path's views, three ways
//! on the same bodies: `src/fastjson` (what the server runs), sonic-rs, serde_json. sonic-rs
//! cannot produce serde_json's `&RawValue`, so it decodes a mirror of the views that differs
//! only there: the three overrides fields are `sonic_rs::LazyValue` (its raw, unparsed value).
//! Every case is checked to read the same fields and overrides text before it is timed.
//!
//! Run: `cargo bench --features sonic-bench --bench sonic` (docs/benchmarks.md has the figures).
// The mirror decodes every field the views decode (that is the work being compared); only some
// are read back for the agreement check.
#![allow(dead_code)]

mod payloads;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde::Deserialize;
use trainguard::model::borrowed_str::BorrowedStr;
use trainguard::model::object_only::ObjectOnly;
use trainguard::model::{ReviewEnvelope, TrainJobView};

type Envelope<'a> = ReviewEnvelope<'a, Box<ObjectOnly<TrainJobView<'a>>>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Env<'a> {
    #[serde(borrow)]
    api_version: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    kind: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    request: Option<Req<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Req<'a> {
    #[serde(borrow)]
    uid: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    kind: Option<Gvk<'a>>,
    #[serde(borrow)]
    sub_resource: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    operation: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    name: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    namespace: Option<BorrowedStr<'a>>,
    dry_run: Option<bool>,
    #[serde(borrow)]
    object: Option<Box<Tj<'a>>>,
    #[serde(borrow)]
    old_object: Option<Box<Tj<'a>>>,
}

#[derive(Deserialize)]
struct Gvk<'a> {
    #[serde(borrow)]
    group: BorrowedStr<'a>,
    #[serde(borrow)]
    version: BorrowedStr<'a>,
    #[serde(borrow)]
    kind: BorrowedStr<'a>,
}

#[derive(Deserialize)]
struct Tj<'a> {
    #[serde(borrow)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow)]
    spec: Option<Spec<'a>>,
    #[serde(borrow)]
    status: Option<Status<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(borrow)]
    name: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    generate_name: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    namespace: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    labels: Option<trainguard::model::LabelsView<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    suspend: Option<bool>,
    #[serde(borrow)]
    managed_by: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    runtime_ref: Option<RuntimeRef<'a>>,
    #[serde(borrow)]
    pod_spec_overrides: Option<sonic_rs::LazyValue<'a>>,
    #[serde(borrow)]
    pod_template_overrides: Option<sonic_rs::LazyValue<'a>>,
    #[serde(borrow)]
    runtime_patches: Option<sonic_rs::LazyValue<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeRef<'a> {
    #[serde(borrow)]
    name: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    api_group: Option<BorrowedStr<'a>>,
    #[serde(borrow)]
    kind: Option<BorrowedStr<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    #[serde(borrow)]
    jobs_status: Option<Vec<JobStatus<'a>>>,
}

#[derive(Deserialize)]
struct JobStatus<'a> {
    #[serde(borrow)]
    name: Option<BorrowedStr<'a>>,
    active: Option<i32>,
}

/// What both decodes must agree on: uid, operation, and per object its name, suspend flag, the
/// raw runtime patches text and the active counts.
fn summary_fast(e: &Envelope<'_>) -> String {
    let r = e.request.as_ref().unwrap();
    let obj = |o: &Option<Box<ObjectOnly<TrainJobView<'_>>>>| {
        let t = &o.as_ref().unwrap().0;
        let spec = t.spec.as_ref().unwrap();
        let active: Vec<_> = t.status.iter().flat_map(|s| s.jobs_status.iter().flatten()).map(|j| j.active).collect();
        format!(
            "{:?}/{:?}/{:?}/{:?}",
            t.metadata.as_ref().unwrap().name.as_deref(),
            spec.suspend,
            spec.runtime_patches.map(|r| r.get()),
            active
        )
    };
    format!("{:?} {:?} {} {}", r.uid.as_deref(), r.operation.as_deref(), obj(&r.object), obj(&r.old_object))
}

fn summary_sonic(e: &Env<'_>) -> String {
    let r = e.request.as_ref().unwrap();
    let obj = |o: &Option<Box<Tj<'_>>>| {
        let t = o.as_ref().unwrap();
        let spec = t.spec.as_ref().unwrap();
        let active: Vec<_> = t.status.iter().flat_map(|s| s.jobs_status.iter().flatten()).map(|j| j.active).collect();
        format!(
            "{:?}/{:?}/{:?}/{:?}",
            t.metadata.as_ref().unwrap().name.as_ref().map(|s| &*s.0),
            spec.suspend,
            spec.runtime_patches.as_ref().map(|r| r.as_raw_str()),
            active
        )
    };
    format!(
        "{:?} {:?} {} {}",
        r.uid.as_ref().map(|s| &*s.0),
        r.operation.as_ref().map(|s| &*s.0),
        obj(&r.object),
        obj(&r.old_object)
    )
}

fn decode(c: &mut Criterion) {
    let cases = [
        ("small", payloads::small_update()),
        ("small_gated", payloads::small_gated()),
        ("large", payloads::large_update()),
    ];
    let mut group = c.benchmark_group("decode_views");
    for (name, body) in &cases {
        let fast = trainguard::fastjson::from_slice::<Envelope<'_>>(body).expect("fastjson decodes");
        let sonic = sonic_rs::from_slice::<Env<'_>>(body).expect("sonic-rs decodes");
        let full = serde_json::from_slice::<Envelope<'_>>(body).expect("serde_json decodes");
        assert_eq!(summary_fast(&fast), summary_sonic(&sonic), "{name}: sonic-rs read something else");
        assert_eq!(summary_fast(&fast), summary_fast(&full), "{name}");
        group.bench_function(format!("fastjson_{name}_{}B", body.len()), |b| {
            b.iter(|| trainguard::fastjson::from_slice::<Envelope<'_>>(black_box(body)).unwrap().request.is_some())
        });
        group.bench_function(format!("sonic_rs_{name}_{}B", body.len()), |b| {
            b.iter(|| sonic_rs::from_slice::<Env<'_>>(black_box(body)).unwrap().request.is_some())
        });
        group.bench_function(format!("serde_json_{name}_{}B", body.len()), |b| {
            b.iter(|| serde_json::from_slice::<Envelope<'_>>(black_box(body)).unwrap().request.is_some())
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
