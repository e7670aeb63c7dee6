#include "base/status.h"

namespace ringo::base {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kCudaError: return "CUDA_ERROR";
    case Code::kSystemError: return "SYSTEM_ERROR";
    case Code::kInternal: return "INTERNAL";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kInvalidUsage: return "INVALID_USAGE";
    case Code::kRemoteError: return "REMOTE_ERROR";
    case Code::kInProgress: return "IN_PROGRESS";
    case Code::kTimeout: return "TIMEOUT";
  }
  return "UNKNOWN";
}

Status::Status(Code code, std::string message) {
  if (code != Code::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

namespace {
const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}
}  // namespace

const std::string& Status::message() const { return rep_ ? rep_->message : EmptyString(); }

const std::string& Status::origin_message() const { return rep_ ? rep_->origin_message : EmptyString(); }

Status Status::WithOrigin(int rank, std::string origin_message, uint64_t origin_seq) const {
  if (ok()) return *this;
  Status s;
  s.rep_ = std::make_shared<const Rep>(Rep{code(), message(), rank, std::move(origin_message), origin_seq});
  return s;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code())) + ": " + message();
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  Status s;
  s.rep_ = std::make_shared<const Rep>(Rep{code(), context + ": " + message(), origin(), origin_message(), origin_seq()});
  return s;
}

Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
Status InvalidUsage(std::string m) { return Status(Code::kInvalidUsage, std::move(m)); }
Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
Status RemoteError(std::string m) { return Status(Code::kRemoteError, std::move(m)); }
Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
Status SystemError(std::string m) { return Status(Code::kSystemError, std::move(m)); }

}  // namespace ringo::base
