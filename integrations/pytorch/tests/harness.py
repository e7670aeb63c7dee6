"""Runs the ranks of a ringo_torch test as processes and reports its cases.

The parent (a test's main) starts one process per rank of the same script
with --worker, under a deadline, and collects the cases each rank reports on
stdout ("CASE {json}" lines). A case passes when every rank reported it and
all of them passed; a rank that did not report is a failure that quotes the
end of its output. Cases are printed and written as JUnit XML to
$XML_OUTPUT_FILE (Bazel counts them), skipped cases with their reason.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

PYTHON = os.environ.get("RINGO_TORCH_PYTHON", "/usr/bin/python3")


def package_dir():
    """The directory holding the ringo_torch package (with its _C.so)."""
    if "RINGO_TORCH_PATH" in os.environ:
        return os.environ["RINGO_TORCH_PATH"]
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "ringo"), "integrations", "pytorch")
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_dir(), env.get("PYTHONPATH", "")] if p)
    # Ranks share 2 cores in CI: one intra-op thread each.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("RINGO_SOCKET_IFNAME", "lo")
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def scratch_dir():
    return tempfile.mkdtemp(prefix="ringo_torch_", dir=os.environ.get("TEST_TMPDIR"))


class Ranks:
    """Processes of one run; outputs in files (no pipe can fill up)."""

    def __init__(self, argv_for_rank, nranks, env=None, deadline_s=120.0):
        self.dir = scratch_dir()
        self.nranks = nranks
        self.deadline_s = deadline_s
        self.procs, self.logs = [], []
        for r in range(nranks):
            path = os.path.join(self.dir, "rank%d.log" % r)
            self.logs.append(path)
            with open(path, "wb") as out:
                self.procs.append(subprocess.Popen(argv_for_rank(r), stdout=out, stderr=subprocess.STDOUT,
                                                   env=child_env(env), start_new_session=True))
        self.started = time.monotonic()

    def wait(self):
        """Exit codes (None for a rank killed at the deadline) and outputs."""
        codes = [None] * self.nranks
        while time.monotonic() - self.started < self.deadline_s:
            codes = [p.poll() for p in self.procs]
            if all(c is not None for c in codes):
                break
            time.sleep(0.05)
        for r, p in enumerate(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                codes[r] = None
            else:
                codes[r] = p.returncode
        outputs = []
        for path in self.logs:
            with open(path, "rb") as f:
                outputs.append(f.read().decode(errors="replace"))
        return codes, outputs


def worker_argv(script, rank, nranks, init_method, extra):
    return [PYTHON, script, "--worker", "--rank", str(rank), "--nranks", str(nranks), "--init", init_method] + list(extra)


def file_init():
    return "file://" + os.path.join(scratch_dir(), "store")


def parse_cases(output):
    cases = {}
    for line in output.splitlines():
        if line.startswith("CASE "):
            c = json.loads(line[5:])
            cases[c["name"]] = c
    return cases


class Report:
    """Cases of one test: passed, failed (with a message) or skipped."""

    def __init__(self, suite):
        self.suite = suite
        self.cases = []

    def add(self, name, status, message="", seconds=0.0):
        assert status in ("passed", "failed", "skipped")
        self.cases.append((name, status, message, seconds))
        tag = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[status]
        print("%s %s%s" % (tag, name, (": " + message) if message else ""), flush=True)

    def merge_ranks(self, prefix, codes, outputs, expect=None):
        """Adds the cases the ranks reported. `expect`: names every rank must report."""
        per_rank = [parse_cases(o) for o in outputs]
        names = []
        for cases in per_rank:
            for n in cases:
                if n not in names:
                    names.append(n)
        for n in expect or []:
            if n not in names:
                names.append(n)
        for n in names:
            problems, skipped, seconds = [], None, 0.0
            for r, cases in enumerate(per_rank):
                c = cases.get(n)
                if c is None:
                    problems.append("rank %d did not report it (exit %s); its output ends: %s" %
                                    (r, codes[r], tail(outputs[r])))
                elif c["status"] == "failed":
                    problems.append("rank %d: %s" % (r, c.get("message", "")))
                elif c["status"] == "skipped":
                    skipped = c.get("message", "")
                seconds = max(seconds, c.get("seconds", 0.0) if c else 0.0)
            if problems:
                self.add(prefix + n, "failed", "; ".join(problems), seconds)
            elif skipped is not None:
                self.add(prefix + n, "skipped", skipped, seconds)
            else:
                self.add(prefix + n, "passed", "", seconds)
        if not names:
            self.add(prefix + "ranks", "failed", "no rank reported a case; outputs: " +
                     " | ".join("rank %d (exit %s): %s" % (r, codes[r], tail(o)) for r, o in enumerate(outputs)))

    def finish(self):
        path = os.environ.get("XML_OUTPUT_FILE")
        if path:
            failed = sum(1 for c in self.cases if c[1] == "failed")
            skipped = sum(1 for c in self.cases if c[1] == "skipped")
            root = ET.Element("testsuites")
            suite = ET.SubElement(root, "testsuite", name=self.suite, tests=str(len(self.cases)),
                                  failures=str(failed), skipped=str(skipped))
            for name, status, message, seconds in self.cases:
                case = ET.SubElement(suite, "testcase", classname=self.suite, name=name, time="%.3f" % seconds)
                if status == "failed":
                    ET.SubElement(case, "failure", message=message[:2000])
                elif status == "skipped":
                    ET.SubElement(case, "skipped", message=message)
            ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
        counts = {s: sum(1 for c in self.cases if c[1] == s) for s in ("passed", "failed", "skipped")}
        print("%s: %d passed, %d failed, %d skipped" % (self.suite, counts["passed"], counts["failed"], counts["skipped"]))
        return 1 if counts["failed"] or not self.cases else 0


def tail(text, n=1500):
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


# ---- worker side -------------------------------------------------------------


def worker_parser():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--init", default="")
    return p


def emit(name, status, message="", seconds=0.0):
    print("CASE " + json.dumps({"name": name, "status": status, "message": message, "seconds": seconds}), flush=True)


class Cases:
    """Runs a worker's checks, each reported as one case. A check raises
    AssertionError (or anything) to fail, Skip to skip."""

    class Skip(Exception):
        pass

    def __init__(self):
        self.failed = 0

    def run(self, name, fn, *args, **kwargs):
        start = time.monotonic()
        try:
            fn(*args, **kwargs)
        except Cases.Skip as e:
            emit(name, "skipped", str(e), time.monotonic() - start)
            return
        except Exception as e:  # reported, and the worker goes on with the next case
            self.failed += 1
            emit(name, "failed", "%s: %s" % (type(e).__name__, str(e)[:1500]), time.monotonic() - start)
            return
        emit(name, "passed", "", time.monotonic() - start)


def main_guard(fn):
    """Exits the worker with a status: 0 when its cases ran (passed or not)."""
    try:
        fn()
    except Exception:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(3)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
