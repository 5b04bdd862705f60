//! Kernel tests: each kernel against a plain CPU reference on seeded random data, with shapes of
//! 1, odd sizes and sizes that do not fill a workgroup. They run on whatever adapter wgpu finds
//! (lavapipe in CI); `TANDEM_TEST_PORTABLE=1` forces the kernels without f16 and subgroups.
//!
//! Test bodies are `async fn`s; [`gpu_tests!`] turns them into `#[test]`s natively (blocking on
//! them) and into `wasm_bindgen_test`s in the browser (awaiting them), so the same bodies run in
//! headless Chromium on its WebGPU (web/tests/kernels.sh).

use std::sync::Arc;

use crate::gpu::{Gpu, GpuOptions};

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// Declares the listed `async fn` test bodies of the calling module as tests on both platforms.
macro_rules! gpu_tests {
    ($($name:ident),* $(,)?) => {
        #[cfg(not(target_arch = "wasm32"))]
        mod native {
            $(#[test]
            fn $name() {
                crate::platform::block_on(super::$name())
            })*
        }
        #[cfg(target_arch = "wasm32")]
        mod browser {
            $(#[wasm_bindgen_test::wasm_bindgen_test]
            async fn $name() {
                super::$name().await
            })*
        }
    };
}
pub(crate) use gpu_tests;

async fn open_gpu() -> Gpu {
    let opts = GpuOptions {
        force_fallback: false,
        portable_only: std::env::var_os("TANDEM_TEST_PORTABLE").is_some(),
    };
    Gpu::new(&opts)
        .await
        .expect("a GPU adapter (lavapipe in CI, WebGPU in the browser)")
}

/// One GPU for all kernel tests of this process.
#[cfg(not(target_arch = "wasm32"))]
pub async fn gpu() -> Arc<Gpu> {
    static GPU: std::sync::OnceLock<Arc<Gpu>> = std::sync::OnceLock::new();
    GPU.get_or_init(|| Arc::new(crate::platform::block_on(open_gpu())))
        .clone()
}

/// One GPU for all kernel tests of this page (wgpu's browser types stay on their thread).
#[cfg(target_arch = "wasm32")]
pub async fn gpu() -> Arc<Gpu> {
    thread_local! {
        static GPU: std::cell::RefCell<Option<Arc<Gpu>>> = const { std::cell::RefCell::new(None) };
    }
    if let Some(g) = GPU.with(|g| g.borrow().clone()) {
        return g;
    }
    let g = Arc::new(open_gpu().await);
    GPU.with(|c| *c.borrow_mut() = Some(g.clone()));
    g
}

/// (nmse, max_abs) for kernels that rotate by RoPE: WGSL bounds sin/cos only to an absolute 2^-11
/// on [-pi, pi]. lavapipe is exact to ~1e-7; Chromium's SwiftShader is off by ~1e-4. A wrong pair,
/// angle or mode is off by O(1).
pub const ROPE_TOL: (f64, f32) = (1e-6, 1e-3);

/// Seeded random floats in [-scale, scale).
pub fn random_f32(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// Compares `got` with `want` by normalised mean squared error and max absolute error; the panic
/// names the kernel, the shape and the first index past `max_abs`.
#[track_caller]
pub fn assert_close(
    kernel: &str,
    shape: &str,
    got: &[f32],
    want: &[f32],
    nmse_tol: f64,
    max_abs: f32,
) {
    assert_eq!(got.len(), want.len(), "{kernel} {shape}: length");
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        err += ((g - w) as f64).powi(2);
        norm += (*w as f64).powi(2);
    }
    let nmse = if norm > 0.0 { err / norm } else { err };
    // Negated, so that a NaN counts as off.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| !((g - w).abs() <= max_abs));
    assert!(
        nmse <= nmse_tol && bad.is_none(),
        "{kernel} {shape}: nmse {nmse:.3e} (tol {nmse_tol:.0e}); first index off by more than {max_abs}: {:?}",
        bad.map(|i| (i, got[i], want[i]))
    );
}

/// The rows per workgroup the browser tests decode shapes at (see [`matvec_shapes`]): those
/// `kernels::matvec_rows` gives a GPU (4) and a CPU adapter (256).
const BROWSER_ROWS: [u32; 2] = [4, 256];

/// Decode matvec shapes to test: `rows` per workgroup each with subgroups (where they fit) and
/// without, the first with two rows per thread and the last with four, and the adapter's choice;
/// all with the `_q8` kernels where the adapter has them, and the first and last rows settings
/// also with the f32 units (the fallback). Each distinct (rows, variant, units) once, so an
/// adapter without subgroups (or `TANDEM_TEST_PORTABLE`) runs every rows setting once.
/// In the browser only the settings of `rows` in [`BROWSER_ROWS`]: the rows are override
/// constants of the same WGSL, which the native run covers, and SwiftShader builds each pipeline
/// for seconds (the browser kernel suite took 1,632 s on a 2-core machine with every setting, the
/// tests over these shapes 1,450 s of it; 944 s with these).
pub fn matvec_shapes(gpu: &Gpu, rows: &[u32]) -> Vec<super::MatvecShape> {
    let rows: Vec<u32> = rows
        .iter()
        .copied()
        .filter(|r| !cfg!(target_arch = "wasm32") || BROWSER_ROWS.contains(r))
        .collect();
    let int8 = gpu.features.int8_dot;
    let shape = |rows, per_thread, subgroups, int8| super::MatvecShape {
        rows,
        per_thread,
        subgroups,
        int8,
    };
    let mut out: Vec<super::MatvecShape> = Vec::new();
    let all = rows
        .iter()
        .flat_map(|&rows| [true, false].map(|subgroups| shape(rows, 1, subgroups, int8)))
        .chain(rows.first().map(|&rows| shape(rows, 2, true, int8)))
        .chain(rows.last().map(|&rows| shape(rows, 4, false, int8)))
        .chain(rows.first().map(|&rows| shape(rows, 1, true, false)))
        .chain(rows.last().map(|&rows| shape(rows, 4, false, false)))
        .chain([super::MatvecShape::for_adapter(gpu)]);
    for s in all {
        let same = |o: &super::MatvecShape| {
            o.rows == s.rows
                && o.per_thread == s.per_thread
                && o.uses_subgroups(gpu) == s.uses_subgroups(gpu)
                && o.int8 == s.int8
        };
        if !out.iter().any(same) {
            out.push(s);
        }
    }
    out
}

mod attention;
mod bindings;
mod cost;
mod embed;
mod mat;
mod moe;
mod sample;
mod shape;
mod stream;

use super::{Dispatch, StepInfo, StepUniform};

/// Records `dispatches` for the pass shape `step` in one compute pass and waits for them.
pub async fn run_dispatches(
    gpu: &Gpu,
    dispatches: &[&Dispatch],
    step: StepInfo,
    step_buf: &wgpu::Buffer,
) {
    run_attention_dispatches(gpu, dispatches, step, step_buf, 1).await
}

/// [`run_dispatches`] with attention among `dispatches`, over `n_head` query heads (the step
/// uniform's split count follows them).
pub async fn run_attention_dispatches(
    gpu: &Gpu,
    dispatches: &[&Dispatch],
    step: StepInfo,
    step_buf: &wgpu::Buffer,
    n_head: u32,
) {
    gpu.queue.write_buffer(
        step_buf,
        0,
        bytemuck::bytes_of(&StepUniform::new(step, n_head)),
    );
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.record(&mut pass, &step);
        }
    }
    gpu.queue.submit([encoder.finish()]);
    gpu.finish()
        .await
        .expect("GPU work finishes without an error");
}

/// A step uniform buffer for tests.
pub fn step_buffer(gpu: &Gpu) -> wgpu::Buffer {
    gpu.uniform("step", &StepUniform::default())
}

/// A storage buffer holding `v`.
pub fn upload<T: bytemuck::Pod>(gpu: &Gpu, label: &str, v: &[T]) -> wgpu::Buffer {
    gpu.storage_init(label, bytemuck::cast_slice(v)).unwrap()
}

pub async fn read(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    gpu.read_f32(b, 0, n).await.unwrap()
}

/// Asserts that `got` holds the same `bytes` bytes as `want` (bit for bit; `case` names it).
pub async fn assert_same_bytes(
    gpu: &Gpu,
    got: &wgpu::Buffer,
    want: &wgpu::Buffer,
    bytes: u64,
    case: &str,
) {
    let words = (bytes / 4) as usize;
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let (got, want) = (read(gpu, got, words).await, read(gpu, want, words).await);
    assert!(bits(got) == bits(want), "{case}: the bytes differ");
}
