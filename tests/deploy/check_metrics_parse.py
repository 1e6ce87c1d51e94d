#!/usr/bin/python3
"""A scrape of /metrics parses with a real parser of Prometheus's text format
(python3-prometheus-client), and its values are those `gangrun status --json` shows.

Usage: check_metrics_parse.py GANGRUN_BINARY
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

GANGRUN = sys.argv[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


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
        print("check_metrics_parse: %d samples parse and match gangrun status" % len(samples))
    finally:
        subprocess.run([GANGRUN, "stop", "--master", "127.0.0.1:" + port],
                       capture_output=True, timeout=60)
        job.wait(timeout=60)
