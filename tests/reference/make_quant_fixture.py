"""Writes tests/fixtures/quant_blocks.gguf and quant_blocks.json: one 7 x 256 tensor of every
weight type Tandem reads, packed by the PyPI `gguf` package (an implementation we did not
write), and gguf-py's dequantization of each, which the Rust CPU dequantizer and the GPU
kernels are tested against.

gguf-py quantizes F32..Q8_0 itself; it cannot quantize K-quants or IQ4_NL/IQ4_XS, so for those
the blocks are random bytes (every bit pattern of quants and sub-block scales) with their f16
scale fields set to sane values, and gguf-py only dequantizes them. Types are appended at the end
of TYPES, so the tensors of the earlier types stay byte-identical.

Run: python3 tests/reference/make_quant_fixture.py   (gguf==0.19.0, numpy)
"""
import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

ROWS, COLS = 7, 256
OUT = Path(__file__).resolve().parents[1] / "fixtures"
rng = np.random.default_rng(20261130)


# Byte offsets of the f16 fields (d, dmin) in a block of the types gguf-py cannot quantize.
F16_FIELDS = {
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.IQ4_NL: [0],
    T.IQ4_XS: [0],
}

TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K,
         T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS]


def random_blocks(t: T) -> np.ndarray:
    """Random blocks of `t` with sane f16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[t]
    raw = rng.integers(0, 256, size=(ROWS, COLS // block * size), dtype=np.uint8)
    f16 = lambda v: np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    for r in range(ROWS):
        for b in range(COLS // block):
            for off in F16_FIELDS[t]:
                o = b * size + off
                raw[r, o : o + 2] = f16(rng.uniform(0.001, 0.01))
    return raw


def main():
    writer = gguf.GGUFWriter(str(OUT / "quant_blocks.gguf"), "quant-fixture")
    expected = {}
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    for t in TYPES:
        data = random_blocks(t) if t in F16_FIELDS else quants.quantize(x, t)
        deq = quants.dequantize(data, t).astype(np.float32).reshape(ROWS, COLS)
        name = f"w_{t.name.lower()}"
        writer.add_tensor(name, data, raw_dtype=t if data.dtype == np.uint8 else None)
        expected[name] = {
            "type": t.name,
            "rows": ROWS,
            "cols": COLS,
            "sha256": hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest(),
            "dequantized_f32le_base64": base64.b64encode(deq.tobytes()).decode(),
        }
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    meta = {"generator": "tests/reference/make_quant_fixture.py", "gguf": "0.19.0", "tensors": expected}
    (OUT / "quant_blocks.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
