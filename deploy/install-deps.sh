#!/usr/bin/env bash
# Installs everything gangrun needs to build and test on Debian 12, as root.
#   deploy/install-deps.sh          build + test dependencies (every tool a test uses: a test
#                                   fails, never skips, when one is missing)
#   deploy/install-deps.sh --build  build dependencies only (the demo, the container image)
#   deploy/install-deps.sh --bench  build + test + Open MPI, for bench/launch_overhead.sh
set -euo pipefail

packages=(
  g++ cmake make pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost1.81-dev libspdlog-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev libssl-dev libre2-dev python3
)
tests=(
  python3-yaml procps iproute2 iptables openssl elfutils util-linux git clang-format
  python3-torch dpkg-dev python3-prometheus-client chromium etcd-server etcd-client ninja-build
  lintian bash-completion systemd binutils slurm-wlm munge
)
case "${1:-}" in
  "") packages+=("${tests[@]}") ;;
  --build) ;;
  --bench) packages+=("${tests[@]}" openmpi-bin libopenmpi-dev time) ;;
  *) echo "install-deps: unknown option $1 (--build or --bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: run as root to install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
