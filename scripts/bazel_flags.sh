# Sourced by the scripts: Bazel's disk cache lives outside the checkout so a
# fresh clone rebuilds from it.
RINGO_BAZEL_FLAGS=(--disk_cache="${RINGO_BAZEL_CACHE:-$HOME/.cache/ringo/bazel-disk}")
