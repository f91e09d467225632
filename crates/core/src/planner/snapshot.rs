//! The snapshot the planner reads: compact facts of every watched object plus the few indexes the
//! rules need. The live controller feeds it from watch events ([`Change`]), `trainguard plan`
//! from files; both hand the same structure to the same planner. Pure: no I/O, no clock.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use super::facts::{
    BatchJobFacts, JobFacts, JobKey, JobSetFacts, NodeFacts, NsName, PodFacts, PodOwner, Str, TrainJobFacts,
    WorkloadFacts,
};
use crate::model::kubeflow_v1::TrainingKind;

/// What the planner plans for: one job, one TrainJob, or one pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Job(JobKey),
    TrainJob(NsName),
    Pod(NsName),
}

/// A pod owner without its UID: what a job or JobSet change is looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OwnerId {
    Job(JobKey),
    JobSet(NsName),
}

impl OwnerId {
    fn of(owner: &PodOwner) -> Self {
        match owner {
            PodOwner::V1 { job, .. } => OwnerId::Job(job.clone()),
            PodOwner::JobSet(js) => OwnerId::JobSet(js.clone()),
        }
    }
}

/// Which watch an object came from; a relist of one source replaces exactly its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Jobs(TrainingKind),
    TrainJobs,
    JobSets,
    /// `batch/v1` Jobs labelled `jobset.sigs.k8s.io/jobset-name`.
    BatchJobs,
    /// Pods labelled `training.kubeflow.org/job-name`.
    V1Pods,
    /// Pods labelled `jobset.sigs.k8s.io/jobset-name`.
    JobSetPods,
    Nodes,
    Workloads,
}

/// One change to the snapshot. `None` means the object is gone.
#[derive(Debug, Clone)]
pub enum Change {
    Job(JobKey, Option<JobFacts>),
    TrainJob(NsName, Option<TrainJobFacts>),
    JobSet(NsName, Option<JobSetFacts>),
    BatchJob(NsName, Option<BatchJobFacts>),
    Pod(NsName, Option<PodFacts>),
    Node(Str, Option<NodeFacts>),
    Workload(NsName, Option<WorkloadFacts>),
    /// A watch (re)listed its objects: everything of `source` not in `seen` is gone. For nodes the
    /// namespace is empty. The first relist of nodes also tells the snapshot the node list is
    /// complete, so a pod's node that is absent means a deleted node.
    Relisted(Source, HashSet<NsName>),
}

/// A pod's facts in the snapshot's pod set, found by their id. The most numerous objects by far:
/// the id is stored once (inside the facts, not again as a map key), and the table holds only a
/// pointer per slot. A hash table keeps up to half of its slots empty after it grows, and an
/// empty slot costs the size of an entry: with the facts inline, 150,000 pods took a 65 MB table
/// (and 98 MB while it grew), boxed they take 2 MB plus the facts themselves.
#[derive(Debug, Clone)]
struct PodEntry(Box<PodFacts>);

// Hash and equality are those of the id, as `Borrow` requires: the set is looked up by `NsName`.
impl Borrow<NsName> for PodEntry {
    fn borrow(&self) -> &NsName {
        &self.0.id
    }
}

impl Hash for PodEntry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}

impl PartialEq for PodEntry {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for PodEntry {}

/// The ids in `map` that a relist did not see.
fn unseen<V>(map: &HashMap<NsName, V>, seen: &HashSet<NsName>) -> Vec<NsName> {
    map.keys().filter(|k| !seen.contains(*k)).cloned().collect()
}

/// Replaces the facts kept for `id` in `map` (none: removes them), their id field set to the
/// snapshot's interned `id`. `parts` gives the facts' id field and the name that links them (a
/// job's UID, the owner's name of a JobSet or batch Job); returns that name of the old facts and of
/// the new.
fn replace<I: Clone + Eq + Hash, F>(
    map: &mut HashMap<I, Box<F>>,
    id: &I,
    facts: Option<F>,
    parts: impl Fn(&mut F) -> (&mut I, &Str),
) -> [Option<Str>; 2] {
    let old = map.remove(id).map(|mut old| parts(&mut old).1.clone());
    let new = facts.map(|mut facts| {
        let (own_id, link) = parts(&mut facts);
        *own_id = id.clone();
        let link = link.clone();
        map.insert(id.clone(), Box::new(facts));
        link
    });
    [old, new]
}

#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    // Facts are boxed: a table's slot costs the size of its entry, and up to half the slots of
    // a table are empty after it grows (see [`PodEntry`] for the pods).
    jobs: HashMap<JobKey, Box<JobFacts>>,
    trainjobs: HashMap<NsName, Box<TrainJobFacts>>,
    jobsets: HashMap<NsName, Box<JobSetFacts>>,
    batch_jobs: HashMap<NsName, Box<BatchJobFacts>>,
    pods: HashSet<PodEntry>,
    nodes: HashMap<Str, NodeFacts>,
    workloads: HashMap<NsName, WorkloadFacts>,
    /// The node list is complete (a relist finished, or a file snapshot had nodes).
    nodes_listed: bool,
    /// Bumped whenever a node's facts (or the completeness of the list) change.
    nodes_version: u64,
    /// Job or TrainJob UID → its key (to find a Workload's owner).
    owner_by_uid: HashMap<Str, Key>,
    /// Owner UID → its Workload.
    workload_by_owner: HashMap<Str, NsName>,
    /// Pods that count for the suspend verdict ([`PodFacts::counts_as_live`]), per owner.
    live_pods: HashMap<PodOwner, u32>,
    /// Pods with `deletionTimestamp`: the node-failure candidates (few, normally).
    terminating: BTreeSet<NsName>,
    /// The same pods by owner (job or JobSet), so a job change finds its own in O(1).
    terminating_by_owner: HashMap<OwnerId, HashSet<NsName>>,
    /// Namespaces, node names, zones, finalizers: shared so each is stored once.
    interner: HashSet<Str>,
    interner_purged_at: usize,
}

impl Snapshot {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn jobs(&self) -> impl Iterator<Item = &JobFacts> {
        self.jobs.values().map(Box::as_ref)
    }
    pub fn job(&self, key: &JobKey) -> Option<&JobFacts> {
        self.jobs.get(key).map(Box::as_ref)
    }
    pub fn trainjobs(&self) -> impl Iterator<Item = &TrainJobFacts> {
        self.trainjobs.values().map(Box::as_ref)
    }
    pub fn trainjob(&self, id: &NsName) -> Option<&TrainJobFacts> {
        self.trainjobs.get(id).map(Box::as_ref)
    }
    pub(crate) fn jobset(&self, id: &NsName) -> Option<&JobSetFacts> {
        self.jobsets.get(id).map(Box::as_ref)
    }
    pub(crate) fn batch_job(&self, id: &NsName) -> Option<&BatchJobFacts> {
        self.batch_jobs.get(id).map(Box::as_ref)
    }
    pub fn pod(&self, id: &NsName) -> Option<&PodFacts> {
        self.pods.get(id).map(|p| &*p.0)
    }
    pub fn pod_uids(&self) -> impl Iterator<Item = &Str> {
        self.pods.iter().map(|p| &p.0.uid)
    }
    pub fn node(&self, name: &str) -> Option<&NodeFacts> {
        self.nodes.get(name)
    }
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &NodeFacts> {
        self.nodes.values()
    }
    pub fn nodes_listed(&self) -> bool {
        self.nodes_listed
    }
    pub fn set_nodes_listed(&mut self, listed: bool) {
        self.nodes_listed = listed;
        self.nodes_version += 1;
    }
    /// Changes whenever a node changes: what derived node tables are keyed on.
    pub fn nodes_version(&self) -> u64 {
        self.nodes_version
    }
    pub fn terminating_pods(&self) -> impl Iterator<Item = &NsName> {
        self.terminating.iter()
    }

    /// The Workload Kueue keeps for the job (or TrainJob) with this UID.
    pub(crate) fn workload_for(&self, owner_uid: &str) -> Option<&WorkloadFacts> {
        self.workload_by_owner.get(owner_uid).and_then(|id| self.workloads.get(id))
    }

    /// Pods of `owner` without `deletionTimestamp`.
    pub fn live_pods(&self, owner: &PodOwner) -> u32 {
        self.live_pods.get(owner).copied().unwrap_or(0)
    }

    /// The JobSet of a TrainJob: same namespace and name, controlled by that TrainJob.
    pub(crate) fn jobset_of(&self, trainjob: &TrainJobFacts) -> Option<&JobSetFacts> {
        self.jobsets.get(&trainjob.id).map(Box::as_ref).filter(|js| js.trainjob_uid == trainjob.uid)
    }

    /// The TrainJob that controls a JobSet, when both are known and the UIDs agree.
    pub(crate) fn trainjob_of(&self, jobset: &JobSetFacts) -> Option<&TrainJobFacts> {
        let id = NsName { namespace: jobset.id.namespace.clone(), name: jobset.trainjob.clone() };
        self.trainjobs.get(&id).map(Box::as_ref).filter(|tj| tj.uid == jobset.trainjob_uid)
    }

    /// Applies one change and appends the keys whose plan may have changed to `dirty`.
    pub fn apply(&mut self, change: Change, dirty: &mut Vec<Key>) {
        match change {
            Change::Job(key, facts) => self.set_job(key, facts, dirty),
            Change::TrainJob(id, facts) => self.set_trainjob(id, facts, dirty),
            Change::JobSet(id, facts) => self.set_jobset(id, facts, dirty),
            Change::BatchJob(id, facts) => self.set_batch_job(id, facts, dirty),
            Change::Pod(id, facts) => self.set_pod(id, facts, dirty),
            Change::Node(name, facts) => self.set_node(name, facts, dirty),
            Change::Workload(id, facts) => self.set_workload(id, facts, dirty),
            Change::Relisted(source, seen) => self.relisted(source, &seen, dirty),
        }
        self.maybe_purge_interner();
    }

    /// Adds objects without tracking what changed (file snapshots, benchmarks).
    pub fn insert(&mut self, change: Change) {
        let mut ignore = Vec::new();
        self.apply(change, &mut ignore);
    }

    fn set_job(&mut self, key: JobKey, facts: Option<JobFacts>, dirty: &mut Vec<Key>) {
        let key = JobKey { kind: key.kind, id: self.intern_id(key.id) };
        let [old, new] = replace(&mut self.jobs, &key, facts, |j| (&mut j.key, &j.uid));
        self.index_uid(old, new, Key::Job(key.clone()));
        dirty.push(Key::Job(key.clone()));
        self.dirty_terminating(dirty, &OwnerId::Job(key));
    }

    /// Moves a job's entry in the by-UID index of owners from its old UID to its new one.
    fn index_uid(&mut self, old: Option<Str>, new: Option<Str>, key: Key) {
        if let Some(old) = old {
            self.owner_by_uid.remove(&old);
        }
        if let Some(new) = new {
            self.owner_by_uid.insert(new, key);
        }
    }

    fn set_trainjob(&mut self, id: NsName, facts: Option<TrainJobFacts>, dirty: &mut Vec<Key>) {
        let id = self.intern_id(id);
        let [old, new] = replace(&mut self.trainjobs, &id, facts, |t| (&mut t.id, &t.uid));
        self.index_uid(old, new, Key::TrainJob(id.clone()));
        dirty.push(Key::TrainJob(id.clone()));
        // Its JobSet has the same name; JobSet pods hang off the JobSet.
        self.dirty_terminating(dirty, &OwnerId::JobSet(id));
    }

    fn set_jobset(&mut self, id: NsName, facts: Option<JobSetFacts>, dirty: &mut Vec<Key>) {
        let id = self.intern_id(id);
        let owners = replace(&mut self.jobsets, &id, facts, |js| (&mut js.id, &js.trainjob));
        for owner in owners.into_iter().flatten() {
            let key = Key::TrainJob(NsName { namespace: id.namespace.clone(), name: owner });
            if !dirty.contains(&key) {
                dirty.push(key);
            }
        }
        self.dirty_terminating(dirty, &OwnerId::JobSet(id));
    }

    fn set_batch_job(&mut self, id: NsName, facts: Option<BatchJobFacts>, dirty: &mut Vec<Key>) {
        let id = self.intern_id(id);
        let jobsets = replace(&mut self.batch_jobs, &id, facts, |j| (&mut j.id, &j.jobset));
        // The chain of the JobSet's pods changed: their plans (and its TrainJob's) may too.
        for jobset in jobsets.into_iter().flatten() {
            let js = NsName { namespace: id.namespace.clone(), name: jobset };
            self.dirty_owner(&PodOwner::JobSet(js.clone()), dirty);
            self.dirty_terminating(dirty, &OwnerId::JobSet(js));
        }
    }

    fn set_pod(&mut self, id: NsName, facts: Option<PodFacts>, dirty: &mut Vec<Key>) {
        let id = self.intern_id(id);
        if let Some(PodEntry(old)) = self.pods.take(&id) {
            self.count_pod(&old, -1);
            if self.terminating.remove(&id) {
                let owner = OwnerId::of(&old.owner);
                if let Some(set) = self.terminating_by_owner.get_mut(&owner) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.terminating_by_owner.remove(&owner);
                    }
                }
            }
            self.dirty_owner(&old.owner, dirty);
        }
        if let Some(mut facts) = facts {
            facts.id = id.clone();
            // A job's (or JobSet's, or batch Job's) name and UID are shared by all its pods.
            facts.owner = match facts.owner {
                PodOwner::V1 { job, uid } => PodOwner::V1 {
                    job: JobKey { kind: job.kind, id: self.intern_both(job.id) },
                    uid: self.intern(&uid),
                },
                PodOwner::JobSet(js) => PodOwner::JobSet(self.intern_both(js)),
            };
            facts.controller_job = facts.controller_job.map(|(name, uid)| (self.intern(&name), self.intern(&uid)));
            facts.node = facts.node.map(|n| self.intern(&n));
            facts.finalizers = facts.finalizers.iter().map(|f| self.intern(f)).collect();
            self.count_pod(&facts, 1);
            if facts.deletion.is_some() {
                self.terminating.insert(id.clone());
                self.terminating_by_owner.entry(OwnerId::of(&facts.owner)).or_default().insert(id.clone());
            }
            let owner = facts.owner.clone();
            self.pods.insert(PodEntry(Box::new(facts)));
            self.dirty_owner(&owner, dirty);
        }
        dirty.push(Key::Pod(id));
    }

    fn set_node(&mut self, name: Str, facts: Option<NodeFacts>, dirty: &mut Vec<Key>) {
        let name = self.intern(&name);
        let changed = match facts {
            Some(mut facts) => {
                facts.name = name.clone();
                facts.zone = facts.zone.map(|z| self.intern(&z));
                self.nodes.insert(name, facts.clone()) != Some(facts)
            }
            None => self.nodes.remove(&name).is_some(),
        };
        // Health and the zone brake may change for every candidate, not only the node's own pods.
        if changed {
            self.nodes_version += 1;
            dirty.extend(self.terminating.iter().cloned().map(Key::Pod));
        }
    }

    fn set_workload(&mut self, id: NsName, facts: Option<WorkloadFacts>, dirty: &mut Vec<Key>) {
        let id = self.intern_id(id);
        if let Some(old) = self.workloads.remove(&id)
            && let Some(uid) = old.owner_uid
        {
            if self.workload_by_owner.get(&uid) == Some(&id) {
                self.workload_by_owner.remove(&uid);
            }
            if let Some(key) = self.owner_by_uid.get(&uid) {
                dirty.push(key.clone());
            }
        }
        if let Some(mut facts) = facts {
            facts.id = id.clone();
            if let Some(uid) = &facts.owner_uid {
                self.workload_by_owner.insert(uid.clone(), id.clone());
                if let Some(key) = self.owner_by_uid.get(uid) {
                    dirty.push(key.clone());
                }
            }
            self.workloads.insert(id, facts);
        }
    }

    fn relisted(&mut self, source: Source, seen: &HashSet<NsName>, dirty: &mut Vec<Key>) {
        match source {
            Source::Jobs(kind) => {
                let gone: Vec<JobKey> =
                    self.jobs.keys().filter(|k| k.kind == kind && !seen.contains(&k.id)).cloned().collect();
                for key in gone {
                    self.set_job(key, None, dirty);
                }
            }
            Source::TrainJobs => {
                for id in unseen(&self.trainjobs, seen) {
                    self.set_trainjob(id, None, dirty);
                }
            }
            Source::JobSets => {
                for id in unseen(&self.jobsets, seen) {
                    self.set_jobset(id, None, dirty);
                }
            }
            Source::BatchJobs => {
                for id in unseen(&self.batch_jobs, seen) {
                    self.set_batch_job(id, None, dirty);
                }
            }
            Source::V1Pods | Source::JobSetPods => {
                let v1 = source == Source::V1Pods;
                let gone: Vec<NsName> = self
                    .pods
                    .iter()
                    .map(|p| &p.0)
                    .filter(|p| matches!(p.owner, PodOwner::V1 { .. }) == v1 && !seen.contains(&p.id))
                    .map(|p| p.id.clone())
                    .collect();
                for id in gone {
                    self.set_pod(id, None, dirty);
                }
            }
            Source::Nodes => {
                let cluster: Str = "".into();
                let gone: Vec<Str> = self
                    .nodes
                    .keys()
                    .filter(|n| !seen.contains(&NsName { namespace: cluster.clone(), name: (*n).clone() }))
                    .cloned()
                    .collect();
                for name in gone {
                    self.set_node(name, None, dirty);
                }
                if !self.nodes_listed {
                    self.nodes_listed = true;
                    self.nodes_version += 1;
                    dirty.extend(self.terminating.iter().cloned().map(Key::Pod));
                }
            }
            Source::Workloads => {
                let gone: Vec<NsName> = self.workloads.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                for id in gone {
                    self.set_workload(id, None, dirty);
                }
            }
        }
    }

    fn count_pod(&mut self, pod: &PodFacts, delta: i32) {
        if !pod.counts_as_live() {
            return;
        }
        if delta > 0 {
            *self.live_pods.entry(pod.owner.clone()).or_default() += 1;
        } else if let Some(n) = self.live_pods.get_mut(&pod.owner) {
            *n -= 1;
            if *n == 0 {
                self.live_pods.remove(&pod.owner);
            }
        }
    }

    /// A pod change may change its job's suspend verdict ("an owned pod without deletionTimestamp").
    fn dirty_owner(&self, owner: &PodOwner, dirty: &mut Vec<Key>) {
        let key = match owner {
            PodOwner::V1 { job, .. } => Key::Job(job.clone()),
            PodOwner::JobSet(js) => match self.jobsets.get(js) {
                Some(facts) => Key::TrainJob(NsName { namespace: js.namespace.clone(), name: facts.trainjob.clone() }),
                None => return,
            },
        };
        if dirty.last() != Some(&key) {
            dirty.push(key);
        }
    }

    fn dirty_terminating(&self, dirty: &mut Vec<Key>, owner: &OwnerId) {
        if let Some(pods) = self.terminating_by_owner.get(owner) {
            dirty.extend(pods.iter().cloned().map(Key::Pod));
        }
    }

    fn intern(&mut self, s: &Str) -> Str {
        if let Some(existing) = self.interner.get(s) {
            return existing.clone();
        }
        self.interner.insert(s.clone());
        s.clone()
    }

    /// Namespaces are interned; names are unique enough to be kept as they come.
    fn intern_id(&mut self, id: NsName) -> NsName {
        NsName { namespace: self.intern(&id.namespace), name: id.name }
    }

    /// Both interned: for owners, whose names repeat on each of their pods.
    fn intern_both(&mut self, id: NsName) -> NsName {
        NsName { namespace: self.intern(&id.namespace), name: self.intern(&id.name) }
    }

    /// Drops interned strings nobody else holds, whenever the interner has doubled.
    fn maybe_purge_interner(&mut self) {
        if self.interner.len() > 1024 && self.interner.len() > 2 * self.interner_purged_at {
            self.interner.retain(|s| std::sync::Arc::strong_count(s) > 1);
            self.interner_purged_at = self.interner.len();
        }
    }
}
