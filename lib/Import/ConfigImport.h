//===- ConfigImport.h - config.json to v4a IR -------------------*- C++ -*-===//

#ifndef V4A_LIB_IMPORT_CONFIGIMPORT_H
#define V4A_LIB_IMPORT_CONFIGIMPORT_H

#include "v4a/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace v4a {

/// Builds a module holding one `v4a.model` named `name` with one `v4a.layer`
/// per layer of `layers`. The result is not verified; `loc` is attached to
/// every op so that verifier diagnostics point at the configuration.
mlir::OwningOpRef<mlir::ModuleOp>
buildModelModule(mlir::MLIRContext *context, mlir::Location loc,
                 llvm::StringRef name, const ModelConfig &config,
                 llvm::ArrayRef<LayerSpec> layers);

/// Parses config.json text, derives its layers and builds the verified
/// module. Problems are reported as diagnostics at `loc` (a field-naming
/// config error, or a verifier error naming the attribute).
mlir::OwningOpRef<mlir::ModuleOp>
importConfig(mlir::MLIRContext *context, llvm::StringRef json,
             mlir::Location loc, llvm::StringRef name,
             const LayerOptions &options = {});

} // namespace v4a

#endif // V4A_LIB_IMPORT_CONFIGIMPORT_H
