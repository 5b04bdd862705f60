#!/usr/bin/env bash
# The llama.cpp comparison arm's sources, fetched on this machine for the GPU machine (which
# reaches nothing): llama.cpp 0c1e570 from the PyPI source package llama-cpp-python==0.3.36
# (models/, docs/ and examples/ left out, xz: about 9 MB), and for its Vulkan build the shader
# compiler and headers of Debian 13 (glslc 2025.2, Vulkan 1.4 headers, SPIRV-Headers): Debian
# 12's glslc is too old for ggml-vulkan's shaders, and Debian 13's binaries need the glibc 2.38+
# of the GPU machine (Ubuntu 24.04), so they are unpacked there, not here.
# Usage: fetch.sh [OUT_DIR]   (default target/llama-arm, which git ignores); then carry OUT_DIR and
# run build-on-gpu.sh there.
set -euo pipefail
out="${1:-target/llama-arm}"
mkdir -p "$out/vk"
out="$(cd "$out" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$out/llama.cpp.tar.xz" ]; then
  python3 -m pip download -q --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmp"
  tar xzf "$tmp/llama_cpp_python-0.3.36.tar.gz" -C "$tmp"
  src="$tmp/llama_cpp_python-0.3.36/vendor"
  tar cJf "$out/llama.cpp.tar.xz" -C "$src" --exclude=llama.cpp/models --exclude=llama.cpp/docs \
    --exclude=llama.cpp/examples llama.cpp
fi
# apt-get with a private list of Debian 13 (trixie): only downloads, nothing is installed here.
mkdir -p "$tmp/lists/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$tmp/sources.list"
o=(-oDir::Etc::SourceList="$tmp/sources.list" -oDir::Etc::SourceParts=/dev/null
   -oDir::State::Lists="$tmp/lists" -oAPT::Architecture=amd64 -qq)
apt-get "${o[@]}" update
(cd "$out/vk" && apt-get "${o[@]}" download glslc libshaderc1 libvulkan-dev spirv-headers 2>&1 \
  | grep -v unsandboxed || true)
ls -l "$out" "$out/vk"
