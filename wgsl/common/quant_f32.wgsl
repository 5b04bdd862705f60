// F32 weights read through the quant interface: a "block" is 8 floats (8 words).
//
// Interface of every common/quant_<qtype>.wgsl, over the kernel's binding `w: array<u32>`:
//   const QK: u32                                  elements per block
//   fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2>
//       elements [8j, 8j + 8) of block b, blocks counted row-major over the binding.
// Blocks whose GGUF size is not a multiple of 4 bytes are stored in groups by the loader
// (quant::repack_for_gpu): the group's f16 scales first, then its blocks' other fields; pairs,
// but for Q6_K's groups of eight.

const QK: u32 = 8u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let q = b * 8u;
    return array<vec4<f32>, 2>(
        vec4<f32>(bitcast<f32>(w[q]), bitcast<f32>(w[q + 1u]), bitcast<f32>(w[q + 2u]), bitcast<f32>(w[q + 3u])),
        vec4<f32>(bitcast<f32>(w[q + 4u]), bitcast<f32>(w[q + 5u]), bitcast<f32>(w[q + 6u]), bitcast<f32>(w[q + 7u])),
    );
}
