// Bit helpers shared by the quantized-weight readers. Include-only.

// The four bytes of `v` as signed integers, byte 0 first.
fn unpack_i8x4(v: u32) -> vec4<i32> {
    return (vec4<i32>(bitcast<i32>(v)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

// The four bytes of `v` as unsigned integers, byte 0 first.
fn unpack_u8x4(v: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
}

// One nibble of each of the four bytes of `v`: the low ones for shift 0, the high ones for shift 4.
fn unpack_nibbles(v: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(0xfu);
}

// The f16 at half-word `i` (0 or 1) of `v`, as f32 (no shader-f16 needed).
fn f16_at(v: u32, i: u32) -> f32 {
    return unpack2x16float(v)[i];
}
