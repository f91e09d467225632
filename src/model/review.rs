//! The AdmissionReview request envelope, borrowed from the request body. `object` and
//! `oldObject` stay raw until a rule needs them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::object_only::object;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewEnvelope<'a> {
    #[serde(borrow, default)]
    pub api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub request: Option<RequestView<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestView<'a> {
    #[serde(borrow, default)]
    pub uid: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub kind: Option<GroupVersionKindView<'a>>,
    #[serde(borrow, default)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub operation: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(borrow, default)]
    pub object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub old_object: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize, Default)]
pub struct GroupVersionKindView<'a> {
    #[serde(borrow, default)]
    pub group: Cow<'a, str>,
    #[serde(borrow, default)]
    pub version: Cow<'a, str>,
    #[serde(borrow, default)]
    pub kind: Cow<'a, str>,
}

impl RequestView<'_> {
    /// The sub-resource, with `""` read as none (the API server sends either).
    pub fn sub_resource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }
}
