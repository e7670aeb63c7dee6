"""Builds ringo_torch against the PyTorch of the Python that runs this file,
for a PyTorch that Bazel does not build against (a pip or conda install:
PyTorch 2.x, with CUDA where it has it). Bazel builds the Debian one
(install.sh).

    bazel build //:libringo.so
    cd integrations/pytorch && pip install --no-build-isolation .
    cd integrations/pytorch && python setup.py build_ext --inplace   (in place, for the tests)

--no-build-isolation: an isolated build would download setuptools and would
not see the installed torch. With ninja installed the sources compile in
parallel (MAX_JOBS), else one after another.

The extension links libringo.so (Ringo's public C API), which is copied into
the package and found next to the extension at run time. With a CUDA build of
PyTorch 2.x and a CUDA toolkit (CUDA_HOME), CUDA tensors run on Ringo's GPU
communicators (RINGO_TORCH_CUDA); RINGO_TORCH_CUDA=0 builds for CPU tensors
only. Environment: RINGO_LIB, the libringo.so to use (default
bazel-bin/libringo.so of this checkout).
"""

import os
import shutil
import sys

import torch
from setuptools import setup
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCES = ["comm.cc", "cuda_group.cc", "module.cc", "ops.cc", "ops_p2p.cc", "process_group.cc",
           "python_gil.cc", "work.cc"]

lib = os.environ.get("RINGO_LIB", os.path.join(ROOT, "bazel-bin", "libringo.so"))
if not os.path.exists(lib):
    sys.exit("setup.py: %s not found; build it first (bazel build //:libringo.so) or set RINGO_LIB" % lib)
shutil.copyfile(lib, os.path.join(HERE, "ringo_torch", "libringo.so"))

major = int(torch.__version__.split(".")[0])
cuda = (major >= 2 and torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
        and os.environ.get("RINGO_TORCH_CUDA", "1") != "0")
Extension = cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension
extension = Extension(
    "ringo_torch._C",
    SOURCES,
    include_dirs=[ROOT, os.path.join(ROOT, "include")],
    define_macros=[("RINGO_TORCH_CUDA", "1")] if cuda else [],
    library_dirs=[os.path.join(HERE, "ringo_torch")],
    libraries=[":libringo.so"],
    extra_compile_args={"cxx": ["-std=c++17", "-O2"]} if cuda else ["-std=c++17", "-O2"],
    # --exclude-libs: whatever static archive the toolchain links in (a static
    # libstdc++ on some PyTorch 2.x builds) stays out of the extension's
    # exported symbols, where it could interpose on other libraries' calls.
    extra_link_args=["-Wl,-rpath,$ORIGIN", "-Wl,--exclude-libs,ALL"],
)

setup(
    name="ringo_torch",
    version="0.1.0",
    description="Ringo as a torch.distributed backend (backend=\"ringo\")",
    packages=["ringo_torch"],
    package_data={"ringo_torch": ["libringo.so"]},
    ext_modules=[extension],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
)
