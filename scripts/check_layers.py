#!/usr/bin/env python3
"""The layers, checked: every file includes only what its target may.

A C, C++ or CUDA file may include (with quotes) only files of its own
target and the headers of the target's direct dependencies; a .cu file (and
a device header that only nvcc rules use) only the inputs its nvcc rule
declares. Bazel's sandbox lets a file reach every header of its transitive
dependencies, and GCC has no layering_check, so this is what keeps a file
from leaning on a layer its target does not name: together with the
visibility of each target (the root BUILD's package groups), an upward or
sideways dependency fails here or in the build.

The targets come from `bazel query --output=xml`; manual targets (the
refused examples of tests/layering) are left out unless named with
--target. Includes that are not files of the repository (system and
external headers) are not checked.

  check_layers.py                 check every target; exit 1 on a violation
  check_layers.py --target L ...  check only these targets (manual ones too)
  check_layers.py --graph         print the folders' include graph, each
                                  edge marked down, sideways or UP by
                                  FOLDER_RANKS below (production code only)
  check_layers.py --visibility    for every library of a layer, the libraries
                                  Bazel lets it depend on (query visible());
                                  exit 1 if one is of its own layer's rank or
                                  above, in another package
  check_layers.py --refused       the examples of tests/layering, each of
                                  which must be refused (visibility: bazel
                                  build --nobuild fails; an include past the
                                  direct dependencies: this check fails)
  check_layers.py --all DIR       the three checks, each a JUnit file in DIR
                                  (scripts/test.sh: counted with the tests)
  check_layers.py --junit FILE    also write the result as one JUnit case
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXTS = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh")

# The layers, lowest first, for --graph: a folder may include folders of a
# lower rank. Folders of one rank are siblings (they must not include each
# other). A folder not listed takes its parent's rank.
FOLDER_RANKS = {
    "include": 0,
    "base": 1,
    "topology": 2,
    "transport": 3,
    "transport/fifo": 4,
    "transport/bootstrap": 5,
    "transport/shm": 6,
    "transport/cuda": 6,
    "transport/net": 6,
    "transport/connect": 7,
    "kernels": 8,
    "kernels/cuda": 9,
    "collectives/plan": 10,
    "collectives/control": 11,
    "collectives/engines": 12,
    "collectives": 13,
    "launch": 14,
    "tools": 15,
    "trainer": 15,
    "integrations": 15,
    "bench": 16,  # bench/peers runs ringo-perf's driver on other libraries
    "examples": 15,
    "": 15,  # the root package: libringo.so and libnccl.so.2
}
NOT_PRODUCTION = ("tests", "third_party", "bazel", "scripts", "docs")


def label_to_path(label):
    """//pkg:path/file -> pkg/path/file; None for external labels."""
    if not label.startswith("//"):
        return None
    pkg, _, name = label[2:].partition(":")
    return os.path.join(pkg, name) if pkg else name


def query(root):
    expr = 'kind("cc_library|cc_binary|cc_test|genrule|filegroup", //...)'
    out = subprocess.run(["bazel", "query", expr, "--output=xml"], cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("check_layers: bazel query failed:\n" + out.stderr[-3000:])
    return ET.fromstring(out.stdout)


class Rule:
    def __init__(self, element):
        self.label = element.get("name")
        self.kind = element.get("class")
        self.pkg = self.label[2:].partition(":")[0]
        self.attrs = collections.defaultdict(list)
        self.tags = []
        for child in element:
            name = child.get("name")
            if child.tag == "list":
                for item in child:
                    value = item.get("value")
                    if name == "tags":
                        self.tags.append(value)
                    elif value is not None:
                        self.attrs[name].append(value)


class Build:
    def __init__(self, root, tree):
        self.root = root
        self.rules = {}
        for element in tree.iter("rule"):
            rule = Rule(element)
            self.rules[rule.label] = rule
        self._expanded = {}

    def files(self, labels):
        """The repository files that `labels` name, filegroups expanded."""
        out = set()
        for label in labels:
            rule = self.rules.get(label)
            if rule is not None and rule.kind == "filegroup":
                if label not in self._expanded:
                    self._expanded[label] = set()  # no cycles
                    self._expanded[label] = self.files(rule.attrs["srcs"])
                out |= self._expanded[label]
                continue
            if rule is not None:
                continue  # a rule's outputs are not sources
            path = label_to_path(label)
            if path and os.path.isfile(os.path.join(self.root, path)):
                out.add(path)
        return out

    def own(self, rule):
        return self.files(rule.attrs["srcs"] + rule.attrs["hdrs"] + rule.attrs.get("textual_hdrs", []))

    def exported(self, label):
        """A dependency's headers: the names they may be included by."""
        rule = self.rules.get(label)
        if rule is None or rule.kind not in ("cc_library",):
            return set(), []
        return self.files(rule.attrs["hdrs"] + rule.attrs.get("textual_hdrs", [])), rule.attrs.get("includes", [])


def resolve(root, including, name, include_dirs):
    """The repository file `#include "name"` in `including` reads, or None."""
    candidates = [name] + [os.path.normpath(os.path.join(d, name)) for d in include_dirs]
    candidates.append(os.path.normpath(os.path.join(os.path.dirname(including), name)))
    for c in candidates:
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def includes_of(root, path):
    with open(os.path.join(root, path), errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def include_dirs(build):
    """Every `includes` root of the repository's libraries (include/ for ringo/ringo.h)."""
    dirs = set()
    for rule in build.rules.values():
        for d in rule.attrs.get("includes", []):
            dirs.add(os.path.normpath(os.path.join(rule.pkg, d)))
    return sorted(dirs)


def check(build, labels):
    """Violations: (file, line, included, target, why)."""
    dirs = include_dirs(build)
    owners = collections.defaultdict(set)  # file -> cc rules and nvcc genrules holding it
    for rule in build.rules.values():
        if rule.kind in ("cc_library", "cc_binary", "cc_test", "genrule"):
            for f in build.own(rule):
                owners[f].add(rule.label)
    problems = []
    for label in labels:
        rule = build.rules[label]
        own = build.own(rule)
        if rule.kind == "genrule":
            if not any(f.endswith(".cu") for f in own):
                continue
            allowed = own
            # The .cu files, and the device headers no C++ target holds.
            checked = {f for f in own if f.endswith(".cu") or
                       not any(build.rules[o].kind != "genrule" for o in owners[f])}
        else:
            allowed = set(own)
            for dep in rule.attrs["deps"]:
                hdrs, _ = build.exported(dep)
                allowed |= hdrs
            checked = own
        for path in sorted(checked):
            if not path.endswith(SOURCE_EXTS):
                continue
            for number, name in includes_of(build.root, path):
                target = resolve(build.root, path, name, dirs)
                if target is None or target in allowed:
                    continue
                holders = sorted(o for o in owners.get(target, ()) if build.rules[o].kind == "cc_library")
                why = ("it is a header of " + ", ".join(holders) + ", not a direct dependency") if holders \
                    else "no library exports it"
                problems.append((path, number, name, label, why))
    return problems


def rank(folder):
    while folder:
        if folder in FOLDER_RANKS:
            return FOLDER_RANKS[folder]
        folder = os.path.dirname(folder)
    return None


def package_rank(pkg):
    """A package's rank: its folder's, or its nearest listed parent's."""
    if pkg in FOLDER_RANKS:
        return FOLDER_RANKS[pkg]
    return rank(pkg) if pkg else None


def visibility(build):
    """Violations: (library, visible library) pairs that break the layers."""
    libraries = sorted(l for l, r in build.rules.items()
                       if r.kind == "cc_library" and "manual" not in r.tags and not r.pkg.startswith(NOT_PRODUCTION))
    problems = []
    for label in libraries:
        mine = build.rules[label].pkg
        out = subprocess.run(["bazel", "query", "visible(%s, kind('cc_library', //...))" % label],
                             cwd=build.root, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("check_layers: bazel query failed:\n" + out.stderr[-2000:])
        for other in out.stdout.split():
            rule = build.rules.get(other)
            if rule is None or rule.pkg == mine or rule.pkg.startswith(NOT_PRODUCTION) or "manual" in rule.tags:
                continue
            if package_rank(rule.pkg) >= package_rank(mine):
                problems.append((label, other))
    return libraries, problems


def layer_folder(path):
    """The folder a file counts in: the deepest folder FOLDER_RANKS names (internal/ counts as its parent)."""
    folder = os.path.dirname(path)
    while folder and folder not in FOLDER_RANKS:
        folder = os.path.dirname(folder)
    return folder or os.path.dirname(path)


def graph(build):
    dirs = include_dirs(build)
    files = subprocess.run(["git", "ls-files"], cwd=build.root, capture_output=True, text=True).stdout.split()
    edges = collections.Counter()
    for path in files:
        if not path.endswith(SOURCE_EXTS) or path.startswith(NOT_PRODUCTION) or re.search(r"_test\.(cc|c|cu)$", path):
            continue
        for _, name in includes_of(build.root, path):
            target = resolve(build.root, path, name, dirs)
            if target is None:
                continue
            a, b = layer_folder(path), layer_folder(target)
            if a != b:
                edges[(a, b)] += 1
    bad = 0
    for (a, b), n in sorted(edges.items()):
        ra, rb = rank(a), rank(b)
        kind = "down" if ra is not None and rb is not None and rb < ra else \
            "sideways" if ra is not None and ra == rb else "UP"
        bad += kind != "down"
        print("%-22s -> %-22s %3d  %s" % (a, b, n, kind))
    print("%d folder edges, %d upward or sideways" % (len(edges), bad))
    return bad


# tests/layering's examples: (target, how it must be refused, what the refusal says).
REFUSED = [
    ("//tests/layering:upward", "visibility", "is not visible"),
    ("//tests/layering:past_the_api", "visibility", "is not visible"),
    ("//tests/layering:transitive_include", "includes", "transport/fifo/fifo.h"),
]


def refused(build):
    """The examples that were not refused, with why."""
    problems = []
    for label, how, says in REFUSED:
        if how == "visibility":
            out = subprocess.run(["bazel", "build", "--nobuild", label], cwd=build.root, capture_output=True, text=True)
            text = out.stderr
            if out.returncode == 0 or says not in text:
                problems.append((label, "was not refused as not visible: " + text[-500:]))
        else:
            found = [p for p in check(build, [label]) if says in p[2]]
            if not found:
                problems.append((label, "its include of %s was not refused" % says))
    return problems


def write_junit(path, problems, checked, name="includes_match_direct_dependencies",
                what="include(s) outside the target's direct dependencies"):
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name="layers", tests="1", failures=str(1 if problems else 0))
    case = ET.SubElement(suite, "testcase", classname="layers", name=name)
    if problems:
        ET.SubElement(case, "failure", message="%d %s" % (len(problems), what))
    ET.SubElement(case, "system-out").text = "%d targets checked" % checked
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def production_and_test_targets(build):
    return sorted(l for l, r in build.rules.items()
                  if r.kind in ("cc_library", "cc_binary", "cc_test", "genrule") and "manual" not in r.tags)


def report_includes(problems, labels):
    for path, number, name, label, why in problems:
        print('%s:%d: includes "%s", which %s cannot: %s' % (path, number, name, label, why))
    print("check_layers: %d targets, %d include(s) outside their direct dependencies" % (len(labels), len(problems)))


def report_visibility(problems, libraries):
    for label, other in problems:
        print("%s may depend on %s, of its own layer or above" % (label, other))
    print("check_layers: %d libraries, %d dependencies that run sideways or upward are allowed" %
          (len(libraries), len(problems)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", nargs="*", default=None)
    p.add_argument("--graph", action="store_true")
    p.add_argument("--visibility", action="store_true")
    p.add_argument("--refused", action="store_true")
    p.add_argument("--all", metavar="DIR")
    p.add_argument("--junit")
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = p.parse_args()
    build = Build(args.root, query(args.root))
    if args.graph:
        graph(build)
        return 0
    if args.all:
        os.makedirs(args.all, exist_ok=True)
        rc = 0
        labels = production_and_test_targets(build)
        problems = check(build, labels)
        report_includes(problems, labels)
        write_junit(os.path.join(args.all, "includes.xml"), problems, len(labels))
        rc |= 1 if problems else 0
        libraries, vis = visibility(build)
        report_visibility(vis, libraries)
        write_junit(os.path.join(args.all, "visibility.xml"), vis, len(libraries),
                    "visibility_refuses_sideways_and_upward", "dependencies allowed sideways or upward")
        rc |= 1 if vis else 0
        bad = refused(build)
        for label, why in bad:
            print("%s: %s" % (label, why))
        print("check_layers: %d refused examples, %d not refused" % (len(REFUSED), len(bad)))
        write_junit(os.path.join(args.all, "refused.xml"), bad, len(REFUSED), "examples_of_tests_layering_are_refused",
                    "example(s) not refused")
        return rc | (1 if bad else 0)
    if args.refused:
        bad = refused(build)
        for label, why in bad:
            print("%s: %s" % (label, why))
        print("check_layers: %d refused examples, %d not refused" % (len(REFUSED), len(bad)))
        return 1 if bad else 0
    if args.visibility:
        libraries, problems = visibility(build)
        report_visibility(problems, libraries)
        if args.junit:
            write_junit(args.junit, problems, len(libraries), "visibility_refuses_sideways_and_upward",
                        "dependencies allowed sideways or upward")
        return 1 if problems else 0
    labels = args.target or production_and_test_targets(build)
    problems = check(build, labels)
    report_includes(problems, labels)
    if args.junit:
        write_junit(args.junit, problems, len(labels))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
