//! The hot path's decoder (`trainguard::fastjson`) against serde_json, which it stands in for:
//! - on every fixture, what serde_json decodes the fast decoder decodes the same (so the fast
//!   path is really taken), and what serde_json refuses the fast decoder refuses too, unless the
//!   problem lies inside a value the views skip (documented in docs/webhook.md, "Decoding");
//! - the same over thousands of corrupted fixtures (bytes flipped, inserted, cut);
//! - pretty-printed reviews get the answers of their compact originals.

mod common;

use serde::de::IgnoredAny;
use trainguard::model::object_only::ObjectOnly;
use trainguard::model::{ReviewEnvelope, TrainJobView};

type Envelope<'a> = ReviewEnvelope<'a, Box<ObjectOnly<TrainJobView<'a>>>>;

/// How the two decoders compare on one body.
#[derive(Debug, PartialEq, Eq)]
enum Agreement {
    /// Both decode, to the same views.
    Same,
    /// Both refuse.
    BothRefuse,
    /// serde_json refuses, the fast decoder does not: allowed only for JSON that is invalid
    /// inside a skipped value (serde_json refuses the body even when reading nothing from it).
    FastAcceptsInvalidSkipped,
    /// The fast decoder refuses what serde_json decodes: the caller falls back to serde_json.
    FastFallsBack,
}

fn compare(body: &[u8]) -> Result<Agreement, String> {
    let fast = trainguard::fastjson::from_slice::<Envelope<'_>>(body);
    let full = serde_json::from_slice::<Envelope<'_>>(body);
    match (fast, full) {
        (Ok(fast), Ok(full)) => {
            let (fast, full) = (format!("{fast:?}"), format!("{full:?}"));
            if fast == full { Ok(Agreement::Same) } else { Err(format!("views differ:\nfast {fast}\nfull {full}")) }
        }
        (Err(_), Err(_)) => Ok(Agreement::BothRefuse),
        (Err(_), Ok(_)) => Ok(Agreement::FastFallsBack),
        (Ok(_), Err(e)) => {
            if serde_json::from_slice::<IgnoredAny>(body).is_err() {
                Ok(Agreement::FastAcceptsInvalidSkipped)
            } else {
                Err(format!("the fast decoder accepts valid JSON that serde_json's views refuse: {e}"))
            }
        }
    }
}

#[test]
fn every_fixture_decodes_the_same_on_the_fast_path() {
    let mut cases = common::load_cases();
    cases.extend(common::load_bench_cases());
    assert!(cases.len() > 100, "fixtures missing: {}", cases.len());
    let mut same = 0;
    for case in &cases {
        match compare(&case.review) {
            Ok(Agreement::Same) => same += 1,
            Ok(Agreement::BothRefuse) => {}
            Ok(other) => panic!("{}: {other:?}", case.name),
            Err(e) => panic!("{}: {e}", case.name),
        }
    }
    // Most fixtures are well-formed reviews; the few refused ones are the bad-input rows.
    assert!(same * 10 >= cases.len() * 8, "only {same} of {} fixtures decoded on the fast path", cases.len());
}

/// Small deterministic generator so the test needs no seed plumbing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn corrupted_fixtures_never_decode_differently() {
    let cases = common::load_cases();
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let interesting = b"{}[]\":,\\ 0-1.e\xff\x01tnfu";
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..30_000 {
        let case = &cases[rng.below(cases.len())];
        let mut body = case.review.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(body.len().max(1));
            match rng.below(4) {
                0 if !body.is_empty() => body[at] = interesting[rng.below(interesting.len())],
                1 => body.insert(at, interesting[rng.below(interesting.len())]),
                2 if !body.is_empty() => {
                    body.remove(at);
                }
                _ => body.truncate(at),
            }
        }
        match compare(&body) {
            Ok(agreement) => *seen.entry(format!("{agreement:?}")).or_default() += 1,
            Err(e) => panic!("round {round}, from {}: {e}\nbody: {}", case.name, String::from_utf8_lossy(&body)),
        }
    }
    // The corruptions must reach both outcomes, or the test says nothing.
    assert!(seen.get("Same").copied().unwrap_or(0) > 1_000, "{seen:?}");
    assert!(seen.get("BothRefuse").copied().unwrap_or(0) > 1_000, "{seen:?}");
}

#[test]
fn pretty_printed_reviews_get_the_same_answers() {
    // The API server sends compact JSON; `trainguard review` and tests may not. Whitespace
    // everywhere (and keys reordered by `Value`) must change nothing in the answer.
    let mut compared = 0;
    for case in common::load_cases() {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&case.review) else { continue };
        let pretty = serde_json::to_vec_pretty(&value).expect("serialises");
        assert_eq!(compare(&pretty), compare(&case.review), "{}", case.name);
        let reviewed = trainguard::admission::review(case.endpoint(), &pretty, &case.config(), case.cluster().as_ref());
        assert_eq!(
            format!("{:?}", reviewed.map(|r| String::from_utf8(r.body).unwrap())),
            format!("{:?}", case.run().map(|r| String::from_utf8(r.body).unwrap())),
            "{}",
            case.name
        );
        compared += 1;
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn raw_overrides_that_are_not_json_are_shape_errors_and_count_as_changed() {
    use serde_json::value::RawValue;
    use trainguard::admission::overrides;
    use trainguard::model::OverridesField;
    // Bracket-balanced but not JSON: the structural skip hands it over as a raw value.
    let broken: &RawValue = trainguard::fastjson::from_slice(br#"[{"targetJobs" [1 2]}]"#).expect("structure is fine");
    let valid: &RawValue = serde_json::from_str(r#"[{"targetJobs":[]}]"#).unwrap();
    let errors = overrides::shape_errors_raw(OverridesField::PodSpecOverrides, Some(broken));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].detail.contains("is not valid JSON"), "{errors:?}");
    assert!(overrides::changed(OverridesField::PodSpecOverrides, Some(valid), Some(broken)));
    assert!(overrides::changed(OverridesField::PodSpecOverrides, Some(broken), Some(valid)));
}

/// Edits at each field the views read, on the small bench review: the fast decoder agrees with
/// serde_json (same views, or both refuse).
#[test]
fn edits_of_each_read_field_decode_as_serde_json_decodes() {
    let original = String::from_utf8(common::load_bench_cases().remove(0).review).expect("UTF-8");
    let edits: &[(&str, &str)] = &[
        // Given twice: serde's derives refuse.
        (r#""dryRun":false"#, r#""dryRun":false,"dryRun":true"#),
        (r#""name":"llama","namespace""#, r#""name":"llama","name":"x","namespace""#),
        (r#""suspend":false"#, r#""suspend":false,"suspend":false"#),
        (r#""jobsStatus":["#, r#""jobsStatus":null,"jobsStatus":["#),
        (r#""group":"trainer.kubeflow.org","#, r#""group":"trainer.kubeflow.org","group":"x","#),
        // A label given twice: the last counts.
        (r#""team":"ml-team"}"#, r#""team":"ml-team","team":"x"}"#),
        (r#""stage":"eval""#, r#""kueue.x-k8s.io/queue-name":"a","stage":"eval","kueue.x-k8s.io/queue-name":"b""#),
        // Null for each kind of field.
        (r#""dryRun":false"#, r#""dryRun":null"#),
        (r#""suspend":false"#, r#""suspend":null"#),
        (r#""managedBy":"trainer.kubeflow.org/trainjob-controller""#, r#""managedBy":null"#),
        (r#""runtimePatches":["#, r#""runtimePatches":null,"x":["#),
        (r#""labels":{"#, r#""labels":null,"x":{"#),
        (r#""jobsStatus":["#, r#""jobsStatus":[null,"#),
        (r#""group":"trainer.kubeflow.org""#, r#""group":null"#),
        (r#""active":1"#, r#""active":null"#),
        (r#""status":{"#, r#""status":null,"x":{"#),
        // Wrong types.
        (r#""dryRun":false"#, r#""dryRun":"false""#),
        (r#""suspend":false"#, r#""suspend":0"#),
        (r#""name":"llama","namespace""#, r#""name":["llama"],"namespace""#),
        (r#""labels":{"#, r#""labels":["x",{"#),
        (r#""team":"ml-team"}"#, r#""team":1}"#),
        (r#""active":1"#, r#""active":1.0"#),
        (r#""active":1"#, r#""active":4294967296"#),
        (r#""active":1"#, r#""active":-1"#),
        (r#""jobsStatus":["#, r#""jobsStatus":{"a":["#),
        (r#""runtimeRef":{"#, r#""runtimeRef":"x","y":{"#),
        (r#""spec":{"#, r#""spec":[{"#),
        // Keys with escapes and other characters.
        (r#""dryRun":false"#, r#""dry\u0052un":true"#),
        (r#""suspend":false"#, r#""susp\u0065nd":true"#),
        (r#""stage":"eval""#, r#""kueue.x-k8s.io\/queue-name":"q""#),
        (r#""stage":"eval""#, r#""st\u00e4ge":"eval""#),
        (r#""stage":"eval""#, "\"st\u{e4}ge\":\"eval\""),
        // Escaped values are read unescaped.
        (r#""stage":"eval""#, r#""kueue.x-k8s.io/queue-name":"q\u0031\n""#),
        (r#""name":"llama","namespace""#, r#""name":"ll\"ama","namespace""#),
        // Values the views skip keep their structure checked.
        (r#""generation":3"#, r#""generation":3.5e+2"#),
        (r#""generation":3"#, r#""generation":[1,{"a":[]}]"#),
    ];
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for (find, replace) in edits {
        assert!(original.contains(find), "no {find} in the small review");
        for body in [original.replacen(find, replace, 1), original.replace(find, replace)] {
            match compare(body.as_bytes()) {
                Ok(agreement) => *outcomes.entry(format!("{agreement:?}")).or_default() += 1,
                Err(e) => panic!("{find} → {replace}: {e}"),
            }
        }
    }
    // The table must reach each outcome, or it checks less than it says.
    for outcome in ["Same", "BothRefuse"] {
        assert!(outcomes.contains_key(outcome), "{outcomes:?}");
    }
}
