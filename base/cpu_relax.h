// A spin-wait hint to the core (x86 pause, Arm yield): what every polling
// loop calls between two looks at shared memory.
#ifndef RINGO_BASE_CPU_RELAX_H_
#define RINGO_BASE_CPU_RELAX_H_

namespace ringo::base {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace ringo::base

#endif  // RINGO_BASE_CPU_RELAX_H_
