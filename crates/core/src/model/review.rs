//! The AdmissionReview request envelope, borrowed from the request body. Generic over how
//! `object` / `oldObject` are read: decoded as TrainJob views in the same pass (the fast path),
//! or kept raw (`&RawValue`, the default) when that pass failed and an error must be located.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::borrowed_str::option_str;
use super::object_only::object;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct ReviewEnvelope<'a, O = &'a RawValue> {
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub request: Option<RequestView<'a, O>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct RequestView<'a, O = &'a RawValue> {
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub uid: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub kind: Option<GroupVersionKindView<'a>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub operation: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "option_str")]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub(crate) user_info: Option<UserInfoView<'a>>,
    #[serde(default)]
    pub object: Option<O>,
    #[serde(default)]
    pub old_object: Option<O>,
}

/// `request.userInfo`: only the groups, kept raw. They are read only by rule O1 (a change of the
/// opt-out label), so the common request does not build a list.
#[derive(Debug, Deserialize, Default)]
pub(crate) struct UserInfoView<'a> {
    #[serde(borrow, default)]
    pub groups: Option<&'a RawValue>,
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

impl<O> RequestView<'_, O> {
    /// The sub-resource, with `""` read as none (the API server sends either).
    pub fn sub_resource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }

    /// `request.userInfo.groups`, raw (None when absent or null).
    pub fn groups(&self) -> Option<&RawValue> {
        self.user_info.as_ref().and_then(|u| u.groups).filter(|g| g.get() != "null")
    }
}
