#!/bin/bash
# ringo-perf launched by Open MPI's mpirun: 4 ranks on host memory, sizes 8 B
# to 1 MiB, results checked. Asserts the nccl-tests table (size count type
# redop root time algbw busbw #wrong, then the same four for in-place) has a
# row for every size with #wrong 0 in both halves, and the
# "# Out of bounds values : 0 OK" summary.
#
# Usage: mpirun_perf_test.sh <path to ringo-perf>
# Skips (exit 0, "SKIPPED: ...") only when mpirun is not installed.
set -u

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <ringo-perf>" >&2
  exit 2
fi
perf=$(realpath "$1")

if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIPPED: mpirun not installed"
  exit 0
fi

# Open MPI refuses root without these; in a sandbox (no ssh, no resource
# manager) the isolated launcher starts the ranks locally; shared-memory BTL
# without a single-copy mechanism needs no ptrace permission. Ringo itself does
# not use MPI: these only get the processes started.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm=isolated
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# A hang must fail the test, not run until Bazel's timeout.
export RINGO_TIMEOUT_MS=${RINGO_TIMEOUT_MS:-60000}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "+ mpirun --allow-run-as-root --oversubscribe -np 4 $perf allreduce -b 8 -e 1M -f 4 -c 1 --host"
timeout 240 mpirun --allow-run-as-root --oversubscribe -np 4 \
  "$perf" allreduce -b 8 -e 1M -f 4 -c 1 --host >"$out" 2>&1
rc=$?
cat "$out"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: mpirun exited with status $rc"
  exit 1
fi

# Expected sizes: 8 * 4^k up to 1 MiB.
expected=()
for ((s = 8; s <= 1048576; s *= 4)); do expected+=("$s"); done

fail=0
header=$(grep -cE '^#.*size.*count.*type.*redop.*root.*time.*algbw.*busbw.*#wrong.*time.*algbw.*busbw.*#wrong' "$out")
if [[ $header -lt 1 ]]; then
  echo "FAIL: no nccl-tests column header (size count type redop root time algbw busbw #wrong x2)"
  fail=1
fi

# Data rows: lines that do not start with '#' and whose first field is a
# number. Columns: 1 size, 2 count, 3 type, 4 redop, 5 root, 6-9 out-of-place
# (time algbw busbw #wrong), 10-13 in-place.
mapfile -t rows < <(awk '!/^#/ && $1 ~ /^[0-9]+$/' "$out")
if [[ ${#rows[@]} -ne ${#expected[@]} ]]; then
  echo "FAIL: ${#rows[@]} result rows, want ${#expected[@]} (sizes ${expected[*]})"
  fail=1
fi
for i in "${!rows[@]}"; do
  read -r -a f <<<"${rows[$i]}"
  if [[ ${#f[@]} -ne 13 ]]; then
    echo "FAIL: row $((i + 1)) has ${#f[@]} columns, want 13: ${rows[$i]}"
    fail=1
    continue
  fi
  if [[ $i -lt ${#expected[@]} && ${f[0]} != "${expected[$i]}" ]]; then
    echo "FAIL: row $((i + 1)) size ${f[0]}, want ${expected[$i]}"
    fail=1
  fi
  if [[ ${f[3]} != sum || ${f[2]} != float ]]; then
    echo "FAIL: row $((i + 1)) type/redop ${f[2]}/${f[3]}, want float/sum"
    fail=1
  fi
  if [[ ${f[8]} != 0 || ${f[12]} != 0 ]]; then
    echo "FAIL: row $((i + 1)) (size ${f[0]}): #wrong out-of-place ${f[8]}, in-place ${f[12]}"
    fail=1
  fi
done

if ! grep -qE '^# Out of bounds values : 0 OK' "$out"; then
  echo "FAIL: no '# Out of bounds values : 0 OK' line"
  fail=1
fi

if [[ $fail -ne 0 ]]; then exit 1; fi
echo "PASSED: ${#rows[@]} sizes, #wrong 0 everywhere"
