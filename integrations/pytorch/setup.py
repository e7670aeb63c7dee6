"""Builds ringo_torch, the torch.distributed backend "ringo", as a Python
package that carries its own libringo.so (found beside the extension at run
time, under its soname). Two ways:

From the sources, against the PyTorch of the Python that runs this (a pip
or conda install: PyTorch 2.x, with CUDA where it has it):

    bazel build //:libringo.so //:libringo_soname
    cd integrations/pytorch && pip install --no-build-isolation .
    cd integrations/pytorch && python setup.py build_ext --inplace   (in place, for the tests)

From what Bazel built against Debian's PyTorch (scripts/make_wheel.sh:
nothing is compiled; RINGO_TORCH_EXTENSION names the extension, linked
against libringo.so, and RINGO_TORCH_BUILD_INFO the _build.py that says
which PyTorch it was built against).

--no-build-isolation: an isolated build would download setuptools and would
not see the installed torch. With ninja installed the sources compile in
parallel (MAX_JOBS), else one after another. With a CUDA build of PyTorch
2.x and a CUDA toolkit (CUDA_HOME), RINGO_TORCH_CUDA=1 builds CUDA tensors
on Ringo's GPU communicators; by default (RINGO_TORCH_CUDA unset or 0) the
build serves CPU tensors only and refuses CUDA tensors, until a GPU run has
verified them (docs/gpu.md). Environment: RINGO_LIB, the libringo.so to carry (default
bazel-bin/libringo.so of this checkout). The package's version is Ringo's
(include/ringo/ringo.h).
"""

import os
import re
import shutil
import subprocess
import sys

import torch
from setuptools import setup
from setuptools.command.build_ext import build_ext
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(HERE, "ringo_torch")
SOURCES = ["comm.cc", "cuda_group.cc", "module.cc", "ops.cc", "ops_p2p.cc", "process_group.cc",
           "python_gil.cc", "work.cc"]


def ringo_version():
    with open(os.path.join(ROOT, "include", "ringo", "ringo.h")) as f:
        parts = dict(re.findall(r"^#define RINGO_(MAJOR|MINOR|PATCH) (\d+)$", f.read(), re.M))
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


def soname(path):
    out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True).stdout
    m = re.search(r"^\s*SONAME\s+(\S+)", out, re.M)
    if not m:
        sys.exit("setup.py: %s has no soname" % path)
    return m.group(1)


def carry_libringo(lib):
    """libringo.so in the package, under the name the extension asks for."""
    if not os.path.exists(lib):
        sys.exit("setup.py: %s not found; build it first (bazel build //:libringo.so) or set RINGO_LIB" % lib)
    for old in os.listdir(PACKAGE):
        if old.startswith("libringo.so"):
            os.remove(os.path.join(PACKAGE, old))
    name = soname(lib)
    shutil.copyfile(lib, os.path.join(PACKAGE, name))
    return name


prebuilt = os.environ.get("RINGO_TORCH_EXTENSION")
if prebuilt:
    lib_name = carry_libringo(os.environ["RINGO_LIB"])
    shutil.copyfile(os.environ["RINGO_TORCH_BUILD_INFO"], os.path.join(PACKAGE, "_build.py"))
else:
    lib_name = carry_libringo(os.environ.get("RINGO_LIB", os.path.join(ROOT, "bazel-bin", "libringo.so")))
    with open(os.path.join(PACKAGE, "_build.py"), "w") as f:
        f.write("# The PyTorch ringo_torch._C was built against.\nTORCH_VERSION = %r\n" % torch.__version__)


class CopyPrebuilt(build_ext):
    """The extension Bazel linked, put where a build would have put it."""

    def build_extension(self, ext):
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(prebuilt, dest)


if prebuilt:
    extension = cpp_extension.CppExtension("ringo_torch._C", [])
    cmdclass = {"build_ext": CopyPrebuilt}
else:
    major = int(torch.__version__.split(".")[0])
    cuda = (major >= 2 and torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
            and os.environ.get("RINGO_TORCH_CUDA", "0") == "1")
    Extension = cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension
    extension = Extension(
        "ringo_torch._C",
        SOURCES,
        include_dirs=[ROOT, os.path.join(ROOT, "include")],
        define_macros=[("RINGO_TORCH_CUDA", "1")] if cuda else [],
        library_dirs=[PACKAGE],
        libraries=[":" + lib_name],
        extra_compile_args={"cxx": ["-std=c++17", "-O2"]} if cuda else ["-std=c++17", "-O2"],
        # --exclude-libs: whatever static archive the toolchain links in (a static
        # libstdc++ on some PyTorch 2.x builds) stays out of the extension's
        # exported symbols, where it could interpose on other libraries' calls.
        extra_link_args=["-Wl,-rpath,$ORIGIN", "-Wl,--exclude-libs,ALL"],
    )
    cmdclass = {"build_ext": cpp_extension.BuildExtension}

setup(
    name="ringo_torch",
    version=ringo_version(),
    description="Ringo as a torch.distributed backend (backend=\"ringo\")",
    packages=["ringo_torch"],
    package_data={"ringo_torch": [lib_name, "_build.py"]},
    ext_modules=[extension],
    cmdclass=cmdclass,
    zip_safe=False,
)
