//! The RBAC under deploy/, from the API-call table `trainguard::rbac::API_CALLS`: every Role and
//! ClusterRole, in the kustomize files and the Helm chart alike, has the table's rows for that role
//! as its `rules:` and is followed by its binding to the ServiceAccount of the process that makes
//! those calls ([`ROLES`]). `cargo run --example gen_rbac` writes both; `tests/cli/rbac.rs` fails
//! while a file differs. The rest of each role (its name, labels, comments, the chart's
//! conditions) is written by hand; `tests/cli/deploy.rs` checks what each install grants to whom.

use std::path::{Path, PathBuf};

use trainguard::rbac::{API_CALLS, ApiCall, Scope, cluster_scoped};

/// What to do when the files differ from the table.
pub const REGENERATE: &str = "run `cargo run --example gen_rbac` and commit the result";

/// The first line under every generated `rules:`.
const GENERATED: &str =
    "  # Generated from src/rbac.rs by `cargo run --example gen_rbac`: edit the table, not these rules.";

/// The namespace of the kustomize base, which its bindings' subjects name (an overlay's
/// `namespace:` moves them with everything else).
const KUSTOMIZE_NAMESPACE: &str = "trainguard-system";

/// Which rows of the table a role grants.
pub type Rows = fn(&ApiCall) -> bool;

/// Whose ServiceAccount (`trainguard-<process>` in kustomize, `<fullname>-<process>` in the chart) a
/// role is bound to, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The webhook's, by a ClusterRoleBinding.
    Webhook,
    /// The controller's, once: by a ClusterRoleBinding for a ClusterRole, by a RoleBinding in its
    /// namespace for a Role.
    Controller,
    /// The controller's, cluster-wide or, with its namespace allow-list, in each listed namespace:
    /// the chart's `trainguard.controllerBinding` writes a ClusterRoleBinding or those RoleBindings;
    /// in kustomize the component controller-namespaces deletes the ClusterRoleBinding and the
    /// user's overlay writes the RoleBindings.
    ControllerPerListedNamespace,
}

impl Binding {
    pub fn process(self) -> &'static str {
        match self {
            Binding::Webhook => "webhook",
            Binding::Controller | Binding::ControllerPerListedNamespace => "controller",
        }
    }
}

/// Each role under deploy/, by the end of its name (`trainguard-<role>` in kustomize,
/// `<fullname>-<role>` in the chart): its binding, and which rows of the table it grants.
pub static ROLES: [(&str, Binding, Rows); 6] = [
    ("webhook", Binding::Webhook, |c| c.scope == Scope::Cluster && c.by.webhook()),
    ("controller", Binding::ControllerPerListedNamespace, |c| c.scope == Scope::Cluster && c.by.controller()),
    // With a namespace allow-list: what a RoleBinding cannot grant, so a ClusterRoleBinding does.
    ("controller-nodes", Binding::Controller, |c| {
        c.scope == Scope::Cluster && c.by.controller() && cluster_scoped(c.resource)
    }),
    ("controller-act", Binding::ControllerPerListedNamespace, |c| c.scope == Scope::ClusterAct && c.by.controller()),
    ("ttl-stash", Binding::ControllerPerListedNamespace, |c| c.scope == Scope::ClusterTtlStash && c.by.controller()),
    ("leader-election", Binding::Controller, |c| c.scope == Scope::LeaseNamespace && c.by.controller()),
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

/// A Role or ClusterRole as read up to its `rules:`.
struct Read<'t> {
    /// `Role` or `ClusterRole`.
    kind: &'t str,
    name: &'t str,
    /// Its `metadata:` block (name, namespace, labels), which its binding repeats.
    metadata: Vec<&'t str>,
}

/// The binding of the role `key`, read as `read`, to its process's ServiceAccount.
fn binding(read: &Read, key: &str, binding: Binding) -> String {
    let prefix = read.name.strip_suffix(key).expect("the role's name ends in its key");
    let chart = prefix.ends_with("}}-");
    if chart && binding == Binding::ControllerPerListedNamespace {
        let role = format!("(printf \"%s-{key}\" (include \"trainguard.fullname\" .))");
        return format!("{{{{ include \"trainguard.controllerBinding\" (dict \"root\" . \"role\" {role}) }}}}\n");
    }
    let namespace = if chart { "{{ .Release.Namespace }}" } else { KUSTOMIZE_NAMESPACE };
    let kind = read.kind;
    let metadata: String = read.metadata.iter().map(|l| format!("{l}\n")).collect();
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}Binding\nmetadata:\n{metadata}roleRef:\n  \
         apiGroup: rbac.authorization.k8s.io\n  kind: {kind}\n  name: {name}\nsubjects:\n  - kind: ServiceAccount\n    \
         name: {prefix}{process}\n    namespace: {namespace}\n",
        name = read.name,
        process = binding.process(),
    )
}

/// Whether `line` starts an object of `kind` (a top-level `kind:` line).
fn is_kind(line: &str, kinds: &[&str]) -> bool {
    line.strip_prefix("kind: ").is_some_and(|k| kinds.contains(&k))
}

/// `text` (a manifest or a chart template) with the `rules:` of each Role and ClusterRole
/// replaced by the generated ones and the binding that follows it by the generated one, and the
/// roles it holds. A role that no entry of [`ROLES`] names, a role without its binding right after
/// it and a binding of no role are errors: every grant under deploy/ comes from the table.
pub fn regenerate(text: &str) -> Result<(String, Vec<&'static str>), String> {
    let mut out = String::with_capacity(text.len());
    let mut found = Vec::new();
    let mut read: Option<Read> = None;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        out += line;
        out.push('\n');
        if line.starts_with("---") {
            read = None;
        } else if is_kind(line, &["RoleBinding", "ClusterRoleBinding"]) {
            return Err(format!("a {} that follows no role: bindings are generated after their roles", &line[6..]));
        } else if is_kind(line, &["Role", "ClusterRole"]) {
            read = Some(Read { kind: &line[6..], name: "", metadata: Vec::new() });
        } else if line == "metadata:"
            && let Some(r) = read.as_mut()
        {
            while let Some(meta) = lines.next_if(|l| l.starts_with("  ")) {
                out += meta;
                out.push('\n');
                r.metadata.push(meta);
                if r.name.is_empty()
                    && let Some(name) = meta.strip_prefix("  name: ")
                {
                    r.name = name;
                }
            }
        } else if line == "rules:"
            && let Some(r) = read.take()
        {
            let name = r.name;
            let (key, bound, keep) = ROLES
                .iter()
                .find(|(key, ..)| {
                    name.strip_suffix(key).is_some_and(|head| head.ends_with("trainguard-") || head.ends_with("}}-"))
                })
                .ok_or_else(|| format!("role {name}: its name ends in no role of the API-call table"))?;
            out += &rules(*keep);
            found.push(*key);
            // The old rules: every indented line up to the next object or template line.
            while lines.next_if(|l| l.starts_with("  ")).is_some() {}
            // Its binding: the next object, after its comments.
            let missing = || format!("role {name}: its binding must follow it");
            let separator = lines.next_if(|l| l.starts_with("---")).ok_or_else(missing)?;
            out += separator;
            out.push('\n');
            while let Some(comment) = lines.next_if(|l| l.starts_with('#')) {
                out += comment;
                out.push('\n');
            }
            let include = lines.next_if(|l| l.starts_with("{{ include \"trainguard.controllerBinding\""));
            if include.is_none() {
                let mut old = Vec::new();
                while let Some(l) = lines.next_if(|l| !l.starts_with("---") && !l.starts_with("{{")) {
                    old.push(l);
                }
                if !old.iter().any(|l| is_kind(l, &["RoleBinding", "ClusterRoleBinding"])) {
                    return Err(missing());
                }
            }
            out += &binding(&r, key, *bound);
        }
    }
    Ok((out, found))
}

/// Every YAML file under deploy/ (the chart's templates included) that holds a role or a binding,
/// relative to `root`, sorted.
pub fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.join("deploy")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml")
                && std::fs::read_to_string(&path).is_ok_and(|t| {
                    t.lines().any(|l| is_kind(l, &["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]))
                })
            {
                out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    out.sort();
    out
}
