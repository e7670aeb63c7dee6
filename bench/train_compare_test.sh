#!/bin/bash
# bench/train_compare end to end, quick: every configuration once (a small
# model, 12 steps), the PyTorch DDP side when Debian's PyTorch is there, the
# targets' table, report.txt, results.csv and the plot.
#
# Usage: train_compare_test.sh <bench/train_compare> <ringo-train>
set -u
compare=$(realpath "$1")
binary=$(realpath "$2")
out="${TEST_TMPDIR:-$(mktemp -d)}/train_compare"
torch=()
/usr/bin/python3 -c "import torch" 2>/dev/null || torch=(--no-torch)
"$compare" --quick --steps 12 --no-build --binary "$binary" --out "$out" "${torch[@]}" >"$out.txt" 2>&1
rc=$?
cat "$out.txt"
fail=0
[[ $rc -eq 0 ]] || { echo "FAIL: bench/train_compare exited with status $rc"; fail=1; }
for f in report.txt results.csv train_compare.png; do
  [[ -s "$out/$f" ]] || { echo "FAIL: no $out/$f"; fail=1; }
done
for needle in "2 ranks / 1 rank throughput" "overhead with overlap" "targets met"; do
  grep -q "$needle" "$out.txt" || { echo "FAIL: no '$needle' in the report"; fail=1; }
done
if [[ ${#torch[@]} -eq 0 ]] && ! grep -q "PyTorch DDP gloo" "$out.txt"; then
  echo "FAIL: no PyTorch DDP comparison"
  fail=1
fi
echo "$((1 - fail)) passed, $fail failed"
exit $fail
