//! Every kernel variant parses and validates with naga without a GPU. The portable variants
//! validate under the portable capabilities (no shader-f16, no subgroups): the set every WebGPU
//! adapter runs. That is naga's `Capabilities::default()` plus SHADER_FLOAT16_IN_FLOAT32, naga's
//! name for core WGSL's pack/unpack2x16float (the f16 scale decode); wgpu grants it with the
//! SHADER_F16_IN_F32 downlevel flag, which every WebGPU implementation has (wgpu-types notes Mesa
//! Vulkan drivers without shaderFloat16 lack it). The `_sg` variants (build.rs,
//! `tandem:subgroups`) validate with the subgroup capability added, as naga takes them natively
//! (`shaders::source_for`); the `tandem:coop` kernels with f16, subgroups and cooperative matrices,
//! the capabilities `GpuFeatures::coop` stands for.

use super::shaders::{source_for, ENABLE_COOP, ENABLE_SUBGROUPS, SHADERS};
use crate::quant::TYPES;

const NATIVE: wgpu::Backend = wgpu::Backend::Vulkan;

fn portable_caps() -> naga::valid::Capabilities {
    naga::valid::Capabilities::default() | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32
}

#[test]
fn every_variant_validates_with_naga() {
    let qtypes: Vec<&str> = TYPES.iter().filter_map(|t| Some(t.gpu?.wgsl)).collect();
    for &q in &qtypes {
        for k in [
            "matvec",
            "matvec_sg",
            "matmul",
            "matmul_coop",
            "matvec_batch",
            "matvec_batch_sg",
            "matvec_glu",
            "matvec_glu_sg",
            "embed",
        ] {
            let name = match k.strip_suffix("_sg") {
                Some(base) => format!("{base}_{q}_sg"),
                None => format!("{k}_{q}"),
            };
            assert!(
                SHADERS.iter().any(|(n, _)| *n == name),
                "variant {name} is built"
            );
        }
    }
    let mut n_sg = 0;
    for (name, full) in SHADERS {
        let sg = name.ends_with("_sg");
        let coop = full.starts_with(ENABLE_COOP);
        let source = source_for(name, NATIVE).unwrap();
        let mut caps = portable_caps();
        if sg {
            n_sg += 1;
            assert!(full.starts_with(ENABLE_SUBGROUPS), "{name}: enable first");
            let base = name.strip_suffix("_sg").unwrap();
            assert!(
                SHADERS.iter().any(|(n, _)| *n == base),
                "{name}: its portable variant {base} is built too"
            );
            caps |= naga::valid::Capabilities::SUBGROUP;
        } else if coop {
            caps |= naga::valid::Capabilities::SUBGROUP
                | naga::valid::Capabilities::SHADER_FLOAT16
                | naga::valid::Capabilities::COOPERATIVE_MATRIX;
        } else {
            assert!(!full.contains("enable "), "{name}: portable");
        }
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        if sg || coop {
            // Subgroup and cooperative-matrix operations need their capabilities: the portable
            // set rejects the variant.
            assert!(
                naga::valid::Validator::new(naga::valid::ValidationFlags::all(), portable_caps())
                    .validate(&module)
                    .is_err(),
                "{name}: uses subgroup or cooperative-matrix operations"
            );
        }
    }
    assert!(
        n_sg >= 2 * qtypes.len(),
        "subgroup variants of matvec and matvec_glu"
    );
}

/// build.rs builds the per-qtype kernels for every `common/quant_<q>.wgsl` it finds: each is a
/// GPU type of `quant::TYPES`, and each GPU type has one. The decode unit the host assumes is the
/// one its matvec has.
#[test]
fn every_quant_helper_is_a_gpu_type() {
    for (name, _) in SHADERS {
        let Some(q) = name.strip_prefix("matmul_") else {
            continue;
        };
        if q.starts_with("coop_") {
            continue;
        }
        assert!(
            TYPES.iter().any(|t| t.gpu.is_some_and(|g| g.wgsl == q)),
            "wgsl/common/quant_{q}.wgsl has no GPU type in quant::TYPES"
        );
    }
    for t in TYPES {
        if let Some(g) = t.gpu {
            let variant = format!("matmul_{}", g.wgsl);
            assert!(
                SHADERS.iter().any(|(n, _)| *n == variant),
                "{}: no wgsl/common/quant_{}.wgsl",
                t.name,
                g.wgsl
            );
            let matvec = source_for(&format!("matvec_{}", g.wgsl), NATIVE).unwrap();
            let unit = format!("const UNIT: u32 = {}u;", g.decode_unit);
            assert!(matvec.contains(&unit), "{}: matvec lacks `{unit}`", t.name);
        }
    }
}

/// Every variant translates to SPIR-V, as wgpu's Vulkan backend asks naga to: the writer has
/// limits its validator does not check (the cooperative-matrix loads' pointers, for one), and
/// lavapipe, which runs the kernel tests here, lacks some capabilities (cooperative matrices).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn every_variant_translates_to_spirv() {
    let caps = naga::valid::Capabilities::all();
    for (name, _) in SHADERS {
        let source = source_for(name, NATIVE).unwrap();
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        // The overrides at their defaults, as a pipeline without constants would take them.
        let (module, info) = naga::back::pipeline_constants::process_overrides(
            &module,
            &info,
            Some((naga::ShaderStage::Compute, "main")),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{name}: overrides: {e}"));
        let options = naga::back::spv::Options {
            lang_version: (1, 3),
            ..Default::default()
        };
        let pipeline = naga::back::spv::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: "main".into(),
        };
        naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
            .unwrap_or_else(|e| panic!("{name}: SPIR-V: {e}"));
    }
}

/// naga 30 rejects `enable subgroups;` (known, not yet implemented), which is why
/// `shaders::source_for` drops it for native backends. When this fails, naga takes the directive:
/// keep it for every backend (a later naga may require it).
#[test]
fn naga_still_rejects_enable_subgroups() {
    let (name, full) = SHADERS
        .iter()
        .find(|(n, _)| n.ends_with("_sg"))
        .expect("a subgroup variant");
    let err = naga::front::wgsl::parse_str(full).expect_err(name);
    let msg = err.emit_to_string(full);
    assert!(msg.contains("not yet implemented"), "{name}: {msg}");
}

#[test]
fn every_variant_stays_within_browser_limits() {
    // WebGPU's defaults in browsers here: 10 storage buffers per stage, 256 invocations, 16 KiB
    // of workgroup memory (every workgroup variable declared, override-sized ones at their
    // defaults: a bound on what an entry point uses). The `tandem:coop` kernels never run in a
    // browser (no browser has cooperative matrices) and take more.
    for (name, full) in SHADERS {
        if full.starts_with(ENABLE_COOP) {
            continue;
        }
        let source = source_for(name, NATIVE).unwrap();
        let storage = source.matches("var<storage").count();
        assert!(storage <= 10, "{name}: {storage} storage buffers");
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let workgroup_bytes: u32 = module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .map(|(_, v)| {
                module.types[v.ty]
                    .inner
                    .try_size(module.to_ctx())
                    .unwrap_or(u32::MAX)
            })
            .sum();
        assert!(
            workgroup_bytes <= 16384,
            "{name}: {workgroup_bytes} bytes of workgroup memory"
        );
        for ep in &module.entry_points {
            let [x, y, z] = ep.workgroup_size;
            // Override-sized workgroups report 0 here; their defaults are checked in the source.
            assert!(
                x.max(1) * y.max(1) * z.max(1) <= 256,
                "{name}: workgroup {x}x{y}x{z}"
            );
        }
    }
}
