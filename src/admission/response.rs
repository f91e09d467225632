//! Turns a [`Decision`] into the AdmissionReview response, using `kube::core::admission` types.
//! The one place where field errors become a Kubernetes `Status`.

use std::collections::HashMap;

use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};

use super::errors::{ErrorType, FieldError, aggregate};
use super::{Decision, Outcome};
use crate::fastjson::write::json_str;
use crate::model::{TRAINJOB_GROUP, TRAINJOB_RESOURCE};

/// Audit annotation key; the API server prefixes it with the webhook name.
pub const AUDIT_RULE_KEY: &str = "trainguard.io/rule";

/// The `status` of a denial: code and reason from the most definite error present (docs/webhook.md §6).
pub fn status(decision: &Decision, object_name: &str) -> Option<Status> {
    match &decision.outcome {
        Outcome::Allowed { .. } => None,
        Outcome::BadRequest { message, .. } => Some(Status::failure(message, "BadRequest").with_code(400)),
        Outcome::Denied { errors } => {
            let (code, reason) = denial_code(errors);
            let causes = errors
                .iter()
                .map(|e| StatusCause {
                    reason: e.kind.cause_reason().to_string(),
                    message: e.body(),
                    field: e.path.clone(),
                })
                .collect();
            let details = StatusDetails {
                name: object_name.to_string(),
                group: TRAINJOB_GROUP.to_string(),
                kind: TRAINJOB_RESOURCE.to_string(),
                uid: String::new(),
                causes,
                retry_after_seconds: if code == 500 { 1 } else { 0 },
            };
            Some(Status::failure(&aggregate(errors), reason).with_code(code).with_details(details))
        }
    }
}

/// HTTP code and reason of a denial: the most definite error present wins.
fn denial_code(errors: &[FieldError]) -> (u16, &'static str) {
    let has = |k: &[ErrorType]| errors.iter().any(|e| k.contains(&e.kind));
    if has(&[ErrorType::Invalid, ErrorType::Required]) {
        (422, "Invalid")
    } else if has(&[ErrorType::Forbidden]) {
        (403, "Forbidden")
    } else {
        (500, "InternalError")
    }
}

/// The full response review for `uid`.
pub fn review_response(uid: &str, decision: &Decision, object_name: &str) -> AdmissionReview<DynamicObject> {
    let mut response = AdmissionResponse::invalid("");
    response.uid = uid.to_string();
    response.allowed = decision.allowed();
    response.result = status(decision, object_name).unwrap_or_default();
    response.audit_annotations = HashMap::from([(AUDIT_RULE_KEY.to_string(), decision.audit_rules())]);
    if !decision.warnings.is_empty() {
        response.warnings = Some(decision.warnings.clone());
    }
    if let Some(patch) = &decision.patch {
        // Serialising a Patch of plain JSON values cannot fail.
        response = response.with_patch(patch.clone()).unwrap_or_else(|_| unreachable_patch());
    }
    response.into_review()
}

/// The response review as bytes. Every answer without a patch (all validating ones) is written
/// straight out, with the same bytes kube's types serialise to (pinned by the tests below and by
/// `tests/differential.rs` over every fixture), without building them: a denial or a warning
/// is on the path of a user's retries. A defaulting patch goes through kube's types, with `patch`
/// written base64-encoded, as the API server's Go types (`[]byte`) expect: kube's
/// `AdmissionResponse` serialises it as an array of numbers (kube-rs issue #1781), which is larger
/// and not the documented wire form.
pub fn review_bytes(uid: &str, decision: &Decision, object_name: &str) -> Vec<u8> {
    review_bytes_with(uid, decision, object_name, None)
}

/// What the answer to a request that is not allowed says besides its causes: the Status message
/// and the audit rules. Rendered once per denial, for the answer and for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialText {
    pub message: String,
    pub rules: String,
}

impl DenialText {
    /// `None` for an allowed decision.
    pub fn of(decision: &Decision) -> Option<DenialText> {
        (!decision.allowed()).then(|| DenialText { message: decision.message(), rules: decision.audit_rules() })
    }
}

/// [`review_bytes`] with the denial's text already rendered (`DenialText::of(decision)`); with
/// `None` it is rendered here.
pub fn review_bytes_with(uid: &str, decision: &Decision, object_name: &str, denial: Option<&DenialText>) -> Vec<u8> {
    use base64::Engine as _;
    if decision.patch.is_none() {
        return direct_bytes(uid, decision, object_name, denial);
    }
    let review = review_response(uid, decision, object_name);
    let patch = review.response.as_ref().and_then(|r| r.patch.as_ref());
    let Some(patch) = patch else {
        // Serialising kube's response types cannot fail.
        return serde_json::to_vec(&review).unwrap_or_default();
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(patch);
    let mut value = serde_json::to_value(&review).unwrap_or_default();
    value["response"]["patch"] = serde_json::Value::String(encoded);
    serde_json::to_vec(&value).unwrap_or_default()
}

/// [`review_response`] without a patch, serialised field by field in the order (and with the
/// omissions) of kube's serde derives.
fn direct_bytes(uid: &str, decision: &Decision, object_name: &str, denial: Option<&DenialText>) -> Vec<u8> {
    const HEAD: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#;
    // One allocation: a plain allowed answer is ~160 bytes besides the uid.
    let mut out =
        Vec::with_capacity(uid.len() + if decision.allowed() && decision.warnings.is_empty() { 224 } else { 1024 });
    out.extend_from_slice(HEAD.as_bytes());
    json_str(&mut out, uid);
    out.extend_from_slice(if decision.allowed() {
        br#","allowed":true,"status":"#
    } else {
        br#","allowed":false,"status":"#
    });
    write_status(&mut out, decision, object_name, denial);
    out.extend_from_slice(br#","auditAnnotations":{""#);
    out.extend_from_slice(AUDIT_RULE_KEY.as_bytes());
    out.extend_from_slice(br#"":"#);
    match (&decision.outcome, denial) {
        (Outcome::Denied { .. }, Some(denial)) => json_str(&mut out, &denial.rules),
        (Outcome::Denied { .. }, None) => json_str(&mut out, &decision.audit_rules()),
        _ => json_str(&mut out, decision.rule()),
    }
    out.push(b'}');
    if !decision.warnings.is_empty() {
        out.extend_from_slice(br#","warnings":["#);
        for (i, warning) in decision.warnings.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_str(&mut out, warning);
        }
        out.push(b']');
    }
    out.extend_from_slice(b"}}");
    out
}

/// [`status`] as kube's `Status` serialises it: empty strings and zeros left out.
fn write_status(out: &mut Vec<u8>, decision: &Decision, object_name: &str, denial: Option<&DenialText>) {
    let (code, reason, message) = match &decision.outcome {
        Outcome::Allowed { .. } => {
            out.extend_from_slice(b"{}");
            return;
        }
        Outcome::BadRequest { message, .. } => (400, "BadRequest", std::borrow::Cow::Borrowed(message.as_str())),
        Outcome::Denied { errors } => {
            let (code, reason) = denial_code(errors);
            let message = denial.map_or_else(|| aggregate(errors).into(), |d| d.message.as_str().into());
            (code, reason, message)
        }
    };
    out.extend_from_slice(br#"{"status":"Failure","code":"#);
    // The codes a decision has, without the formatting machinery.
    match code {
        400 => out.extend_from_slice(b"400"),
        403 => out.extend_from_slice(b"403"),
        422 => out.extend_from_slice(b"422"),
        500 => out.extend_from_slice(b"500"),
        // Writing into a Vec cannot fail.
        other => drop(std::io::Write::write_fmt(out, format_args!("{other}"))),
    }
    if !message.is_empty() {
        out.extend_from_slice(br#","message":"#);
        json_str(out, &message);
    }
    out.extend_from_slice(br#","reason":"#);
    json_str(out, reason);
    if let Outcome::Denied { errors } = &decision.outcome {
        out.extend_from_slice(br#","details":{"#);
        if !object_name.is_empty() {
            out.extend_from_slice(br#""name":"#);
            json_str(out, object_name);
            out.push(b',');
        }
        out.extend_from_slice(br#""group":"#);
        json_str(out, TRAINJOB_GROUP);
        out.extend_from_slice(br#","kind":"#);
        json_str(out, TRAINJOB_RESOURCE);
        // `Denied` always carries at least one error, so `causes` is never empty here.
        out.extend_from_slice(br#","causes":["#);
        for (i, e) in errors.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"reason":"#);
            json_str(out, e.kind.cause_reason());
            out.extend_from_slice(br#","message":"#);
            json_str(out, &e.body());
            if !e.path.is_empty() {
                out.extend_from_slice(br#","field":"#);
                json_str(out, &e.path);
            }
            out.push(b'}');
        }
        out.push(b']');
        if code == 500 {
            out.extend_from_slice(br#","retryAfterSeconds":1"#);
        }
        out.push(b'}');
    }
    out.push(b'}');
}

#[cold]
fn unreachable_patch() -> AdmissionResponse {
    AdmissionResponse::invalid("could not serialise the defaulting patch")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kube_bytes(uid: &str, decision: &Decision, name: &str) -> String {
        String::from_utf8(serde_json::to_vec(&review_response(uid, decision, name)).unwrap()).unwrap()
    }

    fn denied(errors: Vec<FieldError>) -> Decision {
        Decision::from_errors(errors, "unused")
    }

    /// Decisions of every shape the writer distinguishes: allowed with and without warnings,
    /// bad requests, denials of each code, several errors, empty parts, text that needs escaping.
    fn decisions() -> Vec<(&'static str, Decision)> {
        let forbidden = |path: &str, detail: &str| FieldError::new("U2", ErrorType::Forbidden, path, detail);
        let long = "x".repeat(600);
        let mut warned = Decision::allow("allow-gate");
        warned.warnings = vec!["trainguard: JobSet a/b was not consulted".into(), "second \"quoted\" ✓".into()];
        vec![
            ("allowed", Decision::allow("U1")),
            ("allowed with warnings", warned),
            ("bad request", Decision::bad_request("spec.suspend: invalid type: string \"yes\"".into())),
            ("bad request without message", Decision::bad_request(String::new())),
            ("forbidden", denied(vec![forbidden("spec.runtimePatches", "can only be changed while suspended")])),
            (
                "invalid beats forbidden",
                denied(vec![
                    forbidden("spec.podSpecOverrides", "no"),
                    FieldError::invalid("M1", "spec.managedBy", "\"other\"".into(), "field is immutable"),
                ]),
            ),
            (
                "required",
                denied(vec![FieldError::new(
                    "shape",
                    ErrorType::Required,
                    "spec.runtimePatches[0].manager",
                    "name it",
                )]),
            ),
            (
                "internal, retryable",
                denied(vec![FieldError::new("cluster-unknown", ErrorType::Internal, "spec.runtimePatches", "retry")]),
            ),
            ("unsupported field", denied(vec![FieldError::new("schema", ErrorType::UnsupportedField, "spec.x", "")])),
            ("empty path and detail", denied(vec![FieldError::new("U2", ErrorType::Forbidden, "", "")])),
            ("escapes", denied(vec![forbidden("spec.a\"b", "tab\t nl\n ctl\u{1} </script> é😀")])),
            ("aggregate cut", denied((0..20).map(|i| forbidden(&format!("spec.f{i}"), &long)).collect())),
        ]
    }

    #[test]
    fn answers_without_a_patch_are_what_kube_types_serialise() {
        let uids = ["3f119d16-ed58-4b75-a96d-205718848db8", "", "quote\"back\\slash", "ctl\u{1}\n\t", "é✓😀"];
        let names = ["llama", "", "we\"ird"];
        for (case, decision) in decisions() {
            for uid in uids {
                for name in names {
                    assert_eq!(
                        String::from_utf8(review_bytes(uid, &decision, name)).unwrap(),
                        kube_bytes(uid, &decision, name),
                        "{case}, uid {uid:?}, name {name:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_patch_is_written_base64_encoded() {
        let mut decision = Decision::allow("defaults");
        decision.patch =
            Some(serde_json::from_value(serde_json::json!([{"op": "add", "path": "/a", "value": 1}])).unwrap());
        let bytes: serde_json::Value = serde_json::from_slice(&review_bytes("u", &decision, "n")).unwrap();
        assert_eq!(bytes["response"]["patchType"], "JSONPatch");
        use base64::Engine as _;
        let patch =
            base64::engine::general_purpose::STANDARD.decode(bytes["response"]["patch"].as_str().unwrap()).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&patch).unwrap()[0]["path"], "/a");
    }
}
