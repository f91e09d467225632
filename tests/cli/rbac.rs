//! The RBAC under deploy/ comes from one place, the API-call table of src/rbac.rs: the `rules:` of
//! every Role and ClusterRole and the binding after it, in the kustomize files and the chart alike,
//! are what `cargo run --example gen_rbac` writes from it. What each install grants to whom:
//! deploy.rs.

use trainguard::rbac::API_CALLS;
use trainguard_binary_support::rbac::{self, Binding};
use trainguard_test_support::repo_root;

#[test]
fn deploy_rbac_rules_are_generated_from_the_api_call_table() {
    let root = repo_root();
    let (mut stale, mut kustomize, mut chart) = (Vec::new(), Vec::new(), Vec::new());
    for file in rbac::files(root) {
        let text = std::fs::read_to_string(root.join(&file)).unwrap();
        let (generated, roles) = rbac::regenerate(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if generated != text {
            stale.push(file.display().to_string());
        }
        let install = if file.starts_with("deploy/helm") { &mut chart } else { &mut kustomize };
        install.extend(roles);
    }
    assert!(stale.is_empty(), "these files differ from src/rbac.rs; {}:\n{}", rbac::REGENERATE, stale.join("\n"));
    // Each role once in each install path: a role added to one of them alone fails here.
    let mut all: Vec<&str> = rbac::ROLES.iter().map(|(role, ..)| *role).collect();
    for roles in [&mut all, &mut kustomize, &mut chart] {
        roles.sort_unstable();
    }
    assert_eq!(kustomize, all, "the kustomize files' roles");
    assert_eq!(chart, all, "the chart's roles");
}

/// A row whose scope and process no role takes would be granted nowhere.
#[test]
fn every_row_of_the_table_has_a_role() {
    for call in API_CALLS.iter() {
        assert!(rbac::ROLES.iter().any(|(.., keep)| keep(call)), "{call:?}: no role under deploy/ grants it");
    }
}

/// The binding after each role is the table's too: one edited by hand is written back, and a role
/// without its binding or a binding without its role is refused.
#[test]
fn each_role_is_followed_by_its_generated_binding() {
    let role = "kind: ClusterRole\nmetadata:\n  name: trainguard-webhook\nrules:\n  - {}\n";
    let binding = |subject: &str| {
        format!(
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  \
             name: trainguard-webhook\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
             name: trainguard-webhook\nsubjects:\n  - kind: ServiceAccount\n    name: {subject}\n    \
             namespace: trainguard-system\n"
        )
    };
    let (generated, _) = rbac::regenerate(&format!("{role}{}", binding("trainguard-webhook"))).unwrap();
    assert!(generated.ends_with(&binding("trainguard-webhook")), "{generated}");
    let service = "---\nkind: Service\nmetadata:\n  name: trainguard-webhook\n";
    // (file, what regenerating it gives: the file written, or an error containing this)
    let cases: [(String, Result<&str, &str>); 5] = [
        (generated.clone(), Ok(&generated)),
        (format!("{role}{}", binding("trainguard-controller")), Ok(&generated)),
        (role.to_string(), Err("its binding must follow it")),
        (format!("{role}{service}"), Err("its binding must follow it")),
        (binding("trainguard-webhook"), Err("follows no role")),
    ];
    for (file, want) in cases {
        let got = rbac::regenerate(&file).map(|(text, _)| text);
        match want {
            Ok(text) => assert_eq!(got.as_deref(), Ok(text), "{file}"),
            Err(part) => assert!(got.as_ref().is_err_and(|e| e.contains(part)), "{file}: {got:?}"),
        }
    }
}

/// The component controller-namespaces deletes the ClusterRoleBindings of exactly the roles bound
/// in each listed namespace instead: a role left out would stay granted cluster-wide.
#[test]
fn controller_namespaces_unbinds_the_roles_bound_per_namespace() {
    let path = repo_root().join("deploy/components/controller-namespaces/kustomization.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let pattern = text.lines().find_map(|l| l.trim().strip_prefix("name: ^trainguard-(")).expect("the patch's target");
    let mut deleted: Vec<&str> = pattern.strip_suffix(")$").expect("^trainguard-(a|b)$").split('|').collect();
    let per_namespace = rbac::ROLES.iter().filter(|(_, binding, _)| *binding == Binding::ControllerPerListedNamespace);
    let mut per_namespace: Vec<&str> = per_namespace.map(|(role, ..)| *role).collect();
    deleted.sort_unstable();
    per_namespace.sort_unstable();
    assert_eq!(deleted, per_namespace);
}

type Grant = (&'static str, &'static str, &'static str);

/// The grants of `role` (a name of `rbac::ROLES`).
fn grants(role: &str) -> Vec<Grant> {
    let (.., keep) = rbac::ROLES.iter().find(|(r, ..)| *r == role).unwrap();
    let rows = API_CALLS.iter().filter(|c| keep(c));
    rows.flat_map(|c| c.verbs.iter().map(|v| (c.group, c.resource, *v))).collect()
}

fn is_read(&(_, _, verb): &Grant) -> bool {
    ["get", "list", "watch"].contains(&verb)
}

/// What the docs promise of the roles (docs/operations.md, RBAC): the webhook reads JobSets and
/// Jobs and nothing else; a report-mode controller writes only Events (and its Lease); act mode's
/// role holds writes alone.
#[test]
fn the_roles_keep_what_the_docs_promise() {
    let (jobsets, jobs) = (("jobset.x-k8s.io", "jobsets"), ("batch", "jobs"));
    let webhook = [(jobsets, "list"), (jobsets, "watch"), (jobs, "list"), (jobs, "watch")].map(|((g, r), v)| (g, r, v));
    assert_eq!(grants("webhook"), webhook);
    let writes: Vec<Grant> = grants("controller").into_iter().filter(|g| !is_read(g)).collect();
    assert_eq!(writes, [("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch")]);
    let act = grants("controller-act");
    assert!(!act.is_empty() && !act.iter().any(is_read), "{act:?}");
}
