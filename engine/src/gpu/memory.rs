//! How much memory the device has, where the backend tells it (wgpu has no query of its own).

/// The device's memory on Vulkan (wgpu exposes no memory query; the Vulkan adapter's physical
/// device answers it): a discrete GPU's largest device-local heap (its VRAM); on an integrated
/// one all its heaps, since it shares the host's memory, and a driver may show only a small
/// carve-out as device-local (AMD APUs). `None` on other backends and for software adapters,
/// whose heap sizes are nominal (lavapipe states 2 GiB and allocates from the host).
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
pub(super) fn device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: the physical device is only queried, not destroyed or changed, while `adapter`
    // holds it.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: a valid physical device of that instance.
    let props =
        unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
    let heaps = props.memory_heaps_as_slice().iter();
    match adapter.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => {
            const DEVICE_LOCAL: u32 = 1; // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
            heaps
                .filter(|h| h.flags.as_raw() & DEVICE_LOCAL != 0)
                .map(|h| h.size)
                .max()
        }
        wgpu::DeviceType::Cpu => None,
        _ => Some(heaps.map(|h| h.size).fold(0, u64::saturating_add)),
    }
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(super) fn device_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}
