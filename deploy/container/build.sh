#!/usr/bin/env bash
# Build the trustscore container image with podman, from nothing but Debian's mirrors and PyPI.
#
#   deploy/container/build.sh [IMAGE]        (default IMAGE: localhost/trustscore:latest)
#
# 1. The base image localhost/trustscore-base:bookworm: made with `debootstrap --variant=minbase` (needs
#    root) when it is missing, its root file system cached as a tarball outside the repository
#    ($TRUSTSCORE_CONTAINER_CACHE, default ~/.cache/trustscore-container) and imported with `podman import`.
# 2. The image: `podman build` of the Containerfile at the repository root, with the flags that work on a
#    host whose container runtime may not set resource limits or use cgroup v2 (docs/container.md).
# Every command is printed before it runs. Variables: TRUSTSCORE_CONTAINER_CACHE, DEBIAN_MIRROR,
# TRUSTSCORE_CONTAINER_RUNTIME (default runc), TRUSTSCORE_CONTAINER_BASE, TRUSTSCORE_CONTAINER_CA (the CA
# bundle pip trusts for PyPI inside the build, passed as a build secret; default the host's Debian bundle).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE="${1:-localhost/trustscore:latest}"
BASE="${TRUSTSCORE_CONTAINER_BASE:-localhost/trustscore-base:bookworm}"
CACHE="${TRUSTSCORE_CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trustscore-container}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
RUNTIME="${TRUSTSCORE_CONTAINER_RUNTIME:-runc}"
TARBALL="$CACHE/bookworm-minbase.tar"
CA="${TRUSTSCORE_CONTAINER_CA:-/etc/ssl/certs/ca-certificates.crt}"

step() { printf '+ %s\n' "$*" >&2; "$@"; }

for tool in podman "$RUNTIME"; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (apt-get install podman runc debootstrap)" >&2; exit 1; }
done

[ -r "$CA" ] || { echo "build.sh: no CA bundle at $CA (set TRUSTSCORE_CONTAINER_CA)" >&2; exit 1; }

if podman image exists "$BASE"; then
  echo "base image $BASE present" >&2
else
  if [ ! -s "$TARBALL" ]; then
    command -v debootstrap >/dev/null || { echo "build.sh: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "build.sh: debootstrap needs root to make the base" >&2; exit 1; }
    step mkdir -p "$CACHE"
    ROOTFS="$(mktemp -d "$CACHE/rootfs-XXXXXX")"
    trap 'rm -rf "$ROOTFS"' EXIT
    step debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR"
    step rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    step tar -C "$ROOTFS" --numeric-owner -cf "$TARBALL.part" .
    step mv "$TARBALL.part" "$TARBALL"
    step rm -rf "$ROOTFS"
    trap - EXIT
  fi
  step podman import --change 'CMD ["/bin/bash"]' "$TARBALL" "$BASE"
fi

# --runtime runc: crun refuses this host's cgroups ("cgroups in hybrid mode not supported").
# --ulimit: the runtime cannot raise limits without CAP_SYS_RESOURCE, so RUN steps ask for lower ones.
# --network host: RUN steps reach Debian's mirrors and PyPI through the host's network.
# --secret ca-bundle: pip's CA bundle (the host's), mounted for one RUN step and kept out of the image.
step podman --runtime "$RUNTIME" build \
  --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
  --network host \
  --secret "id=ca-bundle,src=$CA" \
  --build-arg "BASE=$BASE" \
  --file Containerfile \
  --tag "$IMAGE" \
  .
echo "built $IMAGE" >&2
