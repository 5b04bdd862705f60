// tandem:include common/attn_merge.wgsl
//
// The `last` twin of common/attn_parts.wgsl: a split pass's workgroups store their partial
// results as atomics and count the finished parts of each (token, head); the workgroup that
// finishes the last part merges them (common/attn_merge.wgsl) into `out` and sets the count back
// to 0 (so the buffer's counts start at 0 for the next pass), and the pass needs no
// attention_combine dispatch. Atomics because WGSL makes only them coherent between the
// workgroups of one dispatch. The engine takes this twin for one query head a workgroup (GQ = 1):
// atomic stores raised the grouped kernel's registers (bench/RESULTS.md, twenty-sixth session).

override MAX_SPLITS: u32 = 64u;  // kernels::MAX_ATTN_SPLITS: the counts follow the parts

@group(0) @binding(4) var<storage, read_write> partial: array<atomic<u32>>;  // [n_tokens, n_head, n_split, 1 + HD / 4] vec4s as words, then [MAX_SPLITS, n_head] counts

var<workgroup> last_part: u32;

// Vec4 i of the partial results.
fn part_at(i: u32) -> vec4<f32> {
    let w = 4u * i;
    return bitcast<vec4<f32>>(vec4<u32>(atomicLoad(&partial[w]), atomicLoad(&partial[w + 1u]),
                                        atomicLoad(&partial[w + 2u]), atomicLoad(&partial[w + 3u])));
}

fn store_part(i: u32, v: vec4<f32>) {
    let u = bitcast<vec4<u32>>(v);
    let w = 4u * i;
    atomicStore(&partial[w], u.x);
    atomicStore(&partial[w + 1u], u.y);
    atomicStore(&partial[w + 2u], u.z);
    atomicStore(&partial[w + 3u], u.w);
}

// Head h0 + g's output: the KG partial outputs `acc` of the threads meet in workgroup memory;
// with one split it goes to `out` (divided by the sum l), otherwise (m, l, output) to `partial`,
// and the workgroup that stores a head's last part merges its parts into `out`. Every thread
// calls it, in uniform control flow.
fn finish_head(at: Out, g: u32, acc: vec4<f32>, m: f32, l: f32) {
    let o = head_output(at, acc);
    let h = at.h0 + g;
    let oi = (at.t * p.n_head + h) * HD4 + at.lid;
    // The grid's split count, from the step uniform: uniform for the barriers below (Tint takes
    // a struct holding the thread's index as non-uniform).
    let n_split = step.attn_splits;
    if (n_split == 1u) {
        if (at.lid < HD4) {
            out[oi] = o / l;
        }
        return;
    }
    let base = (at.t * p.n_head + h) * n_split * (HD4 + 1u);
    let po = base + at.split * (HD4 + 1u);
    if (at.lid < HD4) {
        if (at.lid == 0u) {
            store_part(po, vec4<f32>(m, l, 0.0, 0.0));
        }
        store_part(po + 1u + at.lid, o);
    }
    storageBarrier();
    if (at.lid == 0u) {
        let count = 4u * p.n_head * MAX_SPLITS * (HD4 + 1u) + at.t * p.n_head + h;
        let done = atomicAdd(&partial[count], 1u) + 1u == n_split;
        if (done) {
            atomicStore(&partial[count], 0u);
        }
        last_part = u32(done);
    }
    if (workgroupUniformLoad(&last_part) == 0u) {
        return;
    }
    storageBarrier();
    let merged = merge_parts(at.lid, base, n_split);
    if (at.lid < HD4) {
        out[oi] = merged;
    }
}
