//! The `ClusterView` trait and its simplest implementations.

use std::collections::HashMap;

/// What the gate (spec §4) knows about one TrainJob's JobSet and its child Jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFacts {
    /// No cluster: only the TrainJob's own status (G4) can be consulted.
    Offline,
    /// A cache that should know does not (not yet synced, or its watch broke too long ago).
    Unknown { why: String },
    /// Fresh cache contents (a JobSet CRD that is not installed is `Known` with no JobSet).
    Known(JobSetFacts),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSetFacts {
    pub jobset: Option<JobSetState>,
    /// Child `batch/v1` Jobs labelled `jobset.sigs.k8s.io/jobset-name=<name>`, ordered by name.
    pub jobs: Vec<ChildJobState>,
}

/// The fields of a `jobset.x-k8s.io/v1alpha2` JobSet the gate reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSetState {
    /// `metadata.deletionTimestamp` is set (G2).
    pub deleting: bool,
    /// `status.replicatedJobsStatus[i]` as `(name, active)`, in status order (G1).
    pub replicated_jobs: Vec<(String, i32)>,
}

/// The fields of a child `batch/v1` Job the gate reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildJobState {
    pub name: String,
    /// `status.active` (G3).
    pub active: i32,
    /// `status.terminating`; None when the field is absent, which means unknown, not zero (G5).
    pub terminating: Option<i32>,
    /// `metadata.deletionTimestamp` is set (G5).
    pub deleting: bool,
}

/// Read access to cluster state for the admission gate. Implementations answer from memory:
/// the admission path never calls the API server.
pub trait ClusterView: Send + Sync {
    fn gate_facts(&self, namespace: &str, name: &str) -> GateFacts;
}

/// No cluster at all (`--offline`, and the CLI without `--state`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl ClusterView for Offline {
    fn gate_facts(&self, _namespace: &str, _name: &str) -> GateFacts {
        GateFacts::Offline
    }
}

/// A fixed set of JobSets and Jobs (files given with `--state`, tests).
#[derive(Debug, Clone, Default)]
pub struct StaticView {
    jobsets: HashMap<(String, String), JobSetState>,
    jobs: HashMap<(String, String), Vec<ChildJobState>>,
}

impl StaticView {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_jobset(mut self, namespace: &str, name: &str, state: JobSetState) -> Self {
        self.insert_jobset(namespace, name, state);
        self
    }

    pub fn with_job(mut self, namespace: &str, jobset: &str, job: ChildJobState) -> Self {
        self.insert_job(namespace, jobset, job);
        self
    }

    pub fn insert_jobset(&mut self, namespace: &str, name: &str, state: JobSetState) {
        self.jobsets.insert((namespace.to_string(), name.to_string()), state);
    }

    pub fn insert_job(&mut self, namespace: &str, jobset: &str, job: ChildJobState) {
        let jobs = self.jobs.entry((namespace.to_string(), jobset.to_string())).or_default();
        let at = jobs.partition_point(|j| j.name < job.name);
        jobs.insert(at, job);
    }
}

impl ClusterView for StaticView {
    fn gate_facts(&self, namespace: &str, name: &str) -> GateFacts {
        let key = (namespace.to_string(), name.to_string());
        GateFacts::Known(JobSetFacts {
            jobset: self.jobsets.get(&key).cloned(),
            jobs: self.jobs.get(&key).cloned().unwrap_or_default(),
        })
    }
}
