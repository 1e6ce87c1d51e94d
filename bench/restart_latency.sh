#!/usr/bin/env bash
# Restart latency on one host: a job of N tiny workers whose rank 1 fails in generation 1;
# gangrun restarts it after --restart_backoff and reports, from the scheduler, the time from
# hearing of the failure to every worker of generation 2 running. Prints one line per run and
# the median. A benchmark, not a test.
#   bench/restart_latency.sh [N=8] [RUNS=20] [BACKOFF=0.05]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-8}; runs=${2:-20}; backoff=${3:-0.05}
bin=${GANGRUN:-build/bin/gangrun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/worker.sh" <<'W'
#!/bin/sh
[ "$GANGRUN_GENERATION" = 1 ] && [ "$RANK" = 1 ] && exit 3
[ "$GANGRUN_GENERATION" = 1 ] && exec sleep 60
exit 0
W
chmod +x "$work/worker.sh"
results=()
for i in $(seq "$runs"); do
  ms=$(cd "$work" && "$OLDPWD/$bin" --worker_num="$n" --local_worker_num="$n" --max_restarts=1 \
        --restart_backoff="$backoff" --grace_period=5 ./worker.sh 2>&1 >/dev/null |
       sed -n 's/.*running on every node \([0-9]*\) ms after the failure.*/\1/p')
  echo "run $i: ${ms} ms (backoff ${backoff} s)"
  results+=("$ms")
done
printf '%s\n' "${results[@]}" | sort -n | awk -v b="$backoff" '{a[NR]=$1} END {
  printf "{\"workers\": %d, \"backoff_ms\": %d, \"median_ms\": %d, \"max_ms\": %d}\n", '"$n"', b*1000, a[int((NR+1)/2)], a[NR]}'
