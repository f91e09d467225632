//! The parts of a Kubeflow `TrainJob` (`trainer.kubeflow.org/v1alpha1`) that the admission rules
//! read. Everything else (trainer, initializer, env lists, managedFields, …) is skipped by serde
//! without being built. The overrides stay raw JSON: most updates leave them byte-identical, and
//! only a real difference pays for a semantic comparison.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::borrowed_str::{BorrowedStr, option_str};
use super::object_only::{object, objects};
use super::{KUEUE_QUEUE_LABEL, OPT_OUT_LABEL};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobView<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    pub metadata: Option<MetadataView<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub spec: Option<SpecView<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub(crate) status: Option<StatusView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataView<'a> {
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub generate_name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) labels: Option<LabelsView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    #[serde(default)]
    pub suspend: Option<bool>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub managed_by: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub runtime_ref: Option<RuntimeRefView<'a>>,
    #[serde(borrow, default)]
    pub(crate) pod_spec_overrides: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) pod_template_overrides: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) runtime_patches: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeRefView<'a> {
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub api_group: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub kind: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusView<'a> {
    #[serde(borrow, default, deserialize_with = "objects")]
    pub(crate) jobs_status: Option<Vec<JobStatusView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobStatusView<'a> {
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub active: Option<i32>,
}

/// `metadata.labels`, of which only Kueue's queue-name label and trainguard's opt-out label are
/// kept. Values must still be strings, as in the full type.
#[derive(Debug, Default)]
pub struct LabelsView<'a> {
    pub(crate) queue: Option<Cow<'a, str>>,
    pub(crate) opt_out: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for LabelsView<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = LabelsView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of string labels")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut labels = LabelsView::default();
                while let Some(BorrowedStr(key)) = map.next_key()? {
                    let BorrowedStr(value) = map.next_value()?;
                    if key == KUEUE_QUEUE_LABEL {
                        labels.queue = Some(value);
                    } else if key == OPT_OUT_LABEL {
                        labels.opt_out = Some(value);
                    }
                }
                Ok(labels)
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

/// The three names the pod-level overrides field has had across Trainer releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverridesField {
    /// Trainer v2.0.x: atomic list, order matters.
    PodSpecOverrides,
    /// Trainer v2.1.x: atomic list, order matters.
    PodTemplateOverrides,
    /// Trainer v2.2+: list-map keyed by `manager`; order and `time` do not matter.
    RuntimePatches,
}

impl OverridesField {
    pub const ALL: [OverridesField; 3] =
        [OverridesField::PodSpecOverrides, OverridesField::PodTemplateOverrides, OverridesField::RuntimePatches];

    pub fn path(self) -> &'static str {
        match self {
            OverridesField::PodSpecOverrides => "spec.podSpecOverrides",
            OverridesField::PodTemplateOverrides => "spec.podTemplateOverrides",
            OverridesField::RuntimePatches => "spec.runtimePatches",
        }
    }

    pub fn json_name(self) -> &'static str {
        match self {
            OverridesField::PodSpecOverrides => "podSpecOverrides",
            OverridesField::PodTemplateOverrides => "podTemplateOverrides",
            OverridesField::RuntimePatches => "runtimePatches",
        }
    }
}

impl<'a> TrainJobView<'a> {
    pub fn spec(&self) -> Option<&SpecView<'a>> {
        self.spec.as_ref()
    }

    /// `S(x)`: `spec.suspend == true`; absent or null reads as false.
    pub fn suspended(&self) -> bool {
        self.spec().and_then(|s| s.suspend).unwrap_or(false)
    }

    /// `spec.managedBy` exactly as sent (None when absent or null).
    pub fn managed_by_raw(&self) -> Option<&str> {
        self.spec().and_then(|s| s.managed_by.as_deref())
    }

    /// `M(x)`: `spec.managedBy`, absent read as Trainer's own controller.
    pub fn managed_by(&self) -> &str {
        self.managed_by_raw().unwrap_or(super::DEFAULT_MANAGED_BY)
    }

    pub fn overrides(&self, field: OverridesField) -> Option<&'a RawValue> {
        let spec = self.spec()?;
        match field {
            OverridesField::PodSpecOverrides => spec.pod_spec_overrides,
            OverridesField::PodTemplateOverrides => spec.pod_template_overrides,
            OverridesField::RuntimePatches => spec.runtime_patches,
        }
    }

    pub fn name(&self) -> &str {
        self.metadata.as_ref().and_then(|m| m.name.as_deref()).unwrap_or("")
    }

    pub fn generate_name(&self) -> &str {
        self.metadata.as_ref().and_then(|m| m.generate_name.as_deref()).unwrap_or("")
    }

    pub fn namespace(&self) -> Option<&str> {
        self.metadata.as_ref().and_then(|m| m.namespace.as_deref())
    }

    pub fn kueue_queue(&self) -> Option<&str> {
        self.metadata.as_ref().and_then(|m| m.labels.as_ref()).and_then(|l| l.queue.as_deref())
    }

    /// The value of the opt-out label `trainguard.io/webhook`, if set.
    pub fn opt_out_label(&self) -> Option<&str> {
        self.metadata.as_ref().and_then(|m| m.labels.as_ref()).and_then(|l| l.opt_out.as_deref())
    }

    /// `status.jobsStatus[i]` entries with `active > 0`, in status order (rule G4).
    pub fn active_jobs(&self) -> impl Iterator<Item = (&str, i32)> {
        self.status.iter().flat_map(|s| s.jobs_status.iter().flatten()).filter_map(|j| match j.active {
            Some(n) if n > 0 => Some((j.name.as_deref().unwrap_or(""), n)),
            _ => None,
        })
    }

    /// Decodes a TrainJob, reporting the JSON path of the first problem when it does not.
    pub fn decode(raw: &'a RawValue) -> Result<Self, DecodeError> {
        let text = raw.get();
        if !text.starts_with('{') {
            return Err(DecodeError { path: String::new(), message: "expected a JSON object".to_string() });
        }
        serde_json::from_str(text).map_err(|_| DecodeError::locate::<TrainJobView<'_>>(text))
    }
}

/// An object that does not decode: the JSON path (`spec.suspend`) and serde's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct DecodeError {
    pub path: String,
    pub message: String,
}

impl DecodeError {
    /// Decodes again, slowly, to learn where the fast decode failed. Only paid on failure.
    pub(crate) fn locate<'de, T: Deserialize<'de>>(text: &'de str) -> DecodeError {
        let mut de = serde_json::Deserializer::from_str(text);
        match serde_path_to_error::deserialize::<_, T>(&mut de) {
            Ok(_) => DecodeError { path: String::new(), message: "does not decode".to_string() },
            Err(e) => {
                let path = e.path().to_string();
                let inner = e.into_inner();
                DecodeError {
                    path: if path == "." { String::new() } else { path },
                    message: strip_position(&inner.to_string()),
                }
            }
        }
    }
}

/// serde_json appends " at line L column C"; inside an AdmissionReview that points into a
/// re-serialised object nobody sees, so the JSON path is what the message keeps.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
