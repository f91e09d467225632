//! What the webhook decides, as data: the request's operation and endpoint, and the verdict
//! (allowed, denied with field errors, a bad request, a JSON patch) that the response renders.

use super::errors::{self, ErrorList, FieldError};
use super::rule::Rule;

/// `admission.k8s.io/v1` `request.operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Which webhook a review is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Validate,
    Mutate,
}

impl Endpoint {
    /// The HTTP path, as in Trainer's own webhooks (docs/webhook.md §1).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Validate => "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
            Endpoint::Mutate => "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        }
    }

    /// Label value for `controller_runtime_webhook_*{webhook=…}` (controller-runtime uses the path).
    pub fn label(self) -> &'static str {
        self.path()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Allowed {
        rule: Rule,
    },
    Denied {
        /// The first [`errors::MAX_FIELD_ERRORS`] errors found.
        errors: Vec<FieldError>,
        /// Errors found beyond those, counted only.
        omitted: usize,
    },
    /// The review is well-formed but its object is not a TrainJob we can read: HTTP 200, code 400.
    BadRequest {
        message: String,
        rule: Rule,
    },
}

/// A verdict with everything the response needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub warnings: Vec<String>,
    pub patch: Option<json_patch::Patch>,
}

impl Decision {
    pub(crate) fn allow(rule: Rule) -> Self {
        Decision { outcome: Outcome::Allowed { rule }, warnings: Vec::new(), patch: None }
    }

    pub(crate) fn bad_request(message: String) -> Self {
        Self::bad_request_by(Rule::BadObject, message)
    }

    pub(crate) fn bad_request_by(rule: Rule, message: String) -> Self {
        // serde's decode errors quote the offending value, whatever its size.
        let message = errors::truncate_to(message, errors::MAX_MESSAGE_BYTES);
        Decision { outcome: Outcome::BadRequest { message, rule }, warnings: Vec::new(), patch: None }
    }

    /// Denied with `errors`, or allowed by `allow_rule` when there are none. Past
    /// [`errors::MAX_FIELD_ERRORS`], errors are counted, not kept.
    pub fn from_errors(errors: impl Into<ErrorList>, allow_rule: Rule) -> Self {
        let ErrorList { errors, omitted } = errors.into();
        if errors.is_empty() && omitted == 0 {
            Self::allow(allow_rule)
        } else {
            Decision { outcome: Outcome::Denied { errors, omitted }, warnings: Vec::new(), patch: None }
        }
    }

    pub fn allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed { .. })
    }

    /// The rule that decided: the allowing rule, or the first error's (a low-cardinality label).
    pub fn rule(&self) -> &'static str {
        match &self.outcome {
            Outcome::Allowed { rule } | Outcome::BadRequest { rule, .. } => rule.as_str(),
            Outcome::Denied { errors, .. } => errors.first().map_or("denied", |e| e.rule.as_str()),
        }
    }

    /// Every rule that contributed, comma-separated, for the audit annotation.
    pub fn audit_rules(&self) -> String {
        match &self.outcome {
            Outcome::Denied { errors, .. } => {
                let mut rules: Vec<&str> = Vec::new();
                for e in errors {
                    if !rules.contains(&e.rule.as_str()) {
                        rules.push(e.rule.as_str());
                    }
                }
                rules.join(",")
            }
            _ => self.rule().to_string(),
        }
    }

    /// The message a user sees (`kubectl` prefixes it with the webhook name).
    pub fn message(&self) -> String {
        match &self.outcome {
            Outcome::Allowed { .. } => String::new(),
            Outcome::BadRequest { message, .. } => message.clone(),
            Outcome::Denied { errors, omitted } => errors::aggregate(errors, *omitted),
        }
    }
}
