// tandem:include common/q8_dot.wgsl
// tandem:include common/q8_layout.wgsl
// x' quantized into global memory a vec4 a thread (quantize_q8.wgsl; attention_combine.wgsl's
// `Q8` variant, which quantizes the attention output for the output projection): the values of
// q8_dot.wgsl's quantize_block and sum16, with a block's eight threads meeting in workgroup
// memory for its largest magnitude and an entry's four for its sum. A thread a vec4 keeps all of
// a row's loads in flight at once; a block a thread waited on eight loads in turn (bench/RESULTS.md,
// forty-sixth session). Include-only; the includer has `xq: array<u32>`, the rows as words, and
// workgroups of at most 256 threads that hold a row's vec4s in aligned groups of eight.

var<workgroup> q8_max: array<f32, 256>;
var<workgroup> q8_sum: array<i32, 256>;

// Stores v, vec4 i of a row of n_cols values whose first word in xq is `row`, for the thread at
// local index lid (lid % 8 = i % 8): its entry words, and, where it is the first of its block or
// entry, the block's unit or the entry's sum. `owns`: whether vec4 i is this thread's to write;
// where i is past the row (v zero), the thread writes the zeros of the units' and sums' padding
// instead. Every thread of the workgroup calls it, in uniform control flow (two barriers).
fn q8_store_vec4(v: vec4<f32>, i: u32, owns: bool, lid: u32, row: u32, n_cols: u32) {
    let a = abs(v);
    q8_max[lid] = max(max(a.x, a.y), max(a.z, a.w));
    workgroupBarrier();
    let first = lid - lid % 8u;
    var amax = 0.0;
    for (var k = first; k < first + 8u; k++) {
        amax = max(amax, q8_max[k]);
    }
    let d = q8_scale(vec4<f32>(amax));
    let w = pack4_q8(v, d, q8_inv(d));
    q8_sum[lid] = sum4_q8(w);
    workgroupBarrier();
    if (!owns) {
        return;
    }
    let b = i / 8u;
    let e = i / 4u;
    let n_blocks = n_cols / 32u;
    if (b < n_blocks) {
        // Entry e's quotients are vec4 2e of the row, its remainders vec4 2e + 1.
        xq[row + 8u * e + i % 4u] = w.x;
        xq[row + 8u * e + 4u + i % 4u] = w.y;
    }
    let units = 4u * q8_units_at(n_cols);
    let sums = 4u * q8_sums_at(n_cols);
    if (i % 8u == 0u && units + b < sums) {
        xq[row + units + b] = select(0u, bitcast<u32>(d / 254.0), b < n_blocks);
    }
    if (i % 4u == 0u && sums + e < 4u * q8_scale_at(n_cols)) {
        let s = q8_sum[lid] + q8_sum[lid + 1u] + q8_sum[lid + 2u] + q8_sum[lid + 3u];
        xq[row + sums + e] = select(0u, bitcast<u32>(f32(s)), e < 2u * n_blocks);
    }
}
