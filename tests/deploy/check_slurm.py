#!/usr/bin/python3
"""gangrun under a real Slurm (issue #44): Debian's slurm-wlm and munge, started here.

The test writes a one-node configuration (the node named after this host, its own spool and
state directories, free ports, its own munge socket and key, SLURM_CONF pointing at it),
starts munged, slurmctld and slurmd as this user (root), and then:
  - sbatch deploy/slurm/gangrun.sbatch (--nodes=1 on this one-node cluster) runs 8 ranks of a
    train.py with the ranks and variables the README promises; the job is COMPLETED 0:0 in
    scontrol and in sacct's job completion log;
  - a worker's exit 3 is srun's 3 and the job's FAILED 3:0;
  - scancel of a running job leaves no process of it (launchers, keepers, workers);
  - two Slurm jobs whose launchers share a master host and port refuse each other (one clear
    line naming both run ids) and never form one world;
  - two launchers of one step on one node (srun -n2) are ranked apart, with a warning.
Nothing is installed at run time (deploy/install-deps.sh installs slurm-wlm and munge).

usage: check_slurm.py GANGRUN_BINARY SOURCE_DIR
"""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

GANGRUN, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []
DEADLINE = 60  # seconds any one wait may take


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, what, seconds=DEADLINE):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)  # polling an external daemon's state, not synchronising our own
    raise TimeoutError(f"waited {seconds} s for {what}")


class Slurm:
    """munged, slurmctld and slurmd on this host, with a configuration of their own."""

    def __init__(self, work):
        self.work = work
        # Named after this host, as Slurm's nodes are; the launchers resolve it (the first
        # host of the node list is the master). A host whose name does not resolve is
        # localhost here.
        self.node = socket.gethostname().split(".")[0]
        try:
            socket.gethostbyname(self.node)
        except OSError:
            self.node = "localhost"
        self.daemons = []
        for sub in ("state", "spool", "munge", "log"):
            os.makedirs(os.path.join(work, sub), mode=0o700, exist_ok=True)
        key = os.path.join(work, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(work, "munge", "munge.socket")
        self.conf = os.path.join(work, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=gangruntest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/log/slurmctld.log
SlurmdLogFile={work}/log/slurmd.log
SlurmUser=root
SlurmdUser=root
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={work}/log/jobcomp.txt
ReturnToService=2
MinJobAge=600
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""")
        self.env = dict(os.environ, SLURM_CONF=self.conf,
                        PATH=os.path.dirname(GANGRUN) + ":" + os.environ.get("PATH", ""))

    def launch(self):
        work = self.work
        key = os.path.join(work, "munge", "munge.key")
        self.start(["munged", "-F", "-f", f"--socket={self.munge_socket}", f"--key-file={key}",
                    f"--log-file={work}/log/munged.log", f"--pid-file={work}/munge/munged.pid",
                    f"--seed-file={work}/munge/seed"])
        wait_until(lambda: os.path.exists(self.munge_socket), "munged's socket")
        self.start(["slurmctld", "-D", "-i"])
        self.start(["slurmd", "-D", "-N", self.node])
        wait_until(lambda: "idle" in self.run(["sinfo", "-h", "-o", "%T"]).stdout,
                   "the node to be idle")

    def start(self, argv):
        log = open(os.path.join(self.work, "log", os.path.basename(argv[0]) + ".out"), "w")
        # The daemons die with this test, even when ctest kills it at its timeout.
        die_with_parent = lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        self.daemons.append(subprocess.Popen(argv, env=self.env, stdout=log,
                                             stderr=subprocess.STDOUT,
                                             preexec_fn=die_with_parent))

    def run(self, argv, **kwargs):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, **kwargs)

    def job(self, job_id):
        text = self.run(["scontrol", "show", "job", str(job_id)]).stdout
        state = re.search(r"JobState=(\S+)", text)
        code = re.search(r"\bExitCode=(\S+)", text)
        return (state.group(1) if state else None, code.group(1) if code else None)

    def wait_ended(self, job_id):
        return wait_until(lambda: self.job(job_id)[0] not in (None, "PENDING", "RUNNING",
                                                              "CONFIGURING", "COMPLETING")
                          and self.job(job_id), f"job {job_id} to end")

    def stop(self):
        for daemon in reversed(self.daemons):
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()

    def logs(self):
        out = []
        for name in sorted(os.listdir(os.path.join(self.work, "log"))):
            with open(os.path.join(self.work, "log", name), errors="replace") as f:
                out.append(f"--- {name}\n" + f.read()[-3000:])
        return "\n".join(out)


TRAIN_PY = """import json, os, sys
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "MASTER_PORT", "GANGRUN_RUN_ID", "GANGRUN_SCHEDULER", "RANK_ID", "RANK_SIZE",
        "MS_WORKER_NUM", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"]
with open("rank_%s.json" % os.environ["RANK"], "w") as f:
    json.dump({k: os.environ.get(k) for k in keys} | {"argv": sys.argv[1:]}, f)
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])
"""


def alive(pid):
    """True while `pid` exists and is not a zombie (we are not its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_sbatch(slurm, work):
    job_dir = os.path.join(work, "sbatch")
    os.makedirs(job_dir)
    with open(os.path.join(job_dir, "train.py"), "w") as f:
        f.write(TRAIN_PY)
    submitted = slurm.run(["sbatch", "--parsable", "--nodes=1", "--wait",
                           os.path.join(SOURCE, "deploy/slurm/gangrun.sbatch")],
                          cwd=job_dir, timeout=120)
    job_id = submitted.stdout.strip().split(";")[0]
    if not check(submitted.returncode == 0 and job_id.isdigit(),
                 f"sbatch gangrun.sbatch: exit {submitted.returncode} {submitted.stdout}"
                 f"{submitted.stderr}"):
        return
    with open(os.path.join(job_dir, f"gangrun-{job_id}.out")) as f:
        output = f.read()
    ranks = {}
    for rank in range(8):
        path = os.path.join(job_dir, f"rank_{rank}.json")
        if check(os.path.exists(path), f"sbatch: rank {rank} never ran:\n{output}"):
            with open(path) as f:
                ranks[rank] = json.load(f)
    for rank, seen in ranks.items():
        check(seen["WORLD_SIZE"] == "8" and seen["LOCAL_RANK"] == str(rank) and
              seen["RANK_ID"] == str(rank) and seen["RANK_SIZE"] == "8" and
              seen["GROUP_RANK"] == "0" and seen["SLURM_JOB_ID"] == job_id and
              seen["GANGRUN_RUN_ID"] == f"slurm-{job_id}.0" and
              seen["argv"] == ["--epochs", "10"], f"sbatch: rank {rank} saw {seen}")
    check(f"rank 7 of 8" in output, f"sbatch: the console lacks rank 7's line:\n{output}")
    state, code = slurm.wait_ended(job_id)
    check((state, code) == ("COMPLETED", "0:0"), f"sbatch: scontrol says {state} {code}")
    sacct = slurm.run(["sacct", "-c", "-n", "-j", job_id, "--format=State,ExitCode"]).stdout
    check(sacct.split()[:2] == ["COMPLETED", "0:0"], f"sbatch: sacct -c says {sacct!r}")


def test_failure(slurm, work):
    job_dir = os.path.join(work, "failure")
    os.makedirs(job_dir)
    run = slurm.run(["srun", "-N1", "-n1", GANGRUN, "--local_worker_num", "2", "--log_dir",
                     "logs", "/bin/sh", "-c",
                     'echo $SLURM_JOB_ID > job_id; [ "$RANK" = 1 ] && exit 3; sleep 60'],
                    cwd=job_dir, timeout=120)
    check(run.returncode == 3, f"failure: srun exited {run.returncode}: {run.stderr}")
    check("rank 1 on host" in run.stderr and "exited with code 3" in run.stderr,
          f"failure: no root-cause report: {run.stderr}")
    with open(os.path.join(job_dir, "job_id")) as f:
        job_id = f.read().strip()
    state, code = slurm.wait_ended(job_id)
    check((state, code) == ("FAILED", "3:0"), f"failure: scontrol says {state} {code}")
    sacct = slurm.run(["sacct", "-c", "-n", "-j", job_id, "--format=State,ExitCode"]).stdout
    check(sacct.split()[:2] == ["FAILED", "3:0"], f"failure: sacct -c says {sacct!r}")


def test_scancel(slurm, work):
    job_dir = os.path.join(work, "scancel")
    os.makedirs(job_dir)
    script = os.path.join(job_dir, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec srun gangrun --local_worker_num 2 --log_dir logs "
                "/bin/sh -c 'echo $$ > pid_$RANK; echo $PPID > launcher_$RANK; exec sleep 600'\n")
    submitted = slurm.run(["sbatch", "--parsable", "--nodes=1", "--output=out.txt", script],
                          cwd=job_dir)
    job_id = submitted.stdout.strip().split(";")[0]
    if not check(job_id.isdigit(), f"scancel: sbatch: {submitted.stdout}{submitted.stderr}"):
        return
    paths = [os.path.join(job_dir, f"pid_{rank}") for rank in range(2)]
    wait_until(lambda: all(os.path.exists(p) and os.path.getsize(p) > 0 for p in paths),
               "the scancel job's workers to start")
    pids = []
    for name in ("pid_0", "pid_1", "launcher_0", "launcher_1"):
        with open(os.path.join(job_dir, name)) as f:
            pids.append(int(f.read()))
    # The launcher and its keeper: every gangrun process in the job's session tree.
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    pids += [int(line.split()[0]) for line in ps.splitlines()
             if "gangrun --local_worker_num 2 --log_dir logs" in line]
    check(all(alive(pid) for pid in pids), "scancel: a process was gone before scancel")
    slurm.run(["scancel", job_id])
    slurm.wait_ended(job_id)
    try:
        wait_until(lambda: not any(alive(pid) for pid in pids), "the job's processes to end", 30)
    except TimeoutError:
        check(False, f"scancel left processes: {[p for p in pids if alive(p)]}")
    state, _ = slurm.job(job_id)
    check(state == "CANCELLED", f"scancel: the job is {state}")


def test_two_jobs_never_merge(slurm, work):
    """Two jobs, one master host and port: the second's launcher is refused for its run id."""
    job_dir = os.path.join(work, "merge")
    os.makedirs(job_dir)
    port = str(free_port())
    common = ["srun", "-N1", "-n1", GANGRUN, "--worker_num", "2", "--local_worker_num", "1",
              "--master_port", port, "--cluster_time_out", "20", "/bin/sh", "-c",
              "echo $SLURM_JOB_ID:$WORLD_SIZE >> started"]
    first = subprocess.Popen(common[:4] + ["--log_dir", "a"] + common[4:], cwd=job_dir,
                             env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    # The first job's scheduler listens before the second starts.
    wait_until(lambda: subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                      text=True).stdout.strip(), "the first job's scheduler")
    second = slurm.run(common[:4] + ["--log_dir", "b"] + common[4:], cwd=job_dir, timeout=60)
    check(second.returncode == 3, f"merge: the second job exited {second.returncode}")
    lines = [line for line in second.stderr.splitlines() if line.startswith("gangrun:")]
    check(len(lines) == 1 and re.search(r"--run_id 'slurm-\d+\.0', but the job's run id is "
                                        r"'slurm-\d+\.0'", lines[0]) is not None,
          f"merge: the second job's error: {second.stderr}")
    slurm.run(["scancel", "-u", "root"])  # the first job: the only one running
    first.communicate(timeout=60)
    check(not os.path.exists(os.path.join(job_dir, "started")),
          "merge: a worker started: the two jobs formed one world")


def test_two_launchers_on_one_node(slurm, work):
    job_dir = os.path.join(work, "two")
    os.makedirs(job_dir)
    run = slurm.run(["srun", "-N1", "-n2", GANGRUN, "--local_worker_num", "1", "--log_dir",
                     "logs", "/bin/sh", "-c", "echo rank $RANK of $WORLD_SIZE"], cwd=job_dir,
                    timeout=120)
    check(run.returncode == 0, f"srun -n2: exited {run.returncode}: {run.stderr}")
    check("rank 0 of 2" in run.stdout and "rank 1 of 2" in run.stdout,
          f"srun -n2: ranks {run.stdout!r}")
    check(sorted(os.listdir(os.path.join(job_dir, "logs"))) == ["worker_0.log", "worker_1.log"],
          f"srun -n2: logs {os.listdir(os.path.join(job_dir, 'logs'))}")
    check("more than one launcher of step" in run.stderr, f"srun -n2: no warning: {run.stderr}")


def main():
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sacct"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            sys.exit(f"check_slurm: {tool} is missing (deploy/install-deps.sh installs "
                     "slurm-wlm and munge)")
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    work = tempfile.mkdtemp(prefix="check-slurm-")
    os.chmod(work, 0o755)  # munged checks its socket's directories
    slurm = Slurm(work)
    try:
        slurm.launch()
        for test in (test_sbatch, test_failure, test_scancel, test_two_jobs_never_merge,
                     test_two_launchers_on_one_node):
            before = len(failures)
            try:
                test(slurm, work)
            except (TimeoutError, subprocess.TimeoutExpired) as e:
                check(False, f"{test.__name__}: {e}")
            if len(failures) > before:
                failures.append(slurm.logs())
    except TimeoutError as e:
        failures.append(f"Slurm did not start: {e}\n" + slurm.logs())
    finally:
        slurm.run(["scancel", "-u", "root"])
        slurm.stop()
        shutil.rmtree(work, ignore_errors=True)


main()
if failures:
    print("check_slurm: " + "\ncheck_slurm: ".join(failures), file=sys.stderr)
    sys.exit(1)
print("check_slurm: sbatch, failures, scancel, scoping and two launchers per node hold")
