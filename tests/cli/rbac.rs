//! The RBAC under deploy/ comes from one place, the API-call table of src/rbac.rs: the `rules:` of
//! every Role and ClusterRole, in the kustomize files and the chart alike, are what `cargo run
//! --example gen_rbac` writes from it. Which roles each install binds to whom: deploy.rs.

use trainguard::rbac::API_CALLS;
use trainguard_binary_support::rbac;
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
    let mut all: Vec<&str> = rbac::ROLES.iter().map(|(role, _)| *role).collect();
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
        assert!(rbac::ROLES.iter().any(|(_, keep)| keep(call)), "{call:?}: no role under deploy/ grants it");
    }
}

type Grant = (&'static str, &'static str, &'static str);

/// The grants of `role` (a name of `rbac::ROLES`).
fn grants(role: &str) -> Vec<Grant> {
    let (_, keep) = rbac::ROLES.iter().find(|(r, _)| *r == role).unwrap();
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
