#!/usr/bin/env bash
# ringo-doctor on the records of three runs (doctor_scenario): a straggler
# (no disagreement; rank 2 last), a rank that stopped calling (the first
# disagreement is #8, rank 3 missing it), a mismatched call (#5: rank 1
# broadcast where the others all-reduced).
set -uo pipefail
scenario=$1
doctor=$2
fail=0
check() {  # check NAME OUTPUT PATTERN...
  local name=$1 out=$2; shift 2
  for p in "$@"; do
    if ! grep -qE -- "$p" <<<"$out"; then
      echo "FAIL $name: no line matches '$p' in:"; echo "$out" | sed 's/^/  /'; fail=1
    fi
  done
}
for mode in straggler missing mismatch; do
  dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/doctor.XXXXXX")
  RINGO_TRACE_DIR=$dir RINGO_STALL_MS=500 RINGO_STALL_ABORT=1 RINGO_TIMEOUT_MS=20000 "$scenario" "$mode" \
    > "$dir/run.log" 2>&1 || { echo "FAIL $mode: the scenario failed:"; cat "$dir/run.log"; fail=1; continue; }
  out=$("$doctor" "$dir" 2>&1)
  echo "== $mode"; echo "$out"
  case $mode in
    straggler)
      check straggler "$out" "records of 4" "every recorded collective matches on every rank" \
        "^ +2 \| +(1[6-9]|20) \|"  # rank 2 called last in most of the 20
      ;;
    missing)
      check missing "$out" "first disagreement at collective #8" "rank 3 has no entry for #8: its last collective is #7" \
        "ranks 0, 1, 2 reached AllReduce #8"
      ;;
    mismatch)
      check mismatch "$out" "first disagreement at collective #5" "rank 1 called Broadcast #5" \
        "ranks 0, 2, 3 called AllReduce #5"
      ;;
  esac
done
exit $fail
