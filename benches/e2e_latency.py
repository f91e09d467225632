#!/usr/bin/env python3
"""The latency a user feels: TrainJob updates through the local control plane's kube-apiserver with
trainguard's validating webhook in the path, beside the same updates with a do-nothing webhook (the
bare TLS baseline answering "allowed", `benches/baseline_server.rs --echo-uid`) registered the same
way (trainguard's shipped configuration, matchConditions included, with only the URL and an
objectSelector changed), in the same run, measured client-side.

Two TrainJobs, both suspended: `tg` goes to trainguard; `base` carries trainguard's opt-out label and
goes to the baseline only. Two client threads, one per job, each send merge patches of
`spec.runtimePatches` (a change the matchConditions send to the webhook, allowed since the job is
suspended and has no JobSet) at RATE/2 per second for SECONDS, over keep-alive HTTPS with the
admin's client certificate. Trainer's own webhooks are in both paths alike.

Needs the plane up (`scripts/e2e/plane.sh up`) and the baseline built
(`cargo build --release --example baseline_server`). Usage:
  python3 benches/e2e_latency.py [--rate 50] [--seconds 60] [--baseline PATH]
"""
import argparse
import http.client
import json
import os
import ssl
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--rate", type=float, default=50.0, help="updates per second, both jobs together")
ap.add_argument("--seconds", type=float, default=60.0)
ap.add_argument("--warmup", type=int, default=50, help="updates per job before measuring")
ap.add_argument("--baseline", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/examples/baseline_server"))
args = ap.parse_args()

run = os.environ.get("TRAINGUARD_E2E_RUN", "/tmp/trainguard-e2e")
env = dict(line.split("=", 1) for line in open(os.path.join(run, "env")).read().splitlines() if "=" in line)
certs = os.path.join(run, "certs")
api_port = int(env["APISERVER_PORT"])
baseline_port = int(env["TRAINGUARD_PORT"]) + 50
ns = "e2e-latency"


def kubectl(*a, stdin=None):
    cmd = [env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], "--cache-dir", env["KUBECTL_CACHE"], *a]
    return subprocess.run(cmd, input=stdin, text=True, check=True, capture_output=True).stdout


def connection():
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
    return http.client.HTTPSConnection("127.0.0.1", api_port, context=ctx, timeout=30)


def patch_body(i):
    entry = {"manager": "e2e.trainguard.io/latency", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "nodeSelector": {"e2e.trainguard.io/seq": str(i)}}}}}}]}}}}
    return json.dumps({"spec": {"runtimePatches": [entry]}})


def update(conn, job, i):
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{job}"
    conn.request("PATCH", path, body=patch_body(i), headers={"Content-Type": "application/merge-patch+json"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{job}: HTTP {resp.status}: {body[:300]!r}")


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


baseline = subprocess.Popen([args.baseline, f"127.0.0.1:{baseline_port}", os.path.join(certs, "webhooks.crt"),
                             os.path.join(certs, "webhooks.key"), "--echo-uid"], stderr=subprocess.DEVNULL)
try:
    # The baseline's registration: trainguard's validating configuration as deployed, renamed, its
    # URL pointed at the baseline, and an objectSelector so only `base` goes there.
    import yaml  # PyYAML, as scripts/e2e uses
    shipped = next(d for d in yaml.safe_load_all(open(os.path.join(run, "trainguard-webhooks.yaml")))
                   if d and d["kind"] == "ValidatingWebhookConfiguration")
    shipped["metadata"] = {"name": "e2e-latency-baseline"}
    for hook in shipped["webhooks"]:
        hook["name"] = "baseline.e2e.trainguard.io"
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{baseline_port}/validate"
        hook["objectSelector"] = {"matchLabels": {"e2e.trainguard.io/latency": "baseline"}}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(shipped))
    kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=60s")
    kubectl("create", "namespace", ns)
    for job, labels in (("tg", {}), ("base", {"trainguard.io/webhook": "disabled", "e2e.trainguard.io/latency": "baseline"})):
        kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": job, "namespace": ns, "labels": labels},
            "spec": {"suspend": True, "runtimeRef": {"name": "e2e-torch"}}}))
    time.sleep(3)  # webhook configurations are picked up asynchronously by the API server

    results = {}

    def client(job):
        conn = connection()
        for i in range(args.warmup):
            update(conn, job, -1 - i)
        interval = 2.0 / args.rate
        lat, start, i = [], time.monotonic(), 0
        while time.monotonic() - start < args.seconds:
            due = start + i * interval
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            t0 = time.perf_counter()
            update(conn, job, i)
            lat.append((time.perf_counter() - t0) * 1000)
            i += 1
        results[job] = lat

    threads = [threading.Thread(target=client, args=(j,)) for j in ("tg", "base")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if set(results) != {"tg", "base"}:
        sys.exit("a client failed (see above)")
    print(f"{'webhook':<12} {'updates':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for job, name in (("tg", "trainguard"), ("base", "baseline")):
        s = results[job]
        print(f"{name:<12} {len(s):>8} {pct(s, 50):>8.2f} {pct(s, 90):>8.2f} {pct(s, 99):>8.2f} {max(s):>8.2f}")
    ratio = pct(results["tg"], 99) / pct(results["base"], 99)
    print(f"p99 ratio trainguard/baseline: {ratio:.2f} (target <= 1.2)")
finally:
    baseline.terminate()
    baseline.wait(timeout=10)
    try:
        kubectl("delete", "validatingwebhookconfiguration", "e2e-latency-baseline", "--ignore-not-found")
        kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")
    except subprocess.CalledProcessError:
        pass
