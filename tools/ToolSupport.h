//===- ToolSupport.h - the command line of v4a's tools ----------*- C++ -*-===//
//
// LLVM's command-line parsing in the project's words: --version names v4a's
// version, and a mistake on the command line is one line "TOOL: error: ...".
//
//===----------------------------------------------------------------------===//

#ifndef V4A_TOOLS_TOOLSUPPORT_H
#define V4A_TOOLS_TOOLSUPPORT_H

#include "llvm/ADT/StringRef.h"

#include <string_view>

namespace v4a {

/// --version prints "v4a 0.11 (LLVM 22.1.8)".
void setToolVersionPrinter();

/// cl::ParseCommandLineOptions with setToolVersionPrinter; an unknown or
/// malformed option, a missing argument, ... is one error line naming the
/// tool and exits with status 1.
void parseToolOptions(int argc, char **argv, llvm::StringRef overview);

/// Prints "TOOL: warning: PATH: ..." for each of configWarnings(json).
void warnAboutConfig(llvm::StringRef tool, llvm::StringRef path,
                     std::string_view json);

} // namespace v4a

#endif // V4A_TOOLS_TOOLSUPPORT_H
