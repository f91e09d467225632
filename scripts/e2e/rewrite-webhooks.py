#!/usr/bin/env python3
"""Reads Kubernetes YAML on stdin; writes it back with every webhook's clientConfig.service turned
into `url: https://127.0.0.1:PORT/PATH` and the given caBundle, as envtest does for webhooks that
run outside the cluster. Usage: rewrite-webhooks.py PORT CA_FILE [--only KIND,KIND] [--skip KIND,...]"""
import base64
import sys

import yaml

port, ca_file = sys.argv[1], sys.argv[2]
only = skip = None
args = sys.argv[3:]
while args:
    flag, value = args[0], args[1]
    if flag == "--only":
        only = set(value.split(","))
    elif flag == "--skip":
        skip = set(value.split(","))
    else:
        sys.exit(f"rewrite-webhooks: unknown flag {flag}")
    args = args[2:]
ca = base64.b64encode(open(ca_file, "rb").read()).decode()

out = []
for doc in yaml.safe_load_all(sys.stdin):
    if not doc:
        continue
    kind = doc.get("kind", "")
    if (only and kind not in only) or (skip and kind in skip):
        continue
    if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in doc.get("webhooks", []):
            cc = hook["clientConfig"]
            service = cc.pop("service", None)
            if service is not None:
                cc["url"] = f"https://127.0.0.1:{port}{service.get('path', '/')}"
            cc["caBundle"] = ca
        # Injected by cert-manager in a cluster; meaningless here.
        doc.get("metadata", {}).get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
    out.append(doc)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
