#!/usr/bin/env bash
# Everything the tests need, on a fresh Debian machine, then every test: the real servers the
# integration tests start (nats-server, OpenSSH's sshd, PostgreSQL, Chromium, systemd's tools, and the
# age CLI the secret tests check interoperability with) from
# Debian's packages, the Node packages, then `npm test`. `npm run test:all` runs it; CI (.ci/run)
# runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(nats-server openssh-server openssh-client git postgresql chromium systemd age)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# sshd refuses to start without its privilege-separation directory.
as_root mkdir -p /run/sshd

node --version
npm ci --no-audit --no-fund
npm test
