#!/usr/bin/env bash
# Installs the Debian 12 packages Ringo builds and tests with, if any is missing.
# PyTorch (python3-torch, libtorch-dev, pybind11-dev: about 140 MB to fetch) is
# what integrations/pytorch (ringo_torch) builds against and is tested with.
# ringo-train multiplies matrices with OpenBLAS (libopenblas-dev) and trains on
# Fashion-MNIST (dataset-fashion-mnist: IDX files, about 30 MB).
# Needs root (or sudo). The CUDA toolkit is optional: with one at /usr/local/cuda
# (or $CUDA_PATH) the GPU code is compiled too.
set -euo pipefail
packages=(
  bazel-bootstrap g++ python3 git
  libgtest-dev libbenchmark-dev libhwloc-dev libibverbs-dev
  openmpi-bin libopenmpi-dev
  libgloo-dev python3-matplotlib
  python3-torch libtorch-dev pybind11-dev
  libopenblas-dev zlib1g-dev dataset-fashion-mnist
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
