#!/usr/bin/env bash
# JUnit XML for the shell suites (sourced): each case passed, failed or
# skipped, written to Bazel's $XML_OUTPUT_FILE when the script exits, so a
# suite that cannot run on a machine reports its cases as skipped instead
# of one passed target, and scripts/test_summary.py counts each case.
#
#   junit_init SUITE            start (and write the file at exit)
#   junit_case NAME pass|fail|skip [MESSAGE]
#   junit_skip_all MESSAGE NAME...   every named case skipped, with why
#   junit_failed                true when a case failed (the exit status)
#   junit_run NAME FUNCTION     FUNCTION as case NAME, in a subshell under
#                               set -e, its time printed; inside it,
#   junit_fail MESSAGE          ends the case, failed with MESSAGE

JUNIT_SUITE=""
JUNIT_LINES=()
JUNIT_FAILED=0
JUNIT_SKIPPED=0
JUNIT_START=$(date +%s)
JUNIT_WHY=""

junit_escape() {
  local s=$1
  s=${s//&/&amp;}
  s=${s//</&lt;}
  s=${s//>/&gt;}
  s=${s//\"/&quot;}
  printf '%s' "$s"
}

junit_write() {
  [ -n "${XML_OUTPUT_FILE:-}" ] || return 0
  local n=${#JUNIT_LINES[@]}
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites>"
    echo "<testsuite name=\"$(junit_escape "$JUNIT_SUITE")\" tests=\"$n\" failures=\"$JUNIT_FAILED\" skipped=\"$JUNIT_SKIPPED\" time=\"$(( $(date +%s) - JUNIT_START ))\">"
    printf '%s\n' "${JUNIT_LINES[@]}"
    echo "</testsuite>"
    echo "</testsuites>"
  } > "$XML_OUTPUT_FILE"
}

junit_init() {
  JUNIT_SUITE=$1
  trap junit_write EXIT
}

junit_case() {
  local name=$1 verdict=$2 message=${3:-}
  local head="<testcase classname=\"$(junit_escape "$JUNIT_SUITE")\" name=\"$(junit_escape "$name")\""
  case "$verdict" in
    pass) JUNIT_LINES+=("$head/>"); echo "PASS: $name" ;;
    skip) JUNIT_LINES+=("$head><skipped message=\"$(junit_escape "$message")\"/></testcase>")
          JUNIT_SKIPPED=$((JUNIT_SKIPPED + 1)); echo "SKIPPED: $name: $message" ;;
    *)    JUNIT_LINES+=("$head><failure message=\"$(junit_escape "$message")\"/></testcase>")
          JUNIT_FAILED=$((JUNIT_FAILED + 1)); echo "FAIL: $name${message:+: $message}" ;;
  esac
}

junit_skip_all() {
  local message=$1; shift
  local name
  for name in "$@"; do junit_case "$name" skip "$message"; done
}

junit_failed() { [ "$JUNIT_FAILED" -gt 0 ]; }

junit_fail() {
  echo "$*" > "$JUNIT_WHY"
  exit 1
}

junit_run() {
  [ -n "$JUNIT_WHY" ] || JUNIT_WHY=$(mktemp "${TEST_TMPDIR:-/tmp}/junit_why.XXXXXX")
  : > "$JUNIT_WHY"
  local start=$SECONDS
  if ( set -e; "$2" ); then
    junit_case "$1" pass
  else
    junit_case "$1" fail "$([ -s "$JUNIT_WHY" ] && cat "$JUNIT_WHY" || echo "see the log")"
  fi
  echo "  ($1: $((SECONDS - start)) s)"
}
