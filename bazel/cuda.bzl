"""cuda_library: compiles .cu files with nvcc into a cc_library.

nvcc runs in a genrule (Bazel 4 has no CUDA rules); each .cu becomes one
position-independent object, so nvcc builds files in parallel. Objects hold
sm_90 machine code (H100/H200) and compute_80 PTX, which the driver compiles
for any other chip from the A100 on at first use (and keeps in its compute
cache): one machine-code target keeps a cold build of the kernels within the
test command's time on 2 cores.

Flags (read through config_settings the macro declares in the calling
package):
  --define=ringo_cuda_archs=sm_90   sm_90 only (.bazelrc: --config=cudadev)
  --define=ringo_cuda_kernels=dev   defines RINGO_CUDA_DEV_KERNELS=1, which the
                                    kernels read to instantiate only a few
                                    (datatype, op) pairs
  --define=ringo_cuda_bundle=1      no line info, fatbins compressed
                                    (--compress-mode=size: about a tenth of
                                    the size); .bazelrc's --config=gpubundle,
                                    which scripts/gpu_bundle.sh builds
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@cuda//:defs.bzl", "CUDA_PATH", "HAVE_CUDA")

NVCC = CUDA_PATH + "/bin/nvcc"

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_80,code=compute_80",
]

def cuda_library(name, srcs, hdrs = [], device_hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """A cc_library whose srcs are .cu files compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu sources; each compiles to one object.
      hdrs: headers the sources and dependants include.
      device_hdrs: header files or filegroups of other packages the .cu files include.
      deps: cc_library targets the resulting library links with.
      copts: extra nvcc flags.
      visibility: as for cc_library.
      **kwargs: passed to the cc_library.
    """
    objs = []
    if not HAVE_CUDA:
        # No toolkit: the library is empty; callers check RINGO_HAVE_CUDA.
        cc_library(name = name, hdrs = hdrs, deps = deps, visibility = visibility, **kwargs)
        return
    _declare_dev_settings()
    arch_flags = select({
        ":_ringo_cuda_archs_sm_90": " ".join(CUDA_ARCH_FLAGS[:1]),
        "//conditions:default": " ".join(CUDA_ARCH_FLAGS),
    })
    dev_flags = select({
        ":_ringo_cuda_kernels_dev": "-DRINGO_CUDA_DEV_KERNELS=1",
        "//conditions:default": "",
    })
    size_flags = select({
        ":_ringo_cuda_bundle": "--compress-mode=size",
        "//conditions:default": "-lineinfo",
    })
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + device_hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-std=c++17",
                "-O3",
                "--expt-relaxed-constexpr",
                "-Xcompiler=-fPIC,-fvisibility=hidden",
                "-I.",
                "-I$(GENDIR)",
                "-isystem " + CUDA_PATH + "/include",
                "",
            ]) + arch_flags + " " + dev_flags + " " + size_flags + " " + " ".join(copts + [
                "-c $(location " + src + ")",
                "-o $@",
            ]),
        )
        objs.append(obj)
    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        visibility = visibility,
        alwayslink = True,
        **kwargs
    )

def _declare_dev_settings():
    """The config_settings cuda_library selects on, once per package."""
    if native.existing_rule("_ringo_cuda_archs_sm_90") == None:
        native.config_setting(
            name = "_ringo_cuda_archs_sm_90",
            define_values = {"ringo_cuda_archs": "sm_90"},
        )
    if native.existing_rule("_ringo_cuda_kernels_dev") == None:
        native.config_setting(
            name = "_ringo_cuda_kernels_dev",
            define_values = {"ringo_cuda_kernels": "dev"},
        )
    if native.existing_rule("_ringo_cuda_bundle") == None:
        native.config_setting(
            name = "_ringo_cuda_bundle",
            define_values = {"ringo_cuda_bundle": "1"},
        )
