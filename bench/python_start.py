#!/usr/bin/env python3
"""Interpreter start-up under the shim (issue 20: under 10 ms more than without it): `python -c
pass` and `python -c "import random; random.seed(1)"`, RUNS runs each without the shim, with it,
and with it under REPROD_SEED_POLICY=off (the shim loaded, its Python hook not added: what the
hook itself costs is the difference of the last two), alternated so that load on the machine
falls on all alike; prints the medians and exits 1 when the shim's CPU time exceeds the native
one by LIMIT_MS.

    bench/python_start.py SHIM [PYTHON...]     (default: /usr/bin/python3)
"""
import os
import statistics
import subprocess
import sys
import time

RUNS = 50
LIMIT_MS = 10.0
PROGRAMS = (("-c pass", ["-c", "pass"]),
            ("-c 'import random; random.seed(1)'", ["-c", "import random; random.seed(1)"]))


def start_ms(command, environment):
    """(wall, CPU) milliseconds of one run: the CPU time (user + system, the child's own, from
    wait4) is what the shim adds on a machine whose load makes the wall time noisy."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=environment)
    _, status, usage = os.wait4(child.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit("%s failed: exit status %d" % (command, child.returncode))
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def main():
    shim = os.path.abspath(sys.argv[1])
    pythons = sys.argv[2:] or ["/usr/bin/python3"]
    native = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("REPROD_")}
    preloaded = dict(native, LD_PRELOAD=shim)
    without_hook = dict(preloaded, REPROD_SEED_POLICY="off")
    status = 0
    for python in pythons:
        for name, arguments in PROGRAMS:
            command = [python] + arguments
            start_ms(command, native), start_ms(command, preloaded)  # warm the page cache
            without, under, hookless = [], [], []
            for _ in range(RUNS):
                without.append(start_ms(command, native))
                under.append(start_ms(command, preloaded))
                hookless.append(start_ms(command, without_hook))
            medians = [statistics.median(run[i] for run in runs)
                       for runs in (without, under, hookless) for i in (0, 1)]
            wall, cpu = medians[2] - medians[0], medians[3] - medians[1]
            # The verdict on the CPU time, the start-up's own cost; the wall time is shown too.
            verdict = "ok" if cpu < LIMIT_MS else "OVER"
            print("%s %s: medians of %d, native %.1f ms wall %.1f ms CPU; under the shim %.1f ms "
                  "wall %.1f ms CPU (%+.2f wall, %+.2f CPU: %s, limit %.0f ms); the Python hook's "
                  "share %+.2f ms CPU"
                  % (python, name, RUNS, medians[0], medians[1], medians[2], medians[3], wall, cpu,
                     verdict, LIMIT_MS, medians[3] - medians[5]))
            if cpu >= LIMIT_MS:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
