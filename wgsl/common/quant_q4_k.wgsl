// tandem:include common/kquant_scales.wgsl
// Q4_K: super-blocks of 256 in 8 sub-blocks of 32 (144 bytes = 36 words): word 0 = d | dmin << 16,
// words 1..3 = 6-bit scales and mins, words 4..35 = 128 bytes of nibbles. Sub-block s reads
// bytes 32 * (s / 2) .. + 32, low nibbles for even s, high for odd; x = d * sc * q - dmin * m.

const QK: u32 = 256u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 36u;
    let dm = unpack2x16float(w[base]);
    let s = j / 4u;
    let sm = k4_scale_min(base + 1u, s);
    let scale = dm.x * sm.x;
    let mn = dm.y * sm.y;
    let q = base + 4u + (s / 2u) * 8u + (j % 4u) * 2u;
    let shift = (s & 1u) * 4u;
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack_nibbles(w[q], shift)) * scale - mn,
        vec4<f32>(unpack_nibbles(w[q + 1u], shift)) * scale - mn,
    );
}
