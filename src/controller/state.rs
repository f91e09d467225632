//! The live controller's bookkeeping, free of I/O so it can be tested and benchmarked without a
//! runtime: the snapshot, the keys to re-plan, one timer per key (requeue at the exact time a rule
//! can next fire — no polling), the memory docs/controller.md (Preemption (suspend)) allows ("first seen suspended"), event
//! deduplication per episode, in-flight work, error backoff and the force-delete token bucket.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::config::PlanConfig;
use trainguard_core::duration::plus;
use trainguard_core::planner::facts::{FinishKind, PodOwner, Str};
use trainguard_core::planner::snapshot::{Change, Key, Snapshot};
use trainguard_core::planner::{
    Action, Budget, KeyPlan, Observation, PlanInput, Planned, Reason, TokenBucket, ZoneHealth, plan_key,
};

/// Work for the executor: the actions planned for one key, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    pub key: Key,
    pub actions: Vec<Planned>,
    /// Pods of the job without deletionTimestamp, from the cache (for the stash re-check).
    pub(crate) live_pods: u32,
}

/// How the executor's work for a key ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkOutcome {
    /// Done, or nothing left to do (404, precondition failed on a new object, …).
    Done,
    /// The live object no longer matches the rule: wait for the watch to bring the change.
    Aborted,
    /// 409 on a resourceVersion precondition: re-evaluate now.
    Conflict,
    /// Any other error: retry with backoff (1s doubling to 5m).
    Failed,
    /// The executor's brake re-check held it back: re-planned on node changes.
    Suppressed,
    /// The rate limit held it back at execution: re-planned when the next token is due.
    RateLimited(Timestamp),
}

/// What the executor reports back for one [`Work`].
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub key: Key,
    pub(crate) outcome: WorkOutcome,
    /// Events it published: (object UID, reason, episode).
    pub(crate) published: Vec<(Str, Reason, String)>,
}

const BACKOFF_MIN: SignedDuration = SignedDuration::from_secs(1);
const BACKOFF_MAX: SignedDuration = SignedDuration::from_mins(5);

/// One timer per key, ordered by time.
#[derive(Debug, Default)]
struct Timers {
    by_key: HashMap<Key, Timestamp>,
    queue: BTreeSet<(Timestamp, Key)>,
}

impl Timers {
    fn set(&mut self, key: &Key, at: Option<Timestamp>) {
        if let Some(old) = self.by_key.remove(key) {
            self.queue.remove(&(old, key.clone()));
        }
        if let Some(at) = at {
            self.by_key.insert(key.clone(), at);
            self.queue.insert((at, key.clone()));
        }
    }

    fn next(&self) -> Option<Timestamp> {
        self.queue.first().map(|(t, _)| *t)
    }

    fn pop_due(&mut self, now: Timestamp) -> Vec<Key> {
        let mut due = Vec::new();
        while let Some((at, key)) = self.queue.pop_first() {
            if at > now {
                self.queue.insert((at, key));
                break;
            }
            self.by_key.remove(&key);
            due.push(key);
        }
        due
    }
}

pub struct ControllerState {
    snapshot: Snapshot,
    config: PlanConfig,
    first_seen_suspended: HashMap<Str, Timestamp>,
    /// The earliest `Failed=True` time seen per TrainJob UID (the JobSet-TTL loop's evidence,
    /// which Trainer erases from the object when it recreates the JobSet).
    first_failed: HashMap<Str, Timestamp>,
    /// Events already published, per object UID: (reason, episode).
    published: HashMap<Str, HashSet<(Reason, String)>>,
    timers: Timers,
    dirty: BTreeSet<Key>,
    in_flight: HashSet<Key>,
    /// Keys that became dirty while in flight: re-planned when their report arrives.
    deferred: HashSet<Key>,
    failures: HashMap<Key, u32>,
    /// The force-delete budget; the executor takes the tokens, the planner only looks.
    bucket: SharedBucket,
    /// The brake's view of the node cache, recomputed when a node changes.
    zones: Arc<ZoneHealth>,
    zones_version: Option<u64>,
    observations: HashMap<Key, Vec<Observation>>,
    gauges: HashMap<Observation, i64>,
    synced: bool,
    scratch: Vec<Key>,
}

/// The force-delete token bucket shared by the planner (which looks), the executor (which takes)
/// and successive leadership terms of one process (so a new term brings no fresh burst).
pub(crate) type SharedBucket = Arc<Mutex<TokenBucket>>;

/// A bucket that starts empty (see [`TokenBucket::empty`]).
pub(crate) fn new_bucket(config: &PlanConfig) -> SharedBucket {
    Arc::new(Mutex::new(TokenBucket::empty(config.max_force_deletes_per_minute)))
}

impl ControllerState {
    /// A state with a bucket of its own, starting empty.
    pub fn new(config: PlanConfig) -> Self {
        let bucket = new_bucket(&config);
        Self::with_bucket(config, bucket)
    }

    /// A state planning against `bucket` (the one the executor takes tokens from).
    pub(crate) fn with_bucket(config: PlanConfig, bucket: SharedBucket) -> Self {
        ControllerState {
            bucket,
            zones: Arc::default(),
            zones_version: None,
            snapshot: Snapshot::new(),
            config,
            first_seen_suspended: HashMap::new(),
            first_failed: HashMap::new(),
            published: HashMap::new(),
            timers: Timers::default(),
            dirty: BTreeSet::new(),
            in_flight: HashSet::new(),
            deferred: HashSet::new(),
            failures: HashMap::new(),
            observations: HashMap::new(),
            gauges: HashMap::new(),
            synced: false,
            scratch: Vec::new(),
        }
    }

    #[cfg(test)]
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Applies a watch change. `now` stamps "first seen suspended" (docs/controller.md (Preemption (suspend)) one in-memory fact).
    pub fn apply(&mut self, change: Change, now: Timestamp) {
        match &change {
            Change::Job(key, facts) => {
                let old = self.snapshot.job(key).map(|j| j.uid.clone());
                self.track_suspension(old, facts.as_ref().map(|j| (j.uid.clone(), j.suspend)), now);
            }
            Change::TrainJob(id, facts) => {
                let old = self.snapshot.trainjob(id).map(|t| t.uid.clone());
                if let Some(old) = &old
                    && facts.as_ref().is_none_or(|t| t.uid != *old)
                {
                    self.first_failed.remove(old);
                }
                if let Some(t) = facts
                    && let Some((FinishKind::Failed, Some(at))) = t.finished_condition
                {
                    let first = self.first_failed.entry(t.uid.clone()).or_insert(at);
                    *first = (*first).min(at);
                }
                self.track_suspension(old, facts.as_ref().map(|t| (t.uid.clone(), t.suspend)), now);
            }
            Change::Pod(id, facts) => {
                if let Some(old) = self.snapshot.pod(id)
                    && facts.as_ref().is_none_or(|f| f.uid != old.uid)
                {
                    self.published.remove(&old.uid);
                }
            }
            _ => {}
        }
        let relisted = matches!(change, Change::Relisted(..));
        let mut dirty = std::mem::take(&mut self.scratch);
        self.snapshot.apply(change, &mut dirty);
        if self.synced {
            self.dirty.extend(dirty.drain(..));
        } else {
            // Before the first sync nothing is planned, and `set_synced` marks every key that can
            // need a plan: collecting each listed object's key here would only hold them all.
            dirty.clear();
        }
        self.scratch = dirty;
        if relisted {
            self.forget_gone();
        }
    }

    /// After a relist removed objects wholesale: drop the memory kept for UIDs no longer present.
    fn forget_gone(&mut self) {
        let snapshot = &self.snapshot;
        let live: HashSet<&Str> = snapshot
            .jobs()
            .map(|j| &j.uid)
            .chain(snapshot.trainjobs().map(|t| &t.uid))
            .chain(snapshot.pod_uids())
            .collect();
        self.published.retain(|uid, _| live.contains(uid));
        self.first_seen_suspended.retain(|uid, _| live.contains(uid));
        self.first_failed.retain(|uid, _| live.contains(uid));
    }

    fn track_suspension(&mut self, old_uid: Option<Str>, new: Option<(Str, bool)>, now: Timestamp) {
        if let Some(old) = old_uid
            && new.as_ref().is_none_or(|(uid, _)| *uid != old)
        {
            self.first_seen_suspended.remove(&old);
            self.published.remove(&old);
        }
        match new {
            Some((uid, true)) => {
                self.first_seen_suspended.entry(uid).or_insert(now);
            }
            Some((uid, false)) => {
                self.first_seen_suspended.remove(&uid);
            }
            None => {}
        }
    }

    /// All watches have listed once: plan everything.
    pub fn set_synced(&mut self) {
        if self.synced {
            return;
        }
        self.synced = true;
        let snapshot = &self.snapshot;
        self.dirty.extend(snapshot.jobs().map(|j| Key::Job(j.key.clone())));
        self.dirty.extend(snapshot.trainjobs().map(|t| Key::TrainJob(t.id.clone())));
        self.dirty.extend(snapshot.terminating_pods().cloned().map(Key::Pod));
    }

    pub(crate) fn is_synced(&self) -> bool {
        self.synced
    }

    /// Moves keys whose timer has come to the dirty set.
    pub(crate) fn fire_due(&mut self, now: Timestamp) {
        let due = self.timers.pop_due(now);
        self.dirty.extend(due);
    }

    /// The earliest timer.
    pub(crate) fn next_wake(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    /// Plans every dirty key not in flight; returns the work to execute. Before the first full
    /// sync nothing is planned (a partial cache must not look like a missing node or job).
    pub fn plan_dirty(&mut self, now: Timestamp) -> Vec<(Key, KeyPlan, Option<Work>)> {
        if !self.synced {
            return Vec::new();
        }
        let keys: Vec<Key> = std::mem::take(&mut self.dirty).into_iter().collect();
        let zones = self.zones();
        // The planner looks at a copy: tokens are taken when a delete is executed.
        let mut bucket = {
            let mut shared = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            // Refilling is idempotent; it starts the clock of a bucket nobody has used yet.
            shared.available(now);
            shared.clone()
        };
        let mut waiting = 0;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if self.in_flight.contains(&key) {
                self.deferred.insert(key);
                continue;
            }
            let plan = {
                let input = PlanInput {
                    snapshot: &self.snapshot,
                    now,
                    config: &self.config,
                    first_seen_suspended: &self.first_seen_suspended,
                    first_failed: &self.first_failed,
                };
                let mut budget = Budget { bucket: &mut bucket, waiting };
                let plan = plan_key(&input, &key, &zones, &mut budget);
                waiting = budget.waiting;
                plan
            };
            self.timers.set(&key, plan.wake);
            self.set_observations(&key, &plan.observations);
            let work = self.work_for(&key, &plan);
            if work.is_some() {
                self.in_flight.insert(key.clone());
            }
            out.push((key, plan, work));
        }
        out
    }

    fn work_for(&self, key: &Key, plan: &KeyPlan) -> Option<Work> {
        let actions: Vec<Planned> = plan
            .actions
            .iter()
            .filter(|p| match &p.action {
                Action::Requeue { .. } => false,
                Action::Event(e) => !self.was_published(&e.target.uid, e.reason, &e.episode),
                _ => true,
            })
            .cloned()
            .collect();
        if actions.is_empty() {
            return None;
        }
        let live_pods = match key {
            Key::Job(k) => self
                .snapshot
                .job(k)
                .map_or(0, |j| self.snapshot.live_pods(&PodOwner::V1 { job: k.clone(), uid: j.uid.clone() })),
            _ => 0,
        };
        Some(Work { key: key.clone(), actions, live_pods })
    }

    fn was_published(&self, uid: &Str, reason: Reason, episode: &str) -> bool {
        self.published.get(uid).is_some_and(|set| set.contains(&(reason, episode.to_string())))
    }

    fn set_observations(&mut self, key: &Key, new: &[Observation]) {
        let old = if new.is_empty() {
            self.observations.remove(key)
        } else {
            self.observations.insert(key.clone(), new.to_vec())
        };
        for o in old.iter().flatten() {
            *self.gauges.entry(*o).or_default() -= 1;
        }
        for o in new {
            *self.gauges.entry(*o).or_default() += 1;
        }
    }

    /// How many objects the state keeps memory for (published events, first sightings).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.published.len() + self.first_seen_suspended.len() + self.first_failed.len()
    }

    /// Gauge values by observation (entries may be 0 once a label set had a value).
    pub(crate) fn gauges(&self) -> &HashMap<Observation, i64> {
        &self.gauges
    }

    /// Takes the executor's report for a key.
    pub(crate) fn finish(&mut self, report: Report, now: Timestamp) {
        self.in_flight.remove(&report.key);
        if self.deferred.remove(&report.key) {
            self.dirty.insert(report.key.clone());
        }
        for (uid, reason, episode) in report.published {
            self.published.entry(uid).or_default().insert((reason, episode));
        }
        match report.outcome {
            WorkOutcome::Done | WorkOutcome::Aborted | WorkOutcome::Suppressed => {
                self.failures.remove(&report.key);
            }
            WorkOutcome::Conflict => {
                self.failures.remove(&report.key);
                self.dirty.insert(report.key);
            }
            WorkOutcome::RateLimited(at) => {
                self.failures.remove(&report.key);
                let wake = self.timers.by_key.get(&report.key).map_or(at, |t| (*t).min(at));
                self.timers.set(&report.key, Some(wake));
            }
            WorkOutcome::Failed => {
                let n = self.failures.entry(report.key.clone()).or_default();
                *n += 1;
                let backoff = BACKOFF_MIN.checked_mul(1 << (*n - 1).min(16)).unwrap_or(BACKOFF_MAX).min(BACKOFF_MAX);
                // Retry at the backoff, or earlier if a rule fires earlier anyway.
                let at = plus(now, backoff);
                let wake = self.timers.by_key.get(&report.key).map_or(at, |t| (*t).min(at));
                self.timers.set(&report.key, Some(wake));
            }
        }
    }

    /// The force-delete bucket this state plans against.
    #[cfg(test)]
    pub(crate) fn bucket(&self) -> SharedBucket {
        self.bucket.clone()
    }

    /// The brake's view of the node cache, recomputed only when a node changed (it does not
    /// depend on time). The live loop hands the same value to the executor.
    pub(crate) fn zones(&mut self) -> Arc<ZoneHealth> {
        let version = self.snapshot.nodes_version();
        if self.zones_version != Some(version) {
            self.zones = Arc::new(ZoneHealth::compute(&self.snapshot));
            self.zones_version = Some(version);
        }
        self.zones.clone()
    }
}
