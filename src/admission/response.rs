//! Turns a [`Decision`] into the AdmissionReview response, using `kube::core::admission` types.
//! The one place where field errors become a Kubernetes `Status`.

use std::collections::HashMap;

use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};

use super::errors::{ErrorType, aggregate};
use super::{Decision, Outcome};
use crate::model::{TRAINJOB_GROUP, TRAINJOB_RESOURCE};

/// Audit annotation key; the API server prefixes it with the webhook name.
pub const AUDIT_RULE_KEY: &str = "trainguard.io/rule";

/// The `status` of a denial: code and reason from the most definite error present (docs/webhook.md §6).
pub fn status(decision: &Decision, object_name: &str) -> Option<Status> {
    match &decision.outcome {
        Outcome::Allowed { .. } => None,
        Outcome::BadRequest { message, .. } => Some(Status::failure(message, "BadRequest").with_code(400)),
        Outcome::Denied { errors } => {
            let has = |k: &[ErrorType]| errors.iter().any(|e| k.contains(&e.kind));
            let (code, reason) = if has(&[ErrorType::Invalid, ErrorType::Required]) {
                (422, "Invalid")
            } else if has(&[ErrorType::Forbidden]) {
                (403, "Forbidden")
            } else {
                (500, "InternalError")
            };
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

/// The response review as bytes. `patch` is written base64-encoded, as the API server's Go types
/// (`[]byte`) expect: kube's `AdmissionResponse` serialises it as an array of numbers
/// (kube-rs issue #1781), which is larger and not the documented wire form.
pub fn review_bytes(uid: &str, decision: &Decision, object_name: &str) -> Vec<u8> {
    use base64::Engine as _;
    if decision.allowed() && decision.warnings.is_empty() && decision.patch.is_none() {
        return allowed_bytes(uid, decision.rule());
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

/// The answer to most reviews (allowed, no warnings, no patch), written straight out: the same
/// bytes kube's types serialise to (pinned by the tests below), without building them.
fn allowed_bytes(uid: &str, rule: &str) -> Vec<u8> {
    const HEAD: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#;
    let mut out = Vec::with_capacity(HEAD.len() + uid.len() + rule.len() + 96);
    out.extend_from_slice(HEAD.as_bytes());
    write_json_str(&mut out, uid);
    out.extend_from_slice(br#","allowed":true,"status":{},"auditAnnotations":{""#);
    out.extend_from_slice(AUDIT_RULE_KEY.as_bytes());
    out.extend_from_slice(br#"":"#);
    write_json_str(&mut out, rule);
    out.extend_from_slice(b"}}}");
    out
}

/// A JSON string, escaped exactly as serde_json escapes it.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(out, s);
}

#[cold]
fn unreachable_patch() -> AdmissionResponse {
    AdmissionResponse::invalid("could not serialise the defaulting patch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_bytes_are_what_kube_types_serialise() {
        let uids =
            ["3f119d16-ed58-4b75-a96d-205718848db8", "", "quote\"back\\slash", "ctl\u{1}\n\t", "é✓😀", "</script>"];
        let rules = ["U1", "defaults-present", "create"];
        for uid in uids {
            for rule in rules {
                let decision = Decision::allow(rule);
                let expected = serde_json::to_vec(&review_response(uid, &decision, "name")).unwrap();
                assert_eq!(
                    String::from_utf8(review_bytes(uid, &decision, "name")).unwrap(),
                    String::from_utf8(expected).unwrap(),
                    "uid {uid:?}, rule {rule}"
                );
            }
        }
    }
}
