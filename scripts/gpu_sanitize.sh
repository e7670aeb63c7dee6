#!/bin/bash
# compute-sanitizer's memcheck and racecheck over a small run of each
# collective on GPU buffers: two ranks (forked processes) on one GPU, sizes
# 8 B to 256 KiB (the LL and Simple protocols), every result verified.
#
# Usage: scripts/gpu_sanitize.sh [path to ringo-perf]   (default bazel-bin/tools/ringo-perf)
# Exit status: 0 clean (or no GPU: prints SKIPPED; with RINGO_REQUIRE_GPU=1
# no GPU is a failure), 1 a tool reported an error or a run failed (each run
# has 150 s). Set COMPUTE_SANITIZER to use another compute-sanitizer, and
# RINGO_SANITIZE_COLLECTIVES (space-separated) to check fewer collectives.
set -u
perf=${1:-bazel-bin/tools/ringo-perf}
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  if [[ ${RINGO_REQUIRE_GPU:-0} == 1 ]]; then
    echo "FAIL: RINGO_REQUIRE_GPU=1, but no GPU is visible (nvidia-smi -L failed)"
    exit 1
  fi
  echo "SKIPPED: no GPU visible (nvidia-smi -L failed)"
  exit 0
fi
if [[ ! -x "$cs" ]]; then
  echo "FAIL: compute-sanitizer not found (set COMPUTE_SANITIZER)"
  exit 1
fi
fail=0
for tool in memcheck racecheck; do
  for coll in ${RINGO_SANITIZE_COLLECTIVES:-allreduce reducescatter allgather broadcast reduce}; do
    log=$(mktemp)
    timeout -k 10 150 "$cs" --tool "$tool" --error-exitcode 9 --target-processes all \
      "$perf" "$coll" -np 2 --ranks-per-gpu 2 -b 8 -e 256K -f 32 -n 2 -w 1 -c 1 >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | sort | uniq -c | tr -s ' ' | paste -sd';')
    if [[ $rc -ne 0 ]]; then
      echo "FAIL: $tool $coll: exit $rc ($summary)"
      tail -40 "$log"
      fail=1
    else
      echo "ok: $tool $coll ($summary)"
    fi
    rm -f "$log"
  done
done
exit $fail
