//! Time-bounded fuzzing of the admission path (`trainguard_core::admission::review`) inside
//! `make test`: realistic AdmissionReviews for TrainJobs, the same with JSON values replaced or
//! removed, the same with bytes flipped, inserted or cut, and plain random bytes. For every input:
//! no panic; every `Ok` is an AdmissionReview whose `response.uid` echoes `request.uid`; every
//! denial has a non-empty message under 1 KiB; only allowed responses carry a patch.
//!
//! The budget is `TRAINGUARD_FUZZ_SECONDS` (default 3) per test; the seed is random unless
//! `TRAINGUARD_FUZZ_SEED` (64 hex digits) is set, and is printed with every failure. The
//! libFuzzer targets under fuzz/ cover the same path without a time limit.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use trainguard::cluster::{ChildJobState, JobSetState, StaticView};
use trainguard_core::admission::{Endpoint, RulesConfig, SuspendRule};

use crate::support::fuzz as review_check;

// ---------------------------------------------------------------------------------------------
// Realistic inputs

fn name() -> impl Strategy<Value = String> {
    // Mostly the job whose JobSet the cluster strategy fills, so the gate has something to find.
    prop_oneof![
        6 => Just("llama".to_string()),
        1 => Just("bert-ft".to_string()),
        1 => "[a-z][a-z0-9-]{0,70}",
        1 => ".{0,12}",
    ]
}

fn managed_by() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("trainer.kubeflow.org/trainjob-controller".to_string())),
        Just(Some("kueue.x-k8s.io/multikueue".to_string())),
        Just(Some(String::new())),
        ".{0,40}".prop_map(Some),
    ]
}

fn target_jobs() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        prop_oneof![Just("node"), Just("dataset-initializer"), Just(""), Just("model-initializer")],
        0..3,
    )
    .prop_map(|names| Value::Array(names.into_iter().map(|n| json!({"name": n})).collect()))
}

fn override_item() -> impl Strategy<Value = Value> {
    (target_jobs(), prop::option::of("[a-z]{1,8}"), prop::collection::vec("[a-z-]{1,20}", 0..3)).prop_map(
        |(targets, sa, gates)| {
            let mut item = json!({"targetJobs": targets});
            if let Some(sa) = sa {
                item["serviceAccountName"] = json!(sa);
            }
            if !gates.is_empty() {
                item["schedulingGates"] = Value::Array(gates.into_iter().map(|g| json!({"name": g})).collect());
            }
            item
        },
    )
}

fn runtime_patch() -> impl Strategy<Value = Value> {
    (prop_oneof![Just("kueue.x-k8s.io/manager".to_string()), Just(String::new()), "[a-z./-]{1,30}"], any::<u8>())
        .prop_map(|(manager, zone)| {
            json!({
                "manager": manager,
                "time": "2025-01-01T00:00:00Z",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", "template": {"spec": {"template": {"spec": {
                        "nodeSelector": {"zone": format!("z{zone}")}}}}}}
                ]}}}
            })
        })
}

/// The overrides under one of the three field names (docs/webhook.md §2), or none.
fn overrides() -> impl Strategy<Value = Option<(&'static str, Value)>> {
    prop_oneof![
        Just(None),
        prop::collection::vec(override_item(), 0..3).prop_map(|v| Some(("podSpecOverrides", Value::Array(v)))),
        prop::collection::vec(override_item(), 0..3).prop_map(|v| Some(("podTemplateOverrides", Value::Array(v)))),
        prop::collection::vec(runtime_patch(), 0..3).prop_map(|v| Some(("runtimePatches", Value::Array(v)))),
        Just(Some(("podSpecOverrides", Value::Null))),
    ]
}

fn trainjob(ns: String, name: String) -> impl Strategy<Value = Value> {
    (
        prop_oneof![1 => Just(None), 1 => Just(Some(false)), 2 => Just(Some(true))],
        managed_by(),
        overrides(),
        any::<bool>(),
        prop::collection::vec(0i32..4, 0..3),
        any::<bool>(),
    )
        .prop_map(move |(suspend, managed_by, overrides, kueue, active, runtime_ref)| {
            let mut job = json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": ns, "uid": "6a4f0c1e", "resourceVersion": "42"},
                "spec": {"trainer": {"image": "pytorch:2.5", "numNodes": 2}},
            });
            if let Some(s) = suspend {
                job["spec"]["suspend"] = json!(s);
            }
            if let Some(m) = managed_by {
                job["spec"]["managedBy"] = json!(m);
            }
            if let Some((field, value)) = overrides {
                job["spec"][field] = value;
            }
            if runtime_ref {
                job["spec"]["runtimeRef"] = json!({"name": "torch-distributed"});
            }
            if kueue {
                job["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "team-a"});
            }
            if !active.is_empty() {
                let status: Vec<Value> =
                    active.iter().enumerate().map(|(i, a)| json!({"name": format!("job-{i}"), "active": a})).collect();
                job["status"] = json!({"jobsStatus": status});
            }
            job
        })
}

/// How an UPDATE changes the old object: like a user, Kueue or a controller would, a few fields
/// at a time.
#[derive(Debug, Clone)]
struct Edit {
    suspend: Option<Option<bool>>,
    managed_by: Option<Option<String>>,
    overrides: Option<Option<(&'static str, Value)>>,
    label: bool,
}

impl Edit {
    fn apply(&self, old: &Value) -> Value {
        let mut new = old.clone();
        let spec = new["spec"].as_object_mut().unwrap();
        if let Some(suspend) = &self.suspend {
            match suspend {
                Some(s) => spec.insert("suspend".into(), json!(s)),
                None => spec.remove("suspend"),
            };
        }
        if let Some(managed_by) = &self.managed_by {
            match managed_by {
                Some(m) => spec.insert("managedBy".into(), json!(m)),
                None => spec.remove("managedBy"),
            };
        }
        if let Some(overrides) = &self.overrides {
            for field in ["podSpecOverrides", "podTemplateOverrides", "runtimePatches"] {
                spec.remove(field);
            }
            if let Some((field, value)) = overrides {
                spec.insert(field.to_string(), value.clone());
            }
        }
        if self.label {
            new["metadata"]["labels"]["team"] = json!("vision");
        }
        new
    }
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        prop::option::weighted(0.5, prop::option::of(any::<bool>())),
        prop::option::weighted(0.1, managed_by()),
        prop::option::weighted(0.5, overrides()),
        any::<bool>(),
    )
        .prop_map(|(suspend, managed_by, overrides, label)| Edit { suspend, managed_by, overrides, label })
}

fn operation() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => Just("UPDATE".to_string()),
        3 => Just("CREATE".to_string()),
        1 => Just("DELETE".to_string()),
        1 => Just("CONNECT".to_string()),
        1 => ".{0,20}",
    ]
}

fn request_kind() -> impl Strategy<Value = Value> {
    prop_oneof![
        16 => Just(json!({"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"})),
        1 => Just(json!({"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"})),
        1 => Just(json!({"group": "", "version": "v1", "kind": "Pod"})),
    ]
}

/// A full AdmissionReview and the endpoint it is sent to.
fn realistic_review() -> impl Strategy<Value = (Endpoint, Value)> {
    (Just("ml-team".to_string()), name())
        .prop_flat_map(|(ns, name)| {
            (
                prop_oneof![3 => Just(Endpoint::Validate), 1 => Just(Endpoint::Mutate)],
                operation(),
                request_kind(),
                trainjob(ns.clone(), name.clone()),
                edit(),
                prop_oneof![4 => Just(None), 1 => Just(Some("status")), 1 => Just(Some(""))],
                any::<bool>(),
                "[0-9a-f-]{1,36}",
                Just((ns, name)),
            )
        })
        .prop_map(|(endpoint, op, kind, old, edit, sub, dry_run, uid, (ns, name))| {
            let new = edit.apply(&old);
            let mut request = json!({
                "uid": uid,
                "kind": kind,
                "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
                "requestKind": kind,
                "name": name,
                "namespace": ns,
                "operation": op,
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": new,
                "oldObject": null,
                "dryRun": dry_run,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
            });
            match op.as_str() {
                "UPDATE" => request["oldObject"] = old,
                "DELETE" => {
                    request["oldObject"] = old;
                    request["object"] = Value::Null;
                }
                _ => {}
            }
            if let Some(sub) = sub {
                request["subResource"] = json!(sub);
            }
            (endpoint, json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        })
}

/// Cluster state for the gate: the JobSet of `ml-team/llama` and its child Jobs, in any state.
fn cluster() -> impl Strategy<Value = StaticView> {
    (
        prop::option::of((any::<bool>(), prop::collection::vec(("[a-z]{1,6}", -1i32..5), 0..4))),
        prop::collection::vec(("[a-z0-9-]{1,20}", 0i32..5, prop::option::of(0i32..5), any::<bool>()), 0..4),
    )
        .prop_map(|(jobset, jobs)| {
            let mut view = StaticView::new();
            if let Some((deleting, replicated_jobs)) = jobset {
                view.insert_jobset("ml-team", "llama", JobSetState { deleting, replicated_jobs });
            }
            for (name, active, terminating, deleting) in jobs {
                view.insert_job("ml-team", "llama", ChildJobState { name, active, terminating, deleting });
            }
            view
        })
}

fn config() -> impl Strategy<Value = RulesConfig> {
    (prop_oneof![Just(SuspendRule::Either), Just(SuspendRule::New)], any::<bool>()).prop_map(
        |(suspend_rule, narrow)| {
            let mut config = RulesConfig { suspend_rule, ..RulesConfig::default() };
            if narrow {
                config.allowed_managed_by.truncate(1);
            }
            config
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Mutations

/// A JSON value of any shape, for replacing a node of a review.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        Just(json!(1e308)),
        Just(json!(u64::MAX)),
        ".{0,16}".prop_map(Value::from),
        "[\\PC]{200,600}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum JsonMutation {
    Replace(usize, Value),
    Remove(usize),
    /// Repeat an object member many times (denial messages must stay bounded).
    Repeat(usize, usize),
}

fn json_mutation() -> impl Strategy<Value = JsonMutation> {
    prop_oneof![
        4 => (any::<usize>(), any_json()).prop_map(|(at, v)| JsonMutation::Replace(at, v)),
        2 => any::<usize>().prop_map(JsonMutation::Remove),
        1 => (any::<usize>(), 2usize..200).prop_map(|(at, n)| JsonMutation::Repeat(at, n)),
    ]
}

/// Pointers to every node, in document order.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        _ => {}
    }
}

fn apply_json(mut value: Value, mutations: &[JsonMutation]) -> Value {
    for m in mutations {
        let mut all = Vec::new();
        pointers(&value, String::new(), &mut all);
        if all.is_empty() {
            break;
        }
        let pick = |i: &usize| all[i % all.len()].clone();
        match m {
            JsonMutation::Replace(i, v) => {
                if let Some(slot) = value.pointer_mut(&pick(i)) {
                    *slot = v.clone();
                }
            }
            JsonMutation::Remove(i) => {
                let p = pick(i);
                let (parent, key) = p.rsplit_once('/').unwrap();
                match value.pointer_mut(parent) {
                    Some(Value::Object(m)) => {
                        m.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(k) = key.parse::<usize>() {
                            a.remove(k);
                        }
                    }
                    _ => {}
                }
            }
            JsonMutation::Repeat(i, n) => {
                if let Some(Value::Array(a)) = value.pointer_mut(&pick(i))
                    && let Some(first) = a.first().cloned()
                {
                    a.extend(std::iter::repeat_n(first, *n));
                }
            }
        }
    }
    value
}

#[derive(Debug, Clone)]
enum ByteMutation {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
}

fn byte_mutation() -> impl Strategy<Value = ByteMutation> {
    let interesting = prop_oneof![
        any::<u8>(),
        Just(b'"'),
        Just(b'\\'),
        Just(b'{'),
        Just(b'}'),
        Just(b'['),
        Just(b','),
        Just(b':'),
        Just(0xff),
        Just(0xc3)
    ];
    prop_oneof![
        (any::<usize>(), interesting).prop_map(|(at, b)| ByteMutation::Set(at, b)),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..8),
                Just(b"\\u0000".to_vec()),
                Just(b"\\ud800".to_vec()),
                Just(b"1e999".to_vec()),
                Just("é🦀".as_bytes().to_vec()),
            ]
        )
            .prop_map(|(at, bytes)| ByteMutation::Insert(at, bytes)),
        (any::<usize>(), 1usize..16).prop_map(|(at, n)| ByteMutation::Delete(at, n)),
        any::<usize>().prop_map(ByteMutation::Truncate),
    ]
}

fn apply_bytes(mut bytes: Vec<u8>, mutations: &[ByteMutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            ByteMutation::Set(at, b) => {
                if !bytes.is_empty() {
                    bytes[at % len] = *b;
                }
            }
            ByteMutation::Insert(at, ins) => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, ins.iter().copied());
            }
            ByteMutation::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            ByteMutation::Truncate(at) => bytes.truncate(at % len),
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// The property

/// One fuzz input: what to send, where, and against which cluster and configuration.
#[derive(Debug, Clone)]
struct Case {
    endpoint: Endpoint,
    body: Vec<u8>,
    cluster: StaticView,
    config: RulesConfig,
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    Realistic,
    JsonMutated,
    ByteMutated,
    RandomBytes,
}

fn case(shape: Shape) -> BoxedStrategy<Case> {
    let body: BoxedStrategy<(Endpoint, Vec<u8>)> = match shape {
        Shape::Realistic => realistic_review().prop_map(|(e, v)| (e, serde_json::to_vec(&v).unwrap())).boxed(),
        Shape::JsonMutated => (realistic_review(), prop::collection::vec(json_mutation(), 1..4))
            .prop_map(|((e, v), m)| (e, serde_json::to_vec(&apply_json(v, &m)).unwrap()))
            .boxed(),
        Shape::ByteMutated => (realistic_review(), prop::collection::vec(byte_mutation(), 1..6))
            .prop_map(|((e, v), m)| (e, apply_bytes(serde_json::to_vec(&v).unwrap(), &m)))
            .boxed(),
        Shape::RandomBytes => (
            prop_oneof![Just(Endpoint::Validate), Just(Endpoint::Mutate)],
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..512),
                // Random text that looks a little like JSON.
                "[{}\\[\\]\":,a-z0-9 \\\\]{0,256}".prop_map(String::into_bytes),
            ],
        )
            .boxed(),
    };
    (body, cluster(), config())
        .prop_map(|((endpoint, body), cluster, config)| Case { endpoint, body, cluster, config })
        .boxed()
}

/// What was wrong with the answer to `case`, if anything (a panic included); else the rule that
/// decided, when it was answered with a review.
fn check(case: &Case) -> Result<Option<&'static str>, String> {
    catch_unwind(AssertUnwindSafe(|| review_check::check(case.endpoint, &case.body, &case.config, &case.cluster)))
        .map_err(|panic| {
            let what =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            format!("review panicked: {}", what.unwrap_or_default())
        })?
}

fn budget() -> Duration {
    let secs = std::env::var("TRAINGUARD_FUZZ_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(3.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> [u8; 32] {
    match std::env::var("TRAINGUARD_FUZZ_SEED") {
        Ok(hex) => {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16).expect("TRAINGUARD_FUZZ_SEED: hex"))
                .collect();
            bytes.try_into().expect("TRAINGUARD_FUZZ_SEED: 64 hex digits")
        }
        Err(_) => {
            let mut seed = [0u8; 32];
            let mut rng = TestRunner::default();
            for b in &mut seed {
                *b = any::<u8>().new_tree(&mut rng).unwrap().current();
            }
            seed
        }
    }
}

/// Generates and checks cases of `shape` until the time budget is spent.
fn fuzz(shape: Shape) {
    let seed = seed();
    let seed_hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let strategy = case(shape);
    let (start, budget) = (Instant::now(), budget());
    let (mut cases, mut ok_answers) = (0u64, 0u64);
    let mut rules: BTreeMap<&'static str, u64> = BTreeMap::new();
    while start.elapsed() < budget {
        let case = strategy.new_tree(&mut runner).expect("generating a case").current();
        match check(&case) {
            Ok(Some(rule)) => {
                ok_answers += 1;
                *rules.entry(rule).or_default() += 1;
            }
            Ok(None) => {}
            Err(problem) => panic!(
                "{shape:?} case {cases} (TRAINGUARD_FUZZ_SEED={seed_hex}): {problem}\nendpoint {:?}, body:\n{}",
                case.endpoint,
                String::from_utf8_lossy(&case.body)
            ),
        }
        cases += 1;
    }
    println!(
        "{shape:?}: {cases} cases in {:.1?}, {ok_answers} answered with a review, seed {seed_hex}",
        start.elapsed()
    );
    println!("{shape:?}: deciding rules {rules:?}");
    assert!(cases > 0, "no case ran within {budget:?}");
    // Realistic reviews must all get past decoding, or the mutations start from nothing useful.
    if matches!(shape, Shape::Realistic) {
        assert_eq!(ok_answers, cases, "every realistic review is answered");
    }
}

#[test]
fn realistic_reviews() {
    fuzz(Shape::Realistic);
}

#[test]
fn json_mutated_reviews() {
    fuzz(Shape::JsonMutated);
}

#[test]
fn byte_mutated_reviews() {
    fuzz(Shape::ByteMutated);
}

#[test]
fn random_bytes() {
    fuzz(Shape::RandomBytes);
}

/// The committed libFuzzer seeds (fuzz/seeds/review), regressions included, pass the same checks
/// on every run of `make test`, not only under `make fuzz`.
#[test]
fn committed_fuzz_seeds_pass_the_checks() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/review");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/review") {
        let path = entry.expect("a seed").path();
        let body = std::fs::read(&path).expect("readable seed");
        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
            for suspend_rule in [SuspendRule::Either, SuspendRule::New] {
                let config = RulesConfig { suspend_rule, ..RulesConfig::default() };
                if let Err(problem) = review_check::check(endpoint, &body, &config, &trainguard::cluster::Offline) {
                    panic!("{}: {endpoint:?} {suspend_rule:?}: {problem}", path.display());
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 14, "only {checked} seeds");
}
