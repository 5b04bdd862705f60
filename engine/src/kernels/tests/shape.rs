//! The matvec shape policy (`kernels::shape`): which rows per workgroup a matvec takes, and
//! where it takes the subgroup variant.

use super::mat::{random_weight, weight};
use super::{gpu, step_buffer};
use crate::kernels::{self, MatOpts, MatvecShape};
use crate::quant::GgmlType;

async fn matvec_rows_per_workgroup_must_split_the_workgroup() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let (bytes, _) = random_weight(GgmlType::Q8_0, 4, 64, 0);
    let gw = weight(&gpu, GgmlType::Q8_0, &bytes, 4, 64, &[]);
    for bad in [0, 3, 512] {
        let opts = MatOpts {
            matvec: Some(MatvecShape {
                rows: bad,
                per_thread: 1,
                subgroups: true,
                int8: false,
            }),
            ..Default::default()
        };
        let err = kernels::mat(&gpu, &gw, &dummy, &dummy, &step, &dummy, &opts)
            .err()
            .expect("rejected");
        assert!(err.to_string().contains("rows per workgroup"), "{err}");
    }
}

/// Where the adapter has subgroups, the shapes the tests run take the subgroup variant where a
/// row's threads are whole subgroups and the portable one elsewhere.
async fn matvec_subgroup_variant_where_it_fits() {
    let gpu = gpu().await;
    let shape = |rows, subgroups| MatvecShape {
        rows,
        per_thread: 1,
        subgroups,
        int8: false,
    };
    if !gpu.features.subgroups {
        eprintln!(
            "matvec: no subgroups on {}: portable variants only",
            gpu.info.name
        );
        assert!(!shape(1, true).uses_subgroups(&gpu));
        return;
    }
    let max = gpu.info.subgroup_max_size;
    eprintln!(
        "matvec: subgroups of {}..{max} on {}",
        gpu.info.subgroup_min_size, gpu.info.name
    );
    // A whole workgroup per row always fits (subgroups hold at most 128 invocations).
    assert!(shape(1, true).uses_subgroups(&gpu));
    assert!(!shape(1, false).uses_subgroups(&gpu));
    // Rows of exactly the largest subgroup fit; rows of half of it do not.
    assert!(shape(256 / max, true).uses_subgroups(&gpu));
    assert!(!shape(512 / max, true).uses_subgroups(&gpu));
    assert!(!shape(256, true).uses_subgroups(&gpu));
}

/// On a GPU, a matrix's rows per workgroup leave at most half of a row's threads without a unit,
/// and the matrix at least 256 workgroups where its rows allow.
async fn matvec_rows_for_a_gpu_matrix() {
    use crate::kernels::shape::gpu_matvec_rows;
    // 2048 or 768 wide (Q4_K: 128 or 48 units): 64 threads a row, as for the adapter.
    assert_eq!(gpu_matvec_rows(4, 6144, 128), 4);
    assert_eq!(gpu_matvec_rows(4, 2048, 48), 4);
    // Q4_K 256 wide: 16 units, 32 threads a row (8 rows a workgroup).
    assert_eq!(gpu_matvec_rows(4, 2048, 16), 8);
    // 4 units: 8 threads a row; but a matrix of few rows keeps 256 workgroups first.
    assert_eq!(gpu_matvec_rows(4, 1 << 16, 4), 32);
    assert_eq!(gpu_matvec_rows(4, 1024, 4), 4);
    // A 128-expert router: one row a workgroup.
    assert_eq!(gpu_matvec_rows(4, 128, 256), 1);
    // moe_down on the Qwen3-30B-A3B shape (MatvecShape::for_experts): 2048 rows, each over the
    // 8 routes' 768-wide Q4_K rows (192 units): 512 workgroups of 4 rows.
    assert_eq!(gpu_matvec_rows(4, 2048, 8 * 768 / 32), 4);
}

/// The pair kernel takes two chunks of different types that both take the `_q8` units, where the
/// second chunk's workgroups read at most 32 KiB: the attention projections' V of the
/// Qwen3-30B-A3B shape (Q6_K, 2048 columns) in 16-row workgroups, not Qwen3-8B's (4096).
async fn pair_where_the_second_chunk_fits() {
    use crate::kernels::matvec_pair::pair_fits;
    let (q4, q6) = (GgmlType::Q4K, GgmlType::Q6K);
    let shape = MatvecShape {
        rows: 4,
        per_thread: 4,
        subgroups: true,
        int8: true,
    };
    assert!(pair_fits(shape, q4, q6, 2048));
    assert!(!pair_fits(shape, q4, q6, 4096));
    assert!(
        !pair_fits(shape, q4, q4, 2048),
        "one type: one dispatch already"
    );
    let f32_units = MatvecShape {
        int8: false,
        ..shape
    };
    assert!(
        !pair_fits(f32_units, q4, q6, 2048),
        "the pair has only `_q8` units"
    );
}

/// On a GPU, the small passes' f32 kernel gives a row about as many threads as it has units of 32
/// weights (at least 32), and a workgroup at most 8 KiB of weights where fewer rows allow.
async fn batch_rows_for_a_gpu_matrix() {
    use crate::kernels::shape::gpu_batch_rows;
    let bytes = |ty: GgmlType, n_cols: u32| ty.bytes_for(n_cols as u64).unwrap();
    // SmolLM2-135M (Q4_1): its 576-wide rows (18 units) take 32 threads, 8 rows a workgroup;
    // the FFN's 1536-wide down rows (48 units) take 64.
    assert_eq!(gpu_batch_rows(576, bytes(GgmlType::Q4_1, 576)), 8);
    assert_eq!(gpu_batch_rows(1536, bytes(GgmlType::Q4_1, 1536)), 4);
    // The demo MTP model's 768-wide Q8_0 down rows: 8 of 816 bytes fit.
    assert_eq!(gpu_batch_rows(768, bytes(GgmlType::Q8_0, 768)), 8);
    // A 128-expert router's 2048-wide f32 rows, 8 KiB each: one row a workgroup.
    assert_eq!(gpu_batch_rows(2048, bytes(GgmlType::F32, 2048)), 1);
    // Rows of 8192 and more: the whole workgroup.
    assert_eq!(gpu_batch_rows(16384, bytes(GgmlType::Q4K, 16384)), 1);
}

super::gpu_tests!(
    batch_rows_for_a_gpu_matrix,
    matvec_rows_for_a_gpu_matrix,
    pair_where_the_second_chunk_fits,
    matvec_subgroup_variant_where_it_fits,
    matvec_rows_per_workgroup_must_split_the_workgroup
);
