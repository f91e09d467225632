//! The rules that decide an admission review, as one table: each row gives the rule its label (the
//! audit annotation `trainguard.io/rule` and the `rule` label of
//! `trainguard_admission_decisions_total`), what it guards, and the section of the docs that
//! explains it.

use std::fmt;

/// Where a rule is explained: a page and one of its section headings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocSection {
    /// The page, from the repository's root (`docs/webhook.md`).
    pub page: &'static str,
    /// The heading of the section, without its `#`s.
    pub heading: &'static str,
}

const VALIDATING: DocSection = DocSection { page: "docs/webhook.md", heading: "3. Validating rules (UPDATE)" };
const GATE: DocSection = DocSection { page: "docs/webhook.md", heading: "4. The JobSet gate and cluster state" };
const CREATE: DocSection = DocSection { page: "docs/webhook.md", heading: "5. CREATE, DELETE, CONNECT" };
const OPT_OUT: DocSection = DocSection { page: "docs/webhook.md", heading: "The opt-out label (rule O1)" };
const WIRE: DocSection = DocSection { page: "docs/webhook.md", heading: "1. Endpoints and wire format" };
const MUTATING: DocSection = DocSection { page: "docs/webhook.md", heading: "7. Mutating (defaulting)" };
const SHAPES: DocSection = DocSection { page: "docs/webhook.md", heading: "8. Other request shapes" };
const HANDLING: DocSection = DocSection { page: "docs/webhook.md", heading: "Request handling" };
const OFFLINE: DocSection = DocSection { page: "docs/ci.md", heading: "What offline verdicts mean" };
const SCHEMA: DocSection = DocSection { page: "docs/ci.md", heading: "Checking fields against the TrainJob schema" };

/// The table of rules, one row each: `Variant = "label", where it is explained, what it guards`.
/// It declares [`Rule`], [`Rule::ALL`], [`Rule::as_str`], [`Rule::guards`] and [`Rule::doc`].
macro_rules! rules {
    ($($rule:ident = $label:literal, $doc:ident, $guards:literal;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule {
            $(#[doc = $guards] $rule,)*
        }

        impl Rule {
            pub const ALL: [Rule; [$($label),*].len()] = [$(Rule::$rule),*];

            /// The label: the audit annotation's and the metric's.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Rule::$rule => $label,)*
                }
            }

            /// What the rule guards, or what the answer it labels means.
            pub fn guards(self) -> &'static str {
                match self {
                    $(Rule::$rule => $guards,)*
                }
            }

            /// Where the rule is explained.
            pub fn doc(self) -> DocSection {
                match self {
                    $(Rule::$rule => $doc,)*
                }
            }
        }
    };
}

rules! {
    U0 = "U0", VALIDATING, "A subresource update (e.g. `status`): allowed with no check.";
    U1 = "U1", VALIDATING, "The overrides did not change: no overrides check, no cluster lookup.";
    U2 = "U2", VALIDATING, "The overrides changed while the job runs before and after: denied.";
    G1 = "G1", GATE, "JobSet gate: a replicated job of the JobSet has active jobs.";
    G2 = "G2", GATE, "JobSet gate, on resume only: the JobSet is being deleted.";
    G3 = "G3", GATE, "JobSet gate: a child Job has active pods.";
    G4 = "G4", GATE, "JobSet gate: the TrainJob's own `status.jobsStatus` counts active jobs.";
    G5 = "G5", GATE, "JobSet gate, on resume only: a child Job has terminating pods or is being deleted.";
    M1 = "M1", VALIDATING, "`spec.managedBy` changed on UPDATE.";
    M2 = "M2", VALIDATING, "`spec.managedBy` on CREATE is not an allowed value.";
    O1 = "O1", OPT_OUT, "The opt-out label set or changed by someone outside `--opt-out-groups`.";
    Shape = "shape", CREATE, "An overrides item without its target (`targetJobs`, `manager`).";
    Name = "name", CREATE, "`metadata.name` is not a DNS-1035 label.";
    Schema = "schema", SCHEMA, "`validate` only: the object does not fit the Trainer release's TrainJob schema.";
    U5 = "U5", OFFLINE, "`validate` only, offline: suspend and change in one update of a job whose old manifest \
        says it runs; the cluster's gate would find its JobSet active (G1/G3) and deny.";
    ClusterUnknown = "cluster-unknown", GATE, "The cluster state the gate needs is unknown (retryable).";
    Deadline = "deadline", WIRE, "The request body did not arrive before the deadline (retryable).";
    AllowCreate = "allow-create", HANDLING, "Allowed: a CREATE that passed every check.";
    AllowGate = "allow-gate", HANDLING, "Allowed: a changed overrides that passed the JobSet gate.";
    AllowDelete = "allow-delete", HANDLING, "Allowed: a DELETE.";
    AllowConnect = "allow-connect", HANDLING, "Allowed: a CONNECT.";
    AllowNotCreate = "allow-not-create", MUTATING, "The mutating webhook on anything but CREATE.";
    DefaultsPresent = "defaults-present", MUTATING, "The mutating webhook: every default was already there.";
    Defaulted = "defaulted", MUTATING, "The mutating webhook added defaults.";
    BadObject = "bad-object", SHAPES, "The object does not decode as a TrainJob (400).";
    WrongKind = "wrong-kind", SHAPES, "The review is for another kind (400).";
    BadOperation = "bad-operation", SHAPES, "`request.operation` is not one of the four (400).";
}

impl Rule {
    /// The rule labelled `label`.
    pub fn from_label(label: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.as_str() == label)
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

    /// Each rule's section is a heading of its page.
    #[test]
    fn each_rule_points_at_a_section_that_exists() {
        for rule in Rule::ALL {
            let doc = rule.doc();
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(doc.page);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let heading = text.lines().any(|l| l.trim_start_matches('#').trim() == doc.heading && l.starts_with('#'));
            assert!(heading, "{rule}: {} has no section {:?}", doc.page, doc.heading);
            assert_eq!(Rule::from_label(rule.as_str()), Some(rule));
        }
    }

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
