// The streaming-read ceiling: how fast a WGSL kernel can read a buffer on this adapter, the figure
// every kernel's GB/s is put against (shared/MEASURE.md, rule 6). Each thread reads vec4<u32>
// (16 bytes) with UNROLL independent loads in flight, grid-stride over the whole buffer so
// consecutive threads read consecutive 16 bytes; it writes its wrapping sum of every word it read,
// so the compiler keeps the loads (and the test checks them against a CPU sum).

struct Params {
    n: u32,       // vec4<u32> elements of src
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const WG: u32 = 256u;
const UNROLL: u32 = 4u;

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;  // one a thread of the grid
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * WG;
    let t = wid.x * WG + lid;
    var a0 = vec4<u32>(0u);
    var a1 = vec4<u32>(0u);
    var a2 = vec4<u32>(0u);
    var a3 = vec4<u32>(0u);
    var i = t;
    // Whole rounds: UNROLL loads a thread, each a full grid apart.
    let rounds = p.n / (stride * UNROLL);
    for (var r = 0u; r < rounds; r++) {
        a0 += src[i];
        a1 += src[i + stride];
        a2 += src[i + 2u * stride];
        a3 += src[i + 3u * stride];
        i += UNROLL * stride;
    }
    for (; i < p.n; i += stride) {
        a0 += src[i];
    }
    let a = a0 + a1 + a2 + a3;
    sums[t] = a.x + a.y + a.z + a.w;
}
