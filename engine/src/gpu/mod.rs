//! The GPU: adapter and device with the limits and features Tandem asks for, buffers, the kernel
//! pipeline cache, and the readback of results.

mod memory;
mod oneshot;
mod pipelines;
pub mod shaders;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use crate::{Error, Result};

pub use pipelines::{layout_with, Binding, PipelineKey};

/// Optional adapter capabilities that select faster kernel variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFeatures {
    pub f16: bool,
    pub subgroups: bool,
    pub timestamps: bool,
    /// WGSL's packed 4x8 integer dot product (`dot4I8Packed`; the language extension
    /// packed_4x8_integer_dot_product): the `_q8` matrix products (common/q8_dot.wgsl). naga
    /// always has it (a polyfill where the device lacks the instruction); browsers list it.
    pub int8_dot: bool,
    /// Cooperative matrices (tensor cores) with 16x16x16 f16 x f16 -> f32 fragments, f16 and
    /// 32-wide subgroups (a `tandem:coop` kernel's workgroup is four such subgroups): the prefill
    /// matmul on matrix units (matmul_coop.wgsl). wgpu's native-only extension; no browser has it.
    pub coop: bool,
}

#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Take the adapter's software fallback (lavapipe, SwiftShader) even when a GPU exists.
    pub force_fallback: bool,
    /// Turn off f16 and subgroup kernels even where the adapter has them (to test the fallbacks).
    pub portable_only: bool,
}

/// Whether `adapter` can run the `tandem:coop` kernels ([`GpuFeatures::coop`]): wgpu's
/// cooperative matrices with a 16x16x16 f16 x f16 -> f32 fragment, on subgroups exactly 32 wide.
fn has_coop_fragments(adapter: &wgpu::Adapter) -> bool {
    use wgpu::wgt::CooperativeScalarType as T;
    let info = adapter.get_info();
    adapter
        .features()
        .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        && info.subgroup_min_size == 32
        && info.subgroup_max_size == 32
        && adapter.cooperative_matrix_properties().iter().any(|c| {
            (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                && c.ab_type == T::F16
                && c.cr_type == T::F32
        })
}

/// What the host has submitted to the GPU and read back from it ([`Gpu::submit`],
/// [`Gpu::map_staging`]): tests hold a decode step to one submit and the sampled id with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub submits: u64,
    pub reads: u64,
    pub read_bytes: u64,
}

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub features: GpuFeatures,
    /// Bytes of the device's memory where the backend tells them (a discrete GPU's VRAM, what an
    /// integrated one may use; gpu/memory.rs); `None` for software adapters and in the browser
    /// (WebGPU has no such query, wgpu none of its own).
    pub memory: Option<u64>,
    layouts: Mutex<HashMap<&'static [Binding], wgpu::BindGroupLayout>>,
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<Mutex<Option<String>>>,
    /// [`Traffic`]'s counters.
    submits: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

impl Gpu {
    /// Opens the best adapter (or the software fallback) with every limit it offers raised to its
    /// maximum, so that models as large as the adapter allows can load.
    pub async fn new(opts: &GpuOptions) -> Result<Gpu> {
        crate::platform::quiet_display_probe();
        // The primary backends (Vulkan, Metal, DX12, the browser's WebGPU) unless WGPU_BACKEND
        // names others; GL (no f16, no subgroups, few storage buffers) only where none of them
        // has an adapter.
        let asked = wgpu::Backends::from_env();
        let mut tries = vec![asked.unwrap_or(wgpu::Backends::PRIMARY)];
        if asked.is_none() {
            tries.push(wgpu::Backends::GL);
        }
        let mut adapter = None;
        let mut int8_dot = false;
        let mut first_error = None;
        for backends in tries {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
            desc.backends = backends;
            let instance = wgpu::Instance::new(desc);
            match instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    force_fallback_adapter: opts.force_fallback,
                    compatible_surface: None,
                    apply_limit_buckets: false,
                })
                .await
            {
                Ok(a) => {
                    adapter = Some(a);
                    int8_dot = crate::platform::wgsl_has_packed_dot(&instance);
                    break;
                }
                Err(e) => {
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        let adapter = adapter.ok_or_else(|| Error::NoAdapter(first_error.unwrap_or_default()))?;
        let have = adapter.features();
        let mut required = wgpu::Features::empty();
        let mut features = GpuFeatures {
            int8_dot,
            ..GpuFeatures::default()
        };
        if have.contains(wgpu::Features::SHADER_F16) && !opts.portable_only {
            required |= wgpu::Features::SHADER_F16;
            features.f16 = true;
        }
        if have.contains(wgpu::Features::SUBGROUP) && !opts.portable_only {
            required |= wgpu::Features::SUBGROUP;
            features.subgroups = true;
        }
        if have.contains(wgpu::Features::TIMESTAMP_QUERY) {
            required |= wgpu::Features::TIMESTAMP_QUERY;
            features.timestamps = true;
            if have.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES) {
                required |= wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
            }
        }
        if features.f16 && features.subgroups && has_coop_fragments(&adapter) {
            required |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            features.coop = true;
        }
        let limits = adapter.limits();
        let want_subgroups = !opts.portable_only && !features.subgroups;
        let (device, queue) =
            crate::platform::request_device_with_subgroups(want_subgroups, || {
                adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("tandem"),
                    required_features: required,
                    required_limits: limits.clone(),
                    // SAFETY: the one experimental feature asked for is cooperative matrices,
                    // used only by the `tandem:coop` kernels, whose tests run them against the
                    // CPU reference on every adapter that has them.
                    experimental_features: if features.coop {
                        unsafe { wgpu::ExperimentalFeatures::enabled() }
                    } else {
                        wgpu::ExperimentalFeatures::disabled()
                    },
                    memory_hints: wgpu::MemoryHints::Performance,
                    trace: wgpu::Trace::Off,
                })
            })
            .await
            .map_err(|e| Error::Gpu(format!("requesting the device failed: {e}")))?;
        if want_subgroups && crate::platform::browser_device_has_subgroups(&device) {
            features.subgroups = true;
        }
        let lost = Arc::new(Mutex::new(None));
        let lost_in_cb = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            let why = match reason {
                wgpu::DeviceLostReason::Destroyed => "destroyed".to_string(),
                other => format!("{other:?}"),
            };
            *lost_in_cb.lock().unwrap() = Some(if message.is_empty() {
                why
            } else {
                format!("{why}: {message}")
            });
        });
        // Errors outside an error scope are kept and reported by the next `check_lost`, rather
        // than wgpu's default of panicking.
        let uncaptured = Arc::new(Mutex::new(None));
        let uncaptured_in_cb = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = uncaptured_in_cb.lock().unwrap();
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        Ok(Gpu {
            device,
            queue,
            info: adapter.get_info(),
            memory: memory::device_memory(&adapter),
            limits,
            features,
            layouts: Mutex::new(HashMap::new()),
            pipelines: Mutex::new(HashMap::new()),
            lost,
            uncaptured,
            submits: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
        })
    }

    /// Submits `commands`; the engine's every submit goes through here, so [`Gpu::traffic`]
    /// counts it.
    pub fn submit(&self, commands: wgpu::CommandBuffer) -> wgpu::SubmissionIndex {
        self.submits.fetch_add(1, Ordering::Relaxed);
        self.queue.submit([commands])
    }

    /// Submits and readbacks so far.
    pub fn traffic(&self) -> Traffic {
        Traffic {
            submits: self.submits.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
        }
    }

    /// One line describing the adapter, for logs and `info`.
    pub fn describe(&self) -> String {
        let subgroups = if self.features.subgroups {
            format!(
                "subgroups {}-{}",
                self.info.subgroup_min_size, self.info.subgroup_max_size
            )
        } else {
            "subgroups off".into()
        };
        let memory = match self.memory {
            Some(bytes) => format!("memory {} MiB, ", bytes >> 20),
            None => String::new(),
        };
        format!(
            "{} ({:?}, {:?}); {memory}max storage binding {} MiB, max buffer {} MiB; f16 {}, {subgroups}, int8 dot {}, coop matrices {}",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.limits.max_storage_buffer_binding_size >> 20,
            self.limits.max_buffer_size >> 20,
            if self.features.f16 { "on" } else { "off" },
            if self.features.int8_dot { "on" } else { "off" },
            if self.features.coop { "on" } else { "off" },
        )
    }

    /// Largest byte size one storage binding may have (tensors above it are split by rows).
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Why the device is lost, if it is: then every GPU operation fails and only a new device
    /// (a new [`Gpu`], the model loaded again) can go on.
    pub fn lost(&self) -> Option<String> {
        // A destroyed device reports its loss from the next poll; let that happen now.
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.lost.lock().unwrap().clone()
    }

    /// `e`, or [`Error::DeviceLost`] where the device is lost: whatever a failing operation
    /// reports then, the loss is what the caller must hear of.
    fn lost_or(&self, e: Error) -> Error {
        match self.lost() {
            Some(msg) => Error::DeviceLost(msg),
            None => e,
        }
    }

    /// Reports a lost device, or the first GPU error raised outside an error scope.
    pub fn check_lost(&self) -> Result<()> {
        if let Some(msg) = self.lost.lock().unwrap().clone() {
            return Err(Error::DeviceLost(msg));
        }
        if let Some(msg) = self.uncaptured.lock().unwrap().take() {
            return Err(Error::Gpu(msg));
        }
        Ok(())
    }

    /// A storage buffer of `size` bytes (rounded up to 4, at least 16 so it can stand in for any
    /// optional vec4 binding), zero-initialised.
    pub fn storage(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        let size = size.max(16).next_multiple_of(4);
        self.check_size(label, size)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        }))
    }

    /// A storage buffer holding `data` (padded with zeros to a multiple of 4 bytes).
    pub fn storage_init(&self, label: &str, data: &[u8]) -> Result<wgpu::Buffer> {
        self.check_size(label, data.len() as u64)?;
        let buffer = self.storage(label, data.len() as u64)?;
        let whole = data.len() / 4 * 4;
        if whole > 0 {
            self.queue.write_buffer(&buffer, 0, &data[..whole]);
        }
        if whole < data.len() {
            let mut tail = [0u8; 4];
            tail[..data.len() - whole].copy_from_slice(&data[whole..]);
            self.queue.write_buffer(&buffer, whole as u64, &tail);
        }
        Ok(buffer)
    }

    /// A uniform buffer holding `data` (a `#[repr(C)]` Pod struct), writable later with `write`.
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, data: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(data),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }

    fn check_size(&self, label: &str, size: u64) -> Result<()> {
        if size > self.limits.max_buffer_size {
            return Err(Error::Limits {
                what: format!("a buffer for {label}"),
                need: size,
                have: self.limits.max_buffer_size,
            });
        }
        Ok(())
    }

    /// Runs `f` inside a validation and an out-of-memory error scope, turning what the GPU reports
    /// into an error instead of a panic.
    pub async fn scoped<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = f();
        let validation = validation.pop().await;
        let oom = oom.pop().await;
        self.scope_result(what, result, oom, validation)
    }

    /// [`Gpu::scoped`] for work that awaits (a weight upload fed by a download).
    pub async fn scoped_async<T>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = work.await;
        let validation = validation.pop().await;
        let oom = oom.pop().await;
        self.scope_result(what, result, oom, validation)
    }

    /// What [`Gpu::scoped`] returns: the work's error, else what the scopes caught, else a lost
    /// device; any of them a [`Error::DeviceLost`] where the device is lost.
    fn scope_result<T>(
        &self,
        what: &str,
        result: Result<T>,
        oom: Option<wgpu::Error>,
        validation: Option<wgpu::Error>,
    ) -> Result<T> {
        let value = result.map_err(|e| self.lost_or(e))?;
        if let Some(e) = oom {
            let e = Error::Gpu(format!("{what}: out of GPU memory: {e}"));
            return Err(self.lost_or(e));
        }
        if let Some(e) = validation {
            return Err(self.lost_or(Error::Gpu(format!("{what}: {e}"))));
        }
        self.check_lost()?;
        Ok(value)
    }

    /// Waits until the GPU has finished the work submitted so far; reports a GPU error raised
    /// outside an error scope meanwhile.
    pub async fn finish(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.queue.on_submitted_work_done(move || tx.send(()));
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.lost_or(Error::Gpu(format!("waiting for the GPU: {e}"))))?;
        rx.await;
        self.check_lost()
    }

    /// Copies `size` bytes of `buffer` from `offset` back to the host.
    pub async fn read(&self, buffer: &wgpu::Buffer, offset: u64, size: u64) -> Result<Vec<u8>> {
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
        let copied = self.submit(encoder.finish());
        self.map_staging(&staging, size, copied).await
    }

    /// Maps a MAP_READ buffer whose copy went out in submission `copied`, and returns its first
    /// `size` bytes. Natively it waits for that submission only, not for work submitted after it
    /// (a decode pass run ahead keeps the GPU busy meanwhile).
    pub async fn map_staging(
        &self,
        staging: &wgpu::Buffer,
        size: u64,
        copied: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(size, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, 0..size, move |r| tx.send(r));
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(copied),
                timeout: None,
            })
            .map_err(|e| self.lost_or(Error::Gpu(format!("waiting for the GPU: {e}"))))?;
        #[cfg(target_arch = "wasm32")]
        let _ = copied;
        rx.await
            .map_err(|e| self.lost_or(Error::Gpu(format!("mapping a buffer: {e}"))))?;
        self.check_lost()?;
        let data = staging
            .get_mapped_range(0..size)
            .map_err(|e| self.lost_or(Error::Gpu(format!("mapping a buffer: {e:?}"))))?
            .to_vec();
        staging.unmap();
        Ok(data)
    }

    pub async fn read_f32(&self, buffer: &wgpu::Buffer, offset: u64, n: usize) -> Result<Vec<f32>> {
        let bytes = self.read(buffer, offset, n as u64 * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
