#!/usr/bin/env bash
# Packs what device.sh needs on a GPU machine that has no Node, no browser and no network, into
# DIR (default .dev-cross/, ignored): Node itself (this machine's, a self-contained binary but
# for glibc and libstdc++), Dawn for Node (npm `webgpu`, linux-x64 only), the built npm package
# (web/npm/dist: the wasm engine) and the native tandem and tandem-gen, each xz-compressed
# (about 31 MB in all). Build first, from the same commit:
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
# Stripped and compressed hard: the device call carries the payload beside the repository's
# tracked files, 64 MiB in all (a 2026-12 checkout left room for about 30 MiB).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/webgpu/dist/linux-x64"
cp web/node_modules/webgpu/index.js web/node_modules/webgpu/package.json "$tmp/webgpu/"
strip --strip-unneeded -o "$tmp/webgpu/dist/linux-x64/dawn.node" web/node_modules/webgpu/dist/linux-x64/dawn.node
for b in "$(command -v node)" "$target/release/tandem" "$target/release/tandem-gen"; do
  strip -o "$tmp/$(basename "$b")" "$b"
  xz -T0 -9e -c "$tmp/$(basename "$b")" > "$dir/$(basename "$b").xz"
done
XZ_OPT=-9e tar -C "$tmp" -cJf "$dir/webgpu.tar.xz" webgpu/index.js webgpu/package.json webgpu/dist/linux-x64/dawn.node
tar -C web/npm -cJf "$dir/npm-dist.tar.xz" --exclude='*.map' dist
git rev-parse HEAD > "$dir/commit"
ls -la "$dir"
du -sh "$dir"
