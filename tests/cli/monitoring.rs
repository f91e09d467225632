//! What operators are given to watch trainguard — the PrometheusRule (kustomize component and
//! Helm chart), the Grafana dashboard — queries only metrics the binary really exports, read from
//! `/metrics` of a running `trainguard serve --dev`. The same run checks the startup log line
//! (version, commit, no colour codes on a pipe) and `trainguard_build_info`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Metrics that come from other exporters: the API server, kube-state-metrics, Prometheus itself.
const EXTERNAL: &[(&str, &str)] = &[
    ("apiserver_admission_webhook_rejection_count", "kube-apiserver"),
    ("kube_deployment_status_replicas_available", "kube-state-metrics"),
    ("up", "Prometheus"),
];

struct Scrape {
    /// Series names a query can select: counters with `_total`, histograms with `_bucket`…
    series: BTreeSet<String>,
    text: String,
    log: String,
}

/// Starts `trainguard serve --dev` once, scrapes `/metrics`, and stops it.
fn scrape() -> &'static Scrape {
    static SCRAPE: OnceLock<Scrape> = OnceLock::new();
    SCRAPE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_trainguard"))
            .args(["serve", "--dev", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", "--dev-dir"])
            .arg(dir.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("TRAINGUARD_LOG_FORMAT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let started = Instant::now();
        let mut log = String::new();
        let admin = loop {
            let line = rx.recv_timeout(Duration::from_secs(30)).expect("the serving log line");
            log.push_str(&line);
            log.push('\n');
            if let Some(at) = line.find("admin_addr=") {
                break line[at + "admin_addr=".len()..].split_whitespace().next().unwrap().to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no serving line in:\n{log}");
        };
        let text = http_get(&admin, "/metrics");
        let _ = child.kill();
        let _ = child.wait();
        Scrape { series: series_names(&text), text, log }
    })
}

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// From the `# TYPE` lines: the series names each family exposes.
fn series_names(exposition: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').unwrap();
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        for suffix in suffixes {
            out.insert(format!("{name}{suffix}"));
        }
    }
    out
}

/// Metric names a PromQL expression selects: every `name{`, and every identifier that looks like
/// one of ours wherever it stands (so a selector without braces is not missed).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c == '"' {
            // Skip string literals (label values, regexes).
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b':') {
                i += 1;
            }
            let word = &expr[start..i];
            let next = expr[i..].trim_start().chars().next();
            let ours = ["trainguard_", "controller_runtime_", "leader_election_"].iter().any(|p| word.starts_with(p));
            if next == Some('{') || ours {
                names.insert(word.to_string());
            }
            continue;
        }
        i += 1;
    }
    names
}

fn yaml(path: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rule_exprs(rule: &Value) -> Vec<(String, String)> {
    rule["spec"]["groups"]
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| (r["alert"].as_str().unwrap().to_string(), r["expr"].as_str().unwrap().to_string()))
        .collect()
}

fn dashboard_exprs() -> Vec<(String, String)> {
    let path = repo().join("deploy/monitoring/grafana-dashboard.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        let targets = panel["targets"].as_array().unwrap_or_else(|| panic!("{} has no targets", panel["title"]));
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for t in targets {
            out.push((panel["title"].as_str().unwrap().to_string(), t["expr"].as_str().unwrap().to_string()));
        }
    }
    out
}

fn helm_rendered_rule() -> Value {
    let helm = tool("helm");
    let out = Command::new(&helm)
        .args(["template", "trainguard", "deploy/helm/trainguard", "-n", "trainguard-system"])
        .args(["--set", "image.repository=registry.example.com/trainguard"])
        .args(["--set", "monitoring.prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"])
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", helm.display()));
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// A tool scripts/install-test-deps.sh installs: its directory first (as the Makefile's PATH has it).
fn tool(name: &str) -> PathBuf {
    let dir = std::env::var_os("TRAINGUARD_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/trainguard-tools"));
    let installed = dir.join("bin").join(name);
    if installed.exists() { installed } else { PathBuf::from(name) }
}

/// The registry `serve` exports, with one series in every family: a family without series is
/// left out of the exposition (as in `--dev`, where no cache or controller runs), but a cluster
/// fills it. A family added later and not touched here makes the check fail, never pass.
fn every_family() -> BTreeSet<String> {
    use trainguard::controller::metrics as c;
    use trainguard::server::metrics as w;
    let (registry, web, ctl) = trainguard::cli::serve::metrics_registry(Default::default());
    let webhook = "/validate-trainer-kubeflow-org-v1alpha1-trainjob";
    web.requests.get_or_create(&w::WebhookCodeLabels { webhook, code: "200" }).inc();
    web.latency.get_or_create(&w::WebhookLabels { webhook }).observe(0.001);
    web.in_flight.get_or_create(&w::WebhookLabels { webhook }).set(0);
    let decision = w::DecisionLabels { webhook, operation: "UPDATE", allowed: "false", rule: "U2" };
    web.decisions.get_or_create(&decision).inc();
    web.cache.objects.get_or_create(&trainguard::cluster::metrics::CacheLabels { cache: "jobs" }).set(0);
    web.cache.synced.get_or_create(&trainguard::cluster::metrics::CacheLabels { cache: "jobs" }).set(1);
    web.cache.watch_errors.get_or_create(&trainguard::cluster::metrics::CacheLabels { cache: "jobs" }).inc();
    web.cache.resource_absent.get_or_create(&trainguard::cluster::metrics::CacheLabels { cache: "jobs" }).set(0);
    web.cache.resource_vanished.get_or_create(&trainguard::cluster::metrics::CacheLabels { cache: "jobs" }).inc();
    web.cert_reloads.get_or_create(&w::ResultLabels { result: "error" }).inc();
    web.cert_reload_refusals.get_or_create(&w::ReasonLabels { reason: "expired" }).inc();
    web.refuse_connection("webhook", "per_ip_cap");
    web.open_connections("webhook").set(0);
    let s = |v: &str| v.to_string();
    ctl.reconcile_total.get_or_create(&c::ReconcileLabels { controller: s("ttl"), result: s("success") }).inc();
    ctl.reconcile_errors_total.get_or_create(&c::ControllerLabels { controller: s("ttl") }).inc();
    ctl.reconcile_time_seconds.get_or_create(&c::ControllerLabels { controller: s("ttl") }).observe(0.1);
    ctl.leader_election_master_status.get_or_create(&c::NameLabels { name: s("trainguard-controller") }).set(1);
    ctl.ttl_deletions_total.get_or_create(&c::KindResultLabels { kind: s("PyTorchJob"), result: s("deleted") }).inc();
    ctl.ttl_scheduled_jobs.get_or_create(&c::KindLabels { kind: s("PyTorchJob") }).set(1);
    ctl.suspend_not_reconciled_jobs.get_or_create(&c::KindLabels { kind: s("PyTorchJob") }).set(1);
    ctl.admitted_but_suspended_jobs.get_or_create(&c::KindLabels { kind: s("TrainJob") }).set(1);
    ctl.jobset_recreated_after_failure_trainjobs.get_or_create(&c::KindLabels { kind: s("TrainJob") }).set(1);
    ctl.pods_stuck_terminating.get_or_create(&c::NodeStateLabels { node_state: s("unhealthy") }).set(1);
    ctl.pod_force_deletions_total.get_or_create(&c::ResultLabels { result: s("deleted") }).inc();
    ctl.force_delete_suppressed_total.get_or_create(&c::ReasonLabels { reason: s("brake") }).inc();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    series_names(&text)
}

#[test]
fn every_queried_metric_is_exported() {
    // What a running `serve --dev` exports, and every family of the registry it builds.
    let mut exported = scrape().series.clone();
    let families = every_family();
    assert!(exported.is_subset(&families), "the binary exports {exported:?}, the registry {families:?}");
    exported.extend(families);
    let exported = &exported;
    let component = repo().join("deploy/components/monitoring/prometheusrule.yaml");
    let mut queries: Vec<(String, String)> = Vec::new();
    queries.extend(
        rule_exprs(&yaml(&component)).into_iter().map(|(a, e)| (format!("{} alert {a}", component.display()), e)),
    );
    queries.extend(rule_exprs(&helm_rendered_rule()).into_iter().map(|(a, e)| (format!("Helm alert {a}"), e)));
    queries.extend(dashboard_exprs().into_iter().map(|(t, e)| (format!("dashboard panel {t}"), e)));
    assert!(queries.len() > 20, "{queries:?}");

    let mut missing = Vec::new();
    let mut used = BTreeSet::new();
    for (what, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what}: no metric found in {expr}");
        for name in names {
            if !EXTERNAL.iter().any(|(n, _)| *n == name) && !exported.contains(&name) {
                missing.push(format!("{what}: {name}"));
            }
            used.insert(name);
        }
    }
    assert!(missing.is_empty(), "not exported by trainguard:\n{}\nexported: {exported:?}", missing.join("\n"));
    // The allowlist holds only what is really queried.
    for (name, from) in EXTERNAL {
        assert!(used.contains(*name), "{name} ({from}) is allowed but no longer queried");
    }
}

#[test]
fn metric_name_extraction_finds_selectors_and_skips_strings() {
    let cases: &[(&str, &[&str])] = &[
        ("sum(rate(trainguard_x_total{a=\"up{b}\"}[5m]))", &["trainguard_x_total"]),
        ("absent(up{job=\"x\"} == 1)", &["up"]),
        (
            "min(trainguard_certificate_expiry_timestamp_seconds) - time()",
            &["trainguard_certificate_expiry_timestamp_seconds"],
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(controller_runtime_webhook_latency_seconds_bucket[5m])))",
            &["controller_runtime_webhook_latency_seconds_bucket"],
        ),
    ];
    for (expr, want) in cases {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(metric_names(expr), want, "{expr}");
    }
    // Counters are selected with `_total`, histograms by their series: the bare family name is not.
    let families = every_family();
    for (name, exported) in [
        ("trainguard_admission_decisions_total", true),
        ("trainguard_admission_decisions", false),
        ("controller_runtime_webhook_latency_seconds_bucket", true),
        ("controller_runtime_webhook_latency_seconds", false),
        ("trainguard_cache_synced", true),
    ] {
        assert_eq!(families.contains(name), exported, "{name}");
    }
}

#[test]
fn helm_and_kustomize_alerts_agree_with_the_docs() {
    let kustomize = yaml(&repo().join("deploy/components/monitoring/prometheusrule.yaml"));
    let helm = helm_rendered_rule();
    assert_eq!(helm["spec"], kustomize["spec"], "the chart's PrometheusRule differs from deploy/components/monitoring");
    let alerts: BTreeSet<String> = rule_exprs(&kustomize).into_iter().map(|(a, _)| a).collect();
    let docs = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    let documented: BTreeSet<String> = docs
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.starts_with("Trainguard") && w.len() > "Trainguard".len())
        .map(str::to_string)
        .collect();
    assert_eq!(documented, alerts, "alerts named in docs/operations.md vs the PrometheusRule");
}

#[test]
fn startup_log_names_version_and_commit_without_colour_on_a_pipe() {
    let s = scrape();
    assert!(!s.log.contains('\u{1b}'), "ANSI escape codes on a pipe:\n{}", s.log);
    let version = trainguard::build_info::VERSION;
    let commit = trainguard::build_info::COMMIT;
    let starting = s.log.lines().find(|l| l.contains("trainguard starting")).expect("a startup line");
    assert!(
        starting.contains(&format!("version=\"{version}\"")) || starting.contains(&format!("version={version}")),
        "{starting}"
    );
    assert!(starting.contains(commit), "{starting}");
    let info = format!("trainguard_build_info{{version=\"{version}\",commit=\"{commit}\"}} 1");
    assert!(s.text.lines().any(|l| l == info), "no `{info}` in:\n{}", s.text);
}

#[test]
fn version_flag_prints_version_and_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_trainguard")).arg("--version").output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let commit = trainguard::build_info::COMMIT;
    assert_eq!(stdout.trim(), format!("trainguard {} (commit {commit})", env!("CARGO_PKG_VERSION")));
    // Built from this checkout: the commit is git's, not the fallback.
    if Command::new("git").args(["rev-parse", "HEAD"]).current_dir(repo()).output().is_ok_and(|o| o.status.success())
        && std::env::var_os("TRAINGUARD_GIT_COMMIT").is_none()
    {
        let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(repo()).output().unwrap();
        assert!(String::from_utf8(head.stdout).unwrap().starts_with(commit), "commit {commit} is not HEAD");
    }
}

fn kubectl_kustomize(dir: &Path) -> Vec<Value> {
    let kubectl = tool("kubectl");
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}; run scripts/install-test-deps.sh", kubectl.display()));
    assert!(out.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// The ServiceMonitor selects the metrics Service and names its port, in kustomize and Helm.
fn check_service_monitor(what: &str, objects: &[Value], namespace: &str) {
    let find = |kind: &str| -> Vec<&Value> { objects.iter().filter(|o| o["kind"] == kind).collect() };
    let monitors = find("ServiceMonitor");
    assert_eq!(monitors.len(), 1, "{what}: one ServiceMonitor");
    let monitor = monitors[0];
    assert_eq!(monitor["metadata"]["namespace"], namespace, "{what}");
    assert_eq!(find("PrometheusRule").len(), 1, "{what}: one PrometheusRule");
    let selector = monitor["spec"]["selector"]["matchLabels"].as_object().unwrap();
    let selected: Vec<&Value> = find("Service")
        .into_iter()
        .filter(|s| selector.iter().all(|(k, v)| &s["metadata"]["labels"][k] == v))
        .collect();
    assert_eq!(selected.len(), 1, "{what}: selects exactly one Service");
    let port = &monitor["spec"]["endpoints"][0]["port"];
    let ports = selected[0]["spec"]["ports"].as_array().unwrap();
    assert!(ports.iter().any(|p| &p["name"] == port), "{what}: Service has port {port}");
    assert!(selected[0]["metadata"]["name"].as_str().unwrap().ends_with("-metrics"), "{what}");
}

#[test]
fn monitoring_component_and_chart_values_scrape_the_metrics_service() {
    // As docs/operations.md shows it: an overlay beside the checkout adding the component.
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("deploy"), &tmp.path().join("trainguard/deploy"));
    let overlay = tmp.path().join("my-trainguard");
    std::fs::create_dir_all(&overlay).unwrap();
    let kustomization = "resources: [../trainguard/deploy/overlays/cert-manager]\n\
                         components: [../trainguard/deploy/components/monitoring]\n";
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();
    check_service_monitor("kustomize", &kubectl_kustomize(&overlay), "trainguard-system");

    let helm = tool("helm");
    let out = Command::new(&helm)
        .args(["template", "team-b", "deploy/helm/trainguard", "-n", "ml"])
        .args(["--set", "image.repository=registry.example.com/trainguard"])
        .args(["--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    let objects: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let objects: Vec<Value> = objects.into_iter().filter(|o| !o.is_null()).collect();
    check_service_monitor("helm", &objects, "ml");
    // The release's own names reach the alert expressions.
    let rule = objects.iter().find(|o| o["kind"] == "PrometheusRule").unwrap();
    let text = rule["spec"].to_string();
    assert!(
        text.contains(r#"deployment=\"team-b-trainguard-webhook\""#)
            && text.contains(r#"service=\"team-b-trainguard-metrics\""#),
        "{text}"
    );
    assert!(text.contains(r#"deployment=\"team-b-trainguard-controller\""#), "{text}");
    assert!(!text.contains("trainguard-system"), "{text}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
