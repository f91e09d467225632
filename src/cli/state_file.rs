//! `--state PATH`: cluster objects as `kubectl get -o yaml` prints them, for the JobSet gate.
//! JobSets and child Jobs feed a [`StaticView`]; live TrainJobs are kept by namespace/name so
//! `validate` can take their running state (see `docs/ci.md`).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::cluster::StaticView;
use crate::manifests::{self, Document, Limits};
use anyhow::Context as _;
use trainguard_core::model::{TRAINJOB_GROUP, TRAINJOB_KIND, TRAINJOB_VERSION};

/// What `--state` files say about the cluster.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) view: StaticView,
    /// Live TrainJobs by (namespace, name).
    pub(crate) live_trainjobs: HashMap<(String, String), Document>,
}

/// Reads every `--state` file; any file that cannot be read or object that does not decode is
/// an error (exit 2), since a verdict resting on half-read state would mislead.
pub(crate) fn load(paths: &[PathBuf], limits: &Limits, default_namespace: &str) -> anyhow::Result<State> {
    let documents = manifests::read_documents(paths, limits).context("reading --state")?;
    let mut state = State::default();
    state.view.add_objects(documents.iter().map(|d| &d.value)).context("reading --state")?;
    for doc in documents {
        if is_trainjob(&doc)
            && let Some(name) = doc.name()
        {
            let namespace = doc.namespace().unwrap_or(default_namespace).to_string();
            let key = (namespace, name.to_string());
            state.live_trainjobs.insert(key, doc);
        }
    }
    Ok(state)
}

/// `trainer.kubeflow.org/v1alpha1` `TrainJob`, the one kind the webhook admits.
pub(crate) fn is_trainjob(doc: &Document) -> bool {
    doc.kind() == TRAINJOB_KIND
        && doc.api_version().strip_prefix(TRAINJOB_GROUP).and_then(|v| v.strip_prefix('/')) == Some(TRAINJOB_VERSION)
}
