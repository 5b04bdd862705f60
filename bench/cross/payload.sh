#!/usr/bin/env bash
# Packs what device.sh needs on a GPU machine that has no Node, no browser and no network, into
# DIR (default .dev-cross/, ignored): Node itself (this machine's, a self-contained binary but
# for glibc and libstdc++), Dawn for Node (npm `webgpu`, linux-x64 only), the built npm package
# (web/npm/dist: the wasm engine) and the native tandem and tandem-gen, each xz-compressed
# (about 40 MB in all). Build first, from the same commit:
#   npm --prefix web run build && cargo build --release -p tandem-cli -p tandem-gen
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.dev-cross}
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$dir"
for f in web/npm/dist/index.js web/npm/dist/tandem_web_bg.wasm web/node_modules/webgpu/dist/linux-x64/dawn.node \
  "$target/release/tandem" "$target/release/tandem-gen"; do
  [ -f "$f" ] || { echo "missing $f: build first (see the top of $0)" >&2; exit 1; }
done
xz -T0 -6 -c "$(command -v node)" > "$dir/node.xz"
xz -T0 -6 -c "$target/release/tandem" > "$dir/tandem.xz"
xz -T0 -6 -c "$target/release/tandem-gen" > "$dir/tandem-gen.xz"
tar -C web/node_modules -cJf "$dir/webgpu.tar.xz" webgpu/index.js webgpu/package.json webgpu/dist/linux-x64/dawn.node
tar -C web/npm -cJf "$dir/npm-dist.tar.xz" --exclude='*.map' dist
git rev-parse HEAD > "$dir/commit"
ls -la "$dir"
du -sh "$dir"
