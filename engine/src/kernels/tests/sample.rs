//! GPU sampling (argmax; penalty + top-k + top-p + min-p + temperature + draw) against
//! `sampling::reference_sample` on the same logits, history and random numbers.

use super::{gpu, random_f32, run_dispatches, step_buffer, upload};
use crate::gpu::Gpu;
use crate::kernels::{self, reference, StepInfo};
use crate::sampling::{reference_sample, SamplerParams};

const STEP: StepInfo = StepInfo::new(1, 0, 1);

async fn read_token(gpu: &Gpu, tokens: &wgpu::Buffer) -> u32 {
    let b = gpu.read(tokens, 0, 4).await.unwrap();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Runs the two argmax dispatches on `logits` (one row); returns tokens[0].
async fn gpu_argmax(logits: &[f32]) -> u32 {
    gpu_argmax_rows(logits, logits.len(), 1, 1).await[0]
}

/// Runs the two argmax dispatches built for `max_rows` rows on `logits` (`n_out` rows of
/// `n_vocab`) in a pass of `n_out` output rows; returns the ids buffer (`max_rows` + 1 words, so
/// a write past the last row shows as a changed poison word).
async fn gpu_argmax_rows(logits: &[f32], n_vocab: usize, n_out: u32, max_rows: u32) -> Vec<u32> {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let lb = upload(&gpu, "logits", &[logits, &[0.0]].concat());
    // Poisoned, so a stage that skips its write shows.
    let tb = upload(&gpu, "tokens", &vec![0xdeadu32; max_rows as usize + 1]);
    let n_vocab = n_vocab as u32;
    let words = kernels::argmax_partial_len(n_vocab, max_rows) as usize;
    let pb = upload(&gpu, "argmax partial", &vec![0xffff_ffffu32; words]);
    let [s1, s2] = kernels::argmax(&gpu, &lb, &tb, &pb, n_vocab, max_rows).unwrap();
    let s = StepInfo::new(n_out.max(1), 0, n_out);
    run_dispatches(&gpu, &[&s1, &s2], s, &step).await;
    let b = gpu.read(&tb, 0, (max_rows as u64 + 1) * 4).await.unwrap();
    bytemuck::pod_collect_to_vec(&b)
}

/// The argmax of every output row (a speculative verification's n + 1 rows) against
/// `reference::argmax` row by row, for vocabularies under, at and over one slice; a pass with
/// fewer output rows than the dispatch was built for leaves the other ids alone, and one with
/// more takes only `max_rows`.
async fn argmax_rows_match_the_reference() {
    for (n_vocab, rows) in [(1usize, 1u32), (7, 3), (1000, 5), (1025, 9), (49152, 4)] {
        let mut logits = random_f32(n_vocab as u64 + rows as u64, n_vocab * rows as usize, 10.0);
        // A tie in the last row: the lower id wins.
        if n_vocab > 10 {
            let last = (rows as usize - 1) * n_vocab;
            logits[last + 9] = 50.0;
            logits[last + 3] = 50.0;
        }
        let want: Vec<u32> = logits.chunks(n_vocab).map(reference::argmax).collect();
        for n_out in [rows, rows.div_ceil(2)] {
            let got = gpu_argmax_rows(&logits, n_vocab, n_out, rows).await;
            let n = n_out as usize;
            assert_eq!(
                got[..n],
                want[..n],
                "argmax rows: vocab {n_vocab}, {n_out} of {rows} rows"
            );
            assert!(
                got[n..].iter().all(|&t| t == 0xdead),
                "argmax rows: vocab {n_vocab}, {n_out} of {rows} rows wrote past its rows: {got:?}"
            );
        }
        let got = gpu_argmax_rows(&logits, n_vocab, rows + 1, rows).await;
        assert_eq!(
            got[..rows as usize],
            want[..],
            "argmax rows: clamped to {rows}"
        );
        assert_eq!(got[rows as usize], 0xdead, "argmax rows: clamped to {rows}");
    }
}

/// Runs the GPU sampler on `logits` for each `u`; returns the ids.
async fn gpu_sample(
    logits: &[f32],
    history: &[u32],
    params: &SamplerParams,
    us: &[f32],
) -> Vec<u32> {
    if params.is_greedy() {
        return vec![gpu_argmax(logits).await];
    }
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let lb = upload(&gpu, "logits", logits);
    let tb = gpu.storage("tokens", 16).unwrap();
    let n_vocab = logits.len() as u32;
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

/// The two-stage argmax against `reference::argmax` (and, without NaN, the greedy sampling chain).
async fn argmax_case(name: &str, logits: &[f32]) {
    let want = reference::argmax(logits);
    if !logits.iter().any(|v| v.is_nan()) && logits.iter().any(|&v| v > -3.0e38) {
        let chain = reference_sample(logits, &[], &SamplerParams::greedy(), 0.0);
        assert_eq!(want, chain, "argmax {name}: the references disagree");
    }
    let got = gpu_argmax(logits).await;
    assert_eq!(
        got,
        want,
        "argmax {name} (vocab {}): gpu {got}, cpu {want}",
        logits.len()
    );
}

async fn greedy_is_the_argmax_with_lowest_id_on_ties() {
    // Slices are 1024 logits: sizes below one, at one, one past, and 151936 (148 slices and 384).
    for n in [
        1usize, 7, 255, 1000, 1024, 1025, 4097, 49152, 151936, 262144,
    ] {
        let logits = random_f32(n as u64, n, 10.0);
        argmax_case(&format!("random {n}"), &logits).await;
    }
    let n = 151936;
    let base = random_f32(3, n, 10.0);
    let with = |ids: &[usize], v: f32| {
        let mut l = base.clone();
        for &i in ids {
            l[i] = v;
        }
        l
    };
    // Ties within one thread, across threads of one slice (id 5 is thread 5, id 260 thread 4),
    // and across slices, the later slice's thread lower: the lowest id wins.
    argmax_case("tie in a thread", &with(&[300, 44], 20.0)).await;
    argmax_case("tie across threads", &with(&[260, 5], 20.0)).await;
    argmax_case(
        "tie across slices",
        &with(&[140_000, 3000, 1500, 2048], 20.0),
    )
    .await;
    assert_eq!(gpu_argmax(&with(&[140_000, 3000, 1500], 20.0)).await, 1500);
    // Over 256 slices stage 2 threads take several: thread 3 takes slices 3 and 259.
    let mut many = random_f32(4, 300_000, 10.0);
    for i in [259 * 1024 + 5, 4 * 1024 + 7, 3 * 1024 + 1000] {
        many[i] = 20.0;
    }
    argmax_case("tie across stage-2 iterations", &many).await;
    many[280 * 1024 + 3] = 30.0;
    argmax_case("max in a stage-2 thread's second slice", &many).await;
    // The maximum in the last, partial slice (151936 = 148 x 1024 + 384), at its last id too.
    argmax_case("max in the last slice", &with(&[151_600], 20.0)).await;
    argmax_case("max at the last id", &with(&[n - 1], 20.0)).await;
    argmax_case("max at id 0", &with(&[0], 20.0)).await;
    argmax_case("max at 1025 of 1025", &{
        let mut l = random_f32(5, 1025, 10.0);
        l[1024] = 20.0;
        l
    })
    .await;
    // All equal: id 0, whatever the value.
    for v in [0.5f32, -7.0, 0.0] {
        argmax_case(&format!("all {v}"), &vec![v; n]).await;
        argmax_case(&format!("all {v}, 3000"), &vec![v; 3000]).await;
    }
    // +inf wins; NaN never does; nothing above -3e38 (all -inf or NaN) gives 0.
    argmax_case("+inf", &with(&[90_000], f32::INFINITY)).await;
    argmax_case("NaN", &with(&[7, 70_000], f32::NAN)).await;
    argmax_case("all -inf", &vec![f32::NEG_INFINITY; n]).await;
    argmax_case("all NaN", &vec![f32::NAN; 5000]).await;
    argmax_case("empty", &[]).await;
    let mut neg = vec![f32::NEG_INFINITY; n];
    neg[100_001] = -1e30;
    neg[100_002] = -1e30;
    argmax_case("one finite pair among -inf", &neg).await;
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
    cuts_and_penalty_do_what_they_say,
    argmax_rows_match_the_reference
);
