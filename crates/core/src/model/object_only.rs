//! serde's derived structs accept a JSON array as well as an object, filling the fields by
//! position (`"spec": [true]` would read as suspended). No Kubernetes decoder does that; these
//! `deserialize_with` helpers read a struct from a JSON object (or null) only.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};

/// A struct read from a JSON object, or `None` from null.
pub fn object<'de, D: de::Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    deserializer.deserialize_any(ObjectVisitor(PhantomData))
}

/// A list of structs, each read from a JSON object only (see [`object`]).
pub(crate) fn objects<'de, D: de::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    struct ListVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
        type Value = Option<Vec<T>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of JSON objects")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
            while let Some(item) = seq.next_element_seed(ObjectSeed(PhantomData))? {
                items.push(item);
            }
            Ok(Some(items))
        }
    }
    deserializer.deserialize_any(ListVisitor(PhantomData))
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
    }
}

/// A list item: an object (null is not a struct either).
struct ObjectSeed<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> de::DeserializeSeed<'de> for ObjectSeed<T> {
    type Value = T;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        struct ItemVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ItemVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_any(ItemVisitor(PhantomData))
    }
}

/// A struct that deserialises from a JSON object only (null is handled by the `Option` around
/// it), for places where `deserialize_with` cannot go, such as a generic field.
#[derive(Debug)]
pub struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(ObjectVisitor(PhantomData))? {
            Some(value) => Ok(ObjectOnly(value)),
            None => Err(de::Error::invalid_type(de::Unexpected::Unit, &"a JSON object")),
        }
    }
}
