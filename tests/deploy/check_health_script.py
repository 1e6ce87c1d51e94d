#!/usr/bin/python3
"""deploy/health/gangrun-health-check: healthy here, and each check fails with one line.

Runs the script with a fake nvidia-smi on PATH where a GPU is needed; touches nothing outside
a temporary directory. Usage: check_health_script.py SCRIPT
"""

import os
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
failures = []


def run(env_extra, path_dirs=()):
    env = {"PATH": ":".join(list(path_dirs) + ["/usr/bin", "/bin"])}
    env.update(env_extra)
    done = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    lines = done.stdout.strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


def expect(name, result, code, text):
    got_code, last = result
    if got_code != code or text not in last:
        failures.append(f"{name}: exit {got_code}, last line {last!r}; wanted {code} and {text!r}")


def fake_smi(directory, body):
    path = os.path.join(directory, "nvidia-smi")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)


with tempfile.TemporaryDirectory() as tmp:
    logs = os.path.join(tmp, "logs")
    os.mkdir(logs)
    base = {"GANGRUN_LOG_DIR": logs, "GANGRUN_LOCAL_WORKER_NUM": "2"}
    expect("healthy, no GPU tool", run(base), 0, "skipped: no nvidia-smi")
    expect("missing log dir", run({**base, "GANGRUN_LOG_DIR": os.path.join(tmp, "none")}), 1,
           "is not writable")
    expect("full log dir", run({**base, "GANGRUN_HEALTH_MIN_LOG_MB": "999999999"}), 1,
           "MiB free, less than 999999999")
    expect("full /dev/shm", run({**base, "GANGRUN_HEALTH_MIN_SHM_MB": "999999999"}), 1,
           "/dev/shm has")
    bin_dir = os.path.join(tmp, "bin")
    os.mkdir(bin_dir)
    fake_smi(bin_dir, "echo 'GPU 0: A (UUID: x)'; echo 'GPU 1: A (UUID: y)'")
    expect("two GPUs for two workers", run(base, [bin_dir]), 0, "ok: 2 GPU(s)")
    expect("two GPUs for four", run({**base, "GANGRUN_LOCAL_WORKER_NUM": "4"}, [bin_dir]), 1,
           "lists 2 GPU(s), fewer than the 4")
    fake_smi(bin_dir, "echo 'Unable to determine the device handle for GPU 3: Unknown Error'; "
             "exit 15")
    expect("a GPU fell off the bus", run(base, [bin_dir]), 1, "GPU 3: Unknown Error")
    fake_smi(bin_dir, "exec sleep 30")
    expect("a hung driver", run({**base, "GANGRUN_HEALTH_GPU_TIMEOUT": "0.2"}, [bin_dir]), 1,
           "took over 0.2 s")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("gangrun-health-check: 8 cases hold")
