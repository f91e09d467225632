//! One typed model of TrainJob per Kubeflow Trainer release, as data ([`model`]) generated from the
//! release's own Go types ([`types`]), and the two things read from it: Trainer's own equality of
//! the overrides ([`equality`], used by the webhook's U rules) and the hints of `validate`'s schema
//! check ([`crate::schema`]); each release's CRD ([`crd`]) is the schema check itself. Adding a
//! release is adding its oracle (`e2e/oracle/<tag>`), running `make generate` and adding its row
//! to the table of releases (`releases.rs`).

pub(crate) mod api_cause;
pub mod crd;
pub(crate) mod equality;
pub(crate) mod model;
pub(crate) mod object_meta;
pub(crate) mod quantity;
mod releases;
pub(crate) mod types;

pub use releases::{Defect, TrainerVersion};

use crate::model::OverridesField;
use model::{Field, Struct};

impl TrainerVersion {
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
    #[allow(clippy::expect_used, reason = "each overrides field has a release, which has it (the tests below hold it)")]
    let release = TrainerVersion::ALL
        .into_iter()
        .rev()
        .find(|v| v.overrides() == field)
        .expect("a release uses each overrides field");
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
            let expected: Vec<&str> =
                TrainerVersion::ALL.iter().filter(|v| v.overrides() == field).map(|v| v.name()).collect();
            assert_eq!(with_it, expected, "{field:?}");
        }
    }
}
