#!/usr/bin/env bash
# Builds ringo_torch with Bazel against the system's PyTorch (Debian's
# python3-torch and libtorch-dev; scripts/setup.sh installs them) and copies
# the package (ringo_torch/__init__.py and the extension _C.so, with Ringo
# linked in) into a directory on Python's path.
#
# Usage: integrations/pytorch/install.sh [DIR]
#   DIR: where the ringo_torch/ folder goes; default: the site-packages
#   directory of $RINGO_TORCH_PYTHON (default /usr/bin/python3) for locally
#   installed packages (Debian: /usr/local/lib/python3.X/dist-packages).
# Afterwards `import ringo_torch` works in that Python. For a pip-installed
# PyTorch (2.x, CUDA) use integrations/pytorch/setup.py instead (docs/pytorch.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${RINGO_TORCH_PYTHON:-/usr/bin/python3}
dest=${1:-$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')}
source scripts/bazel_flags.sh
bazel build "${RINGO_BAZEL_FLAGS[@]}" //integrations/pytorch:ringo_torch
bin=$(bazel info "${RINGO_BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)
mkdir -p "$dest/ringo_torch"
install -m 0644 integrations/pytorch/ringo_torch/__init__.py "$dest/ringo_torch/__init__.py"
install -m 0755 "$bin/integrations/pytorch/ringo_torch/_C.so" "$dest/ringo_torch/_C.so"
install -m 0644 "$bin/integrations/pytorch/ringo_torch/_build.py" "$dest/ringo_torch/_build.py"
echo "installed ringo_torch in $dest"
# A check that it imports and registers the backend, outside the source tree.
(cd / && PYTHONPATH="$dest${PYTHONPATH:+:$PYTHONPATH}" "$python" -c 'import ringo_torch, torch.distributed as d; assert "RINGO" in d.Backend._plugins; print("ringo_torch", ringo_torch.__file__, "built with torch", ringo_torch.BUILT_WITH_TORCH)')
