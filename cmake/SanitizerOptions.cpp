//===- SanitizerOptions.cpp - defaults of the sanitized build -------------===//
//
// Linked into every target of an ASan build (V4A_SANITIZE, V4A_FUZZ), so
// that its binaries run right without ASAN_OPTIONS: LLVM's inline
// allocators (BumpPtrAllocator) poison memory that the uninstrumented
// libMLIR.so then uses legitimately, so manual poisoning is ignored; real
// heap errors are still reported. ASAN_OPTIONS adds to or overrides these.
//
//===----------------------------------------------------------------------===//

extern "C" const char *__asan_default_options();

extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}
