# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "v4a"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.v4a_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.v4a_src_root, "examples")))
import sys
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))

llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "ASAN_OPTIONS", "UBSAN_OPTIONS", "V4A_REFDATA", "CUDA_HOME", "CUDA_PATH"])
llvm_config.use_default_substitutions()
tool_dirs = [config.v4a_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["v4a-opt", "v4a-compile", "v4a-run", "v4a-run-package", "v4a-fixture",
     "v4a-check-gemms", "capi-test",
     "llvm-nm"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# DeepSeek's reference outputs live beside the checkout (shared/refdata), or
# where V4A_REFDATA points; tests that need them are skipped without them.
refdata = os.environ.get("V4A_REFDATA") or os.path.join(
    os.path.dirname(config.v4a_src_root), "shared", "refdata")
if os.path.isfile(os.path.join(refdata, "compare.py")):
    config.available_features.add("refdata")
    config.substitutions.append(("%refdata", refdata))
else:
    lit_config.note("no reference data at " + refdata +
                    ": the refdata tests are skipped (set V4A_REFDATA)")
config.substitutions.append(("%v4a_bin", config.v4a_tools_dir))
# The C ABI's shared library by its SONAME (the ABI version), as users load it.
config.substitutions.append(("%v4a_solib", os.path.join(config.v4a_obj_root, "lib", "libv4a.so." + config.v4a_abi)))
config.substitutions.append(("%v4a_python", os.path.join(config.v4a_src_root, "python")))
# A sanitized libv4a.so needs its sanitizer's runtime in the process: the
# Python package's test loads it into an uninstrumented interpreter.
if getattr(config, "v4a_sanitize", False):
    config.available_features.add("sanitized")
try:
    import numpy  # noqa: F401
    config.available_features.add("numpy")
except ImportError:
    lit_config.note("no NumPy for " + sys.executable +
                    ": the Python package's test is skipped")

# ptxas (CUDA's PTX assembler) checks generated PTX where it is installed.
import shutil
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas"
    if os.path.isfile("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# The CUDA driver, where a GPU machine has it.
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass

# CUDA's libdevice, which PTX generation links (as v4a-compile finds it).
for toolkit in [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                "/usr/local/cuda"]:
    if toolkit and os.path.isfile(
            os.path.join(toolkit, "nvvm", "libdevice", "libdevice.10.bc")):
        config.available_features.add("libdevice")
        config.substitutions.append(("%libdevice", os.path.join(
            toolkit, "nvvm", "libdevice", "libdevice.10.bc")))
        break
config.substitutions.append(("%scripts", os.path.join(config.v4a_src_root, "scripts")))

# Another build of v4a (scripts/sanitize.sh names the GCC build to the Clang
# one): its compiler must write the same bytes as this one.
other = os.environ.get("V4A_OTHER_BUILD")
if other and os.path.isfile(os.path.join(other, "bin", "v4a-compile")):
    config.available_features.add("other-build")
    config.substitutions.append(
        ("%other_compile", os.path.join(other, "bin", "v4a-compile")))
