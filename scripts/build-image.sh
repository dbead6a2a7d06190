#!/usr/bin/env bash
# Build the Quire container image (`make image`).
#
# The Dockerfile (deploy/image/Dockerfile) starts FROM a Debian bookworm base.
# On a normal machine that is Docker Hub's debian:bookworm-slim:
#
#   QUIRE_BASE_IMAGE=debian:bookworm-slim make image
#
# Where no image registry can be reached (only Debian's and PyPI's package
# mirrors), the base is made here instead: a minimal bookworm root filesystem
# from `debootstrap --variant=minbase`, using the Debian mirror that this
# machine's apt uses, imported with `docker import` as quire-base:bookworm-r<BASE_RECIPE>.
# The root filesystem tarball is cached under .cache/image/ (git-ignored), so
# only the first build pays for it.
#
# Settings (environment): QUIRE_IMAGE_TELEMETRY (true: quire-telemetry, with
# PySpark and Java), QUIRE_IMAGE (default quire:latest, also tagged with the
# project version), QUIRE_BASE_IMAGE (skip debootstrap and use this base),
# QUIRE_DEBIAN_MIRROR (default: from /etc/apt/sources.list*),
# QUIRE_DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security), QUIRE_BUILD_CA_FILE
# (a CA bundle pip must trust in the builder stage; default $PIP_CERT).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' services/pyproject.toml | head -n 1)"
# QUIRE_IMAGE_TELEMETRY=true: the same image plus PySpark and Java, for the
# telemetry stage (quire-telemetry:latest); the services' image stays lean.
WITH_TELEMETRY="${QUIRE_IMAGE_TELEMETRY:-false}"
if [ "$WITH_TELEMETRY" = true ]; then REPOSITORY=quire-telemetry; else REPOSITORY=quire; fi
IMAGE="${QUIRE_IMAGE:-$REPOSITORY:latest}"
SUITE=bookworm
# Bump BASE_RECIPE when the way the base is made changes: it names both the
# cached tarball and the imported image, so an old base is not reused.
BASE_RECIPE=2
LOCAL_BASE="quire-base:$SUITE-r$BASE_RECIPE"
CACHE_DIR=.cache/image
ROOTFS_TAR="$CACHE_DIR/$SUITE-minbase-r$BASE_RECIPE.tar"

log() { echo "image: $*"; }

if ! docker info >/dev/null 2>&1; then
  echo "image: no Docker engine answers; start one (scripts/docker-engine.sh start) and retry" >&2
  exit 1
fi

debian_mirror() {
  if [ -n "${QUIRE_DEBIAN_MIRROR:-}" ]; then echo "$QUIRE_DEBIAN_MIRROR"; return; fi
  local mirror=""
  # deb822 sources (URIs: ...) first, then one-line sources (deb URL suite ...).
  mirror="$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security \
    | awk '{print $2}' | head -n 1 || true)"
  if [ -z "$mirror" ]; then
    mirror="$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | grep -v security | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | head -n 1 || true)"
  fi
  echo "${mirror:-http://deb.debian.org/debian}"
}

make_local_base() {
  if docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    log "base $LOCAL_BASE already imported"
    return
  fi
  if [ ! -f "$ROOTFS_TAR" ]; then
    command -v debootstrap >/dev/null || {
      log "installing debootstrap"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    local mirror rootfs
    mirror="$(debian_mirror)"
    rootfs="$(mktemp -d /tmp/quire-rootfs.XXXXXX)"
    mkdir -p "$CACHE_DIR"
    log "debootstrap --variant=minbase $SUITE from $mirror (once; cached in $ROOTFS_TAR)"
    debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
      tail -n 20 "$CACHE_DIR/debootstrap.log" >&2; rm -rf "$rootfs"; exit 1; }
    # debootstrap lists only the release itself; add its updates and the
    # security archive, as debian:bookworm-slim has, so image builds get fixes.
    cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${QUIRE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} $SUITE-security main
SOURCES
    # Leave apt's downloaded packages and lists out of the base.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    mkdir -p "$CACHE_DIR"
    tar -C "$rootfs" --numeric-owner -cf "$ROOTFS_TAR.partial" .
    mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
    rm -rf "$rootfs"
  fi
  log "docker import $ROOTFS_TAR as $LOCAL_BASE"
  docker import --change 'CMD ["/bin/bash"]' "$ROOTFS_TAR" "$LOCAL_BASE" >/dev/null
}

mkdir -p "$CACHE_DIR"
if [ -n "${QUIRE_BASE_IMAGE:-}" ]; then
  BASE="$QUIRE_BASE_IMAGE"
else
  make_local_base
  BASE="$LOCAL_BASE"
fi

# A TLS-inspecting proxy between the build and PyPI needs its CA in the builder
# stage; hand the host's bundle over when the host's pip is told to use one.
build_ca="${QUIRE_BUILD_CA_FILE:-${PIP_CERT:-}}"
if [ -n "$build_ca" ] && [ -f "$build_ca" ]; then
  cp "$build_ca" "$CACHE_DIR/build-ca.crt"
  log "builder stage trusts $build_ca for pip"
else
  rm -f "$CACHE_DIR/build-ca.crt"
fi

log "building $IMAGE (and $REPOSITORY:$VERSION) from base $BASE"
start=$(date +%s)
# Host networking for the build: RUN steps reach the Debian mirror and PyPI the
# way the host does, also where the engine has no bridge network.
docker build --network host \
  --build-arg "BASE_IMAGE=$BASE" \
  --build-arg "WITH_TELEMETRY=$WITH_TELEMETRY" \
  --build-arg "QUIRE_REVISION=$(git rev-parse HEAD 2>/dev/null || true)" \
  --build-arg "QUIRE_VERSION=$(python3 -c 'import tomllib; print(tomllib.load(open("services/pyproject.toml", "rb"))["project"]["version"])')" \
  -f deploy/image/Dockerfile \
  -t "$IMAGE" -t "$REPOSITORY:$VERSION" \
  .
log "built $IMAGE in $(( $(date +%s) - start ))s, $(docker image inspect "$IMAGE" --format '{{.Size}}' \
  | awk '{printf "%.0f MB", $1 / 1000000}')"
