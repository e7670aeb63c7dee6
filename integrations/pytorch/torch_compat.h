// The one place where the PyTorch version and Ringo's feature set are looked
// at: the rest of ringo_torch is written against the names defined here.
//
//  - PyTorch 1.x: the process group is a c10d::ProcessGroup subclass.
//  - PyTorch 2.x: it is a c10d::Backend, which torch wraps in a ProcessGroup
//    and registers for the "cpu" and "cuda" devices.
//  - RINGO_TORCH_CUDA (set by the build where torch has CUDA, 2.x only):
//    CUDA tensors run on Ringo's GPU communicators.
//  - RINGO_HAS_P2P (defined by ringo/ringo.h once Ringo has point-to-point):
//    send, recv, alltoall_base, alltoall, gather and scatter.
#ifndef RINGO_INTEGRATIONS_PYTORCH_TORCH_COMPAT_H_
#define RINGO_INTEGRATIONS_PYTORCH_TORCH_COMPAT_H_

#include <torch/version.h>

#include "ringo/ringo.h"

#if TORCH_VERSION_MAJOR >= 2
#define RINGO_TORCH_BACKEND_API 1
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#define RINGO_TORCH_BACKEND_API 0
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#if defined(RINGO_TORCH_CUDA) && !RINGO_TORCH_BACKEND_API
#error "CUDA tensors need PyTorch 2.x (c10d::Backend); build without RINGO_TORCH_CUDA"
#endif

#if defined(RINGO_HAS_P2P)
#define RINGO_TORCH_P2P 1
#else
#define RINGO_TORCH_P2P 0
#endif

namespace ringo::pytorch {

#if RINGO_TORCH_BACKEND_API
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

// Work moved out of ProcessGroup into its own header before 2.0; some 1.13
// builds (Debian's) already have it there.
#if RINGO_TORCH_BACKEND_API || __has_include(<torch/csrc/distributed/c10d/Work.hpp>)
using WorkBase = c10d::Work;
#else
using WorkBase = c10d::ProcessGroup::Work;
#endif

using WorkPtr = c10::intrusive_ptr<WorkBase>;

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_TORCH_COMPAT_H_
