#!/bin/bash
# ringo-perf with its ranks as threads of one process (-np 3 --threads): host
# memory where no GPU is visible, GPU memory where one is. Asserts a row for
# every size with #wrong 0 in both halves and no out-of-bounds writes. Then
# RINGO_REQUIRE_GPU=1: where no GPU is visible ringo-perf must refuse (exit
# status 2, the variable named) instead of measuring host memory; where one
# is, it must measure device memory.
#
# Usage: threads_perf_test.sh <path to ringo-perf>
set -u
if [[ $# -ne 1 ]]; then
  echo "usage: $0 <ringo-perf>" >&2
  exit 2
fi
perf=$(realpath "$1")
export RINGO_TIMEOUT_MS=${RINGO_TIMEOUT_MS:-60000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0

echo "+ $perf allreduce -np 3 --threads -b 8 -e 256K -f 8 -c 1 -n 5 -w 1"
timeout 120 "$perf" allreduce -np 3 --threads -b 8 -e 256K -f 8 -c 1 -n 5 -w 1 >"$out" 2>&1
rc=$?
cat "$out"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: exit status $rc"
  fail=1
fi
for ((s = 8; s <= 262144; s *= 8)); do
  row=$(awk -v s="$s" '$1 == s && $0 !~ /^#/' "$out")
  if [[ -z $row ]]; then
    echo "FAIL: no row for $s bytes"
    fail=1
  elif [[ $(awk '{print $9, $13}' <<<"$row") != "0 0" ]]; then
    echo "FAIL: wrong results at $s bytes: $row"
    fail=1
  fi
done
if ! grep -q "Out of bounds values : 0 OK" "$out"; then
  echo "FAIL: no '# Out of bounds values : 0 OK'"
  fail=1
fi
if ! grep -qE "^# Ringo .*, 3 ranks, (host|device) memory" "$out"; then
  echo "FAIL: the header does not say 3 ranks"
  fail=1
fi

echo "+ RINGO_REQUIRE_GPU=1 $perf allreduce -np 2 --threads -b 8 -e 8 -n 2 -w 1"
RINGO_REQUIRE_GPU=1 timeout 120 "$perf" allreduce -np 2 --threads -b 8 -e 8 -n 2 -w 1 >"$out" 2>&1
rc=$?
cat "$out"
if grep -q "device memory" "$out" && [[ $rc -eq 0 ]]; then
  echo "a GPU is visible: measured device memory, as required"
elif [[ $rc -eq 2 ]] && grep -q "RINGO_REQUIRE_GPU=1" "$out"; then
  echo "no GPU: refused, as required"
else
  echo "FAIL: RINGO_REQUIRE_GPU=1 neither measured device memory nor refused (exit status $rc)"
  fail=1
fi
[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
