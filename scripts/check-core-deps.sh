#!/usr/bin/env bash
# The core crate (crates/core) stays pure: no runtime, no network, no CLI library anywhere in its
# dependency tree (normal and build dependencies; its dev-dependencies are its tests' business).
# Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tokio|tokio-[a-z-]+|hyper|hyper-[a-z-]+|mio|socket2|clap|clap_[a-z_]+|tower|tower-[a-z-]+|reqwest|kube-client|kube-runtime|kube|rustls|tracing-subscriber|async-[a-z-]+)$'
deps=$(cargo tree --locked -p trainguard-core -e normal,build --prefix none --format '{p}' | awk '{print $1}' | sort -u)
bad=$(grep -E "$forbidden" <<<"$deps" || true)
if [[ -n "$bad" ]]; then
    echo "crates/core must not depend on a runtime, network or CLI crate; found:" >&2
    sed 's/^/  /' <<<"$bad" >&2
    echo "(\`cargo tree -p trainguard-core -i <crate>\` shows the path)" >&2
    exit 1
fi
echo "crates/core: $(wc -l <<<"$deps") crates in its tree, none of them a runtime, network or CLI crate"
