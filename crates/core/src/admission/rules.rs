//! The validating rules of docs/webhook.md §3–§5, as a pure function of the request, the configuration and
//! a [`ClusterView`]. No I/O: the view answers from memory.

use serde_json::value::RawValue;

use super::decision::{Decision, Endpoint, Operation};
use super::errors::{ErrorList, ErrorType, FieldError, quote};
use super::overrides;
use super::rule::Rule;
use crate::model::trainjob_state::{self, ConditionsOnly};
use crate::model::{
    DEFAULT_MANAGED_BY, DEFAULT_OPT_OUT_GROUPS, MULTIKUEUE_MANAGED_BY, OPT_OUT_LABEL, OverridesField, TrainJobView,
};
use crate::view::{ClusterView, GateFacts, JobSetWithJobs};

/// When a change of the overrides may come with `suspend: false` (docs/webhook.md §3, U4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SuspendRule {
    /// Either old or new suspended is enough (Trainer ≥ v2.2.1 semantics); U4 goes through the gate.
    #[default]
    Either,
    /// The new object must be suspended (Trainer v2.0 parity); U4 is denied.
    New,
}

/// Everything that changes a verdict besides the request and the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesConfig {
    pub suspend_rule: SuspendRule,
    /// Values `spec.managedBy` may take on CREATE (M2).
    pub allowed_managed_by: Vec<String>,
    /// Groups whose members may add or change the opt-out label (O1).
    pub opt_out_groups: Vec<String>,
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            suspend_rule: SuspendRule::Either,
            allowed_managed_by: vec![DEFAULT_MANAGED_BY.to_string(), MULTIKUEUE_MANAGED_BY.to_string()],
            opt_out_groups: DEFAULT_OPT_OUT_GROUPS.iter().map(|g| g.to_string()).collect(),
        }
    }
}

/// The parts of an admission request the rules read, its objects held as `O`: raw in a
/// [`RuleInput`], decoded in a [`DecodedInput`].
#[derive(Debug, Clone, Copy)]
pub struct Input<'r, O> {
    pub operation: Operation,
    pub sub_resource: Option<&'r str>,
    /// Request namespace and name (fall back to the object's metadata when empty).
    pub namespace: &'r str,
    pub name: &'r str,
    pub object: Option<O>,
    pub old_object: Option<O>,
    /// `request.userInfo.groups`, raw; None when absent.
    pub groups: Option<&'r RawValue>,
}

/// The parts of an admission request the rules read.
pub type RuleInput<'a> = Input<'a, &'a RawValue>;

/// A request whose objects are decoded: what the rules read.
pub type DecodedInput<'r, 'a> = Input<'r, &'r TrainJobView<'a>>;

impl<'a> RuleInput<'a> {
    /// Decodes the objects `endpoint` reads for this operation (the object on CREATE, both on an
    /// UPDATE the validating webhook judges), then decides with `decide`. An object that does not
    /// decode is a 400 denial naming where.
    pub fn decide(&self, endpoint: Endpoint, decide: impl FnOnce(&DecodedInput<'_, 'a>) -> Decision) -> Decision {
        let (needs_old, needs_new) = match (endpoint, self.operation) {
            (_, Operation::Create) => (false, true),
            (Endpoint::Validate, Operation::Update) => (self.sub_resource.is_none(), self.sub_resource.is_none()),
            _ => (false, false),
        };
        let old = match needs_old.then(|| decode(self.old_object, "oldObject")).transpose() {
            Ok(old) => old,
            Err(bad) => return bad,
        };
        let new = match needs_new.then(|| decode(self.object, "object")).transpose() {
            Ok(new) => new,
            Err(bad) => return bad,
        };
        decide(&DecodedInput {
            operation: self.operation,
            sub_resource: self.sub_resource,
            namespace: self.namespace,
            name: self.name,
            object: new.as_ref(),
            old_object: old.as_ref(),
            groups: self.groups,
        })
    }
}

/// The validating webhook: the one entry point of its rules.
pub fn validate(input: &DecodedInput<'_, '_>, config: &RulesConfig, cluster: &dyn ClusterView) -> Decision {
    match input.operation {
        Operation::Delete => Decision::allow(Rule::AllowDelete),
        Operation::Connect => Decision::allow(Rule::AllowConnect),
        Operation::Create => match input.object {
            Some(new) => validate_create(new, config),
            None => missing("object"),
        },
        Operation::Update => {
            if input.sub_resource.is_some() {
                return Decision::allow(Rule::U0);
            }
            match (input.old_object, input.object) {
                (Some(old), Some(new)) => match foreign_object(input, old, new) {
                    Some(bad) => bad,
                    None => validate_update(input, old, new, config, cluster),
                },
                (None, _) => missing("oldObject"),
                (_, None) => missing("object"),
            }
        }
    }
}

/// The longest `metadata.name` (a DNS-1123 subdomain) and namespace (a DNS-1123 label) the API
/// server stores.
pub(crate) const MAX_NAME_BYTES: usize = 253;
pub(crate) const MAX_NAMESPACE_BYTES: usize = 63;

/// The API server always sends an UPDATE naming the object under review in `request.name` and
/// `request.namespace`, and both objects carry that name (and that namespace, when set). A review
/// that does not was not sent by it: it gets a denial that says nothing about any object, so a
/// direct caller cannot read the JobSet state of another object (another namespace's above all)
/// through the gate's messages. The gate then reads the request's own namespace and name only.
fn foreign_object(input: &DecodedInput<'_, '_>, old: &TrainJobView<'_>, new: &TrainJobView<'_>) -> Option<Decision> {
    let names_ok = !input.name.is_empty()
        && !input.namespace.is_empty()
        && input.name.len() <= MAX_NAME_BYTES
        && input.namespace.len() <= MAX_NAMESPACE_BYTES;
    let objects_ok = [old, new].iter().all(|object| {
        object.name() == input.name && object.namespace().is_none_or(|ns| ns.is_empty() || ns == input.namespace)
    });
    (!(names_ok && objects_ok)).then(|| {
        Decision::bad_request(
            "request.name and request.namespace must name the TrainJob under review, as request.object and \
             request.oldObject do: the API server always sends them so"
                .to_string(),
        )
    })
}

pub(crate) fn missing(field: &str) -> Decision {
    Decision::bad_request(format!("request.{field} is missing"))
}

pub(crate) fn decode<'a>(raw: Option<&'a RawValue>, field: &str) -> Result<TrainJobView<'a>, Decision> {
    let raw = raw.filter(|r| r.get() != "null").ok_or_else(|| missing(field))?;
    TrainJobView::decode(raw).map_err(|e| {
        let at = if e.path.is_empty() { String::new() } else { format!(" at {}", e.path) };
        Decision::bad_request(format!("request.{field} is not a valid TrainJob{at}: {}", e.message))
    })
}

fn validate_create(new: &TrainJobView<'_>, config: &RulesConfig) -> Decision {
    let mut errors = ErrorList::default();
    if let Some(managed_by) = new.managed_by_raw()
        && !config.allowed_managed_by.iter().any(|a| a == managed_by)
    {
        let allowed: Vec<String> = config.allowed_managed_by.iter().map(|a| quote(a)).collect();
        errors.push(FieldError::invalid(
            Rule::M2,
            "spec.managedBy",
            quote(managed_by),
            format!("must be one of {}; leave it unset for Trainer's own controller", allowed.join(", ")),
        ));
    }
    check_name(new, &mut errors);
    for field in OverridesField::ALL {
        if let Some(raw) = new.overrides(field) {
            errors.append(overrides::shape_errors_raw(field, Some(raw)));
        }
    }
    Decision::from_errors(errors, Rule::AllowCreate)
}

/// `metadata.name` must be a DNS-1035 label (the JobSet and its Services are named after it).
fn check_name(new: &TrainJobView<'_>, errors: &mut ErrorList) {
    let name = new.name();
    if name.is_empty() {
        if new.generate_name().is_empty() {
            errors.push(FieldError::new(
                Rule::Name,
                ErrorType::Required,
                "metadata.name",
                "name or generateName is required",
            ));
        }
        return;
    }
    if name.len() > 63 {
        errors.push(FieldError::invalid(
            Rule::Name,
            "metadata.name",
            quote(name),
            "must be no more than 63 characters",
        ));
    }
    if !is_dns1035_label(name) {
        errors.push(FieldError::invalid(
            Rule::Name,
            "metadata.name",
            quote(name),
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
             alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
             regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ));
    }
}

fn is_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// O1: adding the opt-out label, or changing its value, takes the webhook away from a TrainJob,
/// so only members of `--opt-out-groups` may do it. Removing it is allowed to everyone.
fn opt_out_error(
    old: &TrainJobView<'_>,
    new: &TrainJobView<'_>,
    groups: Option<&RawValue>,
    config: &RulesConfig,
) -> Option<FieldError> {
    let value = new.opt_out_label()?;
    if old.opt_out_label() == Some(value) || in_any_group(groups, &config.opt_out_groups) {
        return None;
    }
    let allowed: Vec<String> = config.opt_out_groups.iter().map(|g| quote(g)).collect();
    let who = if allowed.is_empty() { "nobody (the list is empty)".to_string() } else { allowed.join(", ") };
    Some(FieldError::new(
        Rule::O1,
        ErrorType::Forbidden,
        format!("metadata.labels[{OPT_OUT_LABEL}]"),
        format!(
            "setting or changing the opt-out label takes this TrainJob away from trainguard's checks; only \
             members of {who} (--opt-out-groups) may do it. Removing the label is allowed"
        ),
    ))
}

/// Whether the requester's groups (raw JSON list) meet `allowed`. Groups that do not read as a
/// list of strings meet nothing: the rule fails closed.
fn in_any_group(groups: Option<&RawValue>, allowed: &[String]) -> bool {
    let Some(groups) = groups.and_then(|g| serde_json::from_str::<Vec<String>>(g.get()).ok()) else {
        return false;
    };
    groups.iter().any(|g| allowed.contains(g))
}

/// U5, decided offline by `validate`: the old manifest says the job runs (`spec.suspend` not
/// true, not finished), and the new one suspends it and changes its overrides in the same update.
/// The cluster's gate would see the JobSet's active jobs (G1, G3) and deny that single apply;
/// without cluster state, the old manifest is the evidence. One error per changed overrides
/// field, with the advice a git workflow can follow: two commits. `None` when the objects do not
/// decode (other checks say so).
pub fn suspends_a_running_job(old: &RawValue, new: &RawValue, namespace: &str, name: &str) -> Option<Vec<FieldError>> {
    let (old_view, new_view) = (TrainJobView::decode(old).ok()?, TrainJobView::decode(new).ok()?);
    let old_state: ConditionsOnly = serde_json::from_str(old.get()).ok()?;
    if old_view.suspended() || !new_view.suspended() || trainjob_state::finished(old_state.conditions()).is_some() {
        return None;
    }
    let changed = OverridesField::ALL
        .into_iter()
        .filter(|f| overrides::changed(*f, old_view.overrides(*f), new_view.overrides(*f)));
    let errors: Vec<FieldError> = changed
        .map(|field| {
            FieldError::new(
                Rule::U5,
                ErrorType::Forbidden,
                field.path(),
                format!(
                    "the old manifest has spec.suspend false, so TrainJob {namespace}/{name} runs and its JobSet has \
                     active jobs"
                ),
            )
            // The same for every changed field: a message naming several gives it once.
            .with_remedy(
                ": ",
                &format!(
                    "the cluster denies suspending and changing in one update (G1). Make it two changes: first set \
                     spec.suspend to true alone and apply it, wait until JobSet {namespace}/{name} has no active \
                     jobs (kubectl -n {namespace} get jobs -l jobset.sigs.k8s.io/jobset-name={name}), then change \
                     the overrides"
                ),
            )
        })
        .collect();
    (!errors.is_empty()).then_some(errors)
}

/// The suspend transition of an UPDATE that changes the overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transition {
    /// U2: running before and after.
    Running,
    /// U3: suspended before and after.
    StaysSuspended,
    /// U4: change + unsuspend in one request.
    Resumes,
    /// U5: suspend + change in one request.
    Suspends,
}

fn validate_update(
    input: &DecodedInput<'_, '_>,
    old: &TrainJobView<'_>,
    new: &TrainJobView<'_>,
    config: &RulesConfig,
    cluster: &dyn ClusterView,
) -> Decision {
    let mut errors = ErrorList::default();
    errors.extend(opt_out_error(old, new, input.groups, config));
    errors.extend(managed_by_change(old, new));

    let mut changed: Vec<OverridesField> = Vec::new();
    for field in OverridesField::ALL {
        let (o, n) = (old.overrides(field), new.overrides(field));
        if let Some(shape_errors) = overrides::changed_shape_errors(field, o, n) {
            errors.append(shape_errors);
            changed.push(field);
        }
    }
    if changed.is_empty() {
        return Decision::from_errors(errors, Rule::U1);
    }

    let subject = Subject::of(input, old);
    let transition = match (old.suspended(), new.suspended()) {
        (false, false) => Transition::Running,
        (true, true) => Transition::StaysSuspended,
        (true, false) => Transition::Resumes,
        (false, true) => Transition::Suspends,
    };

    // Changed while running, or (--suspend-rule=new) in the update that resumes: each changed field
    // is refused, with what to do instead.
    let refused = match transition {
        Transition::Running => Some(("can only be changed while the TrainJob is suspended", subject.suspend_advice())),
        Transition::Resumes if config.suspend_rule == SuspendRule::New => Some((
            "can only be changed while the TrainJob stays suspended (--suspend-rule=new)",
            "keep spec.suspend true for this change, then set it to false in a separate update".to_string(),
        )),
        _ => None,
    };
    if let Some((detail, remedy)) = refused {
        for field in &changed {
            errors
                .push(FieldError::new(Rule::U2, ErrorType::Forbidden, field.path(), detail).with_remedy(": ", &remedy));
        }
        return Decision::from_errors(errors, Rule::U2);
    }

    let mut warnings = Vec::new();
    let gate = evaluate_gate(&subject, old, transition, &cluster.gate_facts(subject.namespace, subject.name));
    if gate.offline {
        warnings.push(format!(
            "trainguard: JobSet {} was not consulted (no cluster state); only the TrainJob's own status was checked",
            subject.jobset()
        ));
    }
    for field in &changed {
        errors.extend(gate_errors(&gate, *field, &subject, transition));
    }
    let mut decision = Decision::from_errors(errors, Rule::AllowGate);
    decision.warnings = warnings;
    decision
}

/// M1: `spec.managedBy` never changes.
fn managed_by_change(old: &TrainJobView<'_>, new: &TrainJobView<'_>) -> Option<FieldError> {
    if old.managed_by() == new.managed_by() {
        return None;
    }
    let value = new.managed_by_raw().map_or_else(|| "null".to_string(), quote);
    Some(FieldError::invalid(
        Rule::M1,
        "spec.managedBy",
        value,
        format!(
            "field is immutable: a TrainJob cannot move to another controller; keep {} and create a \
             new TrainJob with the other value instead",
            quote(old.managed_by())
        ),
    ))
}

/// The gate's findings as errors on one changed overrides field; the first says what to do (once
/// in a message naming several fields: see [`FieldError::with_remedy`]).
fn gate_errors(
    gate: &GateResult,
    field: OverridesField,
    subject: &Subject<'_>,
    transition: Transition,
) -> Vec<FieldError> {
    gate.findings
        .iter()
        .enumerate()
        .map(|(i, finding)| {
            let error = FieldError::new(finding.rule, finding.kind, field.path(), finding.text.as_str());
            match &finding.remedy {
                Some((joint, remedy)) => error.with_remedy(joint, remedy),
                None if i == 0 && finding.kind != ErrorType::Internal => {
                    error.with_remedy(": ", &subject.gate_advice(transition))
                }
                None => error,
            }
        })
        .collect()
}

/// The TrainJob under review, for messages.
struct Subject<'a> {
    namespace: &'a str,
    name: &'a str,
    kueue_queue: Option<&'a str>,
}

impl<'a> Subject<'a> {
    /// The request's own namespace and name ([`foreign_object`] checked the objects carry them).
    fn of(input: &DecodedInput<'a, '_>, old: &'a TrainJobView<'_>) -> Self {
        Subject { namespace: input.namespace, name: input.name, kueue_queue: old.kueue_queue() }
    }

    fn jobset(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// How to reach a state in which the overrides may change, what it costs, how to check it,
    /// and how to finish (resume).
    fn suspend_advice(&self) -> String {
        let (ns, name, jobset) = (self.namespace, self.name, self.jobset());
        let check = format!("kubectl -n {ns} get jobs -l jobset.sigs.k8s.io/jobset-name={name}");
        match self.kueue_queue {
            Some(queue) => format!(
                "the job is queued by Kueue (queue {}), which resumes a suspended job whose Workload is still \
                 admitted, so set spec.active to false on its Workload trainjob-{name}-<hash> (kubectl -n {ns} get \
                 workloads); this stops training and loses progress since the last checkpoint. Wait until JobSet \
                 {jobset} has no active jobs ({check}), then edit, and set the Workload's spec.active back to true \
                 to resume",
                quote(queue),
            ),
            None => format!(
                "set spec.suspend to true (this stops training and loses progress since the last checkpoint), \
                 wait until JobSet {jobset} has no active jobs ({check}), then edit, and set spec.suspend back to \
                 false to resume"
            ),
        }
    }

    fn gate_advice(&self, transition: Transition) -> String {
        match transition {
            Transition::Suspends => format!(
                "suspending and changing in one update is not enough while the job runs; {}",
                self.suspend_advice()
            ),
            Transition::Resumes => format!(
                "the old run has not stopped yet; keep spec.suspend true for this change, wait until JobSet {} \
                 has no active or terminating pods, then resume",
                self.jobset()
            ),
            _ => format!(
                "the old run has not stopped yet; wait until JobSet {} has no active jobs, then edit",
                self.jobset()
            ),
        }
    }
}

struct Finding {
    rule: Rule,
    kind: ErrorType,
    text: String,
    /// Its own remedy and joint, in place of the gate's advice.
    remedy: Option<(&'static str, String)>,
}

struct GateResult {
    findings: Vec<Finding>,
    offline: bool,
}

/// docs/webhook.md §4: evidence that the old run is still there. G2 and G5 apply to U4 only.
fn evaluate_gate(
    subject: &Subject<'_>,
    old: &TrainJobView<'_>,
    transition: Transition,
    facts: &GateFacts,
) -> GateResult {
    let strict = transition == Transition::Resumes;
    let forbidden = |rule, text| Finding { rule, kind: ErrorType::Forbidden, text, remedy: None };
    let mut findings = Vec::new();

    if let GateFacts::Known(JobSetWithJobs { jobset, jobs }) = facts {
        if let Some(js) = jobset {
            for (rj, active) in js.replicated_jobs.iter().filter(|(_, a)| *a > 0) {
                findings.push(forbidden(
                    Rule::G1,
                    format!(
                        "replicated job {} of JobSet {} has {}",
                        quote(rj),
                        subject.jobset(),
                        count(*active, "active job")
                    ),
                ));
            }
            if strict && js.deleting {
                findings.push(forbidden(Rule::G2, format!("JobSet {} is still being deleted", subject.jobset())));
            }
        }
        for job in jobs.iter().filter(|j| j.active > 0) {
            findings.push(forbidden(
                Rule::G3,
                format!("job {}/{} still has {}", subject.namespace, job.name, count(job.active, "active pod")),
            ));
        }
    }
    for (rj, active) in old.active_jobs() {
        findings.push(forbidden(
            Rule::G4,
            format!(
                "replicated job {} of TrainJob {} has {} (status.jobsStatus)",
                quote(rj),
                subject.jobset(),
                count(active, "active job")
            ),
        ));
    }
    if strict && let GateFacts::Known(JobSetWithJobs { jobs, .. }) = facts {
        for job in jobs {
            let text = match (job.terminating, job.deleting) {
                (Some(n), _) if n > 0 => {
                    format!("job {}/{} still has {}", subject.namespace, job.name, count(n, "terminating pod"))
                }
                (_, true) => format!("job {}/{} is still being deleted", subject.namespace, job.name),
                _ => continue,
            };
            findings.push(forbidden(Rule::G5, text));
        }
    }
    if let GateFacts::Unknown { why } = facts {
        findings.push(Finding {
            rule: Rule::ClusterUnknown,
            kind: ErrorType::Internal,
            text: format!("the cluster state is unknown ({why})"),
            remedy: Some((
                ", ",
                format!("so trainguard cannot tell whether JobSet {} still runs; retry the request", subject.jobset()),
            )),
        });
    }
    GateResult { findings, offline: matches!(facts, GateFacts::Offline) }
}

fn count(n: i32, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
