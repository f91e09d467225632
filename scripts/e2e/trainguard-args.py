#!/usr/bin/env python3
"""Prints the args and literal env of one of trainguard's shipped Deployments (rendered YAML on
stdin), one per line (`arg:...` / `env:K=V`), with the in-cluster addresses and certificate paths
replaced by loopback ones, so the plane runs the binary exactly as the manifests configure it.
Usage: trainguard-args.py COMPONENT BIND ADMIN_BIND CERT KEY"""
import sys

import yaml

component, bind, admin_bind, cert, key = sys.argv[1:6]
replace = {"--bind": bind, "--admin-bind": admin_bind, "--tls-cert": cert, "--tls-key": key}
for doc in yaml.safe_load_all(sys.stdin):
    if not doc or doc.get("kind") != "Deployment":
        continue
    if doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") != component:
        continue
    container = doc["spec"]["template"]["spec"]["containers"][0]
    for arg in container.get("args", []):
        name = arg.split("=", 1)[0]
        print("arg:" + (f"{name}={replace[name]}" if name in replace else arg))
    for env in container.get("env", []):
        if "value" in env:
            print(f"env:{env['name']}={env['value']}")
    break
else:
    sys.exit(f"trainguard-args: no Deployment with component {component}")
