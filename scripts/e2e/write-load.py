#!/usr/bin/env python3
"""TrainJob writes that trainguard's validating webhook must judge, at a steady rate, until a stop
file appears: the load of tests/e2e/installed.rs's rolling upgrade.

    write-load.py RUN_DIR NAMESPACE RATE STOP_FILE OUT_FILE

Straight to the API server (the plane's admin client certificate, one kept-alive HTTPS connection
per worker), three kinds of write in turn, each one the webhook's matchConditions send to it:
  - `deny`: a change of the running TrainJob `running`'s runtimePatches (trainguard denies it);
  - `toggle`: TrainJob `toggle` suspended or resumed, with its runtimePatches changed in the same
    write (judged; allowed or denied by trainguard as its rules say);
  - `create`: a server-side dry-run create of a suspended TrainJob (allowed).
Each answer is one JSON line in OUT_FILE: start and end (seconds, monotonic clock), kind, HTTP
code, and the message of a refusal. Paced at RATE writes per second overall.
"""
import http.client
import json
import os
import ssl
import sys
import threading
import time

run, namespace, rate, stop_file, out_file = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
env = dict(line.split("=", 1) for line in open(os.path.join(run, "env")).read().splitlines() if "=" in line)
port = int(env["APISERVER_PORT"])
certs = os.path.join(run, "certs")
context = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
context.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
base = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"


def patches(pool):
    node = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"e2e.trainguard.io/pool": pool}}}}}}
    return [{"manager": "e2e.trainguard.io/load", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}]


def request(n):
    kind = ("deny", "toggle", "create")[n % 3]
    pool = f"pool-load-{n}"
    if kind == "deny":
        return kind, "PATCH", f"{base}/running", "application/merge-patch+json", {"spec": {"runtimePatches": patches(pool)}}
    if kind == "toggle":
        body = {"spec": {"suspend": (n // 3) % 2 == 0, "runtimePatches": patches(pool)}}
        return kind, "PATCH", f"{base}/toggle", "application/merge-patch+json", body
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": f"load-{n}"},
            "spec": {"suspend": True, "runtimeRef": {"name": "e2e-torch"}}}
    return kind, "POST", f"{base}?dryRun=All", "application/json", body


lock = threading.Lock()
counter = [0]
out = open(out_file, "w")
start = time.monotonic()


def worker():
    conn = None
    while not os.path.exists(stop_file):
        with lock:
            n = counter[0]
            counter[0] += 1
        due = start + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        kind, method, path, ctype, body = request(n)
        t0 = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
            conn.request(method, path, json.dumps(body), {"Content-Type": ctype, "Accept": "application/json"})
            resp = conn.getresponse()
            code, data = resp.status, resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn = None
            code, data = 0, json.dumps({"message": f"client error: {e}"}).encode()
        t1 = time.monotonic()
        message = ""
        if code >= 300 or code == 0:
            try:
                message = json.loads(data).get("message", "")
            except ValueError:
                message = data[:300].decode(errors="replace")
        with lock:
            out.write(json.dumps({"start": t0, "end": t1, "kind": kind, "code": code, "message": message}) + "\n")
            out.flush()


threads = [threading.Thread(target=worker) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out.close()
