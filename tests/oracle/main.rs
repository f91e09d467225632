//! Differential tests against upstream's own code: every admission fixture, every TrainJob manifest
//! under tests/data and thousands of generated cases per release go through trainguard and through
//! the oracle of that Trainer release (`e2e/oracle/<tag>`: apiextensions-apiserver on the tag's CRD,
//! and Trainer's JobSet plugin), streamed as JSON lines to one oracle process per release.
//!
//! Each Trainer tag's own example TrainJobs join them on every release ([`examples`]).
//!
//! Compared: the API server's verdict, field paths, each path's cause types, and the messages
//! `validate` means to reproduce, against `validate`'s schema check ([`super::schema`]), and on
//! UPDATE, where the API server admits the write and both objects are
//! unsuspended, Trainer's "the overrides changed" against the webhook's ([`trainguard_core::admission::overrides`]).
//! Generated UPDATEs also carry cluster state (a JobSet, child Jobs, a suspend transition), and
//! the webhook's whole decision is compared with Trainer's overrides verdict on it ([`gate`]).
//! Differences docs/webhook.md lists as deliberate are counted, not failed ([`deliberate`],
//! [`deliberate_cause`], [`RANGE_BEFORE_1_36`]; the gate's only where the generated state
//! justifies them, [`gate`]).
//!
//! The run also fails unless every field of each release's generated types was set to edge
//! values ([`edges`]), every case is compared or counted as skipped by reason in each comparison,
//! and each compared column reaches its floor ([`FLOORS`]); it ends with a per-release table.
//!
//! Run by `make oracle` (built with `--features oracle`; needs the oracles that
//! scripts/oracle/build.sh builds into `TRAINGUARD_ORACLE_DIR`). `TRAINGUARD_ORACLE_CASES` sets the
//! generated cases per release (default 10000).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use trainguard::manifests::{Limits, read_documents};
use trainguard_core::admission::overrides;
use trainguard_core::model::OverridesField;
use trainguard_core::trainer::{TrainerVersion, crd};

mod edges;
mod examples;
mod gate;
mod replay;

struct Case {
    id: String,
    old: Option<Value>,
    new: Value,
    /// The cluster around an UPDATE: its JobSet goes to the oracle ([`gate`]).
    state: Option<gate::State>,
    /// Made by the generator: the floors count these alone (the fixtures' share is fixed).
    generated: bool,
}

/// Why inputs or cases were not compared, with their counts.
type Skips = BTreeMap<&'static str, usize>;

fn skip(skips: &mut Skips, reason: &'static str) {
    *skips.entry(reason).or_default() += 1;
}

#[derive(Debug, serde::Deserialize)]
struct Cause {
    #[serde(rename = "type")]
    kind: String,
    field: String,
    detail: String,
}

#[derive(Debug, serde::Deserialize)]
struct Answer {
    id: String,
    #[serde(default)]
    decode: Option<String>,
    unknown: Vec<String>,
    schema: Vec<Cause>,
    changed: Vec<Cause>,
    /// The plugin's other errors (runtime template consistency), for information.
    #[serde(default)]
    plugin: Vec<Cause>,
    #[serde(default)]
    plugin_error: Option<String>,
}

impl Answer {
    /// The API server refuses the object: it cannot read it, prunes a field (kubectl's strict
    /// field validation refuses that), or reports a schema cause.
    fn refused(&self) -> bool {
        self.decode.is_some() || !self.unknown.is_empty() || !self.schema.is_empty()
    }
}

/// Streams `cases` through the oracle of `version` (one process) and returns its answers in order.
fn ask(dir: &Path, version: TrainerVersion, cases: &[Case]) -> Vec<Answer> {
    let tag = version.tag();
    let mut child = Command::new(dir.join(format!("oracle-{tag}")))
        .arg("serve")
        .arg(dir.join(format!("crd-{tag}.yaml")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("oracle {tag}: {e}"));
    let mut stdin = child.stdin.take().expect("piped");
    let lines: Vec<String> = cases
        .iter()
        .map(|c| {
            json!({"id": c.id, "old": c.old, "new": c.new, "jobset": c.state.as_ref().and_then(|s| s.jobset.as_ref())})
                .to_string()
        })
        .collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").expect("write to the oracle");
        }
    });
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let answers: Vec<Answer> =
        stdout.lines().map(|l| serde_json::from_str(&l.expect("oracle output")).expect("an answer")).collect();
    writer.join().expect("writer");
    assert!(child.wait().expect("oracle exits").success(), "oracle {tag} failed");
    assert_eq!(answers.len(), cases.len(), "oracle {tag} answered every case");
    answers
}

/// A difference docs/webhook.md ("Where `validate` differs from the API server") lists as
/// deliberate, by name; `None` for a difference that fails the test.
fn deliberate(case: &Case, answer: &Answer, tg: &BTreeSet<String>, api: &BTreeSet<String>) -> Option<&'static str> {
    // ObjectMeta checks beyond unknown fields (name syntax, labels, annotations): the webhook's own
    // `name` rule (DNS-1035) covers the name; the rest is not modelled.
    let _ = (case, answer, tg, api);
    None
}

/// trainguard's finding as the API server's cause would say it: path, cause type, rendered body
/// (`Invalid value: "x": detail`), and its detail alone. An API cause trainguard has no match for
/// has an empty `cause`.
struct Said {
    path: String,
    cause: String,
    body: String,
    detail: String,
}

/// A type or message difference docs/webhook.md lists as deliberate, by name; `None` for one
/// that fails the test. `theirs` are the API server's causes at the finding's path.
fn deliberate_cause(version: TrainerVersion, ours: &Said, theirs: &[&Cause]) -> Option<&'static str> {
    let same_type: Vec<&&Cause> = theirs.iter().filter(|c| c.kind == ours.cause).collect();
    let [cause] = same_type.as_slice() else { return None };
    // The k8s.io libraries of v2.0.1's and v2.1.0's oracles (v0.32, v0.34) show a failed rule's
    // value as the schema's type; from v0.36 the value itself, none for an object or a list.
    let old_value = matches!(version, TrainerVersion::V2_0 | TrainerVersion::V2_1)
        && ["string", "integer", "number", "boolean", "object", "array"]
            .iter()
            .any(|ty| cause.detail == format!("Invalid value: \"{ty}\": {}", ours.detail));
    if old_value {
        return Some("a failed rule's value as Kubernetes 1.36 shows it (older API servers show its type)");
    }
    // v0.32 (v2.0.1's) renders a duplicate list-map key with Go's `%#v`; from v0.34 as JSON.
    let go_map = version == TrainerVersion::V2_0
        && ours.body.starts_with("Duplicate value: {")
        && cause.detail.starts_with("Duplicate value: map[string]interface {}{");
    if go_map {
        return Some("a duplicate key as JSON, as Kubernetes 1.34 and later show it (older API servers show a Go map)");
    }
    // A rule CEL cannot evaluate: a value it cannot read under its schema (unchanged, so
    // ratcheted past the type check), a missing member (`self.metadata.name` without a name). The
    // API server says CEL's error, trainguard the rule's message.
    let unevaluated = cause.detail.starts_with("Invalid value: \"")
        && cause.detail.ends_with(&format!(" evaluating rule: {}", ours.detail));
    if unevaluated {
        return Some("a rule CEL cannot evaluate: the rule's message, not CEL's error");
    }
    None
}

/// The API server's causes (`<nil>` as `""`), without the summaries: anyOf's and the "rules were
/// not checked" note repeat a cause already given.
/// A value that fails an `anyOf` (an int-or-string of the wrong type) gets its type error once
/// for the schema and again for the branch: one cause is kept per path and type there.
fn api_causes(answer: &Answer) -> Vec<(String, &Cause)> {
    let any_of: Vec<&str> = answer
        .schema
        .iter()
        .filter_map(|c| c.detail.split_once("\" must validate at least one schema (anyOf)"))
        .filter_map(|(head, _)| head.rsplit_once('"').map(|(_, path)| path))
        .collect();
    let mut causes: Vec<(String, &Cause)> = Vec::new();
    for cause in &answer.schema {
        // On UPDATE, an ObjectMeta error found before the strategy and again in it is listed twice
        // (trainguard lists it once); v0.32 shows Go pointers in it, which differ.
        let same = |c: &Cause| {
            c.kind == cause.kind && c.field == cause.field && unpointed(&c.detail) == unpointed(&cause.detail)
        };
        if causes.iter().any(|(_, c)| same(c)) {
            continue;
        }
        let summary = cause.detail.contains("some validation rules were not checked")
            || cause.detail.contains("must validate at least one schema (anyOf)");
        let path = if cause.field == "<nil>" { String::new() } else { cause.field.clone() };
        let repeated =
            any_of.contains(&path.as_str()) && causes.iter().any(|(p, c)| *p == path && c.kind == cause.kind);
        if !summary && !repeated {
            causes.push((path, cause));
        }
    }
    causes
}

/// `detail` without Go's pointer addresses (`(*bool)(0xc0001)` as `(*bool)(0x)`).
fn unpointed(detail: &str) -> String {
    let mut out = String::with_capacity(detail.len());
    let mut rest = detail;
    while let Some(at) = rest.find("(0x") {
        out.push_str(&rest[..at + 3]);
        rest = rest[at + 3..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// The API server's causes as paths. A rule on the whole object has no field (`<nil>`), like
/// trainguard's (`""`).
fn api_paths(answer: &Answer) -> BTreeSet<String> {
    let mut paths: BTreeSet<String> = answer.unknown.iter().cloned().collect();
    paths.extend(api_causes(answer).into_iter().map(|(path, _)| path));
    paths
}

fn suspended(object: &Value) -> bool {
    object.pointer("/spec/suspend").and_then(Value::as_bool).unwrap_or(false)
}

fn raw(value: Option<&Value>) -> Option<Box<RawValue>> {
    value.map(|v| RawValue::from_string(v.to_string()).expect("JSON"))
}

/// A compared column: over every case, and over the generated ones alone (the floors' base).
#[derive(Debug, Default, Clone, Copy)]
struct Column {
    all: usize,
    generated: usize,
}

impl Column {
    fn add(&mut self, case: &Case, n: usize) {
        self.all += n;
        if case.generated {
            self.generated += n;
        }
    }
}

#[derive(Default)]
struct Tally {
    cases: usize,
    generated: usize,
    /// Cases the API server refused for their metadata (ObjectMeta's own checks).
    metadata_refused: usize,
    changed_compared: Column,
    /// Causes whose error type was compared, and those whose message was too.
    types_compared: Column,
    messages_compared: Column,
    /// Cases whose causes were compared, and those whose verdicts differ (a failure).
    causes_cases: usize,
    verdict_differences: usize,
    /// Cases not compared (wholly or in part), by reason: each reason names the comparisons it
    /// skips before its colon.
    skipped: Skips,
    deliberate: BTreeMap<&'static str, usize>,
    differences: Vec<String>,
}

impl Tally {
    /// The cases of `comparison` (`causes`, `"changed"`) neither compared, nor failed, nor counted
    /// as skipped: none, or a skip went uncounted.
    fn unaccounted(&self, comparison: &str, compared: usize) -> isize {
        let skipped: usize = self.skipped.iter().filter(|(r, _)| skips_comparison(r, comparison)).map(|(_, n)| n).sum();
        self.cases as isize - (compared + skipped + self.verdict_differences) as isize
    }
}

/// Whether a skip reason (`"changed": a CREATE`, `causes and "changed": …`) skips `comparison`.
fn skips_comparison(reason: &str, comparison: &str) -> bool {
    reason.split_once(": ").is_some_and(|(head, _)| head.split(" and ").any(|c| c == comparison))
}

/// Kubernetes 1.36 refuses a number its integer format cannot hold (kube-openapi's range check
/// gets the schema's type and format from then on); the k8s.io libraries of v2.0.1's and v2.1.0's
/// oracles (v0.32, v0.34) do not check it, and `validate` says what 1.36 says on every release.
const RANGE_BEFORE_1_36: &str = "a number past its integer format's range, refused as Kubernetes 1.36 refuses it (older API servers do not check it)";

/// The cause of that range check (`<nil>`: `Checked value must be of type integer with format
/// int32 in spec.x`).
fn is_integer_format(detail: &str) -> bool {
    detail.contains("Checked value must be of type integer")
}

fn compare(version: TrainerVersion, case: &Case, answer: &Answer, tally: &mut Tally) {
    assert_eq!(case.id, answer.id);
    tally.cases += 1;
    tally.generated += usize::from(case.generated);
    let verdict = crd::judge(&case.new, case.old.as_ref(), version);
    // `validate`'s rendering of each finding (after the unknown fields, in the same order): its
    // body, without the path.
    let rendered = trainguard_core::schema::check(&case.new, case.old.as_ref(), version);
    let bodies = rendered.get(verdict.unknown.len()..).unwrap_or_default();
    let mut findings: Vec<(&crd::ApiCause, String)> = verdict
        .errors
        .iter()
        .enumerate()
        .map(|(i, finding)| {
            let body = bodies.get(i).map(|e| e.to_string()).unwrap_or_default();
            (finding, body.split_once(": ").map_or(body.clone(), |(_, b)| b.to_string()))
        })
        .collect();
    if matches!(version, TrainerVersion::V2_0 | TrainerVersion::V2_1) {
        let before = findings.len();
        findings.retain(|(f, _)| f.range_of().is_none());
        if findings.len() < before {
            *tally.deliberate.entry(RANGE_BEFORE_1_36).or_default() += before - findings.len();
        }
    }
    let mut tg: BTreeSet<String> = verdict.unknown.iter().cloned().collect();
    tg.extend(findings.iter().map(|(f, _)| f.path.clone()));
    let api = if answer.decode.is_some() { BTreeSet::new() } else { api_paths(answer) };
    let api_denies = answer.refused();
    if answer.schema.iter().any(|c| c.field.starts_with("metadata.")) {
        tally.metadata_refused += 1;
    }
    let tg_denies = !tg.is_empty();
    // A body the API server cannot read at all: only the verdict is compared.
    let agree = tg_denies == api_denies && (answer.decode.is_some() || tg == api);
    if !agree {
        match deliberate(case, answer, &tg, &api) {
            Some(name) => {
                *tally.deliberate.entry(name).or_default() += 1;
                skip(&mut tally.skipped, "causes and \"changed\": the verdicts differ as docs/webhook.md lists");
            }
            None => {
                tally.verdict_differences += 1;
                let shown: Vec<String> =
                    answer.schema.iter().map(|c| format!("{} {}: {}", c.kind, c.field, c.detail)).collect();
                let ours: Vec<String> = findings.iter().map(|(f, _)| format!("{} {}", f.path, f.detail)).collect();
                tally.differences.push(format!(
                    "{} [{}]: trainguard {tg:?}, API server {api:?} {}\n  API server: {shown:?}\n  trainguard: {ours:?}\n  old: {}\n  new: {}",
                    case.id,
                    version.name(),
                    answer.decode.as_deref().unwrap_or(""),
                    case.old.as_ref().map_or("-".to_string(), Value::to_string),
                    case.new
                ));
            }
        }
        return;
    }
    if answer.decode.is_some() {
        skip(&mut tally.skipped, "causes: the API server cannot decode the object (the verdict alone is compared)");
    } else {
        tally.causes_cases += 1;
        compare_causes(version, case, answer, &findings, tally);
    }
    let Some(old) = &case.old else {
        skip(&mut tally.skipped, "\"changed\": a CREATE");
        return;
    };
    if answer.refused() {
        skip(&mut tally.skipped, "\"changed\": the API server refuses the write");
        return;
    }
    if answer.plugin_error.is_some() {
        skip(&mut tally.skipped, "\"changed\": Trainer cannot decode the objects");
        return;
    }
    if suspended(old) || suspended(&case.new) {
        skip(&mut tally.skipped, "\"changed\": suspended (the gate compares the decision)");
        return;
    }
    tally.changed_compared.add(case, 1);
    let field = version.overrides();
    let (old_admitted, new_admitted) = (crd::admitted(old, version), crd::admitted(&case.new, version));
    let pointer = format!("/spec/{}", field.json_name());
    let (o, n) = (raw(old_admitted.pointer(&pointer)), raw(new_admitted.pointer(&pointer)));
    let ours = overrides::changed(field, o.as_deref(), n.as_deref());
    let theirs = !answer.changed.is_empty();
    if ours != theirs {
        tally.differences.push(format!(
            "{} [{}]: changed: trainguard {ours}, Trainer {theirs} ({:?})\n  old: {}\n  new: {}",
            case.id,
            version.name(),
            answer.changed.iter().map(|c| &c.detail).collect::<Vec<_>>(),
            old,
            case.new
        ));
    }
}

/// With the same paths: the error type of each cause (as multisets of path and type), and the
/// message where trainguard reproduces the API server's wording — a CRD rule's message, an enum's
/// supported values, a length, a count, a duplicate, an integer's format range. `findings` are
/// trainguard's, each with `validate`'s body.
fn compare_causes(
    version: TrainerVersion,
    case: &Case,
    answer: &Answer,
    findings: &[(&crd::ApiCause, String)],
    tally: &mut Tally,
) {
    let theirs = api_causes(answer);
    let mut unmatched: Vec<(String, &Cause)> = theirs.clone();
    let mut problems: Vec<(Said, Vec<&Cause>)> = Vec::new();
    for (finding, body) in findings {
        let ours = Said {
            path: finding.path.clone(),
            cause: finding.kind().cause_type().to_string(),
            body: body.clone(),
            detail: finding.detail.clone(),
        };
        let at: Vec<&Cause> = theirs.iter().filter(|(p, _)| *p == ours.path).map(|(_, c)| *c).collect();
        let wording = finding.from_rule()
            || finding.range_of().is_some()
            || matches!(
                finding.kind(),
                crd::Kind::NotSupported | crd::Kind::TooLong | crd::Kind::TooMany | crd::Kind::Duplicate
            );
        // Several causes may share a path and a type (range checks all have none): the one with
        // the same words first.
        let same = |(p, c): &(String, &Cause)| *p == ours.path && c.kind == ours.cause;
        let slot = unmatched
            .iter()
            .position(|u| same(u) && (!wording || u.1.detail == ours.body))
            .or_else(|| unmatched.iter().position(same));
        let Some(slot) = slot else {
            problems.push((ours, at));
            continue;
        };
        let (_, cause) = unmatched.remove(slot);
        tally.types_compared.add(case, 1);
        if wording {
            tally.messages_compared.add(case, 1);
            if cause.detail != ours.body {
                problems.push((ours, vec![cause]));
            }
        }
    }
    for (path, cause) in unmatched {
        let ours = Said { path, cause: String::new(), body: String::new(), detail: String::new() };
        problems.push((ours, vec![cause]));
    }
    for (ours, at) in problems {
        match deliberate_cause(version, &ours, &at) {
            Some(name) => *tally.deliberate.entry(name).or_default() += 1,
            None => {
                let shown: Vec<String> = at.iter().map(|c| format!("{} {}", c.kind, c.detail)).collect();
                tally.differences.push(format!(
                    "{} [{}]: at {:?}: trainguard {} {:?}, API server {shown:?}\n  old: {}\n  new: {}",
                    case.id,
                    version.name(),
                    ours.path,
                    ours.cause,
                    ours.body,
                    case.old.as_ref().map_or("-".to_string(), Value::to_string),
                    case.new
                ));
            }
        }
    }
}

/// The TrainJobs of the admission fixtures (object, and oldObject on UPDATE), and the fixtures
/// that have none, by reason.
fn fixture_cases() -> (Vec<Case>, Skips) {
    let mut cases = Vec::new();
    let mut skips = Skips::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/admission");
    let mut files: Vec<PathBuf> =
        walk(&root).into_iter().filter(|p| p.to_string_lossy().ends_with(".review.json")).collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("fixture");
        let Ok(review) = serde_json::from_str::<Value>(&text) else {
            skip(&mut skips, "input: a fixture that is not JSON");
            continue;
        };
        let request = &review["request"];
        let Some(new) = request.get("object").filter(|o| o["kind"] == "TrainJob") else {
            skip(&mut skips, "input: a fixture with no TrainJob object (DELETE, another kind)");
            continue;
        };
        if request["subResource"].is_string() {
            skip(&mut skips, "input: a fixture of a subresource");
            continue;
        }
        let old = request.get("oldObject").filter(|o| o.is_object()).cloned();
        let id = format!("fixture {}", file.display());
        cases.push(Case { id, old, new: new.clone(), state: None, generated: false });
    }
    (cases, skips)
}

/// The TrainJobs of a manifest file, in document order: what `validate` checks as a TrainJob
/// (other API versions are near misses).
fn trainjobs_in(path: &Path) -> Result<Vec<Value>, String> {
    let documents = read_documents(&[path.to_path_buf()], &Limits::default()).map_err(|e| e.to_string())?;
    Ok(documents
        .into_iter()
        .filter(|d| d.kind() == "TrainJob" && d.api_version() == "trainer.kubeflow.org/v1alpha1")
        .map(|d| d.value)
        .collect())
}

/// Every TrainJob manifest under tests/data (CREATE), and the `old.yaml`/`new.yaml` pairs (UPDATE);
/// the files `validate` cannot read are counted.
fn manifest_cases() -> (Vec<Case>, Skips) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> =
        walk(&root).into_iter().filter(|p| trainguard::manifests::is_manifest_path(p)).collect();
    files.sort();
    // A file `validate` cannot read (tests/data has some on purpose) has no case.
    let trainjobs = |path: &Path| trainjobs_in(path).unwrap_or_default();
    let mut cases = Vec::new();
    let mut skips = Skips::new();
    for file in &files {
        if trainjobs_in(file).is_err() {
            skip(&mut skips, "input: a manifest file validate cannot read");
        }
        for (i, new) in trainjobs(file).into_iter().enumerate() {
            let id = format!("manifest {}#{i}", file.display());
            cases.push(Case { id, old: None, new, state: None, generated: false });
        }
        if file.file_name().is_some_and(|n| n == "new.yaml") {
            let old_file = file.with_file_name("old.yaml");
            let olds = trainjobs(&old_file);
            for (i, new) in trainjobs(file).into_iter().enumerate() {
                let old = olds.iter().find(|o| o["metadata"]["name"] == new["metadata"]["name"]).cloned();
                if old.is_some() {
                    let id = format!("manifest {} (update)#{i}", file.display());
                    cases.push(Case { id, old, new, state: None, generated: false });
                }
            }
        }
    }
    (cases, skips)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A seeded source of choices.
struct Gen {
    rng: TestRng,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    fn quantity(&mut self) -> Value {
        self.pick(&[
            json!("1"),
            json!(1),
            json!("1000m"),
            json!("500m"),
            json!("0.5"),
            json!("1n"),
            json!("0.5n"),
            json!("1Gi"),
            json!("1024Mi"),
            json!("8Ei"),
            json!("16Ei"),
            json!("1e3"),
            json!("1k"),
            json!(0.5),
            json!(2.0),
            json!("lots"),
            json!(""),
        ])
    }

    fn env(&mut self) -> Value {
        let mut list = Vec::new();
        for _ in 0..self.below(3) {
            let name = self.pick(&["A", "B", "A"]);
            let mut e = json!({"name": name});
            if self.chance(60) {
                e["value"] = json!(self.pick(&["x", "", "y"]));
            }
            if self.chance(10) {
                e["valueFrom"] = json!({"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k"}});
            }
            if self.chance(10) {
                e["valueFrom"] = json!({"fieldRef": {"fieldPath": "metadata.name"}});
            }
            list.push(e);
        }
        Value::Array(list)
    }

    /// A pod-level override body, with the members `version`'s override type may have, and now
    /// and then a member it does not have.
    fn pod(&mut self, version: TrainerVersion) -> Value {
        let mut pod = serde_json::Map::new();
        if self.chance(40) {
            pod.insert(
                "nodeSelector".into(),
                self.pick(&[json!({}), json!({"zone": "a"}), json!({"zone": "b"}), json!(null)]),
            );
        }
        if self.chance(40) {
            let mut t = json!({"key": self.pick(&["k", "gpu"]), "operator": self.pick(&["Exists", "Equal"])});
            if self.chance(50) {
                t["tolerationSeconds"] = self.pick(&[json!(0), json!(30), json!("soon"), json!(null)]);
            }
            if self.chance(30) {
                t["value"] = json!("");
            }
            if self.chance(20) {
                t["effect"] = self.pick(&[json!("NoSchedule"), json!("Sometimes")]);
            }
            pod.insert("tolerations".into(), json!([t]));
        }
        if self.chance(30) {
            pod.insert(
                "schedulingGates".into(),
                self.pick(&[json!([{"name": "g"}]), json!([]), json!([{"name": "g"}, {"name": "g"}])]),
            );
        }
        if self.chance(25) {
            pod.insert("serviceAccountName".into(), self.pick(&[json!(""), json!("sa"), json!(null)]));
        }
        if self.chance(30) {
            let mut v = json!({"name": self.pick(&["data", "cache", ""])});
            match self.below(4) {
                0 => v["emptyDir"] = json!({}),
                1 => v["emptyDir"] = json!({"sizeLimit": self.quantity()}),
                2 => v["downwardAPI"] = json!({}),
                _ => {}
            }
            pod.insert("volumes".into(), json!([v]));
        }
        if self.chance(30) {
            let mut c = json!({"name": self.pick(&["node", "sidecar"])});
            if self.chance(50) {
                c["env"] = self.env();
            }
            if self.chance(30) {
                c["volumeMounts"] = json!([{"name": "data", "mountPath": self.pick(&["/d", ""])}]);
            }
            if self.chance(15) {
                c["resources"] = json!({"limits": {"cpu": self.quantity()}});
            }
            if self.chance(15) {
                c["securityContext"] = self.pick(&[json!({}), json!({"runAsUser": 1})]);
            }
            pod.insert(self.pick(&["containers", "initContainers"]).into(), json!([c]));
        }
        if version >= TrainerVersion::V2_1 && self.chance(25) {
            pod.insert(
                "affinity".into(),
                self.pick(&[json!({}), json!({"nodeAffinity": {}}), json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k", "labelSelector": {}}]}})]),
            );
        }
        if version >= TrainerVersion::V2_1 && self.chance(15) {
            pod.insert("imagePullSecrets".into(), self.pick(&[json!([{"name": "r"}]), json!([{}]), json!([])]));
        }
        if version >= TrainerVersion::V2_2 && self.chance(15) {
            pod.insert("securityContext".into(), self.pick(&[json!({}), json!({"runAsNonRoot": true})]));
        }
        if self.chance(15) {
            pod.insert("terminationGracePeriodSeconds".into(), self.pick(&[json!(0), json!(30), json!(-1)]));
        }
        if self.chance(8) {
            pod.insert("priorityClassName".into(), json!("high"));
        }
        Value::Object(pod)
    }

    fn overrides(&mut self, version: TrainerVersion) -> Value {
        let mut items = Vec::new();
        let count = if self.chance(3) { 17 } else { self.below(3) };
        for i in 0..count {
            let pod = self.pod(version);
            let target = self.pick(&["node", "dataset-initializer"]);
            items.push(match version.overrides() {
                OverridesField::PodSpecOverrides => {
                    let mut item = pod;
                    item["targetJobs"] = self.pick(&[json!([{"name": target}]), json!([]), json!([{"name": ""}])]);
                    item
                }
                OverridesField::PodTemplateOverrides => {
                    let mut item = json!({"targetJobs": [{"name": target}]});
                    if self.chance(70) {
                        item["spec"] = pod;
                    }
                    if self.chance(30) {
                        item["metadata"] =
                            self.pick(&[json!({}), json!({"labels": {"a": "b"}}), json!({"annotations": {"x": "y"}})]);
                    }
                    item
                }
                OverridesField::RuntimePatches => {
                    let manager = if count == 17 {
                        format!("example.com/m{i}")
                    } else {
                        self.pick(&["kueue.x-k8s.io/kueue", "example.com/ctl", "kueue.x-k8s.io/kueue", ""]).to_string()
                    };
                    let mut item = json!({"manager": manager});
                    if self.chance(30) {
                        item["time"] = self.pick(&[
                            json!("2026-01-01T00:00:00Z"),
                            json!("2026-01-01 00:00:00Z"),
                            json!("2026-01-01T00:00:60Z"),
                            json!("2026-01-01T00:00:00.1234567890Z"),
                            json!("2026-01-01t00:00:00z"),
                        ]);
                    }
                    if self.chance(80) {
                        let mut rjob = json!({"name": target});
                        if self.chance(85) {
                            rjob["template"] = json!({"spec": {"template": {"spec": pod}}});
                            if self.chance(15) {
                                rjob["template"]["metadata"] = json!({"labels": {"a": "b"}});
                            }
                        }
                        if self.chance(5) {
                            rjob["replicas"] = json!(2);
                        }
                        item["trainingRuntimeSpec"] = json!({"template": {"spec": {"replicatedJobs": [rjob]}}});
                    } else if self.chance(50) {
                        item["trainingRuntimeSpec"] = json!({});
                    }
                    if self.chance(5) {
                        item["futureMember"] = json!({"a": 1});
                    }
                    item
                }
            });
        }
        Value::Array(items)
    }

    fn spec(&mut self, version: TrainerVersion) -> Value {
        let mut spec = json!({"runtimeRef": {"name": self.pick(&["torch", "torch", ""])}});
        if self.chance(40) {
            let mut trainer = json!({});
            if self.chance(50) {
                trainer["image"] =
                    if self.chance(5) { json!("x".repeat(501)) } else { json!(self.pick(&["img:1", "img:2"])) };
            }
            if self.chance(30) {
                trainer["numNodes"] = self.pick(&[json!(1), json!(2), json!(1.0), json!(1.5), json!("2"), json!(0)]);
            }
            if self.chance(25) {
                trainer["numProcPerNode"] = self.pick(&[json!(1), json!("auto"), json!(8), json!(0)]);
            }
            if self.chance(25) {
                trainer["resourcesPerNode"] = json!({"limits": {"cpu": self.quantity()}});
            }
            if self.chance(25) {
                trainer["env"] = self.env();
            }
            if self.chance(15) {
                trainer["command"] = self.pick(&[json!(["torchrun"]), json!("torchrun"), json!([null])]);
            }
            spec["trainer"] = trainer;
        }
        if self.chance(20) {
            spec["initializer"] = json!({"dataset": {"storageUri": self.pick(&["hf://d", "abc", "", "s3://b/k"])}});
        }
        if self.chance(15) {
            spec["activeDeadlineSeconds"] = self.pick(&[json!(60), json!(0), json!(3600)]);
        }
        if self.chance(15) {
            spec["managedBy"] = self.pick(&[
                json!("kueue.x-k8s.io/multikueue"),
                json!("kueue"),
                json!(""),
                json!("trainer.kubeflow.org/trainjob-controller"),
            ]);
        }
        if self.chance(10) {
            spec["labels"] = json!({"a": "b"});
        }
        if self.chance(5) {
            spec["unknownTop"] = json!(1);
        }
        let field = version.overrides().json_name();
        if self.chance(80) {
            spec[field] = self.overrides(version);
        }
        if self.chance(3) {
            // The overrides field of another release.
            let other = self.pick(&["podSpecOverrides", "podTemplateOverrides", "runtimePatches"]);
            spec[other] = json!([]);
        }
        spec
    }

    fn object(&mut self, spec: Value) -> Value {
        let metadata = self.metadata();
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata, "spec": spec})
    }

    /// Metadata that ObjectMeta's own checks pass now and then refuse: names, label and
    /// annotation keys and values, finalizers, owner references and managed fields.
    fn metadata(&mut self) -> Value {
        let mut metadata = json!({"name": "job", "namespace": "ns"});
        if self.chance(3) {
            metadata["lables"] = json!({"a": "b"});
        }
        if self.chance(4) {
            metadata["name"] = self.pick(&[json!("Job_1"), json!("a.b-c"), json!("x".repeat(254)), json!("job.")]);
        }
        if self.chance(2) {
            metadata["namespace"] = self.pick(&[json!("a.b"), json!("NS"), json!("")]);
        }
        if self.chance(3) {
            metadata["generateName"] = self.pick(&[json!("job-"), json!("Job-"), json!("-")]);
            if self.chance(50) {
                metadata["name"] = json!("");
            }
        }
        if self.chance(8) {
            let key = self.pick(&["app", "example.com/tier", "a/b/c", "-a", "/a", "Ex.com/a", "k8s.io/", "x.y/Name_1"]);
            let value = self.pick(&[json!("x"), json!(""), json!("has space"), json!("v".repeat(64)), json!("a_b.c")]);
            metadata["labels"] = json!({ key: value });
        }
        if self.chance(6) {
            let key = self.pick(&["Example.COM/Note", "a b", "note", "a/b/c"]);
            metadata["annotations"] = json!({ key: "any text" });
        }
        if self.chance(5) {
            metadata["finalizers"] = self.pick(&[
                json!(["example.com/cleanup"]),
                json!(["bad finalizer"]),
                json!(["orphan", "foregroundDeletion"]),
                json!(["orphan"]),
            ]);
        }
        if self.chance(4) {
            let mut owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"});
            match self.below(5) {
                0 => owner["apiVersion"] = json!("example.com/"),
                1 => owner["kind"] = json!(""),
                2 => owner["kind"] = json!("Event"),
                3 => owner["controller"] = json!(true),
                _ => {}
            }
            let mut owners = vec![owner];
            if self.chance(40) {
                owners.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u2", "controller": true}));
            }
            metadata["ownerReferences"] = Value::Array(owners);
        }
        if self.chance(2) {
            metadata["managedFields"] = json!([{
                "manager": "m",
                "operation": self.pick(&["Update", "Patch"]),
                "fieldsType": self.pick(&["FieldsV1", "FieldsV2"]),
            }]);
        }
        metadata
    }

    /// An edit of `metadata` that UPDATE's checks see: a new uid or timestamp, a new label, a
    /// finalizer added while the object is being deleted.
    fn edit_metadata(&mut self, old: &mut Value, new: &mut Value) {
        match self.below(6) {
            0 => new["metadata"]["uid"] = json!("other-uid"),
            1 => new["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z"),
            2 => new["metadata"]["labels"] = json!({"a": self.pick(&["ok", "not ok"])}),
            3 => {
                old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                old["metadata"]["finalizers"] = json!(["example.com/a"]);
                new["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                new["metadata"]["finalizers"] =
                    self.pick(&[json!(["example.com/a"]), json!(["example.com/a", "example.com/b"]), json!([])]);
            }
            4 => new["metadata"]["generation"] = json!(-1),
            _ => new["metadata"]["deletionGracePeriodSeconds"] = json!(30),
        }
    }

    /// An edit of `spec`: the kind of change a controller or a person makes.
    fn edit(&mut self, version: TrainerVersion, spec: &Value) -> Value {
        let mut spec = spec.clone();
        let field = version.overrides().json_name();
        for _ in 0..=self.below(2) {
            match self.below(9) {
                0 => spec[field] = self.overrides(version),
                1 => {
                    if let Some(items) = spec[field].as_array_mut() {
                        items.reverse();
                    }
                }
                2 => {
                    if let Some(items) = spec[field].as_array_mut()
                        && let Some(first) = items.first_mut()
                    {
                        let pod = self.pod(version);
                        match version.overrides() {
                            OverridesField::PodSpecOverrides => {
                                let targets = first["targetJobs"].clone();
                                *first = pod;
                                first["targetJobs"] = targets;
                            }
                            OverridesField::PodTemplateOverrides => first["spec"] = pod,
                            OverridesField::RuntimePatches => {
                                first["trainingRuntimeSpec"] = json!({"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}})
                            }
                        }
                    }
                }
                3 => {
                    if let Some(items) = spec[field].as_array_mut()
                        && let Some(first) = items.first_mut()
                        && version >= TrainerVersion::V2_2
                    {
                        first["time"] = json!("2027-06-01T00:00:00Z");
                    }
                }
                4 => spec["trainer"] = json!({"image": self.pick(&["img:1", "img:3"])}),
                5 => spec["initializer"] = json!({"model": {"storageUri": "hf://m"}}),
                6 => spec["activeDeadlineSeconds"] = self.pick(&[json!(60), json!(120)]),
                7 => spec["suspend"] = self.pick(&[json!(true), json!(false), json!(null)]),
                _ => {
                    if let Some(items) = spec[field].as_array_mut()
                        && let Some(first) = items.first_mut()
                    {
                        first["futureMember"] = json!(self.below(3));
                    }
                }
            }
        }
        spec
    }
}

/// A field set to an edge value on a generated case: (case index, on the old object, where).
type Varied = (usize, bool, edges::Variation);

/// `count` generated cases for `version`: a third CREATEs, the rest UPDATEs of a generated object.
/// Each CREATE also sets three fields of the release's types to edge values ([`edges`]), and one
/// UPDATE in four one field, on the new object and half the time on the old one too (an unchanged
/// value ratchets): 1,000 cases vary 1,169 fields, more than any release has. Most edge values are
/// refused, so the other UPDATEs keep the generator's own values for "changed" and the gate.
fn generated_cases(version: TrainerVersion, count: usize, edges: &mut edges::Edges) -> (Vec<Case>, Vec<Varied>) {
    let mut seed = [0u8; 32];
    seed[..4].copy_from_slice(&(version.index() as u32 + 36).to_le_bytes());
    let mut g = Gen { rng: TestRng::from_seed(RngAlgorithm::ChaCha, &seed) };
    // The edges' own source of choices: the objects stay those of the generator's seed.
    seed[..4].copy_from_slice(&(version.index() as u32 + 99).to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
    let mut varied = Vec::new();
    let cases = (0..count)
        .map(|i| {
            let spec = g.spec(version);
            let id = format!("generated {}#{i}", version.name());
            let mut case = if i % 3 == 0 {
                Case { id, old: None, new: g.object(spec), state: None, generated: true }
            } else {
                let mut old = g.object(spec.clone());
                let mut new = old.clone();
                new["spec"] = g.edit(version, &spec);
                if g.chance(5) {
                    g.edit_metadata(&mut old, &mut new);
                }
                Case { id, old: Some(old), new, state: None, generated: true }
            };
            let fields = match case.old {
                None => 3,
                Some(_) if i % 4 == 1 => 1,
                Some(_) => 0,
            };
            let mut taken = Vec::new();
            for _ in 0..fields {
                let variation = edges.vary(&mut case.new["spec"], &taken);
                taken.push(variation.field);
                if let Some(old) = case.old.as_mut()
                    && rng.next_u64().is_multiple_of(2)
                {
                    varied.push((i, true, edges.again(&mut old["spec"], &variation)));
                }
                varied.push((i, false, variation));
            }
            case
        })
        .collect();
    (cases, varied)
}

/// Where scripts/oracle/build.sh put the oracles, their CRDs and the tags' examples.
fn oracle_dir() -> PathBuf {
    let Some(dir) = std::env::var_os("TRAINGUARD_ORACLE_DIR").map(PathBuf::from) else {
        panic!("TRAINGUARD_ORACLE_DIR is not set: run `make oracle`");
    };
    dir
}

/// The least each compared column must reach per release, as a fraction of
/// `TRAINGUARD_ORACLE_CASES`: (column, fraction for v2.0.1, v2.1.0, v2.2.1, v2.3.0). Generated
/// cases alone count, and a floor is at least 1, so a run with no generated case fails. About
/// three quarters of what a 10,000-case run compares (its seeds are fixed): 15,437, 17,276, 23,423
/// and 23,926 causes by type; 750, 1,011, 3,191 and 3,098 by message; "changed" on 1,034, 1,125,
/// 881 and 915; 1,736, 1,897, 1,515 and 1,537 gate decisions.
const FLOORS: [(&str, [f64; 4]); 4] = [
    ("causes compared by type", [1.15, 1.29, 1.75, 1.79]),
    ("causes compared by message", [0.056, 0.075, 0.23, 0.23]),
    ("\"changed\" compared", [0.077, 0.084, 0.066, 0.068]),
    ("gate decisions compared", [0.13, 0.14, 0.11, 0.11]),
];

fn floor(fraction: f64, count: usize) -> usize {
    // Rounded first: 0.14 × 10,000 is 1,400.0000000000002 in floating point.
    ((fraction * count as f64 * 1e6).round() / 1e6).ceil().max(1.0) as usize
}

/// The per-release summary printed at the end: rows in order of first use, one column per release.
#[derive(Default)]
struct Table {
    rows: Vec<String>,
    cells: BTreeMap<(String, usize), String>,
}

impl Table {
    fn set(&mut self, row: &str, column: usize, value: impl ToString) {
        if !self.rows.iter().any(|r| r == row) {
            self.rows.push(row.to_string());
        }
        self.cells.insert((row.to_string(), column), value.to_string());
    }

    fn print(&self, columns: &[&str]) {
        let width = self.rows.iter().map(|r| r.chars().count()).max().unwrap_or(0);
        let cell = |row: &str, i: usize| self.cells.get(&(row.to_string(), i)).cloned().unwrap_or_else(|| "-".into());
        let widths: Vec<usize> = (0..columns.len())
            .map(|i| self.rows.iter().map(|r| cell(r, i).len()).chain([columns[i].len()]).max().unwrap_or(0))
            .collect();
        let mut out = format!("{:width$}", "");
        for (c, w) in columns.iter().zip(&widths) {
            out.push_str(&format!("  {c:>w$}"));
        }
        eprintln!("{out}");
        for row in &self.rows {
            let mut line = format!("{row:width$}");
            for (i, w) in widths.iter().enumerate() {
                line.push_str(&format!("  {:>w$}", cell(row, i)));
            }
            eprintln!("{line}");
        }
    }
}

#[test]
fn trainguard_agrees_with_upstream() {
    let dir = oracle_dir();
    let count: usize = std::env::var("TRAINGUARD_ORACLE_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let mut failed = Vec::new();
    let mut table = Table::default();
    let tags: Vec<&str> = TrainerVersion::ALL.iter().map(|v| v.tag()).collect();
    for (column, version) in TrainerVersion::ALL.into_iter().enumerate() {
        let tag = version.tag();
        if !dir.join(format!("oracle-{tag}")).exists() {
            failed.push(format!("{tag}: no oracle in {}", dir.display()));
            continue;
        }
        let (mut cases, mut inputs) = fixture_cases();
        let (manifests, unreadable) = manifest_cases();
        cases.extend(manifests);
        inputs.extend(unreadable);
        cases.extend(examples::cases(&dir));
        let fixed = cases.len();
        let mut edges = edges::Edges::new(version);
        let (generated, varied) = generated_cases(version, count, &mut edges);
        cases.extend(generated);
        gate::add_state(version, &mut cases[fixed..]);
        let varied: Vec<Varied> = varied.into_iter().map(|(i, old, v)| (fixed + i, old, v)).collect();
        let coverage = edges::coverage(&edges, &varied, &cases);
        let started = std::time::Instant::now();
        let answers = ask(&dir, version, &cases);
        replay::write(&dir, tag, &cases[fixed..], &answers[fixed..]);
        let mut tally = Tally::default();
        let mut gate_tally = gate::Tally::default();
        for (case, answer) in cases.iter().zip(&answers) {
            compare(version, case, answer, &mut tally);
            gate::compare(version, case, answer, &mut gate_tally);
        }
        eprintln!(
            "oracle {tag}: {} cases ({fixed} fixtures, manifests and examples, {count} generated), {} refused for their \
             metadata, causes compared by type {}, by message {}, \"changed\" compared on {}, deliberate differences \
             {:?}, other differences {}, {:.1} s",
            tally.cases,
            tally.metadata_refused,
            tally.types_compared.all,
            tally.messages_compared.all,
            tally.changed_compared.all,
            tally.deliberate,
            tally.differences.len(),
            started.elapsed().as_secs_f64()
        );
        for d in tally.differences.iter().take(25) {
            eprintln!("  {d}");
        }
        if !tally.differences.is_empty() {
            failed.push(format!("{tag}: {} differences", tally.differences.len()));
        }
        gate_tally.report(tag);
        if !gate_tally.differences.is_empty() {
            failed.push(format!("{tag}: {} gate differences", gate_tally.differences.len()));
        }

        table.set("cases", column, tally.cases);
        table.set("  generated", column, tally.generated);
        let columns = [tally.types_compared, tally.messages_compared, tally.changed_compared, gate_tally.compared];
        for ((name, fractions), compared) in FLOORS.iter().zip(columns) {
            // A release not yet measured is held to the lowest floor of the others.
            let fraction =
                fractions.get(column).copied().unwrap_or_else(|| fractions.iter().copied().fold(f64::MAX, f64::min));
            let least = floor(fraction, count);
            table.set(&format!("{name} (generated; floor)"), column, format!("{} (≥ {least})", compared.generated));
            table.set(&format!("{name} (all)"), column, compared.all);
            if compared.generated < least {
                failed.push(format!(
                    "{tag}: {name}: {} on generated cases, below the floor of {least}",
                    compared.generated
                ));
            }
        }
        // Every case is compared, failed or counted as skipped, in each comparison.
        let accounts = [
            ("causes", tally.unaccounted("causes", tally.causes_cases)),
            ("\"changed\"", tally.unaccounted("\"changed\"", tally.changed_compared.all)),
            ("gate", gate_tally.unaccounted(tally.cases)),
        ];
        for (comparison, n) in accounts {
            if n != 0 {
                failed.push(format!("{tag}: {comparison}: {n} cases neither compared, failed nor counted as skipped"));
            }
        }
        for (reason, n) in inputs.iter().chain(&tally.skipped).chain(&gate_tally.skipped) {
            table.set(&format!("skipped: {reason}"), column, n);
        }
        table.set("fields of the types varied", column, format!("{}/{}", coverage.varied, coverage.fields));
        if !coverage.missing.is_empty() {
            failed.push(format!(
                "{tag}: {} of {} fields never varied, e.g. {:?}",
                coverage.missing.len(),
                coverage.fields,
                &coverage.missing[..coverage.missing.len().min(5)]
            ));
        }
        for (name, n) in &tally.deliberate {
            table.set(&format!("tolerated: {name}"), column, n);
        }
        for (name, n) in &gate_tally.deliberate {
            table.set(&format!("tolerated: gate: trainguard's own {name}"), column, n);
        }
        table.set("tolerated: gate: shape rule where Trainer has no such check", column, gate_tally.shape_beyond);
    }
    eprintln!("oracle summary ({count} generated cases per release):");
    table.print(&tags);
    assert!(failed.is_empty(), "{failed:?}");
}
