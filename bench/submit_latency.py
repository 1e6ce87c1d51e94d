#!/usr/bin/env python3
"""Daemon mode vs a fresh one-shot launch: the time from the command to the workers running.

Starts `gangrun scheduler` and AGENTS `gangrun agent`s on 127.0.0.1 (once), then alternates
  submit:   gangrun submit --master ... --worker_num N <task>
  one-shot: gangrun --worker_num N --local_worker_num N <task>
where <task> appends its start time (ns, CLOCK_REALTIME) to a file. Reported per mode:
median time from starting the command to the first and to the last worker's start, and the
median wall time of the whole command. A benchmark, not a test: it reports, never asserts.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, stamp_file, env):
    if os.path.exists(stamp_file):
        os.unlink(stamp_file)
    t0 = time.time_ns()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.time_ns() - t0
    with open(stamp_file) as f:
        starts = sorted(int(line) for line in f if line.strip())
    return (starts[0] - t0) / 1e6, (starts[-1] - t0) / 1e6, wall / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gangrun", default="build/bin/gangrun")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    gangrun = os.path.abspath(args.gangrun)
    work = tempfile.mkdtemp(prefix="gangrun-submit-bench-")
    stamp = os.path.join(work, "starts")
    task = ["/bin/sh", "-c", f"date +%s%N >> {stamp}"]
    env = dict(os.environ, GANGRUN_LOG_LEVEL="warn")
    master = f"127.0.0.1:{free_port()}"
    slots = -(-args.workers // args.agents)
    daemons = [subprocess.Popen([gangrun, "scheduler", "--listen", master], env=env, cwd=work,
                                stderr=subprocess.DEVNULL)]
    for i in range(args.agents):
        daemons.append(subprocess.Popen(
            [gangrun, "agent", "--master", master, "--slots", str(slots), "--name", f"agent{i}"],
            env=env, cwd=work, stderr=subprocess.DEVNULL))
    submit = [gangrun, "submit", "--master", master, "--worker_num", str(args.workers),
              "--cluster_time_out", "30", *task]
    oneshot = [gangrun, "--worker_num", str(args.workers), "--local_worker_num",
               str(args.workers), "--master_port", str(free_port()), "--log_dir", work, *task]
    results = {"submit": [], "one-shot": []}
    try:
        run(submit, stamp, env)  # warm-up: the agents have registered once this returns
        for _ in range(args.repeat):
            results["submit"].append(run(submit, stamp, env))
            results["one-shot"].append(run(oneshot, stamp, env))
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            d.wait()
    print(f"{args.workers} workers, {args.agents} agents, {args.repeat} runs each (medians, ms)")
    print(f"{'mode':10} {'first worker':>13} {'last worker':>12} {'whole command':>14}")
    for mode, rows in results.items():
        first, last, wall = (statistics.median(col) for col in zip(*rows))
        print(f"{mode:10} {first:13.1f} {last:12.1f} {wall:14.1f}")


if __name__ == "__main__":
    sys.exit(main())
