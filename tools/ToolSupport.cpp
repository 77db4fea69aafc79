//===- ToolSupport.cpp - the command line of v4a's tools ------------------===//

#include "tools/ToolSupport.h"

#include "core/Package.h"
#include "v4a/ModelConfig.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstdlib>
#include <string>

void v4a::setToolVersionPrinter() {
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << pkg::kCompilerVersion << " (LLVM " << LLVM_VERSION_STRING << ")\n";
  });
}

void v4a::parseToolOptions(int argc, char **argv, llvm::StringRef overview) {
  setToolVersionPrinter();
  std::string messages;
  llvm::raw_string_ostream stream(messages);
  if (llvm::cl::ParseCommandLineOptions(argc, argv, overview, &stream))
    return;
  // LLVM words a mistake as "TOOL: Message.  Try: 'TOOL --help'" and more
  // lines; its first sentence is the message.
  std::string tool = llvm::sys::path::filename(argv[0]).str();
  llvm::StringRef first = llvm::StringRef(messages).split('\n').first;
  first.consume_front(tool + ": ");
  first.consume_front(llvm::StringRef(argv[0]).str() + ": ");
  first = first.split("  Try:").first.rtrim(" .!");
  std::string message = first.str();
  if (!message.empty())
    message[0] = static_cast<char>(std::tolower(message[0]));
  llvm::errs() << tool << ": error: " << message << " (" << tool
               << " --help lists the options)\n";
  std::exit(1);
}

void v4a::warnAboutConfig(llvm::StringRef tool, llvm::StringRef path,
                          std::string_view json) {
  for (const std::string &warning : configWarnings(json))
    llvm::errs() << tool << ": warning: " << path << ": " << warning << "\n";
}
