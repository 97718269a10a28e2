#!/usr/bin/env bash
# Installs the Debian packages sojourn needs (peers under test, load tools, the
# browser for report tests, iproute2 for the testbed). Idempotent: does nothing
# when everything is present. Needs root for apt-get; without it, names what is missing.
set -euo pipefail

# command -> Debian package
declare -A NEED=(
  [ip]=iproute2 [tc]=iproute2 [curl]=curl [ss]=iproute2 [ps]=procps
  [nginx]=nginx-light [apache2]=apache2 [lighttpd]=lighttpd [h2o]=h2o
  [wrk]=wrk [h2load]=nghttp2-client [httperf]=httperf [ab]=apache2-utils
  [iperf3]=iperf3 [chromium]=chromium [perf]=linux-perf
)
missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("${NEED[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}; run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts some daemons on install where it can; our harness starts its own.
for svc in nginx apache2 lighttpd h2o; do
  service "$svc" stop >/dev/null 2>&1 || true
done
