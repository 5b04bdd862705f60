//! GPU sampling (argmax; penalty + top-k + top-p + min-p + temperature + draw) against
//! `sampling::reference_sample` on the same logits, history and random numbers.

use super::{gpu, random_f32, run_dispatches, step_buffer, upload};
use crate::gpu::Gpu;
use crate::kernels::{self, StepInfo};
use crate::sampling::{reference_sample, SamplerParams};

const STEP: StepInfo = StepInfo {
    n_tokens: 1,
    pos: 0,
    n_out: 1,
};

async fn read_token(gpu: &Gpu, tokens: &wgpu::Buffer) -> u32 {
    let b = gpu.read(tokens, 0, 4).await.unwrap();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Runs the GPU sampler on `logits` for each `u`; returns the ids.
async fn gpu_sample(
    logits: &[f32],
    history: &[u32],
    params: &SamplerParams,
    us: &[f32],
) -> Vec<u32> {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let lb = upload(&gpu, "logits", logits);
    let tb = gpu.storage("tokens", 16).unwrap();
    let n_vocab = logits.len() as u32;
    if params.is_greedy() {
        let d = kernels::argmax(&gpu, &lb, &tb, n_vocab, 0).unwrap();
        run_dispatches(&gpu, &[&d], STEP, &step).await;
        return vec![read_token(&gpu, &tb).await];
    }
    let k = kernels::sample(&gpu, &lb, &tb, n_vocab, 0).unwrap();
    let mut ids = Vec::with_capacity(us.len());
    for &u in us {
        k.prepare(&gpu, params, history, u);
        run_dispatches(&gpu, &[&k.dispatches[0], &k.dispatches[1]], STEP, &step).await;
        ids.push(read_token(&gpu, &tb).await);
    }
    ids
}

async fn check(
    name: &str,
    logits: &[f32],
    history: &[u32],
    params: &SamplerParams,
    us: &[f32],
    max_mismatch: usize,
) {
    let got = gpu_sample(logits, history, params, us).await;
    let mut bad = Vec::new();
    for (i, (&g, &u)) in got.iter().zip(us).enumerate() {
        let want = reference_sample(logits, history, params, u);
        if g != want {
            bad.push((i, u, g, want));
        }
    }
    assert!(
        bad.len() <= max_mismatch,
        "{name} (vocab {}): {} of {} draws differ from the CPU chain, first (index, u, gpu, cpu): {:?}",
        logits.len(),
        bad.len(),
        us.len(),
        bad.first()
    );
}

async fn greedy_is_the_argmax_with_lowest_id_on_ties() {
    for n in [1usize, 7, 1000, 49152, 262144] {
        let logits = random_f32(n as u64, n, 10.0);
        check("argmax", &logits, &[], &SamplerParams::greedy(), &[0.0], 0).await;
    }
    let mut tied = vec![1.0f32; 300];
    tied[17] = 5.0;
    tied[250] = 5.0;
    assert_eq!(
        gpu_sample(&tied, &[], &SamplerParams::greedy(), &[0.0]).await,
        vec![17]
    );
}

async fn the_chain_matches_the_cpu_reference() {
    let us: Vec<f32> = (0..24).map(|i| (i as f32 + 0.5) / 24.0).collect();
    let history: Vec<u32> = vec![3, 5, 3, 999, 0, 12, 12, 40000];
    for n in [1usize, 7, 1000, 49152, 262144] {
        let logits = random_f32(7 + n as u64, n, 4.0);
        for params in [
            SamplerParams::default(),
            SamplerParams {
                top_k: 1,
                ..Default::default()
            },
            SamplerParams {
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                temperature: 1.5,
                ..Default::default()
            },
            SamplerParams {
                top_p: 0.5,
                min_p: 0.0,
                ..Default::default()
            },
            SamplerParams {
                min_p: 0.3,
                top_p: 1.0,
                ..Default::default()
            },
            SamplerParams {
                repeat_penalty: 1.3,
                repeat_last_n: 6,
                ..Default::default()
            },
        ] {
            // Boundary draws can flip on the last bit of exp(); allow one in 24.
            check(&format!("{params:?}"), &logits, &history, &params, &us, 1).await;
        }
    }
}

async fn cuts_and_penalty_do_what_they_say() {
    // Probabilities at temperature 1: 0.5, 0.25, 0.125, ...
    let logits: Vec<f32> = (0..20)
        .map(|i| -(i as f32) * std::f32::consts::LN_2)
        .collect();
    let us: Vec<f32> = (0..200).map(|i| (i as f32 + 0.5) / 200.0).collect();
    // top-p 0.7 keeps ids 0 and 1 (0.5 + 0.25 >= 0.7).
    let p = SamplerParams {
        top_p: 0.7,
        min_p: 0.0,
        temperature: 1.0,
        ..Default::default()
    };
    let got = gpu_sample(&logits, &[], &p, &us).await;
    assert!(got.iter().all(|&t| t < 2) && got.contains(&0) && got.contains(&1));
    // min-p 0.2 keeps ids whose probability is at least 0.2 x 0.5: ids 0..=2 (0.125 >= 0.1).
    let p = SamplerParams {
        top_p: 1.0,
        min_p: 0.2,
        temperature: 1.0,
        ..Default::default()
    };
    let got = gpu_sample(&logits, &[], &p, &us).await;
    assert!(got.iter().all(|&t| t <= 2) && got.contains(&2));
    // The draw follows the renormalised probabilities of ids 0..=2: 4/7, 2/7, 1/7.
    let share = |id| got.iter().filter(|&&t| t == id).count() as f32 / got.len() as f32;
    assert!((share(0) - 4.0 / 7.0).abs() < 0.02 && (share(2) - 1.0 / 7.0).abs() < 0.02);
    // A strong repetition penalty on the best token moves greedy-like sampling off it.
    let p = SamplerParams {
        top_k: 1,
        repeat_penalty: 100.0,
        ..Default::default()
    };
    let mut pos = logits.clone();
    pos[0] = 2.0;
    pos[1] = 1.0;
    assert_eq!(gpu_sample(&pos, &[0], &p, &[0.5]).await, vec![1]);
}

super::gpu_tests!(
    greedy_is_the_argmax_with_lowest_id_on_ties,
    the_chain_matches_the_cpu_reference,
    cuts_and_penalty_do_what_they_say
);
