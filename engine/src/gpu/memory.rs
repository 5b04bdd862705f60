//! How much memory the device has, where the backend tells it (wgpu has no query of its own):
//! Vulkan's memory heaps, DX12's adapter description, Metal's recommended working set. `None`
//! in the browser (WebGPU states no memory) and for software adapters, whose sizes are nominal
//! (lavapipe states a 2 GiB heap and allocates from the host).

#[cfg(not(target_arch = "wasm32"))]
pub(super) fn device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    let info = adapter.get_info();
    match info.backend {
        _ if info.device_type == wgpu::DeviceType::Cpu => None,
        #[cfg(not(target_vendor = "apple"))]
        wgpu::Backend::Vulkan => vulkan(adapter, &info),
        #[cfg(windows)]
        wgpu::Backend::Dx12 => dx12(adapter, &info),
        #[cfg(target_vendor = "apple")]
        wgpu::Backend::Metal => metal(adapter),
        _ => None,
    }
}

#[cfg(target_arch = "wasm32")]
pub(super) fn device_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}

/// A discrete GPU's largest device-local heap (its VRAM); on an integrated one all its heaps,
/// since it shares the host's memory, and a driver may show only a small carve-out as
/// device-local (AMD APUs).
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
fn vulkan(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> Option<u64> {
    // SAFETY: the physical device is only queried, not destroyed or changed, while `adapter`
    // holds it.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: a valid physical device of that instance.
    let props =
        unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
    let heaps = props.memory_heaps_as_slice().iter();
    if info.device_type == wgpu::DeviceType::DiscreteGpu {
        const DEVICE_LOCAL: u32 = 1; // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
        heaps
            .filter(|h| h.flags.as_raw() & DEVICE_LOCAL != 0)
            .map(|h| h.size)
            .max()
    } else {
        Some(heaps.map(|h| h.size).fold(0, u64::saturating_add))
    }
}

/// A discrete GPU's dedicated video memory; an integrated one's dedicated carve-out and the
/// system memory Windows lets it share.
#[cfg(windows)]
fn dx12(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> Option<u64> {
    // SAFETY: the DXGI adapter is only queried while `adapter` holds it.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Dx12>() }?;
    // SAFETY: a valid adapter; GetDesc1 only fills the returned description.
    let desc = unsafe { hal.raw_adapter().GetDesc1() }.ok()?;
    let dedicated = desc.DedicatedVideoMemory as u64;
    Some(if info.device_type == wgpu::DeviceType::DiscreteGpu {
        dedicated
    } else {
        dedicated.saturating_add(desc.SharedSystemMemory as u64)
    })
}

/// What Metal recommends one process keep resident on the GPU: about three quarters of unified
/// memory on Apple silicon, the VRAM of a discrete GPU.
#[cfg(target_vendor = "apple")]
fn metal(adapter: &wgpu::Adapter) -> Option<u64> {
    use objc2_metal::MTLDevice;
    // SAFETY: the Metal device is only queried while `adapter` holds it.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Metal>() }?;
    Some(hal.raw_device().recommendedMaxWorkingSetSize())
}
