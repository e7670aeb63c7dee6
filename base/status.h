// Status and StatusOr<T>: how every internal function reports failure.
// Cheap to copy when OK (no allocation); the message says what failed and where.
#ifndef RINGO_BASE_STATUS_H_
#define RINGO_BASE_STATUS_H_

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

namespace ringo::base {

// Internal codes; numerically equal to ringoResult_t (collectives/ maps them).
enum class Code : int {
  kOk = 0,
  kCudaError = 1,
  kSystemError = 2,
  kInternal = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message);

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const;
  // "CODE: message".
  std::string ToString() const;
  // Returns this status with `context` prepended to the message.
  Status WithContext(const std::string& context) const;

  // A fault that started at another rank (a peer that died, stalled,
  // aborted, or called a mismatched collective) carries that rank and the
  // message it reported, so every survivor names it and relays it unchanged.
  // -1 and "" when the fault is this rank's own.
  int origin() const { return rep_ ? rep_->origin : -1; }
  const std::string& origin_message() const;
  uint64_t origin_seq() const { return rep_ ? rep_->origin_seq : 0; }  // its collective, 0: unknown
  // This status naming `rank` as where the fault started, with its message
  // and the sequence number of the collective it happened in.
  Status WithOrigin(int rank, std::string origin_message, uint64_t origin_seq = 0) const;

 private:
  struct Rep {
    Code code;
    std::string message;
    int origin = -1;
    std::string origin_message;
    uint64_t origin_seq = 0;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string message);
Status InvalidUsage(std::string message);
Status Internal(std::string message);
Status RemoteError(std::string message);
Status Timeout(std::string message);
Status SystemError(std::string message);

// A T or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)), has_value_(true) {}  // NOLINT
  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }
  T& operator*() & { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }

 private:
  Status status_;
  T value_{};
  bool has_value_ = false;
};

}  // namespace ringo::base

#define RINGO_STATUS_CONCAT_INNER(a, b) a##b
#define RINGO_STATUS_CONCAT(a, b) RINGO_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function if it is an error.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::ringo::base::Status ringo_status_ = (expr);              \
    if (!ringo_status_.ok()) return ringo_status_;             \
  } while (0)

// `lhs = value of expr`, or returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(RINGO_STATUS_CONCAT(ringo_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#endif  // RINGO_BASE_STATUS_H_
