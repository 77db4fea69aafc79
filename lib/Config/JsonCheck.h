//===- JsonCheck.h - structural limits of JSON input ------------*- C++ -*-===//
//
// llvm::json parses recursively and keeps the last of repeated keys. Input
// the tools read is checked first: nesting beyond a limit (which would run
// the parser out of stack) and a key repeated in one object are errors.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_CONFIG_JSONCHECK_H
#define V4A_LIB_CONFIG_JSONCHECK_H

#include <string>
#include <string_view>

namespace v4a {

/// Deep enough for any configuration or checkpoint index.
constexpr int kMaxJsonDepth = 64;

/// Whether `text` nests at most `maxDepth` arrays/objects and repeats no key
/// within one object; otherwise `error` says where. Malformed JSON passes
/// (the parser reports it).
bool checkJsonStructure(std::string_view text, std::string &error,
                        int maxDepth = kMaxJsonDepth);

} // namespace v4a

#endif // V4A_LIB_CONFIG_JSONCHECK_H
