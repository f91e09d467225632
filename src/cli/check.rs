//! One TrainJob manifest through the webhook's validating rules, offline. Pure: the old object,
//! the live running state and the cluster view are arguments; the rules are the server's own
//! ([`rules::validate`]), fed the JSON an AdmissionReview would carry.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::cluster::ClusterView;
use crate::manifests::Document;
use trainguard_core::admission::{Decision, Endpoint, Operation, Rule, RuleInput, RulesConfig, rules};
use trainguard_core::model::TrainJobView;
use trainguard_core::schema;
use trainguard_core::trainer::TrainerVersion;

/// Where an UPDATE's old object comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OldObject<'a> {
    pub(crate) source: &'a str,
    pub(crate) line: usize,
    pub(crate) json: &'a RawValue,
}

/// What `validate` knows besides the manifest itself.
pub(crate) struct Context<'a> {
    pub config: &'a RulesConfig,
    pub(crate) cluster: &'a dyn ClusterView,
    /// No `--state`: the gate ran offline.
    pub(crate) offline: bool,
    /// `--strict`: an allow that rests on cluster state nobody gave is a denial.
    pub(crate) strict: bool,
    pub(crate) default_namespace: &'a str,
    /// The Trainer release whose TrainJob schema the manifests must fit; `None`: not checked.
    pub(crate) schema: Option<TrainerVersion>,
}

/// The verdict on one TrainJob.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub namespace: String,
    pub name: String,
    pub(crate) source: String,
    pub(crate) line: usize,
    pub operation: Operation,
    /// `(source, line)` of the old object of an UPDATE.
    pub(crate) old: Option<(String, usize)>,
    pub decision: Decision,
    /// `--strict` turned an offline gate allow into a denial.
    pub(crate) strict_denial: bool,
    /// The manifest line of each denied field (by path), where it could be found; see
    /// [`Checked::line_of`].
    pub(crate) field_lines: Vec<(String, usize)>,
}

impl Checked {
    pub(crate) fn denied(&self) -> bool {
        self.strict_denial || !self.decision.allowed()
    }

    /// The webhook's own message for a denial; for a `--strict` denial, the warning it rests on.
    pub(crate) fn message(&self) -> String {
        if self.strict_denial {
            format!("{} (--strict denies what rests on cluster state not given)", self.decision.warnings.join("; "))
        } else {
            self.decision.message()
        }
    }

    /// The field errors of a denial (none for a `--strict` denial, which has no field).
    pub(crate) fn field_errors(&self) -> &[trainguard_core::admission::FieldError] {
        match &self.decision.outcome {
            trainguard_core::admission::Outcome::Denied { errors, .. } if !self.strict_denial => errors,
            _ => &[],
        }
    }

    /// The line of the field at `path` in the manifest, else the object's own line.
    pub(crate) fn line_of(&self, path: &str) -> usize {
        self.field_lines.iter().find(|(p, _)| p == path).map_or(self.line, |(_, l)| *l)
    }

    /// `trainjob.trainer.kubeflow.org/<ns>/<name>`.
    pub(crate) fn object_id(&self) -> String {
        format!("trainjob.trainer.kubeflow.org/{}/{}", self.namespace, self.name)
    }
}

/// A manifest the rules cannot read: exit 2, like any unusable input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {what} does not decode: {detail}")]
pub(crate) struct DecodeFailure {
    pub(crate) source_name: String,
    pub(crate) line: usize,
    pub(crate) what: String,
    pub(crate) detail: String,
}

/// `(namespace, name)` of a TrainJob document, with `default_namespace` where it has none.
pub fn key(doc: &Document, default_namespace: &str) -> (String, String) {
    (doc.namespace().unwrap_or(default_namespace).to_string(), doc.name().unwrap_or("").to_string())
}

/// The object as the API server would pass it to the webhook: namespace filled in, as JSON.
pub(crate) fn to_request_json(mut value: Value, namespace: &str) -> Box<RawValue> {
    if let Value::Object(object) = &mut value {
        let metadata = object.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(metadata) = metadata
            && metadata.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            metadata.insert("namespace".to_string(), Value::String(namespace.to_string()));
        }
    }
    // A Value always serialises, and its text is valid JSON.
    let text = serde_json::to_string(&value).unwrap_or_else(|_| "null".to_string());
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The old object as the running job looks: the old manifest with the live TrainJob's
/// `spec.suspend` and `status`, or the live TrainJob itself when there is no old manifest.
pub(crate) fn with_running_state(old: Option<&RawValue>, live: &Value, namespace: &str) -> Box<RawValue> {
    let Some(old) = old else {
        return to_request_json(live.clone(), namespace);
    };
    let mut value: Value = serde_json::from_str(old.get()).unwrap_or(Value::Null);
    if let Value::Object(object) = &mut value {
        match live.get("status") {
            Some(status) => object.insert("status".to_string(), status.clone()),
            None => object.remove("status"),
        };
        let spec = object.entry("spec").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(spec) = spec {
            match live.pointer("/spec/suspend") {
                Some(suspend) => spec.insert("suspend".to_string(), suspend.clone()),
                None => spec.remove("suspend"),
            };
        }
    }
    to_request_json(value, namespace)
}

/// A TrainJob manifest, ready for the rules: namespace filled in, compact JSON.
#[derive(Debug)]
pub(crate) struct NewObject {
    pub(crate) source: String,
    pub(crate) line: usize,
    pub namespace: String,
    pub name: String,
    pub(crate) json: Box<RawValue>,
}

impl NewObject {
    pub(crate) fn from_document(doc: Document, default_namespace: &str) -> Self {
        let (namespace, name) = key(&doc, default_namespace);
        let json = to_request_json(doc.value, &namespace);
        NewObject { source: doc.source, line: doc.line, namespace, name, json }
    }
}

/// Validates one TrainJob as CREATE, or as UPDATE of `old`.
pub(crate) fn check(new: NewObject, old: Option<OldObject<'_>>, ctx: &Context<'_>) -> Result<Checked, DecodeFailure> {
    let NewObject { source, line, namespace, name, json: object } = new;
    let label = format!("TrainJob {namespace}/{name}");
    decodes(&object, &source, line, &label)?;
    if let Some(old) = old {
        decodes(old.json, old.source, old.line, &format!("old {label}"))?;
    }
    let input = RuleInput {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        sub_resource: None,
        namespace: &namespace,
        name: &name,
        object: Some(&object),
        old_object: old.map(|o| o.json),
        // Offline checks have no requester: an opt-out label added in a manifest is reported (O1).
        groups: None,
    };
    let mut decision = input.decide(Endpoint::Validate, |decoded| rules::validate(decoded, ctx.config, ctx.cluster));
    if let trainguard_core::admission::Outcome::BadRequest { message, .. } = &decision.outcome {
        return Err(DecodeFailure { source_name: source, line, what: label, detail: message.clone() });
    }
    if ctx.offline
        && let Some(old) = old
        && decision.allowed()
        && decision.rule() == Rule::AllowGate.as_str()
        && let Some(error) = rules::suspends_a_running_job(old.json, &object, &namespace, &name)
    {
        decision = Decision { warnings: Vec::new(), ..Decision::from_errors(error, Rule::AllowGate) };
    }
    if let Some(version) = ctx.schema {
        decision = with_schema_errors(decision, &object, old.map(|o| o.json), version);
    }
    // Offline, an allow by the JobSet gate rests on state nobody looked at.
    let strict_denial = ctx.strict && ctx.offline && decision.allowed() && decision.rule() == "allow-gate";
    Ok(Checked {
        operation: input.operation,
        namespace,
        name,
        source,
        line,
        old: old.map(|o| (o.source.to_string(), o.line)),
        decision,
        strict_denial,
        field_lines: Vec::new(),
    })
}

/// Adds the schema's findings on `object` after the rules' own: the webhook's message and rule
/// stay what the cluster's webhook would say, and the schema's finding (the API server would
/// refuse or prune these fields first) is said beside it, not instead.
fn with_schema_errors(
    decision: Decision,
    object: &RawValue,
    old: Option<&RawValue>,
    version: TrainerVersion,
) -> Decision {
    // Both objects decoded above, so they are JSON.
    let value: Value = serde_json::from_str(object.get()).unwrap_or(Value::Null);
    let old: Option<Value> = old.map(|o| serde_json::from_str(o.get()).unwrap_or(Value::Null));
    with_schema_findings(decision, &value, old.as_ref(), version)
}

/// [`with_schema_errors`] on already parsed objects (`review` reads them from the request).
pub(crate) fn with_schema_findings(
    decision: Decision,
    value: &Value,
    old: Option<&Value>,
    version: TrainerVersion,
) -> Decision {
    let mut errors = schema::check(value, old, version);
    if errors.is_empty() {
        return decision;
    }
    let warnings = decision.warnings;
    let mut omitted = 0;
    if let trainguard_core::admission::Outcome::Denied { errors: mut rule_errors, omitted: rule_omitted } =
        decision.outcome
    {
        // One wrong-typed value, one error: the API server's.
        schema::drop_restated(&mut rule_errors, &errors);
        rule_errors.append(&mut errors);
        errors = rule_errors;
        omitted = rule_omitted;
    }
    let mut list = trainguard_core::admission::ErrorList::from(errors);
    list.omitted += omitted;
    Decision { warnings, ..Decision::from_errors(list, Rule::Schema) }
}

fn decodes(raw: &RawValue, source: &str, line: usize, what: &str) -> Result<(), DecodeFailure> {
    TrainJobView::decode(raw).map(drop).map_err(|e| DecodeFailure {
        source_name: source.to_string(),
        line,
        what: what.to_string(),
        detail: e.to_string(),
    })
}
