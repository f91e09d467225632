//! Denials that name several fields, with the longest names the API server stores (a 63-byte
//! namespace, a 253-byte name): the webhook's message stays under 1 KiB, names every field (path,
//! type, the start of its detail) and gives the shared remedy once; the causes keep every error
//! whole.

use serde_json::{Value, json};

use super::errors::MAX_MESSAGE_BYTES;
use super::rules::{MAX_NAME_BYTES, MAX_NAMESPACE_BYTES};
use super::{Endpoint, FieldError, Outcome, RulesConfig, SuspendRule, review};
use crate::model::{KUEUE_QUEUE_LABEL, OPT_OUT_LABEL, OverridesField};
use crate::view::{ChildJobState, ClusterView, GateFacts, JobSetState, StaticView};

const PODSPEC: OverridesField = OverridesField::PodSpecOverrides;
const PODTEMPLATE: OverridesField = OverridesField::PodTemplateOverrides;
const PATCHES: OverridesField = OverridesField::RuntimePatches;

/// The longest namespace (a DNS-1123 label) and name (a DNS-1123 subdomain).
fn longest() -> (String, String) {
    let label = |c: &str, n: usize| c.repeat(n);
    let name = [label("a", 63), label("b", 63), label("c", 63), label("d", 61)].join(".");
    let namespace = label("n", MAX_NAMESPACE_BYTES);
    assert_eq!((namespace.len(), name.len()), (MAX_NAMESPACE_BYTES, MAX_NAME_BYTES));
    (namespace, name)
}

/// A valid value of `field`; `which` tells old from new.
fn overrides(field: OverridesField, which: &str) -> Value {
    match field {
        OverridesField::RuntimePatches => json!([{"manager": format!("example.com/{which}")}]),
        _ => json!([{"targetJobs": [{"name": which}]}]),
    }
}

/// What a case has besides the changed overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    /// Queued by Kueue, in a queue of the longest name.
    Kueue,
    /// `spec.managedBy` changed (M1) and the opt-out label added (O1).
    ManagedByAndOptOut,
    /// `--suspend-rule=new`.
    SuspendRuleNew,
    /// The old status has an active job (G4).
    StatusActive,
}

/// The JobSet's state as the gate reads it.
#[derive(Clone, Copy)]
enum Cluster {
    /// A replicated job and its child Job active (G1, G3).
    Running,
    /// Every piece of evidence the gate knows on U4 (G1 twice, G2, G3 twice, G5).
    Everything,
    /// The cache does not know.
    Unknown,
}

struct UnknownView;

impl ClusterView for UnknownView {
    fn gate_facts(&self, _: &str, _: &str) -> GateFacts {
        GateFacts::Unknown { why: "the JobSet informer has not synced".to_string() }
    }
}

fn view(cluster: Cluster, namespace: &str, name: &str) -> Box<dyn ClusterView> {
    let job = |rj: &str, active, terminating, deleting| ChildJobState {
        name: format!("{name}-{rj}-0"),
        active,
        terminating,
        deleting,
    };
    let mut view = StaticView::new();
    match cluster {
        Cluster::Running => {
            let state = JobSetState { deleting: false, replicated_jobs: vec![("node".into(), 1)] };
            view.insert_jobset(namespace, name, state);
            view.insert_job(namespace, name, job("node", 2, Some(0), false));
        }
        Cluster::Everything => {
            let state =
                JobSetState { deleting: true, replicated_jobs: vec![("launcher".into(), 1), ("node".into(), 1)] };
            view.insert_jobset(namespace, name, state);
            view.insert_job(namespace, name, job("launcher", 1, Some(0), false));
            view.insert_job(namespace, name, job("node", 2, Some(2), true));
        }
        Cluster::Unknown => return Box::new(UnknownView),
    }
    Box::new(view)
}

/// The UPDATE of a TrainJob `old_suspend` → `new_suspend` that changes `fields`.
fn update(
    fields: &[OverridesField],
    (old_suspend, new_suspend): (bool, bool),
    opts: &[Opt],
    (namespace, name): (&str, &str),
) -> Vec<u8> {
    let trainjob = |suspend: bool, which: &str| {
        let mut labels = serde_json::Map::new();
        if opts.contains(&Opt::Kueue) {
            labels.insert(KUEUE_QUEUE_LABEL.into(), json!("q".repeat(63)));
        }
        let mut spec = json!({"runtimeRef": {"name": "torch-distributed"}, "suspend": suspend});
        for field in fields {
            spec[field.json_name()] = overrides(*field, which);
        }
        if which == "new" && opts.contains(&Opt::ManagedByAndOptOut) {
            spec["managedBy"] = json!(format!("example.com/{}", "m".repeat(120)));
            labels.insert(OPT_OUT_LABEL.into(), json!("disabled"));
        }
        let mut object = json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec,
        });
        if which == "old" && opts.contains(&Opt::StatusActive) {
            object["status"] = json!({"jobsStatus": [{"name": "node", "active": 1}]});
        }
        object
    };
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "9a1f0c3e-6f7b-4a55-9d2c-1b8e4f0a7c11",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "operation": "UPDATE",
            "namespace": namespace,
            "name": name,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": trainjob(new_suspend, "new"),
            "oldObject": trainjob(old_suspend, "old"),
        },
    }))
    .unwrap()
}

/// `path: Type[: value]` and the start of the detail: how the message names an error, cut or not.
fn named(e: &FieldError) -> String {
    let mut named = format!("{}: {}", e.path, e.kind.as_str());
    for part in [e.value.as_deref(), Some(start(&e.detail, 24)).filter(|d| !d.is_empty())].into_iter().flatten() {
        named.push_str(": ");
        named.push_str(part);
    }
    named
}

/// `text` cut to at most `max` bytes, on a char boundary.
fn start(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// (case, changed fields, `spec.suspend` old → new, JobSet, options, the remedy's start)
type Case<'a> = (&'a str, &'a [OverridesField], (bool, bool), Cluster, &'a [Opt], &'a str);

const RUNNING: (bool, bool) = (false, false);
const SUSPENDS: (bool, bool) = (false, true);
const RESUMES: (bool, bool) = (true, false);
const ALL: &[OverridesField] = &[PODSPEC, PODTEMPLATE, PATCHES];
const TWO: &[OverridesField] = &[PODSPEC, PATCHES];

#[test]
fn a_denial_of_several_fields_names_each_and_gives_the_remedy_once() {
    use Cluster::{Everything, Running, Unknown};
    use Opt::{Kueue, ManagedByAndOptOut, StatusActive, SuspendRuleNew};
    let suspend = "set spec.suspend to true (this stops";
    let kueue = "the job is queued by Kueue";
    let g1 = "suspending and changing in one update";
    let stopped = "the old run has not stopped yet";
    let cases: &[Case] = &[
        ("U2, two fields", TWO, RUNNING, Running, &[], suspend),
        ("U2, three fields", ALL, RUNNING, Running, &[], suspend),
        ("U2, three fields, Kueue", ALL, RUNNING, Running, &[Kueue], kueue),
        ("U2, one field, managedBy, opt-out label", &[PATCHES], RUNNING, Running, &[ManagedByAndOptOut], suspend),
        ("U2, two fields, managedBy, opt-out label, Kueue", TWO, RUNNING, Running, &[ManagedByAndOptOut, Kueue], kueue),
        ("U5, two fields, G1 and G3", TWO, SUSPENDS, Running, &[], g1),
        ("U5, three fields, G1 and G3", ALL, SUSPENDS, Running, &[], g1),
        ("U5, three fields, G1 and G3, Kueue", ALL, SUSPENDS, Running, &[Kueue], g1),
        ("U4, two fields, every piece of evidence", TWO, RESUMES, Everything, &[StatusActive], stopped),
        ("U4, three fields, every piece of evidence", ALL, RESUMES, Everything, &[StatusActive], stopped),
        ("U4, three fields, --suspend-rule=new", ALL, RESUMES, Running, &[SuspendRuleNew], "keep spec.suspend true"),
        ("cluster state unknown, three fields", ALL, SUSPENDS, Unknown, &[], "so trainguard cannot tell"),
    ];
    let (namespace, name) = longest();
    for (case, fields, transition, cluster, opts, remedy) in cases {
        let config = RulesConfig {
            suspend_rule: if opts.contains(&SuspendRuleNew) { SuspendRule::New } else { SuspendRule::Either },
            ..RulesConfig::default()
        };
        let body = update(fields, *transition, opts, (&namespace, &name));
        let reviewed = review(Endpoint::Validate, &body, &config, view(*cluster, &namespace, &name).as_ref()).unwrap();
        let Outcome::Denied { errors, .. } = &reviewed.decision.outcome else { panic!("{case}: not denied") };
        let message = &reviewed.rendered.message;
        assert!(message.len() < MAX_MESSAGE_BYTES, "{case}: {} bytes: {message}", message.len());
        let mut paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        paths.dedup();
        let others = if opts.contains(&ManagedByAndOptOut) { 2 } else { 0 };
        assert_eq!(paths.len(), fields.len() + others, "{case}: {paths:?}");
        for path in paths {
            let first = named(errors.iter().find(|e| e.path == path).unwrap());
            assert!(message.contains(&first), "{case}: no {first:?} in\n{message}");
        }
        assert_eq!(message.matches(remedy).count(), 1, "{case}: the remedy once:\n{message}");
        // The causes keep every error whole, remedy included.
        let answer: Value = serde_json::from_slice(&reviewed.body).unwrap();
        let causes = answer["response"]["status"]["details"]["causes"].as_array().unwrap();
        assert_eq!(causes.len(), errors.len(), "{case}");
        for (cause, error) in causes.iter().zip(errors) {
            assert_eq!(
                (cause["field"].as_str(), cause["message"].as_str()),
                (Some(&*error.path), Some(&*error.body()))
            );
        }
    }
}

/// With the names of the fixtures everything fits: each field's errors whole, the remedy with the
/// first error that has it. One field keeps the message it always had.
#[test]
fn with_short_names_nothing_is_cut() {
    let remedy = "set spec.suspend to true (this stops training and loses progress since the last checkpoint), \
                  wait until JobSet ml-team/llama has no active jobs (kubectl -n ml-team get jobs -l \
                  jobset.sigs.k8s.io/jobset-name=llama), then edit, and set spec.suspend back to false to resume";
    let cases: &[(&[OverridesField], String)] = &[
        (
            &[PODSPEC],
            format!("spec.podSpecOverrides: Forbidden: can only be changed while the TrainJob is suspended: {remedy}"),
        ),
        (
            TWO,
            format!(
                "[spec.podSpecOverrides: Forbidden: can only be changed while the TrainJob is suspended: {remedy}, \
                 spec.runtimePatches: Forbidden: can only be changed while the TrainJob is suspended]"
            ),
        ),
    ];
    for (fields, expected) in cases {
        let body = update(fields, RUNNING, &[], ("ml-team", "llama"));
        let reviewed = review(Endpoint::Validate, &body, &RulesConfig::default(), &StaticView::new()).unwrap();
        assert_eq!(&reviewed.rendered.message, expected);
    }
}
