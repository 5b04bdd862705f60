//! embed for every weight type, against the dequantized rows: the gguf-py fixture rows (see
//! `mat.rs`) and seeded random blocks, in chunked tables.

use super::mat::{cols_for, random_weight, tile, weight};
use super::{assert_close, gpu, read, run_dispatches, step_buffer, upload};
use crate::kernels::{self, StepInfo};
use crate::quant::gpu_types;
use crate::quant::tests::fixture;

async fn embed_every_type_and_chunked_table() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for t in fixture() {
        let (rows, cols) = (21, t.cols);
        let (bytes, w) = tile(&t, rows, 2);
        for splits in [vec![], vec![10]] {
            let gw = weight(&gpu, t.ty, &bytes, rows, cols, &splits);
            let tokens: Vec<u32> = vec![0, 20, 9, 10, 3, 3];
            let tb = upload(&gpu, "tokens", &tokens);
            let yb = gpu.storage("y", (tokens.len() * cols) as u64 * 4).unwrap();
            let d = kernels::embed(&gpu, &gw, &tb, &yb, &step, 0.5).unwrap();
            let s = StepInfo::new(tokens.len() as u32, 0, 1);
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

/// `embed` on random tables of every type: rows at the edges of each of three chunks, repeated
/// tokens, a scale. The values are the dequantized rows, up to one rounding (FMA).
async fn embed_random_blocks_every_type() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for (ti, ty) in gpu_types().into_iter().enumerate() {
        for (ci, cols) in cols_for(ty).into_iter().enumerate() {
            let rows = 67;
            let (bytes, w) = random_weight(ty, rows, cols, 2000 + (ti * 10 + ci) as u64);
            let gw = weight(&gpu, ty, &bytes, rows, cols, &[33, 50]);
            let tokens: Vec<u32> = vec![0, 66, 32, 33, 49, 50, 7, 7, 1];
            let tb = upload(&gpu, "tokens", &tokens);
            let yb = gpu.storage("y", (tokens.len() * cols) as u64 * 4).unwrap();
            let scale = 1.5;
            let d = kernels::embed(&gpu, &gw, &tb, &yb, &step, scale).unwrap();
            let s = StepInfo::new(tokens.len() as u32, 0, 1);
            run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
            let want: Vec<f32> = tokens
                .iter()
                .flat_map(|&id| w[id as usize * cols..][..cols].iter().map(|v| v * scale))
                .collect();
            let mag = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let shape = format!("{ty} rows {rows} cols {cols} chunks 3");
            assert_close(
                "embed",
                &shape,
                &read(&gpu, &yb, tokens.len() * cols).await,
                &want,
                1e-12,
                4.0 * f32::EPSILON * mag,
            );
        }
    }
}

super::gpu_tests!(
    embed_every_type_and_chunked_table,
    embed_random_blocks_every_type
);
