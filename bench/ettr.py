#!/usr/bin/python3
"""The effective training time ratio (ETTR) of one simulated training job under three recovery
policies, measured by gangrun's ledger and by the workers' own clocks.

    bench/ettr.py GANGRUN [--runs N] [--seed S] [--steps N] [--mtbf S] [--out DIR]

The job: two launchers of two workers each on 127.0.0.1 (the first one hosts the scheduler),
each worker an unchanged-looking torch gloo script (Debian's /usr/bin/python3 and torch): it
imports torch, waits --startup seconds more (the rest of a real job's start: data, model),
joins the process group, loads the last checkpoint (a file rank 0 writes with torch.save every
--every steps) and steps --steps times; a step is --step_s seconds of "compute", an all_reduce
(so that one stopped rank holds every other, as in a real job) and an optimizer step. gangrun's
hook sees the optimizer steps and the torch.save with no code. Each worker appends
"generation rank step time" to a side file after every step: the ground truth.

Failures come at exponentially distributed times (mean --mtbf seconds of wall time, the same
seeded schedule for every policy) in the mix Meta and others report, scaled to minutes:
40% a node lost (a non-scheduler launcher and its workers SIGKILLed, as a host that dies; a
replacement launcher starts --replace_after seconds later, as a cluster re-provisions one),
40% a worker crash (SIGKILL), 20% a hang (SIGSTOP: the others wait in all_reduce until gloo's
--collective_timeout). The policies, every one with --max_restarts 20 and --grace_period 3:

  (a) torchrun-like: restart everything, no spare, failures seen by a 5 s poll (a wrapper
      exits a uniformly drawn 0-5 s after its worker), a 15 s node timeout, no backoff, no
      hang detection (the collective timeout ends a hang);
  (b) gangrun's defaults (node timeout 5 s, backoff 1 s, no hang detection);
  (c) gangrun with a hot spare (a third launcher), --exclude_after 2, --hang_timeout 3 and
      --hang_timeout_initial 12 (--stack_timeout 2).

For each run it prints the ledger's ETTR and phases (the job_finished event of --event_log)
and the ground truth's ETTR: the time between consecutive steps of rank 0 within a generation,
counted only for each step's last execution (a step done again after a restart was lost
work), over the wall time from the first launcher's start to its exit. The last line is JSON.
A benchmark, not a test.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist

truth_dir, ckpt, steps, step_s, every, startup, timeout = sys.argv[1:8]
steps, every = int(steps), int(every)
gen, rank = os.environ["GANGRUN_GENERATION"], int(os.environ["RANK"])
with open(os.path.join(truth_dir, "pid.%s.%d" % (gen, rank)), "w") as f:
    f.write(str(os.getpid()))
time.sleep(float(startup))
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(timeout)))
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = torch.load(ckpt)["step"] if os.path.exists(ckpt) else 0
truth = open(os.path.join(truth_dir, "steps.%s.%d" % (gen, rank)), "a", buffering=1)
for step in range(start + 1, steps + 1):
    time.sleep(float(step_s))
    dist.all_reduce(torch.ones(1))
    opt.step()
    truth.write("%s %d %d %.6f\n" % (gen, rank, step, time.time()))
    if rank == 0 and step % every == 0:
        torch.save({"step": step}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
'''

# Policy (a)'s failure poll: runs the worker, then exits with its code a uniformly drawn 0 to
# POLL seconds later (torchrun's agent sees a worker's end at its next poll).
POLL_WRAPPER = r'''
import os, random, subprocess, sys, time
child = subprocess.Popen(sys.argv[2:])
code = child.wait()
time.sleep(random.uniform(0, float(sys.argv[1])))
sys.exit(code if code >= 0 else 128 - code)
'''

POLICIES = {
    "a": {"name": "torchrun-like", "spare": False, "poll": 5.0,
          "opts": ["--node_timeout", "15", "--restart_backoff", "0"]},
    "b": {"name": "gangrun defaults", "spare": False, "poll": 0.0, "opts": []},
    "c": {"name": "gangrun, hot spare + exclusion + hang detection", "spare": True, "poll": 0.0,
          "opts": ["--spare_nodes", "1", "--exclude_after", "2", "--hang_timeout", "3",
                   "--hang_timeout_initial", "12", "--stack_timeout", "2"]},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def children_of(pid):
    """Every descendant of `pid`, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents.setdefault(int(fields[1]), []).append(int(entry))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def state_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def running_workers(truth):
    """{rank: pid} of the newest generation's workers that are alive and not stopped."""
    gens = {}
    for name in os.listdir(truth):
        if name.startswith("pid."):
            _, gen, rank = name.split(".")
            try:
                with open(os.path.join(truth, name)) as f:
                    gens.setdefault(int(gen), {})[int(rank)] = int(f.read())
            except (OSError, ValueError):
                pass
    if not gens:
        return {}
    newest = gens[max(gens)]
    return {r: p for r, p in newest.items() if state_of(p) in ("R", "S", "D")}


def launcher_of(pid, launchers):
    while pid > 1:
        if pid in launchers:
            return pid
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return None
    return None


def schedule(seed, mtbf, horizon):
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(1.0 / mtbf)
        if t > horizon:
            return out
        kind = rng.choices(["node", "crash", "hang"], weights=[40, 40, 20])[0]
        out.append((t, kind, rng.random()))


def ground_truth(truth):
    """rank 0's steps: the productive seconds (each step's last execution) and the lost."""
    runs = []  # (gen, step, time)
    for name in os.listdir(truth):
        if name.startswith("steps.") and name.endswith(".0"):
            with open(os.path.join(truth, name)) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 4:
                        runs.append((int(parts[0]), int(parts[2]), float(parts[3])))
    runs.sort(key=lambda r: (r[0], r[2]))
    last_gen_of_step = {}
    for gen, step, _ in runs:
        last_gen_of_step[step] = gen
    productive = lost = 0.0
    for prev, cur in zip(runs, runs[1:]):
        if prev[0] != cur[0]:
            continue  # a generation's first step: its start, not training
        interval = cur[2] - prev[2]
        if last_gen_of_step[cur[1]] == cur[0]:
            productive += interval
        else:
            lost += interval
    return productive, lost, (max(s for _, s, _ in runs) if runs else 0)


def run_once(args, policy_key, work, run):
    policy = POLICIES[policy_key]
    truth = os.path.join(work, "truth")
    os.makedirs(truth)
    script = os.path.join(work, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    wrapper = os.path.join(work, "poll.py")
    with open(wrapper, "w") as f:
        f.write(POLL_WRAPPER)
    ckpt = os.path.join(work, "checkpoint.pt")
    events = os.path.join(work, "events.jsonl")
    port = free_port()
    worker = ["/usr/bin/python3", script, truth, ckpt, str(args.steps), str(args.step_s),
              str(args.every), str(args.startup), str(args.collective_timeout)]
    if policy["poll"] > 0:
        # -S: no site, so gangrun's hook (a sitecustomize) stays out of the wrapper and in the
        # worker it runs.
        worker = ["/usr/bin/python3", "-S", wrapper, str(policy["poll"])] + worker
    base = [args.gangrun, "--worker_num", "4", "--local_worker_num", "2", "--master_port", port,
            "--max_restarts", "20", "--grace_period", "3", "--cluster_time_out", "600"]
    base += policy["opts"]
    logs = []

    def launch(extra=()):
        log = open(os.path.join(work, "launcher%d.log" % len(logs)), "w")
        logs.append(log)
        return subprocess.Popen(base + list(extra) + worker, stdout=log, stderr=log, cwd=work)

    start = time.time()
    master = launch(["--event_log", events])
    # The first launcher hosts the scheduler (the others would race it for the port): the rest
    # start once it waits for them. Failures never kill it.
    with open(os.path.join(work, "launcher0.log")) as first:
        waited = ""
        while "waiting for" not in waited:
            if master.poll() is not None or time.time() - start > 30:
                raise SystemExit("the first launcher did not start its scheduler")
            waited += first.read()
            time.sleep(0.01)
    launchers = {master.pid: master}
    others = [launch()]
    if policy["spare"]:
        others.append(launch())
    for p in others:
        launchers[p.pid] = p
    pending = schedule(args.seed + run, args.mtbf, args.horizon)
    replacements = []  # times at which a replacement launcher starts
    injected = []
    killed = set()
    while master.poll() is None:
        now = time.time() - start
        if now > args.limit:
            # It never ends (a hang nothing detects): every launcher and worker goes, and the
            # run is reported as such (ETTR 0).
            for pid in list(launchers):
                for child in children_of(pid) + [pid]:
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            master.wait()
            break
        for due in [r for r in replacements if r <= now]:
            replacements.remove(due)
            p = launch()
            launchers[p.pid] = p
        if pending and pending[0][0] <= now:
            at, kind, pick = pending[0]
            workers = running_workers(truth)
            if kind == "node":
                hosts = sorted({launcher_of(pid, launchers) for pid in workers.values()} -
                               {None, master.pid})
                if hosts:
                    victim = hosts[int(pick * len(hosts))]
                    killed.add(victim)
                    for pid in children_of(victim) + [victim]:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    replacements.append(now + args.replace_after)
                    injected.append((round(now, 1), kind))
                    pending.pop(0)
            elif workers:
                rank = sorted(workers)[int(pick * len(workers))]
                os.kill(workers[rank], signal.SIGKILL if kind == "crash" else signal.SIGSTOP)
                injected.append((round(now, 1), kind))
                pending.pop(0)
        for pid, p in list(launchers.items()):
            if p.poll() is not None and pid != master.pid:
                del launchers[pid]
                if pid not in killed:
                    # Excluded (exit 6): its host goes back to the pool, a new one comes.
                    replacements.append(now + args.replace_after)
        time.sleep(0.05)
    wall = time.time() - start
    code = master.returncode if wall <= args.limit else "did not end within --limit"
    for p in launchers.values():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    for log in logs:
        log.close()
    ledger = {}
    with open(events) as f:
        for line in f if code != "did not end within --limit" else []:
            event = json.loads(line)
            if event.get("event") == "job_finished":
                ledger = event.get("ledger", {})
    productive, lost, last_step = ground_truth(truth)
    return {"policy": policy_key, "code": code, "wall_s": round(wall, 2),
            "ledger_wall_s": round(ledger.get("wall_seconds", 0), 2),
            "ettr_ledger": round(ledger.get("ettr", 0), 4),
            "ettr_truth": round(productive / wall, 4),
            "lost_work_ledger_s": round(ledger.get("lost_work_seconds", 0), 2),
            "lost_work_truth_s": round(lost, 2), "last_step": last_step,
            "phases": {k: round(v, 2) for k, v in ledger.get("seconds", {}).items()},
            "failures": injected}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gangrun")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--policies", default="abc")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--step_s", type=float, default=0.1)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--startup", type=float, default=2.0)
    parser.add_argument("--mtbf", type=float, default=25.0)
    parser.add_argument("--horizon", type=float, default=80.0,
                        help="no failure is injected after this many seconds")
    parser.add_argument("--replace_after", type=float, default=10.0)
    parser.add_argument("--collective_timeout", type=float, default=30.0)
    parser.add_argument("--limit", type=float, default=600.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    results = []
    for run in range(args.runs):
        for key in args.policies:
            work = tempfile.mkdtemp(prefix="gangrun-ettr-")
            try:
                result = run_once(args, key, work, run)
            finally:
                if args.out:
                    shutil.copytree(work, os.path.join(args.out, "%s%d" % (key, run)))
                shutil.rmtree(work, ignore_errors=True)
            result["run"] = run
            results.append(result)
            print(json.dumps(result), flush=True)
    summary = {}
    for key in args.policies:
        mine = [r for r in results if r["policy"] == key]
        summary[key] = {
            "name": POLICIES[key]["name"],
            "ettr_ledger": [r["ettr_ledger"] for r in mine],
            "ettr_truth": [r["ettr_truth"] for r in mine],
            "lost_s": [round(r["wall_s"] * (1 - r["ettr_truth"]), 1) for r in mine]}
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
