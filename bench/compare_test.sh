#!/bin/bash
# bench/compare end to end on a tiny sweep: ringo-perf, ompi-perf (four
# settings), gloo-perf and copy_bw all run, every result is verified, and the
# report, CSV files and plot are written; then -c sendrecv and -c alltoall
# against Open MPI.
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
if ! grep -q '^## 2 ranks, allreduce float sum' "$out.txt"; then
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
# Point-to-point against MPI_Sendrecv / MPI_Alltoall: both run and verify,
# the busbw factor is nccl-tests' and the 64 KiB row carries the target.
for coll in sendrecv alltoall; do
  "$compare" -c "$coll" --bindir "$bindir" --out "$out-$coll" -b 32K -e 64K --ranks 2 --reps 1 \
    --iters-scale 0.1 --timeout 120 >"$out-$coll.txt" 2>&1
  rc=$?
  cat "$out-$coll.txt"
  if [[ $rc -ne 0 ]] || ! grep -q '^# runs: all verified' "$out-$coll.txt"; then
    echo "FAIL: bench/compare -c $coll exited with status $rc or did not verify"
    fail=1
  fi
  if ! grep -q "^## 2 ranks, $coll float sum" "$out-$coll.txt" || grep -q 'gloo' "$out-$coll.txt"; then
    echo "FAIL: -c $coll: no $coll table, or Gloo ran"
    fail=1
  fi
  if ! grep -qE '^ +64K \|.*>=OMPI (PASS|MISS)' "$out-$coll.txt"; then
    echo "FAIL: -c $coll: the 64K row has no >=OMPI target"
    fail=1
  fi
done
factor=$(grep -c "nccl-tests' factor 1;" "$out-sendrecv.txt")
if [[ $factor -ne 1 ]]; then
  echo "FAIL: sendrecv's busbw factor is not 1"
  fail=1
fi
if [[ $fail -ne 0 ]]; then exit 1; fi
echo "PASSED"
