//! deploy/ as `kubectl kustomize` and `helm template` render it, checked against the code and
//! docs/webhook.md: webhook names, paths and selectors (docs/webhook.md §1), which roles each
//! install binds to whom (the roles' rules are generated from `trainguard::rbac::API_CALLS`:
//! tests/cli/rbac.rs), the Service and probe ports against the server's flags, and the
//! Deployment's hardening.
//!
//! Needs `kubectl` (client only, with its built-in kustomize v5+) and `helm`, as
//! scripts/install-test-deps.sh installs them; fails with a clear message when one is missing or
//! too old.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::{Parser as _, ValueEnum as _};
use prometheus_client::registry::Registry;
use tower::ServiceExt as _;
use trainguard::cli::serve::ServeArgs;
use trainguard::cli::{Cli, Command as Subcommand};
use trainguard::controller::config::{Mode, resolve_lease_namespace};
use trainguard::logging::LogFormat;
use trainguard::server::admin::Readiness;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::{ByteString, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainguard::cli::certs::{
    DEFAULT_NAMESPACE, DEFAULT_SECRET, DEFAULT_SERVICE, MUTATING_CONFIGURATION, MUTATING_WEBHOOK, Target,
    VALIDATING_CONFIGURATION, VALIDATING_WEBHOOK,
};
use trainguard::controller::namespaces::Namespaces;
use trainguard::rbac::{API_CALLS, ApiCall, Scope, cluster_scoped};
use trainguard_core::admission::Endpoint;

const NAMESPACE: &str = DEFAULT_NAMESPACE;
/// Admin paths of docs/webhook.md §1, served on `--admin-bind` (checked against the admin router).
const HEALTHZ: &str = "/healthz";
const READYZ: &str = "/readyz";
const BREAK_GLASS_LABEL: &str = "trainguard.io/webhook";
/// kubectl 1.27 ships kustomize v5 (Components, `labels`, multi-document patches).
const MIN_KUBECTL_MINOR: u32 = 27;
const MIN_KUSTOMIZE_MAJOR: u32 = 5;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A tool scripts/install-test-deps.sh installs: from its directory (which the Makefile puts
/// first on PATH), else from PATH.
fn tool(name: &str) -> PathBuf {
    let dir = std::env::var_os("TRAINGUARD_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/trainguard-tools"));
    let installed = dir.join("bin").join(name);
    if installed.exists() { installed } else { PathBuf::from(name) }
}

/// Checks once that kubectl is there and new enough.
fn kubectl() -> PathBuf {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let out = Command::new(tool("kubectl")).args(["version", "--client", "-o", "json"]).output().map_err(|e| {
            format!(
                "kubectl is needed to render deploy/ but could not be run ({e}); \
                 run scripts/install-test-deps.sh (or install kubectl >= 1.{MIN_KUBECTL_MINOR})"
            )
        })?;
        if !out.status.success() {
            return Err(format!("`kubectl version --client` failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("kubectl version output: {e}"))?;
        let minor: u32 = v["clientVersion"]["minor"]
            .as_str()
            .and_then(|m| m.trim_end_matches('+').parse().ok())
            .ok_or_else(|| format!("kubectl version has no clientVersion.minor: {v}"))?;
        let kustomize = v["kustomizeVersion"].as_str().unwrap_or("");
        let kustomize_major: u32 =
            kustomize.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
        if minor < MIN_KUBECTL_MINOR || kustomize_major < MIN_KUSTOMIZE_MAJOR {
            return Err(format!(
                "kubectl 1.{minor} with kustomize {kustomize:?} is too old to render deploy/: \
                 need kubectl >= 1.{MIN_KUBECTL_MINOR} (kustomize v{MIN_KUSTOMIZE_MAJOR}+)"
            ));
        }
        Ok(())
    });
    if let Err(message) = checked {
        panic!("{message}");
    }
    tool("kubectl")
}

/// Every object `kubectl kustomize DIR` prints.
struct Rendered {
    what: String,
    objects: Vec<Value>,
}

fn render(dir: &Path) -> Rendered {
    let out = Command::new(kubectl()).arg("kustomize").arg(dir).output().expect("running kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).expect("kustomize output is YAML");
    Rendered { what: dir.display().to_string(), objects }
}

fn render_cert_manager() -> Rendered {
    render(&repo().join("deploy/overlays/cert-manager"))
}

/// The static-certs overlay from a copy of deploy/ next to freshly generated certs/.
fn render_static_certs() -> (Rendered, tempfile::TempDir) {
    let tmp = static_certs_checkout();
    (render_static_certs_in(tmp.path(), &[]), tmp)
}

/// A copy of deploy/ next to freshly generated certs/.
fn static_certs_checkout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("deploy"), &tmp.path().join("deploy"));
    let certs = tmp.path().join("certs");
    let out = Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .args(["certs", "--service", DEFAULT_SERVICE, "--namespace", NAMESPACE, "--out"])
        .arg(&certs)
        .output()
        .unwrap();
    assert!(out.status.success(), "trainguard certs: {}", String::from_utf8_lossy(&out.stderr));
    tmp
}

/// The static-certs overlay of `static_certs_checkout`, with `components` of deploy/components
/// added by an overlay of the user's beside it (as `render_with_components` does).
fn render_static_certs_in(checkout: &Path, components: &[&str]) -> Rendered {
    if components.is_empty() {
        return render(&checkout.join("deploy/overlays/static-certs"));
    }
    let paths: Vec<String> = components.iter().map(|c| format!("../deploy/components/{c}")).collect();
    let mine = checkout.join(format!("my-trainguard-{}", components.join("-")));
    std::fs::create_dir_all(&mine).unwrap();
    let kustomization = format!("resources: [../deploy/overlays/static-certs]\ncomponents: [{}]\n", paths.join(", "));
    std::fs::write(mine.join("kustomization.yaml"), kustomization).unwrap();
    render(&mine)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        // Hidden entries: `make deploy`'s rendering directory, which a parallel test may be
        // removing right now; deploy/ ships none.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

impl Rendered {
    fn kinds_and_names(&self) -> BTreeSet<String> {
        self.objects.iter().map(|o| format!("{} {}", o["kind"].as_str().unwrap(), o["metadata"]["name"])).collect()
    }

    fn raw(&self, kind: &str, name: &str) -> &Value {
        let mut found = self.objects.iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name);
        let one = found.next().unwrap_or_else(|| panic!("{}: no {kind} {name}", self.what));
        assert!(found.next().is_none(), "{}: two {kind} {name}", self.what);
        one
    }

    /// The object of type `K` named `name`, decoded into the k8s-openapi type.
    fn get<K: Resource + DeserializeOwned>(&self, name: &str) -> K {
        let raw = self.raw(K::KIND, name);
        assert_eq!(raw["apiVersion"], K::API_VERSION, "{} {name}", K::KIND);
        serde_json::from_value(raw.clone()).unwrap_or_else(|e| panic!("{} {name} does not decode: {e}", K::KIND))
    }

    fn all<K: Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.objects
            .iter()
            .filter(|o| o["kind"] == K::KIND && o["apiVersion"] == K::API_VERSION)
            .map(|o| serde_json::from_value(o.clone()).unwrap())
            .collect()
    }

    /// The webhook's Deployment.
    fn deployment(&self) -> Deployment {
        self.get("trainguard-webhook")
    }

    /// The companion controller's Deployment.
    fn controller(&self) -> Deployment {
        self.get("trainguard-controller")
    }

    fn deployment_named(&self, name: &str) -> Deployment {
        self.get(name)
    }
}

fn pod_spec(d: &Deployment) -> PodSpec {
    d.spec.as_ref().unwrap().template.spec.clone().unwrap()
}

fn container(d: &Deployment) -> Container {
    let containers = pod_spec(d).containers;
    assert_eq!(containers.len(), 1, "one container");
    containers[0].clone()
}

/// The container's command line and environment as `trainguard` itself parses them: each
/// container env var that a `serve` flag reads (clap `env`) becomes that flag, unless the args
/// already give it (an argument wins over the environment, as in clap).
fn serve_args(c: &Container) -> ServeArgs {
    let args = c.args.clone().unwrap_or_default();
    let mut from_env = Vec::new();
    let command = <Cli as clap::CommandFactory>::command();
    let serve = command.find_subcommand("serve").expect("serve subcommand");
    for var in c.env.iter().flatten() {
        let Some(value) = var.value.as_deref() else { continue };
        let flag = serve
            .get_arguments()
            .chain(command.get_arguments())
            .find(|a| a.get_env().is_some_and(|e| e == var.name.as_str()))
            .and_then(|a| a.get_long());
        if let Some(long) = flag
            && !args.iter().any(|a| a == &format!("--{long}") || a.starts_with(&format!("--{long}=")))
        {
            from_env.push(format!("--{long}={value}"));
        }
    }
    let argv = std::iter::once("trainguard".to_string()).chain(args.iter().cloned()).chain(from_env);
    match Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("container args {args:?} do not parse: {e}")) {
        Cli { command: Subcommand::Serve(serve), .. } => *serve,
        other => panic!("container runs {:?}, not serve", other.command),
    }
}

fn port_of(addr: Option<std::net::SocketAddr>, flag: &str) -> i32 {
    i32::from(addr.unwrap_or_else(|| panic!("the Deployment sets --{flag} explicitly")).port())
}

fn container_port(c: &Container, name: &str) -> i32 {
    c.ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(name))
        .map(|p| p.container_port)
        .unwrap_or_else(|| panic!("container has no port named {name}"))
}

fn resolve(c: &Container, port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(p) => *p,
        IntOrString::String(name) => container_port(c, name),
    }
}

fn pod_labels(d: &Deployment) -> BTreeMap<String, String> {
    d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap()
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn match_labels(s: &LabelSelector) -> BTreeMap<String, String> {
    assert!(s.match_expressions.is_none(), "selector uses matchLabels only");
    s.match_labels.clone().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Objects and namespaces

#[test]
fn each_overlay_renders_exactly_the_expected_objects_in_one_namespace() {
    let base = [
        "Namespace \"trainguard-system\"",
        "ServiceAccount \"trainguard-webhook\"",
        "ClusterRole \"trainguard-webhook\"",
        "ClusterRoleBinding \"trainguard-webhook\"",
        "Deployment \"trainguard-webhook\"",
        "PodDisruptionBudget \"trainguard-webhook\"",
        "ServiceAccount \"trainguard-controller\"",
        "ClusterRole \"trainguard-controller\"",
        "ClusterRoleBinding \"trainguard-controller\"",
        "Role \"trainguard-leader-election\"",
        "RoleBinding \"trainguard-leader-election\"",
        "Deployment \"trainguard-controller\"",
        "Service \"trainguard-webhook\"",
        "Service \"trainguard-metrics\"",
        "ValidatingWebhookConfiguration \"trainguard-validating\"",
    ];
    let cert_manager = [
        "Issuer \"trainguard-selfsigned\"",
        "Certificate \"trainguard-ca\"",
        "Issuer \"trainguard-ca\"",
        "Certificate \"trainguard-serving\"",
    ];
    let opt_out_policy =
        ["ValidatingAdmissionPolicy \"trainguard-opt-out\"", "ValidatingAdmissionPolicyBinding \"trainguard-opt-out\""];
    let network_policy = ["NetworkPolicy \"trainguard\""];
    let (static_certs, _tmp) = render_static_certs();
    let cases = [
        (render(&repo().join("deploy/base")), base.iter().collect::<Vec<_>>()),
        (
            render_cert_manager(),
            base.iter().chain(&cert_manager).chain(&opt_out_policy).chain(&network_policy).collect(),
        ),
        (
            static_certs,
            base.iter().chain(&["Secret \"trainguard-tls\""]).chain(&opt_out_policy).chain(&network_policy).collect(),
        ),
    ];
    let cluster_scoped = ["Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"];
    let cluster_scoped: BTreeSet<&str> = cluster_scoped
        .into_iter()
        .chain(["MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
        .collect();
    for (rendered, want) in cases {
        let want: BTreeSet<String> = want.into_iter().map(|s| s.to_string()).collect();
        assert_eq!(rendered.kinds_and_names(), want, "{}", rendered.what);
        for o in &rendered.objects {
            let kind = o["kind"].as_str().unwrap();
            let ns = o["metadata"]["namespace"].as_str();
            if cluster_scoped.contains(kind) {
                assert_eq!(ns, None, "{}: {kind} is cluster-scoped", rendered.what);
            } else {
                assert_eq!(ns, Some(NAMESPACE), "{}: {kind} {}", rendered.what, o["metadata"]["name"]);
            }
        }
    }
}

/// The defaults policy's name (components/mutating-policy; the chart's `<fullname>-defaults`).
const MUTATING_POLICY: &str = "trainguard-defaults";

/// The mutating defaults are opt-in (docs/webhook.md §7): every Trainer release's CRD defaults the
/// same fields, so no default install registers a mutating webhook or policy, whatever the
/// cluster serves; each component or chart value adds exactly its objects (cluster-scoped), in
/// either overlay, and changes nothing else.
#[test]
fn the_mutating_defaults_are_opt_in_and_each_switch_adds_exactly_its_objects() {
    let webhook = vec![format!("MutatingWebhookConfiguration \"{MUTATING_CONFIGURATION}\"")];
    let policy = vec![
        format!("MutatingAdmissionPolicy \"{MUTATING_POLICY}\""),
        format!("MutatingAdmissionPolicyBinding \"{MUTATING_POLICY}\""),
    ];
    let both: Vec<String> = policy.iter().chain(&webhook).cloned().collect();
    let chart = |values: Value| render_chart(NAMESPACE, values);
    let static_certs = static_certs_checkout();
    let plain_static = || render_static_certs_in(static_certs.path(), &[]);
    let held_back = json!({"webhooks": {"enabled": false}});
    let documented = docs_block("operations.md", "# my-trainguard/kustomization.yaml, with the mutating webhook");
    let documented = render_overlay(&[("kustomization.yaml", documented.as_str())]);
    // (what, the install as shipped, the same install with the switch, what the switch adds)
    let cases: [(&str, Rendered, Rendered, &[String]); 8] = [
        // As docs/operations.md ("The defaults") writes the overlay.
        ("cert-manager + mutating-webhook", render_cert_manager(), documented, &webhook),
        (
            "cert-manager + mutating-policy",
            render_cert_manager(),
            render_with_components(&["mutating-policy"]),
            &policy,
        ),
        (
            "cert-manager + both",
            render_cert_manager(),
            render_with_components(&["mutating-webhook", "mutating-policy"]),
            &both,
        ),
        (
            "static-certs + mutating-webhook",
            plain_static(),
            render_static_certs_in(static_certs.path(), &["mutating-webhook"]),
            &webhook,
        ),
        (
            "static-certs + mutating-policy",
            plain_static(),
            render_static_certs_in(static_certs.path(), &["mutating-policy"]),
            &policy,
        ),
        (
            "chart mutatingWebhook.enabled",
            chart(json!({})),
            chart(json!({"mutatingWebhook": {"enabled": true}})),
            &webhook,
        ),
        (
            "chart mutatingPolicy.enabled",
            chart(json!({})),
            chart(json!({"mutatingPolicy": {"enabled": true}})),
            &policy,
        ),
        // Install order: webhooks.enabled=false holds the mutating webhook back with the other.
        (
            "chart mutatingWebhook.enabled, webhooks.enabled=false",
            chart(held_back),
            chart(json!({"webhooks": {"enabled": false}, "mutatingWebhook": {"enabled": true}})),
            &[],
        ),
    ];
    let mutating = |r: &Rendered| -> Vec<String> {
        r.kinds_and_names().into_iter().filter(|k| k.starts_with("Mutating")).collect()
    };
    for (what, shipped, with, adds) in cases {
        assert_eq!(mutating(&shipped), Vec::<String>::new(), "{what}: registered by default");
        let before = by_kind_and_name(&shipped);
        let after = by_kind_and_name(&with);
        let added: Vec<String> = after.keys().filter(|k| !before.contains_key(*k)).cloned().collect();
        assert_eq!(added, adds, "{what}: what the switch adds");
        for (key, object) in &before {
            assert_eq!(after.get(key), Some(object), "{what}: {key} changed");
        }
        for key in &added {
            assert_eq!(after[key]["metadata"].get("namespace"), None, "{what}: {key} is cluster-scoped");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook configurations (docs/webhook.md §1)

/// What both webhook kinds share, pulled out of the two k8s-openapi types.
#[derive(Debug)]
struct Webhook {
    configuration: String,
    name: String,
    client_config: WebhookClientConfig,
    rules: Vec<RuleWithOperations>,
    object_selector: Option<LabelSelector>,
    namespace_selector: Option<LabelSelector>,
    match_conditions: bool,
    failure_policy: Option<String>,
    side_effects: String,
    review_versions: Vec<String>,
    timeout_seconds: Option<i32>,
    match_policy: Option<String>,
    reinvocation_policy: Option<String>,
    annotations: BTreeMap<String, String>,
}

fn webhooks(r: &Rendered) -> Vec<Webhook> {
    let mut out = Vec::new();
    for c in r.all::<ValidatingWebhookConfiguration>() {
        for w in c.webhooks.unwrap_or_default() {
            out.push(Webhook {
                configuration: format!("ValidatingWebhookConfiguration {}", c.metadata.name.clone().unwrap()),
                name: w.name,
                client_config: w.client_config,
                rules: w.rules.unwrap_or_default(),
                object_selector: w.object_selector,
                namespace_selector: w.namespace_selector,
                match_conditions: w.match_conditions.is_some_and(|m| !m.is_empty()),
                failure_policy: w.failure_policy,
                side_effects: w.side_effects,
                review_versions: w.admission_review_versions,
                timeout_seconds: w.timeout_seconds,
                match_policy: w.match_policy,
                reinvocation_policy: None,
                annotations: c.metadata.annotations.clone().unwrap_or_default(),
            });
        }
    }
    for c in r.all::<MutatingWebhookConfiguration>() {
        for w in c.webhooks.unwrap_or_default() {
            out.push(Webhook {
                configuration: format!("MutatingWebhookConfiguration {}", c.metadata.name.clone().unwrap()),
                name: w.name,
                client_config: w.client_config,
                rules: w.rules.unwrap_or_default(),
                object_selector: w.object_selector,
                namespace_selector: w.namespace_selector,
                match_conditions: w.match_conditions.is_some_and(|m| !m.is_empty()),
                failure_policy: w.failure_policy,
                side_effects: w.side_effects,
                review_versions: w.admission_review_versions,
                timeout_seconds: w.timeout_seconds,
                match_policy: w.match_policy,
                reinvocation_policy: w.reinvocation_policy,
                annotations: c.metadata.annotations.clone().unwrap_or_default(),
            });
        }
    }
    out
}

#[test]
fn webhooks_match_the_server_routes_and_the_spec() {
    // The mutating webhook is opt-in: the component adds it.
    let r = render_with_components(&["mutating-webhook"]);
    let service: Service = r.get(DEFAULT_SERVICE);
    let service_port = service.spec.unwrap().ports.unwrap()[0].port;

    // (configuration, webhook name, endpoint, operations, reinvocationPolicy)
    let want = [
        (
            format!("ValidatingWebhookConfiguration {VALIDATING_CONFIGURATION}"),
            VALIDATING_WEBHOOK,
            Endpoint::Validate,
            vec!["CREATE", "UPDATE"],
            None,
        ),
        (
            format!("MutatingWebhookConfiguration {MUTATING_CONFIGURATION}"),
            MUTATING_WEBHOOK,
            Endpoint::Mutate,
            vec!["CREATE"],
            Some("IfNeeded"),
        ),
    ];
    let got = webhooks(&r);
    assert_eq!(got.len(), want.len(), "one webhook per configuration: {got:#?}");
    // The names docs/webhook.md §1 gives (certs.rs keys its caBundle patch on them).
    assert_eq!(
        [VALIDATING_WEBHOOK, MUTATING_WEBHOOK],
        ["validate.trainjob.trainguard.io", "default.trainjob.trainguard.io"]
    );

    for (configuration, name, endpoint, operations, reinvocation) in want {
        let w = got.iter().find(|w| w.configuration == configuration).unwrap_or_else(|| panic!("{configuration}"));
        assert_eq!(w.name, name, "{configuration}");
        let svc = w.client_config.service.as_ref().expect("clientConfig.service");
        assert_eq!(w.client_config.url, None, "{name}: no url");
        assert_eq!(svc.name, DEFAULT_SERVICE, "{name}");
        assert_eq!(svc.namespace, NAMESPACE, "{name}");
        assert_eq!(svc.path.as_deref(), Some(endpoint.path()), "{name}: the server's route");
        assert_eq!(svc.port.unwrap_or(443), service_port, "{name}: the Service's port");

        assert_eq!(w.rules.len(), 1, "{name}");
        let rule = &w.rules[0];
        assert_eq!(rule.api_groups.as_deref(), Some(&["trainer.kubeflow.org".to_string()][..]), "{name}");
        assert_eq!(rule.api_versions.as_deref(), Some(&["v1alpha1".to_string()][..]), "{name}");
        assert_eq!(rule.resources.as_deref(), Some(&["trainjobs".to_string()][..]), "{name}: no subresources");
        assert_eq!(rule.operations.clone().unwrap(), operations, "{name}");
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{name}");

        let selector = w.object_selector.clone().expect("objectSelector");
        assert_eq!(selector.match_labels, None, "{name}");
        assert_eq!(
            selector.match_expressions.unwrap(),
            vec![LabelSelectorRequirement {
                key: BREAK_GLASS_LABEL.into(),
                operator: "NotIn".into(),
                values: Some(vec!["disabled".into()]),
            }],
            "{name}: break-glass selector"
        );
        assert_eq!(
            w.namespace_selector.clone().and_then(|s| s.match_expressions),
            Some(vec![LabelSelectorRequirement {
                key: BREAK_GLASS_LABEL.into(),
                operator: "NotIn".into(),
                values: Some(vec!["disabled".into()]),
            }]),
            "{name}: namespace-level opt-out"
        );
        // The expressions themselves are evaluated in tests/admission/admission_cel.rs.
        assert_eq!(
            w.match_conditions,
            reinvocation.is_none(),
            "{name}: matchConditions on the validating webhook only"
        );
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"), "{name}");
        assert_eq!(w.side_effects, "None", "{name}");
        assert_eq!(w.review_versions, ["v1"], "{name}");
        assert_eq!(w.timeout_seconds, Some(5), "{name}");
        assert_eq!(w.match_policy.as_deref(), Some("Equivalent"), "{name}");
        assert_eq!(w.reinvocation_policy.as_deref(), reinvocation, "{name}");
    }
}

/// Install order: `kubectl apply -k … -l 'trainguard.io/install-step!=webhooks'` applies all but
/// the webhook configurations; they follow once the Deployment is Available. The Helm chart does
/// the same with `webhooks.enabled=false`, then `true`.
#[test]
fn webhook_configurations_can_be_applied_last() {
    let step = |o: &Value| o["metadata"]["labels"]["trainguard.io/install-step"].as_str().map(str::to_string);
    let checkout = static_certs_checkout();
    // (install, its webhook configurations)
    let validating = format!("ValidatingWebhookConfiguration \"{VALIDATING_CONFIGURATION}\"");
    let mutating = format!("MutatingWebhookConfiguration \"{MUTATING_CONFIGURATION}\"");
    let cases = [
        (render_cert_manager(), vec![validating.clone()]),
        (render_static_certs_in(checkout.path(), &[]), vec![validating.clone()]),
        (render_with_components(&["mutating-webhook"]), vec![mutating.clone(), validating.clone()]),
        (render_static_certs_in(checkout.path(), &["mutating-webhook"]), vec![mutating.clone(), validating.clone()]),
    ];
    for (r, want) in cases {
        let last: BTreeSet<String> = r
            .objects
            .iter()
            .filter(|o| step(o).is_some())
            .map(|o| format!("{} {}", o["kind"].as_str().unwrap(), o["metadata"]["name"]))
            .collect();
        assert_eq!(last, want.into_iter().collect(), "{}: only the webhook configurations wait", r.what);
        assert!(r.objects.iter().filter_map(step).all(|s| s == "webhooks"), "{}", r.what);
    }
    let chart = by_kind_and_name(&render_chart(NAMESPACE, json!({"mutatingWebhook": {"enabled": true}})));
    let first = by_kind_and_name(&render_chart(
        NAMESPACE,
        json!({"webhooks": {"enabled": false}, "mutatingWebhook": {"enabled": true}}),
    ));
    let missing: BTreeSet<&String> = chart.keys().filter(|k| !first.contains_key(*k)).collect();
    assert_eq!(
        missing.into_iter().cloned().collect::<Vec<_>>(),
        [mutating, validating],
        "webhooks.enabled=false leaves out the webhook configurations only"
    );
}

#[test]
fn cert_manager_overlay_issues_the_serving_certificate_from_a_ca_and_injects_it() {
    let r = render_cert_manager();
    let serving = r.raw("Certificate", "trainguard-serving");
    let dns: Vec<String> = serde_json::from_value(serving["spec"]["dnsNames"].clone()).unwrap();
    let target =
        Target { service: DEFAULT_SERVICE.into(), namespace: NAMESPACE.into(), secret_name: DEFAULT_SECRET.into() };
    assert_eq!(dns, target.dns_names(), "the names the API server dials");
    assert_eq!(serving["spec"]["secretName"], DEFAULT_SECRET);
    assert_eq!(serving["spec"]["issuerRef"]["kind"], "Issuer");

    // serving <- CA Issuer <- CA Certificate (isCA) <- self-signed Issuer
    let ca_issuer = r.raw("Issuer", serving["spec"]["issuerRef"]["name"].as_str().unwrap());
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"].as_str().expect("a CA issuer");
    let ca_cert = r
        .objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == ca_secret)
        .expect("a Certificate for the CA secret");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    assert_eq!(ca_cert["spec"]["privateKey"]["rotationPolicy"], "Never", "CA renewals keep the key");
    let root = r.raw("Issuer", ca_cert["spec"]["issuerRef"]["name"].as_str().unwrap());
    assert!(root["spec"]["selfSigned"].is_object(), "the CA is self-signed");

    // With and without the opt-in mutating webhook: cainjector fills every caBundle.
    for (install, configurations) in [(&r, 1), (&render_with_components(&["mutating-webhook"]), 2)] {
        let got = webhooks(install);
        assert_eq!(got.len(), configurations, "{}", install.what);
        for w in got {
            assert_eq!(
                w.annotations.get("cert-manager.io/inject-ca-from").map(String::as_str),
                Some("trainguard-system/trainguard-serving"),
                "{}",
                w.configuration
            );
            assert_eq!(w.client_config.ca_bundle, None, "{}: cainjector fills caBundle", w.configuration);
        }
    }
    assert_tls_volume(&r.deployment(), serving["spec"]["secretName"].as_str().unwrap());
}

#[test]
fn static_certs_overlay_carries_the_generated_secret_and_ca_bundle() {
    let (r, tmp) = render_static_certs();
    let read = |f: &str| std::fs::read(tmp.path().join("certs").join(f)).unwrap();
    let secret: Secret = r.get(DEFAULT_SECRET);
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.unwrap();
    for file in ["tls.crt", "tls.key", "ca.crt"] {
        assert_eq!(data.get(file), Some(&ByteString(read(file))), "Secret {file}");
    }
    // With and without the opt-in mutating webhook: every caBundle is the generated CA.
    for (install, configurations) in [(&r, 1), (&render_static_certs_in(tmp.path(), &["mutating-webhook"]), 2)] {
        let got = webhooks(install);
        assert_eq!(got.len(), configurations, "{}", install.what);
        for w in got {
            assert_eq!(w.client_config.ca_bundle, Some(ByteString(read("ca.crt"))), "{}", w.configuration);
            assert!(!w.annotations.contains_key("cert-manager.io/inject-ca-from"), "{}", w.configuration);
        }
    }
    assert_tls_volume(&r.deployment(), DEFAULT_SECRET);
}

/// The server's `--tls-cert`/`--tls-key` are files of the mounted Secret `secret`, mounted whole
/// (no subPath) so rotation reaches the pod.
fn assert_tls_volume(d: &Deployment, secret: &str) {
    let c = container(d);
    let volume = pod_spec(d)
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret))
        .unwrap_or_else(|| panic!("no volume from Secret {secret}"));
    let mount = c
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.name == volume.name)
        .expect("the TLS volume is mounted");
    assert_eq!(mount.sub_path, None, "whole Secret, so updates reach the pod");
    assert_eq!(mount.read_only, Some(true));
    let serve = serve_args(&c);
    for (flag, path, file) in [("tls-cert", serve.tls_cert, "tls.crt"), ("tls-key", serve.tls_key, "tls.key")] {
        assert_eq!(path, Path::new(&mount.mount_path).join(file), "--{flag}");
    }
}

// ---------------------------------------------------------------------------------------------
// RBAC: which roles each install binds to whom. The roles' rules are generated from the API-call
// table (src/rbac.rs, checked by tests/cli/rbac.rs); here, what each ServiceAccount ends up with.

type Grants = BTreeSet<(String, String, String)>;

fn grants(rules: &[PolicyRule]) -> Grants {
    let mut out = Grants::new();
    for rule in rules {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                out.extend(rule.verbs.iter().map(|verb| (group.clone(), resource.clone(), verb.clone())));
            }
        }
    }
    out
}

fn table_where(keep: impl Fn(&ApiCall) -> bool) -> Grants {
    API_CALLS
        .iter()
        .filter(|c| keep(c))
        .flat_map(|c| c.verbs.iter().map(|v| (c.group.to_string(), c.resource.to_string(), v.to_string())))
        .collect()
}

/// The single subject of a binding, as (kind, name, namespace).
fn subject_of(subjects: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>) -> (String, String, Option<String>) {
    let subjects = subjects.unwrap_or_default();
    assert_eq!(subjects.len(), 1, "{subjects:?}");
    let s = &subjects[0];
    (s.kind.clone(), s.name.clone(), s.namespace.clone())
}

/// What `sa` (in [`NAMESPACE`]) may do, by where: `None` cluster-wide, `Some(ns)` in `ns` only. A
/// ClusterRoleBinding grants its ClusterRole everywhere; a RoleBinding grants its (Cluster)Role's
/// rules on namespaced resources in its own namespace and nothing cluster-scoped, as RBAC does.
fn effective_grants(r: &Rendered, sa: &str) -> BTreeMap<Option<String>, Grants> {
    let cluster_roles: Vec<ClusterRole> = r.all();
    let roles: Vec<Role> = r.all();
    let rules_of = |kind: &str, name: &str, ns: Option<&str>| -> Vec<PolicyRule> {
        let rules = match kind {
            "ClusterRole" => cluster_roles.iter().find(|c| c.metadata.name.as_deref() == Some(name)).map(|c| &c.rules),
            "Role" => roles
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name) && c.metadata.namespace.as_deref() == ns)
                .map(|c| &c.rules),
            other => panic!("{}: roleRef kind {other}", r.what),
        };
        rules
            .unwrap_or_else(|| panic!("{}: {kind} {name} is bound but not rendered", r.what))
            .clone()
            .unwrap_or_default()
    };
    let ours = ("ServiceAccount".to_string(), sa.to_string(), Some(NAMESPACE.to_string()));
    let mut out: BTreeMap<Option<String>, Grants> = BTreeMap::new();
    for b in r.all::<ClusterRoleBinding>().into_iter().filter(|b| subject_of(b.subjects.clone()) == ours) {
        let rules = rules_of(&b.role_ref.kind, &b.role_ref.name, None);
        out.entry(None).or_default().extend(grants(&rules));
    }
    for b in r.all::<RoleBinding>().into_iter().filter(|b| subject_of(b.subjects.clone()) == ours) {
        let ns = b.metadata.namespace.clone().expect("a RoleBinding has a namespace");
        let rules = rules_of(&b.role_ref.kind, &b.role_ref.name, Some(&ns));
        let namespaced = grants(&rules).into_iter().filter(|(_, resource, _)| !cluster_scoped(resource));
        out.entry(Some(ns)).or_default().extend(namespaced);
    }
    out
}

/// The overlay `my-trainguard/` of `files` (name, contents), beside a copy of the checkout in
/// `trainguard/`, as the docs lay it out.
fn render_overlay(files: &[(&str, &str)]) -> Rendered {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("deploy"), &tmp.path().join("trainguard/deploy"));
    let overlay = tmp.path().join("my-trainguard");
    std::fs::create_dir_all(&overlay).unwrap();
    for (name, contents) in files {
        std::fs::write(overlay.join(name), contents).unwrap();
    }
    render(&overlay)
}

/// The cert-manager overlay with `components` of deploy/components added.
fn render_with_components(components: &[&str]) -> Rendered {
    let paths: Vec<String> = components.iter().map(|c| format!("../trainguard/deploy/components/{c}")).collect();
    let kustomization =
        format!("resources: [../trainguard/deploy/overlays/cert-manager]\ncomponents: [{}]\n", paths.join(", "));
    render_overlay(&[("kustomization.yaml", kustomization.as_str())])
}

/// The code block of `doc` (under docs/) that starts with the line `head`, up to its closing fence.
fn docs_block(doc: &str, head: &str) -> String {
    let docs = std::fs::read_to_string(repo().join("docs").join(doc)).unwrap();
    let start = docs.find(head).unwrap_or_else(|| panic!("{head:?} in docs/{doc}"));
    docs[start..].lines().take_while(|l| !l.trim_start().starts_with("```")).map(|l| format!("{l}\n")).collect()
}

/// The render of the docs' act-mode overlay (docs/controller.md, "Act"), beside a checkout.
fn render_documented_act_overlay() -> Rendered {
    let kustomization = docs_block("controller.md", "# my-trainguard/kustomization.yaml, act mode");
    render_overlay(&[("kustomization.yaml", kustomization.as_str())])
}

/// The documented kustomize overlay for two namespaces (two files), beside a checkout; in act
/// mode with the `act` component and the second RoleBinding per namespace the docs describe.
fn render_documented_namespaces_overlay(act: bool) -> Rendered {
    let mut kustomization = docs_block("controller.md", "# my-trainguard/kustomization.yaml, two namespaces");
    let mut bindings = docs_block("controller.md", "# my-trainguard/rolebindings.yaml");
    if act {
        let component = "  - ../trainguard/deploy/components/controller-namespaces\n";
        assert!(kustomization.contains(component));
        kustomization =
            kustomization.replace(component, &format!("  - ../trainguard/deploy/components/act\n{component}"));
        // "with `name: trainguard-controller-act` in both `name` fields" (the binding's, the role's).
        let act_bindings: String = bindings
            .lines()
            .map(|l| {
                let l = if l.starts_with("metadata:") || l.starts_with("roleRef:") {
                    l.replace("name: trainguard-controller", "name: trainguard-controller-act")
                } else {
                    l.to_string()
                };
                format!("{l}\n")
            })
            .collect();
        bindings = format!("{bindings}---\n{act_bindings}");
    }
    render_overlay(&[("kustomization.yaml", kustomization.as_str()), ("rolebindings.yaml", bindings.as_str())])
}

/// How an install runs the controller: its mode, the stash remedy's grant, its namespace
/// allow-list (empty: every namespace).
#[derive(Clone, Copy)]
struct Controller {
    act: bool,
    stash: bool,
    namespaces: &'static [&'static str],
}

impl Controller {
    /// What its ServiceAccount may do, by where: the rows of its mode and options, cluster-wide or
    /// in each listed namespace (cluster-scoped rows stay cluster-wide), and its Lease where it lives.
    fn grants(self) -> BTreeMap<Option<String>, Grants> {
        let scopes = [(Scope::Cluster, true), (Scope::ClusterAct, self.act), (Scope::ClusterTtlStash, self.stash)];
        let rows = table_where(|c| c.by.controller() && scopes.contains(&(c.scope, true)));
        let lease = (Some(NAMESPACE.to_string()), table_where(|c| c.scope == Scope::LeaseNamespace));
        if self.namespaces.is_empty() {
            return BTreeMap::from([(None, rows), lease]);
        }
        let (cluster, namespaced): (Grants, Grants) = rows.into_iter().partition(|(_, r, _)| cluster_scoped(r));
        let listed = self.namespaces.iter().map(|ns| (Some(ns.to_string()), namespaced.clone()));
        [(None, cluster), lease].into_iter().chain(listed).collect()
    }
}

/// What each ServiceAccount may do in every install path, kustomize and chart alike: the webhook
/// the rows it makes, cluster-wide, whatever the controller's settings; the controller the rows
/// of its mode (act adds the deletes and the status patch) and of the stash remedy where granted,
/// cluster-wide or only in the namespaces its TRAINGUARD_NAMESPACES lists, and its Lease. Nobody
/// else is bound to anything. The controller runs in the mode it is granted: `report` as shipped
/// (both overlays, the chart), `act` with the switch docs/controller.md shows or `controller.mode`.
#[test]
fn each_install_grants_each_service_account_exactly_its_rows() {
    const LISTED: &[&str] = &["team-a", "team-b"];
    let report = Controller { act: false, stash: false, namespaces: &[] };
    let act = Controller { act: true, ..report };
    let stash = Controller { stash: true, ..report };
    let listed = Controller { namespaces: LISTED, ..report };
    let chart = |values: Value| render_chart(NAMESPACE, values);
    let (static_certs, _tmp) = render_static_certs();
    // (install, rendered, its controller: None for the webhook alone)
    let cases = [
        ("cert-manager overlay", render_cert_manager(), Some(report)),
        ("static-certs overlay", static_certs, Some(report)),
        ("documented act overlay", render_documented_act_overlay(), Some(act)),
        ("component ttl-stash-rbac", render_with_components(&["ttl-stash-rbac"]), Some(stash)),
        ("component webhook-only", render_with_components(&["webhook-only"]), None),
        ("documented namespaces overlay", render_documented_namespaces_overlay(false), Some(listed)),
        (
            "documented namespaces overlay, act",
            render_documented_namespaces_overlay(true),
            Some(Controller { act: true, ..listed }),
        ),
        ("chart", chart(json!({})), Some(report)),
        ("chart, act", chart(json!({"controller": {"mode": "act"}})), Some(act)),
        ("chart, stash", chart(json!({"ttlStash": {"enabled": true}})), Some(stash)),
        ("chart, webhook only", chart(json!({"controller": {"enabled": false}, "ttlStash": {"enabled": true}})), None),
        ("chart, namespaces", chart(json!({"controller": {"namespaces": LISTED}})), Some(listed)),
        (
            "chart, namespaces, act and stash",
            chart(json!({"controller": {"namespaces": LISTED, "mode": "act"}, "ttlStash": {"enabled": true}})),
            Some(Controller { act: true, stash: true, namespaces: LISTED }),
        ),
    ];
    for (what, r, controller) in cases {
        let webhook = pod_spec(&r.deployment()).service_account_name.expect("serviceAccountName");
        assert!(serve_args(&container(&r.deployment())).controller.namespaces.is_empty(), "{what}");
        let webhook_rows = table_where(|c| c.scope == Scope::Cluster && c.by.webhook());
        let mut want = BTreeMap::from([(webhook.clone(), BTreeMap::from([(None, webhook_rows)]))]);
        if let Some(controller) = controller {
            let d = r.controller();
            let serve = serve_args(&container(&d));
            let mode = if controller.act { Mode::Act } else { Mode::Report };
            assert!(serve.controller.enabled, "{what}");
            assert_eq!(serve.controller.planner.mode(), mode, "{what}");
            let names: Vec<String> = controller.namespaces.iter().map(|ns| ns.to_string()).collect();
            let namespaces = if names.is_empty() { Namespaces::All } else { Namespaces::Only(names) };
            assert_eq!(
                Namespaces::parse(&serve.controller.namespaces),
                Ok(namespaces),
                "{what}: TRAINGUARD_NAMESPACES"
            );
            let sa = pod_spec(&d).service_account_name.expect("serviceAccountName");
            assert_ne!(sa, webhook, "{what}: one ServiceAccount per Deployment");
            want.insert(sa, controller.grants());
        }
        let bindings = r.all::<ClusterRoleBinding>().into_iter().map(|b| b.subjects);
        let subjects: BTreeSet<_> =
            bindings.chain(r.all::<RoleBinding>().into_iter().map(|b| b.subjects)).map(subject_of).collect();
        let mut got = BTreeMap::new();
        for (kind, sa, namespace) in subjects {
            assert_eq!((kind.as_str(), namespace.as_deref()), ("ServiceAccount", Some(NAMESPACE)), "{what}: {sa}");
            let _: k8s_openapi::api::core::v1::ServiceAccount = r.get(&sa);
            let grants = effective_grants(&r, &sa);
            got.insert(sa, grants);
        }
        assert_eq!(got, want, "{what}: grants by ServiceAccount and namespace");
    }
}

#[test]
fn controller_lease_lives_where_the_role_grants_it() {
    let r = render_cert_manager();
    let d = r.controller();
    let serve = serve_args(&container(&d));
    // POD_NAMESPACE comes from the downward API: the Deployment's own namespace.
    let pod_namespace = d.metadata.namespace.clone();
    let lease_namespace =
        resolve_lease_namespace(serve.controller.lease_namespace.as_deref(), pod_namespace.as_deref());
    let role: Role = r.get("trainguard-leader-election");
    assert_eq!(Some(lease_namespace), role.metadata.namespace);
    assert_eq!(serve.controller.lease_name, "trainguard-controller");
    assert!(serve.controller.enabled, "the controller runs (on the elected leader)");
    assert_eq!(serve.controller.planner.mode(), Mode::Report, "the shipped mode is report");
}

/// The overlay docs/operations.md gives for another namespace, rendered as a user lays it out:
/// no reference to `trainguard-system` is left (cert-manager's annotations, the certificate's
/// DNS names, RBAC subjects, the webhooks' Service), and no Namespace object is shipped, so a
/// shared namespace is never relabelled `restricted`.
#[test]
fn the_documented_namespace_overlay_renames_every_reference() {
    let yaml = docs_block("operations.md", "# my-trainguard/kustomization.yaml, another namespace");
    check_renamed(&yaml);
    // The monitoring component added as the docs say, as it is: its alerts follow the rename too.
    let r = check_renamed(&format!("{yaml}components:\n  - ../trainguard/deploy/components/monitoring\n"));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert_eq!(r.raw(kind, "trainguard")["metadata"]["namespace"], "ml-platform", "{kind}");
    }
    // So does the opt-in mutating webhook's configuration.
    let r = check_renamed(&format!("{yaml}components:\n  - ../trainguard/deploy/components/mutating-webhook\n"));
    assert_eq!(webhooks(&r).len(), 2, "both webhook configurations");
}

/// Renders the overlay `yaml` beside a checkout and checks that it lives in `ml-platform`
/// with no reference to `trainguard-system` left.
fn check_renamed(yaml: &str) -> Rendered {
    let r = render_overlay(&[("kustomization.yaml", yaml)]);
    let text = serde_json::to_string(&r.objects).unwrap();
    assert!(!text.contains("trainguard-system"), "a reference to the old namespace is left:\n{text}");
    assert!(r.objects.iter().all(|o| o["kind"] != "Namespace"), "no Namespace object: the user's stays as it is");
    for o in &r.objects {
        if let Some(ns) = o["metadata"]["namespace"].as_str() {
            assert_eq!(ns, "ml-platform", "{} {}", o["kind"], o["metadata"]["name"]);
        }
    }
    let configurations =
        r.objects.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")));
    for w in configurations {
        let kind = &w["kind"];
        assert_eq!(w["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "ml-platform/trainguard-serving");
        for hook in w["webhooks"].as_array().unwrap() {
            assert_eq!(hook["clientConfig"]["service"]["namespace"], "ml-platform", "{kind}");
        }
    }
    let cert = r.raw("Certificate", "trainguard-serving");
    assert_eq!(
        cert["spec"]["dnsNames"],
        json!(["trainguard-webhook.ml-platform.svc", "trainguard-webhook.ml-platform.svc.cluster.local"])
    );
    let mut subjects = 0;
    for o in r.objects.iter().filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding") {
        for s in o["subjects"].as_array().unwrap() {
            assert_eq!(s["namespace"], "ml-platform", "{}", o["metadata"]["name"]);
            subjects += 1;
        }
    }
    assert!(subjects >= 3, "the bindings of both service accounts: {subjects}");
    r
}

/// The webhook-only install (kustomize component, Helm `controller.enabled=false`) is the split
/// install without anything of the controller: no controller Deployment, ServiceAccount,
/// ClusterRole or Lease Role; what stays is as in the full install. (The chart renders the same:
/// `chart_renders_the_kustomize_objects`; the webhook's grants:
/// `each_install_grants_each_service_account_exactly_its_rows`.)
#[test]
fn webhook_only_install_leaves_out_only_the_controller() {
    let r = render_with_components(&["webhook-only"]);
    assert_eq!(r.all::<ClusterRole>().len(), 1, "the webhook's");
    assert!(r.all::<Role>().is_empty() && r.all::<RoleBinding>().is_empty(), "no leader election");
    assert_eq!(r.all::<Deployment>().len(), 1, "no controller Deployment");
    assert_eq!(r.all::<k8s_openapi::api::core::v1::ServiceAccount>().len(), 1);
    let serve = serve_args(&container(&r.deployment()));
    assert!(!serve.controller.enabled && serve.webhook, "the webhook alone");
    // Still a working webhook: the same configuration as the full install.
    assert_eq!(webhooks(&r).len(), 1);
    let full = by_kind_and_name(&render_cert_manager());
    for (key, object) in by_kind_and_name(&r) {
        assert_eq!(full.get(&key), Some(&object), "{key}: differs from the full install");
    }
}

/// The webhook and the controller run apart, from the same image, in kustomize and the chart: the
/// webhook with `--controller=false` on at least 2 replicas behind the Service and the PDB, the
/// controller with `--webhook=false`, leader election and a memory limit, outside both.
#[test]
fn webhook_and_controller_run_as_two_deployments() {
    fn mebibytes(q: &Quantity) -> u64 {
        let text = q.0.as_str();
        let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
        let n: u64 = digits.parse().unwrap();
        match unit {
            "Mi" => n,
            "Gi" => n * 1024,
            other => panic!("memory {text}: unit {other:?}"),
        }
    }
    for r in [render_cert_manager(), render_chart(NAMESPACE, json!({}))] {
        let what = r.what.clone();
        let (webhook, controller) = (r.deployment(), r.controller());
        assert_eq!(r.all::<Deployment>().len(), 2, "{what}");
        let (w, c) = (container(&webhook), container(&controller));
        assert_eq!(w.image, c.image, "{what}: one image");

        let serve = serve_args(&w);
        assert!(serve.webhook && !serve.controller.enabled, "{what}: the webhook runs --controller=false");
        assert!(webhook.spec.as_ref().unwrap().replicas.unwrap() >= 2, "{what}: webhook replicas");

        let serve = serve_args(&c);
        assert!(!serve.webhook && serve.controller.enabled, "{what}: the controller runs --webhook=false");
        assert!(serve.check_roles().is_ok(), "{what}");
        assert_eq!(serve.controller.leader_elect, Some(true), "{what}: leader election");
        assert!(pod_spec(&controller).volumes.is_none(), "{what}: the controller mounts no certificate");
        assert!(c.ports.iter().flatten().all(|p| p.name.as_deref() != Some("webhook")), "{what}: no webhook port");
        let limits = c.resources.clone().unwrap().limits.expect("limits");
        let requests = c.resources.clone().unwrap().requests.expect("requests");
        // 150,000 training pods on 5,000 nodes peaked at 246 MiB (docs/benchmarks.md).
        assert!(mebibytes(&limits["memory"]) >= 400, "{what}: controller memory limit {:?}", limits["memory"]);
        assert!(mebibytes(&requests["memory"]) >= 200, "{what}: controller memory request {:?}", requests["memory"]);
        assert!(controller.spec.as_ref().unwrap().replicas.unwrap() >= 1, "{what}");

        // The API server reaches the webhook's pods only; the PDB guards only them; Prometheus
        // scrapes both.
        let (webhook_pods, controller_pods) = (pod_labels(&webhook), pod_labels(&controller));
        let selector = |name: &str| {
            let svc =
                r.all::<Service>().into_iter().find(|s| s.metadata.name.as_deref().is_some_and(|n| n.ends_with(name)));
            svc.unwrap_or_else(|| panic!("{what}: no Service *{name}")).spec.unwrap().selector.unwrap()
        };
        let hook = selector("-webhook");
        assert!(selects(&hook, &webhook_pods) && !selects(&hook, &controller_pods), "{what}: webhook Service");
        let metrics = selector("-metrics");
        assert!(selects(&metrics, &webhook_pods) && selects(&metrics, &controller_pods), "{what}: metrics Service");
        let pdbs: Vec<PodDisruptionBudget> = r.all();
        assert_eq!(pdbs.len(), 1, "{what}");
        let pdb = match_labels(pdbs[0].spec.as_ref().unwrap().selector.as_ref().unwrap());
        assert!(selects(&pdb, &webhook_pods) && !selects(&pdb, &controller_pods), "{what}: PDB");
        // The Deployments' selectors never overlap.
        let own = |d: &Deployment| match_labels(&d.spec.as_ref().unwrap().selector);
        assert!(!selects(&own(&webhook), &controller_pods) && !selects(&own(&controller), &webhook_pods), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Deployment, Service, PDB

/// The status the real admin router answers for GET `path` (before readiness: /readyz is 503).
fn admin_status(path: &str) -> http::StatusCode {
    let router = trainguard::server::admin::router(Arc::new(Readiness::new(None)), Arc::new(Registry::default()));
    let request = http::Request::get(path).body(axum::body::Body::empty()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(router.oneshot(request)).unwrap().status()
}

#[test]
fn probe_paths_are_served_by_the_admin_port() {
    let cases = [(HEALTHZ, http::StatusCode::OK), (READYZ, http::StatusCode::SERVICE_UNAVAILABLE)];
    for (path, status) in cases {
        assert_eq!(admin_status(path), status, "{path}");
    }
    assert_eq!(admin_status("/nope"), http::StatusCode::NOT_FOUND, "the router does answer 404 for unknown paths");
}

#[test]
fn service_and_probes_reach_the_server_ports_and_paths() {
    let r = render_cert_manager();
    let d = r.deployment();
    let c = container(&d);
    let labels = pod_labels(&d);
    let serve = serve_args(&c);
    let webhook_port = port_of(serve.bind, "bind");
    let admin_port = port_of(serve.admin_bind, "admin-bind");
    assert_eq!(webhook_port, 9443, "webhook port of the issue: Service 443 -> 9443");

    // (Service, port, container port it must reach)
    let cases = [(DEFAULT_SERVICE, 443, webhook_port), ("trainguard-metrics", 8080, admin_port)];
    for (name, port, target) in cases {
        let spec = r.get::<Service>(name).spec.unwrap();
        assert!(selects(&spec.selector.clone().unwrap(), &labels), "{name} selects the pods");
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 1, "{name}");
        assert_eq!(ports[0].port, port, "{name}");
        assert_eq!(resolve(&c, ports[0].target_port.as_ref().unwrap()), target, "{name} targetPort");
    }

    // (container, probe, path): the controller's admin port answers the same probes.
    let controller = container(&r.controller());
    assert_eq!(port_of(serve_args(&controller).admin_bind, "admin-bind"), container_port(&controller, "admin"));
    for c in [&c, &controller] {
        let admin_port = port_of(serve_args(c).admin_bind, "admin-bind");
        let probes =
            [("readiness", c.readiness_probe.clone(), READYZ), ("liveness", c.liveness_probe.clone(), HEALTHZ)];
        for (what, probe, path) in probes {
            let get = probe.unwrap_or_else(|| panic!("{what} probe")).http_get.expect("httpGet");
            assert_eq!(get.path.as_deref(), Some(path), "{what}");
            assert_eq!(resolve(c, &get.port), admin_port, "{what}: admin port");
            assert_eq!(get.scheme.as_deref().unwrap_or("HTTP"), "HTTP", "{what}: admin port is plain HTTP");
        }
    }
}

#[test]
fn deployment_is_highly_available_and_drains_in_time() {
    let r = render_cert_manager();
    let d = r.deployment();
    let spec = d.spec.clone().unwrap();
    let pod = pod_spec(&d);
    let c = container(&d);
    let labels = pod_labels(&d);

    assert_eq!(spec.replicas, Some(2));
    assert!(selects(&match_labels(&spec.selector), &labels));
    let rolling = spec.strategy.unwrap().rolling_update.unwrap();
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)), "upgrades keep every replica ready");

    let anti = pod.affinity.clone().unwrap().pod_anti_affinity.expect("pod anti-affinity");
    let terms = anti.preferred_during_scheduling_ignored_during_execution.unwrap();
    assert!(
        terms.iter().any(|t| t.pod_affinity_term.topology_key == "kubernetes.io/hostname"
            && selects(&match_labels(t.pod_affinity_term.label_selector.as_ref().unwrap()), &labels)),
        "replicas spread over nodes"
    );

    let pdb = r.get::<PodDisruptionBudget>("trainguard-webhook").spec.unwrap();
    assert_eq!(pdb.min_available, Some(IntOrString::Int(1)));
    assert!(selects(&match_labels(pdb.selector.as_ref().unwrap()), &labels));

    // SIGTERM: readiness off, keep serving for --drain-delay, then drain for --shutdown-grace.
    let env = c.env.clone().unwrap_or_default();
    let serve = serve_args(&c);
    let drain = serve.drain_delay + serve.shutdown_grace;
    let grace = Duration::from_secs(u64::try_from(pod.termination_grace_period_seconds.unwrap()).unwrap());
    assert!(serve.drain_delay > Duration::ZERO, "endpoints need time to drop the pod");
    assert!(grace > drain, "terminationGracePeriodSeconds {grace:?} must exceed the drain time {drain:?}");
    // The Deployment turns on JSON logs through the environment.
    let log_format = env.iter().find(|e| e.name == "TRAINGUARD_LOG_FORMAT").and_then(|e| e.value.clone());
    assert_eq!(log_format.and_then(|v| LogFormat::from_str(&v, false).ok()), Some(LogFormat::Json));

    // The controller's Lease namespace and holder identity come from the downward API.
    let controller_env = container(&r.controller()).env.unwrap_or_default();
    for (var, path) in [("POD_NAMESPACE", "metadata.namespace"), ("POD_NAME", "metadata.name")] {
        let found = controller_env.iter().find(|e| e.name == var).unwrap_or_else(|| panic!("{var}"));
        let field = found.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).expect("downward API");
        assert_eq!(field.field_path, path);
    }

    let image = c.image.clone().unwrap();
    assert_eq!(image, format!("trainguard:{}", env!("CARGO_PKG_VERSION")), "image tag follows the crate version");
}

#[test]
fn deployments_are_hardened() {
    let r = render_cert_manager();
    for d in [r.deployment(), r.controller()] {
        assert_hardened(&d);
    }
}

fn assert_hardened(d: &Deployment) {
    let name = d.metadata.name.clone().unwrap();
    let mounts_secret = pod_spec(d).volumes.is_some();
    let pod = pod_spec(d);
    let c = container(d);
    let pod_sc = pod.security_context.clone().expect("pod securityContext");
    let sc = c.security_context.clone().expect("container securityContext");

    let checks: &[(&str, bool)] = &[
        ("pod runAsNonRoot", pod_sc.run_as_non_root == Some(true)),
        ("pod runs as a non-zero uid", pod_sc.run_as_user.is_some_and(|u| u > 0)),
        ("pod seccomp RuntimeDefault", pod_sc.seccomp_profile.as_ref().is_some_and(|s| s.type_ == "RuntimeDefault")),
        ("container runAsNonRoot", sc.run_as_non_root == Some(true)),
        ("readOnlyRootFilesystem", sc.read_only_root_filesystem == Some(true)),
        ("no privilege escalation", sc.allow_privilege_escalation == Some(false)),
        ("not privileged", sc.privileged != Some(true)),
        (
            "all capabilities dropped, none added",
            sc.capabilities
                .as_ref()
                .is_some_and(|caps| caps.drop.as_deref() == Some(&["ALL".to_string()][..]) && caps.add.is_none()),
        ),
        ("container seccomp RuntimeDefault", sc.seccomp_profile.as_ref().is_some_and(|s| s.type_ == "RuntimeDefault")),
        ("no host network", pod.host_network != Some(true)),
        ("no host PID", pod.host_pid != Some(true)),
        // The Secret's files are 0440: readable through fsGroup, not by others.
        (
            "fsGroup reads the Secret",
            !mounts_secret || (pod_sc.fs_group.is_some() && pod_sc.fs_group == pod_sc.run_as_group),
        ),
    ];
    let failed: Vec<&str> = checks.iter().filter(|(_, ok)| !ok).map(|(what, _)| *what).collect();
    assert!(failed.is_empty(), "{name}: failed: {failed:?}");

    let resources = c.resources.clone().expect("resources");
    for (what, list) in [("requests", resources.requests), ("limits", resources.limits)] {
        let list = list.unwrap_or_else(|| panic!("{name}: {what}"));
        for key in ["cpu", "memory"] {
            assert!(list.contains_key(key), "{name}: {what}.{key}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helm chart (deploy/helm/trainguard): the same objects as the cert-manager overlay, rendered
// by `helm template` itself.

const CHART: &str = "deploy/helm/trainguard";
/// The label only the chart sets: it keeps the selectors of two releases apart.
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

fn helm(args: &[&str]) -> String {
    let helm = tool("helm");
    let out = Command::new(&helm).args(args).current_dir(repo()).output().unwrap_or_else(|e| {
        panic!("helm is needed to render the chart but could not be run ({e}); run scripts/install-test-deps.sh")
    });
    assert!(out.status.success(), "helm {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The image a user sets (the chart refuses its unpublished default).
const CHART_TEST_IMAGE: &str = "registry.example.com/trainguard";

/// What `helm install` finds on a Kubernetes >= 1.30 cluster and `helm template` is told.
const SERVES_POLICY: [&str; 2] = ["--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"];
/// What it finds on Kubernetes >= 1.36 as well.
const SERVES_MUTATING_POLICY: [&str; 2] = ["--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"];

/// `helm template RELEASE` in `namespace` with `overrides` as a values file (and an image with a
/// registry unless the overrides set one), for a cluster that serves both admission policies.
fn render_release(release: &str, namespace: &str, overrides: Value) -> Rendered {
    let serves = [SERVES_POLICY, SERVES_MUTATING_POLICY].concat();
    render_release_with(release, namespace, overrides, &serves)
}

fn render_release_with(release: &str, namespace: &str, mut overrides: Value, extra: &[&str]) -> Rendered {
    if overrides.pointer("/image/repository").is_none() {
        overrides["image"]["repository"] = json!(CHART_TEST_IMAGE);
    }
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values.path(), overrides.to_string()).unwrap();
    let mut args = vec!["template", release, CHART, "-n", namespace, "-f", values.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    let text = helm(&args);
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).expect("helm output is YAML");
    let objects = objects.into_iter().filter(|o| !o.is_null()).collect();
    Rendered { what: format!("{CHART} as {release} in {namespace}"), objects }
}

/// The overlay's objects with the chart's test image: the chart needs an image with a registry,
/// the overlay's `images:` is what `make deploy` sets.
fn with_chart_test_image(mut r: Rendered) -> Rendered {
    r.objects = r
        .objects
        .into_iter()
        .map(|o| {
            let text = o.to_string().replace("\"image\":\"trainguard:", &format!("\"image\":\"{CHART_TEST_IMAGE}:"));
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    r
}

fn render_chart(namespace: &str, overrides: Value) -> Rendered {
    render_release("trainguard", namespace, overrides)
}

fn without_instance_label(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove(INSTANCE_LABEL);
            map.values_mut().for_each(without_instance_label);
        }
        Value::Array(items) => items.iter_mut().for_each(without_instance_label),
        _ => {}
    }
}

fn by_kind_and_name(r: &Rendered) -> BTreeMap<String, Value> {
    r.objects
        .iter()
        .map(|o| (format!("{} {}", o["kind"].as_str().unwrap(), o["metadata"]["name"]), o.clone()))
        .collect()
}

/// The chart renders what kustomize renders (but for the chart's instance label, and the
/// Namespace: Helm installs into an existing one): its defaults the cert-manager overlay, and each
/// switch the overlay with the component of the same switch.
#[test]
fn chart_renders_the_kustomize_objects() {
    // (chart values, components added to the cert-manager overlay)
    let cases: [(Value, &[&str]); 7] = [
        (json!({}), &[]),
        (json!({"mutatingWebhook": {"enabled": true}}), &["mutating-webhook"]),
        (json!({"mutatingPolicy": {"enabled": true}}), &["mutating-policy"]),
        (
            json!({"mutatingWebhook": {"enabled": true}, "mutatingPolicy": {"enabled": true}}),
            &["mutating-webhook", "mutating-policy"],
        ),
        (json!({"controller": {"mode": "act"}}), &["act"]),
        (json!({"ttlStash": {"enabled": true}}), &["ttl-stash-rbac"]),
        // Nobody to grant the stash remedy's patch to: the value does nothing.
        (json!({"controller": {"enabled": false}, "ttlStash": {"enabled": true}}), &["webhook-only"]),
    ];
    for (values, components) in cases {
        assert_chart_renders(values, render_with_components(components), &[]);
    }
}

/// The chart with `values` renders `kustomize`'s objects (with the chart's test image), but for
/// the chart's instance label, the Namespace (Helm installs into an existing one) and the objects
/// named in `not_in_chart`.
fn assert_chart_renders(values: Value, kustomize: Rendered, not_in_chart: &[&str]) {
    // Env in name order: kustomize's `act` patch puts the variable it sets first.
    let env_by_name = |r: &mut Rendered| {
        let containers = r.objects.iter_mut().filter_map(|o| o.pointer_mut("/spec/template/spec/containers"));
        for env in containers.filter_map(Value::as_array_mut).flatten().filter_map(|c| c.get_mut("env")) {
            env.as_array_mut().unwrap().sort_by_key(|e| e["name"].to_string());
        }
    };
    let mut chart = render_chart(NAMESPACE, values.clone());
    for o in &mut chart.objects {
        without_instance_label(o);
    }
    env_by_name(&mut chart);
    let chart = by_kind_and_name(&chart);
    let mut kustomize = with_chart_test_image(kustomize);
    env_by_name(&mut kustomize);
    let mut kustomize = by_kind_and_name(&kustomize);
    for key in ["Namespace \"trainguard-system\""].iter().chain(not_in_chart) {
        assert!(kustomize.remove(*key).is_some(), "kustomize renders no {key}");
    }
    assert_eq!(chart.keys().collect::<Vec<_>>(), kustomize.keys().collect::<Vec<_>>(), "{values}");
    for (key, object) in &kustomize {
        assert_eq!(&chart[key], object, "{values}: {key}: chart and kustomize differ");
    }
}

/// Without cert-manager (`certificates.source: secret`) the chart renders what the static-certs
/// overlay renders, but for the TLS Secret, which the user applies (`trainguard certs` writes it,
/// certs/secret.yaml), with the CA given by `--set-file certificates.caBundle=certs/ca.crt`. A
/// missing CA or an unknown source is refused with what to do.
#[test]
fn chart_without_cert_manager_renders_the_static_certs_objects_but_the_secret() {
    let checkout = static_certs_checkout();
    let ca = std::fs::read_to_string(checkout.path().join("certs/ca.crt")).unwrap();
    // (chart values besides the certificates, components added to the static-certs overlay)
    let cases: [(Value, &[&str]); 3] = [
        (json!({}), &[]),
        (json!({"mutatingWebhook": {"enabled": true}}), &["mutating-webhook"]),
        (json!({"controller": {"mode": "act"}}), &["act"]),
    ];
    for (mut values, components) in cases {
        values["certificates"] = json!({"source": "secret", "caBundle": ca});
        assert_chart_renders(
            values,
            render_static_certs_in(checkout.path(), components),
            &["Secret \"trainguard-tls\""],
        );
    }
    // (values, what the refusal says)
    let refused = [
        (json!({"source": "secret"}), "certificates.source=secret needs certificates.caBundle"),
        (
            json!({"source": "secret", "caBundle": "not a certificate"}),
            "certificates.source=secret needs certificates.caBundle",
        ),
        (json!({"source": "vault"}), "certificates.source \"vault\": use cert-manager (the default) or secret"),
    ];
    for (certificates, says) in refused {
        let stderr = chart_refusal(json!({"image": {"repository": CHART_TEST_IMAGE}, "certificates": certificates}));
        assert!(stderr.contains(says), "{certificates}: {stderr}");
    }
}

/// What `helm template` says when it refuses to render the chart with `values`.
fn chart_refusal(values: Value) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), values.to_string()).unwrap();
    let out = Command::new(tool("helm"))
        .args(["template", "trainguard", CHART, "-n", NAMESPACE, "-f", file.path().to_str().unwrap()])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the chart renders with {values}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The chart refuses the unpublished default image, as `make deploy` does, and renders the
/// opt-out ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) only where the cluster
/// serves it (every supported minor does; `helm template` is told nothing unless asked), and
/// refuses a cluster below the supported range.
#[test]
fn chart_refuses_the_default_image_and_gates_the_admission_policy() {
    let stderr = chart_refusal(json!({}));
    assert!(stderr.contains("image.repository \"trainguard\" names no registry"), "{stderr}");

    let policy = |r: &Rendered| r.objects.iter().any(|o| o["kind"] == "ValidatingAdmissionPolicy");
    // (extra helm flags, policy rendered)
    let cases: &[(&[&str], bool)] = &[
        (&SERVES_POLICY, true),
        (&["--kube-version", "1.32.0", SERVES_POLICY[0], SERVES_POLICY[1]], true),
        // A render told nothing: no v1 policy a cluster might refuse.
        (&["--kube-version", "1.32.0"], false),
        (&[], false),
    ];
    for (extra, want) in cases {
        let r = render_release_with("trainguard", NAMESPACE, json!({}), extra);
        assert_eq!(policy(&r), *want, "{extra:?}");
        let bindings = r.objects.iter().any(|o| o["kind"] == "ValidatingAdmissionPolicyBinding");
        assert_eq!(bindings, *want, "{extra:?}: the binding goes with its policy");
    }
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(CHART).join("Chart.yaml")).unwrap()).unwrap();
    assert_eq!(chart["kubeVersion"], ">=1.32.0-0", "the oldest supported minor (docs/operations.md)");
    let below = Command::new(tool("helm"))
        .args(["template", "trainguard", CHART, "-n", NAMESPACE, "--kube-version", "1.31.9"])
        .args(["--set", "image.repository=registry.example/trainguard"])
        .current_dir(repo())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&below.stderr);
    assert!(!below.status.success() && stderr.contains("kubeVersion"), "a 1.31 cluster: {stderr}");
}

/// mutatingPolicy.enabled renders the MutatingAdmissionPolicy (admissionregistration.k8s.io/v1,
/// Kubernetes >= 1.36) where the cluster serves it, and refuses to render elsewhere: the user
/// asked for defaults the API server would not apply.
#[test]
fn chart_renders_the_defaults_policy_only_where_the_cluster_serves_it() {
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values.path(), json!({"image": {"repository": CHART_TEST_IMAGE}}).to_string()).unwrap();
    // (extra helm flags, rendered)
    let cases: &[(&[&str], bool)] = &[
        (&SERVES_MUTATING_POLICY, true),
        (&["--kube-version", "1.36.0", SERVES_MUTATING_POLICY[0], SERVES_MUTATING_POLICY[1]], true),
        // 1.35 serves only v1beta1 (off by default), a render told nothing serves nothing.
        (&["--kube-version", "1.35.2", SERVES_POLICY[0], SERVES_POLICY[1]], false),
        (&[], false),
    ];
    for (extra, served) in cases {
        let mut args = vec!["template", "trainguard", CHART, "-n", NAMESPACE, "-f", values.path().to_str().unwrap()];
        args.extend(["--set", "mutatingPolicy.enabled=true"]);
        args.extend_from_slice(extra);
        let out = Command::new(tool("helm")).args(&args).current_dir(repo()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), *served, "{extra:?}: {stderr}");
        if *served {
            let text = String::from_utf8(out.stdout).unwrap();
            let kinds: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
            let policies =
                kinds.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("MutatingAdmissionPolicy")));
            assert_eq!(policies.count(), 2, "{extra:?}: the policy and its binding");
        } else {
            assert!(
                stderr.contains("does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"),
                "{extra:?}: {stderr}"
            );
        }
    }
}

#[test]
fn chart_values_and_namespace_reach_every_object() {
    let values = json!({
        "image": {"repository": "registry.example.com/ml/trainguard", "tag": "9.9.9", "pullPolicy": "Always"},
        "replicaCount": 3,
        "logFormat": "text",
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
        ]}}},
        "priorityClassName": "system-cluster-critical",
        "controller": {"mode": "report", "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "768Mi"}}},
        "extraArgs": ["--suspend-rule=new", "--cache-stale-after=2m"],
        "imagePullSecrets": [{"name": "my-registry"}],
        "podAnnotations": {"example.com/team": "ml-platform"},
        "podLabels": {"example.com/cost-center": "42"},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "trainguard"}}}],
        "mutatingWebhook": {"enabled": true},
        "mutatingPolicy": {"enabled": true},
    });
    let r = render_chart("ml-guard", values);
    let text = serde_json::to_string(&r.objects).unwrap();
    assert!(!text.contains("trainguard-system"), "no hard-coded namespace left");

    let d = r.deployment();
    let c = container(&d);
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(c.image.as_deref(), Some("registry.example.com/ml/trainguard:9.9.9"));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    let pod = pod_spec(&d);
    assert_eq!(pod.node_selector, Some(BTreeMap::from([("pool".to_string(), "system".to_string())])));
    let tolerations = pod.tolerations.clone().unwrap();
    assert_eq!((tolerations.len(), tolerations[0].key.as_deref()), (1, Some("dedicated")));
    let affinity = pod.affinity.clone().unwrap();
    assert!(affinity.node_affinity.is_some() && affinity.pod_anti_affinity.is_none(), "affinity replaces the default");
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-cluster-critical"));
    assert_eq!(pod.image_pull_secrets.clone().unwrap()[0].name, "my-registry");
    let spread = pod.topology_spread_constraints.clone().unwrap();
    assert_eq!((spread.len(), spread[0].topology_key.as_str()), (1, "topology.kubernetes.io/zone"));
    let template = d.spec.as_ref().unwrap().template.metadata.clone().unwrap();
    assert_eq!(template.annotations.unwrap()["example.com/team"], "ml-platform");
    let labels = template.labels.unwrap();
    assert_eq!(labels["example.com/cost-center"], "42");
    // Extra pod labels never reach the selector (it is immutable).
    let selector = match_labels(&d.spec.as_ref().unwrap().selector);
    assert!(!selector.contains_key("example.com/cost-center") && selects(&selector, &labels));
    // The container's command line, as the binary parses it.
    let controller = r.controller();
    let cc = container(&controller);
    assert_eq!(serve_args(&cc).controller.planner.mode(), Mode::Report);
    for c in [&c, &cc] {
        let args = c.args.clone().unwrap();
        for extra in ["--suspend-rule=new", "--cache-stale-after=2m"] {
            assert!(args.iter().any(|a| a == extra), "{extra} in {args:?}");
        }
    }
    // The pod-placement values reach the controller too (not the webhook's spreading).
    let cpod = pod_spec(&controller);
    assert_eq!(cc.image, c.image);
    assert_eq!(
        (cpod.node_selector, cpod.priority_class_name.as_deref()),
        (pod.node_selector.clone(), Some("system-cluster-critical"))
    );
    assert_eq!(cpod.tolerations, pod.tolerations);
    assert_eq!(cpod.image_pull_secrets, pod.image_pull_secrets);
    assert!(cpod.topology_spread_constraints.is_none());
    let cres = cc.resources.clone().unwrap();
    assert_eq!(cres.limits.unwrap()["memory"].0, "768Mi", "controller.resources");
    let env = c.env.clone().unwrap();
    assert_eq!(env.iter().find(|e| e.name == "TRAINGUARD_LOG_FORMAT").and_then(|e| e.value.as_deref()), Some("text"));
    let resources = c.resources.clone().unwrap();
    let quantity = |list: &Option<BTreeMap<String, Quantity>>, key: &str| list.as_ref().unwrap()[key].0.clone();
    assert_eq!(
        [
            quantity(&resources.requests, "cpu"),
            quantity(&resources.requests, "memory"),
            quantity(&resources.limits, "cpu"),
            quantity(&resources.limits, "memory")
        ],
        ["250m", "256Mi", "2", "1Gi"]
    );

    let cluster_scoped = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ];
    for o in &r.objects {
        let kind = o["kind"].as_str().unwrap();
        let want = if cluster_scoped.contains(&kind) { None } else { Some("ml-guard") };
        assert_eq!(o["metadata"]["namespace"].as_str(), want, "{kind} {}", o["metadata"]["name"]);
    }
    let serving = r.raw("Certificate", "trainguard-serving");
    let target =
        Target { service: DEFAULT_SERVICE.into(), namespace: "ml-guard".into(), secret_name: DEFAULT_SECRET.into() };
    let dns: Vec<String> = serde_json::from_value(serving["spec"]["dnsNames"].clone()).unwrap();
    assert_eq!(dns, target.dns_names());
    assert_eq!(webhooks(&r).len(), 2, "mutatingWebhook.enabled");
    for w in webhooks(&r) {
        assert_eq!(w.client_config.service.as_ref().unwrap().namespace, "ml-guard", "{}", w.configuration);
        assert_eq!(
            w.annotations.get("cert-manager.io/inject-ca-from").map(String::as_str),
            Some("ml-guard/trainguard-serving")
        );
    }
    for binding in r
        .all::<ClusterRoleBinding>()
        .iter()
        .map(|b| b.subjects.clone())
        .chain(r.all::<RoleBinding>().iter().map(|b| b.subjects.clone()))
    {
        assert_eq!(binding.unwrap()[0].namespace.as_deref(), Some("ml-guard"));
    }
}

#[test]
fn chart_opt_out_policy_can_be_left_out() {
    let has_policy = |r: &Rendered| r.objects.iter().any(|o| o["kind"] == "ValidatingAdmissionPolicy");
    assert!(has_policy(&render_chart(NAMESPACE, json!({}))), "on by default");
    let off = render_chart(NAMESPACE, json!({"optOutPolicy": {"enabled": false}}));
    let kinds: BTreeSet<&str> = off.objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert!(!kinds.iter().any(|k| k.starts_with("ValidatingAdmissionPolicy")), "{kinds:?}");
    assert!(kinds.contains("ValidatingWebhookConfiguration"), "the rest stays: {kinds:?}");
}

/// The NetworkPolicy selects trainguard's pods (the controller's have no webhook port), admits the webhook port from anywhere and the
/// admin port only from the monitoring namespace (plus what the chart's values add); the chart
/// can leave it out.
#[test]
fn network_policy_guards_the_admin_port_and_leaves_the_webhook_port_open() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    for rendered in [render_cert_manager(), render_chart(NAMESPACE, json!({}))] {
        let policy: NetworkPolicy = rendered.all::<NetworkPolicy>().remove(0);
        let d = rendered.deployment();
        let c = container(&d);
        let spec = policy.spec.unwrap();
        let pods = match_labels(&spec.pod_selector.unwrap_or_default());
        assert!(selects(&pods, &pod_labels(&d)), "{}: the webhook's pods", rendered.what);
        assert!(selects(&pods, &pod_labels(&rendered.controller())), "{}: the controller's pods", rendered.what);
        assert!(container(&rendered.controller()).ports.iter().flatten().all(|p| p.name.as_deref() != Some("webhook")));
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]), "egress is not restricted");
        let rules = spec.ingress.unwrap();
        let port = |r: &k8s_openapi::api::networking::v1::NetworkPolicyIngressRule| {
            let ports = r.ports.clone().unwrap();
            assert_eq!(ports.len(), 1);
            resolve(&c, ports[0].port.as_ref().unwrap())
        };
        let serve = serve_args(&c);
        let webhook_port = port_of(serve.bind, "--bind");
        let admin_port = port_of(serve.admin_bind, "--admin-bind");
        let webhook = rules.iter().find(|r| port(r) == webhook_port).expect("a rule for the webhook port");
        assert!(webhook.from.as_ref().is_none_or(Vec::is_empty), "the API server must reach it from anywhere");
        let admin = rules.iter().find(|r| port(r) == admin_port).expect("a rule for the admin port");
        let from = admin.from.clone().unwrap();
        assert_eq!(from.len(), 2, "{}: {from:?}", rendered.what);
        // Prometheus is admitted from `monitoring`, or from any namespace that opts in by a label,
        // whatever its name.
        let admitted = |labels: &[(&str, &str)]| {
            let labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            from.iter().any(|peer| selects(&match_labels(peer.namespace_selector.as_ref().unwrap()), &labels))
        };
        let cases: [(&[(&str, &str)], bool); 4] = [
            (&[("kubernetes.io/metadata.name", "monitoring")], true),
            (&[("kubernetes.io/metadata.name", "observability"), ("trainguard.io/scrape", "true")], true),
            (&[("kubernetes.io/metadata.name", "observability")], false),
            (&[("kubernetes.io/metadata.name", "team-a"), ("trainguard.io/scrape", "false")], false),
        ];
        for (labels, want) in cases {
            assert_eq!(admitted(labels), want, "{}: namespace {labels:?}", rendered.what);
        }
        assert_eq!(rules.len(), 2, "{}: nothing else is admitted", rendered.what);
    }
    let values =
        json!({"networkPolicy": {"monitoringNamespace": "prom", "adminFrom": [{"ipBlock": {"cidr": "10.0.0.0/16"}}]}});
    let custom = render_chart(NAMESPACE, values).all::<NetworkPolicy>().remove(0);
    let admin = custom.spec.unwrap().ingress.unwrap().remove(1).from.unwrap();
    assert_eq!(admin.len(), 3);
    assert_eq!(admin[2].ip_block.as_ref().unwrap().cidr, "10.0.0.0/16");
    let off = render_chart(NAMESPACE, json!({"networkPolicy": {"enabled": false}}));
    assert!(off.all::<NetworkPolicy>().is_empty(), "networkPolicy.enabled=false leaves it out");
}

/// `clientCA.secretName` mounts the Secret and turns `--client-ca` on; unset, neither.
#[test]
fn chart_mounts_the_client_ca_when_given() {
    let cases = [
        (json!({}), None),
        (json!({"clientCA": {"secretName": "apiserver-client-ca"}}), Some("/client-ca/ca.crt")),
        (
            json!({"clientCA": {"secretName": "apiserver-client-ca", "key": "bundle.pem"}}),
            Some("/client-ca/bundle.pem"),
        ),
    ];
    for (values, want) in cases {
        let d = render_chart(NAMESPACE, values.clone()).deployment();
        let serve = serve_args(&container(&d));
        assert_eq!(serve.client_ca.as_deref().map(|p| p.to_str().unwrap()), want, "{values}");
        let mounted = container(&d).volume_mounts.unwrap_or_default().iter().any(|m| m.mount_path == "/client-ca");
        let volume = pod_spec(&d)
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "client-ca")
            .and_then(|v| v.secret)
            .and_then(|s| s.secret_name);
        assert_eq!(mounted, want.is_some(), "{values}");
        assert_eq!(volume.as_deref(), want.map(|_| "apiserver-client-ca"), "{values}");
    }
}

#[test]
fn chart_version_follows_the_crate() {
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(CHART).join("Chart.yaml")).unwrap()).unwrap();
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(CHART).join("values.yaml")).unwrap()).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["version"], version);
    assert_eq!(chart["appVersion"], version);
    // Empty: the image follows appVersion, so upgrading the chart moves the image.
    assert_eq!(values["image"]["tag"], "");
    let image = container(&render_chart(NAMESPACE, json!({"image": {"repository": "r.example.com/tg"}})).deployment())
        .image
        .unwrap();
    assert_eq!(image, format!("r.example.com/tg:{version}"));
    // The manifests' tag and every install line of the README and docs name the version the
    // binary says (`trainguard --version`): what main ships, not an older release.
    let tag = container(&render_cert_manager().deployment()).image.unwrap();
    assert_eq!(tag, format!("trainguard:{version}"));
    for doc in ["README.md", "docs/operations.md", "certs/README.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        let mut lines = 0;
        let installs =
            text.lines().filter(|l| l.contains("make deploy IMAGE=REGISTRY/trainguard:") && !l.contains(":TAG"));
        for line in installs {
            assert!(line.contains(&format!("IMAGE=REGISTRY/trainguard:{version}")), "{doc}: {line}");
            lines += 1;
        }
        assert!(lines > 0, "{doc} shows the install command");
    }
}

#[test]
fn chart_second_release_collides_with_nothing() {
    let opt_ins = json!({"mutatingWebhook": {"enabled": true}, "mutatingPolicy": {"enabled": true}});
    let first = render_release("trainguard", "ml", opt_ins.clone());
    let second = render_release("team-b", "ml", opt_ins);
    let names = |r: &Rendered| r.kinds_and_names();
    let shared: Vec<String> = names(&first).intersection(&names(&second)).cloned().collect();
    assert!(shared.is_empty(), "both releases create {shared:?}");

    // Every reference in the second release stays inside it.
    let d = second.deployment_named("team-b-trainguard-webhook");
    let pod = pod_spec(&d);
    let labels = pod_labels(&d);
    let first_labels = pod_labels(&first.deployment());
    for svc in second.all::<Service>() {
        let selector = svc.spec.unwrap().selector.unwrap();
        assert!(selects(&selector, &labels), "{:?} selects its own pods", svc.metadata.name);
        assert!(!selects(&selector, &first_labels), "{:?} selects the other release's pods", svc.metadata.name);
    }
    let pdb = second.get::<PodDisruptionBudget>("team-b-trainguard-webhook").spec.unwrap();
    assert!(!selects(&match_labels(pdb.selector.as_ref().unwrap()), &first_labels));
    assert_eq!(pod.service_account_name.as_deref(), Some("team-b-trainguard-webhook"));
    let controller = second.deployment_named("team-b-trainguard-controller");
    let first_controller_labels = pod_labels(&first.controller());
    assert_eq!(pod_spec(&controller).service_account_name.as_deref(), Some("team-b-trainguard-controller"));
    for svc in second.all::<Service>() {
        let selector = svc.spec.unwrap().selector.unwrap();
        assert!(
            !selects(&selector, &first_controller_labels),
            "{:?} selects the other release's controller",
            svc.metadata.name
        );
    }
    let secret = pod.volumes.unwrap()[0].secret.clone().unwrap().secret_name.unwrap();
    let serving = second.raw("Certificate", "team-b-trainguard-serving");
    assert_eq!(serving["spec"]["secretName"], secret.as_str());
    let dns: Vec<String> = serde_json::from_value(serving["spec"]["dnsNames"].clone()).unwrap();
    let target = Target { service: "team-b-trainguard-webhook".into(), namespace: "ml".into(), secret_name: secret };
    assert_eq!(dns, target.dns_names());
    for w in webhooks(&second) {
        assert_eq!(w.client_config.service.as_ref().unwrap().name, "team-b-trainguard-webhook", "{}", w.configuration);
        assert_eq!(
            w.annotations.get("cert-manager.io/inject-ca-from").map(String::as_str),
            Some("ml/team-b-trainguard-serving")
        );
    }
    for part in ["webhook", "controller"] {
        let binding: ClusterRoleBinding = second.get(&format!("team-b-trainguard-{part}"));
        assert_eq!(binding.role_ref.name, format!("team-b-trainguard-{part}"));
        assert_eq!(binding.subjects.unwrap()[0].name, format!("team-b-trainguard-{part}"));
    }
    let binding = second.raw("MutatingAdmissionPolicyBinding", "team-b-trainguard-defaults");
    assert_eq!(binding["spec"]["policyName"], "team-b-trainguard-defaults", "its own policy");
    // One Lease per release: two leaders, one per installation.
    let serve = serve_args(&container(&controller));
    assert_eq!(serve.controller.lease_name, "team-b-trainguard-controller");
    assert_eq!(serve_args(&container(&first.controller())).controller.lease_name, "trainguard-controller");
}

/// NOTES.txt as `helm install` prints it, for the values that change what is left to do.
#[test]
fn chart_passes_helm_lint_and_renders_its_notes() {
    helm(&["lint", "--strict", CHART, "--set", "image.repository=registry.example.com/trainguard"]);
    // (values, must contain, must not contain)
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (
            &[],
            &[
                "rollout status deploy/team-b-trainguard-webhook",
                "rollout status deploy/team-b-trainguard-controller",
                "pod-security.kubernetes.io/enforce=restricted",
                "kubectl apply --dry-run=server",
                "The webhooks are registered",
                "runs in report mode",
                "only members of system:masters",
                "never a bare --reuse-values",
            ],
            &["NOT DONE YET"],
        ),
        (
            &["webhooks.enabled=false"],
            &["NOT DONE YET", "--set webhooks.enabled=true", "rollout status deploy/team-b-trainguard"],
            &["The webhooks are registered", "kubectl apply --dry-run=server"],
        ),
        (&["controller.mode=act"], &["The companion controller acts"], &["report mode"]),
        (&["controller.enabled=false"], &["Webhook only"], &["report mode", "controller acts", "-controller"]),
        (&["optOut.groups={platform-admins}"], &["only members of platform-admins"], &["system:masters"]),
    ];
    for (sets, want, not) in cases {
        let mut args = vec!["install", "team-b", CHART, "-n", "ml", "--dry-run=client"];
        args.extend(["--set", "image.repository=registry.example.com/trainguard"]);
        for set in *sets {
            args.extend(["--set", set]);
        }
        let out = helm(&args);
        let notes = &out[out.find("NOTES:").expect("NOTES.txt rendered")..];
        for w in *want {
            assert!(notes.contains(w), "{sets:?}: NOTES lack {w:?}:\n{notes}");
        }
        for n in *not {
            assert!(!notes.contains(n), "{sets:?}: NOTES say {n:?}:\n{notes}");
        }
    }
}

/// The PodDisruptionBudget (minAvailable 1) exists only where it cannot block every drain.
#[test]
fn chart_pdb_only_with_more_than_one_replica() {
    for (replicas, pdb) in [(1, false), (2, true), (3, true)] {
        let r = render_chart(NAMESPACE, json!({"replicaCount": replicas}));
        let pdbs: Vec<PodDisruptionBudget> = r.all();
        assert_eq!(pdbs.len(), usize::from(pdb), "replicaCount {replicas}");
        for p in pdbs {
            let min = p.spec.unwrap().min_available.unwrap();
            assert!(matches!(min, IntOrString::Int(m) if m < replicas), "replicaCount {replicas}: {min:?}");
        }
    }
}

/// The opt-out groups come from one value: the webhook's --opt-out-groups and the policy's list
/// agree in the chart for any value, and in the kustomize manifests as shipped.
#[test]
fn opt_out_groups_feed_the_webhook_and_the_policy_alike() {
    fn policy_groups(r: &Rendered) -> Vec<String> {
        let policy = r.objects.iter().find(|o| o["kind"] == "ValidatingAdmissionPolicy").expect("the policy");
        let var = policy["spec"]["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "optOutGroups")
            .expect("optOutGroups");
        let program = cel::Program::compile(var["expression"].as_str().unwrap()).expect("CEL compiles");
        let value = program.execute(&cel::Context::default()).expect("a constant").json().expect("JSON");
        serde_json::from_value(value).expect("a list of strings")
    }
    let kustomize = render_cert_manager();
    let default = vec!["system:masters".to_string()];
    let cases: Vec<(&str, Rendered, Vec<String>)> = vec![
        ("kustomize", kustomize, default.clone()),
        ("chart default", render_chart(NAMESPACE, json!({})), default),
        (
            "chart two groups",
            render_chart(NAMESPACE, json!({"optOut": {"groups": ["platform-admins", "oidc:sre's"]}})),
            vec!["platform-admins".to_string(), "oidc:sre's".to_string()],
        ),
    ];
    for (what, r, want) in cases {
        let serve = serve_args(&container(&r.deployment()));
        assert_eq!(serve.rules.opt_out_groups, want, "{what}: --opt-out-groups");
        assert_eq!(policy_groups(&r), want, "{what}: the policy's optOutGroups");
    }
}

/// Values that would desync the webhook and the policy, or that were renamed, fail the render
/// with a message instead of being ignored.
#[test]
fn chart_refuses_values_that_would_be_silently_wrong() {
    let cases = [
        (json!({"extraArgs": ["--opt-out-groups=admins"]}), "use optOut.groups"),
        (json!({"extraArgs": ["--controller-mode=act"]}), "use controller.mode"),
        (json!({"extraArgs": ["--controller=false"]}), "controller.enabled=false leaves the controller out"),
        (json!({"extraArgs": ["--webhook=false"]}), "two Deployments"),
        (json!({"controllerMode": "act"}), "renamed to controller.mode"),
        (json!({"optOut": {"groups": []}}), "optOut.groups is empty"),
    ];
    for (values, want) in cases {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), values.to_string()).unwrap();
        let out = Command::new(tool("helm"))
            .args(["template", "trainguard", CHART, "-f", file.path().to_str().unwrap()])
            .args(["--set", "image.repository=registry.example.com/trainguard"])
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{values} renders");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{values}: {stderr}");
    }
}

#[test]
fn static_certs_overlay_before_make_certs_points_at_certs_readme() {
    // A checkout as cloned: certs/ holds only its README.
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("deploy"), &tmp.path().join("deploy"));
    std::fs::create_dir_all(tmp.path().join("certs")).unwrap();
    std::fs::copy(repo().join("certs/README.md"), tmp.path().join("certs/README.md")).unwrap();
    let out =
        Command::new(kubectl()).arg("kustomize").arg(tmp.path().join("deploy/overlays/static-certs")).output().unwrap();
    assert!(!out.status.success(), "the overlay must not render without certificates");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let certs = tmp.path().join("certs");
    assert!(stderr.contains(&certs.display().to_string()), "kustomize names the certs/ directory: {stderr}");
    // The README there says what to run, and quotes the error a user sees.
    let readme = std::fs::read_to_string(repo().join("certs/README.md")).unwrap();
    assert!(readme.contains("make certs") && readme.contains("unable to find one of 'kustomization.yaml'"));
    assert!(stderr.contains("unable to find one of 'kustomization.yaml'"), "{stderr}");
    // Only the README is tracked there; what `make certs` writes is ignored.
    let ignore = std::fs::read_to_string(repo().join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "/certs/*") && ignore.lines().any(|l| l == "!/certs/README.md"));
}

// ---------------------------------------------------------------------------------------------
// `make deploy`: the ordered install, against a kubectl that records its calls.

/// A kubectl that logs each call, renders with the real one, answers `get crd` from the CRDs it
/// is told exist, copies what `apply -f` gets, and fails `wait` when told to.
const FAKE_KUBECTL: &str = r#"#!/usr/bin/env bash
echo "$*" >>"$FAKE_DIR/calls"
case "$1" in
  kustomize) exec "$REAL_KUBECTL" "$@" ;;
  config) grep -qx NO-CONTEXT "$FAKE_DIR/crds" && exit 1; echo fake-context ;;
  get)
    if [[ "$2" == --raw ]]; then
      grep -qx NO-CLUSTER "$FAKE_DIR/crds" && { echo "the server could not find the requested resource"; exit 1; }
      echo '{"major":"1","minor":"31","gitVersion":"v1.31.0"}'; exit 0
    fi
    shift 2
    for crd in "$@"; do grep -qx "$crd" "$FAKE_DIR/crds" || { echo "crd $crd not found" >&2; exit 1; }; done ;;
  apply) cp "$3" "$FAKE_DIR/applied.yaml" ;;
  -n) exit "${FAKE_WAIT_RC:-0}" ;;
esac
"#;

struct Deploy {
    code: i32,
    stderr: String,
    calls: Vec<String>,
    image: Option<String>,
    kinds: BTreeSet<String>,
}

/// A kubectl call without its `-f FILE` (a temporary path).
fn without_file(call: &str) -> String {
    match call.split_once(" -f ") {
        Some((head, rest)) => match rest.split_once(' ') {
            Some((_, more)) => format!("{head} {more}"),
            None => head.to_string(),
        },
        None => call.to_string(),
    }
}

fn make_deploy(vars: &[&str], crds: &[&str], wait_rc: i32) -> Deploy {
    let fake = tempfile::tempdir().unwrap();
    let kubectl_path = fake.path().join("kubectl");
    std::fs::write(&kubectl_path, FAKE_KUBECTL).unwrap();
    std::fs::set_permissions(&kubectl_path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(fake.path().join("crds"), crds.iter().map(|c| format!("{c}\n")).collect::<String>()).unwrap();
    let out = Command::new("make")
        .args(["-s", "--no-print-directory", "deploy"])
        .args(vars)
        .current_dir(repo())
        .env("KUBECTL", &kubectl_path)
        .env("REAL_KUBECTL", kubectl())
        .env("FAKE_DIR", fake.path())
        .env("FAKE_WAIT_RC", wait_rc.to_string())
        .output()
        .expect("make is installed");
    let calls = std::fs::read_to_string(fake.path().join("calls")).unwrap_or_default();
    let applied = std::fs::read_to_string(fake.path().join("applied.yaml")).ok();
    let objects: Vec<Value> = applied.map(|t| serde_saphyr::from_multiple(&t).unwrap()).unwrap_or_default();
    let rendered = Rendered { what: "make deploy".into(), objects };
    let image = rendered
        .objects
        .iter()
        .any(|o| o["kind"] == "Deployment")
        .then(|| container(&rendered.deployment()).image.unwrap());
    Deploy {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        calls: calls.lines().map(without_file).collect(),
        image,
        kinds: rendered.kinds_and_names(),
    }
}

/// (make variables, CRDs present, wait exit, exit, stderr has, calls (prefixes), image applied)
type DeployCase<'a> = (&'a [&'a str], &'a [&'a str], i32, i32, &'a str, &'a [&'a str], Option<&'a str>);

#[test]
fn make_deploy_installs_in_order_and_refuses_what_would_break_writes() {
    let trainjob = "trainjobs.trainer.kubeflow.org";
    let cm = ["certificates.cert-manager.io", "issuers.cert-manager.io"];
    let all = [trainjob, cm[0], cm[1]];
    let only_trainjob = [trainjob];
    let no_context = ["NO-CONTEXT", trainjob, cm[0], cm[1]];
    let no_cluster = ["NO-CLUSTER", trainjob, cm[0], cm[1]];
    let ordered = [
        "config current-context",
        "get --raw /version",
        "get crd trainjobs.trainer.kubeflow.org",
        "get crd certificates.cert-manager.io issuers.cert-manager.io",
        "kustomize",
        "apply -l trainguard.io/install-step!=webhooks",
        "-n trainguard-system wait deploy/trainguard-webhook --for=condition=Available --timeout=5m",
        "apply",
        "-n trainguard-system delete deployment/trainguard poddisruptionbudget/trainguard serviceaccount/trainguard --ignore-not-found",
        "delete clusterrolebinding/trainguard clusterrole/trainguard --ignore-not-found",
    ];
    let cases: Vec<DeployCase> = vec![
        (&[], &all, 0, 2, "IMAGE is not set", &[], None),
        (&["IMAGE=trainguard:0.1.0"], &all, 0, 2, "names no registry", &[], None),
        (&["IMAGE=registry.example.com/trainguard"], &all, 0, 2, "has no tag or digest", &[], None),
        (&["IMAGE=r.example.com/tg:1", "OVERLAY=plain"], &all, 0, 2, "use cert-manager or static-certs", &[], None),
        (
            &["IMAGE=r.example.com/tg:1", "COMPONENTS=controller-namespaces"],
            &all,
            0,
            2,
            "needs the namespaces and their RoleBindings",
            &[],
            None,
        ),
        // No cluster: said first, not "the TrainJob CRD is not installed".
        (
            &["IMAGE=r.example.com/tg:1"],
            &no_context,
            0,
            2,
            "no cluster reachable: kubectl has no current context",
            &ordered[..1],
            None,
        ),
        (
            &["IMAGE=r.example.com/tg:1"],
            &no_cluster,
            0,
            2,
            "no cluster reachable: kubectl context \"fake-context\"",
            &ordered[..2],
            None,
        ),
        (&["IMAGE=r.example.com/tg:1"], &cm, 0, 2, "the TrainJob CRD", &ordered[..3], None),
        (&["IMAGE=r.example.com/tg:1"], &only_trainjob, 0, 2, "cert-manager is not installed", &ordered[..4], None),
        (
            &["IMAGE=r.example.com/tg:1"],
            &all,
            1,
            2,
            "the webhooks were NOT registered",
            &ordered[..7],
            Some("r.example.com/tg:1"),
        ),
        (&["IMAGE=r.example.com/tg:1"], &all, 0, 0, "registering the webhooks", &ordered, Some("r.example.com/tg:1")),
        (
            &[
                "IMAGE=localhost:5000/ml/trainguard@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ],
            &all,
            0,
            0,
            "done",
            &ordered,
            Some(
                "localhost:5000/ml/trainguard@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
        ),
    ];
    for (vars, crds, wait_rc, code, stderr, calls, image) in cases {
        let run = make_deploy(vars, crds, wait_rc);
        assert_eq!(run.code, code, "{vars:?} {crds:?}: {}", run.stderr);
        assert!(run.stderr.contains(stderr), "{vars:?} {crds:?}: {}", run.stderr);
        assert_eq!(run.calls.len(), calls.len(), "{vars:?} {crds:?}: {:?}", run.calls);
        for (got, want) in run.calls.iter().zip(calls) {
            assert!(got.starts_with(want), "{vars:?}: call {got:?}, want {want:?}; all: {:?}", run.calls);
        }
        assert_eq!(run.image.as_deref(), image, "{vars:?}");
    }

    // COMPONENTS reach the rendered objects: webhook-only drops the controller and its Lease Role.
    let run = make_deploy(&["IMAGE=r.example.com/tg:1", "COMPONENTS=webhook-only"], &all, 0);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.kinds.contains("Role \"trainguard-leader-election\""), "{:?}", run.kinds);
    assert!(!run.kinds.contains("Deployment \"trainguard-controller\""), "{:?}", run.kinds);
    assert!(run.kinds.contains("ValidatingWebhookConfiguration \"trainguard-validating\""), "{:?}", run.kinds);
}
