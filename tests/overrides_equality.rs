//! docs/webhook.md §2: when do the overrides count as changed? A table of cases, then properties over
//! generated values.

use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use trainguard::admission::overrides::{changed, semantically_equal};
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
    row("1 vs 2", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":2}]"#), true),
    row("1 vs 1.5", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":1.5}]"#), true),
    row("1 vs \"1\"", &ALL, Some(r#"[{"n":1}]"#), Some(r#"[{"n":"1"}]"#), true),
    row("2^53+1 vs 2^53", &ALL, Some(r#"[{"n":9007199254740993}]"#), Some(r#"[{"n":9007199254740992}]"#), true),
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

// ---- Properties -------------------------------------------------------------------------------

const KEYS: [&str; 8] = ["nodeSelector", "tolerations", "name", "time", "manager", "x", "spec", "volumes"];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1_000_000i64..1_000_000).prop_map(Value::from),
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
        prop_assert!(semantically_equal(field, &v, &v));
        // Different bytes, same value: not a change.
        prop_assert!(!changed(field, Some(&compact_raw(&v)), Some(&pretty_raw(&v))));
    }

    #[test]
    fn symmetric(field in arb_field(), a in arb_overrides(), b in arb_overrides(), use_respelled in any::<bool>()) {
        let b = if use_respelled { respell(&a, &mut 7) } else { b };
        prop_assert_eq!(semantically_equal(field, &a, &b), semantically_equal(field, &b, &a));
        prop_assert_eq!(
            changed(field, Some(&compact_raw(&a)), Some(&compact_raw(&b))),
            changed(field, Some(&compact_raw(&b)), Some(&compact_raw(&a)))
        );
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
