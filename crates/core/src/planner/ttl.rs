//! docs/controller.md (TTL after finished): TTL after finished, as a backstop for the training operator (which never applies it
//! to an `ExitCode` failure without `completionTime`, and before v1.8.1 stalled suspended jobs).

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::actions::{Action, EventType, KeyPlan, Observation, PlanRule, Reason, Target, TargetKind};
use super::actions::{after_write, event, verb, warning};
use crate::duration::{fmt_duration, plus};
use crate::planner::config::{PlanConfig, Propagation};
use crate::planner::facts::{FinishKind, JobFacts, SecondsAnnotation, TRAINJOB_TTL_ANNOTATION, TrainJobFacts};

/// A finish time further than this in the future is clock skew: warn, wait, never clamp.
pub(crate) const CLOCK_SKEW_TOLERANCE: SignedDuration = SignedDuration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlVerdict {
    /// Not eligible; the reason says why.
    Skip(&'static str),
    /// Finished, but with neither `completionTime` nor a condition time: nothing to count from.
    NoFinishTime,
    Pending {
        finish_at: Timestamp,
        expires_at: Timestamp,
        skewed: bool,
        from_condition: bool,
    },
    Expired {
        finish_at: Timestamp,
        expires_at: Timestamp,
        from_condition: bool,
    },
}

/// docs/controller.md (TTL after finished) for one job at `now`. Also the executor's re-check on the live object.
pub fn verdict(job: &JobFacts, now: Timestamp, config: &PlanConfig) -> TtlVerdict {
    if let Some(why) = job.guard() {
        return TtlVerdict::Skip(why);
    }
    if !config.ttl {
        return TtlVerdict::Skip("TTL backstop disabled (--ttl=false)");
    }
    let Some(ttl) = job.ttl_seconds else {
        return TtlVerdict::Skip("no ttlSecondsAfterFinished");
    };
    if ttl < 0 {
        return TtlVerdict::Skip("negative ttlSecondsAfterFinished");
    }
    // The spec, not the status: suspension arrives before the status says so.
    if job.suspend {
        return TtlVerdict::Skip("suspended");
    }
    let Some(finished) = job.finished else {
        return TtlVerdict::Skip("not finished");
    };
    let (finish_at, from_condition) = match (finished.completion_time, finished.condition_time) {
        (Some(t), _) => (t, false),
        (None, Some(t)) => (t, true),
        (None, None) => return TtlVerdict::NoFinishTime,
    };
    expiry(finish_at, from_condition, ttl, now, config)
}

/// Pending or expired: `ttl` plus the grace after `finish_at`, unless the finish time is skewed.
fn expiry(finish_at: Timestamp, from_condition: bool, ttl: i64, now: Timestamp, config: &PlanConfig) -> TtlVerdict {
    let expires_at = plus(plus(finish_at, SignedDuration::from_secs(ttl)), config.ttl_grace);
    let skewed = finish_at > plus(now, CLOCK_SKEW_TOLERANCE);
    if now >= expires_at && !skewed {
        TtlVerdict::Expired { finish_at, expires_at, from_condition }
    } else {
        TtlVerdict::Pending { finish_at, expires_at, skewed, from_condition }
    }
}

pub(crate) fn plan(job: &JobFacts, target: &Target, now: Timestamp, config: &PlanConfig, out: &mut KeyPlan) {
    let kind = match target.kind {
        TargetKind::Job(k) => k.kind(),
        _ => "",
    };
    let ttl = job.ttl_seconds.unwrap_or(0);
    let finished_how = job.finished.map_or("", |f| f.kind.as_str());
    match verdict(job, now, config) {
        TtlVerdict::Skip(_) => {}
        TtlVerdict::NoFinishTime => {
            let message = format!(
                "Job is {finished_how} but has neither status.completionTime nor a lastTransitionTime on its \
                 {finished_how} condition: ttlSecondsAfterFinished={ttl} cannot be applied"
            );
            no_finish_time(out, config, target, message);
        }
        TtlVerdict::Pending { finish_at, expires_at, skewed, from_condition } => {
            let episode = format!("finished@{finish_at}");
            if from_condition {
                out.push(
                    PlanRule::Ttl,
                    event(
                        config,
                        target,
                        EventType::Normal,
                        Reason::TTLNoFinishTime,
                        format!(
                            "Job is {finished_how} without status.completionTime, so the training operator's own \
                             TTL never fires; trainguard counts ttlSecondsAfterFinished={ttl} from the \
                             {finished_how} condition ({finish_at}) and deletes it at {expires_at}"
                        ),
                        episode.clone(),
                    ),
                );
            }
            if skewed {
                out.push(PlanRule::Ttl, clock_skew_event(config, target, "Job", finish_at, now, episode));
            }
            out.observations.push(Observation::TtlScheduled(kind));
            out.push(PlanRule::Ttl, Action::Requeue { target: target.clone(), at: expires_at, why: "ttl-expiry" });
        }
        TtlVerdict::Expired { finish_at, expires_at, from_condition } => {
            out.push(
                PlanRule::Ttl,
                Action::DeleteJob {
                    target: target.clone(),
                    propagation: config.ttl_propagation,
                    finish_at,
                    expires_at,
                },
            );
            let source = if from_condition {
                format!("the {finished_how} condition (no completionTime)")
            } else {
                "status.completionTime".to_string()
            };
            let message = format!(
                "{} by trainguard: {finished_how} at {finish_at} (from {source}), ttlSecondsAfterFinished={ttl} plus \
                 --ttl-grace {} passed at {expires_at}; propagation {}",
                verb(config, "Deleted", "Would be deleted"),
                fmt_duration(config.ttl_grace),
                config.ttl_propagation.as_str()
            );
            out.push(PlanRule::Ttl, deleted_event(config, target, message, finish_at));
        }
    }
}

/// The event for a TTL delete that failed with an error other than 404/409 (published by the
/// executor, deduplicated like the others).
pub fn delete_failed_message(error: &str) -> String {
    format!("TTL deletion failed, retrying with backoff: {error}")
}

/// Where a TrainJob's TTL comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrainJobTtl {
    /// Neither the field nor the annotation.
    None,
    /// `spec.ttlSecondsAfterFinished`, once the CRD has it: it wins over the annotation.
    Field(i64),
    /// Annotation `trainguard.io/ttl-seconds-after-finished`.
    Annotation(i64),
    /// The annotation is not a non-negative integer.
    Invalid(SecondsAnnotation),
}

impl TrainJobTtl {
    pub(crate) fn of(tj: &TrainJobFacts) -> Self {
        if let Some(ttl) = tj.spec_ttl {
            return TrainJobTtl::Field(ttl);
        }
        match &tj.ttl_annotation {
            None => TrainJobTtl::None,
            Some(SecondsAnnotation::Seconds(ttl)) if *ttl >= 0 => TrainJobTtl::Annotation(*ttl),
            Some(other) => TrainJobTtl::Invalid(other.clone()),
        }
    }

    pub(crate) fn seconds(&self) -> Option<i64> {
        match self {
            TrainJobTtl::Field(ttl) | TrainJobTtl::Annotation(ttl) => Some(*ttl),
            _ => None,
        }
    }

    /// How the TTL is named in messages.
    pub(crate) fn source(&self) -> String {
        match self {
            TrainJobTtl::Field(ttl) => format!("spec.ttlSecondsAfterFinished={ttl}"),
            TrainJobTtl::Annotation(ttl) => format!("{TRAINJOB_TTL_ANNOTATION}={ttl}"),
            _ => String::new(),
        }
    }
}

/// The TTL rule for a TrainJob at `now` (opt-in per object until Trainer has its own): finished
/// (`Complete` or `Failed` True) and not suspended, counted from that condition's
/// `lastTransitionTime`. Also the executor's re-check on the live object.
pub fn trainjob_verdict(tj: &TrainJobFacts, now: Timestamp, config: &PlanConfig) -> TtlVerdict {
    if tj.deleting {
        return TtlVerdict::Skip("being deleted");
    }
    if !tj.managed {
        return TtlVerdict::Skip("not managed by Trainer (spec.managedBy)");
    }
    if tj.ignored {
        return TtlVerdict::Skip("opted out (trainguard.io/ignore)");
    }
    if !config.ttl {
        return TtlVerdict::Skip("TTL backstop disabled (--ttl=false)");
    }
    let Some(ttl) = TrainJobTtl::of(tj).seconds() else {
        return TtlVerdict::Skip("no TTL, or an unreadable annotation");
    };
    if ttl < 0 {
        return TtlVerdict::Skip("negative ttlSecondsAfterFinished");
    }
    if tj.suspend {
        return TtlVerdict::Skip("suspended");
    }
    let Some((_, finished_at)) = tj.finished_condition else {
        return TtlVerdict::Skip("not finished");
    };
    let Some(finish_at) = finished_at else { return TtlVerdict::NoFinishTime };
    expiry(finish_at, true, ttl, now, config)
}

/// The TrainJob's finishing condition as Trainer names it.
fn trainjob_finished_how(tj: &TrainJobFacts) -> &'static str {
    match tj.finished_condition {
        Some((FinishKind::Succeeded, _)) => "Complete",
        Some((FinishKind::Failed, _)) => "Failed",
        None => "",
    }
}

/// The TTL of a TrainJob (propagation Background: its JobSet and pods go after it).
pub(crate) fn plan_trainjob(
    tj: &TrainJobFacts,
    target: &Target,
    now: Timestamp,
    config: &PlanConfig,
    out: &mut KeyPlan,
) {
    let ttl = TrainJobTtl::of(tj);
    let how = trainjob_finished_how(tj);
    if let TrainJobTtl::Invalid(value) = &ttl {
        if config.ttl && !tj.deleting && tj.managed && !tj.ignored {
            push_warning(
                out,
                config,
                target,
                Reason::TTLAnnotationInvalid,
                format!(
                    "Annotation {TRAINJOB_TTL_ANNOTATION}={} is not a whole number of seconds (0 or more): this \
                     TrainJob gets no TTL until it is fixed",
                    value.shown()
                ),
                format!("invalid@{}", value.dedup_key()),
            );
        }
        return;
    }
    match trainjob_verdict(tj, now, config) {
        TtlVerdict::Skip(_) => {}
        TtlVerdict::NoFinishTime => {
            let message = format!(
                "TrainJob is {how} but its {how} condition has no lastTransitionTime: {} cannot be applied",
                ttl.source()
            );
            no_finish_time(out, config, target, message);
        }
        TtlVerdict::Pending { finish_at, expires_at, skewed, .. } => {
            if skewed {
                let episode = format!("finished@{finish_at}");
                out.push(PlanRule::Ttl, clock_skew_event(config, target, "TrainJob", finish_at, now, episode));
            }
            out.observations.push(Observation::TtlScheduled("TrainJob"));
            out.push(PlanRule::Ttl, Action::Requeue { target: target.clone(), at: expires_at, why: "ttl-expiry" });
        }
        TtlVerdict::Expired { finish_at, expires_at, .. } => {
            out.push(
                PlanRule::Ttl,
                Action::DeleteJob {
                    target: target.clone(),
                    propagation: Propagation::Background,
                    finish_at,
                    expires_at,
                },
            );
            let message = format!(
                "{} by trainguard: {how} at {finish_at} (the {how} condition), {} plus --ttl-grace {} passed at \
                 {expires_at}; propagation Background",
                verb(config, "Deleted", "Would be deleted"),
                ttl.source(),
                fmt_duration(config.ttl_grace),
            );
            out.push(PlanRule::Ttl, deleted_event(config, target, message, finish_at));
        }
    }
}

/// Pushes a Warning event of the TTL rule.
pub(super) fn push_warning(
    out: &mut KeyPlan,
    config: &PlanConfig,
    target: &Target,
    reason: Reason,
    message: String,
    episode: String,
) {
    out.push(PlanRule::Ttl, warning(config, target, reason, message, episode));
}

/// The Warning that a finished job has no time to count its TTL from.
fn no_finish_time(out: &mut KeyPlan, config: &PlanConfig, target: &Target, message: String) {
    push_warning(out, config, target, Reason::TTLNoFinishTime, message, "no-finish-time".to_string());
}

/// The event of a TTL delete: published once the delete went through (`after_write`), not before.
fn deleted_event(config: &PlanConfig, target: &Target, message: String, finish_at: Timestamp) -> Action {
    after_write(event(
        config,
        target,
        EventType::Normal,
        Reason::TTLExpiredDeleted,
        message,
        format!("finished@{finish_at}"),
    ))
}

/// A job that finished in the future of this controller's clock: the TTL waits, unclamped.
fn clock_skew_event(
    config: &PlanConfig,
    target: &Target,
    kind: &str,
    finish_at: Timestamp,
    now: Timestamp,
    episode: String,
) -> Action {
    warning(
        config,
        target,
        Reason::TTLClockSkew,
        format!(
            "{kind} finished at {finish_at}, which is {} in the future of this controller's clock ({now}): waiting, \
             the TTL is not clamped; check the clocks of the nodes",
            fmt_duration(finish_at.duration_since(now))
        ),
        episode,
    )
}
