//! Synthetic GGUF models: real shapes, random weights with sane block scales, the Q4_K_M type
//! mix, full metadata and a byte-level vocabulary, so that Tandem and llama.cpp both load them.
//! Written in one streaming pass (tensor data is generated in parallel, a slab at a time, and
//! never held whole), so an 18 GB model needs about `threads x 8 MiB` of memory.

use std::io::{self, Seek, Write};

use tandem_engine::quant::random::{fill_random, XorShift};
use tandem_engine::quant::GgmlType;

/// A metadata value.
#[derive(Clone, Debug)]
pub enum Kv {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
    F32Array(Vec<f32>),
}

/// A tensor to generate: name, GGML dims (row length first), type, and the magnitude of its
/// values (norm weights are constants instead: `amp` < 0 means "all equal to -amp").
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub amp: f32,
}

impl TensorSpec {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    pub fn n_bytes(&self) -> u64 {
        self.ty.bytes_for(self.n_elements()).expect("whole blocks")
    }
}

pub struct ModelSpec {
    pub kv: Vec<(String, Kv)>,
    pub tensors: Vec<TensorSpec>,
}

impl ModelSpec {
    pub fn total_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.n_bytes()).sum()
    }
}

const ALIGN: u64 = 32;

fn w_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn w_kv(w: &mut impl Write, key: &str, v: &Kv) -> io::Result<()> {
    w_str(w, key)?;
    let u32b = |x: u32| x.to_le_bytes();
    match v {
        Kv::U32(x) => {
            w.write_all(&u32b(4))?;
            w.write_all(&x.to_le_bytes())
        }
        Kv::F32(x) => {
            w.write_all(&u32b(6))?;
            w.write_all(&x.to_le_bytes())
        }
        Kv::Bool(x) => {
            w.write_all(&u32b(7))?;
            w.write_all(&[*x as u8])
        }
        Kv::Str(s) => {
            w.write_all(&u32b(8))?;
            w_str(w, s)
        }
        Kv::StrArray(a) => {
            w.write_all(&u32b(9))?;
            w.write_all(&u32b(8))?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            a.iter().try_for_each(|s| w_str(w, s))
        }
        Kv::I32Array(a) => {
            w.write_all(&u32b(9))?;
            w.write_all(&u32b(5))?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            a.iter().try_for_each(|x| w.write_all(&x.to_le_bytes()))
        }
        Kv::F32Array(a) => {
            w.write_all(&u32b(9))?;
            w.write_all(&u32b(6))?;
            w.write_all(&(a.len() as u64).to_le_bytes())?;
            a.iter().try_for_each(|x| w.write_all(&x.to_le_bytes()))
        }
    }
}

/// Bytes each generator thread fills per slab.
const SLAB: usize = 8 << 20;

/// Writes `spec` as GGUF v3 to `w`, generating tensor data on `threads` threads from `seed`;
/// `progress(done, total)` hears of every slab.
pub fn write_gguf<W: Write + Seek>(
    spec: &ModelSpec,
    w: &mut W,
    seed: u64,
    threads: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<()> {
    let threads = threads.max(1);
    w.write_all(b"GGUF")?;
    w.write_all(&3u32.to_le_bytes())?;
    w.write_all(&(spec.tensors.len() as u64).to_le_bytes())?;
    w.write_all(&(spec.kv.len() as u64).to_le_bytes())?;
    for (k, v) in &spec.kv {
        w_kv(w, k, v)?;
    }
    let mut offset = 0u64;
    for t in &spec.tensors {
        w_str(w, &t.name)?;
        w.write_all(&(t.dims.len() as u32).to_le_bytes())?;
        for d in &t.dims {
            w.write_all(&d.to_le_bytes())?;
        }
        w.write_all(&t.ty.id().to_le_bytes())?;
        w.write_all(&offset.to_le_bytes())?;
        offset = (offset + t.n_bytes()).next_multiple_of(ALIGN);
    }
    let pos = w.stream_position()?;
    w.write_all(&vec![0u8; (pos.next_multiple_of(ALIGN) - pos) as usize])?;
    let total = spec.total_bytes();
    let mut done = 0u64;
    let mut bufs: Vec<Vec<u8>> = vec![Vec::with_capacity(SLAB); threads];
    for (ti, t) in spec.tensors.iter().enumerate() {
        let n_bytes = t.n_bytes() as usize;
        let block = t.ty.block_geometry().expect("known type").1 as usize;
        // Slabs of whole blocks, each generated from its own seed (independent of `threads`).
        let slab = (SLAB / block).max(1) * block;
        let n_slabs = n_bytes.div_ceil(slab);
        let mut s0 = 0;
        while s0 < n_slabs {
            let batch = threads.min(n_slabs - s0);
            std::thread::scope(|sc| {
                for (i, buf) in bufs.iter_mut().take(batch).enumerate() {
                    let si = s0 + i;
                    let len = slab.min(n_bytes - si * slab);
                    sc.spawn(move || {
                        buf.resize(len, 0);
                        let mut rng = XorShift::new(
                            seed ^ (ti as u64).wrapping_mul(0x1000_0001) ^ (si as u64) << 40,
                        );
                        if t.amp < 0.0 {
                            let v = (-t.amp).to_le_bytes();
                            assert_eq!(t.ty, GgmlType::F32, "constant tensors are F32");
                            for c in buf.chunks_exact_mut(4) {
                                c.copy_from_slice(&v);
                            }
                        } else {
                            assert!(fill_random(t.ty, t.amp, &mut rng, buf));
                        }
                    });
                }
            });
            for buf in bufs.iter().take(batch) {
                w.write_all(buf)?;
                done += buf.len() as u64;
            }
            progress(done, total);
            s0 += batch;
        }
        let pad = (n_bytes as u64).next_multiple_of(ALIGN) - n_bytes as u64;
        w.write_all(&vec![0u8; pad as usize])?;
    }
    w.flush()
}

// ---------------------------------------------------------------------------------------------
// presets

/// Shapes of a llama-family model (llama, qwen3, qwen3moe).
#[derive(Clone, Debug)]
pub struct Shape {
    pub arch: &'static str,
    pub name: &'static str,
    pub n_layer: u32,
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_kv_head: u32,
    pub head_dim: u32,
    pub n_vocab: u32,
    pub rope_base: f32,
    pub rms_eps: f32,
    pub ctx: u32,
    pub tied: bool,
    pub qk_norm: bool,
    /// (n_expert, k, n_ff_exp) for MoE.
    pub moe: Option<(u32, u32, u32)>,
    /// A next-token-prediction (MTP) layer after the main ones, as llama.cpp's glm4moe GGUFs
    /// store it (`nextn_predict_layers`, `blk.{n_layer}`: a block like the others plus
    /// `nextn.eh_proj`, `enorm`, `hnorm`, `shared_head_norm`; its head is the output's).
    pub mtp: bool,
    pub mix: Mix,
    /// GGUF general.file_type.
    pub file_type: u32,
}

/// The weight types of a quantization recipe.
#[derive(Clone, Copy, Debug)]
pub enum Mix {
    /// llama.cpp's Q4_K_M: Q4_K; Q6_K for the output and for attn_v / ffn_down in the layers
    /// llama.cpp's use_more_bits picks (the first and last eighth, and every third between).
    Q4KM,
    /// Like SmolLM2-135M-Instruct.Q4_1: Q4_1, with the token embedding in Q8_0.
    Q4_1,
}

fn use_more_bits(i: u32, n: u32) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

pub fn preset(name: &str) -> Option<Shape> {
    let base = Shape {
        arch: "qwen3moe",
        name: "",
        n_layer: 0,
        n_embd: 0,
        n_ff: 0,
        n_head: 0,
        n_kv_head: 0,
        head_dim: 0,
        n_vocab: 0,
        rope_base: 1_000_000.0,
        rms_eps: 1e-6,
        ctx: 40960,
        tied: false,
        qk_norm: true,
        moe: None,
        mtp: false,
        mix: Mix::Q4KM,
        file_type: 15,
    };
    Some(match name {
        "qwen3-30b-a3b" => Shape {
            name: "Qwen3-30B-A3B-synthetic",
            n_layer: 48,
            n_embd: 2048,
            n_ff: 6144,
            n_head: 32,
            n_kv_head: 4,
            head_dim: 128,
            n_vocab: 151936,
            moe: Some((128, 8, 768)),
            ..base
        },
        "qwen3-8b" => Shape {
            arch: "qwen3",
            name: "Qwen3-8B-synthetic",
            n_layer: 36,
            n_embd: 4096,
            n_ff: 12288,
            n_head: 32,
            n_kv_head: 8,
            head_dim: 128,
            n_vocab: 151936,
            ..base
        },
        "qwen3moe-tiny" => Shape {
            name: "qwen3moe-tiny-synthetic",
            n_layer: 2,
            n_embd: 256,
            n_ff: 512,
            n_head: 4,
            n_kv_head: 2,
            head_dim: 64,
            n_vocab: 1024,
            ctx: 4096,
            moe: Some((8, 2, 256)),
            ..base
        },
        "smollm2-135m" => Shape {
            arch: "llama",
            name: "SmolLM2-135M-synthetic",
            n_layer: 30,
            n_embd: 576,
            n_ff: 1536,
            n_head: 9,
            n_kv_head: 3,
            head_dim: 64,
            n_vocab: 49152,
            rope_base: 100000.0,
            rms_eps: 1e-5,
            ctx: 8192,
            tied: true,
            qk_norm: false,
            mix: Mix::Q4_1,
            file_type: 3,
            ..base
        },
        _ => return None,
    })
}

pub const PRESETS: &[&str] = &["qwen3-30b-a3b", "qwen3-8b", "smollm2-135m", "qwen3moe-tiny"];

/// GPT-2's byte-to-unicode map: the printable stand-in for each byte in byte-level BPE vocabularies.
fn byte_token(b: u8) -> String {
    let printable =
        |c: u32| (33..=126).contains(&c) || (161..=172).contains(&c) || (174..=255).contains(&c);
    if printable(b as u32) {
        return char::from_u32(b as u32).unwrap().to_string();
    }
    let n = (0..b as u32).filter(|&c| !printable(c)).count() as u32;
    char::from_u32(256 + n).unwrap().to_string()
}

/// The model's metadata and tensors.
pub fn model_spec(s: &Shape) -> ModelSpec {
    let a = s.arch;
    let k = |x: &str| format!("{a}.{x}");
    let mut kv: Vec<(String, Kv)> = vec![
        ("general.architecture".into(), Kv::Str(a.into())),
        ("general.name".into(), Kv::Str(s.name.into())),
        ("general.file_type".into(), Kv::U32(s.file_type)),
        ("general.quantization_version".into(), Kv::U32(2)),
        (k("block_count"), Kv::U32(s.n_layer + s.mtp as u32)),
        (k("context_length"), Kv::U32(s.ctx)),
        (k("embedding_length"), Kv::U32(s.n_embd)),
        (k("feed_forward_length"), Kv::U32(s.n_ff)),
        (k("attention.head_count"), Kv::U32(s.n_head)),
        (k("attention.head_count_kv"), Kv::U32(s.n_kv_head)),
        (k("attention.key_length"), Kv::U32(s.head_dim)),
        (k("attention.value_length"), Kv::U32(s.head_dim)),
        (k("rope.freq_base"), Kv::F32(s.rope_base)),
        (k("attention.layer_norm_rms_epsilon"), Kv::F32(s.rms_eps)),
        (k("vocab_size"), Kv::U32(s.n_vocab)),
    ];
    if s.mtp {
        kv.push((k("nextn_predict_layers"), Kv::U32(1)));
    }
    if let Some((ne, kk, ff)) = s.moe {
        kv.push((k("expert_count"), Kv::U32(ne)));
        kv.push((k("expert_used_count"), Kv::U32(kk)));
        kv.push((k("expert_feed_forward_length"), Kv::U32(ff)));
    }
    // Byte-level vocabulary: the 256 bytes, a few control tokens, unused fillers.
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    let mut tokens: Vec<String> = (0..=255u8).map(byte_token).collect();
    let mut types = vec![1i32; 256];
    for sp in specials {
        tokens.push(sp.into());
        types.push(3);
    }
    while tokens.len() < s.n_vocab as usize {
        tokens.push(format!("[PAD{}]", tokens.len()));
        types.push(5);
    }
    // Ids: <|endoftext|> 256, <|im_start|> 257, <|im_end|> 258 (the end of a turn).
    kv.extend([
        ("tokenizer.ggml.model".into(), Kv::Str("gpt2".into())),
        (
            "tokenizer.ggml.pre".into(),
            Kv::Str(if a == "llama" { "smollm" } else { "qwen2" }.into()),
        ),
        ("tokenizer.ggml.tokens".into(), Kv::StrArray(tokens)),
        ("tokenizer.ggml.token_type".into(), Kv::I32Array(types)),
        ("tokenizer.ggml.merges".into(), Kv::StrArray(Vec::new())),
        ("tokenizer.ggml.bos_token_id".into(), Kv::U32(256)),
        ("tokenizer.ggml.eos_token_id".into(), Kv::U32(258)),
        ("tokenizer.ggml.padding_token_id".into(), Kv::U32(256)),
        ("tokenizer.ggml.add_bos_token".into(), Kv::Bool(false)),
        (
            "tokenizer.chat_template".into(),
            Kv::Str(
                "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}".into(),
            ),
        ),
    ]);

    let (q4, q6, emb) = match s.mix {
        Mix::Q4KM => (GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q4K),
        Mix::Q4_1 => (GgmlType::Q4_1, GgmlType::Q4_1, GgmlType::Q8_0),
    };
    let mut tensors = Vec::new();
    let mut t = |name: String, dims: &[u32], ty: GgmlType, amp: f32| {
        tensors.push(TensorSpec {
            name,
            dims: dims.iter().map(|&d| d as u64).collect(),
            ty,
            amp,
        })
    };
    let (e, hd) = (s.n_embd, s.head_dim);
    let (qd, kvd) = (s.n_head * hd, s.n_kv_head * hd);
    // Weights of about the magnitude a trained model has: ~2/sqrt(fan_in).
    let amp = |fan_in: u32| 2.0 / (fan_in as f32).sqrt();
    t("token_embd.weight".into(), &[e, s.n_vocab], emb, 0.05);
    for i in 0..s.n_layer + s.mtp as u32 {
        let n = |x: &str| format!("blk.{i}.{x}");
        let more = use_more_bits(i.min(s.n_layer - 1), s.n_layer);
        if i == s.n_layer {
            t(n("nextn.eh_proj.weight"), &[2 * e, e], q4, amp(2 * e));
            for norm in ["enorm", "hnorm", "shared_head_norm"] {
                t(
                    n(&format!("nextn.{norm}.weight")),
                    &[e],
                    GgmlType::F32,
                    -1.0,
                );
            }
        }
        t(n("attn_norm.weight"), &[e], GgmlType::F32, -1.0);
        t(n("attn_q.weight"), &[e, qd], q4, amp(e));
        t(n("attn_k.weight"), &[e, kvd], q4, amp(e));
        t(
            n("attn_v.weight"),
            &[e, kvd],
            if more { q6 } else { q4 },
            amp(e),
        );
        t(n("attn_output.weight"), &[qd, e], q4, amp(qd));
        if s.qk_norm {
            t(n("attn_q_norm.weight"), &[hd], GgmlType::F32, -1.0);
            t(n("attn_k_norm.weight"), &[hd], GgmlType::F32, -1.0);
        }
        t(n("ffn_norm.weight"), &[e], GgmlType::F32, -1.0);
        match s.moe {
            Some((ne, _, ff)) => {
                t(n("ffn_gate_inp.weight"), &[e, ne], GgmlType::F32, amp(e));
                t(n("ffn_gate_exps.weight"), &[e, ff, ne], q4, amp(e));
                t(n("ffn_up_exps.weight"), &[e, ff, ne], q4, amp(e));
                t(
                    n("ffn_down_exps.weight"),
                    &[ff, e, ne],
                    if more { q6 } else { q4 },
                    amp(ff),
                );
            }
            None => {
                t(n("ffn_gate.weight"), &[e, s.n_ff], q4, amp(e));
                t(n("ffn_up.weight"), &[e, s.n_ff], q4, amp(e));
                t(
                    n("ffn_down.weight"),
                    &[s.n_ff, e],
                    if more { q6 } else { q4 },
                    amp(s.n_ff),
                );
            }
        }
    }
    t("output_norm.weight".into(), &[e], GgmlType::F32, -1.0);
    if !s.tied {
        t("output.weight".into(), &[e, s.n_vocab], q6, amp(e));
    }
    ModelSpec { kv, tensors }
}
