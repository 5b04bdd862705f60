//! The streaming-read ceiling's kernel reads every word: its per-thread sums add up to the CPU's
//! sum, for sizes that fill whole rounds, leave a tail, and do not give every thread a load.

use super::{gpu, run_dispatches, step_buffer, upload};
use crate::kernels::stream::{stream_read, stream_read_bandwidth, stream_workgroups, STREAM_WG};
use crate::kernels::StepInfo;

async fn stream_read_sums_every_word() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let words: Vec<u32> = (0..4 * 40_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u32
        })
        .collect();
    let src = upload(&gpu, "src", &words);
    // (vec4s, workgroups): whole rounds; a tail; fewer vec4s than threads; the default grid.
    for (n, wgs) in [
        (32_768u32, 8u32),
        (40_000, 3),
        (100, 2),
        (40_000, stream_workgroups(40_000)),
    ] {
        let threads = (wgs * STREAM_WG) as usize;
        let sums = gpu.storage("sums", threads as u64 * 4).unwrap();
        let d = stream_read(&gpu, &src, &sums, n, wgs).unwrap();
        let s = StepInfo::new(1, 0, 1);
        assert_eq!((d.cost)(&s).bytes, n as f64 * 16.0);
        run_dispatches(&gpu, &[&d], s, &step).await;
        let got: Vec<u32> =
            bytemuck::pod_collect_to_vec(&gpu.read(&sums, 0, threads as u64 * 4).await.unwrap());
        let got = got.iter().fold(0u32, |a, &b| a.wrapping_add(b));
        let want = words[..4 * n as usize]
            .iter()
            .fold(0u32, |a, &b| a.wrapping_add(b));
        assert_eq!(got, want, "stream_read of {n} vec4s in {wgs} workgroups");
    }
}

/// The timed ceiling runs where the adapter has timestamps and gives a positive figure.
async fn stream_read_bandwidth_measures() {
    let gpu = gpu().await;
    match stream_read_bandwidth(&gpu).await.unwrap() {
        Some(b) => assert!(b > 0.0 && b.is_finite(), "{b}"),
        None => {
            assert!(!gpu.features.timestamps);
            eprintln!("stream_read: no timestamps on {}", gpu.info.name);
        }
    }
}

super::gpu_tests!(stream_read_sums_every_word, stream_read_bandwidth_measures);
