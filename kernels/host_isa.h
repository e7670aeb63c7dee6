// Which instruction set the host executors' element loops use
// (internal/host_loops_table.h): the widest this CPU runs, or the one
// RINGO_HOST_ISA names. A process-wide choice, made once: the first
// communicator passes its configuration's value before any loop runs, and
// later calls change nothing. Thread-safe.
#ifndef RINGO_KERNELS_HOST_ISA_H_
#define RINGO_KERNELS_HOST_ISA_H_

#include <string>

namespace ringo::kernels {

// `setting`: RINGO_HOST_ISA as a configuration snapshot holds it ("",
// "auto", "generic", "avx2").
void SelectHostIsa(const std::string& setting);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_HOST_ISA_H_
