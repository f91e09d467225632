//! Cluster mode: the JobSet/Job caches fed by kube-rs watchers through kube's real client,
//! against the test kit's fake API on loopback (with injected faults).

use trainguard_binary_support::tls as support;
use trainguard_fake_api::wait::eventually_async;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use tokio::sync::watch;
use trainguard::cluster::ClusterCache;
use trainguard_fake_api::{FakeApi, Fault, Served};

const JOBSETS: &str = "/apis/jobset.x-k8s.io/v1alpha2/jobsets";
const JOBS: &str = "/apis/batch/v1/jobs";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    /// Every call answers 500 and open watches end: the API server is unreachable.
    Down,
    /// JobSets answer 404: the JobSet CRD is not installed.
    JobSetCrdAbsent,
    /// Watches of JobSets answer 404 and open ones end; lists still work (a proxy or an
    /// aggregation layer in trouble, or a CRD deleted and recreated between the calls).
    JobSetWatchNotFound,
}

/// The test kit's fake API on loopback, serving JobSets and batch Jobs, with the faults of a
/// [`Mode`]. Everything else the binary may ask for (the controller's kinds, discovery) is
/// answered as the kit's API server would: custom resources not served, built-in ones empty.
struct Fake {
    api: FakeApi,
    served: Served,
    mode: Arc<std::sync::Mutex<Mode>>,
}

impl Fake {
    fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
        match mode {
            Mode::Normal => {}
            Mode::Down => self.api.end_watches(""),
            Mode::JobSetCrdAbsent | Mode::JobSetWatchNotFound => self.api.end_watches(JOBSETS),
        }
    }

    /// Sets the JobSets or the Jobs the lists show (watches are not told).
    fn set_objects(&self, collection: &str, objects: Vec<Value>) {
        for object in self.api.objects(collection) {
            self.api.forget(&object);
        }
        for object in objects {
            self.api.insert(object);
        }
    }

    fn requested(&self, path: &str) -> bool {
        self.api.requested(path)
    }

    /// The path of every request, in order.
    fn requests(&self) -> Vec<String> {
        self.api.seen().into_iter().map(|s| s.path).collect()
    }
}

async fn start_fake(mode: Mode, lists_open: bool) -> (Fake, watch::Sender<bool>, kube::Client) {
    let (open_tx, open_rx) = watch::channel(lists_open);
    let api = FakeApi::new();
    api.serve_collection(JOBSETS);
    let mode = Arc::new(std::sync::Mutex::new(mode));
    let current = mode.clone();
    api.fault(move |seen| {
        let mode = *current.lock().unwrap();
        let jobsets = seen.path == JOBSETS;
        match mode {
            Mode::Down => Some(Fault::Status(500)),
            Mode::JobSetCrdAbsent if jobsets => Some(Fault::Status(404)),
            Mode::JobSetWatchNotFound if jobsets && seen.is_watch() => Some(Fault::Status(404)),
            // Lists wait until opened (to observe the state before the first sync).
            _ if !seen.is_watch() => Some(Fault::Hold(open_rx.clone())),
            _ => None,
        }
    });
    let served = api.serve().await;
    let client = served.client();
    (Fake { api, served, mode }, open_tx, client)
}

fn jobset(active: i32) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": "ml-team", "resourceVersion": "7"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]},
        "status": {"replicatedJobsStatus": [{"name": "node", "ready": active, "succeeded": 0, "failed": 0, "active": active, "suspended": 0}]}
    })
}

fn child_job(name: &str, active: i32, terminating: Option<i32>) -> Value {
    let mut status = json!({"active": active});
    if let Some(t) = terminating {
        status["terminating"] = json!(t);
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml-team", "resourceVersion": "8",
                     "labels": {"jobset.sigs.k8s.io/jobset-name": "llama"}},
        "status": status
    })
}

async fn start_with_cache(client: kube::Client, stale_after: Duration) -> (TestServer, Arc<ClusterCache>) {
    let (server, cache, _) = start_with_cache_metrics(client, stale_after).await;
    (server, cache)
}

async fn start_with_cache_metrics(
    client: kube::Client,
    stale_after: Duration,
) -> (TestServer, Arc<ClusterCache>, trainguard::server::metrics::WebhookMetrics) {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = trainguard::server::metrics::WebhookMetrics::register(&mut registry);
    let cache =
        ClusterCache::start(client, stale_after, metrics.cache.clone(), tokio_util::sync::CancellationToken::new());
    let server = start(Options { cluster: cache.clone(), caches: Some(cache.clone()), ..Default::default() }).await;
    (server, cache, metrics)
}

/// Verdict of a change of the overrides while suspended (U3: gated) and of an unchanged update (U1).
async fn verdicts(server: &TestServer) -> (Value, Value) {
    let client = client(&server.ca_pem, false);
    let gated = update_review("u-gated", trainjob(true, "a100"), trainjob(true, "h100"));
    let unchanged = update_review("u-same", trainjob(false, "a100"), trainjob(false, "a100"));
    let g = post_json(&client, &server.url(VALIDATE), &gated).await.json();
    let u = post_json(&client, &server.url(VALIDATE), &unchanged).await.json();
    (g["response"].clone(), u["response"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_the_first_sync_and_the_gate_reads_the_cache() {
    let (fake, open_lists, client) = start_fake(Mode::Normal, false).await;
    fake.set_objects(JOBSETS, vec![jobset(2)]);
    fake.set_objects(JOBS, vec![child_job("llama-node-0", 4, Some(0))]);
    let (mut server, cache) = start_with_cache(client, Duration::from_secs(60)).await;

    let (status, text) = admin_get(server.admin, "/readyz").await;
    assert_eq!(status, 503);
    assert!(text.contains("cache jobsets not synced yet"), "{text}");
    let (gated, unchanged) = verdicts(&server).await;
    assert_eq!(gated["allowed"], false);
    assert_eq!(gated["status"]["code"], 500, "{gated}");
    assert_eq!(gated["status"]["details"]["causes"][0]["reason"], "InternalError");
    assert!(gated["status"]["message"].as_str().unwrap().contains("has not synced yet"), "{gated}");
    assert_eq!(unchanged["allowed"], true, "decisions that need no cluster state are made as usual");

    open_lists.send(true).unwrap();
    eventually_async("ready after the first sync", async || admin_get(server.admin, "/readyz").await.0 == 200).await;
    assert_eq!((cache.jobset_count(), cache.job_count()), (1, 1));
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["status"]["code"], 403, "{gated}");
    let message = gated["status"]["message"].as_str().unwrap();
    assert!(message.contains(r#"replicated job "node" of JobSet ml-team/llama has 2 active jobs"#), "{message}");
    assert!(message.contains("job ml-team/llama-node-0 still has 4 active pods"), "{message}");

    // Watch events reach the gate: the run stops, the change is allowed.
    fake.api.put(jobset(0));
    fake.api.remove(&child_job("llama-node-0", 0, None));
    eventually_async("watch events applied", async || verdicts(&server).await.0["allowed"] == true).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_broken_past_stale_after_denies_gated_changes_only() {
    let (fake, _open, client) = start_fake(Mode::Normal, true).await;
    let stale_after = Duration::from_millis(600);
    let (mut server, cache) = start_with_cache(client, stale_after).await;
    eventually_async("synced", async || admin_get(server.admin, "/readyz").await.0 == 200).await;
    assert_eq!(cache.jobset_count(), 0);

    fake.set_mode(Mode::Down);
    let broke_at = Instant::now();
    // Within stale_after the cache still answers.
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["allowed"], true, "{gated}");
    eventually_async("gated decisions denied as unknown once stale", async || {
        verdicts(&server).await.0["status"]["code"] == 500
    })
    .await;
    assert!(broke_at.elapsed() >= stale_after, "denied before --cache-stale-after");
    let (gated, unchanged) = verdicts(&server).await;
    let message = gated["status"]["message"].as_str().unwrap();
    assert!(message.contains("watch has been failing") && message.contains("retry the request"), "{message}");
    assert_eq!(gated["status"]["reason"], "InternalError");
    assert_eq!(unchanged["allowed"], true);
    assert_eq!(admin_get(server.admin, "/readyz").await.0, 200, "a broken watch must not make the webhook unready");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_jobset_crd_counts_as_no_jobsets() {
    let (fake, _open, client) = start_fake(Mode::JobSetCrdAbsent, true).await;
    fake.set_objects(JOBS, vec![child_job("llama-node-0", 0, None)]);
    let (mut server, _cache) = start_with_cache(client, Duration::from_secs(60)).await;
    eventually_async("ready without the JobSet CRD", async || admin_get(server.admin, "/readyz").await.0 == 200).await;
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["allowed"], true, "{gated}");
    assert!(gated.get("warnings").is_none(), "cluster state was consulted: no offline warning: {gated}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_told_404_after_the_sync_relists_instead_of_emptying_the_cache() {
    let (fake, _open, client) = start_fake(Mode::Normal, true).await;
    fake.set_objects(JOBSETS, vec![jobset(2)]);
    let (mut server, cache, metrics) = start_with_cache_metrics(client, Duration::from_secs(60)).await;
    eventually_async("synced", async || admin_get(server.admin, "/readyz").await.0 == 200).await;
    assert_eq!(cache.jobset_count(), 1);
    let labels = trainguard::cluster::metrics::CacheLabels { cache: "jobsets" };
    let vanished = || metrics.cache.resource_vanished.get_or_create(&labels).get();

    // The JobSet watch now answers 404 while lists still work: the cache lists again and keeps
    // the JobSet, where it used to empty itself and call that healthy.
    fake.set_mode(Mode::JobSetWatchNotFound);
    eventually_async("the 404 counted", async || vanished() >= 1).await;
    eventually_async("relisted", async || vanished() >= 2).await;
    assert_eq!(cache.jobset_count(), 1, "the cache kept the JobSet the list still shows");
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["status"]["code"], 403, "the gate still sees the running JobSet: {gated}");
    assert_eq!(metrics.cache.resource_absent.get_or_create(&labels).get(), 0);

    // A JobSet that changed while the watch was down is picked up by the relist.
    fake.set_objects(JOBSETS, vec![jobset(0)]);
    fake.set_mode(Mode::Normal);
    eventually_async("the relist saw the stopped JobSet", async || verdicts(&server).await.0["allowed"] == true).await;

    // Lists that say 404 too are not believed either: the cache keeps its JobSet, counts as
    // broken and lists again, where it used to empty itself and call that healthy (whatever
    // answers 404 could then have every gated change allowed).
    fake.set_objects(JOBSETS, vec![jobset(2)]);
    fake.api.put(jobset(2));
    eventually_async("the running JobSet is back", async || verdicts(&server).await.0["status"]["code"] == 403).await;
    let before = vanished();
    fake.set_mode(Mode::JobSetCrdAbsent);
    eventually_async("the list's 404 counted", async || vanished() >= before + 2).await;
    assert_eq!(cache.jobset_count(), 1, "the cache kept the JobSet");
    assert_eq!(metrics.cache.resource_absent.get_or_create(&labels).get(), 0, "not called absent");
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["status"]["code"], 403, "the gate still sees the running JobSet: {gated}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_waits_for_terminating_pods() {
    let (fake, _open, kube_client) = start_fake(Mode::Normal, true).await;
    fake.set_objects(JOBSETS, vec![jobset(0)]);
    fake.set_objects(JOBS, vec![child_job("llama-node-0", 0, Some(3))]);
    let (mut server, _cache) = start_with_cache(kube_client, Duration::from_secs(60)).await;
    eventually_async("synced", async || admin_get(server.admin, "/readyz").await.0 == 200).await;
    let client = client(&server.ca_pem, false);
    // U4: change + unsuspend while pods still terminate → G5. U3 (stays suspended) is allowed.
    let resume = update_review("u4", trainjob(true, "a100"), trainjob(false, "h100"));
    let r = post_json(&client, &server.url(VALIDATE), &resume).await.json();
    assert_eq!(r["response"]["status"]["code"], 403, "{r}");
    assert!(r["response"]["status"]["message"].as_str().unwrap().contains("still has 3 terminating pods"), "{r}");
    assert_eq!(r["response"]["auditAnnotations"]["trainguard.io/rule"], "G5");
    let (gated, _) = verdicts(&server).await;
    assert_eq!(gated["allowed"], true, "{gated}");
    server.shutdown().await;
}

/// A kubeconfig in `dir` that points at the fake.
fn kubeconfig_for(fake: &Fake, dir: &std::path::Path) -> std::path::PathBuf {
    fake.served.kubeconfig(dir)
}

/// `trainguard --log-format json serve ARGS`, with its stderr read until the log line `message`,
/// which is returned; the rest of stderr is drained in the background.
/// `serve`'s arguments for a webhook on loopback that watches `fake`, with a certificate chain
/// written to `dir`, and `extra`.
fn webhook_args(
    fake: &Fake,
    dir: &std::path::Path,
    extra: &str,
) -> (Vec<std::ffi::OsString>, trainguard::certgen::GeneratedChain) {
    let chain = support::chain();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &chain.cert_pem).unwrap();
    std::fs::write(&key, &chain.key_pem).unwrap();
    let mut args: Vec<std::ffi::OsString> =
        ["--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", extra, "--kubeconfig"].map(Into::into).into();
    args.extend([kubeconfig_for(fake, dir).into(), "--tls-cert".into(), cert.into(), "--tls-key".into(), key.into()]);
    (args, chain)
}

async fn serve_until(args: &[&std::ffi::OsStr], message: &str) -> (tokio::process::Child, Value) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .args(["--log-format", "json", "serve"])
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let found = loop {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.unwrap().unwrap().unwrap();
        let log: Value = serde_json::from_str(&line).unwrap_or_default();
        if log["message"] == message {
            break log;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, found)
}

fn addr(log: &Value, key: &str) -> std::net::SocketAddr {
    log[key].as_str().unwrap().parse().unwrap()
}

async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status =
        tokio::time::timeout(Duration::from_secs(15), child.wait()).await.expect("exits after SIGTERM").unwrap();
    assert!(status.success(), "{status:?}");
}

/// The binary itself in cluster mode: `serve --kubeconfig` watches through the fake, turns ready
/// after the first sync, gates on what it saw, and exits 0 on SIGTERM. The companion controller
/// starts beside it (its kinds are "not served" by the fake, so it skips them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_a_kubeconfig_gates_on_watched_state() {
    let (fake, _open, _client) = start_fake(Mode::Normal, true).await;
    fake.set_objects(JOBSETS, vec![jobset(3)]);
    let dir = tempfile::tempdir().unwrap();
    let (args, chain) = webhook_args(&fake, dir.path(), "--leader-elect=false");
    let (child, log) =
        serve_until(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>(), "trainguard webhook serving").await;
    let (addr, admin) = (addr(&log, "webhook_addr"), addr(&log, "admin_addr"));
    eventually_async("ready after the first sync", async || admin_get(admin, "/readyz").await.0 == 200).await;
    let client = client(&chain.ca_cert_pem, false);
    let url = format!("https://localhost:{}{VALIDATE}", addr.port());
    let gated = update_review("u-gated", trainjob(true, "a100"), trainjob(true, "h100"));
    let review = post_json(&client, &url, &gated).await.json();
    assert_eq!(review["response"]["status"]["code"], 403, "{review}");
    assert!(review["response"]["status"]["message"].as_str().unwrap().contains("has 3 active jobs"), "{review}");
    let (_, metrics) = admin_get(admin, "/metrics").await;
    assert!(metrics.contains("trainguard_cache_synced{cache=\"jobsets\"} 1"), "{metrics}");
    assert!(
        metrics.contains("# TYPE trainguard_ttl_deletion_delay_seconds histogram"),
        "the controller's metrics share the admin registry: {metrics}"
    );
    eventually_async("the controller in the same process watches pods", async || fake.requested("/api/v1/pods")).await;
    terminate(child).await;
}

/// `serve --controller=false` (the webhook Deployment of a split install) starts none of the
/// controller: no Lease, no watch of pods or nodes, so its memory does not grow with them. It
/// lists and watches what the JobSet gate reads, JobSets and batch Jobs, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_only_watches_what_the_gate_reads_and_nothing_else() {
    let (fake, _open, _client) = start_fake(Mode::Normal, true).await;
    let dir = tempfile::tempdir().unwrap();
    let (args, _) = webhook_args(&fake, dir.path(), "--controller=false");
    let (child, log) =
        serve_until(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>(), "trainguard webhook serving").await;
    let admin = addr(&log, "admin_addr");
    eventually_async("ready after the first sync", async || admin_get(admin, "/readyz").await.0 == 200).await;
    // Both gate caches listed and watching; a controller (spawned before the server) would have
    // asked for its Lease or its own kinds by now.
    eventually_async("both watches open", async || {
        let requests = fake.requests();
        requests.iter().filter(|p| p.ends_with("/jobsets") || p.ends_with("/jobs")).count() >= 4
    })
    .await;
    let requests = fake.requests();
    let gate = [JOBSETS, JOBS];
    let other: Vec<&String> = requests.iter().filter(|p| !gate.contains(&p.as_str())).collect();
    assert!(other.is_empty(), "a webhook-only process asked for {other:?}");
    let (_, metrics) = admin_get(admin, "/metrics").await;
    assert!(!metrics.contains("leader_election_master_status{"), "no leader election: {metrics}");
    terminate(child).await;
}

/// `serve --webhook=false` (the controller Deployment of a split install) needs no certificate
/// and binds no webhook port; its admin port serves /healthz, /readyz and /metrics, and its
/// controller watches the cluster. It does not start the gate's caches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_only_serves_the_admin_port_without_certificates() {
    let (fake, _open, _client) = start_fake(Mode::Normal, true).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_for(&fake, dir.path());
    let webhook_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let missing = dir.path().join("no-such-dir/tls.crt");
    let bind = webhook_port.to_string();
    let args: Vec<&std::ffi::OsStr> = ["--webhook=false", "--leader-elect=false", "--admin-bind", "127.0.0.1:0"]
        .map(std::ffi::OsStr::new)
        .into_iter()
        .chain(["--bind".as_ref(), bind.as_ref(), "--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .chain(["--tls-cert".as_ref(), missing.as_os_str(), "--tls-key".as_ref(), missing.as_os_str()])
        .collect();
    let (child, log) = serve_until(&args, "trainguard admin port serving (no webhook)").await;
    let admin = addr(&log, "admin_addr");
    assert_eq!(admin_get(admin, "/healthz").await, (200, "ok\n".to_string()));
    assert_eq!(admin_get(admin, "/readyz").await, (200, "ok\n".to_string()), "ready without certificates");
    eventually_async("the controller watches pods", async || fake.requested("/api/v1/pods")).await;
    let (status, metrics) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("# TYPE trainguard_ttl_deletion_delay_seconds histogram"), "{metrics}");
    assert!(!metrics.contains("trainguard_cache_synced{"), "no gate caches: {metrics}");
    assert!(tokio::net::TcpStream::connect(webhook_port).await.is_err(), "no webhook listener on {webhook_port}");
    terminate(child).await;
}
