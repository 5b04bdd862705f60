// The f32 twin of common/kv_f16.wgsl for the `_kv32` kernel variants (engine/build.rs): a cache
// chunk is the vec4<f32> itself, for sessions that ask for an f32 cache (`--kv-type f32`; the
// model tests, whose goldens come from an f32 reference). Include-only.

alias KvChunk = vec4<f32>;

fn kv_pack(v: vec4<f32>) -> vec4<f32> {
    return v;
}

fn kv_unpack(c: vec4<f32>) -> vec4<f32> {
    return c;
}
