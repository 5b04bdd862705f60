// tandem:include common/kquant_scales.wgsl
// Q5_K: as Q4_K plus a fifth bit per element (176 bytes = 44 words): word 0 = d | dmin << 16,
// words 1..3 scales and mins, words 4..11 = qh[32], words 12..43 = 128 bytes of nibbles.
// Element 32 s + l takes bit s of qh[l].

const QK: u32 = 256u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 44u;
    let dm = unpack2x16float(w[base]);
    let s = j / 4u;
    let sm = k4_scale_min(base + 1u, s);
    let scale = dm.x * sm.x;
    let mn = dm.y * sm.y;
    let l = (j % 4u) * 8u;
    let q = base + 12u + (s / 2u) * 8u + l / 4u;
    let shift = (s & 1u) * 4u;
    let h = base + 4u + l / 4u;
    let hb0 = ((unpack_u8x4(w[h]) >> vec4<u32>(s)) & vec4<u32>(1u)) << vec4<u32>(4u);
    let hb1 = ((unpack_u8x4(w[h + 1u]) >> vec4<u32>(s)) & vec4<u32>(1u)) << vec4<u32>(4u);
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack_nibbles(w[q], shift) | hb0) * scale - mn,
        vec4<f32>(unpack_nibbles(w[q + 1u], shift) | hb1) * scale - mn,
    );
}
