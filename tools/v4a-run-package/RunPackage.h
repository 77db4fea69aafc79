//===- RunPackage.h - run a compiled package, runtime only ------*- C++ -*-===//
//
// The command line of v4a-run-package (and of v4a-run --package): runs a
// package on the CUDA backend with the runtime alone. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_TOOLS_V4A_RUN_PACKAGE_RUNPACKAGE_H
#define V4A_TOOLS_V4A_RUN_PACKAGE_RUNPACKAGE_H

namespace v4a {

/// Runs `argv` (argv[1] on: the package, then flags) and returns the exit
/// status; messages start with `tool`.
int runPackage(const char *tool, int argc, char **argv);

} // namespace v4a

#endif // V4A_TOOLS_V4A_RUN_PACKAGE_RUNPACKAGE_H
