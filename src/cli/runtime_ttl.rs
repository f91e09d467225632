//! `validate`'s one check on training runtimes: a ClusterTrainingRuntime or TrainingRuntime whose
//! JobSet template sets `ttlSecondsAfterFinished`. On Trainer up to v2.3 a *Failed* TrainJob of
//! such a runtime gets its JobSet recreated once that TTL deletes it, restart count reset, for
//! ever (kubeflow/trainer#3779). Runtimes are not judged otherwise: this is a warning, never a
//! denial.

use serde_json::Value;

use crate::manifests::Document;
use trainguard_core::model::TRAINJOB_GROUP;
use trainguard_core::trainer::{Defect, TrainerVersion};

const RUNTIME_KINDS: [&str; 2] = ["ClusterTrainingRuntime", "TrainingRuntime"];

/// The warning for a runtime document whose JobSet template sets `ttlSecondsAfterFinished`, when
/// `version` has the loop; `None` for anything else.
pub(crate) fn warning(doc: &Document, version: TrainerVersion) -> Option<String> {
    let group = doc.api_version().split_once('/').map_or("", |(g, _)| g);
    if group != TRAINJOB_GROUP || !RUNTIME_KINDS.contains(&doc.kind()) || !version.has(Defect::JobSetTtlLoop) {
        return None;
    }
    let ttl = doc.value.pointer("/spec/template/spec/ttlSecondsAfterFinished").filter(|v| !v.is_null())?;
    let name = doc.value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let last = Defect::JobSetTtlLoop.last_release().unwrap_or(version);
    Some(format!(
        "{} {name}: its JobSet template sets ttlSecondsAfterFinished={ttl}; with Trainer {} a Failed TrainJob \
         of this runtime gets its JobSet recreated each time that TTL deletes it, restart count reset, for ever \
         (kubeflow/trainer#3779): remove spec.template.spec.ttlSecondsAfterFinished, or upgrade Trainer past \
         {}",
        doc.kind(),
        version.name(),
        last.tag()
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(value: Value) -> Document {
        Document { source: "runtimes.yaml".into(), line: 1, value }
    }

    fn runtime(kind: &str, api_version: &str, template_spec: Value) -> Document {
        doc(json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": "torch-distributed"},
            "spec": {"template": {"spec": template_spec}},
        }))
    }

    #[test]
    fn warns_on_a_jobset_template_ttl_only() {
        let api = "trainer.kubeflow.org/v1alpha1";
        let ttl = json!({"ttlSecondsAfterFinished": 60, "replicatedJobs": []});
        // (document, warned)
        let cases = [
            (runtime("ClusterTrainingRuntime", api, ttl.clone()), true),
            (runtime("TrainingRuntime", api, ttl.clone()), true),
            (runtime("TrainingRuntime", api, json!({"ttlSecondsAfterFinished": 0})), true),
            (runtime("TrainingRuntime", api, json!({"replicatedJobs": []})), false),
            (runtime("TrainingRuntime", api, json!({"ttlSecondsAfterFinished": null})), false),
            (runtime("TrainingRuntime", "example.com/v1", ttl.clone()), false),
            (runtime("TrainJob", api, ttl.clone()), false),
            (runtime("JobSet", "jobset.x-k8s.io/v1alpha2", ttl.clone()), false),
        ];
        for (i, (d, warned)) in cases.iter().enumerate() {
            for version in TrainerVersion::ALL {
                assert_eq!(warning(d, version).is_some(), *warned, "case {i} at {}", version.name());
            }
        }
        let message = warning(&cases[0].0, TrainerVersion::V2_3).unwrap();
        assert!(message.starts_with("ClusterTrainingRuntime torch-distributed:"), "{message}");
        assert!(
            message.contains("ttlSecondsAfterFinished=60") && message.contains("kubeflow/trainer#3779"),
            "{message}"
        );
    }
}
