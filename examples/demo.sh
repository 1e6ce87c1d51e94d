#!/usr/bin/env bash
# The demo job: 4 workers on this host, each printing its rank; the console shows every
# rank's output with a prefix, and the logs land in ./demo_logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/bin}
cd "$here/.."
echo "== gangrun: 4 workers =="
"$bin/gangrun" --worker_num=4 --local_worker_num=4 --log_dir=demo_logs examples/hello_rank.py
echo "== the plan of the same job (--dry_run), rank 0 only =="
"$bin/gangrun" --worker_num=4 --local_worker_num=4 --log_dir=demo_logs --dry_run=True \
  examples/hello_rank.py | sed -n '/^rank 0/,/^rank 1/p' | head -n -1
echo "== a failing job: rank 2 exits 3, the others are stopped =="
set +e
"$bin/gangrun" --worker_num=4 --local_worker_num=4 --log_dir=demo_logs --grace_period=2 \
  sh -c 'if [ "$RANK" = 2 ]; then echo "rank 2 gives up"; exit 3; fi; exec sleep 60'
echo "gangrun exited with $? (the failing rank's code)"
