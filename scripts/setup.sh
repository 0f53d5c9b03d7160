#!/usr/bin/env bash
# Installs what demuxlab needs on a Debian 12 machine and starts the Docker engine. Idempotent: every step
# checks before it acts, so `make setup` is cheap on a machine that already has everything.
#
#   scripts/setup.sh            system packages + Docker engine + Python virtualenv
#   SKIP_DOCKER=1 scripts/setup.sh   everything but the Docker engine
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- system packages -----------------------------------------------------------------------------------
# liburing-dev: the io_uring notifier/pattern (static liburing.a); docker.io: the docker launcher and images;
# postgresql-15: the embedded database; iproute2: network namespaces in the multi-host tests.
# debootstrap, openssh-client: the test cluster (`make testbed`: a Debian rootfs, hosts reached over SSH).
# chromium: the dashboard's browser tests (Playwright drives /usr/bin/chromium; never `playwright install`).
# libuv1-dev, strace: the peer benchmark (bench/peers/peer_servers.py: a libuv echo server, system calls counted).
# slurm-client, munge: the slurm profile's login-node side (sbatch, sacct, …) and the Slurm testbed's munged.
packages=(build-essential liburing-dev docker.io postgresql-15 iproute2 procps util-linux debootstrap openssh-client chromium
          libuv1-dev strace slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Docker engine ---------------------------------------------------------------------------------------
# No systemd here: start dockerd ourselves when the socket does not answer.
if [ "${SKIP_DOCKER:-0}" != 1 ] && ! docker info >/dev/null 2>&1; then
  log "starting the Docker engine (log: /var/log/demuxlab-dockerd.log)"
  as_root sh -c 'nohup dockerd >/var/log/demuxlab-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/demuxlab-dockerd.log"; exit 1; }
fi

# --- Python virtualenv -----------------------------------------------------------------------------------
# Reinstall only when pyproject.toml changed (the stamp holds its hash).
py=${PYTHON:-python3}
[ -x .venv/bin/python ] || { log "creating .venv"; "$py" -m venv .venv; }
stamp=.venv/.demuxlab-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing the demuxlab package into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi
log "ready: .venv/bin/demuxlab"
