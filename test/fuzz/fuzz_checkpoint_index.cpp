//===- fuzz_checkpoint_index.cpp - fuzz the sharded checkpoint index ------===//
//
// Any text must give shard files inside the checkpoint's folder, or an
// error: no absolute path and no '.' or '..' component ever comes out.
//
//===----------------------------------------------------------------------===//

#include "lib/Engine/Checkpoint.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size), error;
  std::vector<std::string> files;
  if (!v4a::shardsOfIndex(text, "ckpt", files, error))
    return error.empty() ? (std::abort(), 0) : 0;
  for (const std::string &file : files) {
    llvm::StringRef rest(file);
    if (!rest.consume_front("ckpt/"))
      std::abort();
    llvm::SmallVector<llvm::StringRef> parts;
    rest.split(parts, '/');
    for (llvm::StringRef part : parts)
      if (part.empty() || part == "." || part == "..")
        std::abort();
  }
  return 0;
}
