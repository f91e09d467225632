//! Edge values for every field of each release's TrainJob types: the generated
//! `crates/core/src/trainer/types/<tag>.json` (what `types.rs` loads) is walked from `TrainJobSpec`
//! to list every field path — every struct member reached through lists and maps — and each
//! path gets, in turn, each value at the edge of its type: an int32's and an int64's limits and
//! one past them (JSON numbers that still parse: a literal past int64 decodes as a float64),
//! empty strings, empty lists and maps, `null` as a list item and as a map value, and `null`
//! itself.
//!
//! The generator sets them on its objects ([`Edges::vary`]) and the run checks, on the cases as
//! they are sent, that every path of the release was varied at least once ([`Coverage`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use trainguard_core::trainer::TrainerVersion;

/// One step from a struct to a value: a member, a list's item, a map's value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Member(String),
    Item,
    Entry,
}

/// A field of the types, from `spec`.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    steps: Vec<Step>,
    /// The Go type as the types file names it (`[]core/v1.Toleration`, `map[string]string`, `int32`).
    ty: String,
}

impl Field {
    /// `spec.podSpecOverrides[].nodeSelector{}`-style name: `[]` for an item, `{}` for a map value.
    pub(crate) fn name(&self) -> String {
        let mut out = "spec".to_string();
        for step in &self.steps {
            match step {
                Step::Member(m) => {
                    out.push('.');
                    out.push_str(m);
                }
                Step::Item => out.push_str("[]"),
                Step::Entry => out.push_str("{}"),
            }
        }
        out
    }
}

#[derive(serde::Deserialize)]
struct TypesFile {
    root: String,
    types: BTreeMap<String, Vec<FieldFile>>,
}

#[derive(serde::Deserialize)]
struct FieldFile {
    json: String,
    #[serde(rename = "type")]
    ty: String,
}

/// Every field path of `version`'s generated types, depth first in declaration order.
pub(crate) fn fields(version: TrainerVersion) -> Vec<Field> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("crates/core/src/trainer/types/{}.json", version.tag()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: TypesFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    walk(&file, &file.root, &mut Vec::new(), &mut out);
    assert!(!out.is_empty(), "{}: no field", path.display());
    out
}

fn walk(file: &TypesFile, name: &str, prefix: &mut Vec<Step>, out: &mut Vec<Field>) {
    let members = file.types.get(name).unwrap_or_else(|| panic!("{name} is named but not described"));
    for member in members {
        prefix.push(Step::Member(member.json.clone()));
        out.push(Field { steps: prefix.clone(), ty: member.ty.clone() });
        let depth = prefix.len();
        let mut ty = member.ty.as_str();
        loop {
            if let Some(item) = ty.strip_prefix("[]") {
                prefix.push(Step::Item);
                ty = item;
            } else if let Some(value) = ty.strip_prefix("map[string]") {
                prefix.push(Step::Entry);
                ty = value;
            } else {
                break;
            }
        }
        if file.types.contains_key(ty) {
            walk(file, ty, prefix, out);
        }
        prefix.truncate(depth - 1);
    }
}

/// A scalar's edge values, `null` last.
fn scalar_edges(ty: &str) -> Vec<Value> {
    // Literals past int64 parse as float64 on both sides (serde_json, Go's utiljson).
    let past_i64_min: Value = serde_json::from_str("-9223372036854775809").expect("a JSON number");
    match ty {
        "int32" => {
            vec![json!(2_147_483_647), json!(2_147_483_648_i64), json!(-2_147_483_648), json!(-2_147_483_649_i64)]
        }
        "int64" => vec![json!(i64::MAX), json!(9_223_372_036_854_775_808_u64), json!(i64::MIN), past_i64_min],
        "float64" => vec![json!(0.0), json!(f64::MAX)],
        "bool" => vec![json!(false), json!(true)],
        "intorstring" => vec![json!(2_147_483_648_i64), json!(""), json!(-2_147_483_649_i64), json!(0)],
        "quantity" => vec![json!(""), json!(i64::MAX), json!(9_223_372_036_854_775_808_u64), json!(0)],
        // string, bytes, time
        _ => vec![json!("")],
    }
}

/// The edge values of a field of type `ty`.
fn edges(ty: &str) -> Vec<Value> {
    let scalar = |t: &str| !t.starts_with("[]") && !t.starts_with("map[string]") && !t.contains('/');
    let mut out = if let Some(item) = ty.strip_prefix("[]") {
        let mut v = vec![json!([]), json!([null])];
        if scalar(item) {
            v.extend(scalar_edges(item).into_iter().take(2).map(|e| json!([e])));
        }
        v
    } else if let Some(value) = ty.strip_prefix("map[string]") {
        let mut v = vec![json!({}), json!({"a": null})];
        if scalar(value) {
            v.extend(scalar_edges(value).into_iter().take(2).map(|e| json!({ "a": e })));
        }
        v
    } else if scalar(ty) {
        scalar_edges(ty)
    } else {
        // A struct.
        vec![json!({})]
    };
    out.push(Value::Null);
    out
}

/// One field set to one edge value on one case: where, to check that it is still there when the
/// case is sent.
#[derive(Debug)]
pub(crate) struct Variation {
    pub(crate) field: usize,
    pub(crate) pointer: String,
    pub(crate) value: Value,
}

/// Each field of a release in turn, each time with its next edge value.
pub(crate) struct Edges {
    pub(crate) fields: Vec<Field>,
    /// (field, edge value), round by round: every field once per round, so the first
    /// `fields.len()` variations cover every field.
    plan: Vec<(usize, Value)>,
    next: usize,
}

impl Edges {
    pub(crate) fn new(version: TrainerVersion) -> Edges {
        let fields = fields(version);
        let values: Vec<Vec<Value>> = fields.iter().map(|f| edges(&f.ty)).collect();
        let rounds = values.iter().map(Vec::len).max().unwrap_or(0);
        let mut plan = Vec::new();
        for round in 0..rounds {
            for (i, v) in values.iter().enumerate() {
                plan.push((i, v[round % v.len()].clone()));
            }
        }
        Edges { fields, plan, next: 0 }
    }

    /// Sets the next field of the plan on `spec` to its edge value, and says where. `taken` are
    /// the fields already set on this case: a field inside or around one of them would overwrite
    /// it or be overwritten, so the next unrelated one goes first and it waits its turn.
    pub(crate) fn vary(&mut self, spec: &mut Value, taken: &[usize]) -> Variation {
        let related = |a: &Field, b: &Field| a.steps.starts_with(&b.steps) || b.steps.starts_with(&a.steps);
        let n = self.plan.len();
        let at = self.next % n;
        let free = |i: &usize| taken.iter().all(|t| !related(&self.fields[*t], &self.fields[self.plan[*i].0]));
        let pick = (0..n).map(|k| (at + k) % n).find(free).unwrap_or(at);
        self.plan.swap(at, pick);
        let (field, value) = self.plan[at].clone();
        self.next += 1;
        let pointer = set(spec, &self.fields[field].steps, value.clone());
        Variation { field, pointer: format!("/spec{pointer}"), value }
    }

    /// Sets `field` to `value` on `spec` (another object of the same case: an old object gets
    /// the new one's value now and then, which ratchets).
    pub(crate) fn again(&self, spec: &mut Value, variation: &Variation) -> Variation {
        let pointer = set(spec, &self.fields[variation.field].steps, variation.value.clone());
        Variation { field: variation.field, pointer: format!("/spec{pointer}"), value: variation.value.clone() }
    }
}

/// Sets the value at `steps` under `node`, making the members, lists and maps on the way (a
/// list's first item, a map's key `a`), and returns its JSON pointer.
fn set(node: &mut Value, steps: &[Step], value: Value) -> String {
    let Some((step, rest)) = steps.split_first() else {
        *node = value;
        return String::new();
    };
    let (child, key) = match step {
        Step::Member(_) | Step::Entry => {
            if !node.is_object() {
                *node = json!({});
            }
            let key = match step {
                Step::Member(name) => name.clone(),
                _ => "a".to_string(),
            };
            (&mut node[key.as_str()], key)
        }
        Step::Item => {
            if !node.is_array() {
                *node = json!([]);
            }
            let items = node.as_array_mut().expect("a list");
            if items.is_empty() {
                items.push(Value::Null);
            }
            (&mut items[0], "0".to_string())
        }
    };
    // The container the next step needs (the last value is simply replaced).
    match rest.first() {
        Some(Step::Item) if !child.is_array() => *child = json!([]),
        Some(Step::Member(_) | Step::Entry) if !child.is_object() => *child = json!({}),
        _ => {}
    }
    format!("/{key}{}", set(child, rest, value))
}

/// Which fields of a release the cases sent vary.
pub(crate) struct Coverage {
    pub(crate) fields: usize,
    pub(crate) varied: usize,
    /// The fields never varied, by name.
    pub(crate) missing: Vec<String>,
}

/// Checks `variations` (case index, variation) against the cases as sent: a field counts where
/// its value is still in the object (the cluster state added later may set `suspend` again).
pub(crate) fn coverage(edges: &Edges, variations: &[(usize, bool, Variation)], cases: &[super::Case]) -> Coverage {
    let mut seen = vec![false; edges.fields.len()];
    for (case, old, v) in variations {
        let object = if *old { cases[*case].old.as_ref() } else { Some(&cases[*case].new) };
        if object.and_then(|o| o.pointer(&v.pointer)) == Some(&v.value) {
            seen[v.field] = true;
        }
    }
    let missing: Vec<String> = edges.fields.iter().zip(&seen).filter(|(_, s)| !**s).map(|(f, _)| f.name()).collect();
    Coverage { fields: edges.fields.len(), varied: edges.fields.len() - missing.len(), missing }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_makes_the_path() {
        let cases = [
            (
                json!({}),
                vec![Step::Member("a".into()), Step::Item, Step::Member("b".into())],
                "/a/0/b",
                json!({"a": [{"b": 1}]}),
            ),
            (
                json!({"a": [{"c": 2}, {}]}),
                vec![Step::Member("a".into()), Step::Item, Step::Member("b".into())],
                "/a/0/b",
                json!({"a": [{"c": 2, "b": 1}, {}]}),
            ),
            (
                json!({"a": "x"}),
                vec![Step::Member("a".into()), Step::Entry, Step::Member("b".into())],
                "/a/a/b",
                json!({"a": {"a": {"b": 1}}}),
            ),
            (json!({"a": [null]}), vec![Step::Member("a".into())], "/a", json!({"a": 1})),
        ];
        for (mut node, steps, pointer, want) in cases {
            assert_eq!(set(&mut node, &steps, json!(1)), pointer);
            assert_eq!(node, want);
        }
    }
}
