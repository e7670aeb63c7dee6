#!/bin/bash
# bench/compare end to end on a tiny sweep: ringo-perf, ompi-perf (four
# settings), gloo-perf and copy_bw all run, every result is verified, and the
# report, CSV files and plot are written.
#
# Usage: compare_test.sh <path to bench/compare>   (binaries from the runfiles)
# Skips (exit 0, "SKIPPED: ...") only when mpirun is not installed.
set -u
compare=$(realpath "$1")
bindir="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-ringo}"
out="${TEST_TMPDIR:-$(mktemp -d)}/compare"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIPPED: mpirun not installed"
  exit 0
fi
export RINGO_TIMEOUT_MS=${RINGO_TIMEOUT_MS:-60000}

"$compare" --bindir "$bindir" --out "$out" -b 8 -e 64K -f 8 --ranks 2 --reps 1 \
  --iters-scale 0.1 --timeout 120 >"$out.txt" 2>&1
rc=$?
cat "$out.txt"
fail=0
if [[ $rc -ne 0 ]]; then
  echo "FAIL: bench/compare exited with status $rc"
  fail=1
fi
for f in compare.txt compare.csv runs.csv copy_bw.csv compare.png; do
  if [[ ! -s "$out/$f" ]]; then
    echo "FAIL: no $out/$f"
    fail=1
  fi
done
if ! grep -q '^## 2 ranks, float sum' "$out.txt"; then
  echo "FAIL: no table for 2 ranks"
  fail=1
fi
# One row per size (8, 64, 512, 4K, 32K) with all three libraries measured.
rows=$(grep -cE '^ +[0-9]+K? \| +[0-9.]+ .*\| +[0-9.]+ .*\| +[0-9.]+ ' "$out.txt")
if [[ $rows -ne 5 ]]; then
  echo "FAIL: $rows complete table rows, want 5"
  fail=1
fi
if ! grep -q '^# runs: all verified' "$out.txt"; then
  echo "FAIL: not every run verified"
  fail=1
fi
# compare.csv: header and 5 rows, with a best Open MPI setting named.
if [[ $(tail -n +2 "$out/compare.csv" | cut -d, -f7 | grep -c .) -ne 5 ]]; then
  echo "FAIL: compare.csv lacks the best Open MPI setting on some rows"
  fail=1
fi
if [[ $fail -ne 0 ]]; then exit 1; fi
echo "PASSED"
