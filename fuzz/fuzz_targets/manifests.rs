//! Bytes → `trainguard::manifests::parse` (the reader behind `trainguard validate`, `review
//! --state` and `plan --snapshot`) as YAML, as JSON and sniffed; then every TrainJob it finds goes
//! through `admission::review` as a CREATE, as `validate` does. Checks: no panic, no runaway
//! time or memory (libFuzzer's -timeout and -rss_limit_mb), errors that name the file with a
//! position inside it, documents whose lines are inside the file and whose nesting respects the
//! depth limit, and the review properties of crates/test-support/src/fuzz.rs.
#![no_main]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a fuzz target: a panic is its failure report")]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use trainguard_core::admission::{Endpoint, RulesConfig};
use trainguard::cluster::Offline;
use trainguard::manifests::{Format, Limits, ManifestError, parse};

use trainguard_test_support::fuzz as review_check;

const SOURCE: &str = "fuzz/input.yaml";

/// Known deviation, reported to the lead: for an error at a newline inside a JSON string,
/// serde_json reports column 0, and `ManifestError::Json` passes it on although positions are
/// documented as 1-based (found by this target; input: a JSON string broken by a raw newline).
/// Set to false once the reader clamps it.
const TOLERATE_JSON_COLUMN_ZERO: bool = false;

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn check_error(error: &ManifestError, lines: usize, format: Format) {
    let message = error.to_string();
    assert!(message.starts_with(SOURCE), "{format:?}: error does not name the file: {message}");
    assert_eq!(error.source_name(), Some(SOURCE), "{format:?}: {message}");
    if let Some((line, column)) = error.position() {
        assert!(line >= 1 && line <= lines + 1, "{format:?}: line {line} of {lines}: {message}");
        let json_column_zero = TOLERATE_JSON_COLUMN_ZERO && matches!(error, ManifestError::Json { .. }) && column == 0;
        assert!(column >= 1 || json_column_zero, "{format:?}: column {column}: {message}");
    }
}

fuzz_target!(|bytes: &[u8]| {
    let limits = Limits::default();
    // YAML also breaks lines at a lone CR (serde_json does not), so count both kinds.
    let lone_crs =
        bytes.windows(2).filter(|w| w[0] == b'\r' && w[1] != b'\n').count() + usize::from(bytes.last() == Some(&b'\r'));
    let lines = bytes.iter().filter(|b| **b == b'\n').count() + lone_crs + 1;
    for format in [Format::Yaml, Format::Json, Format::Sniff] {
        let documents = match parse(SOURCE, bytes, format, &limits) {
            Ok(documents) => documents,
            Err(error) => {
                check_error(&error, lines, format);
                continue;
            }
        };
        for doc in &documents {
            assert_eq!(doc.source, SOURCE);
            assert!(doc.line >= 1 && doc.line <= lines + 1, "{format:?}: document at line {} of {lines}", doc.line);
            // A List's items sit one level below the depth that was checked.
            assert!(depth(&doc.value) <= limits.max_depth + 1, "{format:?}: nesting {} passed", depth(&doc.value));
            if doc.group() == "trainer.kubeflow.org" && doc.kind() == "TrainJob" {
                let review = json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {
                        "uid": "fuzz",
                        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
                        "operation": "CREATE",
                        "namespace": doc.namespace().unwrap_or("default"),
                        "name": doc.name().unwrap_or(""),
                        "object": doc.value,
                    },
                });
                let body = serde_json::to_vec(&review).expect("a parsed document serialises");
                for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                    if let Err(problem) = review_check::check(endpoint, &body, &RulesConfig::default(), &Offline) {
                        panic!("{format:?} {endpoint:?}: {problem}");
                    }
                }
            }
        }
    }
});
