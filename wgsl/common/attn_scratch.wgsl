// Workgroup memory of attention.wgsl's tiles, which the merge of split attention's parts
// (common/attn_merge.wgsl) uses too, so the attention variant that merges after its tiles takes
// no more of it: per tile the partial dots ([GQ, TK, LANES] as floats: head g, key k, lane at
// vec4 g * TK + k; at the end one head's [KG, HD4] partial outputs), the scores and the
// probabilities ([GQ, TK] each).

var<workgroup> dots: array<vec4<f32>, 256>;
var<workgroup> scores: array<f32, 256>;
var<workgroup> probs: array<f32, 256>;
