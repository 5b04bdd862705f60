// Sums over the invocations of a workgroup that serve one row: `threads` consecutive invocations
// (by local_invocation_index) per row, a power of two that divides WG (threads = WG: the whole
// workgroup). This portable version is a tree in workgroup memory, 1 + log2(threads) barriers
// (none for threads = 1); its twin reduce_sg.wgsl, which the `_sg` variants include instead (see
// engine/build.rs), defines the same functions with subgroup operations.
// Every invocation of the workgroup must call them, in uniform control flow (they hold barriers).
// Each returns the sum of its row to every invocation of the row. The result is read from
// workgroup memory: put a workgroupBarrier() between two calls.
// Include-only. The kernel declares WG and takes an `Invocation` as an entry-point parameter (the
// `_sg` twin adds the subgroup built-ins to it); it reads its index as `inv.lid`.

struct Invocation {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> reduce_1: array<f32, WG>;
var<workgroup> reduce_4: array<vec4<f32>, WG>;

fn row_sum(v: f32, inv: Invocation, threads: u32) -> f32 {
    if (threads == 1u) {
        return v;
    }
    let lane = inv.lid % threads;
    reduce_1[inv.lid] = v;
    workgroupBarrier();
    for (var s = threads / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            reduce_1[inv.lid] += reduce_1[inv.lid + s];
        }
        workgroupBarrier();
    }
    return reduce_1[inv.lid - lane];
}

// Four sums at once (e.g. the gate and up dot products of one row and the norm's sum of squares).
fn row_sum4(v: vec4<f32>, inv: Invocation, threads: u32) -> vec4<f32> {
    if (threads == 1u) {
        return v;
    }
    let lane = inv.lid % threads;
    reduce_4[inv.lid] = v;
    workgroupBarrier();
    for (var s = threads / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            reduce_4[inv.lid] += reduce_4[inv.lid + s];
        }
        workgroupBarrier();
    }
    return reduce_4[inv.lid - lane];
}
