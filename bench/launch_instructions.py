#!/usr/bin/env python3
"""Instructions a launch executes: gangrun's launcher and keeper for N workers of /bin/true.

Wall time to launch depends on how dear the machine makes a page fault or a process (a ratio
to the floor differs by 1.2x between two VMs of this project, bench/README.md); the number of
instructions gangrun itself executes does not. This runs each launch under valgrind's callgrind
(valgrind follows the keeper's fork, not the workers' exec) and prints the instructions of the
launcher and of the keeper, per size, and per worker between the smallest and the largest size.
--baseline OTHER_GANGRUN prints an earlier build beside. The keeper's count includes what the
launcher executed before forking it. The last line is JSON. A benchmark: nothing is asserted.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def instructions(gangrun, workers, scratch):
    """(launcher, keeper) instructions of one launch of `workers` copies of /bin/true."""
    out_dir = tempfile.mkdtemp(dir=scratch)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/cg.%p", gangrun,
           f"--worker_num={workers}", f"--local_worker_num={workers}",
           f"--log_dir={scratch}/logs", "/bin/true"]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=300)
    if proc.returncode != 0:
        sys.exit(f"{gangrun} failed under valgrind ({proc.returncode}): {proc.stderr[-2000:]}")
    counts = {}
    for pid, refs in re.findall(r"==(\d+)== I\s+refs:\s+([\d,]+)", proc.stderr):
        counts[int(pid)] = int(refs.replace(",", ""))
    if len(counts) != 2:
        sys.exit(f"expected a launcher and a keeper under valgrind, saw {len(counts)} processes")
    launcher, keeper = sorted(counts)  # the keeper is forked after the launcher
    return counts[launcher], counts[keeper]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gangrun", required=True)
    parser.add_argument("--baseline", help="another gangrun binary, counted the same way")
    parser.add_argument("--sizes", default="1,4,32")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("launch_instructions: valgrind is not installed (apt-get install valgrind)")
    sizes = [int(s) for s in args.sizes.split(",")]
    binaries = {"gangrun": args.gangrun}
    if args.baseline:
        binaries["baseline"] = args.baseline
    scratch = tempfile.mkdtemp(prefix="gangrun-instructions-")
    report = {}
    try:
        for name, binary in binaries.items():
            report[name] = {}
            for n in sizes:
                launcher, keeper = instructions(os.path.abspath(binary), n, scratch)
                report[name][n] = {"launcher": launcher, "keeper": keeper}
                print(f"{name:8s} N={n:3d}  launcher {launcher / 1e6:7.2f} M  "
                      f"keeper {keeper / 1e6:6.2f} M  together {(launcher + keeper) / 1e6:7.2f} M")
            if len(sizes) > 1:
                lo, hi = min(sizes), max(sizes)
                per = {role: (report[name][hi][role] - report[name][lo][role]) / (hi - lo)
                       for role in ("launcher", "keeper")}
                report[name]["per_worker"] = per
                print(f"{name:8s} per worker (N={lo}..{hi}): launcher {per['launcher'] / 1e3:.0f} k, "
                      f"keeper {per['keeper'] / 1e3:.0f} k")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
