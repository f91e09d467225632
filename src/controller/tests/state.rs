//! The live controller's bookkeeping without a runtime: exact timers (no polling), events once per
//! episode, in-flight work, backoff, the first full sync, relists, and the gauges.

use std::collections::HashSet;

use crate::controller::config::PlanConfig;
use crate::controller::state::{ControllerState, Report, Work, WorkOutcome};
use serde_json::{Value, json};
use trainguard_core::planner::facts::NsName;
use trainguard_core::planner::objects::change_from_value;
use trainguard_core::planner::snapshot::{Change, Key, Source};
use trainguard_core::planner::{Action, NodeState, Observation, Reason};
use trainguard_test_support::objects::*;

fn apply(state: &mut ControllerState, object: &Value, now: i64) {
    state.apply(change_from_value(object).unwrap().unwrap(), at(now));
}

/// Plans dirty keys; returns the work, with every event it carries reported as published.
fn plan(state: &mut ControllerState, now: i64) -> Vec<Work> {
    state.plan_dirty(at(now)).into_iter().filter_map(|(_, _, w)| w).collect()
}

fn done(state: &mut ControllerState, work: &Work, outcome: WorkOutcome, now: i64) {
    let published = work
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::Event(e) => Some((e.target.uid.clone(), e.reason, e.episode.clone())),
            _ => None,
        })
        .collect();
    state.finish(Report { key: work.key.clone(), outcome, published }, at(now));
}

fn reasons(work: &Work) -> Vec<&'static str> {
    work.actions
        .iter()
        .map(|a| match &a.action {
            Action::Event(e) => e.reason.as_str(),
            other => other.name(),
        })
        .collect()
}

fn synced(objects: &[Value], now: i64) -> ControllerState {
    let mut state = ControllerState::new(PlanConfig::acting());
    for o in objects {
        apply(&mut state, o, now);
    }
    state.set_synced();
    state
}

#[test]
fn nothing_is_planned_before_the_first_full_sync() {
    let mut state = ControllerState::new(PlanConfig::acting());
    apply(&mut state, &with_ttl(succeeded(pytorchjob("a"), 0), 0), 100);
    assert!(plan(&mut state, 100).is_empty());
    state.set_synced();
    let work = plan(&mut state, 100);
    assert_eq!(reasons(&work[0]), ["delete-job", "TTLExpiredDeleted"]);
}

#[test]
fn ttl_timer_fires_at_the_exact_expiry_and_not_before() {
    let mut state = synced(&[with_ttl(succeeded(pytorchjob("a"), 0), 60)], 10);
    assert!(plan(&mut state, 10).is_empty());
    assert_eq!(state.next_wake(), Some(at(90)));
    state.fire_due(at(89));
    assert!(plan(&mut state, 89).is_empty());
    assert_eq!(state.next_wake(), Some(at(90)));
    state.fire_due(at(90));
    let work = plan(&mut state, 90);
    assert_eq!(reasons(&work[0]), ["delete-job", "TTLExpiredDeleted"]);
    // Nothing else is scheduled: no polling.
    assert_eq!(state.next_wake(), None);
}

#[test]
fn ttl_edit_replaces_the_timer() {
    let job = with_ttl(succeeded(pytorchjob("a"), 0), 3600);
    let mut state = synced(std::slice::from_ref(&job), 10);
    plan(&mut state, 10);
    assert_eq!(state.next_wake(), Some(at(3630)));
    apply(&mut state, &with_ttl(job, 100), 20);
    plan(&mut state, 20);
    assert_eq!(state.next_wake(), Some(at(130)));
}

#[test]
fn suspend_alarm_once_per_episode() {
    let job = suspended(pytorchjob("a"));
    let pod = v1_pod(&job, "a-master-0", "n1");
    let mut state = synced(&[job.clone(), pod, node("n1", None)], 0);
    // First seen suspended at 0 (no Workload, no Suspended condition): alarm at 120.
    assert!(plan(&mut state, 0).is_empty());
    assert_eq!(state.next_wake(), Some(at(120)));
    state.fire_due(at(120));
    let work = plan(&mut state, 120);
    assert_eq!(reasons(&work[0]), ["SuspendNotReconciled"]);
    done(&mut state, &work[0], WorkOutcome::Done, 120);
    assert_eq!(state.gauges().get(&Observation::SuspendStuck("PyTorchJob")), Some(&1));

    // Updates during the same episode: no second event.
    apply(&mut state, &set(job.clone(), "/metadata/resourceVersion", json!("101")), 130);
    assert!(plan(&mut state, 130).is_empty());

    // Resumed: the episode ends, the gauge drops.
    apply(&mut state, &set(job.clone(), "/spec/runPolicy/suspend", json!(false)), 200);
    assert!(plan(&mut state, 200).is_empty());
    assert_eq!(state.gauges().get(&Observation::SuspendStuck("PyTorchJob")), Some(&0));

    // Preempted again: a new episode, a new alarm after the bound.
    apply(&mut state, &job, 300);
    assert!(plan(&mut state, 300).is_empty());
    assert_eq!(state.next_wake(), Some(at(420)));
    state.fire_due(at(420));
    let work = plan(&mut state, 420);
    assert_eq!(reasons(&work[0]), ["SuspendNotReconciled"]);
}

#[test]
fn in_flight_keys_are_not_planned_twice_and_replanned_after_their_report() {
    let job = with_ttl(succeeded(pytorchjob("a"), 0), 0);
    let mut state = synced(std::slice::from_ref(&job), 100);
    let work = plan(&mut state, 100);
    assert_eq!(work.len(), 1);
    // A watch event while the delete is in flight: deferred.
    apply(&mut state, &set(job.clone(), "/metadata/resourceVersion", json!("101")), 101);
    assert!(plan(&mut state, 101).is_empty());
    // 409 (the executor published nothing): re-evaluated at once, with the deferred change.
    state.finish(Report { key: work[0].key.clone(), outcome: WorkOutcome::Conflict, published: vec![] }, at(102));
    let again = plan(&mut state, 102);
    assert_eq!(reasons(&again[0]), ["delete-job", "TTLExpiredDeleted"]);
}

#[test]
fn failures_back_off_from_one_second_doubling_to_five_minutes() {
    let job = with_ttl(succeeded(pytorchjob("a"), 0), 0);
    let mut state = synced(&[job], 100);
    let mut now = 100;
    let mut delays = Vec::new();
    for _ in 0..12 {
        let work = plan(&mut state, now);
        assert_eq!(work.len(), 1, "at {now}");
        state.finish(Report { key: work[0].key.clone(), outcome: WorkOutcome::Failed, published: vec![] }, at(now));
        let wake = state.next_wake().unwrap();
        delays.push(wake.as_second() - at(now).as_second());
        now = wake.as_second() - T0;
        state.fire_due(wake);
    }
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
}

#[test]
fn node_changes_replan_terminating_pods_and_gauges_follow() {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "n1"), 300);
    let mut state = synced(&[job, pod, unreachable(node("n1", None), 0), node("h1", None)], 200);
    assert!(plan(&mut state, 200).is_empty());
    assert_eq!(state.next_wake(), Some(at(420)));
    // Node Ready again before the action: timer cancelled.
    apply(&mut state, &node("n1", None), 400);
    assert!(plan(&mut state, 400).is_empty());
    assert_eq!(state.next_wake(), None);
    // Down again: the pod is planned again on the node event alone, and acted on when due.
    apply(&mut state, &unreachable(node("n1", None), 0), 500);
    let work = plan(&mut state, 500);
    assert_eq!(
        reasons(&work[0]),
        ["patch-pod-status", "force-delete-pod", "ForceDeletedStuckPod", "ForceDeletedStuckPod"]
    );
    assert_eq!(state.gauges().get(&Observation::PodStuck(NodeState::Unreachable)), Some(&1));
}

#[test]
fn relist_removes_objects_that_are_gone() {
    let a = with_ttl(succeeded(pytorchjob("a"), 0), 3600);
    let b = with_ttl(succeeded(pytorchjob("b"), 0), 3600);
    let mut state = synced(&[a, b], 10);
    plan(&mut state, 10);
    assert_eq!(state.gauges().get(&Observation::TtlScheduled("PyTorchJob")), Some(&2));
    let seen: HashSet<NsName> = [NsName::new("ml", "a")].into();
    state.apply(
        Change::Relisted(Source::Jobs(trainguard_core::model::kubeflow_v1::TrainingKind::PyTorchJob), seen),
        at(20),
    );
    plan(&mut state, 20);
    assert_eq!(state.gauges().get(&Observation::TtlScheduled("PyTorchJob")), Some(&1));
    assert!(
        state
            .snapshot()
            .job(&trainguard_core::planner::facts::JobKey {
                kind: trainguard_core::model::kubeflow_v1::TrainingKind::PyTorchJob,
                id: NsName::new("ml", "b")
            })
            .is_none()
    );
    assert!(matches!(state.plan_dirty(at(20)).first(), None | Some((Key::Job(_), _, None))));
}

#[test]
fn report_events_dedupe_by_uid_reason_and_episode() {
    // In report mode nothing changes after a `Would…` event: later passes must stay silent.
    let config = PlanConfig { mode: crate::controller::config::Mode::Report, ..PlanConfig::acting() };
    let job = with_ttl(succeeded(pytorchjob("a"), 0), 0);
    let mut state = ControllerState::new(config);
    apply(&mut state, &job, 100);
    state.set_synced();
    let work = plan(&mut state, 100);
    done(&mut state, &work[0], WorkOutcome::Done, 100);
    apply(&mut state, &set(job, "/metadata/labels", json!({"x": "y"})), 200);
    let work = plan(&mut state, 200);
    // The write is re-checked, but the event is not sent again.
    assert_eq!(reasons(&work[0]), ["delete-job"]);
    assert!(
        !work[0].actions.iter().any(|a| matches!(&a.action, Action::Event(e) if e.reason == Reason::TTLExpiredDeleted))
    );
}

#[test]
fn relist_forgets_the_memory_of_objects_that_are_gone() {
    let job = suspended(pytorchjob("a"));
    let mut state = synced(&[job.clone(), v1_pod(&job, "a-master-0", "n1"), node("n1", None)], 0);
    assert!(plan(&mut state, 0).is_empty());
    state.fire_due(at(120));
    let work = plan(&mut state, 120);
    done(&mut state, &work[0], WorkOutcome::Done, 120);
    assert_eq!(state.remembered(), 2, "first sighting and the published alarm");
    // Deleted while the watch was down: the relist removes it, and its memory goes too.
    let kind = trainguard_core::model::kubeflow_v1::TrainingKind::PyTorchJob;
    state.apply(Change::Relisted(Source::Jobs(kind), HashSet::new()), at(200));
    assert_eq!(state.remembered(), 0);
}

fn force_deletes(work: &[Work]) -> usize {
    work.iter().filter(|w| w.actions.iter().any(|a| matches!(a.action, Action::ForceDeletePod { .. }))).count()
}

#[test]
fn the_bucket_starts_empty_and_planning_spends_no_token() {
    let config = PlanConfig { max_force_deletes_per_minute: 2, ..PlanConfig::acting() };
    let mut state = ControllerState::new(config);
    for o in stuck_pods(2) {
        apply(&mut state, &o, 0);
    }
    state.set_synced();
    // Empty at the start: nothing dispatched, a timer at the first token (60s / 2).
    let work = plan(&mut state, 420);
    assert_eq!(force_deletes(&work), 0);
    assert_eq!(state.next_wake(), Some(at(450)));
    for w in &work {
        done(&mut state, w, WorkOutcome::Done, 420);
    }
    // At 450 one token: one pod dispatched, the other told to wait for the next.
    state.fire_due(at(450));
    let work = plan(&mut state, 450);
    assert_eq!(force_deletes(&work), 1);
    // The planner only looked: the token is still in the bucket for the executor to take.
    assert!(state.bucket().lock().unwrap().try_take(at(450)));
    assert!(!state.bucket().lock().unwrap().try_take(at(450)));
}

#[test]
fn rate_limited_at_execution_requeues_when_the_next_token_is_due() {
    let mut state = synced(&stuck_pods(1), 0);
    state.bucket().lock().unwrap().available(at(0));
    state.fire_due(at(420));
    let work = plan(&mut state, 420);
    assert_eq!(force_deletes(&work), 1);
    done(&mut state, &work[0], WorkOutcome::RateLimited(at(423)), 420);
    assert_eq!(state.next_wake(), Some(at(423)));
    state.fire_due(at(423));
    assert_eq!(force_deletes(&plan(&mut state, 423)), 1, "planned again once the token is due");
}

/// Trainer ≤ v2.3.0's JobSet-TTL loop as a real Trainer writes it: the TrainJob fails (0), the
/// JobSet's TTL deletes the JobSet, and in one reconcile Trainer recreates the JobSet (600) and
/// removes the `Failed` condition; the new JobSet fails and Trainer sets `Failed` again, at that
/// failure (620). The objects show "JobSet created after the failure" only between two writes;
/// the gauge holds for the whole loop from the controller's memory of the first failure.
#[test]
fn the_jobset_loop_gauge_holds_while_trainer_removes_and_sets_failed_again() {
    let created = |js: Value, s: i64| set(js, "/metadata/creationTimestamp", json!(ts(s)));
    let recreated = |uid: &str, s: i64| created(set(jobset_of(&trainjob("t"), 0), "/metadata/uid", json!(uid)), s);
    let gauge = |state: &ControllerState| state.gauges().get(&Observation::JobSetRecreated).copied().unwrap_or(0);
    let failed = trainjob_finished(trainjob("t"), "Failed", 0);
    let mut state = synced(&[failed.clone(), created(jobset_of(&failed, 0), -5)], 0);
    plan(&mut state, 0);
    assert_eq!(gauge(&state), 0, "the first JobSet is older than the failure");
    // One turn of the loop: the JobSet's TTL deletes it at `deleted_at`; Trainer removes Failed
    // (one status patch), then the add of the new JobSet `uid` arrives at `s`. The window the
    // objects alone show is gone already; the event (one per JobSet UID) and the gauge are not.
    let turn = |state: &mut ControllerState, uid: &str, deleted_at: i64, s: i64| {
        state.apply(Change::JobSet(NsName::new("ml", "t"), None), at(deleted_at));
        apply(state, &trainjob("t"), s);
        apply(state, &recreated(uid, s), s);
        let work = plan(state, s);
        assert!(work.iter().any(|w| reasons(w).contains(&"JobSetRecreatedAfterFailure")), "{uid}: {work:?}");
        assert_eq!(gauge(state), 1, "{uid}: Failed removed, JobSet created after the remembered failure");
        for w in &work {
            done(state, w, WorkOutcome::Done, s);
        }
    };
    turn(&mut state, "js-2", 590, 600);
    // The new JobSet fails: Failed again, at 620, after the JobSet's creation.
    apply(&mut state, &trainjob_finished(trainjob("t"), "Failed", 620), 620);
    plan(&mut state, 620);
    assert_eq!(gauge(&state), 1, "still in the loop");
    // Next turn: a third JobSet.
    turn(&mut state, "js-3", 630, 640);
    // Deleted: no series left counting it, and no memory kept.
    state.apply(Change::TrainJob(NsName::new("ml", "t"), None), at(700));
    state.apply(Change::JobSet(NsName::new("ml", "t"), None), at(700));
    plan(&mut state, 700);
    assert_eq!(gauge(&state), 0);
    assert_eq!(state.remembered(), 0);
}
