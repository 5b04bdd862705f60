// The KV cache holds f16 (pack2x16float, no shader-f16 needed): half the bytes a decode step
// reads from it, and half the memory, for rounding each key and value to 11 significant bits (as
// llama.cpp's default f16 cache does). Four elements are one KvChunk. The `_kv32` variants take
// the f32 twin, common/kv_f16_kv32.wgsl. Include-only.

alias KvChunk = vec2<u32>;

fn kv_pack(v: vec4<f32>) -> vec2<u32> {
    return vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw));
}

fn kv_unpack(c: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(c.x), unpack2x16float(c.y));
}
