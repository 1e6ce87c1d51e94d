#!/usr/bin/python3
"""The Debian package as an administrator meets it (issue #44).

cpack makes gangrun_<version>_amd64.deb and its gangrun-dbgsym .ddeb; lintian (Debian's)
finds no error and no warning in either (the package's own overrides say why for the two it
carries); dpkg-deb shows a stripped binary whose debug information is in the .ddeb under its
build id, Installed-Size as dpkg computes it, Depends from the binary, the Recommends, the
copyright, the changelog, compressed man pages under names that shadow neither PyTorch's nor
MindSpore's, and the conffile. dpkg installs it into a scratch root (a chroot this test
makes, holding only a shell and what the maintainer scripts run): postinst makes a 256-bit
token of mode 0600; systemd-analyze verifies the units there; both units' commands, with
the conffile's settings (its port replaced by a free one, its paths under the scratch root),
start, say READY=1 and form a one-host cluster that runs a submitted job; the completion
loads lazily for gangrun, msrun and torchrun, and a subcommand completes its own options;
a purge removes the token and the conffile.

usage: check_deb.py BUILD_DIR VERSION
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

BUILD, VERSION = sys.argv[1], sys.argv[2]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_packages(out):
    made = run(["cpack", "-G", "DEB", "-B", out], cwd=BUILD)
    if made.returncode != 0:
        sys.exit(f"check_deb: cpack failed:\n{made.stdout}{made.stderr}")
    deb = os.path.join(out, f"gangrun_{VERSION}_amd64.deb")
    ddeb = os.path.join(out, f"gangrun-dbgsym_{VERSION}_amd64.ddeb")
    for path in (deb, ddeb):
        if not os.path.isfile(path):
            sys.exit(f"check_deb: no {path} (made: {os.listdir(out)})")
    return deb, ddeb


def check_lintian(deb, ddeb):
    # As root lintian says so on stderr; its tags are on stdout. Informational tags (I:) are
    # allowed: no init.d script (the units need systemd's notify protocol), a spelling in a
    # library linked in.
    result = run(["lintian", "--tag-display-limit", "0", deb, ddeb])
    tags = [line for line in result.stdout.splitlines() if re.match(r"^[EW]: ", line)]
    check(not tags, "lintian: " + "; ".join(tags))
    check(result.returncode == 0, f"lintian exited {result.returncode}: {result.stdout}")


def field(deb, name):
    return run(["dpkg-deb", "-f", deb, name]).stdout.strip()


def elf_sections(path):
    return run(["readelf", "-S", "-W", path]).stdout


def build_id(path):
    match = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]).stdout)
    return match.group(1) if match else None


def check_contents(deb, ddeb, work):
    unpacked = os.path.join(work, "unpacked")
    debug = os.path.join(work, "debug")
    run(["dpkg-deb", "-x", deb, unpacked])
    run(["dpkg-deb", "-x", ddeb, debug])
    binary = os.path.join(unpacked, "usr/bin/gangrun")
    sections = elf_sections(binary)
    check(".symtab" not in sections and ".debug_" not in sections,
          "usr/bin/gangrun is not stripped")
    bid = build_id(binary)
    check(bid is not None, "usr/bin/gangrun has no build id")
    if bid:
        debug_file = os.path.join(debug, f"usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")
        if check(os.path.isfile(debug_file), f"the .ddeb has no {debug_file}"):
            debug_sections = elf_sections(debug_file)
            check(".symtab" in debug_sections and ".debug_line" in debug_sections,
                  "the .ddeb's debug file has no symbols or no line tables")
    # Installed-Size: each file rounded up to KiB, 1 per directory and link (dpkg-gencontrol).
    kib = 0
    for root, dirs, files in os.walk(unpacked):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path) or os.path.isdir(path):
                kib += 1
            else:
                kib += (os.path.getsize(path) + 1023) // 1024
    installed = int(field(deb, "Installed-Size") or 0)
    check(abs(installed - kib) <= max(4, kib // 100),
          f"Installed-Size {installed} KiB, the files take {kib} KiB")
    # Depends: what the binary links (only libc's libraries), versioned by dpkg-shlibdeps.
    needed = re.findall(r"NEEDED\s+Shared library: \[([^\]]+)\]", run(
        ["readelf", "-d", binary]).stdout)
    check(set(needed) <= {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"},
          f"the binary links more than libc: {needed}")
    depends = field(deb, "Depends")
    check(re.fullmatch(r"libc6 \(>= 2\.\d+\)", depends) is not None,
          f"Depends is not dpkg-shlibdeps' libc6 (>= ...): '{depends}'")
    check(field(deb, "Recommends") == "bash-completion, python3, elfutils",
          f"Recommends: '{field(deb, 'Recommends')}'")
    doc = os.path.join(unpacked, "usr/share/doc/gangrun")
    for name in ("copyright", "changelog.gz", "README.md"):
        check(os.path.isfile(os.path.join(doc, name)), f"no /usr/share/doc/gangrun/{name}")
    changelog = run(["zcat", os.path.join(doc, "changelog.gz")]).stdout
    check(changelog.startswith(f"gangrun ({VERSION}) "),
          f"changelog.gz does not start at version {VERSION}")
    man = os.path.join(unpacked, "usr/share/man/man1")
    pages = sorted(os.listdir(man))
    check(pages == ["gangrun-msrun.1.gz", "gangrun-torchrun.1.gz", "gangrun.1.gz"],
          f"man pages: {pages} (torchrun.1 would shadow PyTorch's)")
    torchrun_page = run(["zcat", os.path.join(man, "gangrun-torchrun.1.gz")]).stdout
    check("\\-\\-nproc" in torchrun_page, "gangrun-torchrun.1 lists no torchrun option")
    check(re.search(r"^gangrun\\-torchrun \\- ", torchrun_page, re.M) is not None,
          "gangrun-torchrun.1's NAME is not gangrun-torchrun")
    check(not os.path.exists(os.path.join(unpacked, "usr/bin/torchrun")),
          "torchrun must not be on PATH's /usr/bin")
    control = os.path.join(work, "control")
    run(["dpkg-deb", "-e", deb, control])
    with open(os.path.join(control, "conffiles")) as f:
        check(f.read().split() == ["/etc/gangrun/gangrun.env"], "conffiles")
    for program in ("torchrun", "msrun"):
        version = run([os.path.join(unpacked, "usr/lib/gangrun/bin", program), "--version"])
        check(version.stdout.startswith(f"{program} {VERSION}"),
              f"{program} --version: {version.stdout!r}")


def copy_with_libraries(root, program, libraries_only=False):
    """Copies `program` and the libraries ldd names into the chroot `root`."""
    paths = [] if libraries_only else [program]
    for line in run(["ldd", program]).stdout.splitlines():
        match = re.search(r"(/\S+) \(0x", line)
        if match:
            paths.append(match.group(1))
    for path in paths:
        real = os.path.realpath(path)
        target = root + path
        if os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(real, target)


def make_chroot(root):
    """A root with a shell and what gangrun's maintainer scripts run, and dpkg's database."""
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "tmp", "usr/bin", "usr/lib"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    # Debian 12 is merged-/usr: /bin and /lib are links into /usr.
    for link in ("bin", "lib", "lib64", "sbin"):
        os.makedirs(os.path.join(root, "usr", link), exist_ok=True)
        os.symlink(f"usr/{link}", os.path.join(root, link))
    for name in ("status", "available"):
        open(os.path.join(root, "var/lib/dpkg", name), "w").close()
    for program in ("/bin/sh", "/usr/bin/mv", "/usr/bin/rm", "/usr/bin/rmdir"):
        copy_with_libraries(root, program)
    # What libc6 would bring for gangrun itself (postinst runs it).
    copy_with_libraries(root, os.path.join(BUILD, "bin/gangrun"), libraries_only=True)


def dpkg(root, *args):
    return run(["dpkg", f"--root={root}", "--force-depends", *args])


class Notify:
    """A NOTIFY_SOCKET that collects what a unit's process says (READY=1, WATCHDOG=1)."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []

    def wait_for(self, text, seconds):
        self.sock.settimeout(seconds)
        while text not in self.messages:
            try:
                self.messages.extend(self.sock.recv(4096).decode().split("\n"))
            except socket.timeout:
                return False
        return True


NOBODY = 65534  # the user a DynamicUser= unit runs as here


def unit_command(root, unit, work):
    """The unit's ExecStart as systemd runs it: its credentials (LoadCredential=) copied into a
    directory of their own for %d, and a DynamicUser= unit as a user without privilege (here
    nobody), with no capabilities and no new privileges; whether it is such a unit."""
    with open(os.path.join(root, "usr/lib/systemd/system", unit)) as f:
        text = f.read()
    exec_start = re.search(r"^ExecStart=(.+)$", text, re.M).group(1).split()
    check(exec_start[0] == "/usr/bin/gangrun", f"{unit} runs {exec_start[0]}")
    dynamic = re.search(r"^DynamicUser=(true|yes)$", text, re.M) is not None
    credentials = os.path.join(work, unit + ".credentials")
    os.makedirs(credentials)
    for name, path in re.findall(r"^LoadCredential=([^:\n]+):(\S+)$", text, re.M):
        copy = os.path.join(credentials, name)
        shutil.copyfile(root + path, copy)
        os.chmod(copy, 0o400)
        if dynamic:
            os.chown(copy, NOBODY, NOBODY)
    command = [root + exec_start[0]] + [arg.replace("%d", credentials) for arg in exec_start[1:]]
    if dynamic:
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                   "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"] + command
    return command, dynamic


def conffile_environment(root, port, logs):
    """gangrun.env as systemd reads it, with its port and paths moved for this test."""
    env = {"PATH": os.environ["PATH"]}
    with open(os.path.join(root, "etc/gangrun/gangrun.env")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, value = line.split("=", 1)
            value = value.replace(":8118", f":{port}")
            value = value.replace("/etc/gangrun/", root + "/etc/gangrun/")
            value = value.replace("/var/log/gangrun-scheduler/", logs + "/")
            env[name] = value
    check(env.get("GANGRUN_LISTEN", "").startswith("127.0.0.1:"),
          "the conffile's daemon does not listen on loopback")
    check(env.get("GANGRUN_MASTER") == env.get("GANGRUN_LISTEN"),
          "the conffile's agent is not pointed at its daemon")
    return env


def check_units_start(root, work):
    port = free_port()
    logs = os.path.join(work, "log")  # the daemon's LogsDirectory=
    os.makedirs(logs)
    env = conffile_environment(root, port, logs)
    os.chmod(work, 0o755)  # the daemon's user reaches the package and its directories
    processes = []
    try:
        for unit in ("gangrun-scheduler.service", "gangrun-agent.service"):
            notify = Notify(os.path.join(work, unit + ".notify"))
            state = os.path.join(work, unit + ".state")  # the unit's WorkingDirectory
            os.makedirs(state)
            command, dynamic = unit_command(root, unit, work)
            if dynamic:  # systemd gives the unit's own directories to its user
                for directory in (state, logs):
                    os.chown(directory, NOBODY, NOBODY)
                os.chmod(notify.path, 0o777)
            process = subprocess.Popen(command, cwd=state,
                                       env=dict(env, NOTIFY_SOCKET=notify.path),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
            processes.append(process)
            if not check(notify.wait_for("READY=1", 30), f"{unit} never said READY=1"):
                return
        submit = run([root + "/usr/bin/gangrun", "submit", "--master", f"127.0.0.1:{port}",
                      "--worker_num", "2", "/bin/sh", "-c", "echo rank $RANK of $WORLD_SIZE"],
                     env=env, timeout=60, cwd=work)
        check(submit.returncode == 0, f"submit exited {submit.returncode}: {submit.stderr}")
        check("rank 1 of 2" in submit.stdout, f"the job's output: {submit.stdout!r}")
    finally:
        for process in processes[::-1]:
            process.terminate()
            try:
                out, _ = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                out, _ = process.communicate()
            check(process.returncode == 0, f"{process.args} exited {process.returncode}:"
                  f" {out[-2000:]}")


def complete(root, path_dirs, words):
    """What bash-completion offers for the last of `words`, loading the file lazily."""
    script = (
        "source /usr/share/bash-completion/bash_completion\n"
        f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE='{' '.join(words)}'; COMP_POINT=${{#COMP_LINE}}\n"
        f"_completion_loader {words[0]}\n"
        f"spec=$(complete -p {words[0]} 2>/dev/null) || {{ echo NO-SPEC; exit; }}\n"
        "fn=${spec#*-F }; fn=${fn%% *}\n"
        f"$fn {words[0]} '{words[-1]}' '{words[-2]}'\n"
        "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = {"PATH": ":".join(path_dirs + ["/usr/bin", "/bin"]),
           "XDG_DATA_DIRS": root + "/usr/share", "HOME": root + "/tmp"}
    return run(["bash", "--norc", "--noprofile", "-c", script], env=env).stdout.split()


def check_completion(root, work):
    gangrun_bin = root + "/usr/bin"
    ours = root + "/usr/lib/gangrun/bin"
    offered = complete(root, [gangrun_bin], ["gangrun", "status", "--ma"])
    check("--master" in offered and "--master_addr" not in offered,
          f"gangrun status --ma<TAB>: {offered}")
    offered = complete(root, [gangrun_bin], ["gangrun", "--worker_n"])
    check(offered == ["--worker_num"], f"gangrun --worker_n<TAB>: {offered}")
    offered = complete(root, [gangrun_bin], ["gangrun", "sub"])
    check(offered == ["submit"], f"gangrun sub<TAB>: {offered}")
    offered = complete(root, [ours], ["torchrun", "--nproc"])
    check("--nproc_per_node" in offered, f"torchrun --nproc<TAB>: {offered}")
    offered = complete(root, [ours], ["msrun", "--local_w"])
    check(offered == ["--local_worker_num"], f"msrun --local_w<TAB>: {offered}")
    # A torchrun that is not gangrun's (PyTorch's) keeps bash's default completion.
    theirs = os.path.join(work, "pytorch-bin")
    os.makedirs(theirs)
    with open(os.path.join(theirs, "torchrun"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(theirs, "torchrun"), 0o755)
    offered = complete(root, [theirs, ours], ["torchrun", "--nproc"])
    check(not any(word.startswith("--nproc") for word in offered),
          f"PyTorch's torchrun got gangrun's completion: {offered}")


def main():
    work = tempfile.mkdtemp(prefix="check-deb-")
    try:
        deb, ddeb = make_packages(os.path.join(work, "out"))
        check_lintian(deb, ddeb)
        check_contents(deb, ddeb, work)
        root = os.path.join(work, "root")
        make_chroot(root)
        installed = dpkg(root, "-i", deb)
        if not check(installed.returncode == 0,
                     f"dpkg -i into the scratch root: {installed.stdout}{installed.stderr}"):
            return
        token = os.path.join(root, "etc/gangrun/token")
        if check(os.path.isfile(token), "postinst made no /etc/gangrun/token"):
            check(os.stat(token).st_mode & 0o777 == 0o600, "the token's mode is not 0600")
            with open(token) as f:
                check(re.fullmatch(r"[0-9a-f]{64}\n", f.read()) is not None,
                      "the token is not 256 bits of hex")
        # systemd's own units beside ours, so that verify can resolve the targets we name.
        shutil.copytree("/lib/systemd/system", os.path.join(root, "usr/lib/systemd/system"),
                        dirs_exist_ok=True, symlinks=True)
        verify = run(["systemd-analyze", "verify", f"--root={root}", "--man=no",
                      "gangrun-scheduler.service", "gangrun-agent.service"])
        check(verify.returncode == 0 and not verify.stderr.strip() and not verify.stdout.strip(),
              f"systemd-analyze verify: {verify.stdout}{verify.stderr}")
        check_units_start(root, work)
        check_completion(root, work)
        # A reinstall keeps the token; a purge removes it with the conffile.
        with open(token) as f:
            before = f.read()
        dpkg(root, "-i", deb)
        with open(token) as f:
            check(f.read() == before, "a reinstall replaced the token")
        purged = dpkg(root, "--purge", "gangrun")
        check(purged.returncode == 0, f"dpkg --purge: {purged.stdout}{purged.stderr}")
        left = os.path.join(root, "etc/gangrun")
        if os.path.exists(left):
            check(False, f"/etc/gangrun is left after a purge: {os.listdir(left)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
if failures:
    print("check_deb: " + "\ncheck_deb: ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"check_deb: gangrun_{VERSION}_amd64.deb and its .ddeb hold")
