#!/usr/bin/python3
"""The status page (GET / on --metrics_port) in a real browser: Debian's headless Chromium
loads a running job's page and a daemon's, the rendered DOM shows what `gangrun status --json`
shows, and a screenshot of each is kept in OUTPUT_DIR. Chromium may resolve no host name but
127.0.0.1 (--host-resolver-rules) and runs with its background networking off: the test sends
nothing beyond loopback.

Usage: check_status_page.py GANGRUN_BINARY OUTPUT_DIR
"""

import html.parser
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

GANGRUN, OUTPUT = sys.argv[1], sys.argv[2]
CHROMIUM = shutil.which("chromium")


def fail(message):
    print("check_status_page: " + message)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class Tables(html.parser.HTMLParser):
    """The rendered DOM's tables by id: a list of rows, each a list of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables, self.ids = {}, {}
        self.table = self.row = self.cell = None
        self.capture = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table = self.tables.setdefault(attrs.get("id", ""), [])
        elif tag == "tr" and self.table is not None:
            self.row = []
            self.table.append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []
        if "id" in attrs and tag != "table":
            self.capture = attrs["id"]
            self.ids[self.capture] = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "table":
            self.table = None
        if self.capture and tag in ("span", "div", "h1"):
            self.capture = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
        if self.capture:
            self.ids[self.capture] += data


PROFILES = tempfile.TemporaryDirectory()  # Chromium's profiles, removed at exit


def render(url, screenshot):
    if CHROMIUM is None:
        fail("chromium is missing (deploy/install-deps.sh installs it)")
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--no-pings",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--user-data-dir=" + tempfile.mkdtemp(dir=PROFILES.name), "--virtual-time-budget=4000"]
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    if dom.returncode != 0:
        fail("chromium failed: " + dom.stderr[-2000:])
    subprocess.run(base + ["--window-size=1280,800", "--screenshot=" + screenshot, url],
                   capture_output=True, timeout=120)
    if not os.path.exists(screenshot):
        fail("chromium made no screenshot " + screenshot)
    parser = Tables()
    parser.feed(dom.stdout)
    return parser, dom.stdout


def wait_line(stream, text):
    for line in stream:  # event-driven: the launcher's own log line
        if text in line:
            return
    fail("never saw '%s'" % text)


os.makedirs(OUTPUT, exist_ok=True)
with tempfile.TemporaryDirectory() as work:
    port, metrics = free_port(), free_port()
    job = subprocess.Popen(
        [GANGRUN, "--worker_num", "2", "--local_worker_num", "2", "--master_port", port,
         "--metrics_port", metrics, "/bin/sh", "-c", "exec tail -f /dev/null"],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_line(job.stderr, "all 2 local process(es) running")
        status = json.loads(subprocess.run(
            [GANGRUN, "status", "--master", "127.0.0.1:" + port, "--json"], check=True,
            capture_output=True, text=True).stdout)
        page, dom = render("http://127.0.0.1:%s/" % metrics, os.path.join(OUTPUT, "job-page.png"))
        if page.ids.get("phase") != "running":
            fail("the page's phase is %r, not running:\n%s" % (page.ids.get("phase"), dom))
        rows = page.tables.get("workers", [])[1:]
        want = sorted((w["rank"], w["pid"]) for n in status["nodes"] for w in n["workers"])
        got = sorted((int(r[0]), int(r[2])) for r in rows)
        if got != want or any(r[3] != "running" for r in rows):
            fail("the page's workers %r are not status's %r" % (rows, want))
        if not any(r[0:2] == ["forming", "running"] for r in page.tables.get("events", [])):
            fail("the page shows no forming -> running event:\n" + dom)
        # Where the job's time went: its phases so far, drawn per generation.
        ledger = page.tables.get("ledger", [])[1:]
        if not any(r[0] == "1" and "training" in r[2] for r in ledger):
            fail("the page shows no time of generation 1:\n" + dom)
        if 'class="p-training"' not in dom or "ETTR" not in page.ids.get("time", ""):
            fail("the page draws no timeline or says no ETTR:\n" + dom)
    finally:
        subprocess.run([GANGRUN, "stop", "--master", "127.0.0.1:" + port], capture_output=True,
                       timeout=60)
        job.wait(timeout=60)

    listen, metrics = free_port(), free_port()
    daemon = subprocess.Popen([GANGRUN, "scheduler", "--listen", "127.0.0.1:" + listen,
                               "--metrics_port", metrics], cwd=work, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    agent = None
    try:
        wait_line(daemon.stderr, "waiting for agents and jobs")
        # One job through an agent, so that the page lists it among the finished ones.
        agent = subprocess.Popen([GANGRUN, "agent", "--master", "127.0.0.1:" + listen,
                                  "--slots", "1", "--name", "agent-a"], cwd=work,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        submitted = subprocess.run([GANGRUN, "submit", "--master", "127.0.0.1:" + listen,
                                    "--worker_num", "1", "/bin/true"], cwd=work,
                                   capture_output=True, text=True, timeout=120)
        if submitted.returncode != 0:
            fail("the daemon's job failed: " + submitted.stderr)
        status = json.loads(subprocess.run(
            [GANGRUN, "status", "--master", "127.0.0.1:" + listen, "--json"],
            capture_output=True, text=True, timeout=60, check=True).stdout)
        job_id = status["finished"][0]["job_id"]
        page, dom = render("http://127.0.0.1:%s/" % metrics,
                           os.path.join(OUTPUT, "daemon-page.png"))
        if "agents" not in page.tables or "1 agent(s)" not in page.ids.get("summary", ""):
            fail("the daemon's page shows no agents table:\n" + dom)
        finished = page.tables.get("finished", [])
        if not any(r[0:2] == [job_id, "succeeded"] and r[4].endswith("%") and r[5] == "/bin/true"
                   for r in finished):
            fail("the daemon's page does not list finished job %s:\n%s" % (job_id, dom))
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(timeout=60)
        daemon.terminate()
        daemon.wait(timeout=60)
print("check_status_page: the job's and the daemon's pages render in Chromium as status shows "
      "them; screenshots in " + OUTPUT)
