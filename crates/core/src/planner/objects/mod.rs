//! Objects as `kubectl get -o yaml` prints them (already parsed to JSON values) → snapshot changes.
//! `trainguard plan` and the planner tests build their snapshots through here; the live watches
//! decode the same slim views and reduce them with the same `from_view` functions.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::facts::{
    BatchJobFacts, FactsError, JobFacts, JobSetFacts, NodeFacts, PodFacts, TrainJobFacts, WorkloadFacts,
};
use super::snapshot::{Change, Snapshot};
use crate::model::jobset::{BatchJobView, JOBSET_GROUP, JOBSET_KIND, JobSetView};
use crate::model::kubeflow_v1::{KUBEFLOW_GROUP, TrainingJobView, TrainingKind};
use crate::model::pod::{NodeView, PodView};
use crate::model::trainjob_state::TrainJobStateView;
use crate::model::workload::{KUEUE_GROUP, WORKLOAD_KIND, WorkloadView};
use crate::model::{TRAINJOB_GROUP, TRAINJOB_KIND};

/// An object that does not decode or lacks a required field.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("{kind} {name}: {path}{message}")]
    Decode { kind: String, name: String, path: String, message: String },
    #[error(transparent)]
    Facts(#[from] FactsError),
}

/// What kind of object a JSON value is, as far as the controller cares.
fn classify(value: &Value) -> (&str, &str) {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    (api_version.split_once('/').map_or("", |(g, _)| g), kind)
}

fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, ObjectError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let meta = value.get("metadata");
        let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("");
        let path = e.path().to_string();
        ObjectError::Decode {
            kind: value.get("kind").and_then(Value::as_str).unwrap_or("object").to_string(),
            name: format!("{}/{}", field("namespace"), field("name")),
            path: if path == "." { String::new() } else { format!("{path}: ") },
            message: e.into_inner().to_string(),
        }
    })
}

/// The change one object makes to a snapshot; `None` for kinds (or objects) that are not ours.
pub fn change_from_value(value: &Value) -> Result<Option<Change>, ObjectError> {
    let (group, kind) = classify(value);
    let change = match (group, kind) {
        (KUBEFLOW_GROUP, _) => match TrainingKind::from_kind(kind) {
            Some(k) => {
                let facts = JobFacts::from_view(k, &decode::<TrainingJobView>(value)?)?;
                Some(Change::Job(facts.key.clone(), Some(facts)))
            }
            None => None,
        },
        (TRAINJOB_GROUP, TRAINJOB_KIND) => {
            let facts = TrainJobFacts::from_view(&decode::<TrainJobStateView>(value)?)?;
            Some(Change::TrainJob(facts.id.clone(), Some(facts)))
        }
        (JOBSET_GROUP, JOBSET_KIND) => JobSetFacts::from_view(&decode::<JobSetView>(value)?)?
            .map(|facts| Change::JobSet(facts.id.clone(), Some(facts))),
        ("batch", "Job") => BatchJobFacts::from_view(&decode::<BatchJobView>(value)?)?
            .map(|facts| Change::BatchJob(facts.id.clone(), Some(facts))),
        ("", "Pod") => {
            PodFacts::from_view(&decode::<PodView>(value)?)?.map(|facts| Change::Pod(facts.id.clone(), Some(facts)))
        }
        ("", "Node") => {
            let facts = NodeFacts::from_view(&decode::<NodeView>(value)?)?;
            Some(Change::Node(facts.name.clone(), Some(facts)))
        }
        (KUEUE_GROUP, WORKLOAD_KIND) => {
            let facts = WorkloadFacts::from_view(&decode::<WorkloadView>(value)?)?;
            Some(Change::Workload(facts.id.clone(), Some(facts)))
        }
        _ => None,
    };
    Ok(change)
}

/// How many objects of a file snapshot were used.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    pub used: usize,
    pub ignored: usize,
}

/// Builds a snapshot from objects one at a time. The node list counts as complete when it has at
/// least one node: a snapshot without nodes cannot tell a deleted node from one nobody exported.
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    snapshot: Snapshot,
    loaded: Loaded,
    any_node: bool,
}

impl SnapshotBuilder {
    pub fn add(&mut self, value: &Value) -> Result<(), ObjectError> {
        match change_from_value(value)? {
            Some(change) => {
                self.any_node |= matches!(change, Change::Node(..));
                self.snapshot.insert(change);
                self.loaded.used += 1;
            }
            None => self.loaded.ignored += 1,
        }
        Ok(())
    }

    pub fn finish(mut self) -> (Snapshot, Loaded) {
        self.snapshot.set_nodes_listed(self.any_node);
        (self.snapshot, self.loaded)
    }
}

/// [`SnapshotBuilder`] over a list of objects.
pub fn snapshot_from_values<'v>(
    values: impl IntoIterator<Item = &'v Value>,
) -> Result<(Snapshot, Loaded), ObjectError> {
    let mut builder = SnapshotBuilder::default();
    for value in values {
        builder.add(value)?;
    }
    Ok(builder.finish())
}

#[cfg(test)]
mod tests;
