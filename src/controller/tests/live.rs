//! The whole live controller — watches, first sync, planning, timers, executor, leader election —
//! against the fake API server: absent CRDs skipped, actions taken on the initial list and on watch
//! events, report mode writing nothing, no requests at all while nothing changes, and the Lease.

use crate::controller::testing::RbacChecked;
use trainguard_fake_api::wait::{DEADLINE, eventually, eventually_some, within};

use std::time::Duration;

use crate::controller::config::{Mode, PlanConfig};
use crate::controller::metrics::Metrics;
use crate::controller::{ControllerArgs, live};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trainguard_fake_api::FakeApi;
use trainguard_test_support::objects::*;

const JOBS: &str = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs";

fn world() -> Vec<Value> {
    let stuck_job = pytorchjob("b");
    vec![
        with_ttl(succeeded(pytorchjob("a"), 0), 0),
        stuck_job.clone(),
        deleting(v1_pod(&stuck_job, "b-master-0", "n1"), 300),
        v1_pod(&stuck_job, "b-worker-0", "n2"),
        unreachable(node("n1", None), 0),
        node("n2", None),
        node("n3", None),
    ]
}

/// User + system CPU time of this process, in clock ticks (1/100 s), from /proc/self/stat.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_name.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    fields.iter().sum()
}

async fn wait_for(api: &FakeApi, what: &str, check: impl Fn(&FakeApi) -> bool) {
    if !within(DEADLINE, || check(api)).await {
        panic!("timed out waiting for {what}; calls: {:#?}", api.calls());
    }
}

/// The live controller starts with an empty force-delete bucket (a new leader does not get a
/// burst); at the default 20 a minute its first token comes 3 s in. At 60 a minute it comes after
/// 1 s (token times are whole seconds), through the same path: rate-limited, woken when due.
fn quick_bucket(config: PlanConfig) -> PlanConfig {
    PlanConfig { max_force_deletes_per_minute: 60, ..config }
}

#[tokio::test]
#[allow(clippy::disallowed_methods, reason = "CPU while idle over real wall-clock time is what is measured")]
async fn acts_on_the_initial_list_then_on_watch_events_and_is_silent_when_idle() {
    let api = FakeApi::with_objects(world());
    let client = api.client();
    let stop = CancellationToken::new();
    let config = quick_bucket(PlanConfig::acting());
    let run = tokio::spawn(live::run(client, config, Metrics::unregistered(), stop.clone()));

    wait_for(&api, "the TTL delete and the force delete", |api| {
        let w = api.writes();
        w.contains(&format!("DELETE {JOBS}/a"))
            && w.contains(&"DELETE /api/v1/namespaces/ml/pods/b-master-0".to_string())
    })
    .await;
    let writes = api.writes();
    let mut sorted = writes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "DELETE /api/v1/namespaces/ml/pods/b-master-0".to_string(),
            format!("DELETE {JOBS}/a"),
            "PATCH /api/v1/namespaces/ml/pods/b-master-0/status".to_string(),
        ]
    );
    let position = |w: &str| writes.iter().position(|x| x == w).unwrap();
    assert!(
        position("PATCH /api/v1/namespaces/ml/pods/b-master-0/status")
            < position("DELETE /api/v1/namespaces/ml/pods/b-master-0")
    );

    // The executor's last requests: the events of both actions.
    wait_for(&api, "the events of both actions", |api| {
        let r = api.event_reasons();
        r.contains(&"TTLExpiredDeleted".to_string()) && r.contains(&"ForceDeletedStuckPod".to_string())
    })
    .await;
    // Idle: no request at all (no polling, no periodic scan), and next to no CPU. Real time:
    // what is measured is what the controller does while 1.5 s of wall clock pass.
    let before = api.seen().len();
    let cpu_before = cpu_ticks();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let idle_ticks = cpu_ticks() - cpu_before;
    assert_eq!(api.seen().len(), before, "requests while idle: {:#?}", &api.seen()[before..]);
    eprintln!("CPU while idle for 1.5s: {idle_ticks} clock ticks");
    assert!(idle_ticks <= 5, "{idle_ticks} clock ticks of CPU in 1.5s of idling");

    // The absent kinds were listed once each, not retried in a loop.
    let tfjob_lists = api.calls().iter().filter(|c| c.starts_with("GET /apis/kubeflow.org/v1/tfjobs")).count();
    assert_eq!(tfjob_lists, 1);
    assert_eq!(api.violations(), Vec::<String>::new());

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}

#[tokio::test]
async fn watch_event_and_timer_drive_a_ttl_deletion() {
    let api = FakeApi::with_objects([node("n1", None)]);
    api.serve_collection("/apis/kubeflow.org/v1/pytorchjobs");
    let client = api.client();
    let stop = CancellationToken::new();
    let config = PlanConfig { ttl_grace: k8s_openapi::jiff::SignedDuration::ZERO, ..PlanConfig::acting() };
    let run = tokio::spawn(live::run(client, config, Metrics::unregistered(), stop.clone()));
    wait_for(&api, "the pytorchjobs watch", |api| {
        api.seen().iter().any(|s| s.path == "/apis/kubeflow.org/v1/pytorchjobs" && s.query.contains("watch=true"))
    })
    .await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let c = with_ttl(pytorchjob("c"), 1);
    let c = set(
        c,
        "/status/conditions",
        json!([{"type": "Succeeded", "status": "True", "lastTransitionTime": now.to_string()}]),
    );
    api.put(set(c, "/status/completionTime", json!(now.to_string())));
    wait_for(&api, "the TTL delete one second later", |api| api.writes().contains(&format!("DELETE {JOBS}/c"))).await;
    assert_eq!(api.event_reasons(), ["TTLExpiredDeleted"]);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.unwrap().unwrap();
}

#[tokio::test]
async fn report_mode_writes_nothing() {
    let api = FakeApi::with_objects(world());
    let client = api.client();
    let stop = CancellationToken::new();
    let config = quick_bucket(PlanConfig { mode: Mode::Report, ..PlanConfig::acting() });
    let run = tokio::spawn(live::run(client, config, Metrics::unregistered(), stop.clone()));
    wait_for(&api, "the Would events", |api| {
        let r = api.event_reasons();
        r.contains(&"WouldTTLExpiredDeleted".to_string()) && r.contains(&"WouldForceDeletedStuckPod".to_string())
    })
    .await;
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.unwrap().unwrap();
    assert_eq!(api.writes(), Vec::<String>::new());
    assert_eq!(api.violations(), Vec::<String>::new());
}

fn args(extra: &[&str]) -> ControllerArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }
    let mut argv = vec!["test"];
    argv.extend(extra);
    Cli::parse_from(argv).args
}

#[tokio::test]
async fn leader_election_runs_the_controller_and_releases_the_lease() {
    let api = FakeApi::with_objects(world());
    let client = api.client();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let stop = CancellationToken::new();
    let run = tokio::spawn(crate::controller::run(
        client,
        args(&["--lease-name", "tg", "--lease-namespace", "trainguard-system", "--controller-mode=act"]),
        metrics,
        stop.clone(),
    ));
    let lease = "/apis/coordination.k8s.io/v1/namespaces/trainguard-system/leases/tg";
    wait_for(&api, "the controller acting as leader", |api| api.writes().contains(&format!("DELETE {JOBS}/a"))).await;
    let held = api.object(lease).expect("lease created");
    assert!(held["spec"]["holderIdentity"].is_string(), "{held}");
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(text.contains(r#"leader_election_master_status{name="tg"} 1"#), "{text}");

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
    let released = api.object(lease).unwrap();
    assert!(released["spec"]["holderIdentity"].is_null(), "released on shutdown: {released}");
    let lease_verbs: std::collections::BTreeSet<String> =
        api.seen().iter().filter(|s| s.rbac.1 == "leases").map(|s| s.rbac.2.clone()).collect();
    assert!(lease_verbs.iter().all(|v| ["get", "create", "patch"].contains(&v.as_str())), "{lease_verbs:?}");
    assert_eq!(api.violations(), Vec::<String>::new());
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(text.contains(r#"leader_election_master_status{name="tg"} 0"#), "{text}");
}

#[tokio::test]
#[allow(
    clippy::disallowed_methods,
    reason = "a quiet period showing a controller that should not start does nothing (real time)"
)]
async fn another_holder_keeps_this_replica_passive() {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "tg", "namespace": "trainguard-system"},
        "spec": {"holderIdentity": "other-replica", "leaseDurationSeconds": 3600,
                 "acquireTime": k8s_openapi::jiff::Timestamp::now().to_string(),
                 "renewTime": k8s_openapi::jiff::Timestamp::now().to_string()}});
    let mut objects = world();
    objects.push(lease);
    let api = FakeApi::with_objects(objects);
    let client = api.client();
    let stop = CancellationToken::new();
    let run = tokio::spawn(crate::controller::run(
        client,
        args(&["--lease-name", "tg", "--lease-namespace", "trainguard-system"]),
        Metrics::unregistered(),
        stop.clone(),
    ));
    // The replica reads the Lease and finds it held; then a quiet period (real time: what is
    // shown is that nothing follows) in which a wrongly started controller would list and act.
    wait_for(&api, "the Lease read", |api| api.calls().iter().any(|c| c.starts_with("GET /apis/coordination.k8s.io/")))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Not the leader: no watches, no actions.
    assert!(api.calls().iter().all(|c| c.contains("/leases")), "{:#?}", api.calls());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn controller_disabled_does_nothing() {
    let api = FakeApi::with_objects(world());
    let client = api.client();
    crate::controller::run(client, args(&["--controller=false"]), Metrics::unregistered(), CancellationToken::new())
        .await
        .unwrap();
    assert!(api.seen().is_empty());
}

/// A leader whose lease is taken over (it lost it during a partition) or cannot be renewed stops
/// its controller.
#[tokio::test]
async fn losing_the_lease_stops_the_controller() {
    use crate::controller::leader::{LeaseConfig, run_elected};
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/tg";
    for how in ["taken over", "renewal fails"] {
        let api = FakeApi::new();
        let client = api.client();
        let stop = CancellationToken::new();
        let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
        let lease = LeaseConfig {
            duration_seconds: 2,
            grace_seconds: 1,
            ..LeaseConfig::new("tg".into(), "ns".into(), "me".into())
        };
        let run = tokio::spawn(run_elected(client, lease, Metrics::unregistered(), stop.clone(), move |token| {
            let tx = events_tx.clone();
            async move {
                let _ = tx.send("started");
                token.cancelled().await;
                let _ = tx.send("stopped");
            }
        }));
        let first = tokio::time::timeout(Duration::from_secs(5), events.recv()).await.unwrap();
        assert_eq!(first, Some("started"), "{how}");
        match how {
            "taken over" => {
                let mut lease = api.object(lease_path).unwrap();
                lease["spec"]["holderIdentity"] = json!("other");
                lease["spec"]["leaseDurationSeconds"] = json!(3600);
                lease["spec"]["renewTime"] = json!(k8s_openapi::jiff::Timestamp::now().to_string());
                api.put(lease);
            }
            _ => {
                api.on("PATCH", lease_path, 500, trainguard_fake_api::status(500, "InternalError"));
            }
        }
        let next = tokio::time::timeout(Duration::from_secs(6), events.recv()).await.expect(how);
        assert_eq!(next, Some("stopped"), "{how}");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), run).await.unwrap().unwrap();
        assert_eq!(api.violations(), Vec::<String>::new());
    }
}

/// The gauges only the leader computes are dropped when its controller stops, so a former leader
/// exports nothing stale (and alerts never see two replicas' values).
#[tokio::test]
async fn a_stopped_controller_exports_no_leader_gauges() {
    // A suspended job stuck past the bound, a pod stuck terminating, a TTL scheduled in an hour.
    let stuck = suspended(with_ttl(pytorchjob("s"), 3600));
    let now = k8s_openapi::jiff::Timestamp::now().as_second() - T0;
    let objects = vec![
        stuck.clone(),
        workload(&stuck, vec![cond("Evicted", "True", Some(now - 600))]),
        with_ttl(succeeded(pytorchjob("t"), now), 3600),
    ];
    let api = FakeApi::with_objects(objects);
    api.serve_collection("/apis/kueue.x-k8s.io/v1beta2/workloads");
    let client = api.client();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let stop = CancellationToken::new();
    let config = PlanConfig { mode: Mode::Report, ..PlanConfig::acting() };
    let run = tokio::spawn(live::run(client, config, metrics, stop.clone()));
    let exported = |registry: &Registry| {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text.lines()
            .filter(|l| {
                l.starts_with("trainguard_suspend_not_reconciled_jobs{")
                    || l.starts_with("trainguard_ttl_scheduled_jobs{")
                    || l.starts_with("trainguard_pods_stuck_terminating{")
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let mut while_leading =
        eventually_some("the leader's gauges", || Some(exported(&registry)).filter(|e| e.len() == 2)).await;
    while_leading.sort();
    assert_eq!(
        while_leading,
        [
            r#"trainguard_suspend_not_reconciled_jobs{kind="PyTorchJob"} 1"#,
            r#"trainguard_ttl_scheduled_jobs{kind="PyTorchJob"} 1"#,
        ]
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
    assert_eq!(exported(&registry), Vec::<String>::new(), "nothing stale after stopping");
}

/// A TrainJob's chain with one pod stuck terminating on an unreachable node `n1`, and two Ready nodes.
fn stuck_trainjob_pod() -> Vec<Value> {
    let mut objects = trainjob_chain(&trainjob("t"), 1);
    objects.extend([
        deleting(jobset_pod("t", "t-node-0-0-x", "n1"), 300),
        unreachable(node("n1", None), 0),
        node("n2", None),
        node("n3", None),
    ]);
    objects
}

/// TrainJob pods through the live watches: the batch Job watch links pod → Job → JobSet →
/// TrainJob, so the stuck pod is force-deleted; a pod that only copied its labels is not.
#[tokio::test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing the debug pod is left alone (real time)")]
async fn trainjob_pods_are_proven_through_the_watched_owner_chain() {
    let mut objects = stuck_trainjob_pod();
    objects.push(set(deleting(jobset_pod("t", "t-debug", "n1"), 300), "/metadata/ownerReferences", json!([])));
    let api = FakeApi::with_objects(objects);
    let client = api.client();
    let stop = CancellationToken::new();
    let config = quick_bucket(PlanConfig::acting());
    let run = tokio::spawn(live::run(client, config, Metrics::unregistered(), stop.clone()));
    wait_for(&api, "the force delete of the TrainJob pod", |api| {
        api.writes().contains(&"DELETE /api/v1/namespaces/ml/pods/t-node-0-0-x".to_string())
    })
    .await;
    // Give the debug pod every chance to be (wrongly) handled too: a quiet period, real time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !api.seen().iter().any(|s| s.path.ends_with("/pods/t-debug") || s.path.ends_with("/pods/t-debug/status")),
        "{:#?}",
        api.calls()
    );
    assert!(api.calls().iter().any(|c| c.starts_with("GET /apis/batch/v1/jobs")), "the batch Jobs are watched");
    assert_eq!(api.violations(), Vec::<String>::new());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}

/// In a process with the cluster index (`serve` with the webhook and the controller), the
/// controller reads JobSets and their Jobs from the index: each is listed once, and the owner
/// chain still proves the TrainJob pod, while the gate answers from the same records.
#[tokio::test]
async fn a_controller_beside_the_gate_reads_jobsets_and_jobs_from_the_shared_index() {
    use crate::cluster::{ClusterCache, ClusterView, GateFacts};
    let api = FakeApi::with_objects(stuck_trainjob_pod());
    let client = api.client();
    let stop = CancellationToken::new();
    let cache_metrics = crate::cluster::metrics::CacheMetrics::register(&mut Registry::default());
    let index = ClusterCache::start(client.clone(), Duration::from_secs(60), cache_metrics, stop.clone());
    let config = quick_bucket(PlanConfig::acting());
    let bucket = crate::controller::state::new_bucket(&config);
    let run = tokio::spawn(live::run_with_bucket(
        client,
        config,
        crate::controller::namespaces::Namespaces::All,
        Metrics::unregistered(),
        bucket,
        Some(index.clone()),
        stop.clone(),
    ));
    wait_for(&api, "the force delete of the TrainJob pod", |api| {
        api.writes().contains(&"DELETE /api/v1/namespaces/ml/pods/t-node-0-0-x".to_string())
    })
    .await;
    let lists = |path: &str| {
        api.seen().iter().filter(|s| s.method == "GET" && s.path == path && !s.query.contains("watch=true")).count()
    };
    assert_eq!(lists("/apis/jobset.x-k8s.io/v1alpha2/jobsets"), 1, "{:#?}", api.calls());
    assert_eq!(lists("/apis/batch/v1/jobs"), 1, "{:#?}", api.calls());
    match index.gate_facts("ml", "t") {
        GateFacts::Known(facts) => {
            assert_eq!(facts.jobset.map(|js| js.replicated_jobs), Some(vec![("node".to_string(), 1)]));
            assert_eq!(facts.jobs.iter().map(|j| (j.name.as_str(), j.active)).collect::<Vec<_>>(), [("t-node-0", 1)]);
        }
        other => panic!("{other:?}"),
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}

#[tokio::test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing nothing else is deleted (real time)")]
async fn an_annotated_trainjob_is_deleted_at_its_ttl_and_an_unfinished_one_is_not() {
    let ttl = |tj: Value, v: &str| annotate(tj, "trainguard.io/ttl-seconds-after-finished", v);
    let done = ttl(trainjob_finished(trainjob("t"), "Complete", 0), "60");
    let running = ttl(trainjob("r"), "0");
    let api = FakeApi::with_objects([done, running, node("n1", None)]);
    let client = api.client();
    let stop = CancellationToken::new();
    let run = tokio::spawn(live::run(client, PlanConfig::acting(), Metrics::unregistered(), stop.clone()));
    let trainjobs = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs";
    wait_for(&api, "the TrainJob TTL delete", |api| api.writes().contains(&format!("DELETE {trainjobs}/t"))).await;
    // Give the unfinished one every chance to be (wrongly) deleted too: a quiet period, real time.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!api.calls().iter().any(|c| c.ends_with("/trainjobs/r")), "{:#?}", api.calls());
    assert_eq!(api.event_reasons(), ["TTLExpiredDeleted"]);
    assert_eq!(api.violations(), Vec::<String>::new());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}

/// Fencing: a leader whose lease renewal hangs (an overloaded API server, a half-open
/// connection) stops acting at its last renewal + lease duration − margin, while the renewal call
/// is still hanging, so no write of it can follow a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods, reason = "a fake lead loop that acts every 20 ms of real time")]
async fn a_leader_whose_renewal_hangs_stops_acting_before_its_lease_can_expire() {
    use crate::controller::leader::{LeaseConfig, run_elected};
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/tg";
    let api = FakeApi::new();
    let client = api.client();
    let stop = CancellationToken::new();
    // The shortest lease with whole seconds that keeps a second between the due renewal and the
    // fence, and a second between the fence and the expiry: renewals every second.
    let (duration, grace, margin) = (3, 2, Duration::from_secs(1));
    let lease = LeaseConfig {
        duration_seconds: duration,
        grace_seconds: grace,
        fence_margin: margin,
        ..LeaseConfig::new("tg".into(), "ns".into(), "me".into())
    };
    // The controller: a write every 20 ms for as long as it leads, checked against the token as
    // the executor checks it before every request.
    let acts = Arc::new(Mutex::new(Vec::<SystemTime>::new()));
    let (stopped_tx, stopped) = tokio::sync::oneshot::channel::<SystemTime>();
    let stopped_tx = Arc::new(Mutex::new(Some(stopped_tx)));
    let run = {
        let acts = acts.clone();
        tokio::spawn(run_elected(client, lease, Metrics::unregistered(), stop.clone(), move |token| {
            let (acts, stopped_tx) = (acts.clone(), stopped_tx.clone());
            async move {
                while !token.is_cancelled() {
                    acts.lock().unwrap().push(SystemTime::now());
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                }
                if let Some(tx) = stopped_tx.lock().unwrap().take() {
                    let _ = tx.send(SystemTime::now());
                }
            }
        }))
    };
    eventually("leadership", || !acts.lock().unwrap().is_empty()).await;
    // One renewal goes through (at duration − grace = 1 s), then renewals hang.
    let renew_time = || {
        let lease = api.object(lease_path).unwrap();
        let text = lease["spec"]["renewTime"].as_str().unwrap().to_string();
        let ts: k8s_openapi::jiff::Timestamp = text.parse().unwrap();
        SystemTime::UNIX_EPOCH + Duration::from_millis(ts.as_millisecond() as u64)
    };
    let first = renew_time();
    eventually("a renewal", || renew_time() != first).await;
    api.stall("PATCH", lease_path);
    let stopped_at = tokio::time::timeout(Duration::from_secs(6), stopped).await.expect("stopped").unwrap();
    let renewed = renew_time();
    let expiry = renewed + Duration::from_secs(duration);
    let fence = expiry - margin;
    let last_act = *acts.lock().unwrap().last().unwrap();
    eprintln!(
        "measured: last renewal +{:?}: last act, +{:?}: stopped (fence at +{:?}, expiry at +{duration}s)",
        last_act.duration_since(renewed).unwrap_or_default(),
        stopped_at.duration_since(renewed).unwrap_or_default(),
        fence.duration_since(renewed).unwrap_or_default(),
    );
    assert!(last_act <= fence + Duration::from_millis(20), "acted after the fence");
    assert!(stopped_at < expiry, "still leading when the lease could expire");
    assert!(
        stopped_at + Duration::from_millis(500) > fence,
        "stopped long before the fence: the renewal seen was not taken into account"
    );
    let stalled = api.seen().iter().filter(|s| s.method == "PATCH" && s.path == lease_path).count();
    assert!(stalled >= 2, "the hung renewal was made: {stalled} PATCHes");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), run).await.expect("stops after shutdown").unwrap();
}
