"""torch_configure: finds the system's PyTorch for integrations/pytorch.

Asks the Python that has torch (RINGO_TORCH_PYTHON, default /usr/bin/python3:
Debian's python3-torch and libtorch-dev) for its version and headers, and
checks for pybind11's. With them, @torch//:torch links a C++ extension
against that libtorch, TORCH_COPTS has its include directories, and
HAVE_TORCH is True. Without them (torch not installed; or its headers are not
under /usr/include, the only absolute include path Bazel's toolchain allows,
as with a pip-installed torch: integrations/pytorch/setup.py builds for that
one), HAVE_TORCH is False and TORCH_REASON says why.
"""

_PROBE = """
import json, os, sys, sysconfig
try:
    import torch
except Exception as e:
    print(json.dumps({"reason": "cannot import torch with %s: %s" % (sys.executable, e)}))
    raise SystemExit(0)
root = os.path.dirname(torch.__file__)
headers = os.path.dirname(os.path.realpath(os.path.join(root, "include", "torch")))
lib = os.path.dirname(os.path.realpath(os.path.join(root, "lib", "libtorch.so")))
print(json.dumps({
    "version": torch.__version__,
    "headers": headers,
    "api": os.path.join(headers, "torch", "csrc", "api", "include"),
    "python": sysconfig.get_paths()["include"],
    "lib": lib,
    "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
}))
"""

_BUILD = """
package(default_visibility = ["//visibility:public"])

# libtorch and its Python bindings; headers come through TORCH_COPTS.
cc_library(
    name = "torch",
    defines = ["_GLIBCXX_USE_CXX11_ABI=%d"],
    linkopts = ["-L%s", "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10"],
)
"""

_STUB_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "torch")
"""

def _torch_configure_impl(ctx):
    python = ctx.os.environ.get("RINGO_TORCH_PYTHON", "/usr/bin/python3")
    info = {"reason": "no Python at " + python}
    if ctx.path(python).exists:
        result = ctx.execute([python, "-c", _PROBE], timeout = 120)
        if result.return_code != 0:
            info = {"reason": "probing torch failed: " + result.stderr}
        else:
            info = json.decode(result.stdout.strip().splitlines()[-1])
    if "reason" not in info:
        for d in [info["headers"], info["api"], info["python"]]:
            if not d.startswith("/usr/include"):
                info = {"reason": "headers at %s are outside /usr/include; build with integrations/pytorch/setup.py" % d}
                break
    if "reason" not in info and not ctx.path("/usr/include/pybind11/pybind11.h").exists:
        info = {"reason": "pybind11's headers are missing (Debian: pybind11-dev)"}
    if "reason" in info:
        ctx.file("BUILD", _STUB_BUILD)
        ctx.file("defs.bzl", "HAVE_TORCH = False\nTORCH_VERSION = ''\nTORCH_COPTS = []\nTORCH_REASON = %r\n" % info["reason"])
        return
    ctx.file("BUILD", _BUILD % (info["cxx11_abi"], info["lib"]))
    copts = ["-isystem", info["api"], "-isystem", info["python"]]
    ctx.file("defs.bzl", "HAVE_TORCH = True\nTORCH_VERSION = %r\nTORCH_COPTS = %r\nTORCH_REASON = ''\n" % (info["version"], copts))

torch_configure = repository_rule(
    implementation = _torch_configure_impl,
    environ = ["RINGO_TORCH_PYTHON"],
    local = True,
)
