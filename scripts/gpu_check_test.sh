#!/bin/bash
# scripts/gpu_check.sh where no GPU is visible must fail loudly, never pass:
# on a bundle folder made of this build's binaries, the bundle step passes,
# the facts step fails naming the missing GPU, every later step is reported
# NOTRUN, the last line counts them, and the exit status is 1. With an
# nvidia-smi that claims a GPU, every step that touches the GPU still fails
# (RINGO_REQUIRE_GPU=1), so nothing passes without one. Also its argument
# errors. Skips (exit 0, "SKIPPED: ...") where a GPU is visible.
#
# Usage: gpu_check_test.sh <gpu_check.sh> <binaries and libringo.so ...>
set -u
if [[ $# -lt 2 ]]; then
  echo "usage: $0 <gpu_check.sh> <ringo-perf> [more binaries, libringo.so]" >&2
  exit 2
fi
check=$(realpath "$1")
shift
# The GPU test binaries it runs are gtest programs: under Bazel they would
# write their own (expected) failures into this test's XML result.
unset XML_OUTPUT_FILE GTEST_OUTPUT
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: a GPU is visible; the no-GPU behaviour is not reachable"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work  # gpu_check.sh's unpacked bundles and work folders go here
b="$work/ringo-gpu-test"
mkdir -p "$b/bin" "$b/lib/compat"
for f in "$@"; do
  case "$f" in
    *.so | *.so.[0-9]*) ln -s "$(realpath "$f")" "$b/lib/$(basename "$f")" ;;
    *) ln -s "$(realpath "$f")" "$b/bin/$(basename "$f")" ;;
  esac
done
ln -s "$(dirname "$check")/gpu_sanitize.sh" "$b/gpu_sanitize.sh"
echo "Ringo GPU bundle (test)" >"$b/MANIFEST"
fail=0

out="$work/out.txt"
"$check" --steps bundle,facts,kernel_tests,perf_small --out "$work/results" "$b" >"$out" 2>&1
rc=$?
cat "$out"
expect() {
  if ! grep -qE "$1" "$out"; then
    echo "FAIL: expected a line matching '$1'"
    fail=1
  fi
}
[[ $rc -eq 1 ]] || { echo "FAIL: exit status $rc, not 1"; fail=1; }
expect '^PASS bundle [0-9]+s '
expect '^FAIL facts [0-9]+s .*(nvidia-smi|no GPU)'
expect '^NOTRUN kernel_tests 0s no GPU'
expect '^NOTRUN perf_small 0s no GPU'
expect '^gpu_check: 1 passed, 1 failed, 0 missed a target, 0 skipped, 2 not run$'
[[ $(tail -1 "$out") == gpu_check:* ]] || { echo "FAIL: the last line is not the count"; fail=1; }
[[ -s $work/results/gpu_check_summary.txt && -s $work/results/gpu_check_logs.tar.gz ]] ||
  { echo "FAIL: no summary and logs in --out"; fail=1; }

"$check" --steps nothing "$b" >/dev/null 2>&1
[[ $? -eq 2 ]] || { echo "FAIL: an unknown step list is not a usage error"; fail=1; }
"$check" --bogus >/dev/null 2>&1
[[ $? -eq 2 ]] || { echo "FAIL: an unknown option is not a usage error"; fail=1; }
"$check" "$work/missing.tar.gz" >/dev/null 2>&1
[[ $? -ne 0 ]] || { echo "FAIL: a missing archive passed"; fail=1; }
# An archive works as the folder does.
tar -C "$work" -czf "$work/bundle.tar.gz" ringo-gpu-test
"$check" --steps bundle,facts "$work/bundle.tar.gz" >"$out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q '^PASS bundle' "$out" && grep -q '^FAIL facts' "$out" ||
  { cat "$out"; echo "FAIL: the archive run (exit $rc)"; fail=1; }
# --steps runs the steps in the order given.
"$check" --steps facts,bundle "$b" >"$out" 2>&1
order=$(grep -E '^(PASS|FAIL|NOTRUN) ' "$out" | awk '{print $2}' | tr '\n' ' ')
[[ $order == "facts bundle " ]] || { cat "$out"; echo "FAIL: --steps facts,bundle ran '$order'"; fail=1; }
# --call N runs the steps of prepared call N, in the order assigned.
"$check" --call 1 "$b" >"$out" 2>&1
order=$(grep -E '^(PASS|FAIL|NOTRUN|SKIP|MISS) ' "$out" | awk '{print $2}' | tr '\n' ' ')
[[ $order == "bundle facts graph trace elastic wire logstep latency " ]] || { cat "$out"; echo "FAIL: --call 1 ran '$order'"; fail=1; }
"$check" --call 2 "$b" >"$out" 2>&1
order=$(grep -E '^(PASS|FAIL|NOTRUN|SKIP|MISS) ' "$out" | awk '{print $2}' | tr '\n' ' ')
[[ $order == "bundle facts torch_build torch_ops torch_ddp net_gpu " ]] ||
  { cat "$out"; echo "FAIL: --call 2 ran '$order'"; fail=1; }
"$check" --call 3 "$b" >"$out" 2>&1
order=$(grep -E '^(PASS|FAIL|NOTRUN|SKIP|MISS) ' "$out" | awk '{print $2}' | tr '\n' ' ')
[[ $order == "bundle facts train " ]] || { cat "$out"; echo "FAIL: --call 3 ran '$order'"; fail=1; }
"$check" --call 4 "$b" >/dev/null 2>&1
[[ $? -eq 2 ]] || { echo "FAIL: --call 4 is not a usage error"; fail=1; }
# A machine that claims a GPU it cannot use: nothing past the facts passes.
mkdir -p "$work/fake"
cat >"$work/fake/nvidia-smi" <<'SMI'
#!/bin/bash
case "$1" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-not-real)" ;;
  *) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.00" ;;
esac
SMI
chmod +x "$work/fake/nvidia-smi"
PATH="$work/fake:$PATH" "$check" --budget 300 --nccl-lib "$work/no-such-libnccl.so.2" "$b" >"$out" 2>&1
rc=$?
echo "--- with a fake nvidia-smi:"
sed -n '/gpu_check summary/,$p' "$out"
[[ $rc -eq 1 ]] || { echo "FAIL: exit status $rc with a GPU that cannot be used"; fail=1; }
passed=$(grep -E '^PASS ' "$out" | awk '{print $2}' | tr '\n' ' ')
[[ $passed == "bundle facts " ]] || { echo "FAIL: steps passed without a usable GPU: $passed"; fail=1; }
grep -qE '^(PASS|MISS) (kernel_tests|conformance|perf|process|sanitize|nccl|graph|latency|torch|cupy|p2p|elastic|train)' "$out" &&
  { echo "FAIL: a GPU step passed or measured"; fail=1; }
[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
