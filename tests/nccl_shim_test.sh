#!/bin/bash
# Runs a program built for NCCL (nccl_shim_test.c, linked to libnccl.so.2
# with no path) with Ringo's libnccl.so.2 found through LD_LIBRARY_PATH (and
# LD_PRELOAD), in place of a real NCCL: the exports are NCCL's names only,
# the program cannot start without a libnccl.so.2, and it passes with ours
# even where the machine has a real NCCL on the loader's path.
set -euo pipefail
program=$1
library=$2
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/nccl_shim.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$library" "$work/libnccl.so.2"

# The shim exports NCCL's API and nothing of Ringo's: at least every NCCL
# function PyTorch 2.11's libtorch_cuda.so (38) and CuPy 14's NCCL module
# (22) import, as nm read them from those builds.
exports=$(nm -D --defined-only "$work/libnccl.so.2" | awk '$2 ~ /[TW]/ {print $3}')
for want in ncclAllGather ncclAllReduce ncclAlltoAll ncclBcast ncclBroadcast ncclCommAbort ncclCommCount \
            ncclCommDeregister ncclCommDestroy ncclCommFinalize ncclCommGetAsyncError ncclCommInitAll \
            ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable ncclCommRegister ncclCommShrink \
            ncclCommSplit ncclCommUserRank ncclCommWindowDeregister ncclCommWindowRegister ncclDevCommCreate \
            ncclDevCommDestroy ncclGetErrorString ncclGetLastError ncclGetUniqueId ncclGetVersion ncclGroupEnd \
            ncclGroupSimulateEnd ncclGroupStart ncclMemAlloc ncclMemFree ncclRecv ncclRedOpCreatePreMulSum \
            ncclRedOpDestroy ncclReduce ncclReduceScatter ncclSend ncclCommCuDevice ncclGather ncclScatter; do
  grep -qx "$want" <<<"$exports" || { echo "FAIL: libnccl.so.2 does not export $want"; exit 1; }
done
if grep -v '^nccl' <<<"$exports" | grep -q .; then
  echo "FAIL: libnccl.so.2 exports more than nccl*:"; grep -v '^nccl' <<<"$exports" | head; exit 1
fi
readelf -d "$work/libnccl.so.2" | grep -q 'SONAME.*\[libnccl.so.2\]' || { echo "FAIL: no SONAME libnccl.so.2"; exit 1; }
readelf -d "$program" | grep -q 'NEEDED.*\[libnccl.so.2\]' || { echo "FAIL: the program does not need libnccl.so.2"; exit 1; }

# Without the library on the loader's path the program cannot start, unless
# the machine has an NCCL of its own (then LD_LIBRARY_PATH and LD_PRELOAD
# must put the shim before it: the program checks the shim's version).
resolved=$(env -u LD_LIBRARY_PATH -u LD_PRELOAD ldd "$program" | grep 'libnccl.so.2' || true)
if grep -q 'not found' <<<"$resolved"; then
  if env -u LD_LIBRARY_PATH -u LD_PRELOAD "$program" >/dev/null 2>&1; then
    echo "FAIL: the program ran without libnccl.so.2 on the loader's path"; exit 1
  fi
else
  echo "note: this machine has an NCCL of its own:$resolved"
fi

echo "== through LD_LIBRARY_PATH"
LD_LIBRARY_PATH="$work" "$program"
echo "== through LD_PRELOAD"
env -u LD_LIBRARY_PATH LD_PRELOAD="$work/libnccl.so.2" "$program" >/dev/null
echo "nccl_shim_test: PASS"
