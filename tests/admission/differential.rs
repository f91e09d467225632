//! trainguard's minimal serde views against full decodes:
//! - the AdmissionReview envelope and TrainJob view against kube's
//!   `AdmissionReview<DynamicObject>` on every fixture;
//! - `JobSetView` against `serde_json::Value` (there is no typed JobSet) and `BatchJobView`
//!   against k8s-openapi's `batch::v1::Job` on every state fixture;
//! - which TrainJobs fail to decode, against Kubeflow Trainer's own field types;
//! - the response bytes written field by field, against kube's `AdmissionReview` serialised.

use crate::support::fixtures as common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::batch::v1::Job;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use trainguard::cluster::{ChildJobState, ClusterView, GateFacts, JobSetState, JobSetWithJobs, StaticView};
use trainguard_core::admission::overrides;
use trainguard_core::model::jobset::{BatchJobView, JobSetView};
use trainguard_core::model::{KUEUE_QUEUE_LABEL, OPT_OUT_LABEL, OverridesField, ReviewEnvelope, TrainJobView};

// ---- AdmissionReview and TrainJob, on every fixture ---------------------------------------------

/// Compares what our views read from one object with kube's full decode of it.
fn compare_trainjob(case: &str, which: &str, full: &DynamicObject, raw: &RawValue, problems: &mut Vec<String>) {
    let ours = match TrainJobView::decode(raw) {
        Ok(v) => v,
        // DynamicObject leaves spec and status untyped; upstream's types must reject it too.
        Err(e) => {
            let object: Value = serde_json::from_str(raw.get()).expect("valid JSON");
            if upstream_decodes(&object) {
                problems.push(format!("{case}: {which}: upstream's types decode it, ours does not: {e}"));
            }
            return;
        }
    };
    let spec = full.data.get("spec");
    let mut same = |what: &str, theirs: Value, mine: Value| {
        if theirs != mine {
            problems.push(format!("{case}: {which}.{what}: kube {theirs}, ours {mine}"));
        }
    };
    same("metadata.name", json!(full.metadata.name.as_deref().unwrap_or("")), json!(ours.name()));
    same("metadata.namespace", json!(full.metadata.namespace), json!(ours.namespace()));
    same(
        "metadata.generateName",
        json!(full.metadata.generate_name.as_deref().unwrap_or("")),
        json!(ours.generate_name()),
    );
    let queue = full.metadata.labels.as_ref().and_then(|l| l.get(KUEUE_QUEUE_LABEL));
    same("kueue queue label", json!(queue), json!(ours.kueue_queue()));
    let opt_out = full.metadata.labels.as_ref().and_then(|l| l.get(OPT_OUT_LABEL));
    same("opt-out label", json!(opt_out), json!(ours.opt_out_label()));
    let field = |name: &str| spec.and_then(|s| s.get(name)).cloned().unwrap_or(Value::Null);
    same("spec.suspend", field("suspend"), json!(ours.spec().and_then(|s| s.suspend)));
    same("spec.managedBy", field("managedBy"), json!(ours.managed_by_raw()));
    let runtime_ref = ours.spec().and_then(|s| s.runtime_ref.as_ref());
    same(
        "spec.runtimeRef",
        field("runtimeRef"),
        runtime_ref.map_or(Value::Null, |r| {
            let mut v = json!({});
            for (k, x) in [("name", &r.name), ("apiGroup", &r.api_group), ("kind", &r.kind)] {
                if let Some(x) = x {
                    v[k] = json!(x);
                }
            }
            v
        }),
    );
    for f in OverridesField::ALL {
        let mine = overrides::try_parse(ours.overrides(f)).expect("fixture overrides parse");
        same(f.path(), field(f.json_name()), mine);
    }
    let actives: Vec<(String, i64)> = full
        .data
        .pointer("/status/jobsStatus")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|j| {
            let active = j.get("active")?.as_i64()?;
            (active > 0).then(|| (j["name"].as_str().unwrap_or("").to_string(), active))
        })
        .collect();
    let mine: Vec<(String, i64)> = ours.active_jobs().map(|(n, a)| (n.to_string(), i64::from(a))).collect();
    same("status.jobsStatus actives", json!(actives), json!(mine));
}

#[test]
fn envelope_and_trainjob_views_agree_with_kube() {
    let mut problems = Vec::new();
    let mut compared = 0;
    let mut objects = 0;
    for case in common::load_cases().into_iter().chain(common::load_bench_cases()) {
        let name = case.name.as_str();
        let full = serde_json::from_slice::<AdmissionReview<DynamicObject>>(&case.review);
        let ours = serde_json::from_slice::<ReviewEnvelope<'_>>(&case.review);
        let (full, ours) = match (full, ours) {
            (Ok(full), Ok(ours)) => (full, ours),
            // Where kube cannot decode the review, ours must not answer it as a normal review either.
            (Err(e), _) => {
                let rule = case.expect.rule.as_str();
                if !(case.expect.http == 400 || ["bad-object", "bad-operation"].contains(&rule)) {
                    problems.push(format!("{name}: kube rejects it ({e}) but the fixture expects rule {rule:?}"));
                }
                continue;
            }
            (Ok(_), Err(e)) => {
                problems.push(format!("{name}: kube decodes it, our envelope does not: {e}"));
                continue;
            }
        };
        if full.types.api_version.as_str() != ours.api_version.as_deref().unwrap_or("")
            || full.types.kind.as_str() != ours.kind.as_deref().unwrap_or("")
        {
            problems.push(format!("{name}: envelope apiVersion/kind differ"));
        }
        let (Some(req), Some(mine)) = (&full.request, &ours.request) else {
            if full.request.is_some() != ours.request.is_some() {
                problems.push(format!("{name}: request present for one decoder only"));
            }
            continue;
        };
        compared += 1;
        let mut same = |what: &str, theirs: Value, mine: Value| {
            if theirs != mine {
                problems.push(format!("{name}: request.{what}: kube {theirs}, ours {mine}"));
            }
        };
        same("uid", json!(req.uid), json!(mine.uid));
        same("operation", serde_json::to_value(&req.operation).expect("serialises"), json!(mine.operation));
        let kind = mine.kind.as_ref().expect("fixture has request.kind");
        same(
            "kind",
            json!([req.kind.group, req.kind.version, req.kind.kind]),
            json!([kind.group, kind.version, kind.kind]),
        );
        same("subResource", json!(req.sub_resource.as_deref().filter(|s| !s.is_empty())), json!(mine.sub_resource()));
        same("name", json!(req.name), json!(mine.name.as_deref().unwrap_or("")));
        same("namespace", json!(req.namespace), json!(mine.namespace));
        same("dryRun", json!(req.dry_run), json!(mine.dry_run.unwrap_or(false)));
        let groups: Option<Vec<String>> = mine.groups().map(|g| serde_json::from_str(g.get()).expect("groups"));
        same("userInfo.groups", json!(req.user_info.groups), json!(groups));
        if req.kind.kind != "TrainJob" {
            continue;
        }
        for (which, full_obj, raw) in
            [("object", &req.object, mine.object), ("oldObject", &req.old_object, mine.old_object)]
        {
            match (full_obj, raw.filter(|r| r.get() != "null")) {
                (Some(full_obj), Some(raw)) => {
                    objects += 1;
                    compare_trainjob(name, which, full_obj, raw, &mut problems);
                }
                (None, None) => {}
                _ => problems.push(format!("{name}: {which} present for one decoder only")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(compared >= 120 && objects >= 200, "compared {compared} reviews, {objects} objects");
}

// ---- JobSets and Jobs, on every state fixture -----------------------------------------------------

fn state_objects() -> Vec<(String, Value)> {
    common::load_cases()
        .into_iter()
        .filter_map(|c| Some((c.name.clone(), c.state?)))
        .flat_map(|(name, state)| {
            state["items"].as_array().cloned().unwrap_or_default().into_iter().map(move |item| (name.clone(), item))
        })
        .collect()
}

#[test]
fn jobset_and_job_views_agree_with_full_decodes() {
    let objects = state_objects();
    let (mut jobsets, mut jobs) = (0, 0);
    for (case, item) in &objects {
        match item["kind"].as_str() {
            Some("JobSet") => {
                jobsets += 1;
                let ours: JobSetView = serde_json::from_value(item.clone()).expect("JobSetView decodes");
                let state = trainguard::cluster::JobSetState::from(&ours);
                assert_eq!(
                    ours.metadata.name.as_deref(),
                    item.pointer("/metadata/name").and_then(Value::as_str),
                    "{case}"
                );
                assert_eq!(state.deleting, item.pointer("/metadata/deletionTimestamp").is_some(), "{case}");
                let theirs: Vec<(String, i32)> = item
                    .pointer("/status/replicatedJobsStatus")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|r| (r["name"].as_str().unwrap_or("").to_string(), r["active"].as_i64().unwrap_or(0) as i32))
                    .collect();
                assert_eq!(state.replicated_jobs, theirs, "{case}");
            }
            Some("Job") => {
                jobs += 1;
                let full: Job = serde_json::from_value(item.clone()).expect("k8s-openapi Job decodes");
                let ours: BatchJobView = serde_json::from_value(item.clone()).expect("BatchJobView decodes");
                assert_eq!(
                    ours.jobset_name(),
                    full.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("jobset.sigs.k8s.io/jobset-name"))
                        .map(String::as_str),
                    "{case}"
                );
                assert_eq!(trainguard::cluster::ChildJobState::from(&ours), child_state_from_full(&full), "{case}");
            }
            other => panic!("{case}: unexpected kind {other:?} in a state file"),
        }
    }
    assert!(jobsets >= 60 && jobs >= 60, "{jobsets} JobSets, {jobs} Jobs");
}

/// The gate's view of a Job, from k8s-openapi's type.
fn child_state_from_full(job: &Job) -> ChildJobState {
    let status = job.status.as_ref();
    ChildJobState {
        name: job.metadata.name.clone().unwrap_or_default(),
        active: status.and_then(|s| s.active).unwrap_or(0),
        terminating: status.and_then(|s| s.terminating),
        deleting: job.metadata.deletion_timestamp.is_some(),
    }
}

/// `StaticView::add_objects` (slim views) answers the gate exactly like a view built from the
/// full decodes.
#[test]
fn static_view_matches_full_decodes() {
    for case in common::load_cases().into_iter().filter(|c| c.state.is_some()) {
        let items = case.state.as_ref().expect("state")["items"].as_array().cloned().unwrap_or_default();
        let mut expected = StaticView::new();
        for item in &items {
            if item["kind"] == "JobSet" {
                let state = JobSetState {
                    deleting: item.pointer("/metadata/deletionTimestamp").is_some(),
                    replicated_jobs: item
                        .pointer("/status/replicatedJobsStatus")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|r| {
                            (r["name"].as_str().unwrap_or("").to_string(), r["active"].as_i64().unwrap_or(0) as i32)
                        })
                        .collect(),
                };
                let meta = |k: &str| item["metadata"][k].as_str().unwrap_or("").to_string();
                expected.insert_jobset(&meta("namespace"), &meta("name"), state);
            } else {
                let job: Job = serde_json::from_value(item.clone()).expect("Job");
                let jobset =
                    job.metadata.labels.as_ref().and_then(|l| l.get("jobset.sigs.k8s.io/jobset-name")).cloned();
                let ns = job.metadata.namespace.clone().unwrap_or_default();
                expected.insert_job(&ns, &jobset.expect("child Job label"), child_state_from_full(&job));
            }
        }
        let cluster = case.cluster();
        let got = cluster.gate_facts("ml-team", "llama");
        assert_eq!(got, expected.gate_facts("ml-team", "llama"), "{}", case.name);
        assert!(matches!(got, GateFacts::Known(JobSetWithJobs { .. })));
    }
}

// ---- Which TrainJobs fail to decode ---------------------------------------------------------------

/// Kubeflow Trainer's `TrainJob` (`pkg/apis/trainer/v1alpha1/trainjob_types.go`) restricted to
/// the fields trainguard reads, each typed as upstream declares it (`*bool`, `*string`, `int32`,
/// `map[string]string`, …). Go's decoder accepts `null` for any of them, as `Option` does here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Read by Debug only: the point is whether it decodes.
struct UpstreamTrainJob {
    metadata: Option<UpstreamMeta>,
    spec: Option<UpstreamSpec>,
    status: Option<UpstreamStatus>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct UpstreamMeta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct UpstreamSpec {
    runtime_ref: Option<UpstreamRuntimeRef>,
    suspend: Option<bool>,
    managed_by: Option<String>,
    // The overrides stay untyped on both sides on purpose: trainguard compares them as JSON and
    // reports their shape as field errors (422), never as a decode failure (docs/webhook.md §2).
    pod_spec_overrides: Option<Value>,
    pod_template_overrides: Option<Value>,
    runtime_patches: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct UpstreamRuntimeRef {
    name: Option<String>,
    api_group: Option<String>,
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct UpstreamStatus {
    jobs_status: Option<Vec<UpstreamJobStatus>>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct UpstreamJobStatus {
    name: Option<String>,
    active: Option<i32>,
}

fn ours_decodes(v: &Value) -> Result<(), trainguard_core::model::trainjob::DecodeError> {
    let raw = RawValue::from_string(v.to_string()).expect("valid JSON");
    TrainJobView::decode(&raw).map(|_| ())
}

/// Go's decoder reads a struct from a JSON object (or null) only; serde's derived structs would
/// also take an array, field by field, so that is checked apart.
fn upstream_decodes(v: &Value) -> bool {
    let object_or_null = |p: &str| v.pointer(p).is_none_or(|x| x.is_object() || x.is_null());
    let structs_are_objects = v.is_object()
        && ["/metadata", "/spec", "/spec/runtimeRef", "/status"].into_iter().all(object_or_null)
        && v.pointer("/status/jobsStatus")
            .and_then(Value::as_array)
            .is_none_or(|items| items.iter().all(Value::is_object));
    structs_are_objects && serde_json::from_value::<UpstreamTrainJob>(v.clone()).is_ok()
}

fn kube_decodes(v: &Value) -> bool {
    serde_json::from_value::<DynamicObject>(v.clone()).is_ok()
}

/// A running TrainJob as stored (from a fixture), with every JSON pointer into it.
fn base_trainjob() -> &'static (Value, Vec<String>) {
    static BASE: OnceLock<(Value, Vec<String>)> = OnceLock::new();
    BASE.get_or_init(|| {
        let case = common::load_cases()
            .into_iter()
            .find(|c| c.name == "podTemplateOverrides/u5-still-running")
            .expect("fixture");
        let review: Value = serde_json::from_slice(&case.review).expect("json");
        let object = review["request"]["oldObject"].clone();
        let mut all = Vec::new();
        pointers(&object, String::new(), &mut all);
        (object, all)
    })
}

/// A child Job as `kubectl` prints it (from a state fixture), with every JSON pointer into it.
fn base_job() -> &'static (Value, Vec<String>) {
    static BASE: OnceLock<(Value, Vec<String>)> = OnceLock::new();
    BASE.get_or_init(|| {
        let job = state_objects().into_iter().map(|(_, o)| o).find(|o| o["kind"] == "Job").expect("a Job fixture");
        let mut all = Vec::new();
        pointers(&job, String::new(), &mut all);
        (job, all)
    })
}

/// `base` with the node at `pointer` replaced by `value`.
fn replaced(base: &Value, pointer: &str, value: Value) -> Value {
    if pointer.is_empty() {
        return value;
    }
    let mut v = base.clone();
    *v.pointer_mut(pointer).expect("pointer exists") = value;
    v
}

fn broken(pointer: &str, value: Value) -> Value {
    let mut v = base_trainjob().0.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let target = if parent.is_empty() { &mut v } else { v.pointer_mut(parent).expect("parent exists") };
    match target {
        Value::Object(m) => {
            m.insert(key.replace("~1", "/"), value);
        }
        Value::Array(a) => a[key.parse::<usize>().expect("index")] = value,
        _ => panic!("{pointer}"),
    }
    v
}

#[test]
fn broken_trainjobs_are_rejected_like_upstream() {
    // (pointer, value, upstream and ours reject?, path ours reports)
    let table: Vec<(&str, Value, bool, &str)> = vec![
        ("/spec/suspend", json!("yes"), true, "spec.suspend"),
        ("/spec/suspend", json!(1), true, "spec.suspend"),
        ("/spec/suspend", Value::Null, false, ""),
        ("/spec/managedBy", json!(5), true, "spec.managedBy"),
        ("/spec/managedBy", json!(""), false, ""),
        ("/spec/runtimeRef", json!("torch-distributed"), true, "spec.runtimeRef"),
        ("/spec/runtimeRef/kind", json!(3), true, "spec.runtimeRef.kind"),
        ("/spec/runtimeRef/name", json!(["torch"]), true, "spec.runtimeRef.name"),
        ("/spec", json!("spec"), true, "spec"),
        ("/spec", Value::Null, false, ""),
        ("/metadata/name", json!(7), true, "metadata.name"),
        ("/metadata/namespace", json!({}), true, "metadata.namespace"),
        ("/metadata/generateName", json!([]), true, "metadata.generateName"),
        ("/metadata/labels", json!(["team"]), true, "metadata.labels"),
        ("/metadata/labels/kueue.x-k8s.io~1queue-name", json!(1), true, "metadata.labels.kueue.x-k8s.io/queue-name"),
        ("/metadata/labels/team", json!(true), true, "metadata.labels.team"),
        ("/metadata/labels/team", Value::Null, true, "metadata.labels.team"),
        ("/metadata/labels", Value::Null, false, ""),
        ("/status/jobsStatus", json!("node"), true, "status.jobsStatus"),
        ("/status/jobsStatus/0/active", json!("1"), true, "status.jobsStatus[0].active"),
        ("/status/jobsStatus/0/active", json!(3_000_000_000i64), true, "status.jobsStatus[0].active"),
        ("/status/jobsStatus/0/active", json!(1.5), true, "status.jobsStatus[0].active"),
        ("/status/jobsStatus/0/active", json!(-1), false, ""),
        ("/status/jobsStatus/0/name", json!(5), true, "status.jobsStatus[0].name"),
        ("/status/jobsStatus/0", json!("node"), true, "status.jobsStatus[0]"),
        ("/status", json!([]), true, "status"),
        // A JSON array is not a struct, even when its items would fill the fields by position.
        ("/spec", json!([true]), true, "spec"),
        (
            "/spec/runtimeRef",
            json!(["torch-distributed", "trainer.kubeflow.org", "ClusterTrainingRuntime"]),
            true,
            "spec.runtimeRef",
        ),
        ("/spec/runtimeRef", json!([]), true, "spec.runtimeRef"),
        ("/metadata", json!(["llama"]), true, "metadata"),
        ("/status/jobsStatus/0", json!(["node", 1]), true, "status.jobsStatus[0]"),
        ("/status/jobsStatus/0", Value::Null, true, "status.jobsStatus[0]"),
        // The overrides: any JSON decodes (their shape is a rule, not a type).
        ("/spec/podTemplateOverrides", json!("node"), false, ""),
        ("/spec/runtimePatches", json!({"manager": 5}), false, ""),
    ];
    for (pointer, value, rejects, path) in table {
        let object = broken(pointer, value.clone());
        let what = format!("{pointer} = {value}");
        assert_eq!(!upstream_decodes(&object), rejects, "upstream types: {what}");
        match ours_decodes(&object) {
            Ok(()) => assert!(!rejects, "ours accepts {what}"),
            Err(e) => {
                assert!(rejects, "ours rejects {what}: {e}");
                assert_eq!(e.path, path, "{what}: {e}");
            }
        }
    }
}

/// Where ours is deliberately more lenient than kube's full `DynamicObject` decode: fields
/// trainguard never reads are skipped unbuilt, and a `null` metadata is accepted as Go does.
#[test]
fn lenient_only_where_trainguard_does_not_read() {
    let table = [
        ("/metadata/annotations", json!({"ml-team/ticket": 4127})),
        ("/metadata/managedFields", json!("none")),
        ("/metadata/ownerReferences", json!({})),
        ("/metadata", Value::Null),
    ];
    for (pointer, value) in table {
        let object = broken(pointer, value.clone());
        assert!(!kube_decodes(&object), "kube's ObjectMeta accepts {pointer} = {value}");
        assert!(ours_decodes(&object).is_ok(), "ours rejects {pointer} = {value}");
        assert!(upstream_decodes(&object), "upstream's read fields reject {pointer} = {value}");
    }
}

/// Every JSON pointer into `v` (objects and arrays), root included.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `/status/jobsStatus/0/active` → `status.jobsStatus[0].active`, as serde_path_to_error prints.
fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if token.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    out
}

fn arb_replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(|f| json!(f)),
        "[a-z]{0,4}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([1, "a"])),
        Just(json!({"active": "x", "name": 1})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Replace any node of a real TrainJob with any value: ours rejects exactly when upstream's
    /// types (for the fields trainguard reads) do, and names a path at or below the change.
    #[test]
    fn ours_rejects_exactly_when_upstream_does(at in any::<prop::sample::Index>(), value in arb_replacement()) {
        let (base, all) = base_trainjob();
        let pointer = &all[at.index(all.len())];
        let object = replaced(base, pointer, value);
        let upstream = upstream_decodes(&object);
        match ours_decodes(&object) {
            Ok(()) => prop_assert!(upstream, "ours accepts what upstream rejects at {pointer}: {object}"),
            Err(e) => {
                prop_assert!(!upstream, "ours rejects what upstream accepts at {pointer}: {e}");
                prop_assert!(e.path.starts_with(&dotted(pointer)), "error at {:?} for a change at {pointer}", e.path);
            }
        }
    }

    /// Same for child Jobs: whatever our slim view rejects, k8s-openapi's `Job` rejects too.
    #[test]
    fn batch_job_view_rejects_only_what_the_full_job_rejects(
        at in any::<prop::sample::Index>(),
        value in arb_replacement(),
    ) {
        let (base, all) = base_job();
        let pointer = &all[at.index(all.len())];
        let object = replaced(base, pointer, value);
        let ours = serde_json::from_value::<BatchJobView>(object.clone()).is_ok();
        let full = serde_json::from_value::<Job>(object.clone()).is_ok();
        prop_assert!(ours || !full, "BatchJobView rejects what Job accepts at {pointer}");
    }
}

/// The response bytes written field by field equal kube's `AdmissionReview` serialised, for the
/// answer to every fixture that has no patch (a patch is re-encoded as base64 on purpose).
#[test]
fn response_bytes_agree_with_kube_types_on_every_fixture() {
    use trainguard_core::admission::response::review_response;
    let mut compared = std::collections::BTreeSet::new();
    for case in common::load_cases().into_iter().chain(common::load_bench_cases()) {
        let Ok(reviewed) = case.run() else { continue };
        if reviewed.decision.patch.is_some() {
            continue;
        }
        let kube = serde_json::to_vec(&review_response(&reviewed.uid, &reviewed.decision, &reviewed.name)).unwrap();
        assert_eq!(String::from_utf8_lossy(&reviewed.body), String::from_utf8_lossy(&kube), "{}", case.name);
        compared.insert(if reviewed.decision.allowed() { "allowed" } else { "denied" });
        if !reviewed.decision.warnings.is_empty() {
            compared.insert("warnings");
        }
    }
    assert_eq!(
        compared.into_iter().collect::<Vec<_>>(),
        ["allowed", "denied", "warnings"],
        "every kind of answer seen"
    );
}
