#include "base/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace ringo::base {
namespace {

std::string ExpandPath(const std::string& pattern) {
  std::string out;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
      out += host;
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(getpid());
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

FILE* Sink() {
  static std::once_flag once;
  static FILE* sink = stderr;
  std::call_once(once, [] {
    const std::string& path = GetConfig().log_file;
    if (path.empty()) return;
    FILE* f = std::fopen(ExpandPath(path).c_str(), "a");
    if (f != nullptr) sink = f;
  });
  return sink;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(GetConfig().log_level);
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* base = std::strrchr(file, '/');
  stream_ << host << ":" << getpid() << " ringo " << LevelName(level_) << " "
          << (base ? base + 1 : file) << ":" << line << " ";
}

LogMessage::~LogMessage() {
  stream_ << "\n";
  std::string text = stream_.str();
  FILE* sink = Sink();
  std::fwrite(text.data(), 1, text.size(), sink);  // one write per line
  std::fflush(sink);
}

}  // namespace ringo::base
