#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite.
# Ends with the line "N passed, N failed[, N skipped]" counting test cases.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
source scripts/bazel_flags.sh
if ! bazel build "${RINGO_BAZEL_FLAGS[@]}" //...; then
  echo "the build failed: no test ran"
  echo "0 passed, 1 failed"
  exit 1
fi
bazel test "${RINGO_BAZEL_FLAGS[@]}" //... "$@"
rc=$?
python3 scripts/test_summary.py || rc=1
exit $rc
