#!/usr/bin/env bash
# Builds gangrun three times (Release; AddressSanitizer + UndefinedBehaviorSanitizer;
# ThreadSanitizer) and runs every test in each build. Installs the Debian packages first if
# they are missing. VARIANTS="release asan tsan" picks some of them.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
jobs=${JOBS:-2}
for variant in ${VARIANTS:-release asan tsan}; do
  dir=build-test-$variant
  extra=()
  case $variant in
    # Every product header compiled alone once, in this build (tests/CMakeLists.txt).
    release) extra=(-DGANGRUN_CHECK_HEADERS=ON) ;;
    # Line tables only (-g1): sanitizer reports keep file:line, the build takes less time.
    # AddressSanitizer with UndefinedBehaviorSanitizer at -O1 (as ASan's own documentation
    # suggests): the scheduler's unit compiles in 111 s instead of 170 s at -O2, and the
    # tests, which wait on processes far more than they compute, barely notice.
    asan) extra=(-DGANGRUN_SANITIZE=ON -DGANGRUN_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG") ;;
    tsan) extra=(-DGANGRUN_TSAN=ON -DGANGRUN_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG") ;;
    *) echo "unknown variant: $variant (release, asan or tsan)" >&2; exit 2 ;;
  esac
  echo "== $variant build =="
  # One unity unit per target, built by Ninja: each target's headers are compiled once, and
  # Ninja compiles a target's unit while the libraries it links are still being built. A
  # clean Release build on 2 cores: 600 s one file per unit, 333 s in units of 8 files
  # (Make), 246 s one unit per target (Ninja). A unity unit hides a file that misses an
  # include: the README's build (deploy/demo.sh, which CI runs first) compiles one file per
  # unit, and the Release build here compiles every header alone.
  # A directory an earlier version of this script made with Make cannot switch generators.
  if [[ -f $dir/CMakeCache.txt ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' \
    "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 "${extra[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "== $variant tests =="
  # Debian's gRPC, Abseil, protobuf and OpenSSL are not built with ThreadSanitizer: the
  # suppressions cover frames inside them only (tests/tsan.supp says why); OpenSSL's
  # per-thread error state of a thread that exits with the process is not a leak
  # (tests/lsan.supp says why).
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 \
    LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp:print_suppressions=0" \
    TSAN_OPTIONS="suppressions=$PWD/../tests/tsan.supp" \
    ctest --output-on-failure -j"$jobs" --timeout 300)
done
