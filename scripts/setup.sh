#!/usr/bin/env bash
# Installs the Debian 12 packages Ringo builds and tests with, if any is missing.
# PyTorch (python3-torch, libtorch-dev, pybind11-dev: about 140 MB to fetch) is
# what integrations/pytorch (ringo_torch) builds against and is tested with;
# iproute2 and util-linux build the network-namespace hosts of the tests that
# cross hosts, iperf3 measures their links (bench/net_compare); QEMU,
# busybox, rdma-core and perftest build the SoftRoCE guest of the verbs test
# (tests/rdma/), which boots Debian's kernel package, fetched here into
# /var/cache/ringo-rxe (RINGO_RXE_CACHE). ringo-train multiplies matrices with
# OpenBLAS (libopenblas-dev) and trains on Fashion-MNIST (dataset-fashion-mnist:
# IDX files, about 30 MB). cmake, pkg-config, binutils (objdump), python3-venv,
# python3-pip and python3-wheel: the installed library's consumers and the
# packages' tests (scripts/install_test.sh, scripts/packages_test.sh).
# Needs root (or sudo). The CUDA toolkit is optional: with one at /usr/local/cuda
# (or $CUDA_PATH) the GPU code is compiled too.
set -euo pipefail
packages=(
  bazel-bootstrap g++ python3 git
  libgtest-dev libbenchmark-dev libhwloc-dev libibverbs-dev
  openmpi-bin libopenmpi-dev
  libgloo-dev python3-matplotlib
  python3-torch libtorch-dev pybind11-dev
  iproute2 util-linux iperf3
  qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers perftest kmod cpio
  libopenblas-dev zlib1g-dev dataset-fashion-mnist
  cmake pkg-config binutils python3-venv python3-pip python3-wheel python3-setuptools
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ringo setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Debian's kernel for the verbs test's guest (unpacked there, never installed).
cache=${RINGO_RXE_CACHE:-/var/cache/ringo-rxe}
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true)
if [ -n "$kpkg" ] && ! ls "$cache/${kpkg}"_*.deb >/dev/null 2>&1; then
  echo "ringo setup: fetching $kpkg for the verbs test's guest"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo mkdir -p "$cache" && $sudo chmod 777 "$cache"
  (cd "$cache" && apt-get download -q "$kpkg" >/dev/null) || echo "ringo setup: could not fetch $kpkg (the verbs test will try again)"
fi
