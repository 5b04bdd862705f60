#!/usr/bin/env bash
# Builds llama.cpp's llama-bench on the GPU machine from what fetch.sh put in ARM_DIR:
#   build-on-gpu.sh cuda ARM_DIR WORK_DIR     CUDA for sm_90 (nvcc and cmake are there), ~4.5 min
#                                             on 16 cores
#   build-on-gpu.sh vulkan ARM_DIR WORK_DIR   Vulkan, with Debian 13's glslc and headers unpacked
#                                             into WORK_DIR/vk, ~5 min on 16 cores
# The Vulkan loader itself must be installed there first (libvulkan1: PLATFORM.md's .gl folder).
# Prints the binary's path last: WORK_DIR/llama.cpp/build-<backend>/bin/llama-bench. Start it with
# setsid at the top of a device call so that it builds while the models are written.
set -euo pipefail
backend="$1" arm="$(cd "$2" && pwd)" work="$3"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
[ -d "$work/llama.cpp" ] || tar xJf "$arm/llama.cpp.tar.xz" -C "$work"
build="$work/llama.cpp/build-$backend"
common=(-G Ninja -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF)
case "$backend" in
  cuda)
    cmake -S "$work/llama.cpp" -B "$build" "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
    ;;
  vulkan)
    vk="$work/vk"
    mkdir -p "$vk"
    for f in "$arm"/vk/*.deb; do dpkg -x "$f" "$vk"; done
    export LD_LIBRARY_PATH="$vk/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cmake -S "$work/llama.cpp" -B "$build" "${common[@]}" -DGGML_VULKAN=ON \
      -DCMAKE_PREFIX_PATH="$vk/usr" -DVulkan_INCLUDE_DIR="$vk/usr/include" \
      -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1 -DVulkan_GLSLC_EXECUTABLE="$vk/usr/bin/glslc"
    ;;
  *)
    echo "usage: build-on-gpu.sh cuda|vulkan ARM_DIR WORK_DIR" >&2
    exit 2
    ;;
esac
ninja -C "$build" -j "$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))" llama-bench
strip "$build/bin/llama-bench"
echo "$build/bin/llama-bench"
