// Logging: RINGO_LOG(WARN|INFO|TRACE) << ...; level from RINGO_DEBUG, output
// to stderr or RINGO_DEBUG_FILE. One line per message, written atomically.
// Thread-safe.
#ifndef RINGO_BASE_LOGGING_H_
#define RINGO_BASE_LOGGING_H_

#include <sstream>

#include "base/config.h"

namespace ringo::base {

bool LogEnabled(LogLevel level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Lets RINGO_LOG be one expression: binds looser than << and yields void.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace ringo::base

#define RINGO_LOG_LEVEL_WARN ::ringo::base::LogLevel::kWarn
#define RINGO_LOG_LEVEL_INFO ::ringo::base::LogLevel::kInfo
#define RINGO_LOG_LEVEL_TRACE ::ringo::base::LogLevel::kTrace

// An expression, so it nests safely under an unbraced if.
#define RINGO_LOG(level)                                                            \
  !::ringo::base::LogEnabled(RINGO_LOG_LEVEL_##level)                               \
      ? (void)0                                                                     \
      : ::ringo::base::LogVoidify() &                                               \
            ::ringo::base::LogMessage(RINGO_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

#endif  // RINGO_BASE_LOGGING_H_
