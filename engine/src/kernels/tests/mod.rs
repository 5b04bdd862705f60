//! Kernel tests: each kernel against a plain CPU reference on seeded random data, with shapes of
//! 1, odd sizes and sizes that do not fill a workgroup. They run on whatever adapter wgpu finds
//! (lavapipe in CI); `TANDEM_TEST_PORTABLE=1` forces the kernels without f16 and subgroups.

use std::sync::{Arc, OnceLock};

use crate::gpu::{Gpu, GpuOptions};

/// One GPU for all kernel tests of this process.
pub fn gpu() -> Arc<Gpu> {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        let opts = GpuOptions {
            force_fallback: false,
            portable_only: std::env::var_os("TANDEM_TEST_PORTABLE").is_some(),
        };
        Arc::new(pollster::block_on(Gpu::new(&opts)).expect("a GPU adapter (lavapipe in CI)"))
    })
    .clone()
}

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

mod attention;
mod mat;
mod moe;
mod sample;

use super::{Dispatch, StepInfo, StepUniform};

/// Records `dispatches` for the pass shape `step` in one compute pass and waits for them.
pub fn run_dispatches(
    gpu: &Gpu,
    dispatches: &[&Dispatch],
    step: StepInfo,
    step_buf: &wgpu::Buffer,
) {
    gpu.queue
        .write_buffer(step_buf, 0, bytemuck::bytes_of(&StepUniform::from(step)));
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.record(&mut pass, &step);
        }
    }
    gpu.queue.submit([encoder.finish()]);
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("GPU work finishes");
    gpu.check_lost().expect("no GPU error");
}

/// A step uniform buffer for tests.
pub fn step_buffer(gpu: &Gpu) -> wgpu::Buffer {
    gpu.uniform("step", &StepUniform::default())
}

pub fn read(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    pollster::block_on(gpu.read_f32(b, 0, n)).unwrap()
}
