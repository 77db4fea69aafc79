#!/usr/bin/env bash
# Installs the Debian packages v4a builds with, when any is missing.
set -euo pipefail

packages=(cmake ninja-build g++ lld ccache llvm-22-dev llvm-22-tools
  libmlir-22-dev mlir-22-tools libgtest-dev python3 python3-numpy pkg-config clang-22 libclang-rt-22-dev
  libomp-22-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
