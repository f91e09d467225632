//! The executor against kube's `Client` over a fake API server: exact verbs, paths,
//! preconditions, grace periods and patch bodies; 404 / 409 / 500 handling; report mode writing
//! nothing; and every request checked against the API-call table (`crate::rbac`).

use crate::controller::testing::RbacChecked;
use trainguard_fake_api::wait::eventually;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::controller::config::{Mode, PlanConfig};
use crate::controller::events::EventSink;
use crate::controller::execute::{Executor, Shared};
use crate::controller::metrics::Metrics;
use crate::controller::state::{Report, Work, WorkOutcome};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trainguard_core::planner::objects::snapshot_from_values;
use trainguard_core::planner::{Action, Reason, ZoneHealth};
use trainguard_fake_api::{FakeApi, status, success};
use trainguard_test_support::objects::*;

type Answer = (u16, Value);
/// (name, the answers to the executor's calls in the order it makes them, outcome, events). The
/// executor must make exactly those calls: one answer per call, events aside.
type Case = (&'static str, Vec<Answer>, WorkOutcome, Vec<&'static str>);

const JOB_PATH: &str = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a";
const POD_PATH: &str = "/api/v1/namespaces/ml/pods/a-master-0";
const POD_STATUS_PATH: &str = "/api/v1/namespaces/ml/pods/a-master-0/status";
const NODE_PATH: &str = "/api/v1/nodes/n1";
const TRAINJOB_PATH: &str = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/t";

/// The calls of the force delete of pod a-master-0, in the order the executor makes them.
const FORCE_DELETE_CALLS: [(&str, &str); 4] =
    [("GET", POD_PATH), ("GET", NODE_PATH), ("PATCH", POD_STATUS_PATH), ("DELETE", POD_PATH)];

fn ok(body: Value) -> Answer {
    (200, body)
}

fn not_found() -> Answer {
    (404, status(404, "NotFound"))
}

fn conflict() -> Answer {
    (409, status(409, "Conflict"))
}

fn server_error() -> Answer {
    (500, status(500, "InternalError"))
}

/// Answers `calls` with `answers`, pairwise; calls past the answers get none.
fn mount(api: &FakeApi, calls: &[(&str, &str)], answers: Vec<Answer>) {
    for ((method, path), (code, body)) in calls.iter().zip(answers) {
        api.on(method, path, code, body);
    }
}

/// The answers to a force delete that gets past its live re-check (`pod` and `node` as read live),
/// then `writes`: the status patch's and the delete's, as far as it gets.
fn rechecked(pod: &Value, node: &Value, writes: impl IntoIterator<Item = Answer>) -> Vec<Answer> {
    [ok(pod.clone()), ok(node.clone())].into_iter().chain(writes).collect()
}

/// Executes `planned` at `now` against a fresh fake API answering `calls` with the case's answers;
/// checks the outcome and that the executor made one call per answer. The caller checks events.
async fn run_case(
    calls: &[(&str, &str)],
    (name, answers, want): (&str, Vec<Answer>, WorkOutcome),
    config: &PlanConfig,
    now: i64,
    planned: Vec<Work>,
) -> FakeApi {
    let api = FakeApi::new();
    let expected_calls = answers.len();
    mount(&api, calls, answers);
    let reports = execute(&api, config, now, planned).await;
    assert_eq!(outcomes(&reports), [want], "{name}");
    assert_eq!(api.calls().len(), expected_calls, "{name}: {:?}", api.calls());
    api
}

/// The live re-check and the delete of an expired `object` (at `path`), case by case.
async fn check_ttl_cases(path: &str, object: &Value, cases: Vec<Case>) {
    let c = PlanConfig::acting();
    for (name, answers, want, events) in cases {
        let planned = works(std::slice::from_ref(object), 90, &c);
        let api = run_case(&[("GET", path), ("DELETE", path)], (name, answers, want), &c, 90, planned).await;
        assert_eq!(api.event_reasons(), events, "{name}");
    }
}

/// What every kind's TTL delete meets alike, `live` being the expired object as planned.
fn ttl_cases_of_every_kind(live: &Value) -> Vec<Case> {
    vec![
        ("gone before the GET", vec![not_found()], WorkOutcome::Done, vec![]),
        ("gone between GET and DELETE: quiet", vec![ok(live.clone()), not_found()], WorkOutcome::Done, vec![]),
        ("changed between GET and DELETE", vec![ok(live.clone()), conflict()], WorkOutcome::Conflict, vec![]),
        ("server error", vec![ok(live.clone()), server_error()], WorkOutcome::Failed, vec!["TTLDeleteFailed"]),
        (
            "recreated with the same name (new UID)",
            vec![ok(set(live.clone(), "/metadata/uid", json!("new")))],
            WorkOutcome::Done,
            vec![],
        ),
    ]
}

/// Plans `objects` at `now` and turns each key's actions into executor work.
fn works(objects: &[Value], now: i64, config: &PlanConfig) -> Vec<Work> {
    plans(objects, now, config, &HashMap::new(), &HashMap::new())
        .into_iter()
        .filter(|(_, plan)| plan.actions.iter().any(|a| a.action.is_write()))
        .map(|(key, plan)| Work {
            key,
            actions: plan.actions.into_iter().filter(|a| !matches!(a.action, Action::Requeue { .. })).collect(),
            live_pods: 0,
        })
        .collect()
}

/// Leading, with a full bucket and an empty node cache (the brake then sees only the live node).
fn shared(config: &PlanConfig) -> Shared {
    leading_until(CancellationToken::new(), config)
}

/// As [`shared`], leading until `leading` is cancelled.
fn leading_until(leading: CancellationToken, config: &PlanConfig) -> Shared {
    Shared::new(leading, Shared::full_bucket(config.max_force_deletes_per_minute))
}

/// As [`shared`], the node cache holding the zones of `objects`: what the brake re-checks with.
fn shared_seeing(objects: &[Value], config: &PlanConfig) -> Shared {
    let (snapshot, _) = snapshot_from_values(objects).unwrap();
    let shared = shared(config);
    shared.zones.store(Arc::new(ZoneHealth::compute(&snapshot)));
    shared
}

/// An executor over `api` whose clock reads T0+`now`.
fn executor(api: &FakeApi, config: &PlanConfig, now: i64, shared: Shared, metrics: Metrics) -> Executor {
    let client = api.client();
    let events = EventSink::new(client.clone(), Some("trainguard-0".into()));
    Executor::new(client, config.clone(), events, metrics, Arc::new(move || at(now)), shared)
}

/// Runs the work through an executor whose clock reads T0+`now`.
async fn execute(api: &FakeApi, config: &PlanConfig, now: i64, works: Vec<Work>) -> Vec<Report> {
    execute_shared(api, config, now, works, shared(config)).await
}

async fn execute_shared(api: &FakeApi, config: &PlanConfig, now: i64, works: Vec<Work>, shared: Shared) -> Vec<Report> {
    let mut executor = executor(api, config, now, shared, Metrics::unregistered());
    let mut reports = Vec::new();
    for work in works {
        reports.push(executor.execute(work).await);
    }
    drop(executor);
    assert_eq!(api.violations(), Vec::<String>::new());
    reports
}

fn outcomes(reports: &[Report]) -> Vec<WorkOutcome> {
    reports.iter().map(|r| r.outcome).collect()
}

fn expired_job() -> Value {
    set(with_ttl(succeeded(pytorchjob("a"), 0), 60), "/metadata/resourceVersion", json!("123"))
}

#[tokio::test]
async fn ttl_delete_carries_uid_and_resource_version_preconditions() {
    let job = expired_job();
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, job.clone()).on("DELETE", JOB_PATH, 200, success());
    let reports = execute(&api, &PlanConfig::acting(), 90, works(&[job], 90, &PlanConfig::acting())).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done]);
    assert_eq!(api.calls(), [format!("GET {JOB_PATH}"), format!("DELETE {JOB_PATH}")]);
    let delete = &api.seen()[1];
    assert_eq!(
        delete.body,
        json!({"propagationPolicy": "Background", "preconditions": {"uid": "uid-a", "resourceVersion": "123"}})
    );
    assert_eq!(api.event_reasons(), ["TTLExpiredDeleted"]);
    let event = &api.seen()[2];
    assert_eq!(event.path, "/apis/events.k8s.io/v1/namespaces/ml/events");
    assert_eq!(event.body["regarding"]["uid"], "uid-a");
    assert_eq!(event.body["regarding"]["kind"], "PyTorchJob");
    assert_eq!(event.body["reportingController"], "trainguard");
    assert_eq!(event.body["type"], "Normal");
    assert_eq!(reports[0].published.len(), 1);
}

#[tokio::test]
async fn ttl_delete_uses_the_live_resource_version_and_propagation_flag() {
    let job = expired_job();
    let live = set(job.clone(), "/metadata/resourceVersion", json!("456"));
    let config =
        PlanConfig { ttl_propagation: crate::controller::config::Propagation::Foreground, ..PlanConfig::acting() };
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, live).on("DELETE", JOB_PATH, 200, success());
    execute(&api, &config, 90, works(&[job], 90, &config)).await;
    assert_eq!(
        api.seen()[1].body,
        json!({"propagationPolicy": "Foreground", "preconditions": {"uid": "uid-a", "resourceVersion": "456"}})
    );
}

#[tokio::test]
async fn ttl_delete_status_handling() {
    let job = expired_job();
    let mut cases = ttl_cases_of_every_kind(&job);
    cases.extend([
        ("GET fails", vec![server_error()], WorkOutcome::Failed, vec![]),
        ("resumed meanwhile (live is suspended)", vec![ok(suspended(job.clone()))], WorkOutcome::Aborted, vec![]),
        ("TTL raised meanwhile", vec![ok(with_ttl(job.clone(), 3600))], WorkOutcome::Aborted, vec![]),
        (
            "opted out meanwhile",
            vec![ok(label(job.clone(), "trainguard.io/ignore", "true"))],
            WorkOutcome::Aborted,
            vec![],
        ),
    ]);
    check_ttl_cases(JOB_PATH, &job, cases).await;
}

#[tokio::test]
async fn repeated_delete_failures_publish_one_event_per_episode() {
    let job = expired_job();
    let c = PlanConfig::acting();
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, job.clone()).on("DELETE", JOB_PATH, 500, status(500, "InternalError"));
    let mut w = works(std::slice::from_ref(&job), 90, &c);
    w.extend(works(std::slice::from_ref(&job), 90, &c));
    let reports = execute(&api, &c, 90, w).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Failed, WorkOutcome::Failed]);
    assert_eq!(api.event_reasons(), ["TTLDeleteFailed"]);
}

/// Job a with its pod stuck Terminating on n1, n1 to n3 of zone z unreachable, then `healthy`.
fn zone_z_down(healthy: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let job = pytorchjob("a");
    let mut objects = vec![job.clone(), deleting(v1_pod(&job, "a-master-0", "n1"), 300)];
    objects.extend(["n1", "n2", "n3"].map(|n| unreachable(node(n, Some("z")), 0)));
    objects.extend(healthy);
    objects
}

/// The work planned at 420, which force-deletes.
fn planned_force_delete(objects: &[Value], config: &PlanConfig) -> Vec<Work> {
    let w = works(objects, 420, config);
    assert!(w[0].actions.iter().any(|a| matches!(a.action, Action::ForceDeletePod { .. })));
    w
}

fn stuck_pod_world() -> Vec<Value> {
    let job = pytorchjob("a");
    vec![
        job.clone(),
        deleting(v1_pod(&job, "a-master-0", "n1"), 300),
        unreachable(node("n1", None), 0),
        node("h1", None),
        node("h2", None),
        node("h3", None),
    ]
}

#[tokio::test]
async fn force_delete_patches_status_then_deletes_with_grace_zero_and_uid() {
    let objects = stuck_pod_world();
    let c = PlanConfig::acting();
    let api = FakeApi::new();
    let (pod, dead) = (objects[1].clone(), objects[2].clone());
    mount(&api, &FORCE_DELETE_CALLS, vec![ok(pod.clone()), ok(dead), ok(pod.clone()), ok(pod)]);
    let reports = execute(&api, &c, 420, works(&objects, 420, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done]);
    assert_eq!(
        api.calls(),
        [
            format!("GET {POD_PATH}"),
            format!("GET {NODE_PATH}"),
            format!("PATCH {POD_STATUS_PATH}"),
            format!("DELETE {POD_PATH}"),
        ]
    );
    let seen = api.seen();
    assert_eq!(seen[2].content_type, "application/strategic-merge-patch+json");
    assert!(seen[2].query.contains("fieldManager=trainguard"), "{}", seen[2].query);
    assert_eq!(seen[2].body["metadata"], json!({"uid": "uid-a-master-0"}));
    assert_eq!(seen[2].body["status"]["phase"], "Failed");
    assert_eq!(seen[2].body["status"]["conditions"][0]["reason"], "DeletionByTrainguard");
    assert_eq!(seen[3].body, json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-a-master-0"}}));
    assert_eq!(api.event_reasons(), ["ForceDeletedStuckPod", "ForceDeletedStuckPod"]);
    let regarding: Vec<&str> = seen[4..].iter().map(|s| s.body["regarding"]["kind"].as_str().unwrap()).collect();
    assert_eq!(regarding, ["Pod", "PyTorchJob"]);
    assert_eq!(seen[4].body["related"]["name"], "a");
}

#[tokio::test]
async fn force_delete_rechecks_on_live_state() {
    let objects = stuck_pod_world();
    let c = PlanConfig::acting();
    let pod = objects[1].clone();
    let dead = objects[2].clone();
    let recreated = set(v1_pod(&objects[0], "a-master-0", "n2"), "/metadata/uid", json!("uid-new"));
    let held = set(pod.clone(), "/metadata/finalizers", json!(["example.com/keep"]));
    // Up to the status patch and the delete.
    let patched = |delete| rechecked(&pod, &dead, [ok(pod.clone()), delete]);
    let cases: Vec<Case> = vec![
        ("pod already gone", vec![not_found()], WorkOutcome::Done, vec![]),
        ("pod recreated with the same name and a new UID: untouched", vec![ok(recreated)], WorkOutcome::Done, vec![]),
        ("node Ready again: cancelled", vec![ok(pod.clone()), ok(node("n1", None))], WorkOutcome::Aborted, vec![]),
        (
            "node deleted meanwhile (404): still acts",
            vec![ok(pod.clone()), not_found(), ok(pod.clone()), ok(pod.clone())],
            WorkOutcome::Done,
            vec!["ForceDeletedStuckPod", "ForceDeletedStuckPod"],
        ),
        (
            "status patch hits the UID precondition (409): done, no delete",
            rechecked(&pod, &dead, [conflict()]),
            WorkOutcome::Done,
            vec![],
        ),
        ("delete precondition failed (409): already done", patched(conflict()), WorkOutcome::Done, vec![]),
        ("delete fails (500): backoff", patched(server_error()), WorkOutcome::Failed, vec![]),
        (
            "held by a finalizer the cache did not show: reported after the delete, never stripped",
            patched(ok(held)),
            WorkOutcome::Done,
            vec!["ForceDeletedStuckPod", "PodBlockedByFinalizers", "ForceDeletedStuckPod"],
        ),
    ];
    for (name, answers, want, events) in cases {
        let api = run_case(&FORCE_DELETE_CALLS, (name, answers, want), &c, 420, works(&objects, 420, &c)).await;
        let mut got = api.event_reasons();
        let mut want_events: Vec<String> = events.iter().map(|s| s.to_string()).collect();
        got.sort();
        want_events.sort();
        assert_eq!(got, want_events, "{name}");
        assert!(!api.calls().iter().any(|c| c.starts_with("PUT")), "{name}: finalizers are never stripped");
    }
}

#[tokio::test]
async fn finalizer_warning_predicted_by_the_plan_is_published_once_after_the_delete() {
    let mut objects = stuck_pod_world();
    objects[1] = set(objects[1].clone(), "/metadata/finalizers", json!(["example.com/keep"]));
    let c = PlanConfig::acting();
    let w = works(&objects, 420, &c);
    let planned: Vec<&str> = w[0]
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::Event(e) => Some(e.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(planned, ["ForceDeletedStuckPod", "ForceDeletedStuckPod", "PodBlockedByFinalizers"]);
    let (pod, dead) = (&objects[1], &objects[2]);
    let patched = |delete| rechecked(pod, dead, [ok(pod.clone()), delete]);
    // Delete fails: nothing is reported.
    let api = FakeApi::new();
    mount(&api, &FORCE_DELETE_CALLS, patched(server_error()));
    execute(&api, &c, 420, w.clone()).await;
    assert_eq!(api.event_reasons(), Vec::<String>::new());
    // Delete accepted, pod still there with the finalizer: one warning, not two.
    let api = FakeApi::new();
    mount(&api, &FORCE_DELETE_CALLS, patched(ok(pod.clone())));
    execute(&api, &c, 420, w).await;
    assert_eq!(api.event_reasons(), ["ForceDeletedStuckPod", "ForceDeletedStuckPod", "PodBlockedByFinalizers"]);
}

#[tokio::test]
async fn force_delete_brake_rechecked_with_the_live_node() {
    let objects = zone_z_down(["n4", "n5", "n6"].map(|n| node(n, Some("z"))));
    let c = PlanConfig::acting();
    // 3 of 6 (0.5) at planning: it acts.
    let w = planned_force_delete(&objects, &c);
    // Between planning and execution a fourth node of the zone went down: the executor decides on
    // the node cache as it is when the delete is due, not on the counts seen at planning.
    let mut more = objects.clone();
    more[5] = unreachable(node("n4", Some("z")), 0);
    let shared = shared_seeing(&more, &c);
    let api = FakeApi::new();
    api.on("GET", POD_PATH, 200, objects[1].clone()).on("GET", NODE_PATH, 200, objects[2].clone());
    let reports = execute_shared(&api, &c, 420, w, shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Suppressed]);
    assert_eq!(api.calls(), [format!("GET {POD_PATH}"), format!("GET {NODE_PATH}")]);
    assert_eq!(api.event_reasons(), ["ForceDeleteSuppressed"]);
}

#[tokio::test]
async fn stash_and_restore_patch_with_the_live_resource_version() {
    let stuck = set(suspended(with_ttl(pytorchjob("a"), 3600)), "/metadata/resourceVersion", json!("200"));
    let evicted = workload(&stuck, vec![cond("Evicted", "True", Some(0))]);
    let c = PlanConfig { stash_ttl_on_stuck_suspend: true, ..PlanConfig::acting() };
    let live = set(stuck.clone(), "/metadata/resourceVersion", json!("201"));
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, live.clone()).on("PATCH", JOB_PATH, 200, live);
    let reports = execute(&api, &c, 120, works(&[stuck, evicted], 120, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done]);
    assert_eq!(api.calls(), [format!("GET {JOB_PATH}"), format!("PATCH {JOB_PATH}")]);
    let patch = &api.seen()[2];
    assert_eq!(patch.content_type, "application/merge-patch+json");
    assert_eq!(
        patch.body,
        json!({"metadata": {"resourceVersion": "201", "annotations": {"trainguard.io/stashed-ttl-seconds-after-finished": "3600"}},
               "spec": {"runPolicy": {"ttlSecondsAfterFinished": null}}})
    );
    assert_eq!(api.event_reasons(), ["SuspendNotReconciled", "TTLStashedWhileSuspended"]);

    // Resumed: the restore patch.
    let stashed = set(
        pytorchjob("a"),
        "/metadata/annotations",
        json!({"trainguard.io/stashed-ttl-seconds-after-finished": "3600"}),
    );
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, set(stashed.clone(), "/metadata/resourceVersion", json!("300"))).on(
        "PATCH",
        JOB_PATH,
        409,
        status(409, "Conflict"),
    );
    let reports = execute(&api, &c, 500, works(std::slice::from_ref(&stashed), 500, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Conflict], "409 on the resourceVersion: re-evaluate now");
    assert_eq!(
        api.seen()[1].body,
        json!({"metadata": {"resourceVersion": "300", "annotations": {"trainguard.io/stashed-ttl-seconds-after-finished": null}},
               "spec": {"runPolicy": {"ttlSecondsAfterFinished": 3600}}})
    );
    assert_eq!(api.event_reasons(), Vec::<String>::new());

    // Suspended again before the restore ran: the live re-check stops it.
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, suspended(stashed.clone()));
    let reports = execute(&api, &c, 500, works(&[stashed], 500, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Aborted]);
    assert_eq!(api.calls(), [format!("GET {JOB_PATH}")]);
}

#[tokio::test]
async fn report_mode_writes_nothing_but_events() {
    let c = PlanConfig { mode: Mode::Report, stash_ttl_on_stuck_suspend: true, ..PlanConfig::acting() };
    let job = expired_job();
    let pods = stuck_pod_world();
    let stuck = set(suspended(with_ttl(pytorchjob("s"), 3600)), "/metadata/resourceVersion", json!("200"));
    let mut objects = vec![job.clone(), stuck.clone(), workload(&stuck, vec![cond("Evicted", "True", Some(0))])];
    objects.extend(pods[1..].iter().cloned());
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, job)
        .on("GET", "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/s", 200, stuck)
        .on("GET", POD_PATH, 200, pods[1].clone())
        .on("GET", NODE_PATH, 200, pods[2].clone());
    let w = works(&objects, 420, &c);
    assert_eq!(w.len(), 3);
    let reports = execute(&api, &c, 420, w).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done, WorkOutcome::Done, WorkOutcome::Done]);
    let methods: BTreeSet<String> =
        api.seen().iter().filter(|s| s.rbac.0 != "events.k8s.io").map(|s| s.method.clone()).collect();
    assert_eq!(methods, BTreeSet::from(["GET".to_string()]), "{:?}", api.calls());
    let mut reasons = api.event_reasons();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "SuspendNotReconciled",
            "WouldForceDeletedStuckPod",
            "WouldForceDeletedStuckPod",
            "WouldTTLExpiredDeleted",
            "WouldTTLStashedWhileSuspended",
        ]
    );
}

#[tokio::test]
async fn every_executor_call_is_in_the_api_call_table() {
    // One run touching every kind of call the executor makes; the fake checks each against the
    // table (see `execute`), and here the set of calls is pinned so a new one cannot slip in.
    let c = PlanConfig { stash_ttl_on_stuck_suspend: true, ..PlanConfig::acting() };
    let job = expired_job();
    let pods = stuck_pod_world();
    let stuck = set(suspended(with_ttl(pytorchjob("s"), 3600)), "/metadata/resourceVersion", json!("200"));
    let mut objects = vec![job.clone(), stuck.clone(), workload(&stuck, vec![cond("Evicted", "True", Some(0))])];
    objects.extend(pods[1..].iter().cloned());
    let s_path = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/s";
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, job.clone())
        .on("DELETE", JOB_PATH, 200, success())
        .on("GET", s_path, 200, stuck.clone())
        .on("PATCH", s_path, 200, stuck)
        .on("GET", POD_PATH, 200, pods[1].clone())
        .on("GET", NODE_PATH, 200, pods[2].clone())
        .on("PATCH", POD_STATUS_PATH, 200, pods[1].clone())
        .on("DELETE", POD_PATH, 200, pods[1].clone())
        .on("GET", TRAINJOB_PATH, 200, expired_trainjob())
        .on("DELETE", TRAINJOB_PATH, 200, success());
    objects.push(expired_trainjob());
    execute(&api, &c, 420, works(&objects, 420, &c)).await;
    let calls: BTreeSet<(String, String, String)> = api.seen().into_iter().map(|s| s.rbac).collect();
    let want: BTreeSet<(String, String, String)> = [
        ("", "nodes", "get"),
        ("", "pods", "delete"),
        ("", "pods", "get"),
        ("", "pods/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("kubeflow.org", "pytorchjobs", "delete"),
        ("kubeflow.org", "pytorchjobs", "get"),
        ("kubeflow.org", "pytorchjobs", "patch"),
        ("trainer.kubeflow.org", "trainjobs", "delete"),
        ("trainer.kubeflow.org", "trainjobs", "get"),
    ]
    .into_iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    assert_eq!(calls, want);
    for (g, r, v) in &calls {
        assert!(crate::rbac::allowed(g, r, v), "{g}/{r} {v}");
    }
}

#[tokio::test]
async fn lease_lost_with_destructive_work_queued_makes_no_write_after_the_loss() {
    let objects = stuck_pods(6);
    let c = PlanConfig::acting();
    let queued = works(&objects, 420, &c);
    assert_eq!(queued.len(), 6, "one force delete per pod");
    let api = FakeApi::with_objects(objects);
    let leading = CancellationToken::new();
    let lost_at: Arc<std::sync::Mutex<Option<std::time::Instant>>> = Arc::default();
    // The lease is lost while the first grace-0 DELETE is in flight.
    {
        let (leading, lost_at) = (leading.clone(), lost_at.clone());
        api.on_request(move |seen| {
            if seen.method == "DELETE" && !leading.is_cancelled() {
                *lost_at.lock().unwrap() = Some(std::time::Instant::now());
                leading.cancel();
            }
        });
    }
    let executor = executor(&api, &c, 420, leading_until(leading.clone(), &c), Metrics::unregistered());
    let (work_tx, work_rx) = tokio::sync::mpsc::unbounded_channel();
    let (report_tx, mut report_rx) = tokio::sync::mpsc::unbounded_channel();
    for w in queued {
        work_tx.send(w).unwrap();
    }
    // The executor returns on its own (the queue is still open): it drops the queued work.
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        crate::controller::execute::run(executor, work_rx, report_tx),
    )
    .await
    .expect("the executor stops once leadership ends");
    let lost_at = lost_at.lock().unwrap().expect("the lease was lost");
    let after: Vec<String> = api.seen().iter().filter(|s| s.at > lost_at).map(|s| s.line()).collect();
    assert_eq!(after, Vec::<String>::new(), "no request of any kind after the loss");
    let writes: Vec<String> = api.seen().iter().filter(|s| s.method != "GET").map(|s| s.line()).collect();
    assert_eq!(
        writes,
        [
            "PATCH /api/v1/namespaces/ml/pods/a-worker-0/status".to_string(),
            "DELETE /api/v1/namespaces/ml/pods/a-worker-0".to_string()
        ],
        "the delete in flight completes; its events and the 5 queued pods are dropped"
    );
    let mut reports = Vec::new();
    while let Ok(r) = report_rx.try_recv() {
        reports.push(r.0);
    }
    assert_eq!(reports.len(), 1, "only the item in progress reports back");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn executor_does_nothing_once_leadership_has_ended() {
    // Every kind of work: a TTL delete, a stash patch, a force delete.
    let stuck = set(suspended(with_ttl(pytorchjob("s"), 3600)), "/metadata/resourceVersion", json!("200"));
    let mut objects = stuck_pods(1);
    objects.extend([
        with_ttl(succeeded(pytorchjob("t"), 0), 60),
        stuck.clone(),
        workload(&stuck, vec![cond("Evicted", "True", Some(0))]),
    ]);
    let c = PlanConfig { stash_ttl_on_stuck_suspend: true, ..PlanConfig::acting() };
    let queued = works(&objects, 420, &c);
    assert_eq!(queued.len(), 3);
    let api = FakeApi::with_objects(objects);
    let ended = CancellationToken::new();
    ended.cancel();
    let shared = Shared::new(ended, Shared::full_bucket(20));
    let reports = execute_shared(&api, &c, 420, queued, shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Aborted; 3]);
    assert_eq!(api.seen().len(), 0, "not even a GET or an event");
}

#[tokio::test]
async fn rate_limit_tokens_are_taken_at_execution_only() {
    let objects = stuck_pods(3);
    let c = PlanConfig { max_force_deletes_per_minute: 1, ..PlanConfig::acting() };
    let bucket = |tokens: u32| {
        let b = Shared::full_bucket(1);
        // Start from `tokens` of 1 by spending the difference at T0+420.
        for _ in tokens..1 {
            assert!(b.lock().unwrap().try_take(at(420)));
        }
        b
    };
    let planned = |objects: &[Value]| {
        let w = works(objects, 420, &PlanConfig::acting());
        assert!(w.iter().all(|w| w.actions.iter().any(|a| matches!(a.action, Action::ForceDeletePod { .. }))));
        w
    };

    // An empty bucket: nothing is written, the key is re-planned when the next token is due.
    let api = FakeApi::with_objects(objects.clone());
    let shared = Shared::new(CancellationToken::new(), bucket(0));
    let reports = execute_shared(&api, &c, 420, planned(&objects)[..1].to_vec(), shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::RateLimited(at(480))]);
    assert_eq!(api.writes(), Vec::<String>::new());
    assert_eq!(api.event_reasons(), ["ForceDeleteSuppressed"]);

    // One token, three deletes due: the first takes it, the other two wait.
    let api = FakeApi::with_objects(objects.clone());
    let b = bucket(1);
    let shared = Shared::new(CancellationToken::new(), b.clone());
    let reports = execute_shared(&api, &c, 420, planned(&objects), shared).await;
    assert_eq!(
        outcomes(&reports),
        [WorkOutcome::Done, WorkOutcome::RateLimited(at(480)), WorkOutcome::RateLimited(at(480))]
    );
    assert_eq!(api.writes().iter().filter(|w| w.starts_with("DELETE")).count(), 1);

    // Report mode spends none.
    let report = PlanConfig { mode: Mode::Report, ..c.clone() };
    let api = FakeApi::with_objects(objects.clone());
    let b = bucket(1);
    let shared = Shared::new(CancellationToken::new(), b.clone());
    let reports = execute_shared(&api, &report, 420, planned(&objects), shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done; 3]);
    assert_eq!(api.writes(), Vec::<String>::new());
    assert_eq!(b.lock().unwrap().available(at(420)), 1.0, "report mode took no token");

    // A plan the live re-check aborts (the node is Ready again) spends none.
    let mut back = objects.clone();
    back[1] = node("n1", None);
    let api = FakeApi::with_objects(back);
    let b = bucket(1);
    let shared = Shared::new(CancellationToken::new(), b.clone());
    let reports = execute_shared(&api, &c, 420, planned(&objects), shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Aborted; 3]);
    assert_eq!(b.lock().unwrap().available(at(420)), 1.0, "aborted plans took no token");

    // The token of a delete that did not happen (the pod went away under the status patch, or the
    // delete failed) is given back.
    for (method, path, code) in [
        ("PATCH", "/api/v1/namespaces/ml/pods/a-worker-0/status", 404),
        ("DELETE", "/api/v1/namespaces/ml/pods/a-worker-0", 500),
    ] {
        let api = FakeApi::with_objects(objects.clone());
        api.on(method, path, code, status(code, "x"));
        let b = bucket(1);
        let shared = Shared::new(CancellationToken::new(), b.clone());
        execute_shared(&api, &c, 420, planned(&objects)[..1].to_vec(), shared).await;
        assert!(api.calls().contains(&format!("{method} {path}")), "{:?}", api.calls());
        assert_eq!(b.lock().unwrap().available(at(420)), 1.0, "{method} {code}: token given back");
    }
}

#[tokio::test]
async fn a_brake_found_at_planning_is_counted_in_the_suppressed_metric() {
    // A whole zone down (3 of 3) when the delete is planned: the planner holds it back with an
    // event and no write. The e2e zone outage showed the counter staying absent: only brakes
    // found at execution were counted.
    let objects = zone_z_down([node("h1", Some("y"))]);
    let c = PlanConfig::default();
    let works: Vec<Work> = plans(&objects, 420, &c, &HashMap::new(), &HashMap::new())
        .into_iter()
        .filter(|(_, plan)| {
            plan.actions
                .iter()
                .any(|a| matches!(&a.action, Action::Event(e) if e.reason == Reason::ForceDeleteSuppressed))
        })
        .map(|(key, plan)| Work { key, actions: plan.actions, live_pods: 0 })
        .collect();
    assert_eq!(works.len(), 1);
    let api = FakeApi::new();
    let mut registry = prometheus_client::registry::Registry::default();
    let mut executor = executor(&api, &c, 420, shared(&c), Metrics::register(&mut registry));
    for work in works {
        executor.execute(work).await;
    }
    drop(executor);
    assert_eq!(api.writes(), Vec::<String>::new());
    assert_eq!(api.event_reasons(), ["ForceDeleteSuppressed"]);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains(r#"trainguard_force_delete_suppressed_total{reason="zone-brake"} 1"#), "{text}");
}

#[tokio::test]
async fn cluster_brake_decided_at_execution_on_fresh_counts() {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "a1"), 300);
    // Planned with one node down per zone: it acts.
    let calm = vec![
        job.clone(),
        pod.clone(),
        unreachable(node("a1", Some("a")), 0),
        node("a2", Some("a")),
        node("b1", Some("b")),
        node("b2", Some("b")),
        node("c1", Some("c")),
        node("c2", Some("c")),
    ];
    let c = PlanConfig::acting();
    let w = planned_force_delete(&calm, &c);
    // By execution, nodes of b and c failed a few seconds ago: no zone trips on its own (2 of 2
    // stays under the small-zone floor), the cluster does (4 of 6). The fresh NotReady nodes
    // count at once, long before --node-not-ready-for.
    let mut now = calm.clone();
    now[4] = unreachable(node("b1", Some("b")), 415);
    now[5] = unreachable(node("b2", Some("b")), 415);
    now[6] = unreachable(node("c1", Some("c")), 415);
    let shared = shared_seeing(&now, &c);
    let api = FakeApi::with_objects(now);
    let reports = execute_shared(&api, &c, 420, w, shared).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Suppressed]);
    assert_eq!(api.writes(), Vec::<String>::new());
    let event = api.seen().into_iter().find(|s| s.rbac.0 == "events.k8s.io").unwrap();
    assert_eq!(event.body["reason"], "ForceDeleteSuppressed");
    let note = event.body["note"].as_str().unwrap();
    assert!(note.contains("4 of 6 nodes in the cluster are not Ready"), "{note}");
    assert!(note.contains("re-checked when the delete was due"), "{note}");
}

/// A TrainJob that completed at 0 with the TTL annotation 60: expired from 90.
fn expired_trainjob() -> Value {
    let tj = trainjob_finished(trainjob("t"), "Complete", 0);
    let tj = annotate(tj, "trainguard.io/ttl-seconds-after-finished", "60");
    set(tj, "/metadata/resourceVersion", json!("321"))
}

#[tokio::test]
async fn trainjob_ttl_delete_rechecks_live_and_carries_preconditions() {
    let tj = expired_trainjob();
    let c = PlanConfig::acting();
    let api = FakeApi::new();
    api.on("GET", TRAINJOB_PATH, 200, set(tj.clone(), "/metadata/resourceVersion", json!("322"))).on(
        "DELETE",
        TRAINJOB_PATH,
        200,
        success(),
    );
    let reports = execute(&api, &c, 90, works(std::slice::from_ref(&tj), 90, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done]);
    assert_eq!(api.calls()[..2], [format!("GET {TRAINJOB_PATH}"), format!("DELETE {TRAINJOB_PATH}")]);
    assert_eq!(
        api.seen()[1].body,
        json!({"propagationPolicy": "Background", "preconditions": {"uid": "uid-t", "resourceVersion": "322"}}),
        "the live resourceVersion, Background whatever --ttl-propagation says"
    );
    assert_eq!(api.event_reasons(), ["TTLExpiredDeleted"]);
    assert_eq!(api.seen()[2].body["regarding"]["kind"], "TrainJob");

    let annotated = |ttl| annotate(tj.clone(), "trainguard.io/ttl-seconds-after-finished", ttl);
    let mut cases = ttl_cases_of_every_kind(&tj);
    cases.extend([
        ("suspended meanwhile", vec![ok(set(tj.clone(), "/spec/suspend", json!(true)))], WorkOutcome::Aborted, vec![]),
        ("TTL raised meanwhile", vec![ok(annotated("3600"))], WorkOutcome::Aborted, vec![]),
        ("annotation made unreadable meanwhile", vec![ok(annotated("later"))], WorkOutcome::Aborted, vec![]),
    ]);
    check_ttl_cases(TRAINJOB_PATH, &tj, cases).await;

    // Report mode: the GET and the re-check, no DELETE, the Would event.
    let report = PlanConfig { mode: Mode::Report, ..PlanConfig::acting() };
    let api = FakeApi::new();
    api.on("GET", TRAINJOB_PATH, 200, tj.clone());
    execute(&api, &report, 90, works(std::slice::from_ref(&tj), 90, &report)).await;
    assert_eq!(api.calls()[0], format!("GET {TRAINJOB_PATH}"));
    assert!(!api.calls().iter().any(|c| c.starts_with("DELETE")), "{:?}", api.calls());
    assert_eq!(api.event_reasons(), ["WouldTTLExpiredDeleted"]);
}

/// The stuck pod of `stuck_pod_world`, carrying Kueue's force-delete annotation.
fn kueue_pod_world() -> Vec<Value> {
    let mut objects = stuck_pod_world();
    objects[1] = annotate(objects[1].clone(), "kueue.x-k8s.io/safe-to-forcefully-delete", "true");
    objects
}

#[tokio::test]
async fn kueue_annotated_pod_someone_else_deleted_first_is_quiet_success() {
    let objects = kueue_pod_world();
    let c = PlanConfig { force_delete_after: k8s_openapi::jiff::SignedDuration::from_secs(30), ..PlanConfig::acting() };
    let pod = objects[1].clone();
    let dead = objects[2].clone();
    let patched = |delete| rechecked(&pod, &dead, [ok(pod.clone()), delete]);
    // Kueue (or PodGC) got there first, at each step of the way: success, no Warning, no event at all.
    let cases: Vec<Case> = vec![
        ("gone before the GET", vec![not_found()], WorkOutcome::Done, vec![]),
        ("gone before the status patch", rechecked(&pod, &dead, [not_found()]), WorkOutcome::Done, vec![]),
        ("gone before the DELETE", patched(not_found()), WorkOutcome::Done, vec![]),
        ("UID precondition failed on the DELETE", patched(conflict()), WorkOutcome::Done, vec![]),
        (
            "already escalated to grace 0 by Kueue: nothing more",
            vec![ok(set(pod.clone(), "/metadata/deletionGracePeriodSeconds", json!(0)))],
            WorkOutcome::Done,
            vec![],
        ),
        (
            "not gone: acted on, and the event says Kueue had not",
            patched(ok(pod.clone())),
            WorkOutcome::Done,
            vec!["ForceDeletedStuckPod", "ForceDeletedStuckPod"],
        ),
    ];
    for (name, answers, want, events) in cases {
        let planned = works(&objects, 390, &c);
        assert_eq!(planned.len(), 1, "{name}: planned at 390, past Kueue's window");
        let api = run_case(&FORCE_DELETE_CALLS, (name, answers, want), &c, 390, planned).await;
        assert_eq!(api.event_reasons(), events, "{name}");
        if !events.is_empty() {
            let message = api.seen()[4].body["note"].as_str().unwrap_or_default().to_string();
            assert!(message.contains("Kueue had not force-deleted it"), "{name}: {message}");
        }
    }
    // Executed while still inside Kueue's window (a clock behind the plan's): the re-check says no.
    let api = FakeApi::new();
    api.on("GET", POD_PATH, 200, pod.clone()).on("GET", NODE_PATH, 200, dead.clone());
    let reports = execute(&api, &c, 380, works(&objects, 390, &c)).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Aborted]);
    assert_eq!(api.calls(), [format!("GET {POD_PATH}"), format!("GET {NODE_PATH}")]);
}

#[tokio::test]
async fn a_pod_that_succeeded_since_planning_keeps_its_phase() {
    let objects = stuck_pod_world();
    let c = PlanConfig::acting();
    let succeeded_live = set(objects[1].clone(), "/status/phase", json!("Succeeded"));
    let api = FakeApi::new();
    let live = ok(succeeded_live);
    mount(&api, &FORCE_DELETE_CALLS, vec![live.clone(), ok(objects[2].clone()), live.clone(), live]);
    let planned = works(&objects, 420, &c);
    let reports = execute(&api, &c, 420, planned).await;
    assert_eq!(outcomes(&reports), [WorkOutcome::Done]);
    let patch = &api.seen()[2];
    assert_eq!(patch.path, POD_STATUS_PATH);
    assert_eq!(patch.body["status"].get("phase"), None, "{}", patch.body);
    assert_eq!(patch.body["status"]["conditions"][0]["type"], "DisruptionTarget");
    assert_eq!(api.calls()[3], format!("DELETE {POD_PATH}"));
}

/// A write that hangs (an overloaded API server) is cut the moment leadership ends, not left to
/// land later; and it never outlives `WRITE_TIMEOUT`. Paused time: the executor's only clocks
/// here are tokio's timers and the injected planning clock, and the fake API does no I/O.
#[tokio::test(start_paused = true)]
async fn a_hanging_write_is_cut_when_leadership_ends() {
    use crate::controller::execute::WRITE_TIMEOUT;
    // A write sent just before the fence falls is cut before the lease could expire.
    assert!(WRITE_TIMEOUT < crate::controller::leader::FENCE_MARGIN, "{WRITE_TIMEOUT:?}");
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, expired_job());
    api.stall("DELETE", JOB_PATH);
    let report =
        execute_until_leadership_ends(&api, "the delete sent", || api.calls().contains(&format!("DELETE {JOB_PATH}")))
            .await;
    assert_ne!(report.outcome, WorkOutcome::Done, "{:?}", report.outcome);
    assert!(api.event_reasons().iter().all(|r| r != "TTLExpiredDeleted"), "{:?}", api.event_reasons());
}

/// Executes the TTL delete of `expired_job` as leader until `sent` holds, then ends leadership:
/// the executor returns at once (within 500 ms of paused time), whatever still hangs.
async fn execute_until_leadership_ends(api: &FakeApi, what: &str, sent: impl FnMut() -> bool) -> Report {
    let c = PlanConfig::acting();
    let leading = CancellationToken::new();
    let mut executor = executor(api, &c, 90, leading_until(leading.clone(), &c), Metrics::unregistered());
    let work = works(&[expired_job()], 90, &c).remove(0);
    let execution = tokio::spawn(async move { executor.execute(work).await });
    eventually(what, sent).await;
    leading.cancel();
    tokio::time::timeout(std::time::Duration::from_millis(500), execution)
        .await
        .unwrap_or_else(|_| panic!("{what}: the executor went on after leadership ended"))
        .unwrap()
}

/// An event whose publication hangs does not hold the executor past the end of leadership.
/// Paused time, as above.
#[tokio::test(start_paused = true)]
async fn a_hanging_event_is_cut_when_leadership_ends() {
    let api = FakeApi::new();
    api.on("GET", JOB_PATH, 200, expired_job()).on("DELETE", JOB_PATH, 200, success());
    let events_path = "/apis/events.k8s.io/v1/namespaces/ml/events";
    api.stall("POST", events_path);
    let event_sent = || api.seen().iter().any(|s| s.method == "POST" && s.path == events_path);
    let report = execute_until_leadership_ends(&api, "the event sent", event_sent).await;
    assert!(report.published.is_empty(), "a cut event is not reported published");
}

/// A live GET that hangs (kube's client has no read timeout) is cut at `READ_TIMEOUT`, leader or
/// not: the loop and its shutdown never wait on it. Nothing is written after it. Paused time.
#[tokio::test(start_paused = true)]
async fn a_hanging_live_read_is_cut_at_the_read_timeout() {
    use crate::controller::execute::READ_TIMEOUT;
    let job = expired_job();
    let api = FakeApi::new();
    api.stall("GET", JOB_PATH);
    let c = PlanConfig::default();
    let mut executor = executor(&api, &c, 90, shared(&c), Metrics::unregistered());
    let work = works(&[job], 90, &c).remove(0);
    let report = tokio::time::timeout(READ_TIMEOUT + std::time::Duration::from_secs(1), executor.execute(work))
        .await
        .expect("the hanging GET was cut at the read timeout");
    assert_eq!(report.outcome, WorkOutcome::Failed);
    assert_eq!(api.calls(), [format!("GET {JOB_PATH}")], "nothing written after a read that did not answer");
}
