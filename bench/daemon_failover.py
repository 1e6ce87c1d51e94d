#!/usr/bin/python3
"""Daemon failover on a store: the kill of the active daemon to the standby serving every job.

    bench/daemon_failover.py BUILD_DIR [--runs N] [--jobs J] [--steady S]

Starts one etcd member (bench/store_failover.py's), two daemons on it (one active, one
standing by) and two agents, then, per run, J jobs of 4 workers (2 per agent) whose workers
write a file named after their generation, rank and pid when they start and then wait for a
"go" file. Once every worker runs, the daemons idle for --steady seconds (the etcd member's
gRPC requests over that time give the daemons' requests per minute in steady state), then the
active daemon is killed with SIGKILL. The failover time is from the kill to the other daemon's
`status` showing every job running with all its workers; the workers restarted are the start
files written after the kill (0 when the jobs were adopted). A benchmark, not a test.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_failover import free_port, handled_total, start_etcd, wait_for  # noqa: E402


def status(gangrun, master):
    out = subprocess.run([gangrun, "status", "--master", master, "--json"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def every_job_running(answer, jobs):
    if not answer or answer.get("standby") or len(answer.get("jobs", [])) != jobs:
        return False
    for job in answer["jobs"]:
        workers = [w for n in job.get("nodes", []) for w in n.get("workers", [])]
        if len(workers) != 4 or any(w.get("state") != "WORKER_STATE_RUNNING" for w in workers):
            return False
    return True


def one_run(gangrun, work, masters, jobs, steady, metrics_url, daemons):
    marks = os.path.join(work, "marks")
    os.makedirs(marks)
    go = os.path.join(work, "go")
    worker = os.path.join(work, "worker.sh")
    with open(worker, "w") as f:
        f.write(f"#!/bin/sh\ntouch {marks}/g$GANGRUN_GENERATION.$GANGRUN_RUN_ID.$RANK.$$\n"
                f"while [ ! -e {go} ]; do sleep 0.01; done\n")
    os.chmod(worker, 0o755)
    submits = [subprocess.Popen([gangrun, "submit", "--master", ",".join(masters),
                                 "--worker_num", "4", "--local_worker_num", "2", worker],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
               for _ in range(jobs)]
    wait_for(lambda: len(os.listdir(marks)) == 4 * jobs, 60, "every job running")
    before = handled_total(metrics_url)
    time.sleep(steady)
    per_minute = (handled_total(metrics_url) - before - 1) * 60.0 / steady
    active = next(i for i, m in enumerate(masters) if not status(gangrun, m).get("standby"))
    starts = set(os.listdir(marks))
    killed_at = time.monotonic()
    daemons[active].send_signal(signal.SIGKILL)
    daemons[active].wait()
    other = masters[1 - active]
    wait_for(lambda: every_job_running(status(gangrun, other), jobs), 60, "the failover")
    failover = time.monotonic() - killed_at
    restarted = len(set(os.listdir(marks)) - starts)
    open(go, "w").close()
    codes = [p.wait(timeout=60) for p in submits]
    return failover, per_minute, restarted, codes, active


def start_daemon(gangrun, work, name, listen, url):
    log = open(os.path.join(work, f"{name}.log"), "w")
    return subprocess.Popen([gangrun, "scheduler", "--listen", listen, "--store", url],
                            stdout=log, stderr=subprocess.STDOUT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--steady", type=float, default=20.0)
    args = parser.parse_args()
    gangrun = os.path.join(os.path.abspath(args.build_dir), "bin", "gangrun")
    if not shutil.which("etcd"):
        sys.exit("daemon_failover: etcd is missing (apt-get install etcd-server)")
    root = tempfile.mkdtemp(prefix="gangrun-daemon-failover-")
    etcd, url, _, metrics_url = start_etcd(root)
    masters = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    daemons = [start_daemon(gangrun, root, f"daemon{i}", m, url) for i, m in enumerate(masters)]
    agents = [subprocess.Popen([gangrun, "agent", "--master", ",".join(masters), "--slots",
                                str(2 * args.jobs), "--name", f"agent-{i}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for i in range(2)]
    try:
        results = []
        for run in range(args.runs):
            work = os.path.join(root, f"run{run}")
            os.makedirs(work)
            wait_for(lambda: any(status(gangrun, m) and len(status(gangrun, m).get("agents", []))
                                 == 2 for m in masters), 60, "two agents registered")
            failover, per_minute, restarted, codes, killed = one_run(
                gangrun, work, masters, args.jobs, args.steady, metrics_url, daemons)
            results.append((failover, per_minute, restarted, codes))
            print(f"run {run}: daemon failover {failover:.2f} s, workers restarted {restarted}, "
                  f"steady state {per_minute:.1f} etcd requests/min, submits exit {codes}")
            daemons[killed] = start_daemon(gangrun, root, f"daemon{killed}-{run}",
                                           masters[killed], url)  # the next standby
        failovers = sorted(r[0] for r in results)
        print(json.dumps({"jobs": args.jobs, "failover_s": failovers,
                          "median_failover_s": failovers[len(failovers) // 2],
                          "workers_restarted": [r[2] for r in results],
                          "requests_per_minute": [round(r[1], 1) for r in results],
                          "submits_exit": [r[3] for r in results]}))
    finally:
        for p in agents + daemons:
            p.terminate()
        for p in agents + daemons:
            p.wait()
        etcd.terminate()
        etcd.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
