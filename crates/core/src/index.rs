//! The cluster index's records: each watched JobSet and child Job compacted once, into what the
//! admission gate reads (docs/webhook.md §4) and what the controller's planner reads, side by side.
//! The binary's index (`src/cluster`) keeps one record per object and serves both from it; the
//! gate's `JobSetWithJobs` and the planner's snapshot changes are read off the records. Pure: no I/O,
//! no clock.

use crate::model::jobset::{BatchJobView, JobSetView};
use crate::planner::facts::{BatchJobFacts, FactsError, JobSetFacts, NsName};
use crate::planner::snapshot::Change;
use crate::view::{ChildJobState, JobSetState};

/// One object as the index keeps it: what the gate reads (`G`, a few dozen bytes), and the
/// planner's facts (`F`) when the planner keeps the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<G, F> {
    gate: G,
    /// `None` for an object the planner does not keep (a JobSet no TrainJob controls, a Job no
    /// JobSet controls) or one that does not reduce.
    planner: Option<Box<F>>,
}

/// A JobSet as the index keeps it.
pub type JobSetRecord = Record<GateJobSet, JobSetFacts>;
/// A child `batch/v1` Job as the index keeps it (by its JobSet's name label).
pub type ChildJobRecord = Record<GateJob, BatchJobFacts>;

/// What the gate reads of a JobSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateJobSet {
    /// `metadata.deletionTimestamp` is set (G2).
    deleting: bool,
    /// `status.replicatedJobsStatus[i]` as `(name, active)`, in status order (G1).
    replicated: Box<[(Box<str>, i32)]>,
}

/// What the gate reads of a child Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateJob {
    name: Box<str>,
    /// `status.active` (G3).
    active: i32,
    /// `status.terminating`; `None` when absent, which means unknown (G5).
    terminating: Option<i32>,
    /// `metadata.deletionTimestamp` is set (G5).
    deleting: bool,
}

/// The planner's facts of an object the index keeps.
pub trait PlannerFacts: Clone {
    fn id(&self) -> &NsName;
    /// The snapshot change that sets these facts.
    fn into_change(self) -> Change;
}

impl PlannerFacts for JobSetFacts {
    fn id(&self) -> &NsName {
        &self.id
    }
    fn into_change(self) -> Change {
        Change::JobSet(self.id.clone(), Some(self))
    }
}

impl PlannerFacts for BatchJobFacts {
    fn id(&self) -> &NsName {
        &self.id
    }
    fn into_change(self) -> Change {
        Change::BatchJob(self.id.clone(), Some(self))
    }
}

impl<G, F: PlannerFacts> Record<G, F> {
    /// The record, and why the planner cannot use the object, if it cannot (the gate still can).
    fn build(gate: G, facts: Result<Option<F>, FactsError>) -> (Self, Option<FactsError>) {
        match facts {
            Ok(facts) => (Record { gate, planner: facts.map(Box::new) }, None),
            Err(e) => (Record { gate, planner: None }, Some(e)),
        }
    }

    /// The planner's change for this record, when the planner keeps it.
    pub fn planner_change(&self) -> Option<Change> {
        self.planner.as_deref().map(|f| f.clone().into_change())
    }

    /// The planner's id of this record, when the planner keeps it.
    pub fn planner_id(&self) -> Option<&NsName> {
        self.planner.as_deref().map(PlannerFacts::id)
    }
}

impl JobSetRecord {
    /// The record, and why the planner cannot use the object, if it cannot (the gate still can).
    pub fn from_view(js: &JobSetView) -> (Self, Option<FactsError>) {
        let state = JobSetState::from(js);
        let gate = GateJobSet {
            deleting: state.deleting,
            replicated: state.replicated_jobs.into_iter().map(|(n, a)| (n.into_boxed_str(), a)).collect(),
        };
        Record::build(gate, JobSetFacts::from_view(js))
    }

    /// What the gate reads.
    pub fn gate_state(&self) -> JobSetState {
        let gate = &self.gate;
        JobSetState {
            deleting: gate.deleting,
            replicated_jobs: gate.replicated.iter().map(|(n, a)| (n.to_string(), *a)).collect(),
        }
    }
}

impl ChildJobRecord {
    /// The record, and why the planner cannot use the object, if it cannot (the gate still can).
    pub fn from_view(job: &BatchJobView) -> (Self, Option<FactsError>) {
        let s = ChildJobState::from(job);
        let gate = GateJob {
            name: s.name.into_boxed_str(),
            active: s.active,
            terminating: s.terminating,
            deleting: s.deleting,
        };
        Record::build(gate, BatchJobFacts::from_view(job))
    }

    /// The Job's name (the index keeps a JobSet's Jobs sorted by it).
    pub fn name(&self) -> &str {
        &self.gate.name
    }

    /// What the gate reads.
    pub fn gate_state(&self) -> ChildJobState {
        let gate = &self.gate;
        ChildJobState {
            name: gate.name.to_string(),
            active: gate.active,
            terminating: gate.terminating,
            deleting: gate.deleting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(owned: bool) -> JobSetView {
        let mut meta = serde_json::json!({"name": "llama", "namespace": "team", "uid": "js-uid"});
        if owned {
            meta["ownerReferences"] = serde_json::json!([{"apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob", "name": "llama", "uid": "tj-uid", "controller": true}]);
        }
        serde_json::from_value(serde_json::json!({
            "metadata": meta,
            "status": {"replicatedJobsStatus": [{"name": "node", "active": 2}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_jobset_is_read_by_the_gate_and_by_the_planner_only_when_a_trainjob_controls_it() {
        for owned in [true, false] {
            let view = jobset(owned);
            let (record, error) = JobSetRecord::from_view(&view);
            assert_eq!(error, None);
            assert_eq!(record.gate_state(), JobSetState::from(&view));
            let facts = JobSetFacts::from_view(&view).unwrap();
            assert_eq!(record.planner_id(), facts.as_ref().map(|f| &f.id));
            match (record.planner_change(), facts) {
                (Some(Change::JobSet(id, Some(got))), Some(want)) => assert_eq!((id, got), (want.id.clone(), want)),
                (None, None) => {}
                (got, want) => panic!("{got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn a_job_the_planner_cannot_reduce_stays_for_the_gate() {
        let job: BatchJobView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "llama-node-0", "namespace": "team",
                "labels": {"jobset.sigs.k8s.io/jobset-name": "llama"},
                "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "name": "llama", "uid": "js-uid", "controller": true}]},
            "status": {"active": 1, "terminating": 0}
        }))
        .unwrap();
        let (record, error) = ChildJobRecord::from_view(&job);
        assert!(error.is_some(), "no uid: the planner cannot key it");
        assert_eq!(record.planner_change().map(|_| ()), None);
        assert_eq!(record.gate_state(), ChildJobState::from(&job));
        assert_eq!(record.name(), "llama-node-0");
    }
}
