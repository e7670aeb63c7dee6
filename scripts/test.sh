#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite.
# Ends with the line "N passed, N failed[, N skipped]" counting test cases.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
source scripts/bazel_flags.sh
# The CUDA code for sm_90 alone (--config=cudadev): every line of it is
# compiled, in half the time of the default build's sm_90 machine code plus
# compute_80 PTX (the kernels are most of a cold build on two cores).
RINGO_BAZEL_FLAGS+=(--config=cudadev)
if ! bazel build "${RINGO_BAZEL_FLAGS[@]}" //...; then
  echo "the build failed: no test ran"
  echo "0 passed, 1 failed"
  exit 1
fi
bazel test "${RINGO_BAZEL_FLAGS[@]}" //... "$@"
rc=$?
# The layers: includes against direct dependencies, visibility against the
# layers, and tests/layering's examples refused (each a case in the summary).
layers=$(mktemp -d /tmp/ringo-layers.XXXXXX)
python3 scripts/check_layers.py --all "$layers" || rc=1
python3 scripts/test_summary.py --extra "$layers" || rc=1
rm -rf "$layers"
exit $rc
