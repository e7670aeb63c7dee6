#!/usr/bin/python3
"""A rank that dies or stops while the others are all-reducing through
ringo_torch: every other rank's Python must raise RuntimeError naming it,
within the timeout given to init_process_group (which becomes Ringo's).

- killed, 2 ranks: rank 1 gets SIGKILL mid-loop; rank 0's message names rank 1.
- killed, 3 ranks: rank 1 gets SIGKILL; ranks 0 and 2 raise within the
  timeout. Naming rank 1 is checked, and reported as skipped (with the
  message) where the survivor names the ring neighbour it was waiting on
  instead: Ringo names the rank where a failure started only on that rank's
  neighbours so far.
- stopped, 2 ranks: rank 1 gets SIGSTOP (alive, silent); rank 0 raises after
  about the timeout (5 s, far below Ringo's default of 300 s), naming rank 1.
- hang, 3 ranks: rank 2 sleeps in Python before an all_reduce, past the
  others' timeout (4 s; RINGO_STALL_MS 1500): their RuntimeError carries
  Ringo's hang diagnosis naming rank 2 as not having entered it, and the
  flight record written on the timeout (RINGO_TRACE_DIR) lists the
  operations under torch's name ("all_reduce").

The survivors' messages are printed in the test log.

Usage: fault_test.py
"""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MARGIN_S = 3.0  # detection latency allowed past the moment of the kill


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist

    import ringo_torch  # noqa: F401

    dist.init_process_group("ringo", init_method=args.init, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=args.timeout))
    x = torch.ones(256 * 1024)
    if args.sleeper >= 0:
        for _ in range(3):
            dist.all_reduce(x)
        if args.rank == args.sleeper:
            time.sleep(args.timeout + 6)
            return
        try:
            dist.all_reduce(x)
            print("NO ERROR", flush=True)
        except RuntimeError as e:
            print("HANG %s" % str(e).replace("\n", " | "), flush=True)
        return
    done = 0
    while True:
        try:
            dist.all_reduce(x)
        except RuntimeError as e:
            print("RAISED %.3f %s" % (time.time(), str(e).replace("\n", " ")), flush=True)
            # A later operation fails at once, with the first failure's message.
            start = time.monotonic()
            try:
                dist.all_reduce(torch.ones(4))
                print("LATER no error", flush=True)
            except RuntimeError as e2:
                print("LATER %.3f %s" % (time.monotonic() - start, str(e2).replace("\n", " ")), flush=True)
            return
        done += 1
        x.fill_(1.0)
        if done == 3:
            print("READY", flush=True)


def scenario(report, name, n, victim, signo, timeout_s, must_name):
    script = os.path.abspath(__file__)
    init = harness.file_init()
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, n, init, ["--timeout", str(timeout_s)]),
                          n, deadline_s=60 + timeout_s)
    # Wait until every rank is in the all-reduce loop, then strike.
    start = time.monotonic()
    while time.monotonic() - start < 60:
        logs = [open(p, errors="replace").read() for p in ranks.logs]
        if all("READY" in text for text in logs) or any(p.poll() is not None for p in ranks.procs):
            break
        time.sleep(0.05)
    struck = time.time()
    os.kill(ranks.procs[victim].pid, signo)
    if signo == signal.SIGSTOP:
        # Keep it stopped past the survivors' timeout, then let it be killed.
        while time.monotonic() - start < 60 + timeout_s and any(
                p.poll() is None for r, p in enumerate(ranks.procs) if r != victim):
            time.sleep(0.05)
        os.kill(ranks.procs[victim].pid, signal.SIGKILL)
    codes, outputs = ranks.wait()
    for r in range(n):
        if r == victim:
            continue
        case = "%s.rank%d" % (name, r)
        lines = outputs[r].splitlines()
        raised = [l for l in lines if l.startswith("RAISED ")]
        later = [l for l in lines if l.startswith("LATER ")]
        if not raised:
            report.add(case, "failed", "no RuntimeError (exit %s): %s" % (codes[r], harness.tail(outputs[r])))
            continue
        stamp, message = raised[0].split(" ", 2)[1:]
        after = float(stamp) - struck
        print("rank %d raised %.2f s after the %s: %s" % (r, after, signal.Signals(signo).name, message))
        if later:
            print("rank %d then: %s" % (r, later[0]))
        problems = []
        if after > timeout_s + MARGIN_S:
            problems.append("raised %.2f s after the fault, the timeout is %d s" % (after, timeout_s))
        if signo == signal.SIGSTOP and after < 0.8 * timeout_s:
            problems.append("raised %.2f s after a stop, before the %d s timeout" % (after, timeout_s))
        if not later or "failed earlier" not in later[0]:
            problems.append("a later operation did not fail at once with the first error: %s" % later)
        report.add(case + ".raises_in_time", "failed" if problems else "passed", "; ".join(problems))
        named = re.search(r"\brank %d\b" % victim, message) is not None
        if named:
            report.add(case + ".names_rank%d" % victim, "passed")
        elif must_name:
            report.add(case + ".names_rank%d" % victim, "failed",
                       "the message does not name rank %d: %s" % (victim, message))
        else:
            report.add(case + ".names_rank%d" % victim, "skipped",
                       "not yet: Ringo names the ring neighbour it was waiting on, not the rank where the "
                       "failure started: %s" % message)


def hang_scenario(report):
    script = os.path.abspath(__file__)
    init = harness.file_init()
    trace_dir = harness.scratch_dir()
    n, sleeper, timeout_s = 3, 2, 4
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, n, init, ["--timeout", str(timeout_s),
                                                                           "--sleeper", str(sleeper)]),
                          n, env={"RINGO_STALL_MS": "1500", "RINGO_TRACE_DIR": trace_dir},
                          deadline_s=60 + timeout_s)
    codes, outputs = ranks.wait()
    for r in range(n):
        if r == sleeper:
            continue
        case = "hang_3ranks.rank%d" % r
        hang = [l for l in outputs[r].splitlines() if l.startswith("HANG ")]
        if not hang:
            report.add(case, "failed", "no RuntimeError (exit %s): %s" % (codes[r], harness.tail(outputs[r])))
            continue
        message = hang[0][5:]
        print("rank %d: %s" % (r, message))
        want = ["Ringo hang diagnosis", "rank %d has not entered AllReduce" % sleeper, "outside Ringo"]
        missing = [w for w in want if w not in message]
        report.add(case + ".diagnosis_in_error", "failed" if missing else "passed",
                   "missing %s in: %s" % (missing, message) if missing else "")
    records = [os.path.join(trace_dir, f) for f in os.listdir(trace_dir) if f.endswith(".jsonl")]
    labelled = [f for f in records if '"label":"all_reduce"' in open(f).read()]
    report.add("hang_3ranks.records_name_torch_ops", "passed" if labelled else "failed",
               "" if labelled else "no flight record with label all_reduce among %s" % records)


def main():
    p = harness.worker_parser()
    p.add_argument("--timeout", type=int, default=10)
    p.add_argument("--sleeper", type=int, default=-1)
    args = p.parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    report = harness.Report("fault")
    scenario(report, "killed_2ranks", 2, 1, signal.SIGKILL, 10, must_name=True)
    scenario(report, "killed_3ranks", 3, 1, signal.SIGKILL, 10, must_name=False)
    scenario(report, "stopped_2ranks", 2, 1, signal.SIGSTOP, 5, must_name=True)
    hang_scenario(report)
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
