//! Minimal serde views of the objects trainguard reads. Each view names only the fields a rule
//! reads and skips the rest without building it; unknown fields are always tolerated.
//! `tests/differential.rs` pins these views to the full `kube` / `k8s-openapi` types.

pub mod jobset;
pub mod kubeflow_v1;
pub mod object_only;
pub mod pod;
pub mod review;
pub mod trainjob;
pub mod trainjob_state;
pub mod workload;

pub use review::{GroupVersionKindView, RequestView, ReviewEnvelope};
pub use trainjob::{OverridesField, TrainJobView};

/// API group, version and kind of the one object trainguard admits.
pub const TRAINJOB_GROUP: &str = "trainer.kubeflow.org";
pub const TRAINJOB_VERSION: &str = "v1alpha1";
pub const TRAINJOB_KIND: &str = "TrainJob";
pub const TRAINJOB_RESOURCE: &str = "trainjobs";

/// Label Kueue puts on every job it queues.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// `spec.managedBy` read when the field is absent.
pub const DEFAULT_MANAGED_BY: &str = "trainer.kubeflow.org/trainjob-controller";
pub const MULTIKUEUE_MANAGED_BY: &str = "kueue.x-k8s.io/multikueue";
