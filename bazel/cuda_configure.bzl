"""cuda_configure: finds the CUDA toolkit (CUDA_PATH, default /usr/local/cuda).

With a toolkit, @cuda exposes its headers and static cudart and HAVE_CUDA is
True; without one, @cuda's targets are empty, HAVE_CUDA is False, and Ringo
builds for host memory only (base/cuda.cc then reports no GPU).
"""

_REAL_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"], allow_empty = True),
    includes = ["include"],
)

# libcu++ (<cuda/atomic>, ...) for host C++ that includes device headers:
# its files have no extension, and nvcc finds them without this. CUDA 13
# keeps it under include/cccl, CUDA 12 under include.
cc_library(
    name = "cccl_headers",
    hdrs = glob(
        ["include/cccl/cuda/**", "include/cccl/nv/**", "include/cuda/**", "include/nv/**"],
        allow_empty = True,
    ),
    includes = ["include/cccl"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cudart_static",
    srcs = ["lib64/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)
"""

_STUB_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")

cc_library(name = "cccl_headers")

cc_library(name = "cudart_static")
"""

def _cuda_configure_impl(ctx):
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    have = ctx.path(path + "/include/cuda_runtime_api.h").exists and \
           ctx.path(path + "/lib64/libcudart_static.a").exists
    if have:
        ctx.symlink(path + "/include", "include")
        ctx.symlink(path + "/lib64", "lib64")
        ctx.file("BUILD", _REAL_BUILD)
    else:
        ctx.file("BUILD", _STUB_BUILD)
    ctx.file("defs.bzl", "HAVE_CUDA = %s\nCUDA_PATH = %r\n" % (have, path))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
