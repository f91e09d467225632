//! Kubernetes' `equality.Semantic.DeepEqual` over a release's types, on JSON values: the verdict
//! Kubeflow Trainer reaches when it decodes both objects into its Go types and compares them.
//!
//! - `null` decodes like an absent field.
//! - A pointer field (`*T`) that is present differs from an absent one, even at its zero value:
//!   `labelSelector: {}` is not an absent selector, `tolerationSeconds: 0` is not absent.
//! - A non-pointer field equals its zero value when absent: `""`, `0`, `false`, a struct of zeros.
//! - Lists and maps: absent, `null` and empty are one value; lists compare index by index.
//! - Numbers compare by value (`1` = `1.0`); quantities by amount (`1Gi` = `1024Mi`); times by
//!   instant; an int-or-string `1` is not `"1"`.
//! - Fields the type does not have are ignored: the API server prunes them before any webhook.

use serde_json::{Map, Value};

use super::model::{Field, Struct, Ty};
use super::quantity::Amount;

/// Fields left out of a comparison, as `(struct name, JSON field)`.
pub(crate) type Ignored = &'static [(&'static str, &'static str)];

/// Trainer's mutating webhook keeps a runtime patch's old `time` when its content is unchanged, so
/// the validating webhooks see a new `time` only with new content: comparing without it gives
/// Trainer's verdict whether or not its mutating webhook ran first.
pub(crate) const RUNTIME_PATCH_TIME: Ignored = &[("trainer/v1alpha1.RuntimePatch", "time")];

/// Whether `field` holds the same Go value in `a` and `b` (`None`: the field is absent).
pub(crate) fn field_equal(field: &Field, a: Option<&Value>, b: Option<&Value>, ignored: Ignored) -> bool {
    let (a, b) = (present(a), present(b));
    if field.pointer {
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => equal(&field.ty, Some(a), Some(b), ignored),
            _ => false,
        }
    } else {
        equal(&field.ty, a, b, ignored)
    }
}

/// Two values of `ty` (a list item, say), as [`field_equal`] compares a non-pointer field.
pub(crate) fn values_equal(ty: &Ty, a: &Value, b: &Value, ignored: Ignored) -> bool {
    equal(ty, Some(a), Some(b), ignored)
}

/// `null` is absent.
fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Two values of `ty`; `None` is the type's zero value.
fn equal(ty: &Ty, a: Option<&Value>, b: Option<&Value>, ignored: Ignored) -> bool {
    let (a, b) = (present(a), present(b));
    let fits = |v: Option<&Value>| v.is_none_or(|v| fits(ty, v));
    if !fits(a) || !fits(b) {
        // The API server refuses such a value before any webhook sees it; compare it as JSON.
        return json_equal(a.unwrap_or(&Value::Null), b.unwrap_or(&Value::Null));
    }
    match ty {
        Ty::Bool => a.and_then(Value::as_bool).unwrap_or(false) == b.and_then(Value::as_bool).unwrap_or(false),
        Ty::Int32 | Ty::Int64 | Ty::Float64 => number_equal(a, b),
        Ty::String => a.and_then(Value::as_str).unwrap_or("") == b.and_then(Value::as_str).unwrap_or(""),
        Ty::DateTime => time_equal(a.and_then(Value::as_str), b.and_then(Value::as_str)),
        // The zero value is the integer 0.
        Ty::IntOrString => match (a, b) {
            (Some(Value::String(x)), Some(Value::String(y))) => x == y,
            (Some(Value::String(_)), _) | (_, Some(Value::String(_))) => false,
            _ => number_equal(a, b),
        },
        Ty::Quantity => quantity_equal(a, b),
        Ty::List(item) => {
            let (a, b) = (items(a), items(b));
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(item, Some(x), Some(y), ignored))
        }
        Ty::Map(value) => {
            let (a, b) = (members(a), members(b));
            a.len() == b.len()
                && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| equal(value, Some(x), Some(y), ignored)))
        }
        Ty::Struct(s) => struct_equal(s, members(a), members(b), ignored),
    }
}

fn struct_equal(s: &Struct, a: &Map<String, Value>, b: &Map<String, Value>, ignored: Ignored) -> bool {
    s.fields
        .iter()
        .filter(|f| !ignored.contains(&(s.name, f.json)))
        .all(|f| field_equal(f, a.get(f.json), b.get(f.json), ignored))
}

/// Whether the members the model does not have (anywhere under a `ty` value) are equal in `a` and
/// `b`, as JSON; `null` is absent. For `runtimePatches`: a member unknown to the newest release
/// trainguard models reaches the webhook only when a newer Trainer CRD carries it, and that
/// Trainer compares it. (In the frozen lines, `podSpecOverrides` and `podTemplateOverrides`, no
/// newer CRD exists: the API server prunes every unknown member.)
pub(crate) fn unknown_members_equal(ty: &Ty, a: Option<&Value>, b: Option<&Value>, ignored: Ignored) -> bool {
    let (a, b) = (present(a), present(b));
    match ty {
        Ty::List(item) => match (a.and_then(Value::as_array), b.and_then(Value::as_array)) {
            (Some(x), Some(y)) => x.iter().zip(y).all(|(x, y)| unknown_members_equal(item, Some(x), Some(y), ignored)),
            _ => true,
        },
        Ty::Map(value) => {
            let (x, y) = (members(a), members(b));
            x.iter().all(|(k, v)| unknown_members_equal(value, Some(v), y.get(k), ignored))
        }
        Ty::Struct(s) => {
            let (x, y) = (members(a), members(b));
            let unknown = |k: &String| s.field(k).is_none() && !ignored.contains(&(s.name, k.as_str()));
            let keys = x.keys().chain(y.keys()).filter(|k| unknown(k));
            let unknown_equal = keys.into_iter().all(|k| {
                json_equal(present(x.get(k)).unwrap_or(&Value::Null), present(y.get(k)).unwrap_or(&Value::Null))
            });
            unknown_equal
                && s.fields.iter().all(|f| unknown_members_equal(&f.ty, x.get(f.json), y.get(f.json), ignored))
        }
        _ => true,
    }
}

static EMPTY_LIST: Vec<Value> = Vec::new();

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&EMPTY_LIST, Vec::as_slice)
}

fn members(v: Option<&Value>) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.and_then(Value::as_object).unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// Whether a JSON value has the shape of `ty` (numbers for integers, and so on).
fn fits(ty: &Ty, v: &Value) -> bool {
    match ty {
        Ty::Bool => v.is_boolean(),
        Ty::Int32 | Ty::Int64 | Ty::Float64 => v.is_number(),
        Ty::String | Ty::DateTime => v.is_string(),
        Ty::IntOrString => v.is_number() || v.is_string(),
        Ty::Quantity => v.is_number() || v.as_str().is_some_and(|s| Amount::parse(s).is_some()),
        Ty::List(_) => v.is_array(),
        Ty::Map(_) | Ty::Struct(_) => v.is_object(),
    }
}

/// Numbers by value; `None` (the zero value) is `0`.
fn number_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    let number = |v: Option<&Value>| match v {
        Some(Value::Number(n)) => n.clone(),
        _ => 0.into(),
    };
    let (x, y) = (number(a), number(b));
    match (x.as_i64(), y.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => match (x.as_u64(), y.as_u64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
    }
}

fn quantity_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    let amount = |v: Option<&Value>| match v {
        None => Amount::parse("0"),
        Some(Value::String(s)) => Amount::parse(s),
        Some(other) => Amount::parse(&other.to_string()),
    };
    match (amount(a), amount(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `metav1.Time` compares instants; text that is not a time compares as text.
fn time_equal(a: Option<&str>, b: Option<&str>) -> bool {
    use k8s_openapi::jiff::Timestamp;
    let instant = |s: Option<&str>| s.map(|s| s.parse::<Timestamp>());
    match (instant(a), instant(b)) {
        (Some(Ok(x)), Some(Ok(y))) => x == y,
        _ => a.unwrap_or("") == b.unwrap_or(""),
    }
}

/// JSON equality with numbers by value, for values outside the model.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => number_equal(Some(a), Some(b)),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
