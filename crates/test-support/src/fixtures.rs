//! The admission fixtures (`fixtures/admission/**`, `fixtures/bench/`), loaded for tests.
//!
//! Each case is `<name>.review.json` (the request body), `<name>.expect.json` (the verdict) and,
//! for a known cluster, `<name>.state.json` (a `v1 List` of JobSets and Jobs). Use:
//!
//! ```ignore
//! mod common;
//! for case in common::load_cases() {
//!     let outcome = case.run();                       // or send case.review over HTTPS
//!     let problems = common::check_verdict(&case, &common::Observed::from_core(&outcome));
//!     assert!(problems.is_empty(), "{}: {problems:?}", case.name);
//! }
//! ```
//!
//! [`Observed`] abstracts over where the answer came from (the pure core, the server over TLS,
//! the CLI), so every shell can be held to the same table.
#![allow(dead_code)] // Each test file uses a different part of this module.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trainguard_core::admission::{self, Endpoint, ProtocolError, Reviewed, RulesConfig, SuspendRule};
use trainguard_core::view::{ClusterView, GateFacts, Offline, StaticView};

/// `<crate root>/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    crate::repo_root().join("fixtures")
}

/// Every case under `fixtures/admission`, sorted by name.
pub fn load_cases() -> Vec<Case> {
    load_dir("admission")
}

/// The benchmark payloads under `fixtures/bench` (verdicts included).
pub fn load_bench_cases() -> Vec<Case> {
    load_dir("bench")
}

/// Every case under `fixtures/<dir>` (recursively), sorted by name. Panics with the file name on
/// a fixture that does not load: a broken fixture is a test bug.
pub fn load_dir(dir: &str) -> Vec<Case> {
    let root = fixtures_dir().join(dir);
    let mut reviews = Vec::new();
    walk(&root, &mut reviews);
    let mut cases: Vec<Case> = reviews
        .into_iter()
        .filter_map(|p| {
            let file = p.file_name()?.to_str()?;
            let stem = file.strip_suffix(".review.json")?.to_string();
            Some(Case::load(&root, &p, &stem))
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(!cases.is_empty(), "no fixtures under {}", root.display());
    cases
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// One fixture.
#[derive(Debug, Clone)]
pub struct Case {
    /// Path under the loaded directory without suffix, e.g. `runtimePatches/u2-change-while-running`.
    pub name: String,
    /// The request body, byte for byte (not always JSON: see `protocol/not-json`).
    pub review: Vec<u8>,
    pub expect: Expect,
    /// The `state.json` List, for `cluster: known`.
    pub state: Option<Value>,
    /// `<dir>/<name>.review.json` on disk, for shells that take a file (the CLI).
    pub review_path: PathBuf,
    /// `<dir>/<name>.state.json` on disk, when present.
    pub state_path: Option<PathBuf>,
}

/// `<case>.expect.json`: what the generator writes (`crate::cases`, built with the constructors
/// below) and what the tests load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// `validate` or `mutate`.
    pub endpoint: String,
    /// The cluster the case runs against; the generator writes its case's own.
    pub cluster: ClusterMode,
    /// `either` (default) or `new`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_rule: Option<String>,
    /// 200 for every decodable AdmissionReview; 400 for protocol failures.
    pub http: u16,
    pub allowed: bool,
    /// `response.status.code`, 0 when allowed. For HTTP 400 cases: 400.
    pub code: u16,
    /// The `trainguard.io/rule` audit annotation ("" for HTTP 400 cases).
    pub rule: String,
    /// Substrings of `response.status.message` (or of the protocol error, for HTTP 400).
    pub message_contains: Vec<String>,
    pub warnings: usize,
    /// Substrings that some warning contains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings_contain: Vec<String>,
    /// Whether the response carries a JSONPatch.
    pub patch: bool,
}

impl Expect {
    pub fn allowed(rule: &str) -> Self {
        Expect {
            endpoint: "validate".to_string(),
            cluster: ClusterMode::Offline,
            suspend_rule: None,
            http: 200,
            allowed: true,
            code: 0,
            rule: rule.to_string(),
            message_contains: Vec::new(),
            warnings: 0,
            warnings_contain: Vec::new(),
            patch: false,
        }
    }

    pub fn denied(code: u16, rule: &str, message_contains: &[&str]) -> Self {
        Expect {
            allowed: false,
            code,
            message_contains: message_contains.iter().map(|s| s.to_string()).collect(),
            ..Expect::allowed(rule)
        }
    }

    /// An HTTP 400 protocol failure: no AdmissionReview comes back.
    pub fn protocol_error(message_contains: &[&str]) -> Self {
        Expect { http: 400, ..Expect::denied(400, "", message_contains) }
    }

    pub fn mutate(mut self) -> Self {
        self.endpoint = "mutate".to_string();
        self
    }

    pub fn with_patch(mut self) -> Self {
        self.patch = true;
        self
    }

    pub fn suspend_rule(mut self, rule: &str) -> Self {
        self.suspend_rule = Some(rule.to_string());
        self
    }

    pub fn warning(mut self, contains: &str) -> Self {
        self.warnings += 1;
        self.warnings_contain.push(contains.to_string());
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterMode {
    /// No cluster (`--offline`): only G4.
    Offline,
    /// Cluster state from `<case>.state.json`.
    Known,
    /// Caches not synced or stale: gated decisions fail with 500.
    Unknown,
}

/// A cluster whose caches cannot answer (docs/webhook.md §4: before the first sync, or a broken watch).
#[derive(Debug, Clone, Copy, Default)]
pub struct UnknownCluster;

impl ClusterView for UnknownCluster {
    fn gate_facts(&self, _namespace: &str, _name: &str) -> GateFacts {
        GateFacts::Unknown { why: "the JobSet cache has not synced yet".to_string() }
    }
}

impl Case {
    fn load(root: &Path, review_path: &Path, stem: &str) -> Case {
        let dir = review_path.parent().expect("fixture in a directory");
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let expect_path = dir.join(format!("{stem}.expect.json"));
        let expect: Expect =
            serde_json::from_slice(&read(&expect_path)).unwrap_or_else(|e| panic!("{}: {e}", expect_path.display()));
        let state_path = dir.join(format!("{stem}.state.json"));
        let state_path = state_path.exists().then_some(state_path);
        let state = state_path
            .as_deref()
            .map(|p| serde_json::from_slice::<Value>(&read(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        assert_eq!(
            state.is_some(),
            expect.cluster == ClusterMode::Known,
            "{}: a state.json goes with cluster \"known\", and only with it",
            review_path.display()
        );
        let name = dir.join(stem).strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
        Case { name, review: read(review_path), expect, state, review_path: review_path.to_path_buf(), state_path }
    }

    pub fn endpoint(&self) -> Endpoint {
        match self.expect.endpoint.as_str() {
            "validate" => Endpoint::Validate,
            "mutate" => Endpoint::Mutate,
            other => panic!("{}: unknown endpoint {other:?}", self.name),
        }
    }

    pub fn config(&self) -> RulesConfig {
        let suspend_rule = match self.expect.suspend_rule.as_deref() {
            None | Some("either") => SuspendRule::Either,
            Some("new") => SuspendRule::New,
            Some(other) => panic!("{}: unknown suspendRule {other:?}", self.name),
        };
        RulesConfig { suspend_rule, ..RulesConfig::default() }
    }

    /// The cluster the case runs against. `StaticView::add_objects` reads the List's items.
    pub fn cluster(&self) -> Box<dyn ClusterView> {
        match self.expect.cluster {
            ClusterMode::Offline => Box::new(Offline),
            ClusterMode::Unknown => Box::new(UnknownCluster),
            ClusterMode::Known => {
                let state = self.state.as_ref().expect("known cluster has a state");
                let items = state.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                let mut view = StaticView::new();
                let used = view.add_objects(items).unwrap_or_else(|e| panic!("{}: state: {e}", self.name));
                assert_eq!(used, items.len(), "{}: every state object is a JobSet or a child Job", self.name);
                Box::new(view)
            }
        }
    }

    /// The case through the pure core.
    pub fn run(&self) -> Result<Reviewed<'_>, ProtocolError> {
        admission::review(self.endpoint(), &self.review, &self.config(), self.cluster().as_ref())
    }

    /// `request.uid` as sent, when the body is JSON and has one.
    pub fn request_uid(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.review).ok()?;
        v.pointer("/request/uid")?.as_str().map(str::to_string)
    }
}

/// An answer to a case, from whichever shell produced it.
#[derive(Debug, Clone)]
pub enum Observed {
    /// HTTP 200 with this response body (an AdmissionReview).
    Review(Vec<u8>),
    /// Any other HTTP status, with the message of its `Status` body (or the protocol error).
    Rejected { http: u16, message: String },
}

impl Observed {
    /// What the pure core answered: a review, or a protocol error the server turns into 400.
    pub fn from_core(outcome: &Result<Reviewed, ProtocolError>) -> Self {
        match outcome {
            Ok(r) => Observed::Review(r.body.clone()),
            Err(e) => Observed::Rejected { http: 400, message: e.to_string() },
        }
    }
}

/// Every way `observed` differs from the case's expected verdict, including the response shape
/// of docs/webhook.md §1 and the denial format of docs/webhook.md §6. Empty when it matches.
pub fn check_verdict(case: &Case, observed: &Observed) -> Vec<String> {
    let e = &case.expect;
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let body = match observed {
        Observed::Rejected { http, message } => {
            check(*http == e.http, format!("HTTP {http}, expected {}", e.http));
            for part in &e.message_contains {
                check(message.contains(part.as_str()), format!("message {message:?} lacks {part:?}"));
            }
            return problems;
        }
        Observed::Review(body) => body,
    };
    check(e.http == 200, format!("HTTP 200, expected {}", e.http));
    let review: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(err) => return vec![format!("response is not JSON: {err}")],
    };
    if let Err(err) = std::panic::catch_unwind(|| response_of(body)) {
        let why = err.downcast_ref::<String>().cloned().unwrap_or_default();
        problems.push(format!("response does not decode as kube's AdmissionReview: {why}"));
    }
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    check(review["apiVersion"] == "admission.k8s.io/v1", format!("apiVersion {}", review["apiVersion"]));
    check(review["kind"] == "AdmissionReview", format!("kind {}", review["kind"]));
    let response = &review["response"];
    let uid = response["uid"].as_str().unwrap_or("");
    check(Some(uid.to_string()) == case.request_uid(), format!("response.uid {uid:?} does not echo request.uid"));
    let allowed = response["allowed"].as_bool();
    check(allowed == Some(e.allowed), format!("allowed {allowed:?}, expected {}", e.allowed));
    let status = &response["status"];
    let code = status["code"].as_u64().unwrap_or(0);
    check(code == u64::from(e.code), format!("status.code {code}, expected {}", e.code));
    let rule = response["auditAnnotations"]["trainguard.io/rule"].as_str().unwrap_or("");
    check(rule == e.rule, format!("audit rule {rule:?}, expected {:?}", e.rule));
    let message = status["message"].as_str().unwrap_or("");
    for part in &e.message_contains {
        check(message.contains(part.as_str()), format!("message {message:?} lacks {part:?}"));
    }
    let warnings: Vec<&str> =
        response["warnings"].as_array().map(|w| w.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    check(warnings.len() == e.warnings, format!("warnings {warnings:?}, expected {}", e.warnings));
    for part in &e.warnings_contain {
        check(warnings.iter().any(|w| w.contains(part.as_str())), format!("no warning contains {part:?}"));
    }
    let has_patch = !response["patch"].is_null();
    check(has_patch == e.patch, format!("patch present: {has_patch}, expected {}", e.patch));
    check(
        response["patchType"].is_null() != has_patch,
        format!("patchType {} goes with a patch, and only with it", response["patchType"]),
    );
    if !e.allowed {
        problems.extend(check_denial_format(status));
    }
    problems
}

/// docs/webhook.md §6: code and reason from the most definite error, causes with field and reason, the
/// message rendered like Kubernetes `field.ErrorList` and under 1 KiB.
pub fn check_denial_format(status: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let message = status["message"].as_str().unwrap_or("");
    let code = status["code"].as_u64().unwrap_or(0);
    let reason = status["reason"].as_str().unwrap_or("");
    if status["status"] != "Failure" {
        problems.push(format!("status.status {}, expected \"Failure\"", status["status"]));
    }
    if message.is_empty() {
        problems.push("denial without a message".to_string());
    }
    if message.len() >= 1024 {
        problems.push(format!("message is {} bytes, not under 1 KiB", message.len()));
    }
    if code == 400 {
        if reason != "BadRequest" {
            problems.push(format!("code 400 with reason {reason:?}"));
        }
        return problems;
    }
    let causes = status["details"]["causes"].as_array().cloned().unwrap_or_default();
    if causes.is_empty() {
        problems.push("a field-error denial without details.causes".to_string());
    }
    let mut reasons = Vec::new();
    for cause in &causes {
        let field = cause["field"].as_str().unwrap_or("");
        let cause_reason = cause["reason"].as_str().unwrap_or("");
        let cause_message = cause["message"].as_str().unwrap_or("");
        reasons.push(cause_reason);
        if field.is_empty() || cause_message.is_empty() {
            problems.push(format!("cause without field or message: {cause}"));
        }
        let type_prefix = match cause_reason {
            "FieldValueForbidden" => "Forbidden",
            "FieldValueInvalid" => "Invalid value: ",
            "FieldValueRequired" => "Required value",
            "InternalError" => "Internal error",
            // `validate`'s schema check, in the API server's types.
            "FieldValueTypeInvalid" => "Invalid value: ",
            "FieldValueNotSupported" => "Unsupported value: ",
            "FieldValueTooLong" => "Too long",
            "FieldValueTooMany" => "Too many: ",
            "FieldValueDuplicate" => "Duplicate value",
            other => {
                problems.push(format!("cause reason {other:?} is not one of docs/webhook.md §6"));
                continue;
            }
        };
        if !cause_message.starts_with(type_prefix) {
            problems.push(format!("cause message {cause_message:?} does not start with {type_prefix:?}"));
        }
        // Every cause is shown unless the message had to be cut; a remedy several causes end with
        // (after ": " or ", ") is given once, with the first of them.
        let rendered = format!("{field}: {cause_message}");
        let shown_once = |(at, _): (usize, &str)| {
            message.contains(&format!("{field}: {}", &cause_message[..at])) && message.contains(&cause_message[at..])
        };
        let shown = message.contains(&rendered)
            || cause_message.match_indices(": ").chain(cause_message.match_indices(", ")).any(shown_once);
        if !shown && !message.contains("more errors]") && !message.contains('…') {
            problems.push(format!("message does not show {rendered:?}"));
        }
    }
    const UNPROCESSABLE: &[&str] = &[
        "FieldValueInvalid",
        "FieldValueRequired",
        "FieldValueTypeInvalid",
        "FieldValueNotSupported",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueDuplicate",
    ];
    let expected = if reasons.iter().any(|r| UNPROCESSABLE.contains(r)) {
        (422, "Invalid")
    } else if reasons.contains(&"FieldValueForbidden") {
        (403, "Forbidden")
    } else {
        (500, "InternalError")
    };
    if (code, reason) != (expected.0, expected.1) {
        problems.push(format!("code/reason {code}/{reason}, expected {}/{} from the causes", expected.0, expected.1));
    }
    match causes.len() {
        0 => {}
        1 => {
            let field = causes[0]["field"].as_str().unwrap_or("");
            if !message.starts_with(&format!("{field}: ")) {
                problems.push(format!("single error {message:?} does not start with \"{field}: \""));
            }
        }
        _ => {
            if !(message.starts_with('[') && message.ends_with(']')) {
                problems.push(format!("several errors not rendered as [e1, e2]: {message:?}"));
            }
        }
    }
    problems
}

/// The `response` of an AdmissionReview body, decoded with kube's types. trainguard writes
/// `patch` base64-encoded (Go's `[]byte` wire form); kube's type reads a list of byte values,
/// so the patch is decoded here first.
pub fn response_of(body: &[u8]) -> kube_core::admission::AdmissionResponse {
    use base64::Engine as _;
    let mut value: serde_json::Value = serde_json::from_slice(body).expect("response body is JSON");
    if let Some(patch) = value.pointer_mut("/response/patch") {
        let text = patch.as_str().expect("patch is written base64-encoded, as the API server expects");
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).expect("patch is valid base64");
        *patch = serde_json::to_value(bytes).unwrap();
    }
    let review: kube_core::admission::AdmissionReview<kube_core::DynamicObject> =
        serde_json::from_value(value).expect("response body is an AdmissionReview");
    review.response.expect("response review has a response")
}

/// The JSONPatch of a mutating response, if any.
pub fn patch_of(body: &[u8]) -> Option<json_patch::Patch> {
    let bytes = response_of(body).patch?;
    Some(serde_json::from_slice(&bytes).expect("patch bytes are a JSONPatch"))
}
