// The unit of 8 weights a thread of the coop products (matmul_coop.wgsl, the experts') stages
// each k step: coop_load_w8 (common/coop_stage.wgsl, dequant8's loads). A type whose blocks
// allow fewer, wider loads has a twin common/coop_w8_<qtype>.wgsl with the same function,
// reading the includer's vec4<u32> view of the weights, `wv` (build.rs swaps it in).
// Include-only.

fn coop_w8(ok: bool, wb: u32, wu: u32, k: u32) -> array<vec4<f32>, 2> {
    return coop_load_w8(ok, wb, wu, k);
}
