#!/usr/bin/env bash
# Installs the Debian packages if missing, builds gangrun and runs the demo job.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh --build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target gangrun
./examples/demo.sh build/bin
