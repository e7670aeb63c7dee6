#!/usr/bin/env bash
# ringo-topo on every fixture of tests/data/topo and on this machine: the
# tree, matrix, rings and prediction sections; dump/load round trip; --json,
# --dot, --env, --size, --hosts and bad arguments.
set -uo pipefail

BIN=tools/topo/ringo-topo
DATA=tests/data/topo
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_has FILE TEXT...: each TEXT is a fixed string in FILE.
expect_has() {
  local file=$1
  shift
  for text in "$@"; do
    grep -qF -- "$text" "$file" || fail "$(basename "$file"): no '$text'"
  done
}

sections=("== Machine tree ==" "== GPU path matrix ==" "== Rings ==" "== Predicted all-reduce ==")

run_fixture() {
  local name=$1
  shift
  local args=(--xml "$DATA/$name.xml")
  [[ -f "$DATA/$name.nvlink" ]] && args+=(--nvlink "$DATA/$name.nvlink")
  "$BIN" "${args[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || fail "$name: exit $?: $(cat "$TMP/$name.err")"
  expect_has "$TMP/$name.out" "${sections[@]}" "GPU0" "Legend:" "channel 0:" "busbw"
}

run_fixture dgx_a100
expect_has "$TMP/dgx_a100.out" "NV12" "PXB" "NIC0: mlx5_0" "6 channels, 240.0 GB/s"
run_fixture dgx_h100
expect_has "$TMP/dgx_h100.out" "NV18" "PIX" "NIC7: mlx5_11" "9 channels, 360.0 GB/s" "8 ranks"
run_fixture pcie_8gpu
expect_has "$TMP/pcie_8gpu.out" "PIX" "NODE" "SYS" "1 channel, 22.0 GB/s" "farthest edge SYS"
run_fixture nvlink_bridge_4gpu
expect_has "$TMP/nvlink_bridge_4gpu.out" "NV4" "PHB" "channel 0: 0 1 2 3 -> 0" "channel 1: 0 3 2 1 -> 0"
run_fixture two_socket_2gpu
expect_has "$TMP/two_socket_2gpu.out" "SYS" "channel 0: 0 1 -> 0" "2 ranks"

# Several hosts: chains enter and leave by NICs.
run_fixture dgx_h100 --hosts 4
expect_has "$TMP/dgx_h100.out" "channel 0: NIC0 -> 0 1 2 3 4 5 6 7 -> NIC7" "32 ranks on 4 hosts"
expect_has "$TMP/dgx_h100.out" "network, pinned host memory over TCP or verbs (GPUDirect RDMA off)"
# Host communicators across hosts: a channel per NIC, the near ones first.
expect_has "$TMP/dgx_h100.out" "8 NIC(s): host communicators across hosts run at least 8 ring channel(s), one per device" \
  "ranks on NUMA 0 take first: NIC0 (ibp24s0) NIC1 (ibp58s0) NIC2 (ibp75s0) NIC3 (ibp92s0)" \
  "ranks on NUMA 1 take first: NIC4 (ibp154s0)"
staged=$(grep -m1 -o "busbw [0-9.]* GB/s" "$TMP/dgx_h100.out")
# GPUDirect asked for: the edges between hosts say so, and the prediction
# drops the staging copy (a higher busbw).
RINGO_NET_GPUDIRECT=1 run_fixture dgx_h100 --hosts 4
expect_has "$TMP/dgx_h100.out" "network, GPU memory over verbs (GPUDirect RDMA, RINGO_NET_GPUDIRECT=1)"
direct=$(grep -m1 -o "busbw [0-9.]* GB/s" "$TMP/dgx_h100.out")
awk -v a="${staged//[^0-9.]/}" -v b="${direct//[^0-9.]/}" 'BEGIN { exit !(b > a) }' ||
  fail "GPUDirect's prediction ($direct) is not above the staged one ($staged)"
# Across hosts the model also predicts recursive doubling, and says what a
# host communicator would run: doubling at 8 B, the ring at 1 GiB.
run_fixture dgx_h100 --hosts 4 --size 8
expect_has "$TMP/dgx_h100.out" "recursive doubling: t = (log2 p + 2 [N != p]) * (alpha + S/beta), 5 steps" \
  "a host communicator across these hosts runs recursive doubling at this size"
run_fixture dgx_h100 --hosts 4 --size 1G
expect_has "$TMP/dgx_h100.out" "a host communicator across these hosts runs the ring at this size"

# This machine.
"$BIN" >"$TMP/machine.out" 2>"$TMP/machine.err" || fail "this machine: exit $?: $(cat "$TMP/machine.err")"
expect_has "$TMP/machine.out" "${sections[@]}" "CPU"
if grep -q "^0 GPUs" "$TMP/machine.out"; then
  expect_has "$TMP/machine.out" "No GPU found" "no GPU" "HostBridge"
else
  expect_has "$TMP/machine.out" "GPU0"
fi

# Dump, load, dump again: byte-identical; the load shows the same matrix and rings.
"$BIN" --xml "$DATA/dgx_a100.xml" --nvlink "$DATA/dgx_a100.nvlink" --dump "$TMP/a.topo" >"$TMP/a.out" || fail "--dump"
"$BIN" --load "$TMP/a.topo" --dump "$TMP/b.topo" >"$TMP/b.out" || fail "--load"
cmp -s "$TMP/a.topo" "$TMP/b.topo" || fail "dump -> load -> dump differs"
diff <(tail -n +2 "$TMP/a.out" | grep -v "^wrote\|stored in the dump") \
     <(tail -n +2 "$TMP/b.out" | grep -v "^wrote\|stored in the dump") >/dev/null ||
  fail "--load output differs from the detection's"
RINGO_TOPO_FILE="$TMP/a.topo" "$BIN" >"$TMP/env.out" || fail "RINGO_TOPO_FILE"
expect_has "$TMP/env.out" "from dump $TMP/a.topo" "NV12"
RINGO_TOPO_FILE="$DATA/pcie_8gpu.xml" "$BIN" >"$TMP/envxml.out" || fail "RINGO_TOPO_FILE xml"
expect_has "$TMP/envxml.out" "host pcie-8gpu" "SYS"

RINGO_TOPO_DUMP_FILE="$TMP/env-%h.topo" "$BIN" --xml "$DATA/pcie_8gpu.xml" >/dev/null ||
  fail "RINGO_TOPO_DUMP_FILE"
"$BIN" --load "$TMP/env-pcie-8gpu.topo" >"$TMP/envdump.out" || fail "RINGO_TOPO_DUMP_FILE's file"
expect_has "$TMP/envdump.out" "host pcie-8gpu" "stored in the dump"

# Formats.
"$BIN" --xml "$DATA/dgx_h100.xml" --nvlink "$DATA/dgx_h100.nvlink" --json >"$TMP/h.json" || fail "--json"
expect_has "$TMP/h.json" '"host": "dgx-h100"' '"label": "NV18"' '"rings": [' '"busbw_gbps":'
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/h.json" || fail "--json is not JSON"
fi
"$BIN" --xml "$DATA/nvlink_bridge_4gpu.xml" --nvlink "$DATA/nvlink_bridge_4gpu.nvlink" --dot >"$TMP/g.dot" || fail "--dot"
expect_has "$TMP/g.dot" "graph topology {" "NV4 80.0 GB/s" "--"
"$BIN" --env >"$TMP/env.txt" || fail "--env"
expect_has "$TMP/env.txt" RINGO_DEBUG RINGO_TOPO_FILE RINGO_TOPO_DUMP_FILE RINGO_NVLINK_FILE \
  RINGO_P2P_LEVEL RINGO_P2P_DISABLE RINGO_SHM_DISABLE "default"

# Sizes and bad arguments.
"$BIN" --xml "$DATA/two_socket_2gpu.xml" --size 1K >"$TMP/s.out" || fail "--size 1K"
expect_has "$TMP/s.out" "ring, 1 KiB, 2 ranks"
"$BIN" --xml "$DATA/two_socket_2gpu.xml" --size 2G >"$TMP/s.out" || fail "--size 2G"
expect_has "$TMP/s.out" "ring, 2 GiB, 2 ranks"
for bad in "--size 12Q" "--hosts 0" "--bogus" "--xml"; do
  # shellcheck disable=SC2086
  "$BIN" $bad >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "'$bad' is not a usage error"
done
"$BIN" --xml "$DATA/no_such.xml" >/dev/null 2>&1 && fail "a missing XML file is not an error"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
