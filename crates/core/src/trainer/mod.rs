//! One typed model of TrainJob per Kubeflow Trainer release, as data ([`model`]) generated from the
//! release's own Go types ([`types`]), and the two things read from it: Trainer's own equality of
//! the overrides ([`equality`], used by the webhook's U rules) and the hints of `validate`'s schema
//! check ([`crate::schema`]); each release's CRD ([`crd`]) is the schema check itself. Adding a
//! release is adding its oracle (`e2e/oracle/<tag>`) and running `make generate`.

pub mod crd;
pub(crate) mod equality;
pub(crate) mod model;
pub(crate) mod object_meta;
pub(crate) mod quantity;
pub(crate) mod types;

use crate::model::OverridesField;
use model::{Field, Struct};

/// A Kubeflow Trainer release line whose TrainJob schema trainguard knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum TrainerVersion {
    /// v2.0.x: `spec.podSpecOverrides`.
    V2_0,
    /// v2.1.x: `spec.podTemplateOverrides`.
    V2_1,
    /// v2.2.x: `spec.runtimePatches`.
    V2_2,
    /// v2.3.x: `spec.runtimePatches`, whose pod spec has `terminationGracePeriodSeconds`.
    #[default]
    V2_3,
}

impl TrainerVersion {
    pub const ALL: [TrainerVersion; 4] =
        [TrainerVersion::V2_0, TrainerVersion::V2_1, TrainerVersion::V2_2, TrainerVersion::V2_3];

    pub fn name(self) -> &'static str {
        match self {
            TrainerVersion::V2_0 => "v2.0",
            TrainerVersion::V2_1 => "v2.1",
            TrainerVersion::V2_2 => "v2.2",
            TrainerVersion::V2_3 => "v2.3",
        }
    }

    /// The Trainer tag whose CRD and Go types stand for this line (e.g. `v2.3.0`).
    pub fn tag(self) -> &'static str {
        types::release(self).trainer
    }

    /// The k8s.io/api version that tag builds with (e.g. `v0.36.2`): its Kubernetes core types.
    pub fn kubernetes_api(self) -> &'static str {
        types::release(self).api
    }

    /// The release's `TrainJobSpec`, as its own Go types ([`types`]).
    pub(crate) fn spec(self) -> &'static Struct {
        types::release(self).spec
    }
}

/// The model of an overrides field as the webhook compares it: each name belongs to one release
/// line, and within a line the newest release's types are a superset of the older ones' (a field
/// an older release lacks never reaches the webhook: the API server prunes or rejects it).
pub(crate) fn overrides_field(field: OverridesField) -> &'static Field {
    let release = match field {
        OverridesField::PodSpecOverrides => TrainerVersion::V2_0,
        OverridesField::PodTemplateOverrides => TrainerVersion::V2_1,
        OverridesField::RuntimePatches => TrainerVersion::V2_3,
    };
    #[allow(clippy::expect_used, reason = "each release's table has its overrides field (the test below holds it)")]
    release.spec().field(field.json_name()).expect("the release's spec has its overrides field")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_overrides_field_is_in_its_release_only() {
        for field in OverridesField::ALL {
            let model = overrides_field(field);
            assert_eq!(model.json, field.json_name());
            let with_it: Vec<&str> = TrainerVersion::ALL
                .iter()
                .filter(|v| v.spec().field(field.json_name()).is_some())
                .map(|v| v.name())
                .collect();
            let expected: &[&str] = match field {
                OverridesField::PodSpecOverrides => &["v2.0"],
                OverridesField::PodTemplateOverrides => &["v2.1"],
                OverridesField::RuntimePatches => &["v2.2", "v2.3"],
            };
            assert_eq!(with_it, expected, "{field:?}");
        }
    }
}
