// The subgroup twin of reduce.wgsl (read that first): the same functions for the `_sg` kernel
// variants. subgroupAdd sums within each subgroup; the first invocation of each subgroup puts
// its sum in workgroup memory; after one barrier every invocation adds up the sums of its row's
// subgroups. One barrier, whatever `threads` is.
// Correct only when a row's invocations are whole subgroups: the host picks an `_sg` variant only
// where `threads` is a multiple of the adapter's largest subgroup size (kernels::subgroups_fit),
// and it relies on subgroups being runs of consecutive local_invocation_index that start at
// multiples of the subgroup size, as GPUs lay out one-dimensional workgroups (WGSL does not
// promise it; the kernel tests check it on every adapter they run on).

struct Invocation {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_id: u32,
}

// One slot per subgroup of the workgroup (at most WG / 4 of them are used).
var<workgroup> reduce_1: array<f32, WG>;
var<workgroup> reduce_4: array<vec4<f32>, WG>;

fn row_sum(v: f32, inv: Invocation, threads: u32) -> f32 {
    let s = subgroupAdd(v);
    if (inv.sg_id == 0u) {
        reduce_1[inv.lid / inv.sg_size] = s;
    }
    workgroupBarrier();
    let n = threads / inv.sg_size;  // subgroups per row
    let first = inv.lid / threads * n;
    var r = 0.0;
    for (var i = 0u; i < n; i++) {
        r += reduce_1[first + i];
    }
    return r;
}

fn row_sum4(v: vec4<f32>, inv: Invocation, threads: u32) -> vec4<f32> {
    let s = subgroupAdd(v);
    if (inv.sg_id == 0u) {
        reduce_4[inv.lid / inv.sg_size] = s;
    }
    workgroupBarrier();
    let n = threads / inv.sg_size;
    let first = inv.lid / threads * n;
    var r = vec4<f32>(0.0);
    for (var i = 0u; i < n; i++) {
        r += reduce_4[first + i];
    }
    return r;
}
