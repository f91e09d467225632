//! The JobSet gate against Trainer: generated UPDATEs get cluster state — the TrainJob's JobSet
//! (none, no active jobs, one active replicated job, several; now and then being deleted), child
//! Jobs, the old TrainJob's `status.jobsStatus`, a suspend transition (running, suspended,
//! resuming, suspending in the same request) and now and then the opt-out label. The JobSet goes
//! to the oracle, where Trainer's JobSet plugin reads it through a fake client; trainguard's whole
//! validating webhook ([`admission::review`]) decides the same request with a [`StaticView`]
//! holding the JobSet and the Jobs.
//!
//! Compared, where the API server admits the write: Trainer's Forbidden errors on the overrides
//! field against trainguard's overrides rules — "only while suspended" against U2 (the U4 denial
//! of `--suspend-rule=new` included: v2.0 and v2.1 require the new object to be suspended, as that
//! rule does), "the JobSet's replicated job is still active" against G1, one for one. trainguard's
//! own stricter evidence (G2–G5) and the opt-out label (O1) deny where Trainer allows: counted by
//! name, as docs/webhook.md lists them, and only where the state the generator made holds that
//! evidence ([`Made`], [`justified`]); any other such error fails. The shape rule:
//! from v2.2.1 each of its errors has Trainer's (a patch's `manager` is required); on v2.0.1 and
//! v2.1.0, where Trainer has no such check, its denials are counted where an item of the new
//! overrides has no target or an unnamed one.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::{Value, json};

use trainguard_core::admission::{self, Endpoint, FieldError, Outcome, Rule, RulesConfig, SuspendRule};
use trainguard_core::model::OPT_OUT_LABEL;
use trainguard_core::trainer::{TrainerVersion, crd};
use trainguard_core::view::StaticView;
use trainguard_test_support::builders::{Review, child_job, jobset};

use super::{Answer, Case, Column, Skips, skip};

/// The cluster around one UPDATE.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    /// The TrainJob's JobSet, as `kubectl get -o json` prints it: the oracle's fake client holds
    /// it, and trainguard's view.
    pub(crate) jobset: Option<Value>,
    /// Its child Jobs: trainguard's view only (Trainer does not read them).
    pub(crate) jobs: Vec<Value>,
    /// What the generator made of it.
    pub(crate) made: Made,
}

/// The evidence the generator put in a state, as it chose it (not read back from the objects):
/// what justifies each of trainguard's stricter rules.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Made {
    /// `spec.suspend` of the old and the new object.
    pub(crate) suspended: (bool, bool),
    /// The JobSet is there and being deleted.
    pub(crate) jobset_deleting: bool,
    /// A child Job with active pods.
    pub(crate) job_active: bool,
    /// A child Job with terminating pods, or being deleted.
    pub(crate) job_stopping: bool,
    /// The old TrainJob's `status.jobsStatus` counts active jobs.
    pub(crate) status_active: bool,
    /// The new object sets the opt-out label, which the old one does not have.
    pub(crate) opt_out: bool,
}

impl Made {
    /// What a case without generated state (a fixture, a manifest, a generated UPDATE left
    /// without cluster state) holds: no JobSet or Job, and what its two objects say.
    fn read(old: &Value, new: &Value) -> Made {
        let suspended = |o: &Value| o["spec"]["suspend"] == json!(true);
        let active = old["status"]["jobsStatus"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|j| j["active"].as_i64().is_some_and(|a| a > 0));
        let label = |o: &Value| o["metadata"]["labels"].get(OPT_OUT_LABEL).cloned();
        Made {
            suspended: (suspended(old), suspended(new)),
            status_active: active,
            opt_out: label(new).is_some_and(|l| Some(l) != label(old)),
            ..Made::default()
        }
    }
}

/// Whether the generated state justifies `rule` (docs/webhook.md §4 and "The opt-out label"): the
/// gate runs only on a change of the overrides (their JSON differs) with either object suspended;
/// G2 and G5 only when it unsuspends (U4).
fn justified(rule: Rule, made: &Made, overrides_differ: bool) -> bool {
    let gated = overrides_differ && made.suspended != (false, false);
    let resuming = made.suspended == (true, false);
    match rule {
        Rule::G2 => gated && resuming && made.jobset_deleting,
        Rule::G3 => gated && made.job_active,
        Rule::G4 => gated && made.status_active,
        Rule::G5 => gated && resuming && made.job_stopping,
        Rule::O1 => made.opt_out,
        _ => false,
    }
}

/// On v2.0 and v2.1, the shape rule's reason as the new object shows it: an item of the overrides
/// with no `targetJobs`, an empty list, or a target without a name.
fn untargeted(version: TrainerVersion, new: &Value) -> bool {
    let field = version.overrides().json_name();
    let unnamed = |t: &Value| t.get("name").and_then(Value::as_str).is_none_or(str::is_empty);
    new["spec"][field].as_array().into_iter().flatten().any(|item| match item.get("targetJobs") {
        Some(Value::Array(targets)) => targets.is_empty() || targets.iter().any(unnamed),
        _ => true,
    })
}

impl State {
    /// trainguard's view of this state.
    fn view(&self) -> StaticView {
        let mut view = StaticView::new();
        let objects: Vec<&Value> = self.jobset.iter().chain(&self.jobs).collect();
        let used = view.add_objects(objects.iter().copied()).expect("the state decodes");
        assert_eq!(used, objects.len(), "every state object is a JobSet or a child Job");
        view
    }
}

/// `object` renamed to the TrainJob's namespace and name (the builders name theirs ml-team/llama).
fn owned_by(mut object: Value, namespace: &str, name: &str) -> Value {
    let old_name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let new_name = old_name.replacen(trainguard_test_support::builders::NAME, name, 1);
    object["metadata"]["name"] = json!(new_name);
    object["metadata"]["namespace"] = json!(namespace);
    if let Some(labels) = object["metadata"]["labels"].as_object_mut()
        && labels.contains_key("jobset.sigs.k8s.io/jobset-name")
    {
        labels.insert("jobset.sigs.k8s.io/jobset-name".into(), json!(name));
    }
    object
}

/// Gives cluster state to about half of the UPDATEs among `cases`, and a suspend
/// transition, with its own seeded source of choices (the objects themselves stay those of the
/// generator's seed).
pub(crate) fn add_state(version: TrainerVersion, cases: &mut [Case]) {
    let mut seed = [0u8; 32];
    seed[..4].copy_from_slice(&(version.index() as u32 + 77).to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
    let mut below = move |n: u64| rng.next_u64() % n;
    for case in cases.iter_mut() {
        let Some(old) = case.old.as_mut() else { continue };
        // The other half keep the generator's suspend states (mostly running), where Trainer's
        // "changed" is compared on its own.
        if below(2) == 0 {
            continue;
        }
        let namespace = namespace_of(&case.new);
        let name = case.new["metadata"]["name"].as_str().unwrap_or_default().to_string();
        // Suspend before and after: running (U2), suspended (U3), resuming (U4), suspending (U5).
        let (old_suspended, new_suspended) =
            [(false, false), (true, true), (true, false), (false, true)][below(4) as usize];
        for (object, suspended) in [(&mut *old, old_suspended), (&mut case.new, new_suspended)] {
            match (suspended, below(3)) {
                (true, _) => object["spec"]["suspend"] = json!(true),
                (false, 0) => {
                    if let Some(spec) = object["spec"].as_object_mut() {
                        spec.remove("suspend");
                    }
                }
                (false, _) => object["spec"]["suspend"] = json!(false),
            }
        }
        let mut state = State::default();
        state.made.suspended = (old_suspended, new_suspended);
        let active = |n: u64| [0, 1, 2][n as usize];
        let replicated_jobs: Vec<(&str, i32)> = match below(4) {
            0 => Vec::new(),
            1 => vec![("dataset-initializer", 0), ("node", 0)],
            2 => vec![("dataset-initializer", 0), ("node", 2)],
            _ => vec![
                ("dataset-initializer", active(below(3))),
                ("model-initializer", active(below(3))),
                ("node", active(below(3))),
            ],
        };
        if !replicated_jobs.is_empty() || below(4) == 0 {
            let deleting = below(7) == 0;
            state.made.jobset_deleting = deleting;
            state.jobset = Some(owned_by(jobset(&replicated_jobs, deleting), &namespace, &name));
        }
        if below(5) == 0 {
            let terminating = [None, Some(0), Some(3)][below(3) as usize];
            let (running, deleting) = (active(below(3)), below(5) == 0);
            state.made.job_active = running > 0;
            state.made.job_stopping = terminating.is_some_and(|n| n > 0) || deleting;
            let job = child_job("node", running, terminating, deleting);
            state.jobs.push(owned_by(job, &namespace, &name));
        }
        if below(10) == 0 {
            // The old run as the TrainJob's own status counts it (kept in the new object, as a
            // client sends back what it read).
            let running = active(below(3));
            state.made.status_active = running > 0;
            let status = json!({"jobsStatus": [{"name": "node", "active": running, "failed": 0,
                                                "ready": 0, "succeeded": 0, "suspended": 0}]});
            old["status"] = status.clone();
            case.new["status"] = status;
        }
        if below(25) == 0 {
            // Setting the opt-out label as a user outside --opt-out-groups (O1).
            state.made.opt_out = old["metadata"]["labels"].get(OPT_OUT_LABEL) != Some(&json!("disabled"));
            case.new["metadata"]["labels"][OPT_OUT_LABEL] = json!("disabled");
        }
        case.state = Some(state);
    }
}

/// What the gate comparison found, per release.
#[derive(Default)]
pub(crate) struct Tally {
    /// UPDATEs with a JobSet given to both sides.
    pub(crate) with_jobset: usize,
    /// UPDATEs the API server admits, decided by both, and how many of them by suspend transition.
    pub(crate) compared: Column,
    pub(crate) transitions: BTreeMap<&'static str, usize>,
    /// Of those, the ones Trainer denies, and the ones it denies because the JobSet is active.
    pub(crate) trainer_denies: usize,
    pub(crate) trainer_active: usize,
    /// trainguard denies where Trainer allows, for a reason docs/webhook.md lists.
    pub(crate) deliberate: BTreeMap<String, usize>,
    /// trainguard's shape rule denied: from v2.2.1 with Trainer's plugin requiring the same
    /// managers, before it where Trainer has no such check.
    pub(crate) shape_same: usize,
    pub(crate) shape_beyond: usize,
    /// UPDATEs of an old object the API server could never have stored (its name refused on
    /// CREATE): no API server sends them, and the webhook answers 400.
    pub(crate) unstorable: usize,
    /// Cases not compared, by reason.
    pub(crate) skipped: Skips,
    pub(crate) differences: Vec<String>,
}

impl Tally {
    /// Of `cases`, those neither compared nor counted as skipped (a failed one is compared).
    pub(crate) fn unaccounted(&self, cases: usize) -> isize {
        cases as isize - (self.compared.all + self.skipped.values().sum::<usize>()) as isize
    }

    pub(crate) fn report(&self, tag: &str) {
        eprintln!(
            "oracle {tag} gate: {} UPDATEs with a JobSet, {} decisions compared {:?} ({} denied by Trainer, {} of \
             them for an active JobSet), deliberate differences {:?}, shape errors {} (Trainer requires the same \
             managers) and {} (Trainer has no such check), {} skipped (an old object no API server stores), other \
             differences {}",
            self.with_jobset,
            self.compared.all,
            self.transitions,
            self.trainer_denies,
            self.trainer_active,
            self.deliberate,
            self.shape_same,
            self.shape_beyond,
            self.unstorable,
            self.differences.len()
        );
        for d in self.differences.iter().take(25) {
            eprintln!("  {d}");
        }
    }
}

/// The release's `--suspend-rule`: v2.0.1 and v2.1.0 forbid a change unless the new object is
/// suspended; v2.2.1 and later allow it when either is.
fn config(version: TrainerVersion) -> RulesConfig {
    let suspend_rule = if version <= TrainerVersion::V2_1 { SuspendRule::New } else { SuspendRule::Either };
    RulesConfig { suspend_rule, ..RulesConfig::default() }
}

/// Trainer's errors: (the "only while suspended" one is there, the "still active" ones, the
/// required fields its plugin finds missing).
fn trainer_errors(answer: &Answer) -> (bool, usize, usize) {
    let suspended = answer.changed.iter().any(|c| c.detail.contains("can only be modified when"));
    let active = answer.changed.iter().filter(|c| c.detail.contains("is still active")).count();
    let required = answer.plugin.iter().filter(|c| c.kind == "FieldValueRequired").count();
    (suspended, active, required)
}

/// The namespace the request is made in: the object's, or `default` (kubectl's, and the oracle's).
fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or("default").to_string()
}

/// trainguard's validating webhook on the UPDATE `case`, with its cluster state; `Err` for a
/// request it cannot read.
fn decide(version: TrainerVersion, case: &Case, old: &Value, state: &State) -> Result<Vec<FieldError>, String> {
    let (mut old, mut new) = (crd::admitted(old, version), crd::admitted(&case.new, version));
    // The API server fills an object's empty namespace from the request's (the oracle does too:
    // `default`, or the new object's for the old one).
    let ns = namespace_of(&new);
    new["metadata"]["namespace"] = json!(ns);
    if old["metadata"]["namespace"].as_str().is_none_or(str::is_empty) {
        old["metadata"]["namespace"] = json!(ns);
    }
    let mut review = Review::update(&case.id, old, new.clone());
    review.namespace = ns;
    review.name = new["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let body = serde_json::to_vec(&review.to_value()).expect("JSON");
    let reviewed = admission::review(Endpoint::Validate, &body, &config(version), &state.view())
        .unwrap_or_else(|e| panic!("{}: {e}", case.id));
    match reviewed.decision.outcome {
        Outcome::Allowed { .. } => Ok(Vec::new()),
        Outcome::Denied { errors, omitted } => {
            assert_eq!(omitted, 0, "{}: errors omitted", case.id);
            Ok(errors)
        }
        Outcome::BadRequest { message, .. } => Err(message),
    }
}

pub(crate) fn compare(version: TrainerVersion, case: &Case, answer: &Answer, tally: &mut Tally) {
    let Some(old) = &case.old else {
        skip(&mut tally.skipped, "gate: a CREATE");
        return;
    };
    let state = case.state.clone().unwrap_or_else(|| State { made: Made::read(old, &case.new), ..State::default() });
    tally.with_jobset += usize::from(state.jobset.is_some());
    if answer.refused() {
        skip(&mut tally.skipped, "gate: the API server refuses the write");
        return;
    }
    if answer.plugin_error.is_some() {
        skip(&mut tally.skipped, "gate: Trainer cannot decode the objects");
        return;
    }
    if crd::judge(old, None, version).errors.iter().any(|e| e.path == "metadata.name") {
        tally.unstorable += 1;
        skip(&mut tally.skipped, "gate: an old object no API server stores (its name)");
        return;
    }
    tally.compared.add(case, 1);
    let suspended = |o: &Value| o.pointer("/spec/suspend").and_then(Value::as_bool).unwrap_or(false);
    let transition = match (suspended(old), suspended(&case.new)) {
        (false, false) => "running",
        (true, true) => "suspended",
        (true, false) => "resuming",
        (false, true) => "suspending",
    };
    *tally.transitions.entry(transition).or_default() += 1;
    let errors = match decide(version, case, old, &state) {
        Ok(errors) => errors,
        Err(message) => {
            tally.differences.push(format!(
                "{} [{}]: trainguard: bad request: {message}\n  old: {old}\n  new: {}",
                case.id,
                version.name(),
                case.new
            ));
            return;
        }
    };
    let (trainer_suspended, trainer_active, required) = trainer_errors(answer);
    let theirs = !answer.changed.is_empty();
    tally.trainer_denies += usize::from(theirs);
    tally.trainer_active += usize::from(trainer_active > 0);
    let count = |rule: Rule| errors.iter().filter(|e| e.rule == rule).count();
    // The shape rule checks the items of a changed overrides field; from v2.2.1 Trainer's plugin
    // requires each patch's manager too (on every write), v2.0.1 and v2.1.0 have no such check.
    let shape = count(Rule::Shape);
    let shape_agrees = if version <= TrainerVersion::V2_1 {
        tally.shape_beyond += usize::from(shape > 0);
        shape == 0 || untargeted(version, &case.new)
    } else {
        tally.shape_same += usize::from(shape > 0);
        shape == 0 || shape == required
    };
    // Every overrides error of Trainer's is one of the two kinds, and each kind matches
    // trainguard's one for one.
    let recognised = answer.changed.len() == usize::from(trainer_suspended) + trainer_active;
    let same =
        shape_agrees && recognised && (count(Rule::U2) > 0) == trainer_suspended && count(Rule::G1) == trainer_active;
    // trainguard's other reasons to deny the change.
    let mut beyond: Vec<Rule> = Vec::new();
    for rule in errors.iter().map(|e| e.rule).filter(|r| !matches!(r, Rule::U2 | Rule::G1 | Rule::Shape)) {
        if !beyond.contains(&rule) {
            beyond.push(rule);
        }
    }
    // The gate runs only on a change: the overrides' JSON differs, or (from v2.2) two patches of
    // the new object share a manager, which Trainer's defaulter then re-stamps (a necessary
    // condition, read from the objects as generated).
    let field = version.overrides().json_name();
    let patches = case.new["spec"][field].as_array().cloned().unwrap_or_default();
    let shared_manager = version >= TrainerVersion::V2_2
        && patches.iter().enumerate().any(|(i, p)| patches[..i].iter().any(|q| q.get("manager") == p.get("manager")));
    let overrides_differ = old["spec"].get(field) != case.new["spec"].get(field) || shared_manager;
    // Each of them must be one docs/webhook.md lists ("Where trainguard is deliberately stricter
    // than Trainer") and justified by the state the generator made, whether Trainer denies too
    // or not.
    let unjustified: Vec<&str> =
        beyond.iter().filter(|r| !justified(**r, &state.made, overrides_differ)).map(|r| r.as_str()).collect();
    let names: BTreeSet<&str> = beyond.iter().map(|r| r.as_str()).collect();
    if same && unjustified.is_empty() {
        if !theirs && !beyond.is_empty() {
            // trainguard denies where Trainer allows: counted, by rules.
            let name = names.into_iter().collect::<Vec<_>>().join(",");
            *tally.deliberate.entry(name).or_default() += 1;
        }
        return;
    }
    let why = if unjustified.is_empty() {
        String::new()
    } else {
        format!(" ({} not justified by the generated state {:?})", unjustified.join(","), state.made)
    };
    let ours: Vec<String> = errors.iter().map(|e| format!("{}: {e}", e.rule)).collect();
    let theirs: Vec<String> =
        answer.changed.iter().chain(&answer.plugin).map(|c| format!("{} {}: {}", c.kind, c.field, c.detail)).collect();
    tally.differences.push(format!(
        "{} [{}]: gate: trainguard {ours:?}, Trainer {theirs:?}{why}\n  state: {:?}\n  old: {}\n  new: {}",
        case.id,
        version.name(),
        state,
        case.old.as_ref().map_or("-".to_string(), Value::to_string),
        case.new
    ));
}
