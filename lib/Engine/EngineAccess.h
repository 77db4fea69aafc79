//===- EngineAccess.h - the Engine's runtime parts, inside v4a -*- C++ -*-===//
//
// What the C ABI's compiling library needs of an Engine beyond its public
// header: weights from caller-owned tensors and the runtime model that runs
// the steps.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_ENGINE_ENGINEACCESS_H
#define V4A_LIB_ENGINE_ENGINEACCESS_H

#include "core/KVPlan.h"
#include "runtime/Model.h"
#include "v4a/Engine.h"

namespace v4a {

struct EngineAccess {
  /// Loads weights held as the runtime holds them (one map per layer of the
  /// model), as loadWeights does a checkpoint's.
  static bool loadTensors(Engine &engine, std::vector<rt::LayerTensors> tensors,
                          std::string &error);
  /// The model the steps run on; null before weights are loaded.
  static rt::Model *model(Engine &engine);
  static const plan::Plan &plan(const Engine &engine);
};

} // namespace v4a

#endif // V4A_LIB_ENGINE_ENGINEACCESS_H
