#!/usr/bin/python3
"""gangrun-bench says what it cannot do: --help prints the options and exits 0; a bad option or
value gets one line naming it and exit 2; past the hard file limit, one line naming the limit
and the node count it can simulate, and exit 2, before any node is simulated.

Usage: check_bench_options.py GANGRUN_BENCH
"""

import resource
import subprocess
import sys

BENCH = sys.argv[1]
failures = []


def run(args, limit=None):
    def lower_limit():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    done = subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=60,
                          preexec_fn=lower_limit)
    return done.returncode, done.stdout, done.stderr


def expect(args, code, stream, text, limit=None):
    got, out, err = run(args, limit)
    where = out if stream == "stdout" else err
    first = where.splitlines()[0] if where.strip() else ""
    if got != code or text not in first:
        failures.append(f"{args}: exit {got}, first {stream} line {first!r}; "
                        f"wanted {code} and {text!r}\n  stdout {out!r}\n  stderr {err!r}")


for bench in ("rendezvous", "recovery", "store"):
    expect([bench, "--help"], 0, "stdout", "usage: gangrun-bench " + bench)
expect(["rendezvous", "--nodes", "abc"], 2, "stderr", "--nodes: 'abc' is not a value it takes")
expect(["rendezvous", "--nodes", "12abc"], 2, "stderr", "--nodes: '12abc'")
expect(["rendezvous", "--nodes", "99999999999"], 2, "stderr", "--nodes: '99999999999'")
expect(["rendezvous", "--duration", "nan"], 2, "stderr", "--duration: 'nan'")
expect(["rendezvous", "--transport", "udp"], 2, "stderr", "--transport: 'udp'")
# Values a run cannot have, refused before anything starts (they crashed or hung it).
expect(["rendezvous", "--nodes", "0"], 2, "stderr", "--nodes: '0' is not a value it takes "
       "(an integer of at least 1)")
expect(["rendezvous", "--nodes", "-3"], 2, "stderr", "(an integer of at least 1)")
expect(["rendezvous", "--heartbeat_interval", "0"], 2, "stderr",
       "(a number of at least 0.01)")
expect(["recovery", "--nodes", "1"], 2, "stderr", "(an integer of at least 2)")
expect(["store", "--requests", "0"], 2, "stderr", "(an integer of at least 1)")
expect(["rendezvous", "--bogus", "1"], 2, "stderr", "unknown option --bogus")
expect(["rendezvous", "--nodes"], 2, "stderr", "--nodes needs a value")
expect(["nothing"], 2, "stderr", "usage: gangrun-bench rendezvous|recovery|store")
# 30,000 nodes with 1,000 files: refused at once, with the count that fits.
expect(["rendezvous", "--nodes", "30000", "--heartbeat_interval", "1", "--duration", "1"], 2,
       "stderr", "the hard file limit is 1000, enough for 936 nodes", limit=1000)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("gangrun-bench: help, bad options and the file limit each answered in one line")
