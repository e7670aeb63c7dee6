// RINGO_CHECK: a broken invariant aborts with file, line and message. Never a
// Status: these are bugs, not conditions a caller can handle.
// RINGO_ERRNO / RINGO_CUDA wrap system and CUDA calls into a Status that
// records the call text and file:line.
#ifndef RINGO_BASE_CHECK_H_
#define RINGO_BASE_CHECK_H_

#include <cerrno>
#include <cstring>
#include <string>

#include "base/status.h"

namespace ringo::base::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);
Status ErrnoStatus(const char* file, int line, const char* call, int err);
std::string Where(const char* file, int line);
}  // namespace ringo::base::internal

#define RINGO_CHECK(cond, ...)                                                          \
  do {                                                                                  \
    if (__builtin_expect(!(cond), 0))                                                   \
      ::ringo::base::internal::CheckFailed(__FILE__, __LINE__, #cond, std::string(__VA_ARGS__)); \
  } while (0)

// Evaluates a call that returns -1 and sets errno on failure; returns a
// SystemError Status from the enclosing function when it fails.
#define RINGO_ERRNO(call)                                                                   \
  do {                                                                                      \
    if ((call) == -1)                                                                       \
      return ::ringo::base::internal::ErrnoStatus(__FILE__, __LINE__, #call, errno);        \
  } while (0)

#endif  // RINGO_BASE_CHECK_H_
