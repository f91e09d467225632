#!/usr/bin/env bash
# What `make e2e` needs beyond `make test`'s tools: Go (builds the upstream programs), python3 with
# PyYAML (rewrites webhook configurations), openssl (the plane's certificates) and curl (readiness
# probes). Debian packages are installed when missing; Go must already be there.
# With --node (or TRAINGUARD_E2E_NODE=1), also what the real node needs (scripts/e2e/plane.sh node):
# gcc and libc6-dev (the static pause program), libseccomp-dev and pkg-config (runc with seccomp),
# umoci (the pause and trainguard images), the CNI plugins (bridge, host-local, loopback, portmap
# in /usr/lib/cni), iproute2 (the node's bridge), util-linux (nsenter, findmnt), nftables (kube-proxy's
# nftables mode) and socat (the API server's port relayed onto the node's bridge), and
# busybox-static (the tests' client pods).
set -euo pipefail
node="${TRAINGUARD_E2E_NODE:-0}"
[[ "${1:-}" == --node ]] && node=1
fail() { echo "e2e/install-deps: $*" >&2; exit 1; }
command -v go >/dev/null || fail "Go is required (1.26 or newer): https://go.dev/doc/install"
missing=()
# PyYAML: from PyPI into the python3 on PATH where it has pip (pyenv, venv), else Debian's package.
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pyyaml 2>/dev/null \
  || missing+=(python3-yaml)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
if [[ $node == 1 ]]; then
  command -v gcc >/dev/null || missing+=(gcc)
  [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ]] || missing+=(libc6-dev)
  pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev pkg-config)
  command -v umoci >/dev/null || missing+=(umoci)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || missing+=(containernetworking-plugins)
  command -v ip >/dev/null || missing+=(iproute2)
  # kube-proxy's nftables mode runs nft; socat relays the API server's port onto the bridge.
  command -v nft >/dev/null || missing+=(nftables)
  command -v socat >/dev/null || missing+=(socat)
  command -v findmnt >/dev/null || missing+=(util-linux)
  # The tests' client pods: a static busybox in an image of its own (scripts/e2e/build.sh node).
  dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
fi
if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || fail "missing ${missing[*]}; install with: sudo apt-get install -y ${missing[*]}"
  echo "e2e/install-deps: apt-get install ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  python3 -c 'import yaml' 2>/dev/null || fail "python3 still cannot import yaml (a python3 outside Debian's?): pip install pyyaml"
fi
