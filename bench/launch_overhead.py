#!/usr/bin/env python3
"""Launch overhead: gangrun vs mpirun for N workers of /bin/true, measured side by side.

Runs the two launchers alternately (so machine noise hits both alike), REPEAT times per size,
and prints median / p90 wall time per job, the ratio gangrun/mpirun, and the gangrun
launcher's own peak resident memory (getrusage RUSAGE_SELF, logged by gangrun at debug level).
The last line is JSON. A benchmark, not a test: nothing is asserted.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None, cwd=None):
    """Returns (seconds, stderr), or (None, "") when the command hung for 30 s."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        print(f"  {os.path.basename(cmd[0])} hung for 30 s; sample dropped", file=sys.stderr)
        return None, ""
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed with {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, proc.stderr


def summary(samples):
    samples = sorted(samples)
    return {"median_ms": round(statistics.median(samples) * 1e3, 2),
            "p90_ms": round(samples[int(len(samples) * 0.9) - 1] * 1e3, 2),
            "min_ms": round(samples[0] * 1e3, 2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gangrun", required=True)
    parser.add_argument("--sizes", default="4,32")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    args.gangrun = os.path.abspath(args.gangrun)
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("mpirun not found: run deploy/install-deps.sh --bench")
    workdir = tempfile.mkdtemp(prefix="gangrun-bench-")
    env = dict(os.environ, GANGRUN_LOG_LEVEL="debug", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    results = {}
    for n in [int(s) for s in args.sizes.split(",")]:
        gang = [args.gangrun, f"--worker_num={n}", f"--local_worker_num={n}",
                f"--log_dir={workdir}/logs", "/bin/true"]
        mpi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), "/bin/true"]
        run(gang, env, workdir)  # warm the page cache for both
        run(mpi, env, workdir)
        g_times, m_times, rss = [], [], []
        hung = {"gangrun": 0, "mpirun": 0}
        for _ in range(args.repeat):
            t, err = run(gang, env, workdir)
            if t is None:
                hung["gangrun"] += 1
            else:
                g_times.append(t)
            m = re.search(r"peak resident memory (\d+) KiB", err)
            if m:
                rss.append(int(m.group(1)))
            t, _ = run(mpi, env, workdir)
            if t is None:
                hung["mpirun"] += 1
            else:
                m_times.append(t)
        g, m = summary(g_times), summary(m_times)
        results[n] = {"gangrun": g, "mpirun": m,
                      "ratio_median": round(g["median_ms"] / m["median_ms"], 3),
                      "gangrun_peak_rss_kib": max(rss) if rss else None,
                      "hung_runs": hung}
        print(f"N={n:3d}  gangrun median {g['median_ms']:8.2f} ms (p90 {g['p90_ms']:.2f})  "
              f"mpirun median {m['median_ms']:8.2f} ms (p90 {m['p90_ms']:.2f})  "
              f"ratio {results[n]['ratio_median']:.3f}  "
              f"gangrun peak RSS {results[n]['gangrun_peak_rss_kib']} KiB  hung {hung}")
    shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
