#!/usr/bin/env python3
"""The progress hook's cost: a 1-element gloo all_reduce 10,000 times and 1,000 optimizer
steps (SGD on a small model, no collective), each timed inside the workers, with the hook
(gangrun's default) and without it (--progress_hook False), run alternately ROUNDS times so
that machine noise hits both alike. Prints medians and the slowdown; the last line is JSON.
A benchmark, not a test: nothing is asserted (the goal is <= 5% slower).

usage: bench/hook_overhead.py GANGRUN [--rounds N] [--ranks N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

WORKER = r'''
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
for _ in range(100):  # warm up
    dist.all_reduce(t)
dist.barrier()
start = time.perf_counter()
for _ in range(10000):
    dist.all_reduce(t)
reduce_s = time.perf_counter() - start
model = torch.nn.Linear(16, 16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for p in model.parameters():
    p.grad = torch.zeros_like(p)
start = time.perf_counter()
for _ in range(1000):
    optimizer.step()
step_s = time.perf_counter() - start
if dist.get_rank() == 0:
    print("RESULT %f %f" % (reduce_s, step_s), flush=True)
dist.destroy_process_group()
'''


def run(gangrun, ranks, hook, directory):
    cmd = [gangrun, "--worker_num", str(ranks), "--local_worker_num", str(ranks),
           "--progress_hook", "True" if hook else "False", "/usr/bin/python3",
           os.path.join(directory, "worker.py")]
    proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"gangrun failed ({proc.returncode}): {proc.stderr[-2000:]}")
    for line in proc.stdout.splitlines():
        if "RESULT " in line:
            reduce_s, step_s = line.split("RESULT ", 1)[1].split()
            return float(reduce_s), float(step_s)
    sys.exit("no RESULT line in the output:\n" + proc.stdout[-2000:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gangrun")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    results = {True: [], False: []}
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "worker.py"), "w") as f:
            f.write(WORKER)
        for _ in range(args.rounds):
            for hook in (False, True):
                results[hook].append(run(args.gangrun, args.ranks, hook, directory))
    report = {"ranks": args.ranks, "rounds": args.rounds}
    for index, name, count in ((0, "all_reduce", 10000), (1, "optimizer_step", 1000)):
        without = statistics.median(r[index] for r in results[False])
        with_hook = statistics.median(r[index] for r in results[True])
        report[name] = {"without_us": round(without / count * 1e6, 2),
                        "with_us": round(with_hook / count * 1e6, 2),
                        "slowdown_percent": round((with_hook / without - 1) * 100, 1)}
        print(f"{name:15s} x{count}: without the hook {without * 1e3:8.1f} ms "
              f"({without / count * 1e6:.2f} us each), with it {with_hook * 1e3:8.1f} ms "
              f"({with_hook / count * 1e6:.2f} us each): {(with_hook / without - 1) * 100:+.1f}%")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
