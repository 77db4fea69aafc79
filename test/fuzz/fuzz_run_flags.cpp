//===- fuzz_run_flags.cpp - fuzz v4a-run's flag parsing and checks --------===//
//
// The input is a command line (arguments separated by NUL or newline). Only
// v4a-run's own flags and positionals are passed on: others would reach
// LLVM's options, some of which exit. Parsing and checking must never crash,
// and flags that pass the checks must describe a run within the limits.
//
//===----------------------------------------------------------------------===//

#include "tools/v4a-run/RunOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace v4a::run;

/// Whether `arg` is a positional or one of v4a-run's flags.
static bool isOwnArgument(const std::string &arg) {
  if (arg.empty() || arg[0] != '-')
    return true;
  size_t start = arg.find_first_not_of('-');
  if (start == std::string::npos)
    return arg.size() <= 2; // "-" (a positional) or "--" (end of flags)
  std::string name = arg.substr(start);
  name = name.substr(0, name.find('='));
  return llvm::is_contained(flagNames(), name);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args = {"v4a-run"};
  std::string current;
  for (size_t i = 0; i <= size && args.size() < 64; ++i) {
    if (i == size || data[i] == 0 || data[i] == '\n') {
      if (!current.empty() && isOwnArgument(current))
        args.push_back(current);
      current.clear();
      continue;
    }
    current += static_cast<char>(data[i]);
  }
  std::vector<const char *> argv;
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());
  llvm::cl::ResetAllOptionOccurrences();
  if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()),
                                         argv.data(), "", &llvm::nulls()))
    return 0;
  if (checkFlags())
    return 0;
  // Flags that pass describe a bounded run.
  if (promptLen < 0 || decodeSteps < 0 ||
      promptLen + decodeSteps > kMaxContext || !std::isfinite(tolerance) ||
      tolerance < 0 || (randomSeed.getNumOccurrences() && randomSeed < 0))
    std::abort();
  std::vector<int64_t> ids;
  std::string error;
  if (!layersOption.empty() && parseLayerList(layersOption, 61, ids, error))
    for (int64_t id : ids)
      if (id < 0 || id >= 61)
        std::abort();
  return 0;
}
