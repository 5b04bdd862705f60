//! The streaming-read ceiling (stream_read.wgsl): the bandwidth a plain WGSL kernel reaches reading
//! a large buffer on this adapter, timed with GPU timestamps. `tandem bench --profile` puts every
//! kernel's GB/s against it (shared/MEASURE.md, rule 6).

use bytemuck::{Pod, Zeroable};

#[cfg(test)]
use super::dispatch::KernelBinds;
use super::dispatch::{key, Cost, Dispatch, When};
use crate::gpu::{Binding, Gpu};
use crate::Result;

/// Threads of a stream_read workgroup (`WG` in stream_read.wgsl).
pub const STREAM_WG: u32 = 256;
/// Independent vec4<u32> loads in flight a thread (`UNROLL` in stream_read.wgsl).
pub const STREAM_UNROLL: u32 = 4;

const STREAM_LAYOUT: &[Binding] = &[Binding::Read, Binding::ReadWrite, Binding::Uniform];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct StreamParams {
    n: u32,
    _pad: [u32; 3],
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "stream_read",
    layout: STREAM_LAYOUT,
    unused: &[],
    uniforms: &[(2, size_of::<StreamParams>())],
    constants: &[("WG", STREAM_WG), ("UNROLL", STREAM_UNROLL)],
}];

/// Workgroups for reading `n` vec4s: each thread about 16 rounds of `STREAM_UNROLL` loads, so a
/// large buffer takes thousands of workgroups (every compute unit several times over), at most
/// one grid row.
pub fn stream_workgroups(n: u32) -> u32 {
    n.div_ceil(STREAM_WG * STREAM_UNROLL * 16)
        .clamp(1, super::dispatch::MAX_GRID)
}

/// Reads the first `n` vec4<u32> of `src` with `workgroups` workgroups, each thread writing the
/// wrapping sum of the words it read to `sums` (`workgroups * STREAM_WG` u32).
pub fn stream_read(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    sums: &wgpu::Buffer,
    n: u32,
    workgroups: u32,
) -> Result<Dispatch> {
    let pbuf = gpu.uniform("stream_read", &StreamParams { n, _pad: [0; 3] });
    Ok(Dispatch::one(
        gpu,
        "stream_read",
        &key("stream_read".into(), STREAM_LAYOUT),
        &[src, sums, &pbuf],
        When::Always,
        move |_| [workgroups, 1, 1],
    )?
    .costs(move |_| Cost::reads(n as f64 * 16.0)))
}

/// Bytes the ceiling reads on this adapter: 1 GiB, or 64 MiB on a CPU adapter, within the
/// largest storage binding (and buffer), rounded down to whole vec4s.
pub fn stream_bytes(gpu: &Gpu) -> u64 {
    let want: u64 = if gpu.info.device_type == wgpu::DeviceType::Cpu {
        64 << 20
    } else {
        1 << 30
    };
    // u32 indices into vec4s, with the last round's offsets: stay below 2^32 bytes.
    want.min(gpu.max_binding()).min(u32::MAX as u64) / 16 * 16
}

/// The adapter's streaming-read bandwidth in bytes per second: [`stream_read`] over a buffer of
/// [`stream_bytes`], timed with GPU timestamps, best of several runs after a warm-up. `None` where
/// the adapter has no timestamp queries.
pub async fn stream_read_bandwidth(gpu: &Gpu) -> Result<Option<f64>> {
    if !gpu.features.timestamps {
        return Ok(None);
    }
    const RUNS: u32 = 6;
    let bytes = stream_bytes(gpu);
    let n = (bytes / 16) as u32;
    let workgroups = stream_workgroups(n);
    let (src, sums, queries, resolved) = gpu
        .scoped("the streaming-read ceiling", || {
            let src = gpu.storage("stream_read", bytes)?;
            // Not zeros (which some memory systems compress): a word pattern, in 16 MiB writes.
            let piece: Vec<u32> = (0..(4u32 << 20))
                .map(|i| i.wrapping_mul(0x9E37_79B9))
                .collect();
            let piece: &[u8] = bytemuck::cast_slice(&piece);
            let mut at = 0;
            while at < bytes {
                let len = (bytes - at).min(piece.len() as u64);
                gpu.queue.write_buffer(&src, at, &piece[..len as usize]);
                at += len;
            }
            let sums = gpu.storage("stream_read sums", workgroups as u64 * STREAM_WG as u64 * 4)?;
            let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("stream_read"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * RUNS,
            });
            let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("stream_read"),
                size: 2 * RUNS as u64 * 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            Ok((src, sums, queries, resolved))
        })
        .await?;
    let d = stream_read(gpu, &src, &sums, n, workgroups)?;
    let s = super::StepInfo::new(1, 0, 1);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    // The warm-up, then the timed runs, one compute pass each.
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        d.record(&mut pass, &s);
    }
    for i in 0..RUNS {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                query_set: &queries,
                beginning_of_pass_write_index: Some(2 * i),
                end_of_pass_write_index: Some(2 * i + 1),
            }),
        });
        d.record(&mut pass, &s);
    }
    encoder.resolve_query_set(&queries, 0..2 * RUNS, &resolved, 0);
    gpu.submit(encoder.finish());
    let ticks: Vec<u64> =
        bytemuck::pod_collect_to_vec(&gpu.read(&resolved, 0, 2 * RUNS as u64 * 8).await?);
    let period = gpu.queue.get_timestamp_period() as f64;
    let best = ticks
        .chunks(2)
        .map(|t| t[1].saturating_sub(t[0]) as f64 * period)
        .filter(|&ns| ns > 0.0)
        .fold(f64::INFINITY, f64::min);
    Ok(best.is_finite().then(|| bytes as f64 / (best * 1e-9)))
}
