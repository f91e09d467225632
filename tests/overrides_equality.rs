//! docs/webhook.md §2: when do the overrides count as changed? A table of cases, then properties
//! over generated values, with a simple `Value`-based reference implementation as the oracle for
//! the raw walker.

mod common;

use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use trainguard::admission::overrides::{changed, shape_errors, shape_errors_raw, try_parse};
use trainguard::model::OverridesField::{
    self, PodSpecOverrides as Pso, PodTemplateOverrides as Pto, RuntimePatches as Rp,
};

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_string()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `changed` on JSON texts; `None` is an absent field.
fn changed_text(field: OverridesField, old: Option<&str>, new: Option<&str>) -> bool {
    let (old, new) = (old.map(raw), new.map(raw));
    changed(field, old.as_deref(), new.as_deref())
}

const ALL: [OverridesField; 3] = [Pso, Pto, Rp];
const LISTS: [OverridesField; 2] = [Pso, Pto];

struct Row {
    why: &'static str,
    fields: &'static [OverridesField],
    old: Option<&'static str>,
    new: Option<&'static str>,
    changed: bool,
}

const fn row(
    why: &'static str,
    fields: &'static [OverridesField],
    old: Option<&'static str>,
    new: Option<&'static str>,
    changed: bool,
) -> Row {
    Row { why, fields, old, new, changed }
}

const NODE: &str = r#"[{"targetJobs":[{"name":"node"}],"nodeSelector":{"pool":"h100"}}]"#;

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // The field itself: absent ≡ null ≡ [].
    row("absent vs absent", &ALL, None, None, false),
    row("absent vs null", &ALL, None, Some("null"), false),
    row("absent vs []", &ALL, None, Some("[]"), false),
    row("null vs []", &ALL, Some("null"), Some("[]"), false),
    row("[] vs absent", &ALL, Some("[]"), None, false),
    row("absent vs one item", &ALL, None, Some(NODE), true),
    row("one item vs []", &ALL, Some(NODE), Some("[]"), true),
    row("one item vs null", &ALL, Some(NODE), Some("null"), true),
    row("byte-identical", &ALL, Some(NODE), Some(NODE), false),
    row("whitespace and key order only", &ALL, Some(NODE),
        Some(r#"[ { "nodeSelector" : { "pool" : "h100" }, "targetJobs" : [ { "name" : "node" } ] } ]"#), false),
    row("string escapes spelled differently", &ALL, Some(NODE),
        Some(r#"[{"targetJobs":[{"name":"no\u0064e"}],"nodeSelector":{"pool":"h\u0031\u00300"}}]"#), false),
    // Inside items: absent ≡ null ≡ {} ≡ [].
    row("absent vs null inside an item", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"volumes":null}]"#), false),
    row("absent vs [] inside an item", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"volumes":[]}]"#), false),
    row("absent vs {} inside an item", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"nodeSelector":{}}]"#), false),
    row("{} vs [] inside an item", &ALL, Some(r#"[{"a":{}}]"#), Some(r#"[{"a":[]}]"#), false),
    row("null vs {} deeper down", &ALL,
        Some(r#"[{"spec":{"affinity":null}}]"#), Some(r#"[{"spec":{"affinity":{}}}]"#), false),
    // A map of only empty members is empty itself, at any depth (Go clients serialise empty structs).
    row("map of only null vs absent", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"resources":{"limits":null}}]"#), false),
    row("nested maps of empties vs absent", &ALL, Some(r#"[{"a":1}]"#),
        Some(r#"[{"a":1,"spec":{"affinity":{"nodeAffinity":{},"podAffinity":{"x":[],"y":null}}}}]"#), false),
    row("map of empties vs {}", &ALL, Some(r#"[{"a":{}}]"#), Some(r#"[{"a":{"b":{"c":null}}}]"#), false),
    row("map of empties vs []", &ALL, Some(r#"[{"a":[]}]"#), Some(r#"[{"a":{"b":[]}}]"#), false),
    row("map of empties inside a list element", &ALL, Some(r#"[{"t":[{"key":"a"}]}]"#),
        Some(r#"[{"t":[{"key":"a","x":{"y":{}}}]}]"#), false),
    row("a whole item of only empties", &ALL, Some(r#"[{}]"#), Some(r#"[{"a":{"b":null}}]"#), false),
    row("a map with one value is not empty", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"s":{"b":{"c":0}}}]"#), true),
    // Lists are atomic: a list with elements is not empty, even if they are.
    row("[{}] vs [] inside an item", &ALL, Some(r#"[{"a":[]}]"#), Some(r#"[{"a":[{}]}]"#), true),
    row("[null] vs absent inside an item", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"v":[null]}]"#), true),
    row("[{}] vs [] for the field", &ALL, Some("[]"), Some("[{}]"), true),
    row("empty vs a value inside an item", &ALL,
        Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"nodeSelector":{"p":"x"}}]"#), true),
    row("false is not empty", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"hostNetwork":false}]"#), true),
    row("0 is not empty", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"priority":0}]"#), true),
    row("\"\" is not empty", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"serviceAccountName":""}]"#), true),
    // Numbers compare by value.
    row("1 vs 1.0", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":1.0}]"#), false),
    row("300 vs 3e2", &ALL, Some(r#"[{"n":300}]"#), Some(r#"[{"n":3e2}]"#), false),
    row("-5 vs -5.0", &ALL, Some(r#"[{"n":-5}]"#), Some(r#"[{"n":-5.0}]"#), false),
    row("u64 max vs itself", &ALL,
        Some(r#"[{"n":18446744073709551615}]"#), Some(r#"[{"n":18446744073709551615}]"#), false),
    row("100 vs 1e2", &ALL, Some(r#"[{"n":100}]"#), Some(r#"[{"n":1e2}]"#), false),
    row("0 vs -0.0", &ALL, Some(r#"[{"n":0}]"#), Some(r#"[{"n":-0.0}]"#), false),
    row("1.5 vs 15e-1", &ALL, Some(r#"[{"n":1.5}]"#), Some(r#"[{"n":15e-1}]"#), false),
    row("i64 min vs itself as float", &ALL,
        Some(r#"[{"n":-9223372036854775808}]"#), Some(r#"[{"n":-9.223372036854775808e18}]"#), false),
    // Beyond 2^53 an integer is compared exactly with an integer, as a 64-bit float with a float.
    row("2^53+1 vs 2^53 as float", &ALL, Some(r#"[{"n":9007199254740993}]"#), Some(r#"[{"n":9007199254740992.0}]"#), false),
    row("u64 max vs u64 max - 1", &ALL,
        Some(r#"[{"n":18446744073709551615}]"#), Some(r#"[{"n":18446744073709551614}]"#), true),
    row("1 vs 2", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":2}]"#), true),
    row("1 vs 1.5", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":1.5}]"#), true),
    row("1 vs \"1\"", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":"1"}]"#), true),
    row("2^53+1 vs 2^53", &ALL, Some(r#"[{"n":9007199254740993}]"#), Some(r#"[{"n":9007199254740992}]"#), true),
    // Strings compare after unescaping, keys too.
    row("escaped key", &ALL, Some(r#"[{"nodeSelector":{"pool":"a"}}]"#), Some(r#"[{"node\u0053elector":{"po\u006fl":"a"}}]"#), false),
    row("escaped surrogate pair vs UTF-8", &ALL, Some(r#"[{"s":"😀"}]"#), Some(r#"[{"s":"\ud83d\ude00"}]"#), false),
    row("\\/ vs /", &ALL, Some(r#"[{"s":"a/b"}]"#), Some(r#"[{"s":"a\/b"}]"#), false),
    row("escaped but different", &ALL, Some(r#"[{"s":"ab"}]"#), Some(r#"[{"s":"a\u0062c"}]"#), true),
    row("escaped prefix", &ALL, Some(r#"[{"s":"ab"}]"#), Some(r#"[{"s":"\u0061"}]"#), true),
    row("\\n vs n", &ALL, Some(r#"[{"s":"n"}]"#), Some(r#"[{"s":"\n"}]"#), true),
    row("a key given twice keeps its last value", &ALL, Some(r#"[{"s":"b"}]"#), Some(r#"[{"s":"a","s":"b"}]"#), false),
    row("a key given twice, escaped", &ALL, Some(r#"[{"s":"a"}]"#), Some(r#"[{"s":"a","\u0073":"b"}]"#), true),
    // Objects with the same keys in the same order are compared member by member.
    row("same keys in the same order, one value differs", &ALL, Some(r#"[{"a":1,"s":{"x":"a","y":[1]}}]"#),
        Some(r#"[{"a":1,"s":{"x":"a","y":[2]}}]"#), true),
    row("same keys in the same order, empty against empty", &ALL, Some(r#"[{"a":1,"s":{"x":null}}]"#),
        Some(r#"[{"a":1,"s":{"x":{}}}]"#), false),
    row("same keys twice, only the overwritten values differ", &ALL, Some(r#"[{"s":"a","t":1,"s":"b"}]"#),
        Some(r#"[{"s":"c","t":1,"s":"b"}]"#), false),
    row("same keys twice, the last values differ", &ALL, Some(r#"[{"s":"a","t":1,"s":"b"}]"#),
        Some(r#"[{"s":"a","t":1,"s":"c"}]"#), true),
    row("lone surrogate is unreadable", &ALL, Some(r#"[{"s":"a"}]"#), Some(r#"[{"s":"a","t":"\ud800"}]"#), true),
    // Unknown fields are compared like known ones.
    row("unknown field changed", &ALL, Some(r#"[{"futureField":"a"}]"#), Some(r#"[{"futureField":"b"}]"#), true),
    row("unknown field added", &ALL, Some(r#"[{"a":1}]"#), Some(r#"[{"a":1,"futureField":{"x":1}}]"#), true),
    // Lists inside items keep their order (tolerations are atomic).
    row("tolerations reordered", &ALL, Some(r#"[{"t":[{"key":"a"},{"key":"b"}]}]"#),
        Some(r#"[{"t":[{"key":"b"},{"key":"a"}]}]"#), true),
    // The two list fields: order matters.
    row("items reordered (atomic list)", &LISTS,
        Some(r#"[{"targetJobs":[{"name":"a"}]},{"targetJobs":[{"name":"b"}]}]"#),
        Some(r#"[{"targetJobs":[{"name":"b"}]},{"targetJobs":[{"name":"a"}]}]"#), true),
    row("an item named time is compared in list fields", &LISTS, Some(r#"[{"time":"2025-01-01T00:00:00Z"}]"#),
        Some(r#"[{"time":"2025-06-01T00:00:00Z"}]"#), true),
    row("item added", &ALL,
        Some(r#"[{"manager":"a","x":1}]"#), Some(r#"[{"manager":"a","x":1},{"manager":"b","x":1}]"#), true),
    // runtimePatches: a map keyed by manager; order and each item's time do not matter.
    row("patches reordered", &[Rp], Some(r#"[{"manager":"a","x":1},{"manager":"b","x":2}]"#),
        Some(r#"[{"manager":"b","x":2},{"manager":"a","x":1}]"#), false),
    row("time restamped", &[Rp], Some(r#"[{"manager":"a","time":"2025-01-01T00:00:00Z","x":1}]"#),
        Some(r#"[{"manager":"a","time":"2025-06-01T00:00:00Z","x":1}]"#), false),
    row("time added", &[Rp],
        Some(r#"[{"manager":"a","x":1}]"#), Some(r#"[{"manager":"a","time":"2025-06-01T00:00:00Z","x":1}]"#), false),
    row("reordered and restamped", &[Rp],
        Some(r#"[{"manager":"a","time":"2025-01-01T00:00:00Z","x":1},{"manager":"b","time":"2025-01-01T00:00:00Z"}]"#),
        Some(r#"[{"manager":"b","time":"2025-02-02T00:00:00Z"},{"manager":"a","time":"2025-03-03T00:00:00Z","x":1}]"#),
        false),
    row("a time deeper down is compared", &[Rp], Some(r#"[{"manager":"a","spec":{"time":"1"}}]"#),
        Some(r#"[{"manager":"a","spec":{"time":"2"}}]"#), true),
    row("manager renamed", &[Rp], Some(r#"[{"manager":"a","x":1}]"#), Some(r#"[{"manager":"b","x":1}]"#), true),
    row("manager spelled with escapes", &[Rp], Some(r#"[{"manager":"a","x":1},{"manager":"b","x":2}]"#),
        Some(r#"[{"manager":"\u0062","x":2},{"manager":"\u0061","x":1}]"#), false),
    row("time key spelled with escapes", &[Rp], Some(r#"[{"manager":"a","time":"1"}]"#),
        Some(r#"[{"manager":"a","ti\u006de":"2"}]"#), false),
    row("empties beside the time", &[Rp], Some(r#"[{"manager":"a","time":"1"}]"#),
        Some(r#"[{"manager":"a","time":"2","spec":{"x":{}}}]"#), false),
    // Duplicate managers (not valid for a list-map, but readable): items sharing a manager are
    // compared in the order written.
    row("duplicate managers, same order", &[Rp], Some(r#"[{"manager":"a","x":1},{"manager":"a","x":2}]"#),
        Some(r#"[{"manager":"a","x":1},{"manager":"a","x":2}]"#), false),
    row("duplicate managers, swapped", &[Rp], Some(r#"[{"manager":"a","x":1},{"manager":"a","x":2}]"#),
        Some(r#"[{"manager":"a","x":2},{"manager":"a","x":1}]"#), true),
    row("patch content changed", &[Rp], Some(r#"[{"manager":"a","x":1},{"manager":"b","x":2}]"#),
        Some(r#"[{"manager":"b","x":3},{"manager":"a","x":1}]"#), true),
];

#[test]
fn equality_table() {
    let mut failed = Vec::new();
    for r in TABLE {
        for &field in r.fields {
            for (old, new) in [(r.old, r.new), (r.new, r.old)] {
                let got = changed_text(field, old, new);
                if got != r.changed {
                    failed.push(format!("{field:?} {}: {old:?} -> {new:?}: changed={got}", r.why));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Values nested deeper than serde_json's recursion limit (128) still sit in a `RawValue`; the
/// comparison must not read them as absent and wave a change through.
#[test]
fn too_deep_to_parse_counts_as_changed() {
    let deep = |leaf: &str| {
        format!(r#"[{{"targetJobs":[{{"name":"node"}}],"x":{}{leaf}{}}}]"#, "[".repeat(200), "]".repeat(200))
    };
    for field in ALL {
        assert!(changed_text(field, Some(&deep("1")), Some(&deep("2"))), "{field:?}: two deep values");
        assert!(changed_text(field, None, Some(&deep("1"))), "{field:?}: absent -> deep");
        assert!(!changed_text(field, Some(&deep("1")), Some(&deep("1"))), "{field:?}: byte-identical deep values");
    }
}

/// The walker refuses exactly what serde_json refuses: a value nested 128 levels deep.
#[test]
fn depth_limit_matches_serde_json() {
    for levels in [126, 127, 128, 129] {
        // The field's own list is one level; `levels - 1` more inside its item.
        let deep = |leaf: &str| format!(r#"[{}{leaf}{}]"#, "[".repeat(levels - 1), "]".repeat(levels - 1));
        let (one, respelled) = (deep("1"), deep("1.0"));
        let readable = try_parse(Some(&raw(&one))).is_ok();
        assert_eq!(readable, levels < 128, "{levels} levels: serde_json");
        for field in ALL {
            assert_eq!(changed_text(field, Some(&one), Some(&respelled)), !readable, "{field:?} at {levels} levels");
        }
    }
}

// ---- The oracle: the plain `Value`-based comparison ---------------------------------------------

/// What the raw walker must agree with: both sides parsed into `serde_json::Value`, then compared
/// by the rules written out as directly as possible.
mod oracle {
    use serde_json::{Map, Number, Value};
    use trainguard::model::OverridesField;

    pub fn changed(field: OverridesField, old: Option<&str>, new: Option<&str>) -> bool {
        let parse = |t: Option<&str>| t.map_or(Ok(Value::Null), serde_json::from_str::<Value>);
        match (parse(old), parse(new)) {
            (Ok(old), Ok(new)) => !semantically_equal(field, &old, &new),
            _ => true,
        }
    }

    pub fn semantically_equal(field: OverridesField, old: &Value, new: &Value) -> bool {
        match (field, old, new) {
            (OverridesField::RuntimePatches, Value::Array(a), Value::Array(b)) => keyed_equal(a, b),
            _ => sem_eq(old, new, None),
        }
    }

    /// Keyed by `manager`; a stable sort keeps items sharing a manager in their written order.
    fn keyed_equal(a: &[Value], b: &[Value]) -> bool {
        let key = |v: &&Value| v.get("manager").and_then(Value::as_str).map(str::to_owned);
        let mut a: Vec<&Value> = a.iter().collect();
        let mut b: Vec<&Value> = b.iter().collect();
        a.sort_by_key(key);
        b.sort_by_key(key);
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| sem_eq(x, y, Some("time")))
    }

    pub fn is_empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.values().all(is_empty),
            _ => false,
        }
    }

    fn sem_eq(a: &Value, b: &Value, skip_key: Option<&str>) -> bool {
        if is_empty(a) && is_empty(b) {
            return true;
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => objects_equal(x, y, skip_key),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| sem_eq(p, q, None))
            }
            (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
            _ => a == b,
        }
    }

    fn objects_equal(x: &Map<String, Value>, y: &Map<String, Value>, skip_key: Option<&str>) -> bool {
        let keep = |k: &String| Some(k.as_str()) != skip_key;
        x.iter().filter(|(k, _)| keep(k)).all(|(k, v)| sem_eq(v, y.get(k).unwrap_or(&Value::Null), None))
            && y.iter().filter(|(k, _)| keep(k) && !x.contains_key(*k)).all(|(_, v)| is_empty(v))
    }

    fn numbers_equal(x: &Number, y: &Number) -> bool {
        if let (Some(p), Some(q)) = (x.as_i64(), y.as_i64()) {
            return p == q;
        }
        if let (Some(p), Some(q)) = (x.as_u64(), y.as_u64()) {
            return p == q;
        }
        matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
    }
}

#[test]
fn oracle_agrees_with_the_table() {
    let mut failed = Vec::new();
    for r in TABLE {
        for &field in r.fields {
            for (old, new) in [(r.old, r.new), (r.new, r.old)] {
                if oracle::changed(field, old, new) != r.changed {
                    failed.push(format!("{field:?} {}: {old:?} -> {new:?}", r.why));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// On every admission and benchmark fixture, the walker and the oracle agree on each field.
#[test]
fn walker_agrees_with_the_oracle_on_every_fixture() {
    let mut compared = 0;
    let mut failed = Vec::new();
    for case in common::load_cases().into_iter().chain(common::load_bench_cases()) {
        let Ok(review) = serde_json::from_slice::<Value>(&case.review) else { continue };
        let request = &review["request"];
        for field in ALL {
            let side = |s: &str| request[s]["spec"].get(field.json_name()).map(|v| v.to_string());
            let (old, new) = (side("oldObject"), side("object"));
            if old.is_none() && new.is_none() {
                continue;
            }
            compared += 1;
            let got = changed_text(field, old.as_deref(), new.as_deref());
            if got != oracle::changed(field, old.as_deref(), new.as_deref()) {
                failed.push(format!("{} {field:?}: walker says changed={got}", case.name));
            }
        }
    }
    assert!(compared > 20, "only {compared} fixture fields compared");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---- Properties -------------------------------------------------------------------------------

const KEYS: [&str; 8] = ["nodeSelector", "tolerations", "name", "time", "manager", "x", "spec", "volumes"];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1_000_000i64..1_000_000).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![json!(9007199254740993u64), json!(9007199254740992.0), json!(-0.0), json!(1e2)]),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-c]{0,3}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(&KEYS[..]), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// An overrides list: items are objects; runtime patches get distinct managers.
fn arb_overrides() -> impl Strategy<Value = Value> {
    prop::collection::vec(prop::collection::vec((prop::sample::select(&KEYS[..]), arb_json()), 0..4), 0..4).prop_map(
        |items| {
            Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, kv)| {
                        let mut item: Map<String, Value> = kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                        item.insert("manager".into(), json!(format!("example.com/m{i}")));
                        Value::Object(item)
                    })
                    .collect(),
            )
        },
    )
}

/// Overrides values near the shape rules: items with `manager`, `targetJobs` and `name` of any
/// type, sometimes right, sometimes not.
fn arb_shaped() -> impl Strategy<Value = Value> {
    let name = prop_oneof![Just(json!("node")), Just(json!("")), Just(json!("b\u{e9}")), arb_json()];
    let target = prop_oneof![name.clone().prop_map(|n| json!({"name": n})), Just(json!({})), arb_json(),];
    let target_jobs = prop_oneof![prop::collection::vec(target, 0..3).prop_map(Value::Array), arb_json()];
    let item = prop_oneof![
        (name, target_jobs).prop_map(|(m, t)| json!({"manager": m, "targetJobs": t})),
        name_only(),
        arb_json(),
    ];
    prop_oneof![prop::collection::vec(item, 0..4).prop_map(Value::Array), arb_json()]
}

fn name_only() -> impl Strategy<Value = Value> {
    prop_oneof![Just(json!({"manager": "m"})), Just(json!({"targetJobs": [{"name": "a"}]})), Just(json!({"x": 1}))]
}

fn arb_field() -> impl Strategy<Value = OverridesField> {
    prop::sample::select(&ALL[..])
}

/// The same value spelled differently: integers as floats, empty members added to objects.
fn respell(v: &Value, salt: &mut u32) -> Value {
    *salt = salt.wrapping_mul(1_103_515_245).wrapping_add(12345);
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) if i.unsigned_abs() < (1 << 53) => json!(i as f64),
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|x| respell(x, salt)).collect()),
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().map(|(k, x)| (k.clone(), respell(x, salt))).collect();
            let empty = [Value::Null, json!([]), json!({})][(*salt % 3) as usize].clone();
            out.entry("zzEmpty").or_insert(empty);
            Value::Object(out)
        }
        _ => v.clone(),
    }
}

/// Empty members (null, `{}`, `[]`, maps of only those) inserted into every map, at any depth,
/// under keys no generated value uses.
fn insert_empties(v: &Value, salt: &mut u32) -> Value {
    *salt = salt.wrapping_mul(1_103_515_245).wrapping_add(12345);
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| insert_empties(x, salt)).collect()),
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().map(|(k, x)| (k.clone(), insert_empties(x, salt))).collect();
            let empties =
                [Value::Null, json!({}), json!([]), json!({"k": null}), json!({"k": {"j": [], "l": {}}, "m": null})];
            // Sometimes none, sometimes several.
            for n in 0..(*salt >> 8) % 3 {
                out.insert(format!("zzEmpty{n}"), empties[((*salt >> (12 + n)) % 5) as usize].clone());
            }
            Value::Object(out)
        }
        _ => v.clone(),
    }
}

/// The same text with every `b` and `c` written as a `\u` escape (they occur only inside
/// strings: keys and values).
fn escaped_raw(v: &Value) -> String {
    serde_json::to_string(v).expect("serialises").replace('b', "\\u0062").replace('c', "\\u0063")
}

fn pretty_raw(v: &Value) -> Box<RawValue> {
    raw(&serde_json::to_string_pretty(v).expect("serialises"))
}

fn compact_raw(v: &Value) -> Box<RawValue> {
    raw(&serde_json::to_string(v).expect("serialises"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn reflexive(field in arb_field(), v in arb_json()) {
        prop_assert!(oracle::semantically_equal(field, &v, &v));
        // Different bytes, same value: not a change.
        prop_assert!(!changed(field, Some(&compact_raw(&v)), Some(&pretty_raw(&v))));
    }

    #[test]
    fn symmetric(field in arb_field(), a in arb_overrides(), b in arb_overrides(), use_respelled in any::<bool>()) {
        let b = if use_respelled { respell(&a, &mut 7) } else { b };
        prop_assert_eq!(oracle::semantically_equal(field, &a, &b), oracle::semantically_equal(field, &b, &a));
        prop_assert_eq!(
            changed(field, Some(&compact_raw(&a)), Some(&compact_raw(&b))),
            changed(field, Some(&compact_raw(&b)), Some(&compact_raw(&a)))
        );
    }

    /// The raw walker and the `Value` oracle give the same verdict: on unrelated values, on
    /// respelled ones, with empties inserted, and with strings written with escapes.
    #[test]
    fn walker_agrees_with_the_oracle(
        field in arb_field(),
        a in arb_overrides(),
        b in arb_overrides(),
        variant in 0u8..4,
        salt in any::<u32>(),
        escape in any::<bool>(),
    ) {
        let b = match variant {
            0 => b,
            1 => respell(&a, &mut salt.clone()),
            2 => insert_empties(&a, &mut salt.clone()),
            _ => insert_empties(&b, &mut salt.clone()),
        };
        let old = serde_json::to_string(&a).expect("serialises");
        let new = if escape { escaped_raw(&b) } else { serde_json::to_string(&b).expect("serialises") };
        let expected = oracle::changed(field, Some(&old), Some(&new));
        prop_assert_eq!(changed_text(field, Some(&old), Some(&new)), expected, "{} vs {}", old, new);
        prop_assert_eq!(changed_text(field, Some(&new), Some(&old)), expected, "{} vs {}", new, old);
    }

    /// Inserting semantically empty members anywhere, in either side or both, never changes the
    /// verdict (Go clients serialise empty structs as `{}` and maps of them).
    #[test]
    fn inserting_empty_members_never_changes_the_verdict(
        field in arb_field(),
        a in arb_overrides(),
        b in arb_overrides(),
        same in any::<bool>(),
        sides in 1u8..4,
        salt in any::<u32>(),
    ) {
        let b = if same { respell(&a, &mut salt.clone()) } else { b };
        let verdict = changed(field, Some(&compact_raw(&a)), Some(&compact_raw(&b)));
        let mut salt = salt;
        let a2 = if sides & 1 != 0 { insert_empties(&a, &mut salt) } else { a.clone() };
        let b2 = if sides & 2 != 0 { insert_empties(&b, &mut salt) } else { b.clone() };
        prop_assert_eq!(changed(field, Some(&compact_raw(&a2)), Some(&compact_raw(&b2))), verdict, "{} vs {}", a2, b2);
    }

    /// The shape check on the raw tape reports exactly what the `Value` check reports.
    #[test]
    fn raw_shape_check_agrees_with_the_value_one(field in arb_field(), v in arb_shaped(), escape in any::<bool>()) {
        let text = if escape { escaped_raw(&v) } else { serde_json::to_string(&v).expect("serialises") };
        let parsed = try_parse(Some(&raw(&text))).expect("generated JSON parses");
        prop_assert_eq!(shape_errors_raw(field, Some(&raw(&text))), shape_errors(field, &parsed), "{}", text);
    }

    #[test]
    fn respelling_is_never_a_change(field in arb_field(), v in arb_overrides(), salt in any::<u32>()) {
        let respelled = respell(&v, &mut salt.clone());
        prop_assert!(!changed(field, Some(&compact_raw(&v)), Some(&compact_raw(&respelled))), "{} vs {}", v, respelled);
    }

    #[test]
    fn reordering_runtime_patches_is_never_a_change(v in arb_overrides(), rotate in 0usize..4) {
        let mut items = v.as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            let n = rotate % items.len();
            items.rotate_left(n);
            items.reverse();
        }
        let reordered = Value::Array(items);
        prop_assert!(!changed(Rp, Some(&compact_raw(&v)), Some(&compact_raw(&reordered))));
    }

    #[test]
    fn restamping_time_is_never_a_change(v in arb_overrides(), stamp in "2025-0[1-9]-1[0-9]T0[0-9]:00:00Z") {
        let restamped: Vec<Value> = v.as_array().cloned().unwrap_or_default().into_iter().map(|mut item| {
            item["time"] = json!(stamp.clone());
            item
        }).collect();
        let restamped = Value::Array(restamped);
        prop_assert!(!changed(Rp, Some(&compact_raw(&v)), Some(&compact_raw(&restamped))));
    }

    #[test]
    fn moving_to_other_nodes_is_always_a_change(
        field in arb_field(),
        v in arb_overrides(),
        at in any::<prop::sample::Index>(),
        pool in "[a-z]{1,8}",
    ) {
        // Pin one item to `pool`, then move it to another pool.
        let mut items = v.as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            items.push(json!({"manager": "example.com/m0"}));
        }
        let i = at.index(items.len());
        let pin = |items: &[Value], value: &str| -> Value {
            let mut items = items.to_vec();
            items[i]["nodeSelector"] = json!({"cloud.google.com/gke-accelerator": value});
            Value::Array(items)
        };
        let (before, after) = (pin(&items, &pool), pin(&items, &format!("{pool}-moved")));
        prop_assert!(changed(field, Some(&compact_raw(&before)), Some(&compact_raw(&after))));
    }
}

// ---- The old side read against the new side's tape ---------------------------------------------
//
// `changed` reads the old side only where its bytes differ from the new side's (an in-step walk
// of the old text against the new tape). Its answer must be the comparison of two whole tapes on
// every pair of texts, readable or not; these properties pit the two against each other on old
// texts made from the new one, which is where the walk takes its shortcuts.

mod guided {
    use super::*;
    use trainguard::admission::raw_eq::{Tape, equal, equal_to_text};

    /// Both answers for one pair of texts (the new one must read).
    pub fn agree(old: &str, new: &str, keyed: bool) -> Result<(), String> {
        let new_tape = Tape::read(Some(new)).map_err(|_| format!("new side does not read: {new}"))?;
        let whole = Tape::read(Some(old)).is_ok_and(|old| equal(&old, &new_tape, keyed));
        let walked = equal_to_text(Some(old), &new_tape, keyed);
        if whole == walked {
            Ok(())
        } else {
            Err(format!("keyed={keyed}: tapes say equal={whole}, the walk says {walked}\n old: {old}\n new: {new}"))
        }
    }

    /// `v` written out with a member of some objects given twice: before the original, with
    /// another value (`dup_value`), or after it, with the same or another value.
    pub fn write_with_duplicates(v: &Value, salt: &mut u32, dup_value: &Value, out: &mut String) {
        *salt = salt.wrapping_mul(1_103_515_245).wrapping_add(12345);
        match v {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_with_duplicates(item, salt, dup_value, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let duplicate = (*salt >> 16) % 4;
                let target = (*salt >> 8) as usize % map.len().max(1);
                out.push('{');
                let mut first = true;
                let mut member = |out: &mut String, k: &str, x: &Value| {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    out.push_str(&serde_json::to_string(k).unwrap());
                    out.push(':');
                    out.push_str(&serde_json::to_string(x).unwrap());
                };
                for (i, (k, x)) in map.iter().enumerate() {
                    if i == target && duplicate == 1 {
                        member(out, k, dup_value);
                    }
                    if i == target && duplicate >= 2 {
                        member(out, k, x);
                        member(out, k, if duplicate == 2 { x } else { dup_value });
                    } else {
                        member(out, k, x);
                    }
                }
                out.push('}');
            }
            _ => out.push_str(&serde_json::to_string(v).unwrap()),
        }
    }

    /// `v` with its `n`-th leaf (scalars, `{}` and `[]`; depth first) replaced by `with`.
    pub fn replace_leaf(v: &Value, n: &mut usize, with: &Value) -> Value {
        let is_leaf = match v {
            Value::Array(items) => items.is_empty(),
            Value::Object(map) => map.is_empty(),
            _ => true,
        };
        if is_leaf {
            let hit = *n == 0;
            *n = n.wrapping_sub(1);
            return if hit { with.clone() } else { v.clone() };
        }
        match v {
            Value::Array(items) => Value::Array(items.iter().map(|x| replace_leaf(x, n, with)).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, x)| (k.clone(), replace_leaf(x, n, with))).collect())
            }
            _ => unreachable!(),
        }
    }

    /// Replacement leaves: empties that equal absent members, spellings of the same number,
    /// strings, and containers.
    pub fn arb_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            prop::sample::select(vec![
                Value::Null,
                json!({}),
                json!([]),
                json!({"k": null}),
                json!(1),
                json!(1.0),
                json!("a"),
                json!("b"),
                json!([{}]),
                json!({"manager": "example.com/m0"}),
            ]),
            arb_json(),
        ]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    /// One leaf of the new side changed (to an equal spelling or not), then read as the old side.
    #[test]
    fn walk_agrees_with_tapes_on_one_changed_leaf(
        v in arb_overrides(),
        at in 0usize..64,
        with in guided::arb_leaf(),
        keyed in any::<bool>(),
        pretty in any::<bool>(),
        respelled in any::<bool>(),
    ) {
        let old = guided::replace_leaf(&v, &mut at.clone(), &with);
        let old = if respelled { respell(&old, &mut (at as u32)) } else { old };
        let new = serde_json::to_string(&v).expect("serialises");
        let old = if pretty { serde_json::to_string_pretty(&old) } else { serde_json::to_string(&old) }.expect("serialises");
        if let Err(e) = guided::agree(&old, &new, keyed) { prop_assert!(false, "{}", e); }
        if let Err(e) = guided::agree(&new, &old, keyed) { prop_assert!(false, "{}", e); }
    }

    /// Keys given twice, on either side, with the same or another value.
    #[test]
    fn walk_agrees_with_tapes_on_duplicate_keys(
        v in arb_overrides(),
        salt in any::<u32>(),
        dup_value in guided::arb_leaf(),
        other_dup_value in guided::arb_leaf(),
        keyed in any::<bool>(),
    ) {
        let plain = serde_json::to_string(&v).expect("serialises");
        let (mut doubled, mut doubled_otherwise) = (String::new(), String::new());
        guided::write_with_duplicates(&v, &mut salt.clone(), &dup_value, &mut doubled);
        // The same keys in the same places; only the extra members' values differ.
        guided::write_with_duplicates(&v, &mut salt.clone(), &other_dup_value, &mut doubled_otherwise);
        for (old, new) in [(&doubled, &plain), (&plain, &doubled), (&doubled, &doubled_otherwise)] {
            if let Err(e) = guided::agree(old, new, keyed) { prop_assert!(false, "{}", e); }
        }
    }

    /// The old side is the new text with a few bytes replaced, inserted or deleted: mostly not
    /// JSON at all, sometimes another value. Unreadable must count as changed on both paths.
    #[test]
    fn walk_agrees_with_tapes_on_damaged_text(
        v in arb_overrides(),
        edits in prop::collection::vec(
            (0u8..3, any::<prop::sample::Index>(), prop::sample::select(b"{}[]\",:0123456789.-eEnulltruefase \\/ab\x01".to_vec())),
            1..4,
        ),
        keyed in any::<bool>(),
    ) {
        let new = serde_json::to_string(&v).expect("serialises");
        let mut old = new.clone().into_bytes();
        for (op, at, byte) in edits {
            let at = at.index(old.len() + 1);
            match op {
                0 if at < old.len() => old[at] = byte,
                1 => old.insert(at, byte),
                _ if at < old.len() => { old.remove(at); }
                _ => {}
            }
        }
        let old = String::from_utf8(old).expect("ASCII edits of ASCII text");
        if let Err(e) = guided::agree(&old, &new, keyed) { prop_assert!(false, "{}", e); }
    }
}
