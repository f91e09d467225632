#!/usr/bin/env python3
"""The Dockerfile's final stage as JSON: what scripts/image/build.sh assembles without a container
engine. One description of the image: build.sh takes user, entrypoint, command, ports, labels and
the copied files from here, and tests/cli/image.rs holds this output to the Dockerfile.

Usage: scripts/image/dockerfile.py [Dockerfile]
Prints {"base", "labels", "copies": [{"from", "src", "dest"}], "user", "expose", "entrypoint",
"cmd", "build": {"profile", "binary"}}. Only the instructions the final stage uses are understood;
any other instruction there is an error, so a change to the Dockerfile cannot be silently missed.
"""
import json
import re
import shlex
import sys


def instructions(text):
    """(keyword, arguments) per instruction: comments dropped, continuation lines joined."""
    out, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        keyword, _, args = current.strip().partition(" ")
        out.append((keyword.upper(), args.strip()))
        current = ""
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "Dockerfile"
    steps = instructions(open(path, encoding="utf-8").read())
    starts = [i for i, (k, _) in enumerate(steps) if k == "FROM"]
    if not starts:
        sys.exit(f"{path}: no FROM")
    build, final = steps[: starts[-1]], steps[starts[-1]:]
    image = {"base": final[0][1].split()[0], "labels": {}, "copies": [], "user": None, "expose": [],
             "entrypoint": None, "cmd": None}
    for keyword, args in final[1:]:
        if keyword == "LABEL":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                image["labels"][key] = value
        elif keyword == "COPY":
            words = args.split()
            source = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            paths = [w for w in words if not w.startswith("--")]
            image["copies"].append({"from": source, "src": paths[0], "dest": paths[-1]})
        elif keyword == "USER":
            image["user"] = args
        elif keyword == "EXPOSE":
            image["expose"] += [p if "/" in p else p + "/tcp" for p in args.split()]
        elif keyword in ("ENTRYPOINT", "CMD"):
            image[keyword.lower()] = json.loads(args)
        else:
            sys.exit(f"{path}: the final stage has {keyword}, which scripts/image/dockerfile.py does not know")
    # What the build stage installs where the final stage copies from: `install ... target/PROFILE/BIN /out/BIN`.
    run = " ".join(args for keyword, args in build if keyword == "RUN")
    found = re.search(r"--profile (\S+)", run)
    installed = re.search(r"install -D -m \d+ target/(\S+)/(\S+) (\S+)", run)
    if not found or not installed:
        sys.exit(f"{path}: the build stage's cargo build --profile and install lines were not found")
    image["build"] = {"profile": found.group(1), "binary": installed.group(2), "out": installed.group(3)}
    json.dump(image, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
