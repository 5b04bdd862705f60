//! The cost rules the profile divides by (bytes read and FLOPs a dispatch has in a pass), against
//! figures worked out by hand. No GPU.

use crate::kernels::attention::attention_cost;
use crate::kernels::mat::mat_cost;
use crate::kernels::moe::{expert_cost, routed_experts};
use crate::kernels::{Cost, Heads, StepInfo};

fn step(n_tokens: u32, pos: u32) -> StepInfo {
    StepInfo::new(n_tokens, pos, 1)
}

#[test]
fn matrix_product_costs() {
    // Q8_0 4096 x 4096: 4096 rows of 128 blocks of 34 bytes.
    let w = 4096 * 128 * 34;
    assert_eq!(w, 17_825_792);
    // Decode, adding into the residual: x and y rows of 4096 floats.
    assert_eq!(
        mat_cost(w, 4096, 4096, 1, 4096 + 4096, 0),
        Cost {
            bytes: 17_858_560.0,
            flops: 33_554_432.0
        }
    );
    // 16 tokens with a bias: the weights once, 16 input rows and the bias.
    assert_eq!(
        mat_cost(w, 4096, 4096, 16, 4096, 4096),
        Cost {
            bytes: 18_104_320.0,
            flops: 536_870_912.0
        }
    );
}

#[test]
fn routed_expert_costs() {
    // 128 experts, 8 a token, one chunk: 8 for decode, 32 for 4 tokens, all for a long prompt.
    assert_eq!(routed_experts(128, 8, 128, 1), 8.0);
    assert_eq!(routed_experts(128, 8, 128, 4), 32.0);
    assert_eq!(routed_experts(128, 8, 128, 512), 128.0);
    // Two chunks of 64: half each.
    assert_eq!(routed_experts(128, 8, 64, 1), 4.0);
    assert_eq!(routed_experts(128, 8, 64, 512), 64.0);
    // gate/up of 1536 rows (2 x 768) by 2048, 1000 bytes an expert; 100 bytes of activations.
    let c = expert_cost(128_000, 1536, 2048, 128, 8, 128, &step(1, 7), 100.0);
    assert_eq!(
        c,
        Cost {
            bytes: 8_100.0,
            flops: 50_331_648.0
        }
    );
    // A 512-token batch reads every expert once and does 8 routes a token.
    let c = expert_cost(128_000, 1536, 2048, 128, 8, 128, &step(512, 0), 0.0);
    assert_eq!(
        c,
        Cost {
            bytes: 128_000.0,
            flops: 50_331_648.0 * 512.0
        }
    );
}

#[test]
fn attention_costs() {
    let h = Heads {
        n_head: 32,
        n_kv_head: 8,
        head_dim: 128,
        ctx: 4096,
    };
    // Decode at position 511: 512 keys and values of 8 heads of 128 f32; q, k, v of the token.
    assert_eq!(
        attention_cost(&h, 4.0, 0, &step(1, 511)),
        Cost {
            bytes: 4_194_304.0 + 24_576.0,
            flops: 8_388_608.0
        }
    );
    // A 4-token prompt from 0: 4 keys; the queries see 1 + 2 + 3 + 4 of them.
    assert_eq!(
        attention_cost(&h, 4.0, 0, &step(4, 0)),
        Cost {
            bytes: 32_768.0 + 98_304.0,
            flops: 163_840.0
        }
    );
    // A window of 4 at positions 10 and 11: keys 7..=11, each query sees 4; an f16 cache.
    assert_eq!(
        attention_cost(&h, 2.0, 4, &step(2, 10)),
        Cost {
            bytes: 20_480.0 + 49_152.0,
            flops: 131_072.0
        }
    );
}
