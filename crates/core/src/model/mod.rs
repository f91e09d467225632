//! Minimal serde views of the objects trainguard reads. Each view names only the fields a rule
//! reads and skips the rest without building it; unknown fields are always tolerated. Views are
//! only read, never written: `Deserialize` alone, and the watched objects' views are
//! `#[serde(default)]` as a whole, since any of their fields may be absent.
//! `tests/admission/differential.rs` pins these views to the full `kube` / `k8s-openapi` types.

/// `kube::Resource` for a slim view of a kind known at compile time.
macro_rules! static_resource {
    ($view:ty, $scope:ty, group = $group:expr, version = $version:expr, kind = $kind:expr, plural = $plural:expr) => {
        impl kube_core::Resource for $view {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// `kube::Resource` for a slim view shared by several kinds (or versions), chosen at run time
/// through an `ApiResource`.
macro_rules! dynamic_resource {
    ($view:ty) => {
        impl kube_core::Resource for $view {
            type DynamicType = kube_core::ApiResource;
            type Scope = kube_core::DynamicResourceScope;

            fn kind(dt: &kube_core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.kind.as_str().into()
            }
            fn group(dt: &kube_core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.group.as_str().into()
            }
            fn version(dt: &kube_core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.version.as_str().into()
            }
            fn api_version(dt: &kube_core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.api_version.as_str().into()
            }
            fn plural(dt: &kube_core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.plural.as_str().into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) mod borrowed_str;
pub(crate) mod condition;
pub mod jobset;
pub mod kubeflow_v1;
pub mod object_only;
pub mod pod;
pub mod review;
pub mod trainjob;
pub mod trainjob_state;
pub(crate) mod watched_meta;
pub mod workload;

pub use review::RequestView;
pub use review::ReviewEnvelope;
pub use trainjob::LabelsView;
pub use trainjob::{OverridesField, TrainJobView};

/// API group, version and kind of the one object trainguard admits.
pub const TRAINJOB_GROUP: &str = "trainer.kubeflow.org";
pub const TRAINJOB_VERSION: &str = "v1alpha1";
pub const TRAINJOB_KIND: &str = "TrainJob";
pub(crate) const TRAINJOB_RESOURCE: &str = "trainjobs";

/// Label Kueue puts on every job it queues.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// The per-object opt-out label: `disabled` keeps a TrainJob away from both webhooks.
pub const OPT_OUT_LABEL: &str = "trainguard.io/webhook";

/// Groups whose members may set or change the opt-out label by default.
pub const DEFAULT_OPT_OUT_GROUPS: &[&str] = &["system:masters"];

/// `spec.managedBy` read when the field is absent.
pub const DEFAULT_MANAGED_BY: &str = "trainer.kubeflow.org/trainjob-controller";
pub const MULTIKUEUE_MANAGED_BY: &str = "kueue.x-k8s.io/multikueue";
