#!/usr/bin/env python3
"""Launch overhead: gangrun vs the floor and mpirun for N workers of /bin/true, side by side.

The floor (bench/launch_floor.cc, built as build/bin/launch-floor) posix_spawns N copies of
/bin/true and waits for them: no coordination, no logs, no supervision. Runs the commands in
turn (so machine noise hits all alike), REPEAT times per size, and prints median / p90 wall
time per job, the ratios gangrun/floor and gangrun/mpirun, and the gangrun launcher's own peak
resident memory (VmHWM, logged by gangrun at debug level). mpirun is left out when Open MPI is
not installed (deploy/install-deps.sh --bench installs it). --baseline OTHER_GANGRUN runs a
second gangrun build (an earlier commit's) in the same rotation, for before/after figures from
one run. The last line is JSON. A benchmark, not a test: nothing is asserted.
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
    parser.add_argument("--floor", help="the floor program (default: beside --gangrun)")
    parser.add_argument("--baseline", help="another gangrun binary, run in the same rotation")
    args = parser.parse_args()
    args.gangrun = os.path.abspath(args.gangrun)
    floor = os.path.abspath(args.floor or os.path.join(os.path.dirname(args.gangrun),
                                                       "launch-floor"))
    if not os.access(floor, os.X_OK):
        sys.exit(f"{floor} not found: build the launch-floor target")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("mpirun not found (deploy/install-deps.sh --bench installs it): left out",
              file=sys.stderr)
    workdir = tempfile.mkdtemp(prefix="gangrun-bench-")
    # Each program runs from a fresh copy of its own, all made the same way: the same gangrun
    # file took 1.3-1.9 ms more per launch run from the build directory, as the linker wrote
    # it, than a copy of it made with cp (bench/README.md, stop 39), which would favour
    # whichever binary had been copied. Each copy keeps its name (the personality follows it).
    def fresh_copy(path, slot):
        os.makedirs(os.path.join(workdir, slot))
        return shutil.copy2(path, os.path.join(workdir, slot, os.path.basename(path)))

    args.gangrun = fresh_copy(args.gangrun, "gangrun")
    floor = fresh_copy(floor, "floor")
    if args.baseline:
        args.baseline = fresh_copy(os.path.abspath(args.baseline), "baseline")
    env = dict(os.environ, GANGRUN_LOG_LEVEL="debug", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    results = {}
    for n in [int(s) for s in args.sizes.split(",")]:
        gang = [args.gangrun, f"--worker_num={n}", f"--local_worker_num={n}",
                f"--log_dir={workdir}/logs", "/bin/true"]
        mpi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), "/bin/true"]
        base = [floor, str(n), "/bin/true"]
        before = ([os.path.abspath(args.baseline)] + gang[1:]) if args.baseline else None
        run(gang, env, workdir)  # warm the page cache for all
        run(base, env, workdir)
        if mpirun:
            run(mpi, env, workdir)
        if before:
            run(before, env, workdir)
        g_times, m_times, f_times, b_times, rss = [], [], [], [], []
        hung = {"gangrun": 0, "mpirun": 0, "floor": 0, "baseline": 0}

        def sample(name, cmd, times):
            """Runs `cmd` once into `times`, or counts it as hung; returns its stderr."""
            t, err = run(cmd, env, workdir)
            if t is None:
                hung[name] += 1
            else:
                times.append(t)
            return err

        for _ in range(args.repeat):
            err = sample("gangrun", gang, g_times)
            m = re.search(r"peak resident memory (\d+) KiB", err)
            if m:
                rss.append(int(m.group(1)))
            sample("floor", base, f_times)
            if before:
                sample("baseline", before, b_times)
            if mpirun:
                sample("mpirun", mpi, m_times)
        g, f = summary(g_times), summary(f_times)
        results[n] = {"gangrun": g, "floor": f,
                      "ratio_to_floor": round(g["median_ms"] / f["median_ms"], 3),
                      "gangrun_peak_rss_kib": max(rss) if rss else None,
                      "hung_runs": hung}
        line = (f"N={n:3d}  gangrun median {g['median_ms']:8.2f} ms (p90 {g['p90_ms']:.2f})  "
                f"floor median {f['median_ms']:7.2f} ms  ratio to floor "
                f"{results[n]['ratio_to_floor']:.2f}")
        if b_times:
            b = summary(b_times)
            results[n]["baseline"] = b
            results[n]["baseline_ratio_to_floor"] = round(b["median_ms"] / f["median_ms"], 3)
            line += (f"  baseline median {b['median_ms']:8.2f} ms (ratio to floor "
                     f"{results[n]['baseline_ratio_to_floor']:.2f})")
        if m_times:
            m = summary(m_times)
            results[n]["mpirun"] = m
            results[n]["ratio_median"] = round(g["median_ms"] / m["median_ms"], 3)
            line += (f"  mpirun median {m['median_ms']:8.2f} ms  ratio to mpirun "
                     f"{results[n]['ratio_median']:.3f}")
        print(line + f"  gangrun peak RSS {results[n]['gangrun_peak_rss_kib']} KiB  hung {hung}")
    shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
