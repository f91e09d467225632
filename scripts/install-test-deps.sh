#!/usr/bin/env bash
# Installs what `make test` needs on a fresh machine. Idempotent and quick when all is present.
set -euo pipefail

if ! command -v cargo-nextest >/dev/null 2>&1 && ! cargo nextest --version >/dev/null 2>&1; then
  echo "install-test-deps: cargo-nextest missing, installing it" >&2
  cargo install cargo-nextest --locked
fi
