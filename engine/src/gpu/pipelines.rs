//! Kernel pipelines: bind-group layouts from a kernel's list of bindings, the compiled
//! pipeline of each (variant, override constants), cached on the [`Gpu`], and bind groups.

use super::{shaders, Gpu};
use crate::{Error, Result};

/// What a kernel's bind group holds, binding by binding (binding i = entry i).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// `var<storage, read>`
    Read,
    /// `var<storage, read_write>`
    ReadWrite,
    /// `var<uniform>`
    Uniform,
}

/// The layout `base` followed by `extra` (`N`: their lengths together), for a kernel that binds
/// what another does and more.
pub const fn layout_with<const N: usize>(base: &[Binding], extra: &[Binding]) -> [Binding; N] {
    assert!(
        base.len() + extra.len() == N,
        "N is the two layouts' lengths together"
    );
    let mut out = [Binding::Read; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < base.len() {
            base[i]
        } else {
            extra[i - base.len()]
        };
        i += 1;
    }
    out
}

/// A compute pipeline: the expanded WGSL variant and its override constants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// The variant name from `shaders::SHADERS`, e.g. `matvec_q4_k`.
    pub shader: String,
    /// Override constants, by name (WGSL `override`), as integers.
    pub constants: Vec<(&'static str, u32)>,
    pub layout: &'static [Binding],
}

impl Gpu {
    pub fn layout(&self, bindings: &'static [Binding]) -> wgpu::BindGroupLayout {
        let mut layouts = self.layouts.lock().unwrap();
        layouts
            .entry(bindings)
            .or_insert_with(|| {
                let entries: Vec<_> = bindings
                    .iter()
                    .enumerate()
                    .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                        binding: i as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: match b {
                                Binding::Read => {
                                    wgpu::BufferBindingType::Storage { read_only: true }
                                }
                                Binding::ReadWrite => {
                                    wgpu::BufferBindingType::Storage { read_only: false }
                                }
                                Binding::Uniform => wgpu::BufferBindingType::Uniform,
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                self.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: None,
                        entries: &entries,
                    })
            })
            .clone()
    }

    /// The pipeline for `key`, compiled on first use. Compile errors surface through the error
    /// scope the caller holds (see [`Gpu::scoped`]); an unknown variant name is an error here.
    pub fn pipeline(&self, key: &PipelineKey) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.pipelines.lock().unwrap().get(key) {
            return Ok(p.clone());
        }
        let source =
            shaders::source_for(&key.shader, self.info.backend).ok_or_else(|| Error::Shader {
                kernel: key.shader.clone(),
                message: "no such kernel variant".into(),
            })?;
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&key.shader),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        // SAFETY: every kernel indexes inside its bindings by construction (the host checks each
        // binding's size against the shapes it dispatches, and the kernel tests run every
        // variant on random shapes natively and, with the checks, in Chromium). Natively the
        // checks' clamps cost the decode matvecs a tenth of their speed on the H200
        // (bench/RESULTS.md); the browser keeps them whatever is asked here.
        let module = unsafe {
            self.device
                .create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
        };
        let layout = self.layout(key.layout);
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(&key.shader),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let constants: Vec<(&str, f64)> =
            key.constants.iter().map(|(k, v)| (*k, *v as f64)).collect();
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&key.shader),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: None,
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        self.pipelines
            .lock()
            .unwrap()
            .insert(key.clone(), pipeline.clone());
        Ok(pipeline)
    }

    pub fn bind_group(
        &self,
        layout: &'static [Binding],
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        assert_eq!(layout.len(), buffers.len(), "bind group arity");
        let layout = self.layout(layout);
        let entries: Vec<_> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        })
    }

    /// Compute pipelines created so far (load progress counts them).
    pub fn pipeline_count(&self) -> usize {
        self.pipelines.lock().unwrap().len()
    }
}
