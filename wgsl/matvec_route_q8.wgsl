// tandem:include common/matvec_q8_dots.wgsl
// tandem:include common/route_share.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// matvec_q8.wgsl (read it first) over the attention output of a MoE layer in decode steps:
// x += W attn, then each workgroup adds its rows' shares of the router's product to the layer's
// slot of shares (common/route_share.wgsl), from which moe_gate_up routes the token.

override WG: u32 = 256u;
override ROWS: u32 = 4u;
override RPT: u32 = 1u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    product_with_shares(wg.x + wg.y * nwg.x, inv);
}
