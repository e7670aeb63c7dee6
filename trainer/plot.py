"""ringo-train's plot: loss and test accuracy against step for each run, and
the step-time breakdown per rank count, from one or more of its CSV files.

usage: python3 plot.py OUT.png RUN.csv [RUN.csv ...]
"""
import csv
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = [("data_ms", "data"), ("fwd_ms", "forward"), ("bwd_ms", "backward"),
         ("exposed_ms", "exposed comm"), ("opt_ms", "optimizer")]


def load(paths):
    runs = OrderedDict()
    for i, path in enumerate(paths):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                name = row["run"]
                if len(paths) > 1 and name in runs and runs[name]["file"] != i:
                    name = "%s (%d)" % (name, i + 1)
                run = runs.setdefault(name, {"file": i, "steps": defaultdict(list),
                                             "evals": [], "ranks": int(row["ranks"])})
                if row["kind"] == "step":
                    run["steps"][int(row["rank"])].append(row)
                elif row["kind"] == "eval":
                    run["evals"].append(row)
    return runs


def mean_breakdown(run):
    rank_means = []
    for rows in run["steps"].values():
        skip = min(5, len(rows) // 5)
        rows = rows[skip:]
        if not rows:
            continue
        rank_means.append({k: sum(float(r[k]) for r in rows) / len(rows) for k, _ in PARTS})
    if not rank_means:
        return None
    return {k: sum(m[k] for m in rank_means) / len(rank_means) for k, _ in PARTS}


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    runs = load(argv[2:])
    fig, (ax_loss, ax_acc, ax_time) = plt.subplots(1, 3, figsize=(16, 5))
    for name, run in runs.items():
        rank0 = run["steps"].get(0, [])
        if rank0:
            xs = [int(r["step"]) + 1 for r in rank0]
            ys = [float(r["loss"]) for r in rank0]
            window = max(1, len(ys) // 100)
            smooth = [sum(ys[max(0, i - window + 1):i + 1]) / len(ys[max(0, i - window + 1):i + 1])
                      for i in range(len(ys))]
            ax_loss.plot(xs, smooth, label="%s (rank 0)" % name, linewidth=1)
        evals = [e for e in run["evals"] if e["test_acc"] not in ("", "-1.000000")]
        if evals:
            ax_acc.plot([int(e["step"]) for e in evals],
                        [100 * float(e["test_acc"]) for e in evals], marker="o", label=name)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("training loss")
    ax_loss.set_yscale("log")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=8)
    ax_acc.set_xlabel("step")
    ax_acc.set_ylabel("test accuracy (%)")
    ax_acc.set_title("test accuracy")
    ax_acc.axhline(88, color="grey", linestyle=":", linewidth=1)
    if any(run["evals"] for run in runs.values()):
        ax_acc.legend(fontsize=8)
    labels, bottoms = [], []
    bars = [(name, mean_breakdown(run)) for name, run in runs.items()]
    bars = [(n, b) for n, b in bars if b]
    for i, (name, b) in enumerate(bars):
        bottom = 0.0
        for k, (key, label) in enumerate(PARTS):
            ax_time.bar(i, b[key], bottom=bottom, color="C%d" % k,
                        label=label if i == 0 else None)
            bottom += b[key]
        labels.append(name)
        bottoms.append(bottom)
    ax_time.set_xticks(range(len(labels)))
    ax_time.set_xticklabels(labels, rotation=20, fontsize=8)
    ax_time.set_ylabel("ms per step (mean over ranks and steps)")
    ax_time.set_title("step time breakdown")
    if bars:
        ax_time.legend(fontsize=8)
    fig.suptitle("ringo-train")
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
