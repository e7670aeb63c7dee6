#include "kernels/internal/host_loops_table.h"

#include "base/check.h"
#include <mutex>
#include <string>

#include "kernels/host_isa.h"
#include "base/logging.h"

namespace ringo::kernels::internal {
namespace {

std::mutex g_isa_mu;
std::string* g_isa_setting = new std::string();  // GUARDED_BY(g_isa_mu); SelectHostIsa's first value

struct Tables {
  HostIsaTable sets[kNumHostIsas];
  bool built[kNumHostIsas] = {};
  HostIsa active = HostIsa::kGeneric;
};

bool CpuRuns(HostIsa isa) {
  switch (isa) {
    case HostIsa::kGeneric: return true;
    case HostIsa::kAvx2:
#if defined(__x86_64__) && defined(__GNUC__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
      return false;
#endif
  }
  return false;
}

const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables();  // never destroyed: used until exit
    FillGenericHostLoops(t->sets[static_cast<int>(HostIsa::kGeneric)]);
    t->built[static_cast<int>(HostIsa::kGeneric)] = true;
    if (CpuRuns(HostIsa::kAvx2)) {
      t->built[static_cast<int>(HostIsa::kAvx2)] = FillAvx2HostLoops(t->sets[static_cast<int>(HostIsa::kAvx2)]);
    }
    HostIsa widest = HostIsa::kGeneric;
    for (int i = kNumHostIsas - 1; i >= 0; --i) {
      if (t->built[i]) {
        widest = static_cast<HostIsa>(i);
        break;
      }
    }
    t->active = widest;
    HostIsa wanted;
    bool automatic = true;
    std::string setting;
    {
      std::lock_guard<std::mutex> lock(g_isa_mu);
      setting = *g_isa_setting;
    }
    if (!setting.empty() && ParseHostIsa(setting, &wanted, &automatic) && !automatic) {
      if (t->built[static_cast<int>(wanted)]) {
        t->active = wanted;
      } else {
        RINGO_LOG(WARN) << "RINGO_HOST_ISA=" << setting << ": this CPU or build does not run it; using "
                        << HostIsaName(widest);
      }
    }
    RINGO_LOG(INFO) << "host loops: " << HostIsaName(t->active);
    return t;
  }();
  return *tables;
}

bool g_isa_selected = false;  // GUARDED_BY(g_isa_mu)

}  // namespace

}  // namespace ringo::kernels::internal

namespace ringo::kernels {

void SelectHostIsa(const std::string& setting) {
  std::lock_guard<std::mutex> lock(internal::g_isa_mu);
  if (internal::g_isa_selected) return;
  internal::g_isa_selected = true;
  *internal::g_isa_setting = setting;
}

}  // namespace ringo::kernels

namespace ringo::kernels::internal {

const char* HostIsaName(HostIsa isa) {
  switch (isa) {
    case HostIsa::kGeneric: return "generic";
    case HostIsa::kAvx2: return "avx2";
  }
  return "?";
}

bool ParseHostIsa(const std::string& name, HostIsa* isa, bool* automatic) {
  *automatic = name == "auto";
  if (*automatic) return true;
  for (int i = 0; i < kNumHostIsas; ++i) {
    if (name == HostIsaName(static_cast<HostIsa>(i))) {
      *isa = static_cast<HostIsa>(i);
      return true;
    }
  }
  return false;
}

bool HostIsaSupported(HostIsa isa) { return GetTables().built[static_cast<int>(isa)]; }

HostIsa ActiveHostIsa() { return GetTables().active; }

const HostLoops& GetHostLoops(base::DataType dtype, base::RedOp op) {
  return GetHostLoopsFor(ActiveHostIsa(), dtype, op);
}

namespace {

const HostIsaTable& BuiltSet(HostIsa isa) {
  const Tables& t = GetTables();
  RINGO_CHECK(t.built[static_cast<int>(isa)], "host loops of an instruction set this CPU does not run");
  return t.sets[static_cast<int>(isa)];
}

}  // namespace

const HostLoops& GetHostLoopsFor(HostIsa isa, base::DataType dtype, base::RedOp op) {
  RINGO_CHECK(base::IsValidDataType(static_cast<int>(dtype)) && static_cast<int>(op) >= 0 &&
                  static_cast<int>(op) < base::kNumReduceOps,
              "host loops of an unknown datatype or op");
  return BuiltSet(isa).loops[static_cast<int>(dtype)][static_cast<int>(op)];
}

const HalfConversions& GetHalfConversionsFor(HostIsa isa) { return BuiltSet(isa).half; }

}  // namespace ringo::kernels::internal
