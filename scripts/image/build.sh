#!/usr/bin/env bash
# trainguard's OCI image as the Dockerfile's final stage describes it, without a container engine or
# a registry (`make image`): the final stage's base (gcr.io/distroless/cc-debian12:nonroot) is
# assembled from the Debian packages that image is made of (apt-get download + dpkg -x), the
# binary of the build stage's profile is copied where the Dockerfile copies it, and user,
# entrypoint, command, ports and labels are read from the Dockerfile (scripts/image/dockerfile.py).
# umoci (a Debian package, installed when missing) writes the OCI layout; the archive is that
# layout as a tar, which `ctr images import` and `skopeo copy oci-archive:` read.
#
#   scripts/image/build.sh                 build target/image/trainguard.oci.tar
#   scripts/image/build.sh --print-config  the image's description as JSON (no build, no network)
#
# Env: TRAINGUARD_BIN (default $CARGO_TARGET_DIR/<profile>/trainguard, the Dockerfile's profile),
# IMAGE_DIR (default $CARGO_TARGET_DIR/image, else target/image). File times are fixed to the
# commit's time (SOURCE_DATE_EPOCH), so the same inputs give the same layer.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
log() { echo "image/build: $*" >&2; }
die() { log "$*"; exit 1; }

command -v python3 >/dev/null || die "python3 is required"
desc="$(python3 "$root/scripts/image/dockerfile.py" "$root/Dockerfile")"
field() { python3 -c 'import json, sys; d = json.loads(sys.argv[1])
for k in sys.argv[2].split("."): d = d[k]
print(d if isinstance(d, str) else json.dumps(d))' "$desc" "$1"; }

# The Debian packages each supported base image is made of (distroless's cc image: its base image's
# files, glibc and the C/C++ runtime), its user and environment. Another base in the Dockerfile
# must be added here first.
base="$(field base)"
case "$base" in
  gcr.io/distroless/cc-debian12:nonroot)
    suite=bookworm
    packages=(base-files netbase tzdata ca-certificates libc6 libssl3 libgcc-s1 libgomp1 libstdc++6)
    base_user=nonroot base_uid=65532 home=/home/nonroot
    env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
    ;;
  *) die "no recipe for the base image $base (Dockerfile's final FROM): add its packages to scripts/image/build.sh" ;;
esac

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
revision="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
profile="$(field build.profile)"
target="${CARGO_TARGET_DIR:-$root/target}"
binary="${TRAINGUARD_BIN:-$target/$profile/$(field build.binary)}"
out="${IMAGE_DIR:-$target/image}"
tag="$version"

if [[ "${1:-}" == --print-config ]]; then
  python3 - "$desc" "$binary" "$base_user" "$base_uid" "$home" "$tag" "$version" "$revision" "$suite" "${packages[*]}" "${env[@]}" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
binary, user, uid, home, tag, version, revision, suite, packages = sys.argv[2:11]
env = sys.argv[11:]
labels = dict(d["labels"])
# As the release workflow adds them (docker/build-push-action's labels).
labels["org.opencontainers.image.version"] = version
labels["org.opencontainers.image.revision"] = revision
files = {c["dest"]: binary if c["src"] == d["build"]["out"] else c["src"] for c in d["copies"]}
print(json.dumps({
    "base": d["base"], "suite": suite, "packages": packages.split(), "passwd_user": {"name": user, "uid": int(uid), "home": home},
    "files": files, "tag": tag,
    "config": {"User": d["user"], "Entrypoint": d["entrypoint"], "Cmd": d["cmd"],
               "ExposedPorts": sorted(d["expose"]), "Labels": labels, "Env": env, "WorkingDir": home},
}, indent=1))
PY
  exit 0
fi

[[ -x "$binary" ]] || die "no binary at $binary: cargo build --profile $profile --bin trainguard (make image does)"
[[ $(id -u) -eq 0 ]] || die "run as root: the image's files are owned by root and by $base_uid, as in the base image"
grep -q "VERSION_CODENAME=$suite" /etc/os-release 2>/dev/null \
  || log "warning: this machine is not Debian $suite; its packages stand in for the base image's"
missing=()
command -v umoci >/dev/null || missing+=(umoci)
command -v readelf >/dev/null || missing+=(binutils)
command -v apt-get >/dev/null || die "apt-get is required (the base image is assembled from Debian packages)"
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

t0=$SECONDS
mkdir -p "$out/debs"
# The candidate version of each package, downloaded once (its file name names the version).
debs=()
for p in "${packages[@]}"; do
  file="$(apt-cache show --no-all-versions "$p" 2>/dev/null | sed -n 's#^Filename: .*/##p' | head -n1)"
  if [[ -z "$file" ]]; then
    log "apt-get update (no candidate for $p)"; apt-get update -qq
    file="$(apt-cache show --no-all-versions "$p" | sed -n 's#^Filename: .*/##p' | head -n1)"
  fi
  if [[ ! -f "$out/debs/$file" ]]; then
    (cd "$out/debs" && apt-get download -qq -o APT::Sandbox::User=root "$p" >/dev/null) || die "apt-get download $p failed"
  fi
  debs+=("$out/debs/$file")
done

work="$out/work"
rm -rf "$work"; mkdir -p "$work/rootfs"
rootfs="$work/rootfs"
for deb in "${debs[@]}"; do dpkg -x "$deb" "$rootfs"; done
# What distroless leaves out: documentation but the copyright files, manuals, lintian overrides.
find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/lintian"
# ca-certificates' postinst builds the bundle; dpkg -x runs no maintainer scripts.
mkdir -p "$rootfs/etc/ssl/certs"
find "$rootfs/usr/share/ca-certificates" -name '*.crt' -print0 | LC_ALL=C sort -z | xargs -0 cat >"$rootfs/etc/ssl/certs/ca-certificates.crt"
cat >"$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
$base_user:x:$base_uid:$base_uid:$base_user:$home:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<EOF
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
$base_user:x:$base_uid:
EOF
install -d -m 0700 "$rootfs/root"
install -d -m 0700 -o "$base_uid" -g "$base_uid" "$rootfs$home"
install -d -m 1777 "$rootfs/tmp"
# The Dockerfile's COPY lines (the build stage's binary is the one built here).
while IFS=$'\t' read -r dest src; do
  install -D -m 0755 "$src" "$rootfs$dest"
done < <(python3 - "$desc" "$binary" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
for c in d["copies"]:
    if c["src"] != d["build"]["out"]:
        sys.exit(f"COPY {c['src']} is not the build stage's binary: teach scripts/image/build.sh about it")
    print(f"{c['dest']}\t{sys.argv[2]}")
PY
)
entry="$(field entrypoint | python3 -c 'import json, sys; print(json.load(sys.stdin)[0])')"
# Everything the binary links against must be in the image.
while read -r lib; do
  found=""
  for dir in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 lib usr/lib; do
    [[ -e "$rootfs/$dir/$lib" ]] && { found=1; break; }
  done
  [[ -n "$found" ]] || die "$entry needs $lib, which none of the image's packages brings"
done < <(readelf -d "$rootfs$entry" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# The binary starts in the image's root, with only its libraries.
chroot "$rootfs" "$entry" --version >/dev/null || die "$entry --version failed inside the image's root"
find "$rootfs" -exec touch -h -d "@$epoch" {} +

layout="$work/layout"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs"; mv "$rootfs" "$work/bundle/rootfs"
umoci repack --image "$layout:$tag" --history.created "$created" \
  --history.created_by "scripts/image/build.sh: Debian $suite packages ${packages[*]}, and the trainguard binary" "$work/bundle"
cfg=(--no-history --os linux --architecture "$(dpkg --print-architecture)" --created "$created"
  --config.user "$(field user)" --config.workingdir "$home")
while read -r arg; do cfg+=(--config.entrypoint "$arg"); done < <(field entrypoint | python3 -c 'import json, sys; print(*json.load(sys.stdin), sep="\n")')
while read -r arg; do cfg+=(--config.cmd "$arg"); done < <(field cmd | python3 -c 'import json, sys; print(*json.load(sys.stdin), sep="\n")')
for port in $(field expose | python3 -c 'import json, sys; print(*json.load(sys.stdin))'); do cfg+=(--config.exposedports "$port"); done
for e in "${env[@]}"; do cfg+=(--config.env "$e"); done
while IFS= read -r label; do cfg+=(--config.label "$label"); done < <(field labels | python3 -c 'import json, sys; [print(f"{k}={v}") for k, v in json.load(sys.stdin).items()]')
cfg+=(--config.label "org.opencontainers.image.version=$version" --config.label "org.opencontainers.image.revision=$revision")
umoci config "${cfg[@]}" --image "$layout:$tag"
umoci gc --layout "$layout"
find "$layout" -exec touch -h -d "@$epoch" {} +
archive="$out/trainguard.oci.tar"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$layout" -cf "$archive.tmp" .
mv "$archive.tmp" "$archive"
rm -rf "$work"
log "wrote $archive (trainguard:$tag, $(du -h "$archive" | cut -f1)) in $((SECONDS - t0)) s"
echo "$archive"
