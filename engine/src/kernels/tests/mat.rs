//! matvec, matmul, matvec_glu and embed for every weight type, against `reference(dequant(w), x)`.
//! Weights are the gguf-py fixture rows (tests/fixtures/quant_blocks.gguf), tiled to the shapes
//! under test.

use super::{assert_close, gpu, random_f32, read, run_dispatches, step_buffer};
use crate::gpu::Gpu;
use crate::kernels::{self, Activation, GpuWeight, MatOpts, Rows, StepInfo, WeightChunk, When};
use crate::quant::tests::{fixture, FixtureTensor};
use crate::quant::{repack_for_gpu, GgmlType};

/// `rows` rows made by cycling the fixture's rows: GGUF bytes and their dequantized values.
fn tile(t: &FixtureTensor, rows: usize, offset: usize) -> (Vec<u8>, Vec<f32>) {
    let row_bytes = t.data.len() / t.rows;
    let (mut bytes, mut vals) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let src = (r + offset) % t.rows;
        bytes.extend_from_slice(&t.data[src * row_bytes..(src + 1) * row_bytes]);
        vals.extend_from_slice(&t.expected[src * t.cols..(src + 1) * t.cols]);
    }
    (bytes, vals)
}

/// A GPU weight from GGUF bytes, split into chunks at the given row boundaries.
fn weight(
    gpu: &Gpu,
    ty: GgmlType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    splits: &[usize],
) -> GpuWeight {
    let row_bytes = bytes.len() / rows;
    let mut bounds = vec![0];
    bounds.extend_from_slice(splits);
    bounds.push(rows);
    let chunks = bounds
        .windows(2)
        .map(|w| WeightChunk {
            buffer: gpu
                .storage_init(
                    "w",
                    &repack_for_gpu(ty, &bytes[w[0] * row_bytes..w[1] * row_bytes]),
                )
                .unwrap(),
            ty,
            row0: w[0] as u32,
            n_rows: (w[1] - w[0]) as u32,
        })
        .collect();
    GpuWeight {
        name: format!("{ty}"),
        n_rows: rows as u32,
        n_cols: cols as u32,
        chunks,
    }
}

fn matvec_ref(w: &[f32], x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows)
        .map(|r| (0..cols).map(|k| w[r * cols + k] * x[k]).sum())
        .collect()
}

fn rmsnorm_ref(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
}

fn tolerance(ty: GgmlType) -> (f64, f32) {
    // f32 accumulation in a different order; f16/bf16/quantized weights are exact inputs.
    let _ = ty;
    (1e-10, 2e-3)
}

async fn mat_every_type_and_shape() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    for t in fixture() {
        let cols = t.cols;
        for (rows, splits) in [(1, vec![]), (7, vec![]), (67, vec![]), (67, vec![34])] {
            let (bytes, w) = tile(&t, rows, 3);
            let gw = weight(&gpu, t.ty, &bytes, rows, cols, &splits);
            for n in [1usize, 5, 33] {
                let x = random_f32(rows as u64 * 31 + n as u64, n * cols, 1.0);
                let bias = random_f32(7, rows, 1.0);
                let y0 = random_f32(11, n * rows, 1.0);
                let xb = gpu.storage_init("x", bytemuck::cast_slice(&x)).unwrap();
                let bb = gpu
                    .storage_init("bias", bytemuck::cast_slice(&bias))
                    .unwrap();
                let yb = gpu.storage_init("y", bytemuck::cast_slice(&y0)).unwrap();
                let d = kernels::mat(
                    &gpu,
                    &gw,
                    &xb,
                    &yb,
                    &step,
                    &dummy,
                    &MatOpts {
                        bias: Some(&bb),
                        accumulate: true,
                        ..Default::default()
                    },
                )
                .unwrap();
                let s = StepInfo {
                    n_tokens: n as u32,
                    pos: 0,
                    n_out: 1,
                };
                run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
                let got = read(&gpu, &yb, n * rows).await;
                let mut want = y0.clone();
                for tk in 0..n {
                    let r = matvec_ref(&w, &x[tk * cols..(tk + 1) * cols], rows, cols);
                    for i in 0..rows {
                        want[tk * rows + i] += r[i] + bias[i];
                    }
                }
                let (nmse, max_abs) = tolerance(t.ty);
                let kernel = if n == 1 { "matvec" } else { "matmul" };
                let shape = format!(
                    "{} rows {rows} cols {cols} chunks {} tokens {n}",
                    t.ty,
                    splits.len() + 1
                );
                assert_close(kernel, &shape, &got, &want, nmse, max_abs);
            }
        }
    }
}

async fn matvec_norm_prologue_and_output_rows() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let t = fixture()
        .into_iter()
        .find(|t| t.ty == GgmlType::Q4K)
        .unwrap();
    let (rows, cols) = (33, t.cols);
    let (bytes, w) = tile(&t, rows, 0);
    let gw = weight(&gpu, t.ty, &bytes, rows, cols, &[]);
    let x = random_f32(5, cols, 2.0);
    let nw = random_f32(6, cols, 1.5);
    let xb = gpu.storage_init("x", bytemuck::cast_slice(&x)).unwrap();
    let nb = gpu.storage_init("norm", bytemuck::cast_slice(&nw)).unwrap();
    let yb = gpu.storage("y", rows as u64 * 4).unwrap();
    let d = kernels::mat(
        &gpu,
        &gw,
        &xb,
        &yb,
        &step,
        &dummy,
        &MatOpts {
            norm: Some((&nb, 1e-5)),
            when: When::Decode,
            rows: Rows::Out,
            ..Default::default()
        },
    )
    .unwrap();
    // A batched pass skips the decode-only dispatch; a one-token pass runs it.
    let batch = StepInfo {
        n_tokens: 4,
        pos: 0,
        n_out: 1,
    };
    assert!(d.iter().all(|d| (d.grid)(&batch).is_none()));
    let s = StepInfo {
        n_tokens: 1,
        pos: 0,
        n_out: 1,
    };
    run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
    let want = matvec_ref(&w, &rmsnorm_ref(&x, &nw, 1e-5), rows, cols);
    assert_close(
        "matvec+norm",
        "Q4_K 33x256",
        &read(&gpu, &yb, rows).await,
        &want,
        1e-10,
        2e-3,
    );
}

async fn matvec_glu_every_type() {
    let gpu = gpu().await;
    let dummy = gpu.storage("dummy", 4).unwrap();
    for t in fixture() {
        for (act, n_ff) in [(Activation::Silu, 7usize), (Activation::GeluTanh, 13)] {
            let cols = t.cols;
            // [gate; up]: 2 n_ff rows (an even count keeps paired blocks aligned).
            let (bytes, w) = tile(&t, 2 * n_ff, 1);
            let gw = weight(&gpu, t.ty, &bytes, 2 * n_ff, cols, &[]);
            let x = random_f32(9, cols, 1.0);
            let nw = random_f32(10, cols, 1.0);
            let xb = gpu.storage_init("x", bytemuck::cast_slice(&x)).unwrap();
            let nb = gpu.storage_init("norm", bytemuck::cast_slice(&nw)).unwrap();
            let hb = gpu.storage("h", n_ff as u64 * 4).unwrap();
            let d = kernels::matvec_glu(&gpu, &gw, &xb, &hb, &dummy, Some((&nb, 1e-6)), act)
                .unwrap()
                .expect("one chunk");
            let step = step_buffer(&gpu);
            run_dispatches(
                &gpu,
                &[&d],
                StepInfo {
                    n_tokens: 1,
                    pos: 0,
                    n_out: 1,
                },
                &step,
            )
            .await;
            let xn = rmsnorm_ref(&x, &nw, 1e-6);
            let gu = matvec_ref(&w, &xn, 2 * n_ff, cols);
            let want: Vec<f32> = (0..n_ff)
                .map(|i| {
                    let g = gu[i];
                    let a = match act {
                        Activation::Silu => g / (1.0 + (-g).exp()),
                        Activation::GeluTanh => {
                            0.5 * g * (1.0 + (0.797_884_6 * (g + 0.044715 * g * g * g)).tanh())
                        }
                    };
                    a * gu[n_ff + i]
                })
                .collect();
            let shape = format!("{} n_ff {n_ff} {act:?}", t.ty);
            assert_close(
                "matvec_glu",
                &shape,
                &read(&gpu, &hb, n_ff).await,
                &want,
                1e-9,
                5e-3,
            );
        }
    }
}

async fn embed_every_type_and_chunked_table() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for t in fixture() {
        let (rows, cols) = (21, t.cols);
        let (bytes, w) = tile(&t, rows, 2);
        for splits in [vec![], vec![10]] {
            let gw = weight(&gpu, t.ty, &bytes, rows, cols, &splits);
            let tokens: Vec<u32> = vec![0, 20, 9, 10, 3, 3];
            let tb = gpu
                .storage_init("tokens", bytemuck::cast_slice(&tokens))
                .unwrap();
            let yb = gpu.storage("y", (tokens.len() * cols) as u64 * 4).unwrap();
            let d = kernels::embed(&gpu, &gw, &tb, &yb, &step, 0.5).unwrap();
            let s = StepInfo {
                n_tokens: tokens.len() as u32,
                pos: 0,
                n_out: 1,
            };
            run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
            let want: Vec<f32> = tokens
                .iter()
                .flat_map(|&id| {
                    w[id as usize * cols..(id as usize + 1) * cols]
                        .iter()
                        .map(|v| v * 0.5)
                })
                .collect();
            let shape = format!("{} chunks {}", t.ty, splits.len() + 1);
            assert_close(
                "embed",
                &shape,
                &read(&gpu, &yb, tokens.len() * cols).await,
                &want,
                0.0,
                0.0,
            );
        }
    }
}

super::gpu_tests!(
    mat_every_type_and_shape,
    matvec_norm_prologue_and_output_rows,
    matvec_glu_every_type,
    embed_every_type_and_chunked_table
);
