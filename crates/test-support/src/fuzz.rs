//! The properties every answer of `trainguard_core::admission::review` must have, shared by the
//! time-bounded test (`tests/admission/fuzz_review.rs`) and the libFuzzer target (`fuzz/fuzz_targets/review.rs`).

use k8s_openapi::ByteString;
use serde::Deserialize;
use serde_json::Value;
use trainguard_core::admission::{Endpoint, RulesConfig, review};
use trainguard_core::view::ClusterView;

/// Denial messages stay under this (docs/webhook.md §6).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The response review as the API server reads it (`patch` is base64, as Go's `[]byte`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    api_version: String,
    kind: String,
    response: AnswerResponse,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerResponse {
    uid: String,
    allowed: bool,
    #[serde(default)]
    status: Option<AnswerStatus>,
    #[serde(default)]
    patch: Option<ByteString>,
    #[serde(default)]
    patch_type: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AnswerStatus {
    #[serde(default)]
    message: String,
}

/// `request.uid` as sent, read on its own (owned strings, no borrowing).
#[derive(Deserialize)]
struct Sent {
    request: SentRequest,
}

#[derive(Deserialize)]
struct SentRequest {
    uid: String,
}

/// `request.uid` of an answered body. serde_json reads it, unless the body is not valid JSON:
/// the hot path checks only the structure of the values it skips (docs/webhook.md, "Decoding"),
/// so a body broken only inside those is answered. Then the fast decoder's reading must be the
/// uid written in the body.
fn sent(body: &[u8]) -> Result<Sent, String> {
    let full_error = match serde_json::from_slice::<Sent>(body) {
        Ok(sent) => return Ok(sent),
        Err(e) => e,
    };
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        return Err(format!("Ok for a review without a uid: {full_error}"));
    }
    Err(format!("Ok for a body that is not JSON: {full_error}"))
}

/// Whether the body's `request` is a JSON array (which the webhook must refuse with HTTP 400).
fn request_is_array(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        request: &'a serde_json::value::RawValue,
    }
    serde_json::from_slice::<Envelope<'_>>(body).is_ok_and(|e| e.request.get().starts_with('['))
}

/// Reviews `body` and checks the answer. `Ok(None)`: a protocol error (HTTP 400, no review), a
/// fine answer to a broken body. `Ok(Some(rule))`: a review, decided by `rule`. `Err`: what is
/// wrong with the answer. A panic inside `review` propagates to the caller.
pub fn check(
    endpoint: Endpoint,
    body: &[u8],
    config: &RulesConfig,
    cluster: &dyn ClusterView,
) -> Result<Option<&'static str>, String> {
    let Ok(reviewed) = review(endpoint, body, config, cluster) else {
        return Ok(None);
    };
    let answer: Answer =
        serde_json::from_slice(&reviewed.body).map_err(|e| format!("response is not an AdmissionReview: {e}"))?;
    if answer.api_version != "admission.k8s.io/v1" || answer.kind != "AdmissionReview" {
        return Err(format!("response is a {} {}", answer.api_version, answer.kind));
    }
    let response = answer.response;

    // The uid comes back unchanged. (Reading `Sent` with serde's derive would also accept a
    // `request` written as an array; the webhook rejects that, so an answer to one fails here.)
    if request_is_array(body) {
        return Err("answered a review whose request is an array".into());
    }
    // A uid longer than any the API server sends comes back cut to 128 bytes.
    let sent = sent(body)?;
    let mut expected = sent.request.uid.as_str();
    if expected.len() > 128 {
        let mut end = 128;
        while !expected.is_char_boundary(end) {
            end -= 1;
        }
        expected = &expected[..end];
    }
    if response.uid != expected || reviewed.uid != expected {
        return Err(format!("uid {:?} came back as {:?} / {:?}", sent.request.uid, response.uid, reviewed.uid));
    }
    if response.allowed != reviewed.decision.allowed() {
        return Err("response.allowed disagrees with the decision".into());
    }

    if !response.allowed {
        let status = response.status.unwrap_or_default();
        if status.message.is_empty() || status.message.len() >= MAX_MESSAGE_BYTES {
            return Err(format!("denial message of {} bytes: {:.200}", status.message.len(), status.message));
        }
        if response.patch.is_some() {
            return Err("a denial carries a patch".into());
        }
    }

    if let Some(ByteString(patch)) = response.patch {
        if response.patch_type.as_deref() != Some("JSONPatch") {
            return Err(format!("patch with patchType {:?}", response.patch_type));
        }
        let patch: json_patch::Patch =
            serde_json::from_slice(&patch).map_err(|e| format!("patch is not a JSON Patch: {e}"))?;
        if patch.0.is_empty() {
            return Err("an empty patch is sent (docs/webhook.md §7: no patch then)".into());
        }
        check_patch_is_idempotent(endpoint, body, &patch, config, cluster)?;
    } else if response.patch_type.is_some() {
        return Err("patchType without a patch".into());
    }
    Ok(Some(reviewed.decision.rule()))
}

/// docs/webhook.md §7: the patch applies to the object it was computed for, and reviewing the patched object
/// again yields no patch (safe under `reinvocationPolicy: IfNeeded`).
fn check_patch_is_idempotent(
    endpoint: Endpoint,
    body: &[u8],
    patch: &json_patch::Patch,
    config: &RulesConfig,
    cluster: &dyn ClusterView,
) -> Result<(), String> {
    // Bodies the generic JSON reader refuses (invalid UTF-8 in a skipped field) are not re-sent.
    let Ok(mut sent) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    let object = &mut sent["request"]["object"];
    json_patch::patch(object, patch).map_err(|e| format!("the patch does not apply to request.object: {e}"))?;
    let again = serde_json::to_vec(&sent).map_err(|e| e.to_string())?;
    let reviewed = review(endpoint, &again, config, cluster).map_err(|e| format!("patched review refused: {e}"))?;
    if let Some(second) = reviewed.decision.patch {
        return Err(format!("reviewing the patched object patches again: {second:?}"));
    }
    Ok(())
}
