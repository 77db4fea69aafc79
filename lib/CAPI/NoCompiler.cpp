//===- NoCompiler.cpp - v4a_compile in the runtime library ----------------===//
//
// libv4a_runtime.so holds no compiler: it runs packages.
//
//===----------------------------------------------------------------------===//

#include "lib/CAPI/Source.h"

extern "C" v4a_status v4a_compile(const char *, const v4a_options *,
                                  v4a_model **model) {
  if (model)
    *model = nullptr;
  return v4a::capi::failWithoutModel(
      V4A_ERROR_UNSUPPORTED,
      "v4a_compile: libv4a_runtime.so runs packages only (v4a-compile "
      "--target=sm_90a makes one); libv4a.so compiles in-process");
}
