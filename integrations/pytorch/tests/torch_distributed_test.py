#!/usr/bin/python3
"""PyTorch's own distributed tests with ringo_torch in gloo's place.

torch.testing._internal.distributed.distributed_test (shipped with Debian's
PyTorch 1.13) runs its gloo tests when BACKEND=gloo; here every gloo process
group it makes is a ringo_torch ProcessGroupRingo instead (the constructor
torch.distributed calls for "gloo" is replaced, in this process and in every
rank it spawns), so tests written against gloo's behaviour and words run on
Ringo unchanged. The monitored-barrier tests: a passing barrier, a rank
away (rank 0 names it, the others hear "successfully reached
monitoredBarrier, but received errors while waiting for send/recv from rank
0"), the first of several ranks away named, wait_all_ranks naming every
one, rank 0's own timeout ("Rank 0 timed out in monitoredBarrier"), and a
subgroup. World size 3.

PyTorch's test package imports expecttest, which Debian does not package:
a stand-in with the two names it uses is installed when it is missing.
"""

import os
import sys
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TESTS = [
    "test_monitored_barrier_gloo",
    "test_monitored_barrier_gloo_subgroup",
    "test_monitored_barrier_gloo_rank_0_timeout",
    "test_monitored_barrier_failure_order",
    "test_monitored_barrier_wait_all_ranks",
]

# Read by distributed_test at import, in this process and in each spawned rank.
os.environ.setdefault("BACKEND", "gloo")
os.environ.setdefault("WORLD_SIZE", "3")
os.environ.setdefault("TEMP_DIR", harness.scratch_dir())
os.environ.setdefault("RINGO_SOCKET_IFNAME", "lo")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, harness.package_dir())

if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
        sys.modules["expecttest"] = stand_in

import torch.distributed.distributed_c10d as c10d  # noqa: E402

import ringo_torch  # noqa: E402

SKIP = None
if ringo_torch.BACKEND_API:
    SKIP = "PyTorch 2.x builds groups from Backend objects; this swap is written for PyTorch 1.x's ProcessGroupGloo"
else:
    def _ringo_for_gloo(store, rank, size, timeout=None, *args, **kwargs):
        return ringo_torch.ProcessGroupRingo(store, rank, size, timeout)

    c10d.ProcessGroupGloo = _ringo_for_gloo

    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

    class RingoInGlooPlace(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()


class Result(unittest.TestResult):
    """Each test's outcome into the report."""

    def __init__(self, report):
        super().__init__()
        self.report = report
        self.started = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()

    def _name(self, test):
        return test.id().split(".")[-1]

    def _seconds(self):
        return time.monotonic() - self.started

    def addSuccess(self, test):
        self.report.add(self._name(test), "passed", "", self._seconds())

    def addFailure(self, test, err):
        self.report.add(self._name(test), "failed", self._exc_info_to_string(err, test)[-2000:], self._seconds())

    def addError(self, test, err):
        self.addFailure(test, err)

    def addSkip(self, test, reason):
        self.report.add(self._name(test), "skipped", reason, self._seconds())


def main():
    report = harness.Report("torch_distributed")
    if SKIP:
        for name in TESTS:
            report.add(name, "skipped", SKIP)
        sys.exit(report.finish())
    suite = unittest.TestSuite(RingoInGlooPlace(name) for name in TESTS)
    suite.run(Result(report))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
