// The units of the `_q8` matrix products (matvec_q8.wgsl, matvec_glu_q8.wgsl,
// matvec_batch_q8.wgsl): weights of a quantized type dotted with x' as int8, staged in workgroup
// memory (common/q8_stage.wgsl) or quantized for the pass (common/q8_global.wgsl); either gives
// `x16(t, e)`, `x_d(t, s)` and `x_sum(t, e)`. Only types with a twin
// common/unit_q8_<qtype>.wgsl have these kernels (their `// tandem:qtypes` lines;
// kernels::has_q8_unit on the host). A twin defines:
//   UNIT                 weights a unit (a divisor of 256)
//   UnitX, unit_x(t, u)  token t's x' at unit u (of the staged chunk, or of the row), read once
//                        for every row
//   UnitW, unit_w(b, u)  unit u's weights in block b, loaded once for every token
//   unit_dot_x(w, xs)    their dot product
// Include-only.
