// Status and StatusOr: codes, names, messages, context, and the
// RETURN_IF_ERROR / ASSIGN_OR_RETURN propagation pair.
#include "base/status.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::base {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(OkStatus().ok());
}

TEST(StatusTest, OkCodeWithMessageIsStillOk) {
  Status s(Code::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, CodesMatchTheResultEnum) {
  // Numerically equal to ringoResult_t (and ncclResult_t).
  EXPECT_EQ(static_cast<int>(Code::kOk), 0);
  EXPECT_EQ(static_cast<int>(Code::kCudaError), 1);
  EXPECT_EQ(static_cast<int>(Code::kSystemError), 2);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 3);
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 4);
  EXPECT_EQ(static_cast<int>(Code::kInvalidUsage), 5);
  EXPECT_EQ(static_cast<int>(Code::kRemoteError), 6);
  EXPECT_EQ(static_cast<int>(Code::kInProgress), 7);
  EXPECT_EQ(static_cast<int>(Code::kTimeout), 8);
}

TEST(StatusTest, CodeNames) {
  EXPECT_STREQ(CodeName(Code::kOk), "OK");
  EXPECT_STREQ(CodeName(Code::kCudaError), "CUDA_ERROR");
  EXPECT_STREQ(CodeName(Code::kSystemError), "SYSTEM_ERROR");
  EXPECT_STREQ(CodeName(Code::kInternal), "INTERNAL");
  EXPECT_STREQ(CodeName(Code::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_STREQ(CodeName(Code::kInvalidUsage), "INVALID_USAGE");
  EXPECT_STREQ(CodeName(Code::kRemoteError), "REMOTE_ERROR");
  EXPECT_STREQ(CodeName(Code::kInProgress), "IN_PROGRESS");
  EXPECT_STREQ(CodeName(Code::kTimeout), "TIMEOUT");
  EXPECT_STREQ(CodeName(static_cast<Code>(99)), "UNKNOWN");
}

TEST(StatusTest, Constructors) {
  struct Case {
    Status status;
    Code code;
  };
  const std::vector<Case> cases = {
      {InvalidArgument("m1"), Code::kInvalidArgument}, {InvalidUsage("m2"), Code::kInvalidUsage},
      {Internal("m3"), Code::kInternal},               {RemoteError("m4"), Code::kRemoteError},
      {Timeout("m5"), Code::kTimeout},                 {SystemError("m6"), Code::kSystemError},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Status& s = cases[i].status;
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), cases[i].code);
    EXPECT_EQ(s.message(), "m" + std::to_string(i + 1));
    EXPECT_EQ(s.ToString(), std::string(CodeName(cases[i].code)) + ": m" + std::to_string(i + 1));
  }
  Status cuda(Code::kCudaError, "no device");
  EXPECT_EQ(cuda.ToString(), "CUDA_ERROR: no device");
}

TEST(StatusTest, EmptyMessageError) {
  Status s = Internal("");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "INTERNAL: ");
}

TEST(StatusTest, CopiesShareAndKeepValue) {
  Status a = RemoteError("peer died");
  Status b = a;
  Status c;
  c = b;
  EXPECT_EQ(c.code(), Code::kRemoteError);
  EXPECT_EQ(c.message(), "peer died");
  a = OkStatus();  // reassigning the original leaves the copies alone
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(b.message(), "peer died");
  Status moved = std::move(b);
  EXPECT_EQ(moved.message(), "peer died");
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status s = Timeout("no progress for 10 ms");
  Status t = s.WithContext("rank 3");
  EXPECT_EQ(t.code(), Code::kTimeout);
  EXPECT_EQ(t.message(), "rank 3: no progress for 10 ms");
  EXPECT_EQ(t.ToString(), "TIMEOUT: rank 3: no progress for 10 ms");
  // The original is unchanged.
  EXPECT_EQ(s.message(), "no progress for 10 ms");
  // Nesting.
  EXPECT_EQ(t.WithContext("init").message(), "init: rank 3: no progress for 10 ms");
}

TEST(StatusTest, WithContextOnOkStaysOk) {
  Status s = OkStatus().WithContext("anything");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusOrTest, HoldsValue) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), 42);
  EXPECT_EQ(*v, 42);
  *v = 7;
  EXPECT_EQ(v.value(), 7);
}

TEST(StatusOrTest, HoldsError) {
  StatusOr<int> v = InvalidArgument("bad count");
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(v.status().message(), "bad count");
}

TEST(StatusOrTest, ArrowAndMoveOnlyValue) {
  StatusOr<std::string> s = std::string("hello");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 5u);
  const StatusOr<std::string>& cs = s;
  EXPECT_EQ(cs->size(), 5u);
  EXPECT_EQ(cs.value(), "hello");

  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> taken = std::move(p).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 5);
}

// Helpers that exercise the propagation macros.
int g_after_return_if_error = 0;

Status Fails(Code code) { return Status(code, "inner failure"); }
Status Succeeds() { return OkStatus(); }

Status Outer(bool fail) {
  RETURN_IF_ERROR(fail ? Fails(Code::kRemoteError) : Succeeds());
  ++g_after_return_if_error;
  return Internal("reached the end");
}

int g_evaluations = 0;
Status CountedFailure() {
  ++g_evaluations;
  return Timeout("counted");
}
Status EvaluatesOnce() {
  RETURN_IF_ERROR(CountedFailure());
  return OkStatus();
}

StatusOr<int> MaybeInt(bool fail, int v) {
  if (fail) return SystemError("no int");
  return v;
}

StatusOr<int> AddTwo(bool fail_first, bool fail_second) {
  ASSIGN_OR_RETURN(int a, MaybeInt(fail_first, 1));
  ASSIGN_OR_RETURN(int b, MaybeInt(fail_second, 2));
  return a + b + 100;
}

Status AssignsExisting(int* out, bool fail) {
  int x = -1;
  ASSIGN_OR_RETURN(x, MaybeInt(fail, 9));
  *out = x;
  return OkStatus();
}

StatusOr<std::unique_ptr<int>> MakePtr(bool fail) {
  if (fail) return InvalidUsage("no ptr");
  return std::make_unique<int>(11);
}

StatusOr<int> UsesMoveOnly(bool fail) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakePtr(fail));
  return *p;
}

TEST(MacrosTest, ReturnIfErrorPropagatesTheSameStatus) {
  g_after_return_if_error = 0;
  Status s = Outer(true);
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_EQ(s.message(), "inner failure");
  EXPECT_EQ(g_after_return_if_error, 0);

  Status t = Outer(false);
  EXPECT_EQ(t.code(), Code::kInternal);
  EXPECT_EQ(t.message(), "reached the end");
  EXPECT_EQ(g_after_return_if_error, 1);
}

TEST(MacrosTest, ReturnIfErrorEvaluatesOnce) {
  g_evaluations = 0;
  Status s = EvaluatesOnce();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(g_evaluations, 1);
}

TEST(MacrosTest, ReturnIfErrorUnderUnbracedIf) {
  auto f = [](bool cond) -> Status {
    if (cond)
      RETURN_IF_ERROR(Fails(Code::kInvalidUsage));
    else
      return Internal("else branch");
    return OkStatus();
  };
  EXPECT_EQ(f(true).code(), Code::kInvalidUsage);
  EXPECT_EQ(f(false).code(), Code::kInternal);
}

TEST(MacrosTest, AssignOrReturn) {
  StatusOr<int> ok = AddTwo(false, false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 103);

  StatusOr<int> first = AddTwo(true, false);
  EXPECT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kSystemError);
  EXPECT_EQ(first.status().message(), "no int");

  StatusOr<int> second = AddTwo(false, true);
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kSystemError);
}

TEST(MacrosTest, AssignOrReturnToExistingVariable) {
  int out = 0;
  EXPECT_TRUE(AssignsExisting(&out, false).ok());
  EXPECT_EQ(out, 9);
  out = 0;
  Status s = AssignsExisting(&out, true);
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_EQ(out, 0);
}

TEST(MacrosTest, AssignOrReturnMoveOnly) {
  StatusOr<int> ok = UsesMoveOnly(false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 11);
  StatusOr<int> bad = UsesMoveOnly(true);
  EXPECT_EQ(bad.status().code(), Code::kInvalidUsage);
  EXPECT_EQ(bad.status().message(), "no ptr");
}

}  // namespace
}  // namespace ringo::base
