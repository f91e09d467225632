//! The `ClusterView` trait and its simplest implementations.

use crate::model::jobset::{BatchJobView, JobSetView};
use std::collections::HashMap;

/// What the gate (docs/webhook.md §4) knows about one TrainJob's JobSet and its child Jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFacts {
    /// No cluster: only the TrainJob's own status (G4) can be consulted.
    Offline,
    /// A cache that should know does not (not yet synced, or its watch broke too long ago).
    Unknown { why: String },
    /// Fresh cache contents (a JobSet CRD that is not installed is `Known` with no JobSet).
    Known(JobSetWithJobs),
}

/// A TrainJob's JobSet, when there is one, and its child Jobs: the gate's facts (the planner's
/// facts of a JobSet are `planner::facts::JobSetFacts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSetWithJobs {
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
        GateFacts::Known(JobSetWithJobs {
            jobset: self.jobsets.get(&key).cloned(),
            jobs: self.jobs.get(&key).cloned().unwrap_or_default(),
        })
    }
}

impl StaticView {
    /// Builds a view from objects as `kubectl get -o yaml` prints them: JobSets and child Jobs
    /// are kept, every other kind is ignored. Returns how many objects were used.
    pub fn add_objects<'v>(
        &mut self,
        objects: impl IntoIterator<Item = &'v serde_json::Value>,
    ) -> Result<usize, StateError> {
        use crate::model::jobset::{BatchJobView, JOBSET_GROUP, JobSetView};
        let mut used = 0;
        for object in objects {
            let api_version = object.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
            let kind = object.get("kind").and_then(|v| v.as_str()).unwrap_or("");
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            match (group, kind) {
                (JOBSET_GROUP, "JobSet") => {
                    let js: JobSetView =
                        serde_json::from_value(object.clone()).map_err(|e| StateError::decode("JobSet", object, e))?;
                    let ns = js.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                    let name = js.metadata.name.clone().unwrap_or_default();
                    self.insert_jobset(&ns, &name, JobSetState::from(&js));
                    used += 1;
                }
                ("batch", "Job") => {
                    let job: BatchJobView =
                        serde_json::from_value(object.clone()).map_err(|e| StateError::decode("Job", object, e))?;
                    if let Some(jobset) = job.jobset_name() {
                        let ns = job.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                        self.insert_job(&ns, jobset, ChildJobState::from(&job));
                        used += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(used)
    }
}

/// A `--state` object that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name} does not decode: {source}")]
pub struct StateError {
    pub kind: &'static str,
    pub name: String,
    #[source]
    pub(crate) source: serde_json::Error,
}

impl StateError {
    fn decode(kind: &'static str, object: &serde_json::Value, source: serde_json::Error) -> Self {
        let meta = object.get("metadata");
        let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(|v| v.as_str()).unwrap_or("");
        StateError { kind, name: format!("{}/{}", field("namespace"), field("name")), source }
    }
}

impl From<&JobSetView> for JobSetState {
    fn from(js: &JobSetView) -> Self {
        JobSetState {
            deleting: js.metadata.deletion_timestamp.is_some(),
            replicated_jobs: js
                .status
                .iter()
                .flat_map(|s| s.replicated_jobs_status.iter().flatten())
                .map(|r| (r.name.clone(), r.active.unwrap_or(0)))
                .collect(),
        }
    }
}

impl From<&BatchJobView> for ChildJobState {
    fn from(job: &BatchJobView) -> Self {
        let status = job.status.as_ref();
        ChildJobState {
            name: job.metadata.name.clone().unwrap_or_default(),
            active: status.and_then(|s| s.active).unwrap_or(0),
            terminating: status.and_then(|s| s.terminating),
            deleting: job.metadata.deletion_timestamp.is_some(),
        }
    }
}
