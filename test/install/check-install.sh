#!/usr/bin/env bash
# An installed v4a from outside the tree: `cmake --install` into a fresh
# prefix, then a C program built with pkg-config (-Wall -Wextra -Werror
# -pedantic, the header alone) and a C++ program built with a five-line
# CMakeLists (find_package(v4a)), both run on the CPU.
# usage: check-install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -pedantic "$source/test/capi/capi-test.c" \
  $(pkg-config --cflags --libs v4a) -Wl,-rpath,"$work/prefix/lib" -o "$work/capi-test"
"$work/capi-test" "$source/examples/tiny.json" "$work/in" "$work/out" | tail -1
mkdir -p "$work/app"
cp "$source/test/install/engine.cpp" "$work/app/"
cp "$source/test/install/CMakeLists.txt.in" "$work/app/CMakeLists.txt"
[ "$(wc -l < "$work/app/CMakeLists.txt")" -eq 5 ]
cmake -S "$work/app" -B "$work/app/build" -G Ninja \
  -Dv4a_DIR="$work/prefix/lib/cmake/v4a" > /dev/null
cmake --build "$work/app/build" > /dev/null
"$work/app/build/app" "$source/examples/tiny.json"
