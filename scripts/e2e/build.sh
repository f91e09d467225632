#!/usr/bin/env bash
# Builds the local control plane's upstream programs from their Go modules (e2e/versions.env, and
# e2e/kubernetes/<minor>.env for the Kubernetes minor TRAINGUARD_E2E_KUBERNETES chooses, default
# v1.37) into a cache keyed by the Go version, GOOS/GOARCH, both files and this script's recipe, so
# each minor's build is cached on its own, and prints that bin directory. A warm cache makes this
# a no-op. Usage: scripts/e2e/build.sh [COMPONENT...]
# Components: kube (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl),
# jobset, trainer, kwok, kueue, training-operator (TRAINING_OPERATOR_VERSION), training-operator@VERSION
# (another Training Operator release, e.g. v1.8.0 for the TFJob story: in a cache of its own keyed
# by that version, linked into the bin directory as training-operator-VERSION, so a change to
# e2e/versions.env does not rebuild it). Default: all. Not in the default: node (the
# real node: kubelet and kube-proxy from the same Kubernetes build, and containerd, its runc shim,
# ctr, runc, the pause image, kube-network-policies and the tests' busybox client image, versions
# in e2e/node-versions.env; needs the packages
# scripts/e2e/install-deps.sh --node installs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=versions.sh
source "$root/scripts/e2e/versions.sh"
command -v go >/dev/null || { echo "e2e/build: Go is required (go1.26 or newer)" >&2; exit 1; }

cache="${TRAINGUARD_E2E_CACHE:-$HOME/.cache/trainguard-e2e}"
# Bump when the way binaries are built changes (flags, ldflags, packages): it is part of the key.
recipe=1
key="$( { go version; go env GOOS GOARCH; cat "$root/e2e/versions.env" "$kubernetes_env"; echo "recipe $recipe"; } | sha256sum | cut -c1-16)"
bin="$cache/bin/$key"
mkdir -p "$bin" "$cache/src"
log() { echo "e2e/build: $*" >&2; }

components=("$@")
((${#components[@]})) || components=(kube jobset trainer kwok kueue training-operator)

# A GOFLAGS from the caller (e.g. -p=1 on a shared machine) is kept.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -trimpath"
export CGO_ENABLED=0

timed() { # name command...: runs and records how long it took
  local name="$1" start=$SECONDS; shift
  log "building $name"
  "$@"
  log "built $name in $((SECONDS - start)) s"
}

# k8s.io/kubernetes requires its staging modules at v0.0.0 with replace directives to ./staging,
# so `go install` cannot build it: a wrapper module requires it and replaces each staging module
# with its published v0.MINOR.PATCH, generated from upstream's own go.mod.
kube_module() {
  local dir="$cache/src/kubernetes-$KUBERNETES_VERSION" staging_version="v0${KUBERNETES_VERSION#v1}"
  if [[ ! -f "$dir/go.mod" ]]; then
    local upstream
    upstream="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
    [[ -n "$upstream" ]] || { log "the module proxy did not serve k8s.io/kubernetes@$KUBERNETES_VERSION"; exit 1; }
    mkdir -p "$dir.tmp"
    {
      echo "module trainguard.local/e2e-kubernetes"
      echo "go $(go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/')"
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo "replace ("
      sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$upstream"
      echo ")"
    } >"$dir.tmp/go.mod"
    # The staging modules' own requirements decide the rest; -mod=mod lets go build complete go.sum.
    rm -rf "$dir"; mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

build_kube() { # [binary...]: default the control plane's
  local want=("$@") missing=() b
  ((${#want[@]})) || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
  for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || missing+=("$b"); done
  ((${#missing[@]})) || return 0
  local dir minor
  dir="$(kube_module)"
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  local pkgs=()
  for b in "${missing[@]}"; do
    case "$b" in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  # One go build for all of them: their shared packages are compiled once.
  # etcd's server is pinned to the version Kubernetes' own go.mod names; a pin that does not take
  # must stop the build, not fall back to whatever version the module graph picks.
  local pinned
  pinned="$(cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" 2>&1 && go list -mod=mod -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" \
    || { log "could not pin etcd $ETCD_VERSION: $pinned"; exit 1; }
  [[ "${pinned##*$'\n'}" == "$ETCD_VERSION" ]] || { log "etcd resolved to ${pinned##*$'\n'}, not $ETCD_VERSION"; exit 1; }
  (cd "$dir" && timed "${missing[*]}" go build -mod=mod -ldflags "$ld" -o "$bin/.out/" "${pkgs[@]}")
  # go build names etcd's main package after its directory (server/v3 -> server).
  [[ -f "$bin/.out/server" ]] && mv "$bin/.out/server" "$bin/.out/etcd"
  mv "$bin/.out/"* "$bin/" && rmdir "$bin/.out"
}

# The other programs build in their own module as released (its go.mod, go.sum and replace
# directives), each in its own module graph. `go install pkg@version` would do the same, but it
# first asks the proxy for the module's version list (deprecation check), which a proxy that serves
# only pinned versions refuses.
install_one() { # binary-name module version package-dir
  local name="$1" module="$2" version="$3" pkgdir="$4" dir
  [[ -x "$bin/$name" ]] && return 0
  dir="$(go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir" ]] || { log "the module proxy did not serve $module@$version"; exit 1; }
  (cd "$dir" && timed "$name" env GOFLAGS="$GOFLAGS -mod=readonly" go build -ldflags "-s -w" -o "$bin/.$name.tmp" "./$pkgdir")
  mv "$bin/.$name.tmp" "$bin/$name"
}

# Another Training Operator release than TRAINING_OPERATOR_VERSION, built like it (its own module,
# go.mod and go.sum as released), keyed by the Go version and that release only.
to_recipe=1
install_training_operator() { # version
  local version="$1" k tb
  if [[ $version == "$TRAINING_OPERATOR_VERSION" ]]; then
    install_one training-operator github.com/kubeflow/training-operator "$version" cmd/training-operator.v1
    return
  fi
  [[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { log "training-operator@$version: not a v1.x.y release"; exit 2; }
  k="$( { go version; go env GOOS GOARCH; echo "training-operator $version"; echo "recipe $to_recipe"; } | sha256sum | cut -c1-16)"
  tb="$cache/training-operator/$k"
  mkdir -p "$tb"
  if [[ ! -x "$tb/training-operator" ]]; then
    local dir
    dir="$(go mod download -json "github.com/kubeflow/training-operator@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$dir" ]] || { log "the module proxy did not serve github.com/kubeflow/training-operator@$version"; exit 1; }
    (cd "$dir" && timed "training-operator $version" env GOFLAGS="$GOFLAGS -mod=readonly" go build -ldflags "-s -w" \
      -o "$tb/.training-operator.tmp" ./cmd/training-operator.v1)
    mv "$tb/.training-operator.tmp" "$tb/training-operator"
  fi
  ln -sfn "$tb/training-operator" "$bin/training-operator-$version"
}

# The real node's own programs live in a cache of their own, keyed by e2e/node-versions.env (so a
# containerd or runc bump leaves the Kubernetes build alone), linked into $bin.
node_versions="$root/e2e/node-versions.env"
node_recipe=2
node_bin() {
  local k
  k="$( { go version; go env GOOS GOARCH; cat "$node_versions"; echo "kubernetes $KUBERNETES_VERSION"; gcc --version 2>/dev/null | head -n1; echo "recipe $node_recipe"; } | sha256sum | cut -c1-16)"
  echo "$cache/node/$k"
}

# A one-layer OCI image archive at OUT: the files of ROOTFS, and the config's user, entrypoint and
# (optional) command.
one_layer_image() { # out tag rootfs created-by user entrypoint [cmd]
  local out="$1" tag="$2" rootfs="$3" created_by="$4" user="$5" entrypoint="$6" cmd="${7:-}" work
  work="$(mktemp -d)"
  umoci init --layout "$work/layout"
  umoci new --image "$work/layout:$tag"
  umoci unpack --image "$work/layout:$tag" "$work/bundle" >/dev/null
  cp -a "$rootfs/." "$work/bundle/rootfs/"
  umoci repack --image "$work/layout:$tag" --history.created_by "$created_by" "$work/bundle"
  umoci config --no-history --image "$work/layout:$tag" --os linux --architecture "$(go env GOARCH)" \
    --config.user "$user" --config.entrypoint "$entrypoint" ${cmd:+--config.cmd "$cmd"}
  umoci gc --layout "$work/layout"
  tar -C "$work/layout" -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$work"
}

build_node() {
  # shellcheck source=../../e2e/node-versions.env
  source "$node_versions"
  local nb kube_dir b
  nb="$(node_bin)"; mkdir -p "$nb"
  build_kube kubelet kube-proxy
  # containerd 2.x with the runc shim and ctr of the same module (Debian's shim is 1.x, which a
  # 2.x daemon cannot load). Built in a writable copy of the module: its go.sum lacks entries a
  # build outside its repository needs, so -mod=mod completes it.
  if [[ ! -x "$nb/containerd" || ! -x "$nb/containerd-shim-runc-v2" || ! -x "$nb/ctr" ]]; then
    local src="$cache/src/containerd-$CONTAINERD_VERSION" dir
    if [[ ! -f "$src/go.mod" ]]; then
      dir="$(go mod download -json "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
      [[ -d "$dir" ]] || { log "the module proxy did not serve containerd $CONTAINERD_VERSION"; exit 1; }
      rm -rf "$src.tmp"; cp -r "$dir" "$src.tmp"; chmod -R u+w "$src.tmp"; rm -rf "$src"; mv "$src.tmp" "$src"
    fi
    (cd "$src" && timed "containerd, containerd-shim-runc-v2, ctr" go build -mod=mod -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      -o "$nb/.out/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr)
    mv "$nb/.out/"* "$nb/" && rmdir "$nb/.out"
  fi
  # runc with seccomp (the CRI asks for a seccomp profile): cgo and libseccomp-dev. runc v1.3.3's
  # go.mod replaces go-selinux with a copy inside its repository (its CVE-2025-52881 patch), a nested
  # module the module zip leaves out: a writable copy of the module points that replace at the
  # published go-selinux release that carries the fix (RUNC_SELINUX_VERSION).
  if [[ ! -x "$nb/runc" ]]; then
    local src="$cache/src/runc-$RUNC_VERSION-selinux-$RUNC_SELINUX_VERSION" dir
    pkg-config --exists libseccomp || { log "runc needs libseccomp-dev and pkg-config: scripts/e2e/install-deps.sh --node"; exit 1; }
    if [[ ! -f "$src/go.mod" ]]; then
      dir="$(go mod download -json "github.com/opencontainers/runc@$RUNC_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
      [[ -d "$dir" ]] || { log "the module proxy did not serve runc $RUNC_VERSION"; exit 1; }
      rm -rf "$src.tmp"; cp -r "$dir" "$src.tmp"; chmod -R u+w "$src.tmp"
      if grep -q '=> ./internal/third_party/selinux' "$src.tmp/go.mod"; then
        (cd "$src.tmp" && go mod edit -replace "github.com/opencontainers/selinux=github.com/opencontainers/selinux@$RUNC_SELINUX_VERSION")
      fi
      rm -rf "$src"; mv "$src.tmp" "$src"
    fi
    (cd "$src" && timed runc env CGO_ENABLED=1 go build -mod=mod -tags seccomp \
      -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$nb/.runc.tmp" .)
    mv "$nb/.runc.tmp" "$nb/runc"
  fi
  # The pause program from the Kubernetes module's own source, static as upstream builds it, in a
  # one-layer image (USER and ENTRYPOINT as build/pause/Dockerfile) for the CRI's sandboxes.
  if [[ ! -f "$nb/pause.oci.tar" ]]; then
    kube_dir="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    local tag work
    tag="$(sed -n 's/^TAG ?= //p' "$kube_dir/build/pause/Makefile")"
    [[ -n "$tag" && -f "$kube_dir/build/pause/linux/pause.c" ]] || { log "build/pause not found in k8s.io/kubernetes@$KUBERNETES_VERSION"; exit 1; }
    work="$(mktemp -d)"
    timed pause gcc -Os -Wall -Werror -static -DVERSION="v$tag-0" -o "$work/pause" "$kube_dir/build/pause/linux/pause.c"
    mkdir "$work/rootfs" && install -m 0755 "$work/pause" "$work/rootfs/pause"
    echo "$tag" >"$nb/pause.tag"
    one_layer_image "$nb/pause.oci.tar" "$tag" "$work/rootfs" "gcc -static build/pause/linux/pause.c" 65535:65535 /pause
    rm -rf "$work"
  fi
  # NetworkPolicy: kube-network-policies, built as its Dockerfile builds it (its own module,
  # static), with one expression replaced. It steers each new connection's first packet to its
  # userspace with nftables' queue expression, which kernels built without CONFIG_NFT_QUEUE (this
  # project's CI machines among them) refuse ("No such file or directory"). The same queue is
  # reached through the xtables NFQUEUE target (nft_compat, xt_NFQUEUE), which such kernels have:
  # same queue number, same fail-open flag, same packets. How policies are evaluated stays upstream's.
  if [[ ! -x "$nb/kube-network-policies" ]]; then
    local src="$cache/src/kube-network-policies-$KUBE_NETWORK_POLICIES_VERSION-xtqueue" dir
    if [[ ! -f "$src/go.mod" ]]; then
      dir="$(go mod download -json "sigs.k8s.io/kube-network-policies@$KUBE_NETWORK_POLICIES_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
      [[ -d "$dir" ]] || { log "the module proxy did not serve kube-network-policies $KUBE_NETWORK_POLICIES_VERSION"; exit 1; }
      rm -rf "$src.tmp"; cp -r "$dir" "$src.tmp"; chmod -R u+w "$src.tmp"
      python3 - "$src.tmp/pkg/networkpolicy" <<'PY'
import pathlib, sys
pkg = pathlib.Path(sys.argv[1])
controller = pkg / "controller.go"
text = controller.read_text()
native = ("queue := &expr.Queue{Num: uint16(c.config.QueueID)}\n\tif c.config.FailOpen {\n"
          "\t\tqueue.Flag = expr.QueueFlagBypass\n\t}\n")
if text.count(native) != 2:
    sys.exit("kube-network-policies: the queue expressions to replace are not where they were")
controller.write_text(text.replace(native, "queue := xtQueue(uint16(c.config.QueueID), c.config.FailOpen)\n"))
(pkg / "xt_queue.go").write_text("""package networkpolicy

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xtQueue is the xtables NFQUEUE target, revision 3 (struct xt_NFQ_info_v3: queue number, one
// queue, flags; padded to 8 bytes), through nft_compat: for kernels without nft_queue.
func xtQueue(num uint16, bypass bool) expr.Any {
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	raw := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &raw}
}
""")
PY
      rm -rf "$src"; mv "$src.tmp" "$src"
    fi
    (cd "$src" && timed kube-network-policies env GOFLAGS="$GOFLAGS -mod=readonly" go build -ldflags "-s -w" \
      -o "$nb/.kube-network-policies.tmp" ./cmd)
    mv "$nb/.kube-network-policies.tmp" "$nb/kube-network-policies"
  fi
  # The tests' client pods: Debian's static busybox (wget, nc, timeout) in a one-layer image, its
  # applets linked in /bin, keyed by the package's version.
  local busybox_version
  busybox_version="$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null | tr -c 'A-Za-z0-9.\n' '_')"
  [[ -n $busybox_version && -x /bin/busybox ]] || { log "the client image needs busybox-static: scripts/e2e/install-deps.sh --node"; exit 1; }
  if [[ ! -f "$nb/client.oci.tar" || "$(cat "$nb/client.tag" 2>/dev/null)" != "$busybox_version" ]]; then
    local work applet
    work="$(mktemp -d)"
    mkdir -p "$work/rootfs/bin" "$work/rootfs/tmp"
    install -m 0755 /bin/busybox "$work/rootfs/bin/busybox"
    for applet in sh sleep wget nc true cat timeout; do ln -s busybox "$work/rootfs/bin/$applet"; done
    echo "$busybox_version" >"$nb/client.tag"
    one_layer_image "$nb/client.oci.tar" "$busybox_version" "$work/rootfs" "busybox-static $busybox_version" \
      65534:65534 /bin/sleep infinity
    rm -rf "$work"
  fi
  for b in containerd containerd-shim-runc-v2 ctr runc pause.oci.tar pause.tag kube-network-policies client.oci.tar client.tag; do
    ln -sfn "$nb/$b" "$bin/$b"
  done
}

for c in "${components[@]}"; do
  case "$c" in
    kube) build_kube ;;
    node) build_node ;;
    jobset) install_one jobset sigs.k8s.io/jobset "$JOBSET_VERSION" . ;;
    trainer) install_one trainer-controller-manager github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" cmd/trainer-controller-manager ;;
    kwok) install_one kwok sigs.k8s.io/kwok "$KWOK_VERSION" cmd/kwok ;;
    kueue) install_one kueue sigs.k8s.io/kueue "$KUEUE_VERSION" cmd/kueue ;;
    training-operator) install_training_operator "$TRAINING_OPERATOR_VERSION" ;;
    training-operator@*) install_training_operator "${c#training-operator@}" ;;
    *) log "unknown component $c"; exit 2 ;;
  esac
done
echo "$bin"
