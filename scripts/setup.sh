#!/usr/bin/env bash
# Install what Quire needs on a Debian/Ubuntu machine: etcd (Debian's
# etcd-server) and Prometheus (for promtool and the scrape test), a Python virtual environment with the project and its
# development tools, and buf (from npm) for linting the protos.
# Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "setup: need root to run: $*" >&2; exit 1; fi
}

apt_packages=()
command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || apt_packages+=(etcd-server)
# `quire cluster up --tls` locks etcd down with etcdctl (users, roles, auth enable).
command -v etcdctl >/dev/null 2>&1 || [ -x /usr/bin/etcdctl ] || apt_packages+=(etcd-client)
"$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || apt_packages+=(python3-venv)
# The telemetry stage runs PySpark, which needs a Java runtime (17 or newer).
command -v java >/dev/null 2>&1 || apt_packages+=(openjdk-17-jre-headless)
# The fault suite (tests/faults) uses network namespaces, tc and nftables (the network lab), strace and faketime.
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || apt_packages+=(iproute2)
command -v nft >/dev/null 2>&1 || apt_packages+=(nftables)
command -v strace >/dev/null 2>&1 || apt_packages+=(strace)
command -v faketime >/dev/null 2>&1 || apt_packages+=(faketime)
# The alert rules are checked with promtool, and the end-to-end suite scrapes a cluster with a real Prometheus.
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || apt_packages+=(prometheus)
# A cluster with several gateways (quire cluster up --gateways N) puts HAProxy in front of them.
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || apt_packages+=(haproxy)
if [ ${#apt_packages[@]} -gt 0 ]; then
  echo "setup: installing ${apt_packages[*]} with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
  # Debian starts the packaged etcd as a system service on 2379; Quire runs its own.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
    as_root systemctl disable --now etcd || true
  fi
  # Likewise the packaged Prometheus (and its node exporter) on 9090/9100 and HAProxy: the tests start their own.
  for unit in prometheus prometheus-node-exporter haproxy; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$unit" 2>/dev/null; then
      as_root systemctl disable --now "$unit" || true
    fi
  done
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"setup: Python 3.11 or newer is needed, this is {sys.version.split()[0]}")
PY

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed"
# The three distributions, editable, with every extra, and the development tools,
# all at the exact versions of requirements/lock.txt (`make lock`).
inputs=(requirements/lock.txt requirements/dev.in api/python/pyproject.toml clients/python/pyproject.toml services/pyproject.toml)
stale=false
[ -f "$stamp" ] || stale=true
for input in "${inputs[@]}"; do [ "$input" -nt "$stamp" ] && stale=true; done
if [ "$stale" = true ]; then
  echo "setup: installing Quire and its development tools into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # Earlier names of this checkout's own distributions (one editable `quire` at the root before
  # the split; quire-api, quire-client and quire before the quire-ledger names): uninstalled, so
  # that two distributions never claim the same packages.
  for old in quire quire-api quire-client; do
    if "$VENV/bin/python" -m pip show "$old" 2>/dev/null | grep -q "^Editable project location: $PWD"; then
      "$VENV/bin/python" -m pip uninstall -q -y "$old"
    fi
  done
  "$VENV/bin/python" -m pip install -q -c requirements/lock.txt \
    -e ./api/python -e './clients/python[testing,certs]' -e './services[telemetry]' -r requirements/dev.in
  touch "$stamp"
fi
# The generated API's earlier import name, `quire`, for tools written against it (this
# environment only; no distribution ships it: api/python/compat/quire/__init__.py).
site_packages=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/api/python/compat" > "$site_packages/quire-import-compat.pth"

if [ ! -x .tools/node_modules/.bin/buf ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "setup: installing buf into .tools/"
    mkdir -p .tools
    npm install --prefix .tools --silent --no-audit --no-fund @bufbuild/buf@1.75.0 >/dev/null
  else
    echo "setup: npm not found; skipping buf (proto lint will be skipped)" >&2
  fi
fi
echo "setup: done"
