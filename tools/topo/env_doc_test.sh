#!/usr/bin/env bash
# docs/environment.md is what `ringo-topo --env-markdown` prints from the
# configuration registry (base/config.cc): a variable added, removed or
# reworded in one and not the other fails here.
set -euo pipefail
topo="$1"
doc="$2"
generated="${TEST_TMPDIR:-/tmp}/environment.md"
"$topo" --env-markdown > "$generated"
if ! diff -u "$doc" "$generated"; then
  echo "docs/environment.md differs from the registry (above: - the document, + the registry)."
  echo "Regenerate it: bazel run //tools/topo:ringo-topo -- --env-markdown > docs/environment.md"
  exit 1
fi
# The document names every declared variable (a check of the check).
count=$(grep -c '^| `' "$doc")
declared=$("$topo" --env | grep -c '^[A-Z][A-Z0-9_]* (')
if [ "$count" -ne "$declared" ]; then
  echo "docs/environment.md has $count rows, the registry $declared variables"
  exit 1
fi
echo "docs/environment.md matches the registry: $count variables"
