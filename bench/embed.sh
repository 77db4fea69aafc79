#!/usr/bin/env bash
# The C ABI and the Python package from an engine's side, on the GPU.
#
#   bench/embed.sh prepare   (here: installs v4a into build/prefix, builds
#                            examples/embed's C program with pkg-config and
#                            its C++ program with find_package(v4a), and the
#                            package)
#   bench/embed.sh           (on the GPU machine; carry build/bin, build/gpu,
#                            build/prefix and build/embed)
#
# Each program runs the package's prefill and decode steps from its own
# CUDA buffers on a non-default stream; every output must equal
# v4a-run-package's on the same inputs bit for bit; so must examples/
# engine.py's steps. Then the host time of one step call at 128 sequences:
# Model.step, the bare ctypes call of v4a_step, and Model.step's Python
# alone, and where the call's time goes (V4A_STEP_TIMES).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == prepare ]]; then
  set -e
  rm -rf build/prefix build/embed
  cmake --install build --prefix "$PWD/build/prefix" > /dev/null
  mkdir -p build/embed build/gpu
  cuda=${CUDA_HOME:-/usr/local/cuda}
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror -O2 examples/embed/decode.c \
    $(PKG_CONFIG_PATH=build/prefix/lib/pkgconfig pkg-config --cflags --libs v4a-runtime) \
    -I"$cuda/include" -L"$cuda/lib64" -lcudart \
    -Wl,-rpath,'$ORIGIN/../prefix/lib' -o build/embed/decode-c
  cmake -S examples/embed -B build/embed/cpp -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -Dv4a_DIR="$PWD/build/prefix/lib/cmake/v4a" \
    -DCMAKE_BUILD_RPATH='$ORIGIN/../../prefix/lib' > /dev/null
  cmake --build build/embed/cpp > /dev/null
  build/bin/v4a-compile examples/v4-flash.json --context 65792 \
    --target=sm_90a -o build/gpu/v4-flash-64k.v4apkg
  exit 0
fi
work=$(mktemp -d)
out=${OUT:-$work}
package=build/gpu/v4-flash-64k.v4apkg layer=${LAYER:-2}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$PWD/python V4A_LIBRARY=$PWD/build/prefix/lib/libv4a_runtime.so.2
status=0
run_all() { # BATCH PROMPT STEPS
  local dir=$work/b$1 batch=$1 prompt=$2 steps=$3
  mkdir -p "$dir"
  python3 bench/embed_inputs.py "$dir" "$batch" "$prompt" "$steps" 4096 || return 1
  build/bin/v4a-run-package "$package" --random-weights 1 --layers "$layer" \
    --inputs "$dir/inputs.safetensors" --outputs "$dir/expected.safetensors" \
    > "$dir/run-package.log" 2>&1 || { cat "$dir/run-package.log"; return 1; }
  build/embed/decode-c "$package" "$layer" "$batch" "$prompt" "$steps" "$dir" &&
    build/embed/cpp/decode "$package" "$layer" "$batch" "$prompt" "$steps" "$dir" &&
    python3 examples/embed/decode.py "$package" "$layer" "$batch" "$prompt" "$steps" "$dir" &&
    python3 bench/embed_inputs.py --compare "$dir" "$layer" "$steps" c cpp py
}
run_all 4 300 4 || status=1
# The engine loop: requests arriving and finishing, slots reused, checked
# against v4a-run-package on the same steps.
python3 examples/engine.py "$package" --layers "$layer" --requests 32 \
  --slots 16 --check --bin build/bin || status=1
for round in 1 2 3; do
  python3 bench/embed_overhead.py "$package" "$layer" 128 300 || status=1
done
# Where a call's host time goes (V4A_STEP_TIMES): the last few calls.
V4A_STEP_TIMES=1 python3 bench/embed_overhead.py "$package" "$layer" 128 20 2>&1 |
  grep "step host us" | tail -2
# The same step's time from the runner (graphs, synchronized each step).
build/bin/v4a-run-package "$package" --random-weights 1 --layers "$layer" \
  --bench --batch 128 --context 16 --tokens 1 --repeat 50 | tail -1
python3 bench/embed_misuse.py "$package" "$layer" || status=1
# The package installed with pip (no network: the build backend as found).
if python3 -m pip install -q --no-deps --no-build-isolation --target "$work/site" \
    ./python > "$work/pip.log" 2>&1; then
  PYTHONPATH=$work/site python3 -c 'import v4a; print("pip install ./python:", v4a.version(), v4a.__file__.split("/site/")[1])'
else
  echo "pip install ./python failed: $(tail -1 "$work/pip.log")"
fi
exit $status
