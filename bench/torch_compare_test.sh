#!/bin/bash
# bench/torch_compare end to end on a tiny sweep: both all-reduce tables (2
# ranks, 8 B..4 KiB), the DDP table (a small MLP), every result verified, the
# CSV files and report written.
#
# Usage: torch_compare_test.sh <bench/torch_compare> <a file of the ringo_torch package>
set -u
compare=$(realpath "$1")
package=$(dirname "$(dirname "$2")")  # .../integrations/pytorch (holds ringo_torch/)
out="${TEST_TMPDIR:-$(mktemp -d)}/torch_compare"
export RINGO_TIMEOUT_MS=${RINGO_TIMEOUT_MS:-60000}

"$compare" --package "$package" --out "$out" --ranks 2 -b 8 -e 4K -f 8 --reps 1 --loop-s 0.02 \
  --ddp-width 256 --ddp-io 64 --ddp-steps 2 --ddp-warmup 1 >"$out.txt" 2>&1
rc=$?
cat "$out.txt"
fail=0
if [[ $rc -ne 0 ]]; then
  echo "FAIL: bench/torch_compare exited with status $rc"
  fail=1
fi
for f in report.txt allreduce.csv ddp.csv; do
  if [[ ! -s "$out/$f" ]]; then
    echo "FAIL: no $out/$f"
    fail=1
  fi
done
# One row per size (8, 64, 512, 4K) with both backends measured and a verdict.
rows=$(grep -cE '^ +[0-9]+K? \| +[0-9.]+ +[0-9.]+ \| +[0-9.]+ +[0-9.]+ \| +[0-9.]+x \| (PASS|MISS)' "$out.txt")
if [[ $rows -ne 4 ]]; then
  echo "FAIL: $rows all-reduce table rows, want 4"
  fail=1
fi
for backend in ringo gloo; do
  if ! grep -qE "^$backend +\| +[0-9.]+ \| +[0-9.]+ \| +-?[0-9.]+% \| +[0-9.]+$" "$out.txt"; then
    echo "FAIL: no DDP row for $backend"
    fail=1
  fi
done
[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
