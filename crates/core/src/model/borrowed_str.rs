//! Strings borrowed from the request body. serde borrows a `Cow<'a, str>` field marked
//! `#[serde(borrow)]`, but not one inside an `Option`: that one is always copied into a new
//! `String`. These helpers borrow whenever the JSON string has no escapes.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Visitor};

/// A string, borrowed when it can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BorrowedStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedStr<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = BorrowedStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// `deserialize_with` for `Option<Cow<'a, str>>` fields: null reads as `None`.
pub(crate) fn option_str<'de: 'a, 'a, D: de::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(Option::<BorrowedStr<'a>>::deserialize(deserializer)?.map(|s| s.0))
}
