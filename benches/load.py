#!/usr/bin/env python3
"""End-to-end load over TLS: trainguard vs a bare hyper + rustls baseline.

HTTP/1.1 keep-alive with wrk (p50/p99 from its latency histogram) and HTTP/2 with h2load
(mean latency; h2load prints no percentiles), at concurrency 1, 16 and 64 (and, over HTTP/2,
16 streams multiplexed on one connection, "1x16", as the API server does), on every path:
- small: ~5 KB update, overrides unchanged (U1, the common case);
- large: ~150 KB update, overrides unchanged;
- restamped: the large update with one managedFields timestamp re-stamped, as most real
  updates come (the old object's managedFields no longer byte-identical to the new one's);
- gated: ~5 KB update that changes the overrides and resumes the job in one request (parsed,
  compared, shape-checked, JobSet gate; allowed with a warning offline);
- denied: ~5 KB edit of a running job's overrides (U2 denial: message, audit, log line);
- retimed: the small update with its first runtime patch's `time` re-stamped, as its owner
  re-applies it (no longer byte-identical: compared by meaning, `time` ignored, U1);
- create: the small update's new object as a CREATE (no old object, no status; overrides
  shape-checked, allow-create).
With the shipped matchConditions the API server sends create, gated, denied and retimed, but not small,
large or restamped (their judged fields are identical); those rows measure clusters without them.
The baseline is tuned like trainguard (same TLS configuration, same HTTP/2 windows and stream
limit) and answers every payload with the same fixed review. The load generator is pinned to CPU 0 and both servers to CPU 1 (taskset);
each configuration runs on trainguard and then on the baseline, --rounds times, and the table
shows the medians (a shared VM's speed drifts over minutes; back-to-back runs compare like with
like). The CPU time of server and generator is recorded: on 2 cores the generator can become the
bottleneck, and the server's CPU per request is the figure that stays comparable. Each round's
trainguard run and the baseline run right after it make one CPU ratio; the table shows their
median and their range, which on a shared VM is often wider than the differences worth measuring
(benches/instructions.py counts instructions instead, and does not move with the machine's load).

Usage: benches/load.py [--duration SECONDS] [--rounds N] [--payloads small,large,restamped,gated,denied,retimed,create]
                       [--conns 1,16,1x16,64] [--protocols http1,http2] [--out FILE]
(make bench runs it with the defaults: everything)
"""
import argparse
import atexit
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procutil import rss_kib, wait_port, write_report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
# The dist profile (fat LTO) by default; TRAINGUARD_BIN / BASELINE_BIN point elsewhere (e.g. a debug smoke run).
TRAINGUARD = os.environ.get("TRAINGUARD_BIN", os.path.join(TARGET, "dist", "trainguard"))
BASELINE = os.environ.get("BASELINE_BIN", os.path.join(TARGET, "dist", "examples", "baseline_server"))
PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
FIXTURES = {"small": "fixtures/bench/small-update.review.json", "large": "fixtures/bench/large-update.review.json"}
ALL_PAYLOADS = ["small", "large", "restamped", "gated", "denied", "retimed", "create"]
# How trainguard answers each payload (allowed, deciding rule), so that a row measures the path it names.
EXPECTED = {"small": (True, "U1"), "large": (True, "U1"), "restamped": (True, "U1"), "gated": (True, "allow-gate"),
            "denied": (False, "U2"), "retimed": (True, "U1"), "create": (True, "allow-create")}
ALL_CONNS = ["1", "16", "1x16", "64"]
NODE_SELECTOR = ("runtimePatches", 0, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", 0, "template",
                 "spec", "template", "spec", "nodeSelector")
CLK = os.sysconf("SC_CLK_TCK")

WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BODY_FILE"), "rb")
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), errors))
end
"""


def derived_payloads(work):
    """The gated, denied, retimed and create payloads, made from the small fixture, and the re-stamped
    one, made from the large fixture (written to `work`)."""
    with open(os.path.join(ROOT, FIXTURES["small"])) as f:
        base = json.load(f)

    def selector(obj):
        for key in NODE_SELECTOR:
            obj = obj[key]
        return obj

    gated = json.loads(json.dumps(base))
    old, new = gated["request"]["oldObject"], gated["request"]["object"]
    # Suspended with no active jobs, then resumed with a new placement in the same update.
    old["spec"]["suspend"] = True
    old["status"] = {"jobsStatus": [{"name": "node", "active": 0}]}
    new["spec"]["suspend"] = False
    new["status"] = {"jobsStatus": [{"name": "node", "active": 0}]}
    selector(new["spec"])["cloud.google.com/gke-accelerator"] = "nvidia-b200"

    denied = json.loads(json.dumps(base))
    # Running (suspend false, one active job) and the placement edited: U2.
    selector(denied["request"]["object"]["spec"])["cloud.google.com/gke-accelerator"] = "nvidia-b200"

    retimed = json.loads(json.dumps(base))
    # The first runtime patch re-applied unchanged by its owner: only its `time` moves.
    retimed["request"]["object"]["spec"]["runtimePatches"][0]["time"] = "2025-06-02T09:30:00Z"

    create = json.loads(json.dumps(base))
    create["request"]["operation"] = "CREATE"
    del create["request"]["oldObject"]
    del create["request"]["object"]["status"]

    # The large update as most real ones come: the last manager's managedFields entry re-stamped,
    # so the old object's copy of managedFields is no longer byte-identical.
    with open(os.path.join(ROOT, FIXTURES["large"])) as f:
        restamped = json.load(f)
    restamped["request"]["object"]["metadata"]["managedFields"][-1]["time"] = "2025-06-02T09:30:00Z"

    paths = {}
    for name, review in [("gated", gated), ("denied", denied), ("retimed", retimed), ("create", create),
                         ("restamped", restamped)]:
        paths[name] = os.path.join(work, f"{name}.review.json")
        with open(paths[name], "w") as f:
            json.dump(review, f, separators=(",", ":"))
    return paths


def check_payload(port, name, body_file, ca):
    """One request of each payload before measuring: the path taken is the one the row names."""
    import ssl
    import http.client
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    with open(body_file, "rb") as f:
        conn.request("POST", PATH, f.read(), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    review = json.loads(resp.read())
    conn.close()
    r = review["response"]
    rule = r.get("auditAnnotations", {}).get("trainguard.io/rule")
    want = EXPECTED[name]
    ok = resp.status == 200 and r["allowed"] == want[0] and rule == want[1]
    if not ok:
        raise SystemExit(f"payload {name}: unexpected answer (HTTP {resp.status}, allowed {r['allowed']}, rule {rule})")
    return rule


def ensure_tools():
    missing = [pkg for tool, pkg in [("wrk", "wrk"), ("h2load", "nghttp2-client"), ("taskset", "util-linux")]
               if shutil.which(tool) is None]
    if missing:
        print(f"installing {' '.join(missing)}", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True)


def cpu_seconds(pid):
    """(user, system) CPU seconds of a process so far, all threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK, int(fields[12]) / CLK


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_wrk(port, body_file, conns, duration, script):
    env = dict(os.environ, BODY_FILE=body_file)
    before = children_cpu()
    out = subprocess.run(
        ["taskset", "-c", "0", "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", "-s", script,
         f"https://127.0.0.1:{port}{PATH}"], env=env, capture_output=True, text=True, check=True).stdout
    gen_cpu = children_cpu() - before
    m = re.search(r"RESULT requests=(\d+) duration_us=(\d+) p50_us=(\d+) p99_us=(\d+) errors=(\d+)", out)
    requests, dur_us, p50, p99, errors = map(int, m.groups())
    return {"rps": requests / (dur_us / 1e6), "requests": requests, "p50_us": p50, "p99_us": p99,
            "errors": errors, "gen_cpu": gen_cpu / (dur_us / 1e6)}


def h2load_cmd(port, body_file, conns, duration):
    # "1x16": one connection carrying 16 concurrent streams; "16": 16 connections, one stream each.
    clients, streams = conns.split("x") if "x" in conns else (conns, "1")
    return ["taskset", "-c", "0", "h2load", "-t1", f"-c{clients}", f"-m{streams}", f"-D{duration}", "-d", body_file,
            "-H", "content-type: application/json", f"https://127.0.0.1:{port}{PATH}"]


def warm_up_h2load(port, body_file, conns):
    """A second of load before the measured run. (h2load's own --warm-up-time would leave the
    server's CPU of that second in the figure but its requests out of it.)"""
    subprocess.run(h2load_cmd(port, body_file, conns, 1), capture_output=True, check=True)


def run_h2load(port, body_file, conns, duration):
    before = children_cpu()
    out = subprocess.run(h2load_cmd(port, body_file, conns, duration), capture_output=True, text=True,
                         check=True).stdout
    gen_cpu = children_cpu() - before
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    req = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out).group(1)
    mean_us = float(mean[:-2]) * 1000 if mean.endswith("ms") else float(mean[:-2]) if mean.endswith("us") else float(mean[:-1]) * 1e6
    return {"rps": rps, "requests": int(req.group(2)), "mean_us": mean_us,
            "errors": int(req.group(3)) + int(req.group(4)), "gen_cpu": gen_cpu / duration}


def median_run(runs):
    """Each figure's median over the rounds (errors are summed: any error counts)."""
    out = {}
    for key in runs[0]:
        values = sorted(r[key] for r in runs)
        out[key] = sum(values) if key == "errors" else values[len(values) // 2]
    return out


def start(cmd):
    return subprocess.Popen(["taskset", "-c", "1", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each configuration per server, alternating; the table shows medians")
    ap.add_argument("--payloads", default=",".join(ALL_PAYLOADS), help="comma-separated subset of " + ",".join(ALL_PAYLOADS))
    ap.add_argument("--conns", default=",".join(ALL_CONNS),
                    help="comma-separated concurrency levels; NxM = N HTTP/2 connections with M streams each "
                         "(HTTP/1.1 skips those)")
    ap.add_argument("--protocols", default="http1,http2")
    ap.add_argument("--out", default=os.path.join(TARGET, "load-results.md"))
    args = ap.parse_args()
    if not set(args.protocols.split(",")) <= {"http1", "http2"}:
        ap.error("--protocols takes http1 and http2")
    ensure_tools()
    work = tempfile.mkdtemp(prefix="trainguard-load-")
    # Certificates, payloads and the wrk script: removed however the run ends.
    atexit.register(shutil.rmtree, work, True)
    script = os.path.join(work, "post.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    available = {k: os.path.join(ROOT, v) for k, v in FIXTURES.items()}
    available.update(derived_payloads(work))
    payloads = {k: available[k] for k in args.payloads.split(",")}
    conn_levels = args.conns.split(",")
    protocols = args.protocols.split(",")
    rows = []
    memory = {}
    rules = {}
    pair_ratios = {}
    ports = {"trainguard": 19443, "baseline": 19444}
    for proto in protocols:
        # Both servers run on CPU 1 at once (the idle one costs nothing) and each configuration is
        # measured on trainguard and then at once on the baseline: the machine's speed drifts
        # over minutes, and the ratio should compare like with like.
        h2 = ["--http2"] if proto == "http2" else []
        procs = {
            "trainguard": start([TRAINGUARD, "serve", "--dev", "--dev-dir", work, "--bind",
                                 f"127.0.0.1:{ports['trainguard']}", "--admin-bind", "127.0.0.1:18080"] + h2),
        }
        try:
            wait_port(ports["trainguard"])
            procs["baseline"] = start([BASELINE, f"127.0.0.1:{ports['baseline']}", os.path.join(work, "tls.crt"),
                                       os.path.join(work, "tls.key")] + h2)
            wait_port(ports["baseline"])
            time.sleep(0.5)
            if proto == "http1":
                memory["idle_rss_kib"] = rss_kib(procs["trainguard"].pid)
            for payload, body in payloads.items():
                rules[payload] = check_payload(ports["trainguard"], payload, body, os.path.join(work, "ca.crt"))
                for conns in conn_levels:
                    if proto == "http1" and "x" in conns:
                        continue
                    runs = {"trainguard": [], "baseline": []}
                    for _ in range(args.rounds):
                        for server in ["trainguard", "baseline"]:
                            proc, port = procs[server], ports[server]
                            if proto == "http2":
                                warm_up_h2load(port, body, conns)
                            user0, sys0 = cpu_seconds(proc.pid)
                            r = run_wrk(port, body, conns, args.duration, script) if proto == "http1" \
                                else run_h2load(port, body, conns, args.duration)
                            user1, sys1 = cpu_seconds(proc.pid)
                            per_req = 1e6 / max(r["requests"], 1)
                            r["server_user_us_per_req"] = (user1 - user0) * per_req
                            r["server_sys_us_per_req"] = (sys1 - sys0) * per_req
                            r["server_cpu_us_per_req"] = r["server_user_us_per_req"] + r["server_sys_us_per_req"]
                            runs[server].append(r)
                            print(dict(proto=proto, server=server, payload=payload, conns=conns, **r), file=sys.stderr)
                    for server, rs in runs.items():
                        rows.append(dict(proto=proto, server=server, payload=payload, conns=conns, **median_run(rs)))
                    # Each round's trainguard run and the baseline run right after it are a pair: the
                    # ratio of a pair is what the targets are about, and the pairs' spread shows how
                    # far one ratio can be trusted on this machine.
                    pair_ratios[(proto, payload, conns)] = sorted(
                        t["server_cpu_us_per_req"] / max(b["server_cpu_us_per_req"], 1e-9)
                        for t, b in zip(runs["trainguard"], runs["baseline"]))
            if proto == "http1":
                memory["loaded_rss_kib"] = rss_kib(procs["trainguard"].pid)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(timeout=30)
    command = " ".join(sys.argv[1:])
    lines = [f"Command: `benches/load.py {command}` (generator pinned to CPU 0, "
             f"servers to CPU 1; medians of {args.rounds} alternating runs per configuration; "
             f"deciding rules: {', '.join(f'{k} {v}' for k, v in rules.items())}). CPU µs/req is the "
             f"server's user + system CPU per request (each a median of its own, so the parts need not add "
             f"up exactly); CPU ratio is the median over the rounds of "
             f"trainguard's over the baseline's in the run right after it, with the lowest and highest "
             f"of those ratios.", ""]
    lines.append("| protocol | payload | conns | trainguard req/s | baseline req/s | ratio | trainguard p50 / p99 µs | "
                 "baseline p50 / p99 µs | trainguard CPU µs/req (user + sys) | baseline CPU µs/req (user + sys) | "
                 "CPU ratio | CPU ratio range | generator CPU (trainguard run) | errors |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for proto in protocols:
        for payload in payloads:
            for conns in conn_levels:
                key = lambda server: (proto, server, payload, conns)
                t = next((r for r in rows if (r["proto"], r["server"], r["payload"], r["conns"]) == key("trainguard")), None)
                b = next((r for r in rows if (r["proto"], r["server"], r["payload"], r["conns"]) == key("baseline")), None)
                if t is None or b is None:
                    continue
                lat = lambda r: f"{r['p50_us']} / {r['p99_us']}" if "p50_us" in r else f"mean {r['mean_us']:.0f}"
                cpu = lambda r: (f"{r['server_cpu_us_per_req']:.1f} ({r['server_user_us_per_req']:.1f} + "
                                 f"{r['server_sys_us_per_req']:.1f})")
                ratios = pair_ratios[(proto, payload, conns)]
                lines.append(f"| {proto} | {payload} | {conns} | {t['rps']:.0f} | {b['rps']:.0f} | {t['rps'] / b['rps']:.0%} | "
                             f"{lat(t)} | {lat(b)} | {cpu(t)} | {cpu(b)} | "
                             f"{ratios[len(ratios) // 2]:.2f}× | {ratios[0]:.2f}–{ratios[-1]:.2f}× | "
                             f"{t['gen_cpu']:.0%} | "
                             f"{t['errors'] + b['errors']} |")
    lines.append("")
    lines.append(f"trainguard RSS: idle {memory.get('idle_rss_kib', 0) / 1024:.1f} MiB, after the HTTP/1.1 runs "
                 f"{memory.get('loaded_rss_kib', 0) / 1024:.1f} MiB")
    write_report(args.out, lines)


if __name__ == "__main__":
    main()
