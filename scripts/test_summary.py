#!/usr/bin/env python3
"""Counts test cases (not Bazel targets) from the JUnit XML each test wrote.

Prints failing cases, then "N passed, N failed[, N skipped]". A test target
with no XML (it did not run, or crashed before writing one) counts as one
failed case. --extra DIR adds the JUnit files of checks run outside Bazel's
tests (scripts/check_layers.py). Exits 1 when anything failed.
"""
import glob
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def test_targets():
    out = subprocess.run(["bazel", "query", "tests(//...)"], capture_output=True, text=True, check=True)
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("//")]


def xml_paths(label):
    """The target's test.xml, or each shard's (shard_K_of_N/test.xml)."""
    package, name = label[2:].split(":")
    folder = os.path.join("bazel-testlogs", package, name)
    whole = os.path.join(folder, "test.xml")
    if os.path.exists(whole):
        return [whole]
    shards = sorted(glob.glob(os.path.join(folder, "shard_*_of_*", "test.xml")))
    return shards or [whole]


def main():
    passed = failed = skipped = 0
    failures = []
    extra = []
    if len(sys.argv) == 3 and sys.argv[1] == "--extra":
        extra = [("//scripts:check_layers", p) for p in sorted(glob.glob(os.path.join(sys.argv[2], "*.xml")))]
        if not extra:
            extra = [("//scripts:check_layers", os.path.join(sys.argv[2], "missing.xml"))]
    for label, path in [(label, path) for label in test_targets() for path in xml_paths(label)] + extra:
        if not os.path.exists(path):
            failed += 1
            failures.append(f"{label}: no test results (did not run)")
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            failed += 1
            failures.append(f"{label}: unreadable test.xml ({e})")
            continue
        cases = list(root.iter("testcase"))
        if not cases:
            failed += 1
            failures.append(f"{label}: no test cases in test.xml")
            continue
        for case in cases:
            name = f"{label} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.find("skipped") is not None or case.get("result") == "skipped" or \
                    case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    for f in failures:
        print(f"FAILED: {f}")
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
