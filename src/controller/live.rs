//! The live controller loop: watch changes in, plans out, work to the executor, reports back.
//! It sleeps until the next watch event, executor report or timer — there is no periodic scan, so
//! an idle cluster costs no CPU.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::config::PlanConfig;
use super::events::EventSink;
use super::execute::{self, Executor, Shared, system_clock};
use super::metrics::Metrics;
use super::namespaces::Namespaces;
use super::state::{ControllerState, Report, SharedBucket, Work, WorkOutcome, new_bucket};
use super::watch::{self, WatchMsg};
use crate::cluster::ClusterCache;
use trainguard_core::planner::snapshot::Key;

/// Watch messages handled before planning, at most, so a flood of events is planned in batches.
const BATCH: usize = 1024;

/// The `controller` label of the reconcile metrics: one "controller" per kind, as in
/// controller-runtime.
fn controller_label(key: &Key) -> String {
    match key {
        Key::Job(k) => k.kind.kind().to_ascii_lowercase(),
        Key::TrainJob(_) => "trainjob".to_string(),
        Key::Pod(_) => "pod".to_string(),
    }
}

fn result_label(outcome: WorkOutcome) -> &'static str {
    match outcome {
        WorkOutcome::Done | WorkOutcome::Aborted => "success",
        WorkOutcome::Conflict | WorkOutcome::Suppressed | WorkOutcome::RateLimited(_) => "requeue",
        WorkOutcome::Failed => "error",
    }
}

/// What the controller says when it starts: whether it will write to the cluster.
pub(crate) fn mode_line(mode: crate::controller::config::Mode) -> &'static str {
    match mode {
        crate::controller::config::Mode::Report => {
            "controller starting in report mode: no writes, Would… events only (--controller-mode=act performs them)"
        }
        crate::controller::config::Mode::Act => {
            "controller starting in act mode (--controller-mode=act): it deletes expired jobs and force-deletes \
             stuck pods with the credentials it runs with"
        }
    }
}

/// After the loop woke: the zones the executor's brake reads, due timers, a plan of every dirty
/// key, its work sent to the executor (while it takes work).
fn plan_and_dispatch(
    state: &mut ControllerState,
    shared: &Shared,
    work_tx: &mpsc::UnboundedSender<Work>,
    metrics: &Metrics,
) {
    let now = Timestamp::now();
    // The executor decides the brake on the node cache as it is when a delete is due.
    let zones = state.zones();
    if !std::sync::Arc::ptr_eq(&shared.zones.load(), &zones) {
        shared.zones.store(zones);
    }
    state.fire_due(now);
    let started = Instant::now();
    let planned = state.plan_dirty(now);
    if planned.is_empty() {
        return;
    }
    let per_key = started.elapsed().as_secs_f64() / planned.len() as f64;
    for (key, plan, work) in planned {
        match work {
            Some(work) => {
                debug!(?key, actions = work.actions.len(), "dispatching");
                if work_tx.send(work).is_err() {
                    break;
                }
            }
            None => {
                let result = if plan.wake.is_some() { "requeue_after" } else { "success" };
                metrics.reconciled(&controller_label(&key), result, per_key);
            }
        }
    }
    metrics.set_gauges(state.gauges());
}

/// Runs the controller until `shutdown` is cancelled, with a force-delete budget of its own that
/// starts empty.
pub async fn run(client: Client, config: PlanConfig, metrics: Metrics, shutdown: CancellationToken) {
    run_in(client, config, Namespaces::All, metrics, shutdown).await
}

/// [`run`], watching and acting only in `namespaces` (nodes are watched cluster-wide).
pub async fn run_in(
    client: Client,
    config: PlanConfig,
    namespaces: Namespaces,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let bucket = new_bucket(&config);
    run_with_bucket(client, config, namespaces, metrics, bucket, None, shutdown).await
}

/// Runs the controller until `shutdown` is cancelled (for an elected controller: until leadership
/// ends). `bucket` is the force-delete budget, carried from one leadership term to the next;
/// `index`, the process's cluster index, if it has one (its JobSets and Jobs are then not watched
/// again).
#[allow(clippy::disallowed_methods, reason = "the live loop's timer: wakes when the next rule can fire")]
pub(crate) async fn run_with_bucket(
    client: Client,
    config: PlanConfig,
    namespaces: Namespaces,
    metrics: Metrics,
    bucket: SharedBucket,
    index: Option<Arc<ClusterCache>>,
    shutdown: CancellationToken,
) {
    info!(
        mode = config.mode.as_str(),
        node_failure = ?config.node_failure,
        namespaces = %namespaces.describe(),
        "{}",
        mode_line(config.mode)
    );
    let watches_stop = shutdown.child_token();
    let (tx, mut rx) = mpsc::channel::<WatchMsg>(4096);
    let watches = watch::spawn_all(client.clone(), &namespaces, index.as_ref(), tx, watches_stop.clone());
    let mut pending: HashSet<_> = watch::sources().into_iter().collect();

    // Unbounded both ways: the loop never waits on the executor, and work per key is one at a time.
    let (work_tx, work_rx) = mpsc::unbounded_channel::<Work>();
    let (report_tx, mut report_rx) = mpsc::unbounded_channel::<(Report, Duration)>();
    let instance = std::env::var("POD_NAME").ok();
    let shared = Shared::new(shutdown.clone(), bucket.clone());
    let executor = Executor::new(
        client.clone(),
        config.clone(),
        EventSink::new(client, instance),
        metrics.clone(),
        system_clock(),
        shared.clone(),
    );
    let executor_task = tokio::spawn(execute::run(executor, work_rx, report_tx));

    let mut state = ControllerState::with_bucket(config, bucket);
    loop {
        let sleep = state.next_wake().map(|wake| {
            let wait = wake.duration_since(Timestamp::now());
            Duration::try_from(wait).unwrap_or(Duration::ZERO)
        });
        tokio::select! {
            _ = shutdown.cancelled() => break,
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let now = Timestamp::now();
                handle(&mut state, &mut pending, msg, now);
                for _ in 0..BATCH {
                    match rx.try_recv() {
                        Ok(msg) => handle(&mut state, &mut pending, msg, now),
                        Err(_) => break,
                    }
                }
            }
            report = report_rx.recv() => {
                let Some((report, took)) = report else { break };
                metrics.reconciled(&controller_label(&report.key), result_label(report.outcome), took.as_secs_f64());
                state.finish(report, Timestamp::now());
            }
            _ = tokio::time::sleep(sleep.unwrap_or(Duration::MAX)), if sleep.is_some() => {}
        }
        plan_and_dispatch(&mut state, &shared, &work_tx, &metrics);
    }
    info!("controller stopping");
    watches_stop.cancel();
    drop(work_tx);
    // The executor stops before its next request and drops what is queued (it watches the same
    // token); a new leader plans everything again from its own watches.
    let _ = executor_task.await;
    // A former leader must not keep exporting what it last saw.
    metrics.clear_leader_gauges();
    for w in watches {
        let _ = w.await;
    }
}

fn handle(
    state: &mut ControllerState,
    pending: &mut HashSet<trainguard_core::planner::snapshot::Source>,
    msg: WatchMsg,
    now: Timestamp,
) {
    match msg {
        WatchMsg::Change(change) => state.apply(*change, now),
        WatchMsg::Ready(source) => {
            pending.remove(&source);
            if pending.is_empty() && !state.is_synced() {
                info!("all watches listed: planning");
                state.set_synced();
            }
        }
    }
}
