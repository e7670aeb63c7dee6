#!/usr/bin/env bash
# The packages, installed and removed on this machine as a user would:
# scripts/make_debs.sh's four Debian packages through apt (the library, the
# header with pkg-config and CMake files, the NCCL shim, the tools), an
# example built with pkg-config against them and run on 2 ranks, ringo-perf
# and ringo-topo from /usr/bin, the shim loaded from its folder; then
# removed, leaving none of their files. And scripts/make_wheel.sh's
# ringo_torch wheel installed with pip into a virtual environment, an
# all-reduce on 2 ranks through torch.distributed from it, its PyTorch
# check refusing another PyTorch, then uninstalled.
# Needs root and apt (Debian): the package cases are skipped otherwise.
set -uo pipefail
R="${TEST_SRCDIR:?run by bazel test}/${TEST_WORKSPACE:-ringo}"
source "$R/tests/testlib/junit.sh"
junit_init packages
work="${TEST_TMPDIR:-$(mktemp -d)}"
DEB_CASES=(debian_packages_built apt_install installed_library_example_and_tools apt_remove_leaves_nothing)
WHEEL_CASES=(wheel_built wheel_installs_and_all_reduces wheel_refuses_another_pytorch wheel_uninstalls)
libdir=/usr/lib/x86_64-linux-gnu

debian_packages_built() {
  RINGO_DEB_COMPRESSION=none "$R/scripts/make_debs.sh" --out "$work/debs" --bin "$R" --src "$R" > "$work/debs.txt" 2>&1 ||
    junit_fail "make_debs.sh failed: $(tail -5 "$work/debs.txt")"
  [ "$(ls "$work"/debs/*.deb | wc -l)" -eq 4 ] || junit_fail "not four packages: $(ls "$work/debs")"
  dpkg-deb -c "$work"/debs/libringo-dev_*.deb > "$work/dev.txt"
  for f in usr/include/ringo/ringo.h usr/lib/x86_64-linux-gnu/libringo.so usr/lib/x86_64-linux-gnu/pkgconfig/ringo.pc \
           usr/lib/x86_64-linux-gnu/cmake/Ringo/RingoConfig.cmake; do
    grep -q " ./$f\( \|$\)" "$work/dev.txt" || junit_fail "the development package lacks $f"
  done
  dpkg-deb -f "$work"/debs/ringo-tools_*.deb Depends | grep -q libhwloc15 || junit_fail "ringo-tools does not depend on hwloc"
}

apt_install() {
  for p in $(cd "$work/debs" && ls *.deb | sed 's/_.*//'); do
    ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || junit_fail "$p is installed already"
  done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$work"/debs/*.deb > "$work/apt.txt" 2>&1 ||
    junit_fail "apt-get install failed: $(tail -8 "$work/apt.txt")"
}

installed_library_example_and_tools() {
  version=$(pkg-config --modversion ringo) || junit_fail "pkg-config does not know ringo"
  # shellcheck disable=SC2046
  cc -std=c11 -O2 "$R/examples/allreduce.c" -o "$work/allreduce" $(pkg-config --cflags --libs ringo) ||
    junit_fail "the example does not build against the installed packages"
  ldd "$work/allreduce" | grep -q "lib/x86_64-linux-gnu/libringo.so.0" || junit_fail "the example does not load the installed library: $(ldd "$work/allreduce")"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do RINGO_COMM_ID="127.0.0.1:$port" "$work/allreduce" "$r" 2 > "$work/out.$r" 2>&1 & done
  wait
  for r in 0 1; do grep -q "rank $r of 2: every element is 1" "$work/out.$r" || junit_fail "rank $r: $(cat "$work/out.$r")"; done
  /usr/bin/ringo-perf allreduce -np 2 --host -b 8 -e 64K -f 4 -n 2 -w 1 -c 1 > "$work/perf.txt" 2>&1 ||
    junit_fail "ringo-perf failed: $(tail -5 "$work/perf.txt")"
  grep -q "Out of bounds values : 0 OK" "$work/perf.txt" || junit_fail "ringo-perf found wrong values"
  /usr/bin/ringo-topo --env > /dev/null || junit_fail "ringo-topo does not run"
  python3 -c "import ctypes; ctypes.CDLL('$libdir/ringo/nccl/libnccl.so.2').ncclGetVersion" ||
    junit_fail "the shim does not load from its folder"
  [ ! -e "$libdir/libnccl.so.2" ] || junit_fail "the shim is on the default library path"
}

apt_remove_leaves_nothing() {
  pkgs=$(cd "$work/debs" && ls *.deb | sed 's/_.*//')
  files=$(for p in $pkgs; do dpkg -L "$p"; done | sort -u)
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -q $pkgs > "$work/remove.txt" 2>&1 ||
    junit_fail "apt-get remove failed: $(tail -5 "$work/remove.txt")"
  for p in $pkgs; do
    ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || junit_fail "$p is still installed"
  done
  left=""
  while IFS= read -r f; do
    [ -f "$f" ] || [ -L "$f" ] && left="$left $f"
  done <<< "$files"
  [ -z "$left" ] || junit_fail "left behind:$left"
}

wheel_built() {
  "$R/scripts/make_wheel.sh" --out "$work/wheel" --bin "$R" --src "$R" > "$work/wheel.txt" 2>&1 ||
    junit_fail "make_wheel.sh failed: $(tail -8 "$work/wheel.txt")"
  whl=$(ls "$work"/wheel/ringo_torch-*.whl) || junit_fail "no wheel"
  python3 -m zipfile -l "$whl" > "$work/whl.txt"
  grep -q "ringo_torch/libringo.so.0" "$work/whl.txt" || junit_fail "the wheel carries no libringo.so"
  grep -q "ringo_torch/_build.py" "$work/whl.txt" || junit_fail "the wheel lacks its build's PyTorch version"
}

venv="$work/venv"
wheel_installs_and_all_reduces() {
  /usr/bin/python3 -m venv --system-site-packages "$venv" || junit_fail "no virtual environment"
  "$venv/bin/pip" install --no-index --no-deps --disable-pip-version-check "$work"/wheel/ringo_torch-*.whl \
    > "$work/pip.txt" 2>&1 || junit_fail "pip install failed: $(tail -5 "$work/pip.txt")"
  cat > "$work/allreduce.py" <<'PY'
import os, sys
import torch, torch.distributed as dist
import ringo_torch
rank, n = int(sys.argv[1]), 2
assert ringo_torch.__file__.startswith(sys.prefix), ringo_torch.__file__
dist.init_process_group("ringo", init_method="file://" + sys.argv[2], rank=rank, world_size=n)
x = torch.full((1000,), float(rank + 1))
dist.all_reduce(x)
assert torch.equal(x, torch.full((1000,), 3.0)), x[:3]
dist.destroy_process_group()
print("rank %d: ringo_torch %s from %s: all-reduce ok" % (rank, ringo_torch.ringo_version(), os.path.dirname(ringo_torch.__file__)))
PY
  rm -f "$work/rendezvous"
  for r in 0 1; do (cd / && RINGO_SOCKET_IFNAME=lo "$venv/bin/python" "$work/allreduce.py" "$r" "$work/rendezvous" \
                    > "$work/torch.$r" 2>&1) & done
  wait
  for r in 0 1; do grep -q "rank $r: .*all-reduce ok" "$work/torch.$r" || junit_fail "rank $r: $(tail -5 "$work/torch.$r")"; done
}

wheel_refuses_another_pytorch() {
  info=$(ls "$venv"/lib/python3*/site-packages/ringo_torch/_build.py) || junit_fail "no _build.py installed"
  cp "$info" "$work/_build.py.saved"
  echo "TORCH_VERSION = '0.0.1'" > "$info"
  msg=$(cd / && "$venv/bin/python" -c "import ringo_torch" 2>&1) && { cp "$work/_build.py.saved" "$info"; junit_fail "imported against another PyTorch"; }
  cp "$work/_build.py.saved" "$info"
  echo "$msg" | grep -q "built against PyTorch 0.0.1" || junit_fail "the refusal does not say why: $msg"
}

wheel_uninstalls() {
  pkg=$(dirname "$(ls "$venv"/lib/python3*/site-packages/ringo_torch/__init__.py)")
  "$venv/bin/pip" uninstall -y ringo_torch > "$work/uninstall.txt" 2>&1 || junit_fail "pip uninstall failed"
  [ ! -e "$pkg" ] || junit_fail "left behind: $(find "$pkg")"
  ! (cd / && "$venv/bin/python" -c "import ringo_torch" 2>/dev/null) || junit_fail "still importable"
}

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get > /dev/null || ! command -v dpkg-deb > /dev/null; then
  junit_skip_all "needs root, apt-get and dpkg-deb (Debian)" "${DEB_CASES[@]}"
else
  for c in "${DEB_CASES[@]}"; do junit_run "$c" "$c"; done
fi
if [ ! -f "$R/integrations/pytorch/wheel/ringo_torch/_C.so" ]; then
  junit_skip_all "built without PyTorch (no wheel to make)" "${WHEEL_CASES[@]}"
else
  for c in "${WHEEL_CASES[@]}"; do junit_run "$c" "$c"; done
fi
junit_failed && exit 1
exit 0
