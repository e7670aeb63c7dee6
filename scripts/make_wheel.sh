#!/usr/bin/env bash
# A ringo_torch wheel from what Bazel built against the system's PyTorch
# (nothing is compiled): `pip wheel` in a virtual environment that sees the
# system's packages (its torch, setuptools and wheel), offline and without
# build isolation. The wheel carries the extension, libringo.so under its
# soname (found beside it at run time) and the PyTorch version it was built
# against, which the package checks at import.
# Usage: scripts/make_wheel.sh --out DIR [--bin BUILT] [--src SOURCES]
#   --bin: Bazel's output tree (default: this checkout's bazel-bin, after
#          bazel build //integrations/pytorch:wheel_files); --src: the sources.
# Install with: python3 -m venv --system-site-packages VENV; VENV/bin/pip install DIR/ringo_torch-*.whl
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out="" bin="" src="$here"
python=${RINGO_TORCH_PYTHON:-/usr/bin/python3}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    *) echo "make_wheel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "make_wheel.sh: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "$bin" ]; then
  cd "$here"
  source scripts/bazel_flags.sh
  bazel build "${RINGO_BAZEL_FLAGS[@]}" //integrations/pytorch:wheel_files >&2
  bin=$(bazel info "${RINGO_BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)
fi
extension="$bin/integrations/pytorch/wheel/ringo_torch/_C.so"
info="$bin/integrations/pytorch/ringo_torch/_build.py"
lib=$(ls "$bin"/libringo.so.[0-9]* 2>/dev/null | head -1)
for f in "$extension" "$info" "$lib"; do
  [ -f "$f" ] || { echo "make_wheel.sh: $f is missing (bazel build //integrations/pytorch:wheel_files)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ringo-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The package's sources in a tree of their own (the build writes beside them).
mkdir -p "$work/src/include/ringo" "$work/src/integrations/pytorch/ringo_torch"
cp "$src/include/ringo/ringo.h" "$work/src/include/ringo/"
cp "$src/integrations/pytorch/setup.py" "$work/src/integrations/pytorch/"
cp "$src/integrations/pytorch/ringo_torch/__init__.py" "$work/src/integrations/pytorch/ringo_torch/"
"$python" -m venv --system-site-packages "$work/venv"
RINGO_TORCH_EXTENSION="$extension" RINGO_TORCH_BUILD_INFO="$info" RINGO_LIB="$lib" \
  "$work/venv/bin/pip" wheel --no-build-isolation --no-deps --no-index --disable-pip-version-check \
  -w "$out" "$work/src/integrations/pytorch" >&2
ls "$out"/ringo_torch-*.whl
