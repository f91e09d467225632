//! `--namespaces` (env `TRAINGUARD_NAMESPACES`): the controller's namespace allow-list, as
//! controller-runtime's `cache.Options.DefaultNamespaces`. Unset, the controller watches every
//! namespace with cluster-wide watches. Set, every namespaced kind is watched once per listed
//! namespace (`Api::namespaced`), so the controller needs only RoleBindings there; nodes are
//! cluster-scoped and stay watched cluster-wide (node failure needs them wherever the pods are).

use crate::dns_label::{self, LabelProblem};

/// Which namespaces the controller watches and acts in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Namespaces {
    /// Every namespace: cluster-wide watches.
    #[default]
    All,
    /// Only these (deduplicated, in the order given), each watched on its own.
    Only(Vec<String>),
}

impl Namespaces {
    /// The allow-list from the flag's values: empty (or only empty items) is every namespace.
    /// Each name must be a namespace name (a DNS-1123 label).
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, String> {
        let mut names: Vec<String> = Vec::new();
        for value in values.iter().flat_map(|v| v.as_ref().split(',')) {
            let name = value.trim();
            if name.is_empty() {
                continue;
            }
            if let Some(why) = namespace_name_problem(name) {
                return Err(format!("--namespaces: {name:?} is not a namespace name: {why}"));
            }
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        Ok(if names.is_empty() { Namespaces::All } else { Namespaces::Only(names) })
    }

    /// The namespaces to watch one by one; `None` for every namespace (one cluster-wide watch).
    pub(crate) fn listed(&self) -> Option<&[String]> {
        match self {
            Namespaces::All => None,
            Namespaces::Only(names) => Some(names),
        }
    }

    /// For the start-up log line.
    pub(crate) fn describe(&self) -> String {
        match self {
            Namespaces::All => "all".to_string(),
            Namespaces::Only(names) => names.join(","),
        }
    }
}

/// `name` is never empty here: empty items of the list are skipped.
fn namespace_name_problem(name: &str) -> Option<&'static str> {
    dns_label::check(name).err().map(|problem| match problem {
        LabelProblem::Length => "at most 63 characters",
        LabelProblem::Characters => "only lowercase letters, digits and '-'",
        LabelProblem::Ends => "must start and end with a letter or digit",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_allow_list() {
        let only = |names: &[&str]| Namespaces::Only(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(Namespaces::parse::<&str>(&[]), Ok(Namespaces::All));
        assert_eq!(Namespaces::parse(&[""]), Ok(Namespaces::All), "TRAINGUARD_NAMESPACES= (empty) is all");
        assert_eq!(Namespaces::parse(&["a,b"]), Ok(only(&["a", "b"])));
        assert_eq!(Namespaces::parse(&["team-a", " team-b ,", "team-a"]), Ok(only(&["team-a", "team-b"])));
        // (a name that is not a namespace's, why)
        let bad = [
            ("Team", "only lowercase letters, digits and '-'"),
            ("a_b", "only lowercase letters, digits and '-'"),
            ("-a", "must start and end with a letter or digit"),
            ("a-", "must start and end with a letter or digit"),
            (&"x".repeat(64), "at most 63 characters"),
        ];
        for (name, why) in bad {
            let err = Namespaces::parse(&[name]).unwrap_err();
            assert_eq!(err, format!("--namespaces: {name:?} is not a namespace name: {why}"));
        }
        assert_eq!(only(&["a", "b"]).listed(), Some(&["a".to_string(), "b".to_string()][..]));
        assert_eq!(Namespaces::All.listed(), None);
    }
}
