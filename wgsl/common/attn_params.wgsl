// The parameters of attention over the cache, which attention.wgsl and attention_coop.wgsl share
// (one uniform, `kernels::attention`'s AttnParams). Include-only.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,  // = HD
    ctx: u32,
    scale: f32,
    window: u32,    // 0: no sliding window
    softcap: f32,   // 0: none
    q_stride: u32,  // floats between tokens in q (the QKV output's width)
    // Decode prologue (rope_store.wgsl's parameters)
    n_rot: u32,
    mode: u32,      // RoPE mode: 0 normal, 1 NeoX
    theta_base: f32,
    freq_scale: f32,
    eps: f32,       // q/k norm epsilon
    flags: u32,     // bit 0: q/k RMSNorm; bit 1: the decode prologue (applies when n_tokens = 1)
    _pad0: u32,
    _pad1: u32,
}
