//! The rules that decide an admission review, as one type. Each becomes the audit annotation
//! `trainguard.io/rule` and the `rule` label of `trainguard_admission_decisions_total`; what each
//! means is in docs/webhook.md ("Validating rules", "The JobSet gate", "Denials", "Mutating").

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A subresource update (e.g. `status`): allowed with no check.
    U0,
    /// The overrides did not change: no overrides check, no cluster lookup.
    U1,
    /// The overrides changed while the job runs before and after: denied.
    U2,
    /// JobSet gate: a replicated job of the JobSet has active jobs.
    G1,
    /// JobSet gate, on resume only: the JobSet is being deleted.
    G2,
    /// JobSet gate: a child Job has active pods.
    G3,
    /// JobSet gate: the TrainJob's own `status.jobsStatus` counts active jobs.
    G4,
    /// JobSet gate, on resume only: a child Job has terminating pods or is being deleted.
    G5,
    /// `spec.managedBy` changed on UPDATE.
    M1,
    /// `spec.managedBy` on CREATE is not an allowed value.
    M2,
    /// The opt-out label set or changed by someone outside `--opt-out-groups`.
    O1,
    /// An overrides item without its target (`targetJobs`, `manager`).
    Shape,
    /// `metadata.name` is not a DNS-1035 label.
    Name,
    /// `validate` only: the object does not fit the Trainer release's TrainJob schema.
    Schema,
    /// `validate` only, offline: suspend and change in one update of a job whose old manifest
    /// says it runs; the cluster's gate would find its JobSet active (G1/G3) and deny.
    U5,
    /// The cluster state the gate needs is unknown (retryable).
    ClusterUnknown,
    /// The request body did not arrive before the deadline (retryable).
    Deadline,
    /// Allowed: a CREATE that passed every check.
    AllowCreate,
    /// Allowed: a changed overrides that passed the JobSet gate.
    AllowGate,
    AllowDelete,
    AllowConnect,
    /// The mutating webhook on anything but CREATE.
    AllowNotCreate,
    /// The mutating webhook: every default was already there.
    DefaultsPresent,
    /// The mutating webhook added defaults.
    Defaulted,
    /// The object does not decode as a TrainJob (400).
    BadObject,
    /// The review is for another kind (400).
    WrongKind,
    /// `request.operation` is not one of the four (400).
    BadOperation,
}

impl Rule {
    pub const ALL: [Rule; 27] = [
        Rule::U0,
        Rule::U1,
        Rule::U2,
        Rule::G1,
        Rule::G2,
        Rule::G3,
        Rule::G4,
        Rule::G5,
        Rule::M1,
        Rule::M2,
        Rule::O1,
        Rule::Shape,
        Rule::Name,
        Rule::Schema,
        Rule::U5,
        Rule::ClusterUnknown,
        Rule::Deadline,
        Rule::AllowCreate,
        Rule::AllowGate,
        Rule::AllowDelete,
        Rule::AllowConnect,
        Rule::AllowNotCreate,
        Rule::DefaultsPresent,
        Rule::Defaulted,
        Rule::BadObject,
        Rule::WrongKind,
        Rule::BadOperation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::U0 => "U0",
            Rule::U1 => "U1",
            Rule::U2 => "U2",
            Rule::G1 => "G1",
            Rule::G2 => "G2",
            Rule::G3 => "G3",
            Rule::G4 => "G4",
            Rule::G5 => "G5",
            Rule::M1 => "M1",
            Rule::M2 => "M2",
            Rule::O1 => "O1",
            Rule::Shape => "shape",
            Rule::Name => "name",
            Rule::Schema => "schema",
            Rule::U5 => "U5",
            Rule::ClusterUnknown => "cluster-unknown",
            Rule::Deadline => "deadline",
            Rule::AllowCreate => "allow-create",
            Rule::AllowGate => "allow-gate",
            Rule::AllowDelete => "allow-delete",
            Rule::AllowConnect => "allow-connect",
            Rule::AllowNotCreate => "allow-not-create",
            Rule::DefaultsPresent => "defaults-present",
            Rule::Defaulted => "defaulted",
            Rule::BadObject => "bad-object",
            Rule::WrongKind => "wrong-kind",
            Rule::BadOperation => "bad-operation",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;

    /// Each rule has its own label, and every label is documented in docs/webhook.md.
    #[test]
    fn labels_are_distinct_and_documented() {
        let doc = include_str!("../../../../docs/webhook.md");
        let mut seen = std::collections::HashSet::new();
        for rule in Rule::ALL {
            assert!(seen.insert(rule.as_str()), "{rule:?} shares its label");
            let named = [format!("`{rule}`"), format!("`{rule},"), format!("| {rule} |")];
            assert!(named.iter().any(|n| doc.contains(n.as_str())), "docs/webhook.md does not name `{rule}`");
        }
    }
}
