#!/usr/bin/env bash
# Builds examples/allreduce.c as the README says (cc, the public header,
# libringo.so) and runs it on 3 processes that meet at a loopback address.
set -euo pipefail
src="examples/allreduce.c"
lib="libringo.so"
inc="include"
[ -f "$lib" ] || { echo "libringo.so is not in the test's files"; exit 1; }
work="${TEST_TMPDIR:-$(mktemp -d)}"
mkdir -p "$work/lib"
cp "$lib" "$work/lib/"
cc -std=c11 -O2 -I"$inc" "$src" -L"$work/lib" -lringo -Wl,-rpath,"$work/lib" -o "$work/allreduce"
# A free port: let the kernel pick one, then hand it to the ranks.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export RINGO_COMM_ID="127.0.0.1:$port"
pids=()
for r in 0 1 2; do
  "$work/allreduce" "$r" 3 > "$work/out.$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$work"/out.*
[ "$rc" -eq 0 ] || { echo "a rank failed"; exit 1; }
for r in 0 1 2; do
  grep -q "rank $r of 3: every element is 3" "$work/out.$r" || { echo "rank $r printed no result"; exit 1; }
done
echo "the README's example ran on 3 processes"
