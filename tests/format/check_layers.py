#!/usr/bin/env python3
"""The product's folders include one way (docs/ARCHITECTURE.md, "Rooms"):

    common <- proto <- rpc <- {store, node, scheduler} <- launcher <- {daemon, agent} <- cli

A file may include its own folder and the folders below it, never one above or beside it.
Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

BELOW = {
    "common": set(),
    "proto": {"common"},
    "rpc": {"common", "proto"},
    "node": {"common", "proto", "rpc"},
    "scheduler": {"common", "proto", "rpc"},
    "store": {"common", "proto", "rpc"},
    "launcher": {"common", "proto", "rpc", "store", "node", "scheduler"},
    "daemon": {"common", "proto", "rpc", "store", "node", "scheduler", "launcher"},
    "agent": {"common", "proto", "rpc", "store", "node", "scheduler", "launcher"},
    "cli": {"common", "proto", "rpc", "store", "node", "scheduler", "launcher", "daemon", "agent"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    if path.startswith(("gangrun/v1/", "grpc/health/", "etcd/")):
        return "proto"  # generated from proto/
    return path.split("/", 1)[0] if "/" in path else None


def main():
    root = sys.argv[1]
    files = subprocess.run(["git", "ls-files", "*.cc", "*.h"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    checked = 0
    wrong = []
    for name in files:
        room = name.split("/", 1)[0]
        if room not in BELOW:
            continue  # tests, bench: above everything
        checked += 1
        with open(os.path.join(root, name), encoding="utf-8") as source:
            for number, line in enumerate(source, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = folder_of(match.group(1))
                if target in BELOW and target != room and target not in BELOW[room]:
                    wrong.append(f"{name}:{number}: {room}/ includes {match.group(1)} ({target}/ "
                                 f"is not below {room}/)")
    if checked == 0:
        print("check_layers: no product sources from git ls-files", file=sys.stderr)
        return 1
    for line in wrong:
        print(line, file=sys.stderr)
    if wrong:
        return 1
    print(f"check_layers: {checked} files include only their own folder and those below it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
