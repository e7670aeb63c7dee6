// Helpers shared by the API tests: host communicators made without
// ringoCommInitAll (which would pick GPUs where there are some), error-code
// expectations that also check ringoGetLastError, and running a check in a
// forked child where a library bug could crash the test binary.
#ifndef RINGO_TESTS_API_TEST_UTIL_H_
#define RINGO_TESTS_API_TEST_UTIL_H_

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"

namespace ringo::tests {

// `n` host communicators of one clique, rank i in element i, created by n
// threads with ringoCommInitRankConfig(device_kind = RINGO_DEVICE_HOST).
// Empty (with a gtest failure) if any rank fails.
std::vector<ringoComm_t> MakeHostComms(int n);
void DestroyComms(const std::vector<ringoComm_t>& comms);

// True if `text` contains one of `keywords`, ignoring case.
bool MentionsAny(const std::string& text, std::initializer_list<const char*> keywords);

// Success when rc == want, and the calling thread's ringoGetLastError
// (NULL and, if given, `comm`) is non-empty and mentions one of `keywords`.
::testing::AssertionResult FailsWith(ringoResult_t rc, ringoResult_t want, ringoComm_t comm,
                                     std::initializer_list<const char*> keywords);

// As FailsWith, as a string for bodies that run in a forked child: "" or
// what is wrong, prefixed with `what`.
std::string CheckFails(const char* what, ringoResult_t rc, ringoResult_t want,
                       std::initializer_list<const char*> keywords);

// "" when a failed init's `message` names `rank` among the ranks that never
// joined ("rank(s) 1,3 never joined ..."); otherwise what is wrong. Other
// ranks may be named beside it (a present rank that was slow to join).
std::string NamesAbsentRank(const std::string& message, int rank);

// Runs `fn` in a forked child (so a crash fails only this test) with a 60 s
// deadline; the child's message or its death is returned, "" on success.
std::string InChild(const std::function<std::string()>& fn);

// A 1-rank host communicator made in the current process (for InChild bodies);
// nullptr if it fails.
ringoComm_t MakeSoloHostComm();

}  // namespace ringo::tests

#endif  // RINGO_TESTS_API_TEST_UTIL_H_
