// coop_w8 for Q4_K in two 16-byte loads instead of dequant8's six 4-byte ones (the loads a
// thread waits on each step bound the coop products: bench/RESULTS.md, "Twenty-first session"): the
// block's header run (d, dmin, the 12 scale bytes) and the run of nibbles that holds the unit
// (common/q4_k_wide.wgsl has the layout). Include-only.

fn coop_w8(ok: bool, wb: u32, wu: u32, k: u32) -> array<vec4<f32>, 2> {
    if (!ok) {
        return array<vec4<f32>, 2>();
    }
    let c = k + wu * 8u;
    let b = wb + c / QK;
    let j = (c % QK) / 8u;  // the unit of 8 in the block
    let s = j / 4u;         // its sub-block
    let head = wv[b * 9u];
    let dm = unpack2x16float(head.x);
    let sm = k4_scale_min_of(head.yzw, s);
    let scale = dm.x * sm.x;
    let mn = dm.y * sm.y;
    // Bytes 32 (s / 2) + 8 (j % 4) .. + 8 of the nibbles: half of run 2 (s / 2) + (j % 4) / 2.
    let r = wv[b * 9u + 1u + 2u * (s / 2u) + (j % 4u) / 2u];
    let q = select(r.xy, r.zw, (j & 1u) == 1u);
    let shift = (s & 1u) * 4u;
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack_nibbles(q.x, shift)) * scale - mn,
        vec4<f32>(unpack_nibbles(q.y, shift)) * scale - mn,
    );
}
