#!/usr/bin/python3
"""A scrape of /metrics parses with a real parser of Prometheus's text format
(python3-prometheus-client), and its values are those `gangrun status --json` shows; every
metric the Grafana dashboard queries is in a job's or the daemon's scrape.

Usage: check_metrics_parse.py GANGRUN_BINARY DASHBOARD_JSON
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

GANGRUN = sys.argv[1]
DASHBOARD = sys.argv[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def families(text):
    """The family names of a scrape (raises on anything malformed)."""
    return {family.name for family in text_string_to_metric_families(text)}


def daemon_scrape(work):
    listen, metrics = free_port(), free_port()
    daemon = subprocess.Popen([GANGRUN, "scheduler", "--listen", "127.0.0.1:" + listen,
                               "--metrics_port", metrics], cwd=work, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        for line in daemon.stderr:
            if "waiting for agents and jobs" in line:
                break
        return urllib.request.urlopen("http://127.0.0.1:%s/metrics" % metrics,
                                      timeout=30).read().decode()
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def fail(message):
    print("check_metrics_parse: " + message)
    sys.exit(1)


with tempfile.TemporaryDirectory() as work:
    port, metrics = free_port(), free_port()
    job = subprocess.Popen(
        [GANGRUN, "--worker_num", "2", "--local_worker_num", "2", "--master_port", port,
         "--metrics_port", metrics, "--spare_nodes", "1", "/bin/sh", "-c", "exec tail -f /dev/null"],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Event-driven: the launcher says when both workers run (after the scheduler counted them).
        for line in job.stderr:
            if "all 2 local process(es) running" in line:
                break
        else:
            fail("the job never ran")
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % metrics, timeout=30).read()
        text = text.decode()
        status = json.loads(subprocess.run(
            [GANGRUN, "status", "--master", "127.0.0.1:" + port, "--json"], check=True,
            capture_output=True, text=True).stdout)
        samples = {}
        for family in text_string_to_metric_families(text):  # raises on anything malformed
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        job_id = status["job_id"]

        def value(name, **labels):
            key = (name, tuple(sorted(dict(job=job_id, **labels).items())))
            if key not in samples:
                fail("no sample %s%s in\n%s" % (name, labels, text))
            return samples[key]

        running = sum(1 for n in status["nodes"] for w in n["workers"]
                      if w["state"] == "WORKER_STATE_RUNNING")
        checks = [
            ("gangrun_world_size", {}, status["world_size"]),
            ("gangrun_generation", {}, int(status["generation"])),
            ("gangrun_spare_nodes", {}, status.get("spare_nodes", 0)),
            ("gangrun_workers", {"state": "running"}, running),
            ("gangrun_restarts_total", {}, status.get("restarts", 0)),
        ]
        for name, labels, want in checks:
            got = value(name, **labels)
            if got != want:
                fail("%s%s is %r, status says %r" % (name, labels, got, want))
        for cause in ("worker_exit", "hang", "health_check", "excluded"):
            value("gangrun_failures_total", cause=cause)
        if "e+" in text or "nan" in text.replace("NaN", ""):
            fail("a value is not written exactly:\n" + text)
        # The dashboard's queries name only metrics that exist (the summaries' families lose
        # their _count/_sum suffixes in the parser's names).
        known = families(text) | families(daemon_scrape(work))
        dashboard = json.load(open(DASHBOARD))
        queried = set()
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                queried |= set(re.findall(r"gangrun_[a-z_]+", target["expr"]))
        for name in queried:
            base = re.sub(r"_(total|count|sum|bucket)$", "", name)
            if name not in known and base not in known:
                fail("the dashboard queries %s, which no scrape exports" % name)
        print("check_metrics_parse: %d samples parse and match gangrun status; the dashboard's "
              "%d metrics exist" % (len(samples), len(queried)))
    finally:
        subprocess.run([GANGRUN, "stop", "--master", "127.0.0.1:" + port],
                       capture_output=True, timeout=60)
        job.wait(timeout=60)
