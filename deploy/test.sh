#!/usr/bin/env bash
# Builds gangrun twice (Release, and with AddressSanitizer + UndefinedBehaviorSanitizer) and
# runs every test in both builds. Installs the Debian packages first if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
jobs=${JOBS:-2}
for variant in release asan; do
  dir=build-test-$variant
  extra=()
  [[ $variant == asan ]] && extra=(-DGANGRUN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  echo "== $variant build =="
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "== $variant tests =="
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" --timeout 300)
done
