// The per-pass uniform every token-processing kernel sees. Include-only.
// n_tokens: tokens in this forward pass; n_out: rows whose logits are wanted (the last n_out
// tokens), out_row0 = n_tokens - n_out; attn_splits: the parts each query's keys are cut into
// (kernels::attention_splits). Where each row belongs (pos, seq, row_table) is read through
// common/rows.wgsl's pass_row.
struct Step {
    n_tokens: u32,
    pos: u32,        // a pass over one sequence: position of its first row
    n_out: u32,
    out_row0: u32,
    attn_splits: u32,
    seq: u32,        // a pass over one sequence: its KV-cache slot
    row_table: u32,  // 1: row t is rows[t] (a batched step over several sequences)
    _pad0: u32,
}

// Rows a kernel processes: all tokens (mode 0) or only the output rows (mode 1).
fn step_rows(s: Step, mode: u32) -> u32 {
    return select(s.n_tokens, s.n_out, mode == 1u);
}
