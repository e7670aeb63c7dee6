// ringo_torch._C: the Python module holding ProcessGroupRingo. ringo_torch's
// __init__.py registers it with torch.distributed as the backend "ringo".
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "integrations/pytorch/process_group.h"

namespace py = pybind11;
using ringo::pytorch::GroupBase;
using ringo::pytorch::ProcessGroupRingo;

namespace {

int RingoVersion() {
  int version = 0;
  if (ringoGetVersion(&version) != ringoSuccess) return -1;
  return version;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Ringo's torch.distributed process group (import ringo_torch to register it)";
  // c10d's Python types (Store, ProcessGroup or Backend) must exist first.
  py::module_::import("torch.distributed");

  py::class_<ProcessGroupRingo, GroupBase, c10::intrusive_ptr<ProcessGroupRingo>>(
      m, "ProcessGroupRingo",
      "Ringo's process group. Made by torch.distributed through the creator "
      "function ringo_torch registers: init_process_group(backend=\"ringo\").")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupRingo>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           // Making the host communicator waits for the other ranks.
           py::call_guard<py::gil_scoped_release>());

  m.attr("HAS_P2P") = ProcessGroupRingo::kHasP2P;
#ifdef RINGO_TORCH_CUDA
  m.attr("HAS_CUDA") = true;
#else
  m.attr("HAS_CUDA") = false;
#endif
  m.attr("BACKEND_API") = static_cast<bool>(RINGO_TORCH_BACKEND_API);
  m.attr("BUILT_WITH_TORCH") = TORCH_VERSION;
  m.def(
      "shrink",
      [](const c10::intrusive_ptr<ProcessGroupRingo>& group) { return group->Shrink(); },
      py::arg("group"), py::call_guard<py::gil_scoped_release>(),
      "The survivors' group over the same processes (ProcessGroupRingo::Shrink).");
  m.def(
      "set_wire", [](const c10::intrusive_ptr<ProcessGroupRingo>& group, int wire) { group->SetWire(wire); },
      py::arg("group"), py::arg("wire"), py::call_guard<py::gil_scoped_release>(),
      "Sets the group's wire format between hosts (ProcessGroupRingo::SetWire).");
  m.def(
      "wire_round",
      [](const c10::intrusive_ptr<ProcessGroupRingo>& group, const at::Tensor& tensor, bool average) {
        return group->WireRound(tensor, average ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM);
      },
      py::arg("group"), py::arg("tensor"), py::arg("average") = false, py::call_guard<py::gil_scoped_release>(),
      "This rank's contribution to an all-reduce as the wire sends it (ProcessGroupRingo::WireRound).");
  m.def(
      "allreduce_feedback",
      [](const c10::intrusive_ptr<ProcessGroupRingo>& group, at::Tensor tensor, at::Tensor residual) {
        return group->AllReduceWithFeedback(tensor, residual);
      },
      py::arg("group"), py::arg("tensor"), py::arg("residual"), py::call_guard<py::gil_scoped_release>(),
      "A sum all-reduce with error feedback (ProcessGroupRingo::AllReduceWithFeedback); returns the Work.");
  m.def("ringo_version", &RingoVersion,
        "Ringo's version code (MAJOR * 10000 + MINOR * 100 + PATCH).");
}
