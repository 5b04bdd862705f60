// Where each row of a pass belongs: its sequence (the KV-cache slot, `[n_seq, n_kv_head, ctx,
// head_dim / 4]` caches) and its position there. A pass over one sequence (a prompt chunk, a
// decode step, a verification, an MTP pass) takes row t at (step.seq, step.pos + t) from the
// uniform alone; a batched decode step (kernels::Seqs::Table) writes one Row per token to the
// row table, whose rows are from different sequences at unrelated positions. Include-only: the
// includer binds `step: Step` (common/step.wgsl) and `rows: array<Row>`.

struct Row {
    seq: u32,
    pos: u32,
}

fn pass_row(t: u32) -> Row {
    if (step.row_table != 0u) {
        return rows[t];
    }
    return Row(step.seq, step.pos + t);
}
