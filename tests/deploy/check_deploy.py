#!/usr/bin/python3
"""Checks the files in deploy/: systemd units (systemd-analyze verify), the Kubernetes
manifests (YAML, and what gangrun needs of them), the Dockerfile, the Slurm example, and that
every GANGRUN_* variable they set is an option gangrun knows.

usage: check_deploy.py SOURCE_DIR GANGRUN_BINARY
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE, GANGRUN = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SOURCE, "deploy")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def read(*path):
    with open(os.path.join(DEPLOY, *path)) as f:
        return f.read()


def known_variables():
    """GANGRUN_<OPTION> for every option of the launcher and the daemons."""
    names = set()
    for args in ([], ["scheduler"], ["agent"]):
        out = subprocess.run([GANGRUN, *args, "--help"], capture_output=True, text=True).stdout
        names |= {"GANGRUN_" + m.upper() for m in re.findall(r"--([a-z_]+)", out)}
        names |= set(re.findall(r"\(Env:(GANGRUN_[A-Z_]+)\)", out))
    return names


def check_variables(where, text):
    known = known_variables()
    for name in set(re.findall(r"\b(GANGRUN_[A-Z_]+)\b", text)):
        check(name in known, f"{where}: {name} is not a gangrun option")


def check_systemd():
    units = ["gangrun-scheduler.service", "gangrun-agent.service"]
    for unit in units:
        text = read("systemd", unit)
        for line in ("Type=notify", "KillMode=mixed", "WatchdogSec=", "TimeoutStopSec=",
                     "EnvironmentFile=-/etc/gangrun/gangrun.env"):
            check(line in text, f"{unit}: missing {line}")
    check_variables("gangrun.env", read("systemd", "gangrun.env"))
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # a missing tool fails the test (deploy/install-deps.sh installs it)
        failures.append("systemd-analyze not found: install systemd")
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for unit in units:
            path = os.path.join(tmp, unit)
            with open(path, "w") as f:
                f.write(read("systemd", unit).replace("/usr/local/bin/gangrun", GANGRUN))
            paths.append(path)
        # The man page its Documentation= names is checked in the package (check_deb.py).
        result = subprocess.run([analyze, "verify", "--man=no", *paths], capture_output=True,
                                text=True)
        check(result.returncode == 0 and not result.stderr.strip(),
              f"systemd-analyze verify: {result.returncode} {result.stderr.strip()}")
        # The daemon needs no privilege; the agent (root, to start jobs as their user) is
        # hardened as far as its jobs allow. Both were 9.1 and 9.6 ("UNSAFE") before.
        for path, most in zip(paths, (2.0, 8.5)):
            result = subprocess.run([analyze, "security", "--offline=yes", "--no-pager", path],
                                    capture_output=True, text=True)
            found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout)
            check(found is not None and float(found.group(1)) <= most,
                  f"systemd-analyze security {os.path.basename(path)}: "
                  f"{found.group(1) if found else result.stdout + result.stderr} (at most {most})")
    text = read("systemd", "gangrun-scheduler.service")
    for line in ("DynamicUser=true", "CapabilityBoundingSet=\n",
                 "LoadCredential=token:/etc/gangrun/token", "--token_file %d/token"):
        check(line in text, f"gangrun-scheduler.service: missing {line.strip()}")


def check_kubernetes():
    try:
        import yaml
    except ImportError:
        failures.append("python3-yaml is missing (deploy/install-deps.sh installs it)")
        return
    text = read("kubernetes", "gangrun.yaml")
    docs = {d["kind"]: d for d in yaml.safe_load_all(text)}
    service, sts = docs.get("Service"), docs.get("StatefulSet")
    check(service is not None and sts is not None, "gangrun.yaml: needs a Service and a StatefulSet")
    if not service or not sts:
        return
    check(service["spec"].get("clusterIP") == "None", "Service is not headless")
    check(sts["spec"]["serviceName"] == service["metadata"]["name"],
          "StatefulSet.serviceName is not the headless Service")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    check("pod-index" in json.dumps(env.get("GANGRUN_NODE_RANK")),
          "GANGRUN_NODE_RANK does not come from the pod index")
    master = env.get("GANGRUN_MASTER_ADDR", {}).get("value", "")
    check(master == f"{sts['metadata']['name']}-0.{service['metadata']['name']}",
          f"GANGRUN_MASTER_ADDR {master!r} is not pod 0 of the StatefulSet")
    health = env.get("GANGRUN_HEALTH_PORT", {}).get("value")
    for probe in ("livenessProbe", "readinessProbe"):
        grpc = container.get(probe, {}).get("grpc", {})
        check(str(grpc.get("port")) == health, f"{probe} is not a grpc probe on {health}")
    check(container["readinessProbe"]["grpc"].get("service") == "gangrun.v1.Node",
          "readinessProbe does not ask for gangrun.v1.Node")
    replicas = sts["spec"]["replicas"]
    world = int(env["GANGRUN_WORKER_NUM"]["value"])
    local = int(env["GANGRUN_LOCAL_WORKER_NUM"]["value"])
    check(world == replicas * local, "GANGRUN_WORKER_NUM != replicas x GANGRUN_LOCAL_WORKER_NUM")
    check_variables("gangrun.yaml", text)


def check_dockerfile():
    text = read("container", "Dockerfile")
    instructions = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instructions.append(line.split(None, 1))
    known = {"FROM", "RUN", "COPY", "WORKDIR", "ENV", "EXPOSE", "STOPSIGNAL", "HEALTHCHECK",
             "ENTRYPOINT", "CMD", "ARG", "LABEL", "USER"}
    check(instructions and instructions[0][0] == "FROM", "Dockerfile: FROM must come first")
    for inst in instructions:
        check(inst[0] in known, f"Dockerfile: unknown instruction {inst[0]}")
        if inst[0] in ("ENTRYPOINT", "CMD"):
            check(isinstance(json.loads(inst[1]), list), f"Dockerfile: {inst[0]} not exec form")
        if inst[0] == "COPY" and not inst[1].startswith("--from"):
            source = inst[1].split()[0]
            check(os.path.exists(os.path.join(SOURCE, source)), f"Dockerfile: COPY {source} missing")
    entry = [json.loads(i[1]) for i in instructions if i[0] == "ENTRYPOINT"]
    check(entry and entry[0][0].endswith("/gangrun"), "Dockerfile: gangrun is not the entrypoint")


def check_slurm():
    path = os.path.join(DEPLOY, "slurm", "gangrun.sbatch")
    result = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(result.returncode == 0, f"gangrun.sbatch: {result.stderr.strip()}")
    text = read("slurm", "gangrun.sbatch")
    check(re.search(r"^#SBATCH --nodes=", text, re.M), "gangrun.sbatch: no #SBATCH --nodes")
    check("srun" in text and "gangrun" in text, "gangrun.sbatch: srun does not start gangrun")
    check_variables("gangrun.sbatch", text)


for step in (check_systemd, check_kubernetes, check_dockerfile, check_slurm):
    step()
for failure in failures:
    print("FAIL:", failure)
print("deploy files:", "ok" if not failures else f"{len(failures)} problem(s)")
sys.exit(1 if failures else 0)
