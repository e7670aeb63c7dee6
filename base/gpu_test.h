// For GPU tests: skip where no usable GPU is visible, with the reason, unless
// RINGO_REQUIRE_GPU=1 says a GPU is expected, in which case the test fails
// with the same reason (so a run on a GPU machine cannot pass without
// touching the GPU). Header-only, for gtest tests.
#ifndef RINGO_BASE_GPU_TEST_H_
#define RINGO_BASE_GPU_TEST_H_

#include <gtest/gtest.h>

#include "base/config.h"

// In a test body (or a function returning void): when `visible` is false,
// GTEST_SKIP() << why, or GTEST_FAIL() << why under RINGO_REQUIRE_GPU=1.
// `why` is streamed, so it may be any expression gtest can print.
#define RINGO_SKIP_WITHOUT_GPU(visible, why)                                     \
  do {                                                                           \
    if (!(visible)) {                                                            \
      if (::ringo::base::GetConfig().require_gpu) {                              \
        GTEST_FAIL() << "RINGO_REQUIRE_GPU=1, but the GPU is unusable: " << why; \
      } else {                                                                   \
        GTEST_SKIP() << why;                                                     \
      }                                                                          \
    }                                                                            \
  } while (0)

#endif  // RINGO_BASE_GPU_TEST_H_
