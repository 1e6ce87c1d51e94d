#!/usr/bin/env bash
# Builds gangrun (Release) and compares its launch overhead with Open MPI's mpirun.
#   bench/launch_overhead.sh [--repeat N] [--sizes 4,32]
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh --bench
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target gangrun launch-floor
python3 bench/launch_overhead.py --gangrun build/bin/gangrun "$@"
