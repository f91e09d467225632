//! The shape check (docs/webhook.md, "CREATE"), read straight from the request's JSON: list items
//! are counted and checked as they are decoded, never built as a `serde_json::Value`, and at most
//! [`MAX_FIELD_ERRORS`](crate::admission::errors::MAX_FIELD_ERRORS) errors are kept. A 7 MiB list
//! of a million bad items costs one pass over its bytes and a few kilobytes of answer.
//!
//! The same pass counts the JSON values in the field: a field holding more than [`MAX_VALUES`]
//! is refused as too big to check, so the comparison of old and new (which reads both as
//! `Value`s) never builds one from a hostile list.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::admission::Rule;
use crate::admission::errors::{ErrorList, ErrorType, FieldError};
use crate::model::OverridesField;

/// JSON values (every scalar, list and object, nested ones included) one overrides field may hold.
/// A real override (a few containers' env, volumes, tolerations, Kueue's pod-set updates) holds
/// hundreds to a few thousand; as `Value`s this many cost a few MiB.
pub(crate) const MAX_VALUES: usize = 100_000;

pub(crate) const MANAGER_REQUIRED: &str = "name the controller that owns this patch, e.g. \"kueue.x-k8s.io/manager\"";
pub(crate) const TARGET_JOBS_REQUIRED: &str = "list at least one replicated job to override, e.g. [{name: node}]";
pub(crate) const NAME_REQUIRED: &str = "name a replicated job of the runtime, e.g. \"node\"";

/// What the pass found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) errors: ErrorList,
    /// More than [`MAX_VALUES`] values: the field is not compared, and an error says why.
    pub(crate) oversized: bool,
}

/// The shape errors of a raw field (absent: none), in one pass over its bytes.
pub(crate) fn scan(field: OverridesField, raw: Option<&RawValue>) -> Shape {
    let Some(raw) = raw else { return Shape::default() };
    let mut state = State { field, errors: ErrorList::default(), values: 0 };
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match Walk(FieldSeed(&mut state)).deserialize(&mut de) {
        Ok(()) => {}
        Err(e) => {
            // RawValue holds valid JSON; what fails is nesting past serde_json's 128 levels.
            return Shape { errors: ErrorList::from(vec![unreadable(field, raw, &e)]), oversized: true };
        }
    }
    let oversized = state.values > MAX_VALUES;
    let mut errors = state.errors;
    if oversized {
        let mut first = ErrorList::from(vec![FieldError::invalid(
            Rule::Shape,
            field.path(),
            format!("\"{}\"", if raw.get().starts_with('[') { "list" } else { "object" }),
            format!("holds more than {MAX_VALUES} JSON values, too many to check"),
        )]);
        first.append(errors);
        errors = first;
    }
    Shape { errors, oversized }
}

/// Whether a raw field holds more than [`MAX_VALUES`] values (or nests too deep to read).
pub(crate) fn oversized(raw: Option<&RawValue>) -> bool {
    let Some(raw) = raw else { return false };
    let mut values = 0;
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match (Count(&mut values)).deserialize(&mut de) {
        Ok(()) => values > MAX_VALUES,
        Err(_) => true,
    }
}

pub(crate) fn unreadable(field: OverridesField, raw: &RawValue, e: &serde_json::Error) -> FieldError {
    let kind = if raw.get().starts_with('[') { "list" } else { "object" };
    let detail = if e.to_string().starts_with("recursion limit exceeded") {
        "is nested more than 128 levels deep, too deep to check".to_string()
    } else {
        format!("is not valid JSON: {e}")
    };
    FieldError::invalid(Rule::Shape, field.path(), format!("\"{kind}\""), detail)
}

struct State {
    field: OverridesField,
    errors: ErrorList,
    values: usize,
}

/// Kubernetes' schema errors quote the JSON type as the value (`Invalid value: "string"`).
fn quoted(type_name: &str) -> String {
    format!("\"{type_name}\"")
}

/// A JSON value seen only for its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    /// A string, and whether it is empty.
    Str(bool),
    List,
    Object,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "boolean",
            Kind::Number => "number",
            Kind::Str(_) => "string",
            Kind::List => "list",
            Kind::Object => "object",
        }
    }
}

/// A seed that reads one JSON value by its kind. [`Walk`], the one visitor for all of them, counts
/// every value it is shown and hands it on by kind: a scalar (null included) is known by its kind
/// alone; lists and objects are walked by the seed.
trait ByKind<'de>: Sized {
    type Out;
    /// What the seed expects, for serde's error message.
    fn expecting(&self) -> &'static str;
    /// The count of values this pass has seen.
    fn values(&mut self) -> &mut usize;
    /// A value that is neither a list nor an object.
    fn scalar(self, kind: Kind) -> Self::Out;
    fn list<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error>;
    fn object<A: MapAccess<'de>>(self, map: A) -> Result<Self::Out, A::Error>;

    fn counted(mut self) -> Self {
        *self.values() += 1;
        self
    }
}

/// Reads a value with a [`ByKind`] seed.
struct Walk<S>(S);

impl<'de, S: ByKind<'de>> DeserializeSeed<'de> for Walk<S> {
    type Value = S::Out;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Out, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: ByKind<'de>> Visitor<'de> for Walk<S> {
    type Value = S::Out;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0.expecting())
    }
    fn visit_unit<E: de::Error>(self) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<S::Out, E> {
        self.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Bool))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Number))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Number))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<S::Out, E> {
        Ok(self.0.counted().scalar(Kind::Str(s.is_empty())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<S::Out, A::Error> {
        self.0.counted().list(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<S::Out, A::Error> {
        self.0.counted().object(map)
    }
}

/// Visits any value, counting every value inside it; lists and objects are walked, not kept.
struct Count<'s>(&'s mut usize);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        KindOf::value(self.0).deserialize(d).map(|_| ())
    }
}

/// Like [`Count`], and says what kind of value it was: its own kind, or, for a target's name, the
/// kind of an object's `name` member (null when absent, or when the value is not an object: it has
/// no name).
struct KindOf<'s> {
    values: &'s mut usize,
    name_member: bool,
}

impl<'s> KindOf<'s> {
    fn value(values: &'s mut usize) -> Walk<Self> {
        Walk(KindOf { values, name_member: false })
    }

    fn target_name(values: &'s mut usize) -> Walk<Self> {
        Walk(KindOf { values, name_member: true })
    }
}

impl<'de> ByKind<'de> for KindOf<'_> {
    type Out = Kind;
    fn expecting(&self) -> &'static str {
        if self.name_member { "an object" } else { "any JSON value" }
    }
    fn values(&mut self) -> &mut usize {
        &mut *self.values
    }
    fn scalar(self, kind: Kind) -> Kind {
        if self.name_member { Kind::Null } else { kind }
    }
    fn list<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        while seq.next_element_seed(Count(&mut *self.values))?.is_some() {}
        Ok(self.scalar(Kind::List))
    }
    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        if !self.name_member {
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(Count(&mut *self.values))?;
            }
            return Ok(Kind::Object);
        }
        let mut name = Kind::Null;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "name" {
                name = map.next_value_seed(KindOf::value(&mut *self.values))?;
            } else {
                map.next_value_seed(Count(&mut *self.values))?;
            }
        }
        Ok(name)
    }
}

/// The field itself: null, or a list of items.
struct FieldSeed<'s>(&'s mut State);

impl<'de> ByKind<'de> for FieldSeed<'_> {
    type Out = ();
    fn expecting(&self) -> &'static str {
        "a list"
    }
    fn values(&mut self) -> &mut usize {
        &mut self.0.values
    }
    fn scalar(self, kind: Kind) {
        if kind != Kind::Null {
            let path = self.0.field.path();
            self.0.errors.push(FieldError::invalid(Rule::Shape, path, quoted(kind.name()), "must be a list"));
        }
    }
    fn list<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let state = self.0;
        let mut i = 0usize;
        while seq.next_element_seed(Walk(ItemSeed { state: &mut *state, index: i }))?.is_some() {
            i += 1;
        }
        Ok(())
    }
    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Count(&mut self.0.values))?;
        }
        self.scalar(Kind::Object);
        Ok(())
    }
}

/// One item of the list: an object with `manager` (runtime patches) or `targetJobs`.
struct ItemSeed<'s> {
    state: &'s mut State,
    index: usize,
}

impl ItemSeed<'_> {
    fn path(&self) -> String {
        format!("{}[{}]", self.state.field.path(), self.index)
    }
}

/// What an item's checked member held: the member may appear twice, and the last one counts
/// (as in a decoded object).
enum Member {
    Absent,
    Manager(Kind),
    Targets(ErrorList),
}

impl<'de> ByKind<'de> for ItemSeed<'_> {
    type Out = ();
    fn expecting(&self) -> &'static str {
        "an object"
    }
    fn values(&mut self) -> &mut usize {
        &mut self.state.values
    }
    /// Not an object.
    fn scalar(self, kind: Kind) {
        if self.state.errors.is_full() {
            self.state.errors.count();
            return;
        }
        let path = self.path();
        self.state.errors.push(FieldError::invalid(Rule::Shape, path, quoted(kind.name()), "must be an object"));
    }
    fn list<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Count(&mut self.state.values))?.is_some() {}
        self.scalar(Kind::List);
        Ok(())
    }
    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let item_path = self.path();
        let patches = self.state.field == OverridesField::RuntimePatches;
        let mut member = Member::Absent;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match (patches, key.as_ref()) {
                (true, "manager") => {
                    member = Member::Manager(map.next_value_seed(KindOf::value(&mut self.state.values))?)
                }
                (false, "targetJobs") => {
                    let seed = TargetsSeed { values: &mut self.state.values, path: &item_path };
                    member = Member::Targets(map.next_value_seed(Walk(seed))?);
                }
                _ => map.next_value_seed(Count(&mut self.state.values))?,
            }
        }
        let errors = &mut self.state.errors;
        match member {
            Member::Targets(found) => errors.append(found),
            Member::Absent if !patches => errors.push(FieldError::new(
                Rule::Shape,
                ErrorType::Required,
                format!("{item_path}.targetJobs"),
                TARGET_JOBS_REQUIRED,
            )),
            Member::Absent | Member::Manager(Kind::Null | Kind::Str(true)) => errors.push(FieldError::new(
                Rule::Shape,
                ErrorType::Required,
                format!("{item_path}.manager"),
                MANAGER_REQUIRED,
            )),
            Member::Manager(Kind::Str(false)) => {}
            Member::Manager(other) => errors.push(FieldError::invalid(
                Rule::Shape,
                format!("{item_path}.manager"),
                quoted(other.name()),
                "must be a string",
            )),
        }
        Ok(())
    }
}

/// An item's `targetJobs`: a non-empty list of objects with a non-empty `name`.
struct TargetsSeed<'s> {
    values: &'s mut usize,
    path: &'s str,
}

impl TargetsSeed<'_> {
    fn path(&self) -> String {
        format!("{}.targetJobs", self.path)
    }

    fn required(self) -> ErrorList {
        ErrorList::from(vec![FieldError::new(Rule::Shape, ErrorType::Required, self.path(), TARGET_JOBS_REQUIRED)])
    }
}

impl<'de> ByKind<'de> for TargetsSeed<'_> {
    type Out = ErrorList;
    fn expecting(&self) -> &'static str {
        "a list"
    }
    fn values(&mut self) -> &mut usize {
        &mut *self.values
    }
    /// Null is no list; anything else is not a list.
    fn scalar(self, kind: Kind) -> ErrorList {
        if kind == Kind::Null {
            return self.required();
        }
        ErrorList::from(vec![FieldError::invalid(Rule::Shape, self.path(), quoted(kind.name()), "must be a list")])
    }
    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<ErrorList, A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Count(&mut *self.values))?;
        }
        Ok(self.scalar(Kind::Object))
    }
    fn list<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ErrorList, A::Error> {
        let path = self.path();
        let mut errors = ErrorList::default();
        let mut j = 0usize;
        while let Some(name) = seq.next_element_seed(KindOf::target_name(&mut *self.values))? {
            let problem = match name {
                Kind::Str(false) => None,
                Kind::Null | Kind::Str(true) => Some(None),
                other => Some(Some(other)),
            };
            if let Some(problem) = problem {
                if errors.is_full() {
                    errors.count();
                } else {
                    let name_path = format!("{path}[{j}].name");
                    errors.push(match problem {
                        None => FieldError::new(Rule::Shape, ErrorType::Required, name_path, NAME_REQUIRED),
                        Some(kind) => {
                            FieldError::invalid(Rule::Shape, name_path, quoted(kind.name()), "must be a string")
                        }
                    });
                }
            }
            j += 1;
        }
        if j == 0 {
            return Ok(self.required());
        }
        Ok(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::errors::MAX_FIELD_ERRORS;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn a_huge_list_keeps_a_few_errors_and_counts_the_rest() {
        let items = 200_000;
        let text = format!("[{}1]", "1,".repeat(items - 1));
        let shape = scan(OverridesField::PodSpecOverrides, Some(&raw(&text)));
        assert!(shape.oversized, "200,001 values");
        assert_eq!(shape.errors.errors.len(), MAX_FIELD_ERRORS);
        assert_eq!(shape.errors.len(), items + 1, "one per item, and one for the size");
        assert!(shape.errors.errors[0].detail.contains("too many to check"), "{:?}", shape.errors.errors[0]);
    }

    #[test]
    fn counts_values_at_any_depth() {
        let cases = [
            ("null", 1, false),
            ("[]", 1, false),
            (r#"[{"targetJobs":[{"name":"a"}]}]"#, 5, false),
            (r#"{"a":[1,2,{"b":null}]}"#, 6, false),
        ];
        for (text, values, oversized_) in cases {
            let mut n = 0;
            let mut de = serde_json::Deserializer::from_str(text);
            Count(&mut n).deserialize(&mut de).unwrap();
            assert_eq!(n, values, "{text}");
            assert_eq!(oversized(Some(&raw(text))), oversized_, "{text}");
        }
        let nested = format!("[{{\"x\":[{}0]}}]", "0,".repeat(MAX_VALUES));
        assert!(oversized(Some(&raw(&nested))), "a big list inside an item counts");
        assert!(scan(OverridesField::RuntimePatches, Some(&raw(&nested))).oversized);
    }
}
