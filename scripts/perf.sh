#!/usr/bin/env bash
# Installs what is missing, builds ringo-perf and runs an all-reduce sweep on
# 4 local ranks (GPU memory where a GPU is usable, host memory otherwise) with
# verification on. Extra arguments go to ringo-perf.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/bazel_flags.sh
bazel build "${RINGO_BAZEL_FLAGS[@]}" //tools:ringo-perf
exec bazel-bin/tools/ringo-perf allreduce -np 4 -b 8 -e 64M -f 4 -c 1 "$@"
