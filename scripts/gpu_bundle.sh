#!/usr/bin/env bash
# Builds what a GPU machine needs to verify Ringo's GPU path and packs it into
# one archive: the GPU tests, ringo-perf, reduce_bench, nccl-perf,
# ringo-train with its CUDA backend's test and a Fashion-MNIST subset,
# libringo.so and the NCCL shim libnccl.so.2 built with --config=gpubundle (sm_90 only, no line info,
# compressed fatbins, stripped), the shared libraries they need beyond the C
# and C++ runtimes (libhwloc.so.15 and its own, which a bare GPU machine may
# lack; the C++ runtime goes in lib/compat/, used only where the machine's is
# too old), the runner (gpu_check.sh, gpu_sanitize.sh) and a MANIFEST.
#
# Usage: scripts/gpu_bundle.sh [--out DIR] [--no-build]
#   --out DIR    where the archive goes (default: .gpubundle/ in the checkout)
#   --no-build   pack what the last --config=gpubundle build left
# The last line of output is the archive's path. Unpack and run on the GPU
# machine with scripts/gpu_check.sh ARCHIVE (or ./gpu_check.sh inside it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out_dir="$root/.gpubundle"
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

# Bazel target -> path under bazel-bin, and the name in the bundle's bin/.
targets=(
  //kernels/cuda:ring_kernel_test
  //kernels/cuda:reduce_bench
  //transport/cuda:gpu_fifo_test
  //tests:gpu_conformance_test
  //tests:gpu_process_test
  //tests:gpu_graph_test
  //tests:gpu_trace_test
  //tests:gpu_elastic_test
  //tests:gpu_p2p_test
  //tests:gpu_wire_test
  //tools:perf_gpu_test
  //tools:ringo-perf
  //bench/peers:nccl-perf
  //:libringo.so
  //:libnccl.so.2
  //trainer:ringo-train
  //trainer:cuda_compute_test
)
source scripts/bazel_flags.sh
if ! [[ -x /usr/local/cuda/bin/nvcc || -n "${CUDA_PATH:-}" ]]; then
  echo "gpu_bundle.sh: no CUDA toolkit (/usr/local/cuda or CUDA_PATH): the kernels would not be built" >&2
  exit 1
fi
if [[ $build -eq 1 ]]; then
  echo "+ bazel build --config=gpubundle ${targets[*]}" >&2
  bazel build "${RINGO_BAZEL_FLAGS[@]}" --config=gpubundle "${targets[@]}" >&2
fi
bin_root=$(bazel info "${RINGO_BAZEL_FLAGS[@]}" --config=gpubundle bazel-bin 2>/dev/null)

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo "+changes" || true)
name="ringo-gpu-${commit}${dirty}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b="$stage/$name"
# ringo-train and its test go to train/bin, the libraries only they need
# (OpenBLAS, 37 MB) to train/lib: gpu_check.sh's train step adds that
# folder, and the bundle step, which every call runs first, does not
# depend on them.
mkdir -p "$b/bin" "$b/lib/compat" "$b/train/bin" "$b/train/lib"

for t in "${targets[@]}"; do
  rel=${t#//}
  rel=${rel/://}
  rel=${rel#/}
  src="$bin_root/$rel"
  [[ -f $src ]] || { echo "gpu_bundle.sh: $src was not built" >&2; exit 1; }
  case "$t" in
    //trainer:*) cp "$src" "$b/train/bin/" ;;  # a folder of their own: see below
    *.so | *.so.[0-9]*) cp "$src" "$b/lib/" ;;
    *) cp "$src" "$b/bin/" ;;
  esac
done
chmod u+w "$b"/bin/* "$b"/lib/*.so* "$b"/train/bin/*

# Shared libraries beyond the C runtime, which every machine has. The C++
# runtime goes to lib/compat/, which the runner adds only when the machine's
# own is missing or too old.
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil)\.so'
compat_re='^(libstdc\+\+|libgcc_s)\.so'
declare -A copied=()
for f in "$b"/bin/* "$b"/lib/*.so "$b"/lib/libnccl.so.2 "$b"/train/bin/*; do
  lib_dir="$b/lib"
  [[ $f == "$b"/train/* ]] && lib_dir="$b/train/lib"
  while read -r soname _ path _; do
    [[ -n ${path:-} && -f $path ]] || continue
    [[ $soname =~ $system_re ]] && continue
    [[ -n ${copied[$soname]:-} ]] && continue
    copied[$soname]=1
    if [[ $soname =~ $compat_re ]]; then
      cp -L "$path" "$b/lib/compat/$soname"
    else
      cp -L "$path" "$lib_dir/$soname"
    fi
  done < <(ldd "$f" | awk '$2 == "=>" {print $1, $2, $3, $4}')
done
chmod u+w "$b"/lib/*.so* "$b"/lib/compat/* "$b"/train/lib/* 2>/dev/null || true

cp scripts/gpu_check.sh scripts/gpu_sanitize.sh "$b/"
chmod +x "$b/gpu_check.sh" "$b/gpu_sanitize.sh"
mkdir -p "$b/scripts"
cp trainer/tests/gpu_test.py "$b/scripts/train_gpu_test.py"

# ringo-train's data: Fashion-MNIST's first $train_images training images
# (the whole set would not fit the archive beside the binaries) and its whole
# test set, gzipped IDX files as ringo-train reads them.
train_images=15000
fmnist=/usr/share/datasets/fashion-mnist
if [[ ! -f $fmnist/train-images-idx3-ubyte.gz ]]; then
  echo "gpu_bundle.sh: no Fashion-MNIST in $fmnist (scripts/setup.sh installs dataset-fashion-mnist)" >&2
  exit 1
fi
mkdir -p "$b/data/fashion-mnist"
cp "$fmnist"/t10k-*-idx*-ubyte.gz "$b/data/fashion-mnist/"
python3 - "$fmnist" "$b/data/fashion-mnist" "$train_images" <<'PY'
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, item in (("train-images-idx3-ubyte.gz", 28 * 28), ("train-labels-idx1-ubyte.gz", 1)):
    data = gzip.open(src + "/" + name).read()
    dims = data[3]
    header = bytearray(data[:4 + 4 * dims])
    struct.pack_into(">I", header, 4, n)  # the item count, the first dimension
    with gzip.open(dst + "/" + name, "wb", compresslevel=9) as f:
        f.write(bytes(header) + data[4 + 4 * dims:4 + 4 * dims + n * item])
PY
{
  echo "Ringo GPU bundle $name"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) with --config=gpubundle (sm_90, no line info, --compress-mode=size, stripped)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
  echo "host: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "files:"
  (cd "$b" && find . -type f ! -name MANIFEST | sort | while read -r f; do
    printf '  %10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "${f#./}"
  done)
} >"$b/MANIFEST"
cat "$b/MANIFEST" >&2

mkdir -p "$out_dir"
# One archive in the folder: the one carried to the GPU machine.
rm -f "$out_dir"/ringo-gpu-*.tar.gz
archive="$out_dir/$name.tar.gz"
tar -C "$stage" -czf "$archive" "$name"
size=$(stat -c %s "$archive")
echo "archive: $size bytes ($((size / 1048576)) MiB; the limit carried to a GPU machine is 64 MiB)" >&2
# 64 MiB is what travels to the GPU machine in all.
if [[ $size -ge $((60 << 20)) ]]; then
  echo "gpu_bundle.sh: the archive is not well under 64 MiB" >&2
  exit 1
fi
echo "$archive"
