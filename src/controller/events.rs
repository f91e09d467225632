//! Publishing events (`events.k8s.io/v1`, reporting controller `trainguard`) through kube's
//! recorder. Deduplication per (UID, reason, episode) happens before this, in the controller state.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder, Reporter};

use trainguard_core::planner::{EventType, PlanRule, PlannedEvent, Target};

pub(crate) const REPORTING_CONTROLLER: &str = "trainguard";

/// The object reference an event is about.
pub(crate) fn object_ref(target: &Target) -> ObjectReference {
    ObjectReference {
        api_version: Some(target.kind.api_version()),
        kind: Some(target.kind.kind().to_string()),
        name: Some(target.id.name.to_string()),
        namespace: Some(target.id.namespace.to_string()),
        uid: Some(target.uid.to_string()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    }
}

/// The `action` field of an event: what the companion was doing.
fn action(rule: PlanRule) -> &'static str {
    match rule {
        PlanRule::Ttl => "TTLAfterFinished",
        PlanRule::Suspend => "SuspendCheck",
        PlanRule::NodeFailure => "NodeFailure",
    }
}

#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
}

impl EventSink {
    /// `instance`: this replica (the pod name), shown as the reporting instance.
    pub fn new(client: Client, instance: Option<String>) -> Self {
        EventSink { recorder: Recorder::new(client, Reporter { controller: REPORTING_CONTROLLER.into(), instance }) }
    }

    pub(crate) async fn publish(&self, event: &PlannedEvent, rule: PlanRule) -> Result<(), kube::Error> {
        let ev = Event {
            type_: match event.type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.published_reason.clone(),
            // The API server rejects notes over 1 kB.
            note: Some(truncate(&event.message, 1000)),
            action: action(rule).to_string(),
            secondary: event.related.as_ref().map(object_ref),
        };
        self.recorder.publish(&ev, &object_ref(&event.target)).await
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
