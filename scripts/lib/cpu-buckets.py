#!/usr/bin/env python3
"""Splits a CPU profile of cellserver into the parts of a decision's path.

Usage: cpu-buckets.py BINARY PROFILE

Each sample goes to the first part (in the order below) that a frame of its
stack matches, so a sample under raft's log store counts as the log store
even when raft's leader loop is further down the stack. Prints each part's
share of the samples. Used by scripts/cpu-per-decision.sh (PPROF=dir).
"""
import collections
import re
import subprocess
import sys

PARTS = [
    ("GC and memory release", r"runtime\.gcBgMarkWorker|runtime\.gcAssist|runtime\.bgsweep|runtime\.bgscavenge|"
     r"runtime\.markroot|FreeOSMemory|releaseMemory|runtime\.gcStart"),
    ("log store (raft-wal or raft-boltdb)", r"raft-wal|raft-boltdb|bbolt|LogCache\)\.StoreLogs"),
    ("FSM: shards.Store.Exec", r"shards\.\(\*Store\)\.Exec"),
    ("FSM: decode, deliver results", r"replication\.\(\*FSM\)"),
    ("resp: client read, parse, reply", r"cellserver/resp\."),
    ("raft transport (AppendEntries out or in)", r"raft\.\(\*Raft\)\.replicate|raft\.\(\*netPipeline\)|NetworkTransport|"
     r"raft\.\(\*Raft\)\.heartbeat|raft\.\(\*Raft\)\.processRPC"),
    ("submit path (queue, stamp, encode, complete)", r"replication\.\(\*Node\)"),
    ("raft, other (leader loop, runFSM)", r"hashicorp/raft\."),
    ("scheduler, netpoll, futex", r"runtime\.schedule|runtime\.findRunnable|runtime\.mcall|runtime\.park_m|"
     r"runtime\.netpoll|runtime\.goexit0|runtime\.sysmon|runtime\.mstart"),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = subprocess.run(["go", "tool", "pprof", "-raw", sys.argv[1], sys.argv[2]],
                         capture_output=True, text=True, check=True).stdout
    lines = out.split("\n")
    loc = lines.index("Locations")
    funcs, cur = {}, None
    for line in lines[loc + 1:]:
        if line.startswith("Mappings"):
            break
        m = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = [m.group(2)]
            continue
        m = re.match(r"\s+(\S+) \S+:\d+", line)
        if m and cur:
            funcs[cur].append(m.group(1))
    parts, total = collections.Counter(), 0
    for line in lines[lines.index("Samples:") + 2:loc]:
        if ":" not in line:
            continue
        count, ids = line.split(":", 1)
        n = int(count.split()[0])
        stack = " ".join(f for i in ids.split() for f in funcs.get(i, []))
        part = next((name for name, rx in PARTS if re.search(rx, stack)), "other")
        parts[part] += n
        total += n
    for part, n in parts.most_common():
        print(f"  {part:46s} {100 * n / total:5.1f} %")


main()
