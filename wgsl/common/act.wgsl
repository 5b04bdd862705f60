// The gate activations of the gated FFNs (glu.wgsl, matvec_glu.wgsl, moe_gate_up*.wgsl,
// quantize_q8.wgsl).
// Include-only.

// GELU, tanh approximation (GeGLU); the tanh argument clamped to +-15.
fn gelu_tanh(v: f32) -> f32 {
    let c = 0.7978845608028654; // sqrt(2 / pi)
    let u = clamp(c * (v + 0.044715 * v * v * v), -15.0, 15.0);
    return 0.5 * v * (1.0 + tanh(u));
}

// act(g): SiLU for act 0 (SwiGLU), GELU-tanh otherwise (the kernels' `act` parameter).
fn glu_act(g: f32, act: u32) -> f32 {
    if (act == 0u) {
        return g / (1.0 + exp(-g));
    }
    return gelu_tanh(g);
}

// glu_act of each component.
fn glu_act4(g: vec4<f32>, act: u32) -> vec4<f32> {
    return vec4<f32>(glu_act(g.x, act), glu_act(g.y, act), glu_act(g.z, act), glu_act(g.w, act));
}
