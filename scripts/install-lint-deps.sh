#!/usr/bin/env bash
# Installs what `make lint` needs on a fresh machine: rustfmt and clippy (rustup components) and
# cargo-deny (built from crates.io the first time). Idempotent and quick when all is present.
set -euo pipefail

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null || { echo "install-lint-deps: install rustfmt and clippy for this toolchain" >&2; exit 1; }
  rustup component add rustfmt clippy
fi

if ! cargo deny --version >/dev/null 2>&1; then
  echo "install-lint-deps: cargo-deny missing, building it (a few minutes, once)" >&2
  cargo install cargo-deny --locked
fi
