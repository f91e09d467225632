//! The planner: `(snapshot, now, config) → actions`. Pure — no I/O, no clock, no kube client. The
//! live controller plans one key at a time as watch events and timers arrive; `trainguard plan`
//! plans every key of a file snapshot. Both call the functions here.
//!
//! Guard order (docs/controller.md (How it decides)): gone or deleting → stop; not managed by the operator → stop; opted out →
//! stop; finished (job or Workload) → only TTL (and putting a stashed TTL back); a job that is not
//! suspended raises no suspend alarm, whatever its Workload says.

pub mod config;
pub mod facts;
pub mod objects;
pub mod snapshot;

pub mod actions;
pub(crate) mod jobset_loop;
pub mod node_failure;
pub(crate) mod ratelimit;
pub mod suspend;
pub mod ttl;

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

pub use actions::{Action, Target};
pub use actions::{EventType, JobPatchKind, KeyPlan, PlanRule, PlannedEvent, TargetKind};
pub use actions::{NodeState, Observation, Planned, Reason};
pub use node_failure::Budget;
pub use node_failure::ZoneHealth;
pub use ratelimit::TokenBucket;

use self::config::PlanConfig;
use self::facts::{JobFacts, PodOwner, Str, TrainJobFacts};
use self::snapshot::{Key, Snapshot};

/// Everything a planning pass reads besides the force-delete budget.
pub struct PlanInput<'a> {
    pub snapshot: &'a Snapshot,
    pub now: Timestamp,
    pub config: &'a PlanConfig,
    /// The live controller's memory: when it first saw each (job UID) suspended. Empty for `plan`.
    pub first_seen_suspended: &'a HashMap<Str, Timestamp>,
    /// The live controller's memory: the earliest `Failed=True` time it saw per TrainJob UID
    /// (Trainer up to v2.3.0 removes the condition when it recreates the JobSet). Empty for `plan`.
    pub first_failed: &'a HashMap<Str, Timestamp>,
}

/// Plans one key. `zones` must have been computed from the same snapshot.
pub fn plan_key(input: &PlanInput<'_>, key: &Key, zones: &ZoneHealth, budget: &mut Budget<'_>) -> KeyPlan {
    let mut out = KeyPlan::default();
    match key {
        Key::Job(k) => {
            if let Some(job) = input.snapshot.job(k) {
                plan_job(input, job, &mut out);
            }
        }
        Key::TrainJob(id) => {
            if let Some(tj) = input.snapshot.trainjob(id) {
                plan_trainjob(input, tj, &mut out);
            }
        }
        Key::Pod(id) => {
            if let Some(pod) = input.snapshot.pod(id) {
                node_failure::plan(pod, input.snapshot, zones, budget, input.now, input.config, &mut out);
            }
        }
    }
    out
}

/// Plans every key of the snapshot, in a stable order: jobs, TrainJobs, then terminating pods
/// oldest deletion first (so the rate limit serves them in that order). Keys with nothing to do
/// are left out.
pub fn plan_all(input: &PlanInput<'_>, bucket: &mut TokenBucket) -> Vec<(Key, KeyPlan)> {
    let zones = ZoneHealth::compute(input.snapshot);
    let mut budget = Budget { bucket, waiting: 0 };
    let mut keys: Vec<Key> = input.snapshot.jobs().map(|j| Key::Job(j.key.clone())).collect();
    keys.sort();
    let mut trainjobs: Vec<Key> = input.snapshot.trainjobs().map(|t| Key::TrainJob(t.id.clone())).collect();
    trainjobs.sort();
    keys.extend(trainjobs);
    let mut pods: Vec<_> = input
        .snapshot
        .terminating_pods()
        .filter_map(|id| input.snapshot.pod(id))
        .map(|p| (p.deletion, Key::Pod(p.id.clone())))
        .collect();
    pods.sort();
    keys.extend(pods.into_iter().map(|(_, k)| k));
    keys.into_iter()
        .map(|key| {
            let plan = plan_key(input, &key, &zones, &mut budget);
            (key, plan)
        })
        .filter(|(_, plan)| !plan.actions.is_empty() || !plan.observations.is_empty())
        .collect()
}

fn plan_job(input: &PlanInput<'_>, job: &JobFacts, out: &mut KeyPlan) {
    if job.guard().is_some() {
        return;
    }
    let target = Target::job(job);
    let config = input.config;
    // Putting a stashed TTL back comes before the TTL itself, which needs it in spec.
    suspend::plan_restore(job, &target, config, out);
    ttl::plan(job, &target, input.now, config, out);
    let workload = input.snapshot.workload_for(&job.uid);
    if job.finished.is_some() || workload.is_some_and(|w| w.finished) {
        return;
    }
    suspend::plan_admitted(&target, job.key.kind.kind(), job.suspend, workload, input.now, config, out);
    let owner = PodOwner::V1 { job: job.key.clone(), uid: job.uid.clone() };
    let why = suspend::v1_stuck(job, input.snapshot.live_pods(&owner));
    let first_seen = input.first_seen_suspended.get(&job.uid).copied();
    suspend::plan(
        suspend::SuspendInput {
            target: &target,
            kind: job.key.kind.kind(),
            why,
            since: suspend::suspended_since(workload, job.suspended_condition, first_seen),
            first_seen,
            ttl: job.ttl_seconds,
            stashable: true,
        },
        input.now,
        config,
        out,
    );
}

fn plan_trainjob(input: &PlanInput<'_>, tj: &TrainJobFacts, out: &mut KeyPlan) {
    if tj.deleting || !tj.managed || tj.ignored {
        return;
    }
    let target = Target::trainjob(tj);
    ttl::plan_trainjob(tj, &target, input.now, input.config, out);
    let first_failed = input.first_failed.get(&tj.uid).copied();
    jobset_loop::plan(tj, input.snapshot.jobset_of(tj), first_failed, &target, input.config, out);
    let workload = input.snapshot.workload_for(&tj.uid);
    if tj.finished || workload.is_some_and(|w| w.finished) {
        return;
    }
    // Resumed, but its JobSet still suspended: Trainer could not carry the resume over (a
    // JobSet update its webhook refuses), and nothing runs either.
    let jobset_suspended = input.snapshot.jobset_of(tj).filter(|js| js.suspended).map(|js| &js.id);
    suspend::plan_admitted(
        &target,
        "TrainJob",
        suspend::Suspension { job: tj.suspend, jobset: jobset_suspended },
        workload,
        input.now,
        input.config,
        out,
    );
    let jobset_active = input.snapshot.jobset_of(tj).map_or(0, |js| js.active);
    let live = input.snapshot.live_pods(&PodOwner::JobSet(tj.id.clone()));
    let first_seen = input.first_seen_suspended.get(&tj.uid).copied();
    suspend::plan(
        suspend::SuspendInput {
            target: &target,
            kind: "TrainJob",
            why: suspend::trainjob_stuck(tj, jobset_active, live),
            since: suspend::suspended_since(workload, tj.suspended_condition, first_seen),
            first_seen,
            ttl: None,
            stashable: false,
        },
        input.now,
        input.config,
        out,
    );
}
