#!/usr/bin/python3
"""bench/compare's arithmetic without running a benchmark: sizes and launch
segments, medians and spread, the best Open MPI setting, the targets, and the
command lines. Usage: compare_unit_test.py <path to bench/compare>"""

import argparse
import csv
import importlib.machinery
import importlib.util
import os
import sys
import tempfile


def load(path):
    loader = importlib.machinery.SourceFileLoader("compare", path)
    spec = importlib.util.spec_from_loader("compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


c = load(sys.argv[1])


def main():
    assert c.sizes_between(8, 64, 2) == [8, 16, 32, 64]
    assert c.fmt_size(256 << 20) == "256M" and c.fmt_size(12) == "12" and c.parse_size("4k") == 4096
    segs = c.segments(c.sizes_between(8, 256 << 20, 2), 1.0)
    assert [s[1:] for s in segs] == [(100, 10), (30, 3), (10, 2), (3, 2)], segs
    assert sum(len(s[0]) for s in segs) == 26
    coarse = c.sizes_between(8, 256 << 20, 2, 16 << 20)
    assert coarse[-4:] == [8 << 20, 16 << 20, 64 << 20, 256 << 20] and len(coarse) == 24
    assert c.sizes_between(8, 128, 2, 16) == [8, 16, 32, 128] and c.sizes_between(8, 8, 2, 1) == [8]
    segs = c.segments(coarse, 1.0)
    assert segs[-1] == ([64 << 20, 256 << 20], 3, 2), segs[-1]
    # A ratio change starts a new launch even with the same iteration counts.
    assert c.segments([8, 16, 64], 1.0) == [([8, 16], 100, 10), ([64], 100, 10)]
    assert c.median_spread([1.0, 2.0, 3.0]) == (2.0, 0.5)
    raw = [{"nranks": 2, "size": 1 << 20, "program": p, "time_us": t}
           for p, ts in (("ringo", [100, 110, 90]), ("ringo:memalloc", [80, 85, 75]),
                         ("ompi:default", [200, 210, 190]),
                         ("ompi:ring", [180, 170, 175]), ("gloo", [1000, 2000, 3000]))
           for t in ts]
    progs = c.programs_for(["ompi", "gloo"])
    [row] = c.build_table(raw, 2, [1 << 20], progs, True)
    assert row["ompi_config"] == "ring" and row["ompi"][0] == 175
    assert row["ringo_config"] == "memalloc" and row["ringo"][0] == 80, row
    assert abs(row["ringo"][2] - c.busbw(1 << 20, 80, 2)) < 1e-9
    assert abs(row["ringo_heap"][2] - c.busbw(1 << 20, 100, 2)) < 1e-9
    assert row["marks"] == [("busbw>=1.5xOMPI", True), (">=10xGloo", True)], row["marks"]
    # The heap setting alone (median 100 us against Open MPI's 175 and Gloo's 2000).
    assert row["marks_heap"] == [("busbw>=1.5xOMPI", True), (">=10xGloo", True)], row["marks_heap"]
    slow_heap = [dict(r, time_us=r["time_us"] * 1.5) if r["program"] == "ringo" else r for r in raw]
    [srow] = c.build_table(slow_heap, 2, [1 << 20], progs, True)
    assert srow["marks"] == row["marks"] and srow["marks_heap"][0] == ("busbw>=1.5xOMPI", False), srow
    said = []
    c.summarize_targets({2: [srow]}, "marks_heap", "heap", said.append)
    assert said[0] == "\n# targets (heap): 1 PASS, 1 MISS", said
    assert any("busbw>=1.5xOMPI: 0/1 PASS; MISS at 1M" in l for l in said), said
    assert c.targets(2, 8, (2.5, 0.0), None, None, True) == [("lat<=2us", False)]
    assert c.targets(4, 8, (1, 2.0), (1, 2.0), (1, 0.3), True) == [(">=OMPI", True),
                                                                   (">=10xGloo", False)]
    assert c.targets(2, 8, (1, 1), None, None, False) == []
    assert [p.name for p in progs[:2]] == ["ringo", "ringo:memalloc"]
    assert progs[0].command({"ringo-perf": "R"}, 2, ["-n", "5"], [])[0] == [
        "R", "allreduce", "-np", "2", "--host", "--bind-to", "core", "-n", "5"]
    assert progs[1].command({"ringo-perf": "R"}, 4, [], [])[0] == [
        "R", "allreduce", "-np", "4", "--host", "-R", "1"]
    cmd, env = progs[3].command({"ompi-perf": "O"}, 4, ["-n", "5"], ["mpirun"])
    assert cmd == ["mpirun", "--mca", "coll_tuned_use_dynamic_rules", "1", "--mca",
                   "coll_tuned_allreduce_algorithm", "4", "-np", "4", "O", "allreduce", "-n", "5"]
    assert env == {} and progs[4].command({"ompi-perf": "O"}, 2, [], [])[1] == c.MALLOC_ENV

    # With more ranks than cores the tables compare means; the latency target and
    # the "med" column still come from the medians.
    bimodal = [{"nranks": 4, "size": 8, "program": p, "time_us": t, "mean_us": m}
               for p, t, m in (("ringo", 12.0, 8.0), ("ringo", 12.5, 8.2), ("ringo", 11.0, 7.9),
                               ("ompi:default", 11.5, 13.0), ("ompi:default", 12.0, 12.5),
                               ("ompi:default", 11.8, 12.8))]
    [mrow] = c.build_table(bimodal, 4, [8], progs, True, "mean")
    assert mrow["ringo"][0] == 8.0 and mrow["ompi"][0] == 12.8, mrow
    assert mrow["ringo_median"][0] == 12.0 and mrow["ompi_median"][0] == 11.8, mrow
    assert mrow["marks"] == [(">=OMPI", True)], mrow["marks"]
    [drow] = c.build_table(bimodal, 4, [8], progs, True)
    assert drow["marks"] == [(">=OMPI", False)] and drow["ringo"][0] == 12.0, drow
    mlines = []
    c.print_table([mrow], 4, argparse.Namespace(datatype="float", op="sum"), mlines.append)
    assert any("mean per-iteration time" in l for l in mlines), mlines
    assert mlines[-1].split()[:3] == ["8", "|", "8.00"], mlines[-1]
    assert "0.98x" in mlines[-1] and "1.60x" in mlines[-1], mlines[-1]
    assert c.targets(2, 8, (2.5, 0.0), None, None, True, 1.5) == [("lat<=2us", True)]
    assert c.table_stat(4, argparse.Namespace(stat="median")) == "median"
    assert c.table_stat(1 << 20, argparse.Namespace(stat="auto")) == "mean"
    assert c.table_stat(1, argparse.Namespace(stat="auto")) == "median"

    # A table with a peer missing at one size, and the CSV written from it.
    raw.append({"nranks": 2, "size": 8, "program": "ringo", "time_us": 1.5})
    rows = c.build_table(raw, 2, [8, 1 << 20], progs, True)
    assert rows[0]["ompi"] is None and rows[0]["marks"] == [("lat<=2us", True)]
    assert rows[0]["ringo_config"] == "heap", rows[0]
    lines = []
    args = argparse.Namespace(datatype="float", op="sum")
    c.print_table(rows, 2, args, lines.append)
    assert lines[-2].split()[:4] == ["8", "|", "1.50", "0.01"], lines[-2]
    assert "n/a" in lines[-2] and "ring" in lines[-1] and "PASS" in lines[-1], lines
    with tempfile.TemporaryDirectory() as out:
        c.write_csvs(out, [dict(r, rep=0, p10="", p90="", wrong="0") for r in raw], {2: rows},
                     [[0, 268435456, "1", "10.0"]])
        with open(os.path.join(out, "compare.csv")) as f:
            written = list(csv.DictReader(f))
        assert [r["size"] for r in written] == ["8", str(1 << 20)]
        assert written[1]["ompi_best_setting"] == "ring" and written[0]["gloo_time_us"] == ""
        assert written[1]["targets"] == "busbw>=1.5xOMPI=PASS;>=10xGloo=PASS"
        assert written[1]["heap_targets"] == "busbw>=1.5xOMPI=PASS;>=10xGloo=PASS"
    print("PASSED: bench/compare arithmetic")


if __name__ == "__main__":
    main()
