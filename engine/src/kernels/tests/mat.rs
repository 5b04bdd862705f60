//! matvec, matmul and matvec_glu for every weight type, against `reference(dequant(w), x)`.
//! Weights are either the gguf-py fixture rows (tests/fixtures/quant_blocks.gguf, dequantized by
//! gguf-py), tiled to the shapes under test, or seeded random blocks (`random_blocks`)
//! dequantized by `quant::dequantize`, for shapes the fixture lacks.
//!
//! Tolerances: dequantization is exact on both sides (the GPU may fuse `q * scale - min` into an
//! FMA, a difference of one rounding), so the error is the f32 accumulation order. The f64
//! reference also returns each output's magnitude `sum |w x| + |bias| + |y0|`; outputs must be
//! within `REL_TOL` of the largest magnitude, and the NMSE below `NMSE_TOL`
//! (the cooperative-matrix matmul: f16 operands, `COOP_REL_TOL`).
//!
//! The decode kernels (matvec, matvec_glu) run in several [`MatvecShape`]s: their subgroup
//! variant and their portable one against the same reference, where the adapter has subgroups
//! (lavapipe: subgroups of 8), at rows per workgroup that give a row 256 threads (32 subgroups on
//! lavapipe), 64 (8), 8 (1) and fewer threads than a subgroup (portable only); see `mat_shapes`.

use super::{
    assert_close, assert_same_bytes, gpu, matvec_shapes, random_f32, read, run_dispatches,
    step_buffer, upload,
};
use crate::gpu::Gpu;
use crate::kernels::matvec_pair::pair_fits;
use crate::kernels::{
    self, Activation, GpuWeight, MatOpts, MatvecShape, Q8From, Rows, StepInfo, WeightChunk, When,
};
use crate::quant::tests::{fixture, random_blocks, FixtureTensor};
use crate::quant::{dequantize, gpu_types, repack_for_gpu, GgmlType};

/// Max abs error allowed, relative to the largest output magnitude `sum |w x|`.
const REL_TOL: f32 = 1e-5;
/// Over a row or two of outputs the NMSE is one output's relative error, which cancellation can
/// make large: an H200 (FMAs where lavapipe rounds twice) reached 1.4e-9 there.
const NMSE_TOL: f64 = 1e-8;
/// The cooperative-matrix matmul rounds x and the dequantized weights to f16; the reference does
/// too, but WGSL lets the GPU round either way (one f16 step, 2^-11 relative, per operand).
const COOP_REL_TOL: f32 = 1e-3;
const COOP_NMSE_TOL: f64 = 1e-5;

/// (NMSE, max error relative to the magnitude) for the path `kernels::mat` takes for `n` tokens.
fn tolerances(gpu: &Gpu, n: usize) -> (f64, f32) {
    if coop_path(gpu, n) {
        (COOP_NMSE_TOL, COOP_REL_TOL)
    } else {
        (NMSE_TOL, REL_TOL)
    }
}

/// `rows x cols` seeded random weights of `ty`: GGUF bytes and their CPU dequantization.
pub(super) fn random_weight(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    seed: u64,
) -> (Vec<u8>, Vec<f32>) {
    let (block, _) = ty.block_geometry().unwrap();
    let n_blocks = rows * cols / block as usize;
    let bytes = random_blocks(ty, n_blocks, seed);
    let mut vals = vec![0.0; rows * cols];
    dequantize(ty, &bytes, &mut vals).unwrap();
    (bytes, vals)
}

/// `y[t, r] = y0[t, r] + sum_k w[r, k] x[t, k] + bias[r]` in f64 for `n` tokens, with `y` rows of
/// `stride` floats; and the largest magnitude `sum_k |w x| + |bias| + |y0|` of an output.
fn mat_ref(
    w: &[f32],
    x: &[f32],
    (n, rows, cols, stride): (usize, usize, usize, usize),
    bias: Option<&[f32]>,
    y0: &[f32],
    accumulate: bool,
) -> (Vec<f32>, f32) {
    let mut y = y0.to_vec();
    let mut mag = 0.0f64;
    for t in 0..n {
        let xt = &x[t * cols..(t + 1) * cols];
        for r in 0..rows {
            let wr = &w[r * cols..(r + 1) * cols];
            let (mut s, mut m) = (0.0f64, 0.0f64);
            for (a, b) in wr.iter().zip(xt) {
                s += *a as f64 * *b as f64;
                m += (*a as f64 * *b as f64).abs();
            }
            if let Some(b) = bias {
                s += b[r] as f64;
                m += (b[r] as f64).abs();
            }
            let o = t * stride + r;
            if accumulate {
                s += y0[o] as f64;
                m += (y0[o] as f64).abs();
            }
            y[o] = s as f32;
            mag = mag.max(m);
        }
    }
    (y, mag as f32)
}

/// Columns to test a type at: multiples of its block, some giving rows an odd number of blocks
/// (grouped blocks then straddle rows).
pub(super) fn cols_for(ty: GgmlType) -> [usize; 3] {
    if ty.block_geometry().unwrap().0 == 256 {
        [256, 768, 1280]
    } else {
        [32, 96, 800]
    }
}

/// `rows` rows made by cycling the fixture's rows: GGUF bytes and their dequantized values.
pub(super) fn tile(t: &FixtureTensor, rows: usize, offset: usize) -> (Vec<u8>, Vec<f32>) {
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
pub(super) fn weight(
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

/// The decode shapes to test: 1, 4 and 32 rows per workgroup (256, 64 and 8 threads a row) with
/// subgroups (where they fit) and without, 64 and 256 rows (fewer threads a row than a subgroup,
/// or one: the portable variant), and the adapter's choice.
fn mat_shapes(gpu: &Gpu) -> Vec<MatvecShape> {
    matvec_shapes(gpu, &[1, 4, 32, 64, 256])
}

/// How a shape reads in a failure message: rows per workgroup and the variant it took.
fn shape_name(gpu: &Gpu, s: MatvecShape) -> String {
    let variant = if s.uses_subgroups(gpu) {
        "subgroups"
    } else {
        "portable"
    };
    let units = if s.int8 { " int8 x" } else { "" };
    format!("rows/wg {} {variant}{units}", s.rows)
}

/// x as the `_q8` kernels read it (common/q8_dot.wgsl): in each block of 32, d = max |x| /
/// 127, the quotient q = round(x / d) and the remainder's r = round((x - q d) 254 / d) (to nearest,
/// ties to even, as WGSL's round), x' = (254 q + r) d / 254.
pub(super) fn q8_round(x: &[f32]) -> Vec<f32> {
    x.chunks(32)
        .flat_map(|b| {
            let d = b.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            b.iter().map(move |v| {
                let q = (v * inv).round_ties_even();
                let r = ((v - q * d) * (254.0 * inv)).round_ties_even();
                (254.0 * q + r) * (d / 254.0)
            })
        })
        .collect()
}

/// x as the path `kernels::mat` takes for `n` tokens of type `ty` in `shape`, without `x_q8`,
/// reads it: int8 blocks in the `_q8` matvec, f16 in the cooperative-matrix matmul, as is
/// elsewhere.
fn x_read(gpu: &Gpu, shape: MatvecShape, ty: GgmlType, n: usize, x: &[f32]) -> Vec<f32> {
    if n == 1 && shape.takes_q8(ty) {
        q8_round(x)
    } else if coop_path(gpu, n) {
        f16_round(x)
    } else {
        x.to_vec()
    }
}

/// The dequantized weights as the path `kernels::mat` takes for `n` tokens reads them: rounded to
/// f16 in the cooperative-matrix matmul, exact elsewhere.
fn w_read(gpu: &Gpu, n: usize, w: &[f32]) -> Vec<f32> {
    if coop_path(gpu, n) {
        f16_round(w)
    } else {
        w.to_vec()
    }
}

/// Whether `kernels::mat` takes matmul_coop.wgsl (f16 operands) for `n` tokens on `gpu`.
fn coop_path(gpu: &Gpu, n: usize) -> bool {
    n > crate::kernels::mat::MATVEC_BATCH as usize && gpu.features.coop
}

/// Room for `n` tokens of `cols` activations as f16 where the adapter has matrix units: given as
/// `MatOpts::x_f16`, the long passes take matmul_coop.wgsl (`coop_path`).
fn x_f16_room(gpu: &Gpu, n: usize, cols: usize) -> Option<wgpu::Buffer> {
    gpu.features
        .coop
        .then(|| gpu.storage("x_f16", (n * cols * 2) as u64).unwrap())
}

fn f16_round(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect()
}

/// The norm prologue's x' = RMSNorm(x) * w as the decode kernels in `shape` compute it: the `_q8`
/// ones quantize x * w and scale the products by the norm afterwards.
pub(super) fn norm_read(
    shape: MatvecShape,
    ty: GgmlType,
    x: &[f32],
    w: &[f32],
    eps: f32,
) -> Vec<f32> {
    if !shape.takes_q8(ty) {
        return rmsnorm_ref(x, w, eps);
    }
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (ms + eps).sqrt();
    let xw: Vec<f32> = x.iter().zip(w).map(|(v, g)| v * g).collect();
    q8_round(&xw).into_iter().map(|v| v * inv).collect()
}

/// The kernel `kernels::mat` runs for a pass of `n` tokens, as failure messages name it.
fn mat_path(gpu: &Gpu, n: usize) -> &'static str {
    match n {
        1 => "matvec",
        n if n <= crate::kernels::mat::MATVEC_BATCH as usize => "matvec_batch",
        _ if gpu.features.coop => "matmul_coop (64x64 tiles, f16 on matrix units)",
        _ => "matmul (64x64 tiles)",
    }
}

/// Token counts for the batched paths: each side of every boundary (2..16 the small-batch path,
/// in groups of 8; 17 and more the 64-token GEMM tiles), tiles that are full, one token over,
/// and partial.
const BATCH_TOKENS: [usize; 12] = [2, 3, 5, 8, 9, 16, 17, 33, 64, 65, 100, 130];

fn matvec_ref(w: &[f32], x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows)
        .map(|r| {
            (0..cols)
                .map(|k| w[r * cols + k] as f64 * x[k] as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

fn rmsnorm_ref(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
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
            for n in [1usize, 3, 8, 9, 17, 65] {
                let x = random_f32(rows as u64 * 31 + n as u64, n * cols, 1.0);
                let bias = random_f32(7, rows, 1.0);
                let y0 = random_f32(11, n * rows, 1.0);
                let xb = upload(&gpu, "x", &x);
                let bb = upload(&gpu, "bias", &bias);
                let yb = upload(&gpu, "y", &y0);
                let xh = x_f16_room(&gpu, n, cols);
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
                        x_f16: xh.as_ref(),
                        ..Default::default()
                    },
                )
                .unwrap();
                let s = StepInfo::new(n as u32, 0, 1);
                run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
                let got = read(&gpu, &yb, n * rows).await;
                let xr = x_read(&gpu, MatvecShape::for_adapter(&gpu), t.ty, n, &x);
                let (want, mag) = mat_ref(
                    &w_read(&gpu, n, &w),
                    &xr,
                    (n, rows, cols, rows),
                    Some(&bias),
                    &y0,
                    true,
                );
                let (nmse, rel) = tolerances(&gpu, n);
                let kernel = mat_path(&gpu, n);
                let shape = format!(
                    "{} rows {rows} cols {cols} chunks {} tokens {n}",
                    t.ty,
                    splits.len() + 1
                );
                assert_close(kernel, &shape, &got, &want, nmse, rel * mag);
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
    let xb = upload(&gpu, "x", &x);
    let nb = upload(&gpu, "norm", &nw);
    for shape in mat_shapes(&gpu) {
        let want = matvec_ref(&w, &norm_read(shape, t.ty, &x, &nw, 1e-5), rows, cols);
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
                matvec: Some(shape),
                ..Default::default()
            },
        )
        .unwrap();
        // A batched pass skips the decode-only dispatch; a one-token pass runs it.
        let batch = StepInfo::new(4, 0, 1);
        assert!(d.iter().all(|d| (d.grid)(&batch).is_none()));
        let s = StepInfo::new(1, 0, 1);
        run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
        assert_close(
            "matvec+norm",
            &format!("Q4_K 33x256 {}", shape_name(&gpu, shape)),
            &read(&gpu, &yb, rows).await,
            &want,
            1e-10,
            2e-3,
        );
    }
}

async fn matvec_glu_every_type() {
    let gpu = gpu().await;
    let dummy = gpu.storage("dummy", 4).unwrap();
    for t in fixture() {
        for (act, n_ff) in [
            (Activation::Silu, 7usize),
            (Activation::GeluTanh, 13),
            (Activation::Silu, 34),
        ] {
            let cols = t.cols;
            // [gate; up]: 2 n_ff rows.
            let (bytes, w) = tile(&t, 2 * n_ff, 1);
            let gw = weight(&gpu, t.ty, &bytes, 2 * n_ff, cols, &[]);
            let x = random_f32(9, cols, 1.0);
            let nw = random_f32(10, cols, 1.0);
            let xb = upload(&gpu, "x", &x);
            let nb = upload(&gpu, "norm", &nw);
            let step = step_buffer(&gpu);
            for shape in mat_shapes(&gpu) {
                let xn = norm_read(shape, t.ty, &x, &nw, 1e-6);
                let gu = matvec_ref(&w, &xn, 2 * n_ff, cols);
                let want: Vec<f32> = (0..n_ff)
                    .map(|i| act_ref(act, gu[i]) * gu[n_ff + i])
                    .collect();
                // The gguf-py fixture rows reach |h| ~ 1e4 (Q6_K's int8 scales): relative bound.
                let mag = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let hb = gpu.storage("h", n_ff as u64 * 4).unwrap();
                let d = kernels::matvec_glu_with(
                    &gpu,
                    &gw,
                    &xb,
                    &hb,
                    &dummy,
                    Some((&nb, 1e-6)),
                    act,
                    Some(shape),
                )
                .unwrap()
                .expect("one chunk");
                run_dispatches(&gpu, &[&d], StepInfo::new(1, 0, 1), &step).await;
                let name = format!("{} n_ff {n_ff} {act:?} {}", t.ty, shape_name(&gpu, shape));
                assert_close(
                    "matvec_glu",
                    &name,
                    &read(&gpu, &hb, n_ff).await,
                    &want,
                    NMSE_TOL,
                    REL_TOL * mag,
                );
            }
        }
    }
}

/// The small passes' f32 kernel with the norm prologue and with GLU (matvec_batch.wgsl):
/// `kernels::mat` with the norm for 2 to 16 tokens (a decode or long pass skips it), and
/// `kernels::glu_small_with` from x with the norm and from x' without, every type, both
/// activations, n_ff that fill a workgroup and not, in the adapter's shape (Q4_K: every shape of
/// `mat_shapes`, at least 2 rows with GLU), against `reference(dequant(w), RMSNorm(x) * norm_w)`
/// per token.
async fn small_passes_norm_prologue_and_glu() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let eps = 1e-5;
    for (ti, ty) in gpu_types().into_iter().enumerate() {
        let cols = cols_for(ty)[1];
        let nw = random_f32(300 + ti as u64, cols, 1.5);
        let nb = upload(&gpu, "norm", &nw);
        for (act, n_ff) in [(Activation::Silu, 5usize), (Activation::GeluTanh, 34)] {
            let rows = 2 * n_ff;
            let (bytes, w) = random_weight(ty, rows, cols, 400 + ti as u64);
            let gw = weight(&gpu, ty, &bytes, rows, cols, &[]);
            for n in [2usize, 5, 16] {
                let x = random_f32(n as u64 + 31 * ti as u64, n * cols, 2.0);
                let xn: Vec<f32> = x
                    .chunks(cols)
                    .flat_map(|xt| rmsnorm_ref(xt, &nw, eps))
                    .collect();
                let (gu, mag) = mat_ref(
                    &w,
                    &xn,
                    (n, rows, cols, rows),
                    None,
                    &vec![0.0; n * rows],
                    false,
                );
                let (xb, xnb) = (upload(&gpu, "x", &x), upload(&gpu, "xn", &xn));
                let want_h: Vec<f32> = (0..n * n_ff)
                    .map(|i| {
                        let (t, r) = (i / n_ff, i % n_ff);
                        act_ref(act, gu[t * rows + r]) * gu[t * rows + n_ff + r]
                    })
                    .collect();
                // An error e in gate and up moves h by about |up| e + |act(gate)| e.
                let largest = gu.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let h_tol = 2.5 * REL_TOL * mag * largest;
                let s = StepInfo::new(n as u32, 0, 1);
                let shapes: Vec<Option<MatvecShape>> = if ty == GgmlType::Q4K {
                    mat_shapes(&gpu).into_iter().map(Some).collect()
                } else {
                    vec![None]
                };
                for shape in shapes {
                    let shown = shape.map_or("adapter's shape".into(), |s| shape_name(&gpu, s));
                    let name = format!("{ty} n_ff {n_ff} tokens {n} {shown}");
                    let yb = gpu.storage("y", (n * rows * 4) as u64).unwrap();
                    let opts = MatOpts {
                        norm: Some((&nb, eps)),
                        when: When::Small,
                        matvec: shape,
                        ..Default::default()
                    };
                    let d = kernels::mat(&gpu, &gw, &xb, &yb, &step, &dummy, &opts).unwrap();
                    for other in [StepInfo::new(1, 0, 1), StepInfo::new(17, 0, 1)] {
                        assert!(d.iter().all(|d| (d.grid)(&other).is_none()), "{name}");
                    }
                    run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
                    let got = read(&gpu, &yb, n * rows).await;
                    let tol = REL_TOL * mag;
                    assert_close("matvec_batch+norm", &name, &got, &gu, NMSE_TOL, tol);
                    for (input, norm) in [(&xb, Some((&nb, eps))), (&xnb, None)] {
                        let hb = gpu.storage("h", (n * n_ff * 4) as u64).unwrap();
                        let d = kernels::glu_small_with(
                            &gpu, &gw, input, &hb, &step, &dummy, norm, act, shape,
                        )
                        .unwrap()
                        .expect("one chunk");
                        run_dispatches(&gpu, &[&d], s, &step).await;
                        let got = read(&gpu, &hb, n * n_ff).await;
                        let name = format!("{name} {act:?} norm {}", norm.is_some());
                        assert_close("matvec_batch (GLU)", &name, &got, &want_h, NMSE_TOL, h_tol);
                    }
                }
            }
        }
    }
}

/// act(g) of a gated FFN, as common/act.wgsl computes it.
fn act_ref(act: Activation, g: f32) -> f32 {
    match act {
        Activation::Silu => g / (1.0 + (-g).exp()),
        Activation::GeluTanh => 0.5 * g * (1.0 + (0.797_884_6 * (g + 0.044715 * g * g * g)).tanh()),
    }
}

/// Every type through `kernels::mat` on random blocks: the matvec (1 token) and matvec_batch (2,
/// 8 and 11 tokens) in every shape of `mat_shapes`, and every batched path (`BATCH_TOKENS`: 2 to
/// 100 tokens; matvec_batch to 16, the matmul from 17), rows of 1, odd counts
/// that do not fill a workgroup (matvec takes 1 to 256 rows, matmul 64), weights of 1 to 3 chunks (the later
/// ones at a y offset), a y stride wider than the weight, and every combination of the bias and
/// accumulate flags.
async fn mat_random_blocks_every_type_shape_and_flag() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let mut worst = 0.0f32;
    for (ti, ty) in gpu_types().into_iter().enumerate() {
        let [c0, c1, c2] = cols_for(ty);
        // Past one chunk of the `_q8` decode kernels (4096 columns) for the 256-weight blocks.
        let long = if c0 == 256 { 5120 } else { 4000 };
        // (rows, cols, chunk splits, extra y columns)
        let shapes: [(usize, usize, &[usize], usize); 6] = [
            (1, c0, &[], 0),
            (7, c1, &[], 0),
            (33, c2, &[], 0),
            (67, c1, &[33], 0),
            (130, c0, &[64, 101], 3),
            (5, long, &[], 0),
        ];
        for (si, &(rows, cols, splits, extra)) in shapes.iter().enumerate() {
            let seed = (ti * 100 + si) as u64;
            let (bytes, w) = random_weight(ty, rows, cols, seed);
            let gw = weight(&gpu, ty, &bytes, rows, cols, splits);
            let stride = rows + extra;
            // The matvec and matvec_batch (2, 8 and 11 tokens) in every shape of `mat_shapes`, then
            // every batched path in the adapter's shape.
            let runs = mat_shapes(&gpu)
                .into_iter()
                .flat_map(|shape| [1usize, 2, 8, 11].map(|n| (n, Some(shape))))
                .chain(BATCH_TOKENS.map(|n| (n, None)));
            for (ni, (n, shape)) in runs.enumerate() {
                let flags = (si + ni) % 4;
                let (with_bias, accumulate) = (flags & 1 != 0, flags & 2 != 0);
                let x = random_f32(seed * 7 + n as u64, n * cols, 1.0);
                let bias = random_f32(seed + 1, rows, 1.0);
                let y0 = random_f32(seed + 2, n * stride, 1.0);
                let xb = upload(&gpu, "x", &x);
                let bb = upload(&gpu, "bias", &bias);
                let yb = upload(&gpu, "y", &y0);
                let xh = x_f16_room(&gpu, n, cols);
                let d = kernels::mat(
                    &gpu,
                    &gw,
                    &xb,
                    &yb,
                    &step,
                    &dummy,
                    &MatOpts {
                        bias: with_bias.then_some(&bb),
                        accumulate,
                        y_stride: (extra > 0).then_some(stride as u32),
                        matvec: shape,
                        x_f16: xh.as_ref(),
                        ..Default::default()
                    },
                )
                .unwrap();
                assert_eq!(
                    d.len(),
                    splits.len() + 1 + xh.is_some() as usize,
                    "one dispatch per chunk, and to_f16 where x_f16 is given"
                );
                let s = StepInfo::new(n as u32, 0, 1);
                run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
                let got = read(&gpu, &yb, n * stride).await;
                let xr = x_read(
                    &gpu,
                    shape.unwrap_or_else(|| MatvecShape::for_adapter(&gpu)),
                    ty,
                    n,
                    &x,
                );
                let (want, mag) = mat_ref(
                    &w_read(&gpu, n, &w),
                    &xr,
                    (n, rows, cols, stride),
                    with_bias.then_some(&bias[..]),
                    &y0,
                    accumulate,
                );
                let kernel = mat_path(&gpu, n);
                let shape = format!(
                    "{ty} rows {rows} cols {cols} chunks {} tokens {n} stride {stride} bias {with_bias} accumulate {accumulate} matvec {}",
                    splits.len() + 1,
                    shape_name(&gpu, shape.unwrap_or_else(|| MatvecShape::for_adapter(&gpu)))
                );
                let err = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (g - w).abs())
                    .fold(0.0, f32::max);
                let (nmse, rel) = tolerances(&gpu, n);
                if !coop_path(&gpu, n) {
                    worst = worst.max(err / mag);
                }
                assert_close(kernel, &shape, &got, &want, nmse, rel * mag);
            }
        }
    }
    eprintln!("mat: worst error / magnitude {worst:.2e} (tolerance {REL_TOL:.0e})");
}

/// The small-batch path on int8 x' (`kernels::quantize_q8`, then `kernels::mat` reading its
/// output): every type that takes it, in every shape of `mat_shapes` and the adapter's choice,
/// 2 to 16 tokens (the 2-, 4- and 8-token workgroups, full and not, and two groups of 8), rows
/// that do not fill a workgroup, weights of 1 to 3 chunks, rows past 4096 columns, x' with and
/// without the RMSNorm, the bias and accumulate flags, and the output rows (`Rows::Out`: the
/// first `n_out` rows of x for the last tokens), against x' quantized on the CPU.
async fn small_batch_q8_every_type() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let eps = 1e-5;
    let types: Vec<GgmlType> = gpu_types()
        .into_iter()
        .filter(|&ty| kernels::takes_small_q8(&gpu, ty))
        .collect();
    if gpu.features.int8_dot {
        assert!(types.len() >= 3, "Q4_K, Q6_K and Q8_0 take it: {types:?}");
    }
    for (ti, &ty) in types.iter().enumerate() {
        let [c0, c1, c2] = cols_for(ty);
        let long = if c0 == 256 { 5120 } else { 4000 };
        let shapes: [(usize, usize, &[usize]); 6] = [
            (1, c0, &[]),
            (7, c1, &[]),
            (33, c2, &[]),
            (67, c1, &[33]),
            (130, c0, &[64, 101]),
            (5, long, &[]),
        ];
        for (si, &(rows, cols, splits)) in shapes.iter().enumerate() {
            let seed = (ti * 100 + si) as u64 + 5000;
            let (bytes, w) = random_weight(ty, rows, cols, seed);
            let gw = weight(&gpu, ty, &bytes, rows, cols, splits);
            let xq = gpu
                .storage("x_q8", kernels::q8_bytes(16, cols as u32))
                .unwrap();
            // Every decode shape (rows per workgroup and thread, subgroups or not), then the
            // adapter's choice for the matrix, each at one of the token counts.
            let runs = mat_shapes(&gpu).into_iter().map(Some).chain([None]);
            for (ni, shape) in runs.enumerate() {
                let n = [2usize, 3, 4, 8, 9, 16][ni % 6];
                let case = si + ni;
                let (with_bias, accumulate) = (case & 1 != 0, case & 2 != 0);
                let with_norm = case % 3 != 0;
                let rows_of = if case % 4 == 3 {
                    Rows::Out
                } else {
                    Rows::Tokens
                };
                // Rows::Out: a pass of 5 more tokens whose last n want logits.
                let n_tokens = if rows_of == Rows::Out { n + 5 } else { n };
                let x = random_f32(seed * 7 + n as u64, n * cols, 1.0);
                let norm_w = random_f32(seed * 3 + n as u64, cols, 1.0);
                let bias = random_f32(seed + 1, rows, 1.0);
                let y0 = random_f32(seed + 2, n * rows, 1.0);
                let (xb, nb) = (upload(&gpu, "x", &x), upload(&gpu, "norm", &norm_w));
                let (bb, yb) = (upload(&gpu, "bias", &bias), upload(&gpu, "y", &y0));
                let norm = with_norm.then_some((&nb, eps));
                let from = norm.map_or(Q8From::X, |(w, eps)| Q8From::Norm(w, eps));
                let q = kernels::quantize_q8(&gpu, &xb, &xq, &step, cols as u32, rows_of, from)
                    .unwrap();
                let opts = MatOpts {
                    bias: with_bias.then_some(&bb),
                    accumulate,
                    rows: rows_of,
                    x_q8: Some(&xq),
                    matvec: shape,
                    ..Default::default()
                };
                let m = kernels::mat(&gpu, &gw, &xb, &yb, &step, &dummy, &opts).unwrap();
                let s = StepInfo::new(n_tokens as u32, 0, n as u32);
                let all: Vec<_> = std::iter::once(&q).chain(&m).collect();
                run_dispatches(&gpu, &all, s, &step).await;
                let got = read(&gpu, &yb, n * rows).await;
                // The norm as the decode kernels apply it: x * w quantized, scaled after.
                let xr: Vec<f32> = x
                    .chunks(cols)
                    .flat_map(|xt| match norm {
                        Some(_) => norm_read(
                            MatvecShape::for_small(&gpu, 1, 32, ty),
                            ty,
                            xt,
                            &norm_w,
                            eps,
                        ),
                        None => q8_round(xt),
                    })
                    .collect();
                let bias = with_bias.then_some(&bias[..]);
                let (want, mag) = mat_ref(&w, &xr, (n, rows, cols, rows), bias, &y0, accumulate);
                let shape = format!(
                    "{ty} rows {rows} cols {cols} chunks {} tokens {n} of {n_tokens} {rows_of:?} norm {with_norm} bias {with_bias} accumulate {accumulate} shape {}",
                    splits.len() + 1,
                    shape.map_or("the adapter's".into(), |s| shape_name(&gpu, s))
                );
                assert_close(
                    "matvec_batch_q8",
                    &shape,
                    &got,
                    &want,
                    NMSE_TOL,
                    REL_TOL * mag,
                );
            }
        }
    }
}

/// quantize_q8 from gate/up with the activation (`Q8From::Glu`, the dense FFN's input to its
/// down projection in the small passes) writes the same bytes as glu.wgsl's output quantized as
/// it is (the path it replaces; glu.wgsl is checked against the CPU in the attention tests).
async fn quantize_q8_glu_is_glu_then_quantize() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for (n, n_tokens, act) in [
        (1536u32, 3u32, Activation::Silu),
        (2048, 5, Activation::GeluTanh),
        (96, 8, Activation::Silu),
    ] {
        // Wide inputs reach the tails of both activations (and GELU's clamp of its tanh).
        let gu = random_f32(n as u64 + 77, (n_tokens * 2 * n) as usize, 12.0);
        let gub = upload(&gpu, "gu", &gu);
        let hb = gpu.storage("h", (n_tokens * n) as u64 * 4).unwrap();
        let size = kernels::q8_bytes(n_tokens, n);
        let (want_q, got_q) = (
            gpu.storage("want", size).unwrap(),
            gpu.storage("got", size).unwrap(),
        );
        let glu = kernels::glu(&gpu, &gub, &hb, &step, n, act, When::Always).unwrap();
        let rows = Rows::Tokens;
        let q = |x, xq, from| kernels::quantize_q8(&gpu, x, xq, &step, n, rows, from).unwrap();
        let want = q(&hb, &want_q, Q8From::X);
        let got = q(&gub, &got_q, Q8From::Glu(act));
        let s = StepInfo::new(n_tokens, 0, n_tokens);
        run_dispatches(&gpu, &[&glu, &want, &got], s, &step).await;
        let case = format!("quantize_q8 Glu, n {n}, tokens {n_tokens}, {act:?}");
        assert_same_bytes(&gpu, &got_q, &want_q, size, &case).await;
    }
}

/// `Rows::Out`: only the last `n_out` tokens' rows (held from row 0 of x) are computed, by the
/// path `kernels::mat` takes for `n_out` tokens (`mat_path`); the rest of y is left alone.
async fn mat_output_rows_every_type() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    for (ti, ty) in gpu_types().into_iter().enumerate() {
        let (rows, cols) = (67, cols_for(ty)[1]);
        let (bytes, w) = random_weight(ty, rows, cols, 1000 + ti as u64);
        let gw = weight(&gpu, ty, &bytes, rows, cols, &[40]);
        let n_tokens = 70;
        for n_out in [1usize, 3, 8, 9, 17, 66] {
            let x = random_f32(ti as u64, n_tokens * cols, 1.0);
            let y0 = random_f32(ti as u64 + 1, n_tokens * rows, 1.0);
            let xb = upload(&gpu, "x", &x);
            let yb = upload(&gpu, "y", &y0);
            let xh = x_f16_room(&gpu, n_tokens, cols);
            let d = kernels::mat(
                &gpu,
                &gw,
                &xb,
                &yb,
                &step,
                &dummy,
                &MatOpts {
                    rows: Rows::Out,
                    x_f16: xh.as_ref(),
                    ..Default::default()
                },
            )
            .unwrap();
            let s = StepInfo::new(n_tokens as u32, 0, n_out as u32);
            run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
            let got = read(&gpu, &yb, n_tokens * rows).await;
            let xr = x_read(&gpu, MatvecShape::for_adapter(&gpu), ty, n_out, &x);
            let wr = w_read(&gpu, n_out, &w);
            let (mut want, mag) = mat_ref(&wr, &xr, (n_out, rows, cols, rows), None, &y0, false);
            want.truncate(n_out * rows);
            want.extend_from_slice(&y0[n_out * rows..]);
            let kernel = mat_path(&gpu, n_out);
            let shape =
                format!("{ty} rows {rows} cols {cols} Rows::Out n_out {n_out} of {n_tokens}");
            let (nmse, rel) = tolerances(&gpu, n_out);
            assert_close(kernel, &shape, &got, &want, nmse, rel * mag);
        }
    }
}

/// Which matrices the small passes quantize x for, and whether every chunk then reads x'
/// (`mat::small_q8_reads_from` at the forward pass's [`kernels::mat::SMALL_Q8_MIN_BYTES`]): Q, K
/// and V stacked with V of another type and too small to pay for the quantization alone (the
/// dense 8B shape's Q6_K V, 3.4 MB) still read x' all three, so the pass needs no f32 x beside it
/// (an rmsnorm dispatch a layer, which it made for nothing before); a chunk whose type has no
/// int8 unit does need it; a matrix none of whose chunks pays is not quantized for. An adapter
/// without int8 dot products quantizes for none.
async fn small_q8_reads_every_chunk_that_takes_it() {
    let gpu = gpu().await;
    let min = kernels::mat::SMALL_Q8_MIN_BYTES;
    let matrix = |chunks: &[(GgmlType, u64)]| GpuWeight {
        name: "w".into(),
        n_rows: chunks.len() as u32,
        n_cols: 256,
        chunks: chunks
            .iter()
            .enumerate()
            .map(|(i, &(ty, bytes))| WeightChunk {
                buffer: gpu.storage("w", bytes).unwrap(),
                ty,
                row0: i as u32,
                n_rows: 1,
            })
            .collect(),
    };
    let (q4, q6, f32t) = (GgmlType::Q4K, GgmlType::Q6K, GgmlType::F32);
    let cases = [
        (vec![(q4, min), (q6, min / 4)], (true, true)),
        (vec![(q4, min), (q4, min)], (true, true)),
        (vec![(q4, min), (f32t, min / 4)], (true, false)),
        (vec![(q4, min / 4), (q6, min / 4)], (false, false)),
        (vec![(f32t, min)], (false, false)),
    ];
    for (chunks, want) in cases {
        let got = kernels::mat::small_q8_reads_from(&gpu, &matrix(&chunks), min);
        let want = if gpu.features.int8_dot {
            want
        } else {
            (false, false)
        };
        assert_eq!(got, want, "chunks {chunks:?}");
    }
}

/// matvec_route (`kernels::matvec_route`): `y += W x` as the decode matvec, and each expert's
/// router logit share `sum_i R[e, i] g_i y_i` summed into its slot as 52-bit fixed point, against
/// f64 on the CPU; the slot it clears zeroed and a third left alone. Weights of a `_q8` type and
/// not, in two chunks (the first ending in a partial workgroup), in workgroups of 4 to 16 rows
/// (R g loaded ahead of the product), 1, 2 and 32 rows (loaded after it), and the adapter's.
async fn matvec_route_adds_router_shares() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let (rows, splits, ne) = (648usize, [392usize], 20usize);
    let words = kernels::route_slot_words(ne as u32) as usize;
    let shapes = matvec_shapes(&gpu, &[1, 2, 4, 8, 16, 32])
        .into_iter()
        .map(Some)
        .chain([None]);
    for (i, shape) in shapes.enumerate() {
        let ty = [GgmlType::F32, GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0][i % 4];
        let cols = cols_for(ty)[1];
        let (bytes, w) = random_weight(ty, rows, cols, 5 + i as u64);
        let gw = weight(&gpu, ty, &bytes, rows, cols, &splits);
        let r = random_f32(6, ne * rows, 0.5);
        let router = weight(&gpu, GgmlType::F32, bytemuck::cast_slice(&r), ne, rows, &[]);
        let g = random_f32(7, rows, 1.0);
        let x = random_f32(8, cols, 1.0);
        let y0 = random_f32(9, rows, 1.0);
        let (xb, yb, gb) = (
            upload(&gpu, "x", &x),
            upload(&gpu, "y", &y0),
            upload(&gpu, "g", &g),
        );
        // Slots: 0 to clear, 1 to add into (from a value already there), 2 another layer's.
        let mut slots = vec![0x5a5a_5a5au32; 3 * words];
        slots[words..2 * words].fill(0);
        let start: Vec<f64> = (0..ne).map(|e| e as f64 - 7.25).collect();
        for (e, v) in start.iter().enumerate() {
            super::moe::add_share_ref(&mut slots[words..2 * words], e, ne, *v);
        }
        let shares = gpu
            .storage_init("shares", bytemuck::cast_slice(&slots))
            .unwrap();
        let share = kernels::RouteShare {
            router: &router,
            norm: &gb,
            shares: &shares,
            at: words as u32,
            clear: 0,
        };
        let name = match shape {
            Some(s) => format!("{ty} rows/wg {} x {} int8 {}", s.rows, s.per_thread, s.int8),
            None => format!("{ty} the adapter's shape"),
        };
        assert!(
            kernels::route_share_fits(&gpu, &gw, &router, shape),
            "{name}: fits"
        );
        let d = kernels::matvec_route(&gpu, &gw, &xb, &yb, &step, &dummy, &share, shape).unwrap();
        assert_eq!(d.len(), 2, "{name}: a dispatch a chunk");
        let s = StepInfo::new(1, 0, 1);
        run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
        let got = read(&gpu, &yb, rows).await;
        let read_shape = shape.unwrap_or_else(|| MatvecShape::for_adapter(&gpu));
        let xr = x_read(&gpu, read_shape, ty, 1, &x);
        let (want, mag) = mat_ref(&w, &xr, (1, rows, cols, rows), None, &y0, true);
        assert_close("matvec_route", &name, &got, &want, NMSE_TOL, REL_TOL * mag);
        let after: Vec<u32> = read(&gpu, &shares, 3 * words)
            .await
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert!(
            after[..words].iter().all(|&v| v == 0),
            "{name}: slot cleared"
        );
        assert_eq!(
            &after[2 * words..],
            &slots[2 * words..],
            "{name}: other slot"
        );
        for e in 0..ne {
            let (mut want, mut mag) = (start[e], start[e].abs());
            for i in 0..rows {
                let v = r[e * rows + i] as f64 * g[i] as f64 * got[i] as f64;
                want += v;
                mag += v.abs();
            }
            let share = super::moe::share_value(&after[words..2 * words], e, ne);
            assert!(
                (share - want).abs() <= 1e-6 * mag,
                "{name}: expert {e} share {share}, want {want} (magnitude {mag})"
            );
        }
    }
}

/// Two chunks of different types (Q4_K rows, then Q6_K rows: a Q4_K_M file's Q, K and V) take
/// one decode dispatch where the adapter has the int8 units (matvec_q8_pair.wgsl), and their own
/// dispatches for the other passes: one token and two against f64, in every shape of
/// `mat_shapes` (the second chunk in the first's) and the adapter's choice, chunks that end in
/// partial workgroups, rows past one staged chunk of x' (5,120 columns), the norm prologue, the
/// bias and accumulate flags, and a y stride wider than the matrix.
async fn matvec_pair_two_types_one_dispatch() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let (ta, tb) = (GgmlType::Q4K, GgmlType::Q6K);
    for (ci, &(ra, rb, cols)) in [(37usize, 19usize, 768usize), (64, 9, 5120)]
        .iter()
        .enumerate()
    {
        let seed = 900 + 10 * ci as u64;
        let (bytes_a, wa) = random_weight(ta, ra, cols, seed);
        let (bytes_b, wb) = random_weight(tb, rb, cols, seed + 1);
        let (a, b) = (
            weight(&gpu, ta, &bytes_a, ra, cols, &[]),
            weight(&gpu, tb, &bytes_b, rb, cols, &[]),
        );
        let rows = ra + rb;
        let second = WeightChunk {
            row0: ra as u32,
            ..b.chunks.into_iter().next().unwrap()
        };
        let gw = GpuWeight {
            name: "q4_k+q6_k".into(),
            n_rows: rows as u32,
            n_cols: cols as u32,
            chunks: a.chunks.into_iter().chain([second]).collect(),
        };
        let w: Vec<f32> = wa.iter().chain(&wb).copied().collect();
        let stride = rows + 3;
        let nw = random_f32(seed + 2, cols, 1.5);
        let nb = upload(&gpu, "norm", &nw);
        let runs = mat_shapes(&gpu).into_iter().map(Some).chain([None]);
        let mut paired_shapes = 0;
        for (si, shape) in runs.enumerate() {
            for n in [1usize, 2] {
                let flags = si + n;
                let (with_bias, accumulate, with_norm) =
                    (flags & 1 != 0, flags & 2 != 0, n == 1 && si % 2 == 0);
                let x = random_f32(seed + 3 + si as u64, n * cols, 1.0);
                let bias = random_f32(seed + 4, rows, 1.0);
                let y0 = random_f32(seed + 5, n * stride, 1.0);
                let (xb, bb, yb) = (
                    upload(&gpu, "x", &x),
                    upload(&gpu, "bias", &bias),
                    upload(&gpu, "y", &y0),
                );
                let d = kernels::mat(
                    &gpu,
                    &gw,
                    &xb,
                    &yb,
                    &step,
                    &dummy,
                    &MatOpts {
                        bias: with_bias.then_some(&bb),
                        accumulate,
                        y_stride: Some(stride as u32),
                        norm: with_norm.then_some((&nb, 1e-5)),
                        when: if with_norm {
                            When::Decode
                        } else {
                            When::Always
                        },
                        matvec: shape,
                        ..Default::default()
                    },
                )
                .unwrap();
                let s_shape = shape
                    .unwrap_or_else(|| MatvecShape::for_matrix(&gpu, ra as u32, cols as u32, ta));
                let paired = pair_fits(s_shape, ta, tb, cols as u32);
                paired_shapes += (n == 1 && paired) as usize;
                assert_eq!(
                    d.len(),
                    2 + paired as usize,
                    "the pair's dispatch beside the chunks'"
                );
                let s = StepInfo::new(n as u32, 0, 1);
                let ran = d.iter().filter(|d| (d.grid)(&s).is_some()).count();
                assert_eq!(
                    ran,
                    if n == 1 && paired { 1 } else { 2 },
                    "dispatches run for {n} tokens"
                );
                run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
                let got = read(&gpu, &yb, n * stride).await;
                let xr = if with_norm {
                    norm_read(s_shape, ta, &x, &nw, 1e-5)
                } else {
                    x_read(&gpu, s_shape, ta, n, &x)
                };
                let (want, mag) = mat_ref(
                    &w,
                    &xr,
                    (n, rows, cols, stride),
                    with_bias.then_some(&bias[..]),
                    &y0,
                    accumulate,
                );
                let name = format!(
                    "Q4_K {ra} + Q6_K {rb} rows x {cols} tokens {n} bias {with_bias} accumulate {accumulate} norm {with_norm} {}",
                    shape_name(&gpu, s_shape)
                );
                let rel = if with_norm { 2e-3 } else { REL_TOL };
                assert_close(
                    mat_path(&gpu, n),
                    &name,
                    &got,
                    &want,
                    NMSE_TOL.max(if with_norm { 1e-10 } else { 0.0 }),
                    rel * mag,
                );
            }
        }
        assert!(
            paired_shapes > 0,
            "{ra} + {rb} rows x {cols}: no shape took the pair"
        );
    }
}

super::gpu_tests!(
    matvec_pair_two_types_one_dispatch,
    matvec_route_adds_router_shares,
    mat_every_type_and_shape,
    matvec_norm_prologue_and_output_rows,
    matvec_glu_every_type,
    small_passes_norm_prologue_and_glu,
    mat_random_blocks_every_type_shape_and_flag,
    small_batch_q8_every_type,
    quantize_q8_glu_is_glu_then_quantize,
    small_q8_reads_every_chunk_that_takes_it,
    mat_output_rows_every_type
);
