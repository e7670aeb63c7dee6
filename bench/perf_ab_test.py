#!/usr/bin/python3
"""bench/perf_ab end to end on two copies of one ringo-perf (a verdict per
size from verified runs), and its verdict rule on made-up figures.
Usage: perf_ab_test.py <bench/perf_ab> <ringo-perf>"""

import importlib.machinery
import importlib.util
import subprocess
import sys


def load(path):
    loader = importlib.machinery.SourceFileLoader("perf_ab", path)
    spec = importlib.util.spec_from_loader("perf_ab", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    script, perf = sys.argv[1], sys.argv[2]
    ab = load(script)
    # Slower: above A's median by more than 5% and above every run of A.
    assert ab.verdict([10, 10.2, 9.9], [11, 11.2, 10.9]) == "slower"
    # 6% slower in the median but inside A's spread: level.
    assert ab.verdict([10, 12, 9], [10.6, 10.6, 10.6]) == "level"
    assert ab.verdict([10, 10.2, 9.9], [9, 9.1, 8.9]) == "faster"
    assert ab.verdict([10, 10, 10], [10.4, 10.4, 10.4]) == "level"
    out = subprocess.run([script, "--pairs", "2", "--a", perf, "--b", perf, "--", "allreduce", "-np", "2",
                          "--host", "-b", "8", "-e", "1K", "-f", "32", "-n", "20", "-w", "2"],
                         text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print(out.stdout)
    assert out.returncode == 0, out.returncode
    rows = [l for l in out.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
    assert [int(l.split()[0]) for l in rows] == [8, 256], rows
    assert all(l.split()[-1] in ("slower", "faster", "level") for l in rows), rows
    assert "wrong results: 0" in out.stdout
    print("perf_ab: verdicts and an end-to-end run checked")


if __name__ == "__main__":
    main()
