//! Every kernel variant parses and validates with naga without a GPU, under the portable
//! capabilities (no shader-f16, no subgroups): the set every WebGPU adapter runs. That is naga's
//! `Capabilities::default()` plus SHADER_FLOAT16_IN_FLOAT32, naga's name for core WGSL's
//! pack/unpack2x16float (the f16 scale decode); wgpu grants it with the SHADER_F16_IN_F32
//! downlevel flag, which every WebGPU implementation has (wgpu-types notes Mesa Vulkan drivers
//! without shaderFloat16 lack it).

use super::shaders::SHADERS;

#[test]
fn every_variant_validates_with_naga() {
    for q in [
        "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k",
    ] {
        for k in ["matvec", "matmul", "matvec_glu", "embed"] {
            let name = format!("{k}_{q}");
            assert!(
                SHADERS.iter().any(|(n, _)| *n == name),
                "variant {name} is built"
            );
        }
    }
    for (name, source) in SHADERS {
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default()
                | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
    }
}

#[test]
fn every_variant_stays_within_browser_limits() {
    // WebGPU's defaults in browsers here: 10 storage buffers per stage, 256 invocations.
    for (name, source) in SHADERS {
        let storage = source.matches("var<storage").count();
        assert!(storage <= 10, "{name}: {storage} storage buffers");
        let module = naga::front::wgsl::parse_str(source).unwrap();
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
