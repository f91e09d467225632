//! The local control plane as the tests see it: the run directory `scripts/e2e/plane.sh up` wrote
//! (its `env` file), real kubectl built from the same Kubernetes version, a namespace per test,
//! and polling with a deadline. Synchronous on purpose: every call is a kubectl process or a
//! blocking HTTP GET, and the tests run one at a time (they share one cluster and may stop
//! trainguard).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What `plane.sh up` wrote to `$TRAINGUARD_E2E_RUN/env`.
pub(crate) struct Plane {
    env: HashMap<String, String>,
}

pub(crate) fn plane() -> &'static Plane {
    static PLANE: OnceLock<Plane> = OnceLock::new();
    PLANE.get_or_init(|| {
        let run = std::env::var("TRAINGUARD_E2E_RUN").unwrap_or_else(|_| "/tmp/trainguard-e2e".into());
        let text = std::fs::read_to_string(Path::new(&run).join("env"))
            .unwrap_or_else(|e| panic!("no local control plane at {run} ({e}): run `make e2e`, which starts it"));
        let env = text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Plane { env }
    })
}

impl Plane {
    pub(crate) fn var(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("{key} missing from the plane's env file"))
    }

    /// A variable only some planes have (the real node's, after `plane.sh node start`).
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        PathBuf::from(self.var("E2E_RUN"))
    }

    /// kubectl as a cluster admin (client certificate in group system:masters). Every request has
    /// a deadline, so a hung call fails its test instead of holding the run.
    pub(crate) fn kubectl(&self) -> Kubectl {
        let mut cmd = Command::new(self.var("KUBECTL"));
        cmd.args([
            "--request-timeout=60s",
            "--kubeconfig",
            self.var("KUBECONFIG"),
            "--cache-dir",
            self.var("KUBECTL_CACHE"),
        ]);
        Kubectl(cmd)
    }

    /// Runs `scripts/e2e/plane.sh` with the given arguments (stop or start one of trainguard's
    /// processes).
    pub(crate) fn script(&self, args: &[&str]) {
        let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/e2e/plane.sh"))
            .args(args)
            .env("TRAINGUARD_E2E_RUN", self.run_dir())
            .output()
            .expect("run plane.sh");
        assert!(out.status.success(), "plane.sh {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A fresh namespace for one test, with the given labels; deleted (without waiting) on drop.
    pub(crate) fn namespace(&self, name: &str, labels: &[(&str, &str)]) -> Namespace {
        let _ = self
            .kubectl()
            .args(["delete", "namespace", name, "--wait=true", "--timeout=60s", "--ignore-not-found"])
            .output();
        let labels: String = labels.iter().map(|(k, v)| format!("\n    {k}: \"{v}\"")).collect();
        self.kubectl()
            .apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:{labels}\n"));
        Namespace { name: name.to_string() }
    }

    /// The metric families of trainguard's webhook admin endpoint (Prometheus text).
    pub(crate) fn webhook_metrics(&self) -> String {
        http_get(&format!("http://127.0.0.1:{}/metrics", self.var("TRAINGUARD_ADMIN_PORT")))
    }

    /// The API server's own metrics (as admin).
    pub(crate) fn apiserver_metrics(&self) -> String {
        self.kubectl().args(["get", "--raw", "/metrics"]).ok()
    }
}

/// The API server's clock as the audit log writes it, to the second (`2026-01-02T03:04:05`):
/// entries at or after it compare greater as strings. Tests filter the audit log with it, since
/// the log spans every run on the plane and namespaces are reused.
pub(crate) fn audit_now() -> String {
    let out = Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S"]).output().expect("run date");
    String::from_utf8(out.stdout).expect("utf-8").trim().to_string()
}

/// Audit events (parsed) whose `stageTimestamp` is at or after `since` (see `audit_now`).
pub(crate) fn audit_since(since: &str) -> Vec<Value> {
    let audit = std::fs::read_to_string(plane().run_dir().join("logs/audit.log")).expect("audit log");
    audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stageTimestamp"].as_str().is_some_and(|t| t >= since))
        .collect()
}

/// Grants or takes back the controller's act-mode write permissions (deploy/components/act-rbac,
/// rendered aside by the plane), as an operator does when switching modes: the shipped install
/// runs in report mode, with no delete or status-patch verbs.
pub(crate) fn act_rbac(granted: bool) {
    let rbac = plane().run_dir().join("trainguard-act-rbac.yaml");
    if granted {
        plane().kubectl().args(["apply", "-f"]).args([&rbac]).ok();
    } else {
        let _ = plane().kubectl().args(["delete", "--ignore-not-found", "-f"]).args([&rbac]).output();
    }
}

/// Switches the controller to act mode as an operator does (the act-mode RBAC from
/// deploy/components/act-rbac, then `--controller-mode=act` and the extra flags); dropping it
/// restarts the controller as shipped (report mode) and takes the write permissions away again.
pub(crate) struct ActMode;

impl ActMode {
    pub(crate) fn start(extra: &[&str]) -> ActMode {
        act_rbac(true);
        plane().script(&["stop", "controller"]);
        let mut args = vec!["start", "controller", "--controller-mode=act"];
        args.extend_from_slice(extra);
        plane().script(&args);
        ActMode
    }
}

impl Drop for ActMode {
    fn drop(&mut self) {
        plane().script(&["stop", "controller"]);
        act_rbac(false);
        plane().script(&["start", "controller"]);
    }
}

/// Sums the samples of `metric` whose labels contain every `label="value"` pair in `labels`.
pub(crate) fn metric_sum(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn http_get(url: &str) -> String {
    let out = Command::new("curl").args(["-sf", "--max-time", "10", url]).output().expect("run curl");
    assert!(out.status.success(), "GET {url} failed");
    String::from_utf8(out.stdout).expect("utf-8 metrics")
}

pub(crate) struct Namespace {
    pub(crate) name: String,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = plane().kubectl().args(["delete", "namespace", &self.name, "--wait=false"]).output();
    }
}

pub(crate) struct Kubectl(Command);

impl Kubectl {
    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.0.args(args);
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.0.env(key, value);
        self
    }

    /// Runs with `stdin` fed from `input`.
    pub(crate) fn output_with(mut self, input: &str) -> Output {
        use std::io::Write;
        let mut child =
            self.0.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn kubectl");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("kubectl output")
    }

    pub(crate) fn output(mut self) -> Output {
        self.0.stdin(Stdio::null()).output().expect("run kubectl")
    }

    /// Runs and returns stdout; fails the test with kubectl's stderr if it fails.
    pub(crate) fn ok(self) -> String {
        let shown = format!("{:?}", self.0);
        let out = self.output();
        assert!(out.status.success(), "{shown} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// Runs, expecting failure; returns what kubectl printed on stderr.
    pub(crate) fn fails(self) -> String {
        let shown = format!("{:?}", self.0);
        let out = self.output();
        assert!(!out.status.success(), "{shown} succeeded: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8(out.stderr).expect("utf-8")
    }

    /// `kubectl apply -f -` with the manifest; fails the test on error.
    pub(crate) fn apply(self, manifest: &str) {
        let out = self.args(["apply", "-f", "-"]).output_with(manifest);
        assert!(out.status.success(), "apply failed: {}\n{manifest}", String::from_utf8_lossy(&out.stderr));
    }

    /// `kubectl get -o json`, parsed; `None` when the object does not exist.
    pub(crate) fn get_json(self) -> Option<Value> {
        let out = self.args(["-o", "json"]).output();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("NotFound") || err.contains("not found"), "kubectl get failed: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("kubectl -o json"))
    }
}

/// How long a condition on the cluster gets: controllers on a loaded 2-core machine can take a
/// while to converge, but never a minute.
pub(crate) const DEADLINE: Duration = Duration::from_secs(90);

/// Whether `object` has the condition `kind` with status True (Jobs, TrainJobs, v1 jobs).
pub(crate) fn condition_true(object: &Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// The reasons of the Events about `object` in `ns`, oldest first as the API server lists them.
pub(crate) fn event_reasons(ns: &str, object: &str) -> Vec<String> {
    let events = plane()
        .kubectl()
        .args(["-n", ns, "get", "events", "--field-selector", &format!("involvedObject.name={object}")])
        .get_json()
        .unwrap_or_default();
    events["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|e| e["reason"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Polls `check` every 250 ms until it returns `Some`, failing the test after `DEADLINE`. For a
/// state the cluster converges to; a check of an admission verdict uses [`Answers`] instead, which
/// fails on a wrong answer rather than waiting it out.
pub(crate) fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_within(DEADLINE, what, check)
}

/// [`eventually`] with a deadline of its own, for a state that takes longer by design (a TTL's
/// grace on top of a job's run).
#[allow(clippy::disallowed_methods, reason = "eventually's poll interval against the real cluster")]
pub(crate) fn eventually_within<T>(deadline: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + deadline;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < until, "timed out after {deadline:?} waiting for: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A TrainJob on the given runtime, suspended or not, with extra `spec` YAML lines.
pub(crate) fn trainjob(name: &str, runtime: &str, suspend: bool, extra_spec: &str) -> String {
    format!(
        "apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
spec:
  suspend: {suspend}
  runtimeRef:
    name: {runtime}
{extra_spec}"
    )
}

/// Waits until the TrainJob's JobSet reports at least one active job in `.status.replicatedJobsStatus`
/// (the evidence trainguard's gate reads).
pub(crate) fn wait_jobset_active(ns: &str, name: &str) {
    eventually(&format!("JobSet {ns}/{name} active"), || {
        let js = plane().kubectl().args(["-n", ns, "get", "jobset", name]).get_json()?;
        let active: i64 =
            js["status"]["replicatedJobsStatus"].as_array()?.iter().filter_map(|r| r["active"].as_i64()).sum();
        (active > 0).then_some(())
    });
}

/// Waits until the namespace has no pods left (the JobSet's teardown finished).
pub(crate) fn wait_no_pods(ns: &str) {
    eventually(&format!("no pods left in {ns}"), || {
        let pods = plane().kubectl().args(["-n", ns, "get", "pods"]).get_json()?;
        pods["items"].as_array()?.is_empty().then_some(())
    });
}

/// Replaces what varies between runs (temporary file names) so a golden file can pin the rest.
pub(crate) fn normalise(text: &str) -> String {
    let tmp = regex_free_replace(text, "/tmp/kubectl-edit-", "/tmp/kubectl-edit-XXXX");
    tmp.trim_end().to_string() + "\n"
}

/// Replaces each `prefix<run of non-space, non-quote chars>` with `replacement`.
fn regex_free_replace(text: &str, prefix: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        out.push_str(replacement);
        let tail = &rest[at + prefix.len()..];
        let end = tail.find(|c: char| c.is_whitespace() || c == '"' || c == '`').unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Compares `actual` with the golden file under tests/e2e/golden; `TRAINGUARD_BLESS=1` rewrites it.
pub(crate) fn assert_golden(file: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/golden").join(file);
    if std::env::var_os("TRAINGUARD_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("mkdir golden");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}); run with TRAINGUARD_BLESS=1 to create it", path.display()));
    assert_eq!(actual, want, "kubectl's output differs from {}", path.display());
}

/// What a write that is retried until the expected answer comes back was answered before it. A
/// retry must not hide an answer: every earlier one is kept and shown, and a wrong one (`Wrong`)
/// fails the test at once.
pub(crate) enum Answer<T> {
    /// The answer the test waits for.
    Expected(T),
    /// An answer that can come before it and says nothing against the code under test (a
    /// Conflict with a controller's write, a verdict from an older view of the cluster): retried.
    Earlier(String),
    /// An answer that must never come (an allow where a denial is due): fails the test.
    Wrong(String),
}

/// Asks `ask` every 250 ms until it answers [`Answer::Expected`], for at most `DEADLINE`; returns
/// that answer and the earlier ones (each shown on stderr, so a run's log says how many there were).
#[allow(clippy::disallowed_methods, reason = "the poll interval against the real cluster")]
pub(crate) fn answers<T>(what: &str, mut ask: impl FnMut() -> Answer<T>) -> (T, Vec<String>) {
    let until = Instant::now() + DEADLINE;
    let mut earlier = Vec::new();
    loop {
        match ask() {
            Answer::Expected(found) => {
                if !earlier.is_empty() {
                    eprintln!("{what}: {} earlier answer(s) before the expected one:", earlier.len());
                    for a in &earlier {
                        eprintln!("  {a}");
                    }
                }
                return (found, earlier);
            }
            Answer::Wrong(said) => {
                panic!("{what}: a wrong answer after {} earlier one(s) {earlier:#?}:\n{said}", earlier.len())
            }
            Answer::Earlier(said) => earlier.push(said.trim().to_string()),
        }
        assert!(
            Instant::now() < until,
            "timed out after {DEADLINE:?} waiting for: {what}; the answers were {earlier:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
