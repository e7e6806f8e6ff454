#!/usr/bin/env python3
"""Before/after comparison of two sluice-bench builds in one session.

Runs the two binaries alternately (A B, B A, A B, ...) so that both see the
same machine, writes each run's JSON under --out, and prints per row the median
records per CPU-second of each and the median of the paired ratios (B over
the A run of the same round), which cancels most of the drift of a shared
machine. Example (base = a worktree of the commit before a change):

  bench/ab.py --a /tmp/base/build/rel/bench/sluice-bench \\
              --b build/rel/bench/sluice-bench --rounds 20 --out /tmp/ab \\
              -- --workload chained --repeat 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def load(path):
    with open(path) as f:
        return {(r["workload"], r["parallelism"]): r for r in json.load(f)["results"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--a", required=True, help="the 'before' sluice-bench")
    p.add_argument("--b", required=True, help="the 'after' sluice-bench")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--out", required=True, help="directory for the runs' JSON and output")
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- then sluice-bench's arguments")
    o = p.parse_args()
    args = o.args[1:] if o.args[:1] == ["--"] else o.args
    os.makedirs(o.out, exist_ok=True)
    runs = []
    for r in range(1, o.rounds + 1):
        pair = {}
        # ABBA: the order flips every round, so that whatever favours the
        # first or second run of a pair (caches, the host's frequency)
        # cancels out.
        order = (("a", o.a), ("b", o.b))
        for side, binary in order if r % 2 else order[::-1]:
            stem = os.path.join(o.out, f"{side}-{r}")
            with open(stem + ".txt", "w") as log:
                rc = subprocess.call([binary, *args, "--json", stem + ".json"], stdout=log,
                                     stderr=subprocess.STDOUT)
            if rc != 0:
                sys.exit(f"{binary} failed (exit {rc}); see {stem}.txt")
            pair[side] = load(stem + ".json")
        runs.append(pair)
        with open("/proc/loadavg") as f:
            print(f"round {r}/{o.rounds}, load {' '.join(f.read().split()[:3])}", flush=True)
    rows = sorted(runs[0]["a"].keys())
    print(f"{'workload':24s} {'p':>2s} {'A rec/cpu-s':>12s} {'B rec/cpu-s':>12s} "
          f"{'B/A paired':>11s}  range of B/A")
    for k in rows:
        a = [run["a"][k]["records_per_cpu_second"] for run in runs]
        b = [run["b"][k]["records_per_cpu_second"] for run in runs]
        ratios = [y / x for x, y in zip(a, b)]
        print(f"{k[0]:24s} {k[1]:2d} {statistics.median(a) / 1e6:11.2f}M "
              f"{statistics.median(b) / 1e6:11.2f}M {100 * (statistics.median(ratios) - 1):+10.1f}%"
              f"  {100 * (min(ratios) - 1):+.0f}% .. {100 * (max(ratios) - 1):+.0f}%")


if __name__ == "__main__":
    main()
