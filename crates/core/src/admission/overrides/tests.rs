//! When do the overrides count as changed? Kubeflow Trainer's answer: `equality.Semantic.DeepEqual`
//! over the release's Go types. A table of pairs with Trainer's verdict for each release line,
//! then properties over generated values.

use super::{changed, shape_errors, shape_errors_raw, try_parse};
use crate::model::OverridesField::{
    self, PodSpecOverrides as V2_0, PodTemplateOverrides as V2_1, RuntimePatches as V2_2,
};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_string()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `changed` on JSON texts; `None` is an absent field.
fn changed_text(field: OverridesField, old: Option<&str>, new: Option<&str>) -> bool {
    let (old, new) = (old.map(raw), new.map(raw));
    changed(field, old.as_deref(), new.as_deref())
}

const ALL: [OverridesField; 3] = [V2_0, V2_1, V2_2];

/// v2.0 item around `body` (fields of `PodSpecOverride`).
fn v2_0(body: &str) -> String {
    format!(r#"[{{"targetJobs":[{{"name":"node"}}]{}{body}}}]"#, if body.is_empty() { "" } else { "," })
}

/// v2.1 item whose pod `spec` is `spec` (fields of `PodTemplateSpecOverride`).
fn v2_1(spec: &str) -> String {
    format!(r#"[{{"targetJobs":[{{"name":"node"}}],"spec":{{{spec}}}}}]"#)
}

/// v2.2+ patch whose replicated job's pod `spec` is `spec` (fields of `PodSpecPatch`).
fn v2_2(spec: &str) -> String {
    format!(
        r#"[{{"manager":"kueue.x-k8s.io/manager","trainingRuntimeSpec":{{"template":{{"spec":{{"replicatedJobs":[{{"name":"node","template":{{"spec":{{"template":{{"spec":{{{spec}}}}}}}}}}}]}}}}}}}}]"#
    )
}

/// (why, field, old, new, Trainer's verdict: changed?)
type Row = (&'static str, OverridesField, String, String, bool);
/// (why, old members, new members, Trainer's verdict: changed?): a [`Row`] whose two sides are one
/// item of the field's release.
type MemberRow = (&'static str, &'static str, &'static str, bool);
/// One release's item around its members: [`v2_0`], [`v2_1`] or [`v2_2`].
type Item = fn(&str) -> String;

fn table() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    let mut rows: Vec<Row> = Vec::new();
    // The field itself: absent ≡ null ≡ [] (a nil slice), for every release.
    for field in ALL {
        rows.push(("null vs []", field, s("null"), s("[]"), false));
        rows.push(("[] vs one item", field, s("[]"), v2_0(""), true));
    }
    // Pointer structs present but empty are not absent. Most rows are the members of one item,
    // wrapped by their release's item builder; some start from a bare volume or toleration.
    let (volume, toleration) = (r#""volumes":[{"name":"v"}]"#, r#""tolerations":[{"key":"k"}]"#);
    let member_rows: [(OverridesField, Item, Vec<MemberRow>); 3] = [
        (
            V2_0,
            v2_0,
            vec![
                // v2.0 volumes: each source is a pointer.
                (
                    "v2.0 emptyDir {} -> downwardAPI {}",
                    r#""volumes":[{"name":"v","emptyDir":{}}]"#,
                    r#""volumes":[{"name":"v","downwardAPI":{}}]"#,
                    true,
                ),
                (
                    "v2.0 volume without source -> emptyDir {}",
                    volume,
                    r#""volumes":[{"name":"v","emptyDir":{}}]"#,
                    true,
                ),
                ("v2.0 emptyDir null = absent", volume, r#""volumes":[{"name":"v","emptyDir":null}]"#, false),
                (
                    "v2.0 sizeLimit 1Gi = 1024Mi",
                    r#""volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"}}]"#,
                    r#""volumes":[{"name":"v","emptyDir":{"sizeLimit":"1024Mi"}}]"#,
                    false,
                ),
                (
                    "v2.0 sizeLimit 1Gi != 1G",
                    r#""volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"}}]"#,
                    r#""volumes":[{"name":"v","emptyDir":{"sizeLimit":"1G"}}]"#,
                    true,
                ),
                (
                    "v2.0 emptyDir medium \"\" = absent (non-pointer string)",
                    r#""volumes":[{"name":"v","emptyDir":{}}]"#,
                    r#""volumes":[{"name":"v","emptyDir":{"medium":""}}]"#,
                    false,
                ),
                ("v2.0 serviceAccountName \"\" != absent (pointer)", "", r#""serviceAccountName":"""#, true),
                ("v2.0 nodeSelector {} = absent (map)", "", r#""nodeSelector":{}"#, false),
                ("v2.0 tolerations [] = absent (list)", "", r#""tolerations":[]"#, false),
                (
                    "v2.0 tolerationSeconds 0 != absent (pointer)",
                    toleration,
                    r#""tolerations":[{"key":"k","tolerationSeconds":0}]"#,
                    true,
                ),
                ("v2.0 toleration value \"\" = absent", toleration, r#""tolerations":[{"key":"k","value":""}]"#, false),
                (
                    "v2.0 tolerations reordered",
                    r#""tolerations":[{"key":"a"},{"key":"b"}]"#,
                    r#""tolerations":[{"key":"b"},{"key":"a"}]"#,
                    true,
                ),
                (
                    "v2.0 containers[].resources is not a field: pruned, ignored",
                    r#""containers":[{"name":"node"}]"#,
                    r#""containers":[{"name":"node","resources":{"limits":{"cpu":"1"}}}]"#,
                    false,
                ),
                (
                    "v2.0 env value changed",
                    r#""containers":[{"name":"node","env":[{"name":"A","value":"1"}]}]"#,
                    r#""containers":[{"name":"node","env":[{"name":"A","value":"2"}]}]"#,
                    true,
                ),
            ],
        ),
        (
            V2_1,
            v2_1,
            vec![
                // v2.1: affinity and metadata behind pointers.
                (
                    "v2.1 anti-affinity term gains labelSelector {}",
                    r#""affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"z"}]}}"#,
                    r#""affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"z","labelSelector":{}}]}}"#,
                    true,
                ),
                ("v2.1 affinity {} != absent", "", r#""affinity":{}"#, true),
                ("v2.1 affinity null = absent", "", r#""affinity":null"#, false),
                (
                    "v2.1 spec.securityContext is not a field: ignored",
                    "",
                    r#""securityContext":{"runAsUser":1000}"#,
                    false,
                ),
                (
                    "v2.1 node affinity weight 1 = 1.0",
                    r#""affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{}}]}}"#,
                    r#""affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1.0,"preference":{}}]}}"#,
                    false,
                ),
            ],
        ),
        (
            V2_2,
            v2_2,
            vec![
                (
                    "v2.2 container image is not a field of v2.3: compared in runtimePatches",
                    r#""containers":[{"name":"node"}]"#,
                    r#""containers":[{"name":"node","image":"x"}]"#,
                    true,
                ),
                ("v2.3 terminationGracePeriodSeconds 0 != absent", "", r#""terminationGracePeriodSeconds":0"#, true),
                (
                    "v2.2 runAsNonRoot false != absent (pointer)",
                    r#""securityContext":{}"#,
                    r#""securityContext":{"runAsNonRoot":false}"#,
                    true,
                ),
            ],
        ),
    ];
    for (field, item, members) in member_rows {
        rows.extend(members.into_iter().map(|(why, old, new, changed)| (why, field, item(old), item(new), changed)));
    }
    let whole_rows: [Row; 5] = [
        (
            "v2.1 spec {} != absent",
            V2_1,
            s(r#"[{"targetJobs":[{"name":"node"}]}]"#),
            s(r#"[{"targetJobs":[{"name":"node"}],"spec":{}}]"#),
            true,
        ),
        (
            "v2.1 metadata {} != absent",
            V2_1,
            s(r#"[{"targetJobs":[{"name":"node"}]}]"#),
            s(r#"[{"targetJobs":[{"name":"node"}],"metadata":{}}]"#),
            true,
        ),
        (
            "v2.1 metadata labels {} = absent",
            V2_1,
            s(r#"[{"targetJobs":[{"name":"node"}],"metadata":{}}]"#),
            s(r#"[{"targetJobs":[{"name":"node"}],"metadata":{"labels":{}}}]"#),
            false,
        ),
        // v2.2+: every level of a patch is a pointer.
        (
            "v2.2 patch gains template.metadata {}",
            V2_2,
            s(r#"[{"manager":"m","trainingRuntimeSpec":{"template":{}}}]"#),
            s(r#"[{"manager":"m","trainingRuntimeSpec":{"template":{"metadata":{}}}}]"#),
            true,
        ),
        (
            // A member unknown to v2.3 reaches the webhook only when a newer Trainer CRD carries it,
            // and that Trainer compares it.
            "v2.2 replicas is not a field of v2.3: compared in runtimePatches",
            V2_2,
            v2_2(r#""nodeSelector":{"a":"b"}"#),
            s(&v2_2(r#""nodeSelector":{"a":"b"}"#).replace(r#""name":"node","#, r#""name":"node","replicas":3,"#)),
            true,
        ),
    ];
    rows.extend(whole_rows);
    // runtimePatches: index by index, each item's `time` left out.
    let patch = |manager: &str, time: &str, selector: &str| {
        format!(
            r#"{{"manager":"{manager}","time":"{time}","trainingRuntimeSpec":{{"template":{{"spec":{{"replicatedJobs":[{{"name":"node","template":{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"pool":"{selector}"}}}}}}}}}}}}]}}}}}}}}"#
        )
    };
    let (a1, b1) = (patch("a", "2026-01-01T00:00:00Z", "x"), patch("b", "2026-01-01T00:00:00Z", "y"));
    rows.push(("patches reordered (index by index)", V2_2, format!("[{a1},{b1}]"), format!("[{b1},{a1}]"), true));
    rows.push((
        "time restamped",
        V2_2,
        format!("[{a1}]"),
        format!("[{}]", patch("a", "2026-06-01T00:00:00Z", "x")),
        false,
    ));
    rows.push((
        "content changed and restamped",
        V2_2,
        format!("[{a1}]"),
        format!("[{}]", patch("a", "2026-06-01T00:00:00Z", "z")),
        true,
    ));
    rows.push((
        "manager renamed",
        V2_2,
        format!("[{a1}]"),
        format!("[{}]", patch("c", "2026-01-01T00:00:00Z", "x")),
        true,
    ));
    rows
}

#[test]
fn trainers_verdict_on_each_pair() {
    let mut wrong = Vec::new();
    for (why, field, old, new, expected) in table() {
        for (o, n) in [(&old, &new), (&new, &old)] {
            if changed_text(field, Some(o), Some(n)) != expected {
                wrong.push(format!("{why} ({field:?}): expected changed={expected}\n  old {o}\n  new {n}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn absent_null_and_empty_field_are_one_value() {
    for field in ALL {
        for (old, new) in [(None, Some("null")), (None, Some("[]")), (Some("[]"), None), (Some("null"), Some("[]"))] {
            assert!(!changed_text(field, old, new), "{field:?}: {old:?} -> {new:?}");
        }
        assert!(changed_text(field, None, Some(&v2_0(""))), "{field:?}: absent -> one item");
    }
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

// ---- Properties over generated overrides ---------------------------------------------------------

fn arb_toleration() -> impl Strategy<Value = Value> {
    (prop::option::of("[a-z]{1,3}"), prop::option::of(0i64..3), prop::option::of(prop::bool::ANY)).prop_map(
        |(key, seconds, effect)| {
            let mut t = json!({});
            if let Some(k) = key {
                t["key"] = json!(k);
            }
            if let Some(s) = seconds {
                t["tolerationSeconds"] = json!(s);
            }
            if effect == Some(true) {
                t["effect"] = json!("NoSchedule");
            }
            t
        },
    )
}

fn arb_pod(field: OverridesField) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(arb_toleration(), 0..3),
        prop::option::of(prop::collection::btree_map("[a-c]", "[x-z]", 0..2)),
        prop::option::of("[a-b]{0,2}"),
    )
        .prop_map(move |(tolerations, selector, account)| {
            let mut pod = json!({"tolerations": tolerations});
            if let Some(s) = selector {
                pod["nodeSelector"] = json!(s);
            }
            if let Some(a) = account {
                pod["serviceAccountName"] = json!(a);
            }
            match field {
                OverridesField::PodSpecOverrides => {
                    pod["targetJobs"] = json!([{"name": "node"}]);
                    pod
                }
                OverridesField::PodTemplateOverrides => json!({"targetJobs": [{"name": "node"}], "spec": pod}),
                OverridesField::RuntimePatches => json!({
                    "manager": "example.com/m",
                    "time": "2026-01-01T00:00:00Z",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}
                    ]}}}
                }),
            }
        })
}

fn arb_field() -> impl Strategy<Value = OverridesField> {
    prop::sample::select(ALL.to_vec())
}

fn arb_case() -> impl Strategy<Value = (OverridesField, Value, Value)> {
    arb_field().prop_flat_map(|field| {
        let items = || prop::collection::vec(arb_pod(field), 0..3).prop_map(Value::Array);
        (Just(field), items(), items())
    })
}

/// Every struct gains a member its type does not have (maps such as `nodeSelector` keep their
/// keys).
fn with_unknown_members(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut map: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), if k == "nodeSelector" { v.clone() } else { with_unknown_members(v) }))
                .collect();
            map.insert("notAFieldOfTrainer".into(), json!({"x": [1]}));
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(with_unknown_members).collect()),
        other => other.clone(),
    }
}

/// Two runtime patches with the same `manager`.
fn repeats_a_manager(v: &Value) -> bool {
    let managers: Vec<&Value> = v.as_array().into_iter().flatten().filter_map(|item| item.get("manager")).collect();
    managers.iter().enumerate().any(|(i, m)| managers[..i].contains(m))
}

/// Trainer's defaulter keeps a patch's time only when it equals the last old patch of its manager:
/// an unchanged list repeating a manager with different contents is re-stamped, a change.
#[test]
fn a_repeated_manager_is_restamped() {
    let list = r#"[{"manager":"a.io/m","trainingRuntimeSpec":{}},{"manager":"a.io/m"}]"#;
    assert!(changed(V2_2, Some(&raw(list)), Some(&raw(list))));
    let same = r#"[{"manager":"a.io/m"},{"manager":"a.io/m"}]"#;
    assert!(!changed(V2_2, Some(&raw(same)), Some(&raw(same))));
}

fn compact(v: &Value) -> Box<RawValue> {
    raw(&serde_json::to_string(v).expect("serialises"))
}

fn pretty(v: &Value) -> Box<RawValue> {
    raw(&serde_json::to_string_pretty(v).expect("serialises"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn reflexive_whatever_the_spelling((field, a, _b) in arb_case()) {
        // With a repeated manager Trainer's defaulter re-stamps the list: not reflexive in Trainer
        // either (see `a_repeated_manager_is_restamped`).
        prop_assume!(!repeats_a_manager(&a));
        prop_assert!(!changed(field, Some(&compact(&a)), Some(&pretty(&a))));
    }

    #[test]
    fn symmetric((field, a, b) in arb_case()) {
        prop_assert_eq!(
            changed(field, Some(&compact(&a)), Some(&compact(&b))),
            changed(field, Some(&compact(&b)), Some(&compact(&a)))
        );
    }

    /// In the frozen lines (podSpecOverrides, podTemplateOverrides) the API server prunes unknown
    /// members, so they never make a change. In runtimePatches a newer Trainer's CRD may carry
    /// them, and that Trainer compares them: added on one side they are a change, on both they
    /// change nothing.
    #[test]
    fn unknown_members_change_runtime_patches_only((field, a, b) in arb_case()) {
        let verdict = changed(field, Some(&compact(&a)), Some(&compact(&b)));
        if field == OverridesField::RuntimePatches {
            let (ua, ub) = (with_unknown_members(&a), with_unknown_members(&b));
            prop_assert_eq!(changed(field, Some(&compact(&ua)), Some(&compact(&ub))), verdict);
            if a.as_array().is_some_and(|items| !items.is_empty()) {
                prop_assert!(changed(field, Some(&compact(&ua)), Some(&compact(&a))));
            }
        } else {
            prop_assert_eq!(changed(field, Some(&compact(&with_unknown_members(&a))), Some(&compact(&b))), verdict);
            prop_assert_eq!(changed(field, Some(&compact(&a)), Some(&compact(&with_unknown_members(&b)))), verdict);
        }
    }

    #[test]
    fn restamping_time_is_never_a_change((_field, a, _b) in arb_case(), stamp in "2025-0[1-9]-1[0-9]T0[0-9]:00:00Z") {
        let restamped: Vec<Value> = a.as_array().cloned().unwrap_or_default().into_iter().map(|mut item| {
            item["time"] = json!(stamp.clone());
            item
        }).collect();
        let a = Value::Array(a.as_array().cloned().unwrap_or_default().into_iter().enumerate().map(|(i, mut item)| {
            item["manager"] = json!(format!("example.com/m{i}"));
            item
        }).collect());
        let restamped = Value::Array(restamped.into_iter().enumerate().map(|(i, mut item)| {
            item["manager"] = json!(format!("example.com/m{i}"));
            item
        }).collect());
        prop_assert!(!changed(V2_2, Some(&compact(&a)), Some(&compact(&restamped))));
    }

    #[test]
    fn raw_shape_check_agrees_with_the_value_one((field, v, _b) in arb_case()) {
        let text = serde_json::to_string(&v).expect("serialises");
        let parsed = try_parse(Some(&raw(&text))).expect("generated JSON parses");
        prop_assert_eq!(shape_errors_raw(field, Some(&raw(&text))), shape_errors(field, &parsed).into());
    }
}
