//! The admission core: AdmissionReview bytes in, AdmissionReview bytes out. Pure: the cluster is
//! reached only through a [`ClusterView`] that answers from memory. `serve` and `review` both
//! call [`review`], so the CLI and the server cannot disagree.

pub mod decision;
pub(crate) mod defaults;
pub(crate) mod errors;
pub mod overrides;
pub mod response;
pub(crate) mod rule;
pub mod rules;

#[cfg(test)]
mod message_tests;

use std::borrow::Cow;
use std::fmt;

pub use decision::{Decision, Endpoint, Operation, Outcome};
pub use errors::{ErrorList, ErrorType, FieldError};
pub use rule::{DocSection, Rule};
pub use rules::RuleInput;
pub use rules::{RulesConfig, SuspendRule};

use crate::model::object_only::ObjectOnly;
use crate::model::{RequestView, ReviewEnvelope, TRAINJOB_GROUP, TRAINJOB_KIND, TRAINJOB_VERSION, TrainJobView};
use crate::view::ClusterView;

/// A body that is not an AdmissionReview we can answer: HTTP 400, no review in the response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("request body is not valid JSON: {0}")]
    NotJson(String),
    #[error("expected an admission.k8s.io/v1 AdmissionReview, got {0}")]
    NotAdmissionReview(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
}

/// The answer to one review, with what metrics and logs need. The names are borrowed from the
/// request body (copied only when the body escaped them), so answering costs no copies of them.
#[derive(Debug, Clone)]
pub struct Reviewed<'a> {
    /// The serialised response AdmissionReview.
    pub body: Vec<u8>,
    pub uid: Cow<'a, str>,
    pub operation: &'static str,
    pub decision: Decision,
    pub namespace: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub dry_run: bool,
    /// The message and audit rules the body carries, for the log line.
    pub rendered: response::Rendered,
}

impl fmt::Display for Reviewed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}: ", self.operation, self.namespace, self.name)?;
        if self.decision.allowed() {
            write!(f, "allowed ({})", self.decision.rule())
        } else {
            write!(f, "denied ({}): {}", self.decision.audit_rules(), self.decision.message())
        }
    }
}

/// Answers one AdmissionReview body for `endpoint`.
///
/// One pass decodes the envelope and both TrainJobs together. Only when that fails (not JSON,
/// another kind, an object that does not decode) is the body read again with the objects kept
/// raw, to find out what exactly is wrong.
pub fn review<'a>(
    endpoint: Endpoint,
    body: &'a [u8],
    config: &RulesConfig,
    cluster: &dyn ClusterView,
) -> Result<Reviewed<'a>, ProtocolError> {
    // serde's derived structs would also read a JSON array, field by field.
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(ProtocolError::NotAdmissionReview("a JSON list".to_string()));
    }
    // The objects are boxed so that the envelope stays small as serde moves it up through the
    // layers of the decode.
    type Decoded<'a> = ReviewEnvelope<'a, Box<ObjectOnly<TrainJobView<'a>>>>;
    if let Ok(envelope) = serde_json::from_slice::<Decoded<'_>>(body) {
        return respond(envelope, |request, operation| {
            let input = rules::DecodedInput {
                operation,
                sub_resource: request.sub_resource(),
                namespace: request.namespace.as_deref().unwrap_or(""),
                name: request.name.as_deref().unwrap_or(""),
                object: request.object.as_ref().map(|o| &o.0),
                old_object: request.old_object.as_ref().map(|o| &o.0),
                groups: request.groups(),
            };
            match endpoint {
                Endpoint::Validate => rules::validate(&input, config, cluster),
                Endpoint::Mutate => defaults::mutate(&input),
            }
        });
    }
    let envelope: ReviewEnvelope<'_> = serde_json::from_slice(body).map_err(|e| {
        // A data error quotes the offending value, whatever its size.
        ProtocolError::NotJson(errors::truncate_to(e.to_string(), errors::MAX_MESSAGE_BYTES))
    })?;
    respond(envelope, |request, operation| {
        let input = RuleInput {
            operation,
            sub_resource: request.sub_resource(),
            namespace: request.namespace.as_deref().unwrap_or(""),
            name: request.name.as_deref().unwrap_or(""),
            object: request.object,
            old_object: request.old_object,
            groups: request.groups(),
        };
        match endpoint {
            Endpoint::Validate => input.decide(endpoint, |decoded| rules::validate(decoded, config, cluster)),
            Endpoint::Mutate => input.decide(endpoint, defaults::mutate),
        }
    })
}

/// Envelope checks, kind and operation, then `decide`, then the response bytes.
fn respond<'a, O>(
    envelope: ReviewEnvelope<'a, O>,
    decide: impl FnOnce(&RequestView<'a, O>, Operation) -> Decision,
) -> Result<Reviewed<'a>, ProtocolError> {
    let api_version = envelope.api_version.as_deref().unwrap_or("");
    let kind = envelope.kind.as_deref().unwrap_or("");
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        let got = if api_version.is_empty() && kind.is_empty() {
            "an object without apiVersion and kind".to_string()
        } else {
            format!("{api_version} {kind}")
        };
        return Err(ProtocolError::NotAdmissionReview(got));
    }
    let mut request = envelope.request.ok_or(ProtocolError::MissingRequest)?;
    let uid = request.uid.take().filter(|u| !u.is_empty()).ok_or(ProtocolError::MissingUid)?;

    let operation = request.operation.as_deref().and_then(Operation::parse);
    let decision = match (kind_mismatch(&request), operation) {
        (Some(message), _) => Decision::bad_request_by(Rule::WrongKind, message),
        (None, None) => Decision::bad_request_by(
            Rule::BadOperation,
            format!(
                "unknown request.operation {}: expected CREATE, UPDATE, DELETE or CONNECT",
                errors::quote(request.operation.as_deref().unwrap_or(""))
            ),
        ),
        (None, Some(operation)) => decide(&request, operation),
    };
    // Echoed at most as long as the API server sends them: a forged review cannot make the
    // answer (or the log line) grow with them.
    let uid = cut_echo(uid, MAX_UID_BYTES);
    let name = cut_echo(request.name.take().unwrap_or_default(), rules::MAX_NAME_BYTES);
    let rendered = response::Rendered::of(&decision);
    let body = response::review_bytes_rendered(&uid, &decision, &name, &rendered);
    Ok(Reviewed {
        body,
        uid,
        operation: operation.map_or("UNKNOWN", Operation::as_str),
        decision,
        namespace: cut_echo(request.namespace.take().unwrap_or_default(), rules::MAX_NAMESPACE_BYTES),
        name,
        dry_run: request.dry_run.unwrap_or(false),
        rendered,
    })
}

/// The longest `request.uid` echoed. The API server's is a UUID (36 bytes); a longer one comes
/// from another sender, and its echo is cut.
pub(crate) const MAX_UID_BYTES: usize = 128;

/// `value` cut to at most `max` bytes, on a character boundary.
fn cut_echo(value: Cow<'_, str>, max: usize) -> Cow<'_, str> {
    if value.len() <= max {
        return value;
    }
    let mut end = max;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    match value {
        Cow::Borrowed(s) => Cow::Borrowed(&s[..end]),
        Cow::Owned(mut s) => {
            s.truncate(end);
            Cow::Owned(s)
        }
    }
}

/// docs/webhook.md §8: a review for another kind gets a 400 denial naming what was expected and what came.
fn kind_mismatch<O>(request: &RequestView<'_, O>) -> Option<String> {
    let gvk = request.kind.as_ref();
    let (group, version, kind) = gvk.map_or(("", "", ""), |k| (k.group.as_ref(), k.version.as_ref(), k.kind.as_ref()));
    if group == TRAINJOB_GROUP && version == TRAINJOB_VERSION && kind == TRAINJOB_KIND {
        return None;
    }
    let got = if kind.is_empty() {
        "no request.kind".to_string()
    } else if group.is_empty() {
        format!("{version} {kind}")
    } else {
        format!("{group}/{version} {kind}")
    };
    Some(format!(
        "this webhook admits {TRAINJOB_GROUP}/{TRAINJOB_VERSION} {TRAINJOB_KIND} only, got {got}: check the \
         rules of the webhook configuration"
    ))
}
