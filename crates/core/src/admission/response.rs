//! Turns a [`Decision`] into the AdmissionReview response, using `kube_core::admission` types.
//! The one place where field errors become a Kubernetes `Status`.

use std::collections::HashMap;

use kube_core::admission::{AdmissionResponse, AdmissionReview};
use kube_core::response::{StatusCause, StatusDetails};
use kube_core::{DynamicObject, Status};

use super::decision::{Decision, Outcome};
use super::errors::{ErrorType, FieldError};
use crate::model::{TRAINJOB_GROUP, TRAINJOB_RESOURCE};

/// Audit annotation key; the API server prefixes it with the webhook name.
pub(crate) const AUDIT_RULE_KEY: &str = "trainguard.io/rule";

/// What an answer says besides its causes, rendered: the `Status` message and the audit rules. Once
/// per review, for the answer and for the denial's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub message: String,
    pub audit_rules: String,
}

impl Rendered {
    pub(crate) fn of(decision: &Decision) -> Rendered {
        Rendered { message: decision.message(), audit_rules: decision.audit_rules() }
    }
}

/// The `status` of a denial: code and reason from the most definite error present (docs/webhook.md §6).
pub fn status(decision: &Decision, object_name: &str) -> Option<Status> {
    status_with_message(decision, object_name, &decision.message())
}

/// [`status`] with its message already rendered (`Rendered::of(decision).message`).
fn status_with_message(decision: &Decision, object_name: &str, message: &str) -> Option<Status> {
    match &decision.outcome {
        Outcome::Allowed { .. } => None,
        Outcome::BadRequest { message, .. } => Some(Status::failure(message, "BadRequest").with_code(400)),
        Outcome::Denied { errors, .. } => {
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
            Some(Status::failure(message, reason).with_code(code).with_details(details))
        }
    }
}

/// HTTP code and reason of a denial: the most definite error present wins.
/// A field the schema does not have is what the API server's strict decoding refuses before any
/// validation: 400 `BadRequest`, never a retryable 500.
fn denial_code(errors: &[FieldError]) -> (u16, &'static str) {
    let has = |k: &[ErrorType]| errors.iter().any(|e| k.contains(&e.kind));
    if has(&[ErrorType::UnsupportedField]) {
        (400, "BadRequest")
    } else if has(&[
        ErrorType::Invalid,
        ErrorType::Required,
        ErrorType::TypeInvalid,
        ErrorType::NotSupported,
        ErrorType::TooLong,
        ErrorType::TooMany,
        ErrorType::Duplicate,
    ]) {
        (422, "Invalid")
    } else if has(&[ErrorType::Forbidden]) {
        (403, "Forbidden")
    } else {
        (500, "InternalError")
    }
}

/// The full response review for `uid`.
pub fn review_response(uid: &str, decision: &Decision, object_name: &str) -> AdmissionReview<DynamicObject> {
    review_response_rendered(uid, decision, object_name, &Rendered::of(decision))
}

fn review_response_rendered(
    uid: &str,
    decision: &Decision,
    object_name: &str,
    rendered: &Rendered,
) -> AdmissionReview<DynamicObject> {
    let mut response = AdmissionResponse::invalid("");
    response.uid = uid.to_string();
    response.allowed = decision.allowed();
    response.result = status_with_message(decision, object_name, &rendered.message).unwrap_or_default();
    response.audit_annotations = HashMap::from([(AUDIT_RULE_KEY.to_string(), rendered.audit_rules.clone())]);
    if !decision.warnings.is_empty() {
        response.warnings = Some(decision.warnings.clone());
    }
    if let Some(patch) = &decision.patch {
        // Serialising a Patch of plain JSON values cannot fail.
        response = response.with_patch(patch.clone()).unwrap_or_else(|_| unreachable_patch());
    }
    response.into_review()
}

/// The response review as bytes, through kube's types. A defaulting patch is written
/// base64-encoded, as the API server's Go types (`[]byte`) expect: kube's `AdmissionResponse`
/// serialises it as an array of numbers (kube-rs issue #1781), which is not the documented wire form.
pub fn review_bytes(uid: &str, decision: &Decision, object_name: &str) -> Vec<u8> {
    review_bytes_rendered(uid, decision, object_name, &Rendered::of(decision))
}

/// [`review_bytes`] with what it says already rendered.
pub(crate) fn review_bytes_rendered(uid: &str, decision: &Decision, object_name: &str, rendered: &Rendered) -> Vec<u8> {
    use base64::Engine as _;
    let review = review_response_rendered(uid, decision, object_name, rendered);
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

#[cold]
fn unreachable_patch() -> AdmissionResponse {
    AdmissionResponse::invalid("could not serialise the defaulting patch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Rule;

    fn denied(errors: Vec<FieldError>) -> Decision {
        Decision::from_errors(errors, Rule::U1)
    }

    /// Decisions of every shape the writer distinguishes: allowed with and without warnings,
    /// bad requests, denials of each code, several errors, empty parts, text that needs escaping.
    fn decisions() -> Vec<(&'static str, Decision)> {
        let forbidden = |path: &str, detail: &str| FieldError::new(Rule::U2, ErrorType::Forbidden, path, detail);
        let long = "x".repeat(600);
        let mut warned = Decision::allow(Rule::AllowGate);
        warned.warnings = vec!["trainguard: JobSet a/b was not consulted".into(), "second \"quoted\" ✓".into()];
        vec![
            ("allowed", Decision::allow(Rule::U1)),
            ("allowed with warnings", warned),
            ("bad request", Decision::bad_request("spec.suspend: invalid type: string \"yes\"".into())),
            ("bad request without message", Decision::bad_request(String::new())),
            ("forbidden", denied(vec![forbidden("spec.runtimePatches", "can only be changed while suspended")])),
            (
                "invalid beats forbidden",
                denied(vec![
                    forbidden("spec.podSpecOverrides", "no"),
                    FieldError::invalid(Rule::M1, "spec.managedBy", "\"other\"".into(), "field is immutable"),
                ]),
            ),
            (
                "required",
                denied(vec![FieldError::new(
                    Rule::Shape,
                    ErrorType::Required,
                    "spec.runtimePatches[0].manager",
                    "name it",
                )]),
            ),
            (
                "internal, retryable",
                denied(vec![FieldError::new(
                    Rule::ClusterUnknown,
                    ErrorType::Internal,
                    "spec.runtimePatches",
                    "retry",
                )]),
            ),
            (
                "unsupported field",
                denied(vec![FieldError::new(Rule::Schema, ErrorType::UnsupportedField, "spec.x", "")]),
            ),
            ("empty path and detail", denied(vec![FieldError::new(Rule::U2, ErrorType::Forbidden, "", "")])),
            ("escapes", denied(vec![forbidden("spec.a\"b", "tab\t nl\n ctl\u{1} </script> é😀")])),
            ("aggregate cut", denied((0..20).map(|i| forbidden(&format!("spec.f{i}"), &long)).collect())),
        ]
    }

    #[test]
    fn code_and_reason_follow_the_most_definite_error() {
        let expected = [
            ("allowed", None),
            ("allowed with warnings", None),
            ("bad request", Some((400, "BadRequest"))),
            ("bad request without message", Some((400, "BadRequest"))),
            ("forbidden", Some((403, "Forbidden"))),
            ("invalid beats forbidden", Some((422, "Invalid"))),
            ("required", Some((422, "Invalid"))),
            ("internal, retryable", Some((500, "InternalError"))),
            ("unsupported field", Some((400, "BadRequest"))),
            ("empty path and detail", Some((403, "Forbidden"))),
            ("escapes", Some((403, "Forbidden"))),
            ("aggregate cut", Some((403, "Forbidden"))),
        ];
        for ((case, decision), (want_case, want)) in decisions().into_iter().zip(expected) {
            assert_eq!(case, want_case);
            let review: serde_json::Value = serde_json::from_slice(&review_bytes("u", &decision, "n")).unwrap();
            let status = &review["response"]["status"];
            let got = status.get("code").map(|c| (c.as_u64().unwrap() as u16, status["reason"].as_str().unwrap()));
            assert_eq!(got, want, "{case}: {status}");
            let retry = status.pointer("/details/retryAfterSeconds").and_then(serde_json::Value::as_u64);
            assert_eq!(retry, (want.map(|w| w.0) == Some(500)).then_some(1), "{case}: only a 500 is retryable");
        }
    }

    /// `validate`'s schema types are all 422 `Invalid`, as the API server answers them, and beat a
    /// Forbidden; only an unknown field makes it a 400.
    #[test]
    fn the_schema_types_are_unprocessable() {
        for kind in [
            ErrorType::TypeInvalid,
            ErrorType::NotSupported,
            ErrorType::TooLong,
            ErrorType::TooMany,
            ErrorType::Duplicate,
        ] {
            let errors = [
                FieldError::new(Rule::Schema, ErrorType::Forbidden, "spec.a", "not now"),
                FieldError::new(Rule::Schema, kind, "spec.b", ""),
            ];
            assert_eq!(denial_code(&errors), (422, "Invalid"), "{kind:?}");
            let with_unknown =
                [errors[1].clone(), FieldError::new(Rule::Schema, ErrorType::UnsupportedField, "spec.c", "")];
            assert_eq!(denial_code(&with_unknown), (400, "BadRequest"), "{kind:?}");
        }
    }

    #[test]
    fn a_patch_is_written_base64_encoded() {
        let mut decision = Decision::allow(Rule::Defaulted);
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
