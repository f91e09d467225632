//! The RBAC rules under deploy/, from the API-call table `trainguard::rbac::API_CALLS`: the
//! `rules:` of every Role and ClusterRole, in the kustomize files and the Helm chart alike, are the
//! table's rows for that role ([`ROLES`]). `cargo run --example gen_rbac` writes them;
//! `tests/cli/rbac.rs` fails while a file differs. Only the rules are generated: the objects
//! around them (names, labels, bindings, the chart's conditions) are written by hand, and
//! `tests/cli/deploy.rs` checks what each install binds to whom.

use std::path::{Path, PathBuf};

use trainguard::rbac::{API_CALLS, ApiCall, Scope, cluster_scoped};

/// What to do when the files differ from the table.
pub const REGENERATE: &str = "run `cargo run --example gen_rbac` and commit the result";

/// The first line under every generated `rules:`.
const GENERATED: &str =
    "  # Generated from src/rbac.rs by `cargo run --example gen_rbac`: edit the table, not these rules.";

/// Which rows of the table a role grants.
pub type Rows = fn(&ApiCall) -> bool;

/// Each role under deploy/, by the end of its name (`trainguard-<role>` in kustomize,
/// `<fullname>-<role>` in the chart), and which rows of the table it grants.
pub static ROLES: [(&str, Rows); 6] = [
    ("webhook", |c| c.scope == Scope::Cluster && c.by.webhook()),
    ("controller", |c| c.scope == Scope::Cluster && c.by.controller()),
    // With a namespace allow-list: what a RoleBinding cannot grant, so a ClusterRoleBinding does.
    ("controller-nodes", |c| c.scope == Scope::Cluster && c.by.controller() && cluster_scoped(c.resource)),
    ("controller-act", |c| c.scope == Scope::ClusterAct && c.by.controller()),
    ("ttl-stash", |c| c.scope == Scope::ClusterTtlStash && c.by.controller()),
    ("leader-election", |c| c.scope == Scope::LeaseNamespace && c.by.controller()),
];

/// The lines under `rules:` for the rows `keep` selects, in the table's order: one rule per run of
/// rows with the same group, verbs and purpose (the six Training Operator kinds share one), each
/// after its purpose.
pub fn rules(keep: Rows) -> String {
    let mut runs: Vec<(&ApiCall, Vec<&str>)> = Vec::new();
    for call in API_CALLS.iter().filter(|c| keep(c)) {
        match runs.last_mut() {
            Some((first, resources))
                if (first.group, first.verbs, first.purpose) == (call.group, call.verbs, call.purpose) =>
            {
                resources.push(call.resource);
            }
            _ => runs.push((call, vec![call.resource])),
        }
    }
    let mut out = format!("{GENERATED}\n");
    for (call, resources) in runs {
        out += &format!(
            "  # {}\n  - apiGroups: {}\n    resources: {}\n    verbs: {}\n",
            call.purpose,
            flow(&[call.group]),
            flow(&resources),
            flow(call.verbs)
        );
    }
    out
}

/// A YAML flow sequence of quoted strings, as the hand-written manifests have them.
fn flow(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// `text` (a manifest or a chart template) with the `rules:` of each Role and ClusterRole
/// replaced by the generated ones, and the roles it holds. A role that no entry of [`ROLES`]
/// names is an error: every grant under deploy/ comes from the table.
pub fn regenerate(text: &str) -> Result<(String, Vec<&'static str>), String> {
    let mut out = String::with_capacity(text.len());
    let mut found = Vec::new();
    let (mut role, mut name) = (false, None);
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        out += line;
        out.push('\n');
        if line.starts_with("---") {
            (role, name) = (false, None);
        } else if line == "kind: Role" || line == "kind: ClusterRole" {
            role = true;
        } else if name.is_none()
            && let Some(n) = line.strip_prefix("  name: ")
        {
            name = Some(n);
        } else if role && line == "rules:" {
            let name = name.ok_or("a role without metadata.name before its rules")?;
            let (key, keep) = ROLES
                .iter()
                .find(|(key, _)| {
                    name.strip_suffix(key).is_some_and(|head| head.ends_with("trainguard-") || head.ends_with("}}-"))
                })
                .ok_or_else(|| format!("role {name}: its name ends in no role of the API-call table"))?;
            out += &rules(*keep);
            found.push(*key);
            // The old rules: every indented line up to the next object or template line.
            while lines.next_if(|l| l.starts_with("  ")).is_some() {}
        }
    }
    Ok((out, found))
}

/// Every YAML file under deploy/ (the chart's templates included) that holds a Role or
/// ClusterRole, relative to `root`, sorted.
pub fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.join("deploy")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|t| t.lines().any(|l| l == "kind: Role" || l == "kind: ClusterRole"))
            {
                out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    out.sort();
    out
}
