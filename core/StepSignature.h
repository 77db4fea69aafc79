//===- StepSignature.h - the arguments of a compiled step -------*- C++ -*-===//
//
// What the compiler tells the runtime about each compiled step or metadata
// function: its arguments in order, each named by what is bound to it (the
// `v4a.bind` of the IR), with its element type and shape (-1: the step's
// token count; caches are bytes). Outputs are written by the function into
// buffers the caller provides. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_STEPSIGNATURE_H
#define V4A_CORE_STEPSIGNATURE_H

#include <cstdint>
#include <string>
#include <vector>

namespace v4a::step {

enum class Element { BF16, F32, I32, I64, E4M3, UE8M0, Bytes };

inline int64_t elementBytes(Element element) {
  switch (element) {
  case Element::BF16:
    return 2;
  case Element::F32:
  case Element::I32:
    return 4;
  case Element::I64:
    return 8;
  case Element::E4M3:
  case Element::UE8M0:
  case Element::Bytes:
    return 1;
  }
  return 1;
}

struct Arg {
  std::string bind;
  Element element = Element::F32;
  /// -1 marks the dimension that is the step's token count.
  std::vector<int64_t> shape;
  bool output = false;
};

struct Function {
  std::string name;
  std::vector<Arg> args;
  /// The entry point: called with one pointer per argument, each pointing to
  /// a pointer to the argument's memref descriptor.
  void (*entry)(void **) = nullptr;
};

} // namespace v4a::step

#endif // V4A_CORE_STEPSIGNATURE_H
