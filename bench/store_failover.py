#!/usr/bin/python3
"""One-shot failover with a store of record, and what the store costs in steady state.

    bench/store_failover.py BUILD_DIR [--node_timeout S] [--runs N] [--steady S]

Starts one etcd member (Debian's etcd-server) on free loopback ports, then, per run, three
launchers of an elastic job (--worker_num 4:6, 2 workers each) with --store. Each worker
writes a file when it starts and then waits for a "go" file. After generation 1 runs, the
launcher that coordinates (the store's scheduler key names its pid) is killed with SIGKILL;
the failover time is from the kill to every worker of the next generation having started
(four files of generation 2). Before the kill, the job idles for --steady seconds and the
etcd member's gRPC requests over that time (its /metrics, grpc_server_handled_total) give
the store's requests per job per minute in steady state. A benchmark, not a test: it prints
its figures and a JSON line.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def handled_total(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("grpc_server_handled_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    sys.exit(f"store_failover: {what} did not happen within {timeout} s")


def started(directory, generation):
    return [f for f in os.listdir(directory) if f.startswith(f"g{generation}.")]


def start_etcd(root):
    """One etcd member on free loopback ports: (process, store URL, etcdctl env, metrics URL)."""
    client, peer, metrics = free_port(), free_port(), free_port()
    etcd = subprocess.Popen(
        ["etcd", "--name", "b", "--data-dir", os.path.join(root, "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{client}",
         "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"b=http://127.0.0.1:{peer}",
         "--listen-metrics-urls", f"http://127.0.0.1:{metrics}", "--log-level", "error",
         "--logger", "zap"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, ETCDCTL_API="3")
    wait_for(lambda: subprocess.run(["etcdctl", "--endpoints", f"127.0.0.1:{client}",
                                     "endpoint", "health"], env=env,
                                    capture_output=True).returncode == 0, 30, "etcd")
    return etcd, f"etcd://127.0.0.1:{client}", env, f"http://127.0.0.1:{metrics}/metrics"


def one_run(gangrun, etcdctl_env, url, run_id, work, node_timeout, steady, metrics_url):
    marks = os.path.join(work, "marks")
    os.makedirs(marks)
    go = os.path.join(work, "go")
    worker = os.path.join(work, "worker.sh")
    with open(worker, "w") as f:
        f.write(f"#!/bin/sh\ntouch {marks}/g$GANGRUN_GENERATION.$RANK\n"
                f"while [ ! -e {go} ]; do sleep 0.01; done\n")
    os.chmod(worker, 0o755)
    launchers = []
    for i in range(3):
        log = open(os.path.join(work, f"launcher{i}.log"), "w")
        launchers.append(subprocess.Popen(
            [gangrun, "--store", url, "--run_id", run_id, "--worker_num", "4:6",
             "--local_worker_num", "2", "--node_timeout", str(node_timeout),
             "--master_port", str(free_port()), "--log_dir", os.path.join(work, f"logs{i}"),
             worker], stdout=log, stderr=subprocess.STDOUT, cwd=work))
    wait_for(lambda: len(started(marks, 1)) == 6, 30, "generation 1")
    before = handled_total(metrics_url)
    time.sleep(steady)  # the steady state being measured
    per_minute = (handled_total(metrics_url) - before - 1) * 60.0 / steady  # minus our scrape
    key = f"/gangrun/runs/{run_id}/scheduler"
    value = subprocess.run(["etcdctl", "--endpoints", url[len("etcd://"):], "get", key,
                            "--print-value-only"], env=etcdctl_env, capture_output=True,
                           text=True, check=True).stdout
    pid = json.loads(value)["pid"]
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(started(marks, 2)) == 4, 60, "generation 2")
    failover = time.monotonic() - killed_at
    open(go, "w").close()
    codes = [p.wait(timeout=60) for p in launchers]
    survivors_ok = sorted(codes) == [-signal.SIGKILL, 0, 0]
    return failover, per_minute, survivors_ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--node_timeout", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steady", type=float, default=20.0)
    args = parser.parse_args()
    gangrun = os.path.join(os.path.abspath(args.build_dir), "bin", "gangrun")
    if not shutil.which("etcd"):
        sys.exit("store_failover: etcd is missing (apt-get install etcd-server)")
    root = tempfile.mkdtemp(prefix="gangrun-failover-")
    etcd, url, env, metrics_url = start_etcd(root)
    try:
        results = []
        for run in range(args.runs):
            work = os.path.join(root, f"run{run}")
            os.makedirs(work)
            results.append(one_run(gangrun, env, url, f"bench-{run}", work, args.node_timeout,
                                   args.steady, metrics_url))
            print(f"run {run}: failover {results[-1][0]:.2f} s, steady state "
                  f"{results[-1][1]:.1f} etcd requests/min, survivors exit 0: {results[-1][2]}")
        failovers = sorted(r[0] for r in results)
        print(json.dumps({"node_timeout": args.node_timeout,
                          "failover_s": failovers,
                          "median_failover_s": failovers[len(failovers) // 2],
                          "requests_per_minute": [round(r[1], 1) for r in results],
                          "survivors_ok": all(r[2] for r in results)}))
    finally:
        etcd.terminate()
        etcd.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
