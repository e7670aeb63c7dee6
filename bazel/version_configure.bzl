"""version_configure: Ringo's version, read from the one place it is written.

The public header (include/ringo/ringo.h: RINGO_MAJOR, RINGO_MINOR,
RINGO_PATCH) is the version's one home; this repository rule reads it and
gives the build the same numbers as @ringo_version//:defs.bzl:

  RINGO_VERSION  "MAJOR.MINOR.PATCH"
  RINGO_SONAME   libringo.so's soname: "libringo.so.0.MINOR" while MAJOR
                 is 0 (every 0.x minor release may change the ABI), then
                 "libringo.so.MAJOR"

Bazel re-reads the header when it changes (it is read through its label).
"""

def _number(text, name):
    for line in text.splitlines():
        parts = [p for p in line.replace("\t", " ").split(" ") if p]
        if len(parts) == 3 and parts[0] == "#define" and parts[1] == name:
            return int(parts[2])
    fail("include/ringo/ringo.h does not define " + name)

def _version_configure_impl(ctx):
    header = ctx.read(ctx.path(Label("//include:ringo/ringo.h")))
    major = _number(header, "RINGO_MAJOR")
    minor = _number(header, "RINGO_MINOR")
    patch = _number(header, "RINGO_PATCH")
    version = "%d.%d.%d" % (major, minor, patch)
    soname = "libringo.so.0.%d" % minor if major == 0 else "libringo.so.%d" % major
    ctx.file("BUILD", "")
    ctx.file("defs.bzl", "RINGO_VERSION = %r\nRINGO_SONAME = %r\n" % (version, soname))

version_configure = repository_rule(implementation = _version_configure_impl)
