//===- Source.h - where a C ABI model comes from ----------------*- C++ -*-===//
//
// A model behind the C ABI is opened from a package (the runtime library)
// or compiled from a configuration (the compiling library); both give the
// runtime model the steps run on once weights are loaded. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_CAPI_SOURCE_H
#define V4A_LIB_CAPI_SOURCE_H

#include "core/KVPlan.h"
#include "runtime/Model.h"
#include "v4a/v4a.h"

#include <memory>
#include <string>
#include <vector>

namespace v4a::capi {

class Source {
public:
  virtual ~Source() = default;
  virtual const ModelConfig &config() const = 0;
  virtual const std::vector<LayerSpec> &selected() const = 0;
  virtual const plan::Plan &plan() const = 0;
  virtual int64_t maxSequences() const = 0;
  /// The CUDA ordinal, or -1 on the CPU.
  virtual int device() const = 0;
  /// The tensor-parallel degree and this model's rank (1 and 0: whole).
  virtual int64_t tensorParallel() const = 0;
  virtual int64_t tensorRank() const = 0;
  /// Creates the model from the selected layers' tensors (one map per
  /// layer of the model).
  virtual bool loadTensors(std::vector<rt::LayerTensors> tensors,
                           std::string &error) = 0;
  /// A checkpoint file (or, where the library reads them, a sharded
  /// checkpoint's index).
  virtual bool loadCheckpoint(const std::string &path, std::string &error) = 0;
  /// Null until weights are loaded.
  virtual rt::Model *model() = 0;
};

/// The options with every unset field at its default; false with `error`
/// for an options struct of an unknown size or values out of range.
bool resolveOptions(const v4a_options *given, v4a_options &options,
                    std::string &error);

/// The handle of a source (`graphs`: v4a_options.use_graphs); sets *out.
v4a_status wrap(std::unique_ptr<Source> source, v4a_model **out, bool graphs);
/// Records a failed call without a handle for v4a_last_error.
v4a_status failWithoutModel(v4a_status status, const std::string &message);

} // namespace v4a::capi

#endif // V4A_LIB_CAPI_SOURCE_H
