#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace ringo::base::internal {

std::string Where(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

void CheckFailed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "ringo: check failed at %s:%d: %s %s\n", file, line, expr, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

Status ErrnoStatus(const char* file, int line, const char* call, int err) {
  return SystemError(std::string(call) + " failed: " + std::strerror(err) + " (" +
                     Where(file, line) + ")");
}

}  // namespace ringo::base::internal
