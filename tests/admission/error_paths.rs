//! Bad input (docs/webhook.md §1, §6, §8): decode errors name the JSON path, messages stay under 1 KiB,
//! deep nesting neither overflows the stack nor slips a change through, and no body whatever
//! makes `review` panic; every answered review echoes the request's uid.

use crate::support::fixtures as common;

use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{Value, json};
use trainguard::cluster::Offline;
use trainguard_core::admission::{Endpoint, ProtocolError, Reviewed, RulesConfig, review};

fn fixture(name: &str) -> Value {
    let case = common::load_cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}"));
    serde_json::from_slice(&case.review).expect("fixture is JSON")
}

fn run(endpoint: Endpoint, body: &[u8]) -> Result<Reviewed<'_>, ProtocolError> {
    review(endpoint, body, &RulesConfig::default(), &Offline)
}

fn status(reviewed: &Reviewed) -> Value {
    let v: Value = serde_json::from_slice(&reviewed.body).expect("response is JSON");
    v["response"]["status"].clone()
}

/// `review_json` with `value` at `pointer` (which must exist up to its parent).
fn with(mut review_json: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    match review_json.pointer_mut(parent).unwrap_or_else(|| panic!("{parent}")) {
        Value::Object(m) => {
            m.insert(key.to_string(), value);
        }
        Value::Array(a) => a[key.parse::<usize>().expect("index")] = value,
        other => panic!("{pointer} in {other}"),
    }
    review_json
}

#[test]
fn decode_errors_name_the_json_path() {
    let base = fixture("podTemplateOverrides/u3-run-stopped");
    let table = [
        ("/request/object/spec/suspend", json!("yes"), "request.object is not a valid TrainJob at spec.suspend: "),
        (
            "/request/oldObject/spec/managedBy",
            json!(5),
            "request.oldObject is not a valid TrainJob at spec.managedBy: ",
        ),
        ("/request/object/spec/runtimeRef", json!([]), "request.object is not a valid TrainJob at spec.runtimeRef: "),
        ("/request/object/spec", json!([true]), "request.object is not a valid TrainJob at spec: "),
        (
            "/request/object/metadata/labels/team",
            json!(1),
            "request.object is not a valid TrainJob at metadata.labels.team: ",
        ),
        ("/request/object/metadata/name", json!(7), "request.object is not a valid TrainJob at metadata.name: "),
        (
            "/request/oldObject/status/jobsStatus/0/active",
            json!("0"),
            "request.oldObject is not a valid TrainJob at status.jobsStatus[0].active: ",
        ),
        ("/request/object", json!(42), "request.object is not a valid TrainJob: expected a JSON object"),
        ("/request/oldObject", Value::Null, "request.oldObject is missing"),
    ];
    for (pointer, value, expected) in table {
        let body = serde_json::to_vec(&with(base.clone(), pointer, value)).expect("json");
        let reviewed = run(Endpoint::Validate, &body).unwrap_or_else(|e| panic!("{pointer}: HTTP 400 ({e})"));
        let status = status(&reviewed);
        assert!(!reviewed.decision.allowed(), "{pointer}");
        assert_eq!(status["code"], 400, "{pointer}");
        assert_eq!(status["reason"], "BadRequest", "{pointer}");
        let message = status["message"].as_str().expect("message");
        assert!(message.starts_with(expected), "{pointer}: {message:?}");
    }
}

/// A JSON array where the envelope has an object is not an AdmissionReview (serde's derived
/// structs would read it field by field).
#[test]
fn arrays_are_not_objects_in_the_envelope() {
    let base = fixture("podTemplateOverrides/u3-run-stopped");
    let uid = base["request"]["uid"].clone();
    let table = [("/request", json!([uid])), ("/request", json!([" "]))];
    for (pointer, value) in table {
        let body = serde_json::to_vec(&with(base.clone(), pointer, value.clone())).expect("json");
        let err = run(Endpoint::Validate, &body).expect_err(&format!("{pointer} = {value}"));
        assert!(err.to_string().contains("expected a JSON object"), "{err}");
    }
    let body = serde_json::to_vec(&json!(["admission.k8s.io/v1", "AdmissionReview", base["request"]])).expect("json");
    let err = run(Endpoint::Validate, &body).expect_err("a top-level list");
    assert_eq!(err.to_string(), "expected an admission.k8s.io/v1 AdmissionReview, got a JSON list");
    // request.kind as [group, version, kind] is not the TrainJob kind either.
    let body = with(base.clone(), "/request/kind", json!(["trainer.kubeflow.org", "v1alpha1", "TrainJob"]));
    let err = run(Endpoint::Validate, &serde_json::to_vec(&body).expect("json")).expect_err("kind as a list");
    assert!(err.to_string().contains("expected a JSON object"), "{err}");
}

#[test]
fn messages_stay_under_1_kib() {
    let base = fixture("podTemplateOverrides/u3-run-stopped");
    let huge = "y".repeat(100_000);
    let answered = [
        ("/request/object/spec/suspend", json!(huge)),
        ("/request/kind/kind", json!(huge)),
        ("/request/operation", json!(huge)),
        ("/request/object/metadata/labels/team", json!([huge])),
    ];
    for (pointer, value) in answered {
        let body = serde_json::to_vec(&with(base.clone(), pointer, value)).expect("json");
        let reviewed = run(Endpoint::Validate, &body).unwrap_or_else(|e| panic!("{pointer}: {e}"));
        let message = status(&reviewed)["message"].as_str().unwrap_or("").to_string();
        assert!(!message.is_empty() && message.len() < 1024, "{pointer}: {} bytes", message.len());
        assert!(reviewed.decision.message().len() < 1024);
    }
    // Protocol failures quote what they could not read too; the server sends that in a Status.
    for (pointer, value) in [("/request/dryRun", json!(huge)), ("/request/uid", json!([huge]))] {
        let body = serde_json::to_vec(&with(base.clone(), pointer, value)).expect("json");
        let err = run(Endpoint::Validate, &body).expect_err(pointer);
        assert!(err.to_string().len() < 1100, "{pointer}: {} bytes", err.to_string().len());
    }
}

fn deep(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Splices raw JSON text in place of `"__DEEP__"` (serde_json::Value could not hold it).
fn splice(review_json: &Value, raw: &str) -> Vec<u8> {
    serde_json::to_string(review_json).expect("json").replacen("\"__DEEP__\"", raw, 1).into_bytes()
}

#[test]
fn deep_nesting_is_safe_and_never_waves_a_change_through() {
    // A million levels in a field trainguard never reads: skipped, no stack overflow.
    let stopped = fixture("podTemplateOverrides/u1-metadata-only");
    let body = splice(&with(stopped.clone(), "/request/object/spec/trainer/x", json!("__DEEP__")), &deep(1_000_000));
    let reviewed = run(Endpoint::Validate, &body).expect("answered");
    assert_eq!(reviewed.decision.audit_rules(), "U1");

    // Overrides too deep to compare: on CREATE a shape error, not an allowed create.
    let create = fixture("podTemplateOverrides/create-suspended");
    let deep_item = format!(r#"[{{"targetJobs":[{{"name":"node"}}],"x":{}}}]"#, deep(500));
    let body = splice(&with(create, "/request/object/spec/podTemplateOverrides", json!("__DEEP__")), &deep_item);
    let reviewed = run(Endpoint::Validate, &body).expect("answered");
    assert_eq!(reviewed.decision.audit_rules(), "shape");
    assert!(
        reviewed.decision.message().contains("nested more than 128 levels deep"),
        "{}",
        reviewed.decision.message()
    );

    // While running, from no overrides to deep ones: a change (U2), not U1.
    let running = fixture("podTemplateOverrides/u2-change-while-running");
    let mut review_json = running;
    review_json["request"]["oldObject"]["spec"].as_object_mut().expect("spec").remove("podTemplateOverrides");
    let body = splice(&with(review_json, "/request/object/spec/podTemplateOverrides", json!("__DEEP__")), &deep_item);
    let reviewed = run(Endpoint::Validate, &body).expect("answered");
    assert_eq!(reviewed.decision.audit_rules(), "shape,U2");
    assert!(!reviewed.decision.allowed());
}

// ---- Garbage in: no panic, and every answer echoes the uid ----------------------------------------

struct Corpus {
    /// (review JSON, every JSON pointer into it)
    reviews: Vec<(Value, Vec<String>)>,
}

fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let reviews = common::load_cases()
            .into_iter()
            .filter_map(|c| serde_json::from_slice::<Value>(&c.review).ok())
            .map(|v| {
                let mut pointers = Vec::new();
                collect_pointers(&v, String::new(), &mut pointers);
                (v, pointers)
            })
            .collect();
        Corpus { reviews }
    })
}

fn collect_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                collect_pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect_pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "status", "", "trainer.kubeflow.org"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A body derived from a fixture: a node replaced, bytes cut, or bytes flipped.
#[derive(Debug, Clone)]
enum Garbage {
    Replace { review: prop::sample::Index, at: prop::sample::Index, value: Value },
    Truncate { review: prop::sample::Index, at: prop::sample::Index },
    Flip { review: prop::sample::Index, at: Vec<(prop::sample::Index, u8)> },
    Bytes(Vec<u8>),
}

fn arb_garbage() -> impl Strategy<Value = Garbage> {
    let idx = any::<prop::sample::Index>;
    prop_oneof![
        4 => (idx(), idx(), arb_value()).prop_map(|(review, at, value)| Garbage::Replace { review, at, value }),
        1 => (idx(), idx()).prop_map(|(review, at)| Garbage::Truncate { review, at }),
        2 => (idx(), prop::collection::vec((idx(), any::<u8>()), 1..4))
            .prop_map(|(review, at)| Garbage::Flip { review, at }),
        1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Garbage::Bytes),
    ]
}

fn body_of(g: &Garbage) -> Vec<u8> {
    let reviews = &corpus().reviews;
    match g {
        Garbage::Replace { review, at, value } => {
            let (v, pointers) = &reviews[review.index(reviews.len())];
            let pointer = &pointers[at.index(pointers.len())];
            let mut v = v.clone();
            if pointer.is_empty() {
                v = value.clone();
            } else {
                *v.pointer_mut(pointer).expect("exists") = value.clone();
            }
            serde_json::to_vec(&v).expect("json")
        }
        Garbage::Truncate { review, at } => {
            let bytes = serde_json::to_vec(&reviews[review.index(reviews.len())].0).expect("json");
            bytes[..at.index(bytes.len() + 1)].to_vec()
        }
        Garbage::Flip { review, at } => {
            let mut bytes = serde_json::to_vec(&reviews[review.index(reviews.len())].0).expect("json");
            for (i, b) in at {
                let n = bytes.len();
                bytes[i.index(n)] = *b;
            }
            bytes
        }
        Garbage::Bytes(b) => b.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics_and_answers_echo_the_uid(g in arb_garbage(), mutate in any::<bool>()) {
        let body = body_of(&g);
        let endpoint = if mutate { Endpoint::Mutate } else { Endpoint::Validate };
        let Ok(reviewed) = run(endpoint, &body) else { return Ok(()) };
        // Answered: the body was an admission.k8s.io/v1 AdmissionReview with a request and a uid.
        // serde_json passes over values the decode skips without checking their `\u` escapes, so
        // such a body is answered although it does not read whole; its envelope is read as the
        // decode read it.
        let sent: Value = match serde_json::from_slice(&body) {
            Ok(sent) => sent,
            Err(e) => {
                prop_assert!(e.to_string().contains("unicode"), "answered a body that is not JSON: {}", e);
                let envelope: trainguard_core::model::ReviewEnvelope<'_, serde::de::IgnoredAny> =
                    serde_json::from_slice(&body).expect("answered, so the envelope reads");
                let uid = envelope.request.as_ref().and_then(|r| r.uid.as_deref());
                serde_json::json!({"apiVersion": envelope.api_version, "request": {"uid": uid}})
            }
        };
        prop_assert_eq!(sent["apiVersion"].as_str(), Some("admission.k8s.io/v1"));
        let sent_uid = sent["request"]["uid"].as_str().expect("an answered request has a uid");
        prop_assert!(!sent_uid.is_empty());
        let response = common::response_of(&reviewed.body);
        prop_assert_eq!(response.uid.as_str(), sent_uid);
        prop_assert_eq!(&*reviewed.uid, sent_uid);
        prop_assert_eq!(response.allowed, reviewed.decision.allowed());
        prop_assert!(response.result.message.len() < 1024, "{} bytes", response.result.message.len());
        if !response.allowed {
            prop_assert!([400, 403, 422, 500].contains(&response.result.code), "code {}", response.result.code);
        }
    }
}

/// A review that names no object, or another one than its objects, is answered without a word
/// about any JobSet: the running JobSet of the objects' TrainJob is in the cluster state.
#[test]
fn a_review_is_judged_only_for_the_object_it_names() {
    for name in ["general/bad-object-unnamed-update", "general/bad-object-foreign-namespace"] {
        let case = common::load_cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}"));
        let reviewed = case.run().expect("answered");
        let text = String::from_utf8_lossy(&reviewed.body).into_owned();
        for word in ["JobSet", "active", "ml-team/llama", "llama-node"] {
            assert!(!text.contains(word), "{name}: the answer mentions {word:?}: {text}");
        }
        assert_eq!(status(&reviewed)["code"], 400, "{name}");
    }
}

/// What a review echoes is cut to what the API server itself sends: a 36-byte uid (128 kept),
/// names of at most 253 bytes.
#[test]
fn echoed_uid_and_names_are_cut() {
    let base = fixture("podTemplateOverrides/u3-run-stopped");
    let long = "x".repeat(100_000);
    let review_json = with(with(base, "/request/uid", json!(long)), "/request/name", json!(long));
    let body = serde_json::to_vec(&review_json).unwrap();
    let reviewed = run(Endpoint::Validate, &body).expect("answered");
    assert!(reviewed.body.len() < 4096, "answer of {} bytes", reviewed.body.len());
    assert_eq!((reviewed.uid.len(), reviewed.name.len()), (128, 253));
    assert_eq!(status(&reviewed)["code"], 400, "a 100,000-byte name is not the API server's");
}

/// One error per item of a huge list was an answer a hundred times the request: now the first 50
/// are kept and the rest counted, whatever the list holds.
#[test]
fn a_huge_list_of_bad_items_gets_a_bounded_answer() {
    let base = fixture("podSpecOverrides/create-suspended");
    let cases = [
        ("numbers", json!(vec![1; 200_000])),
        ("empty objects", json!(vec![json!({}); 100_000])),
        ("targets without names", json!([{"targetJobs": vec![json!({}); 100_000]}])),
    ];
    for (what, list) in cases {
        let body = serde_json::to_vec(&with(base.clone(), "/request/object/spec/podSpecOverrides", list)).unwrap();
        let reviewed = run(Endpoint::Validate, &body).expect("answered");
        assert!(reviewed.body.len() < 64 * 1024, "{what}: answer of {} bytes", reviewed.body.len());
        let status = status(&reviewed);
        assert_eq!(status["details"]["causes"].as_array().map(Vec::len), Some(50), "{what}");
        let message = status["message"].as_str().unwrap();
        assert!(message.contains("more errors]"), "{what}: {message}");
    }
}
