//! What differs between the native build and the browser build, kept in one place.

/// The local model cache: `$TANDEM_MODEL_DIR`, else `~/.cache/tandem/models`
/// (`scripts/fetch-models.sh` fills it).
#[cfg(not(target_arch = "wasm32"))]
pub fn model_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("TANDEM_MODEL_DIR") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    std::path::Path::new(&home).join(".cache/tandem/models")
}

/// The default model's file name in the cache.
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Quiets a display probe that a compute engine does not need, before the first GPU instance.
///
/// wgpu's Vulkan instance enables the window-system extensions (it cannot know that no window
/// will come), and Mesa's implicit `VK_LAYER_MESA_device_select` layer, seeing
/// `VK_KHR_wayland_surface` enabled, asks the Wayland compositor which GPU it runs on at every
/// `vkEnumeratePhysicalDevices`. Where there is no compositor to ask (no `WAYLAND_DISPLAY`, no
/// `XDG_RUNTIME_DIR`: a server, a container, CI) libwayland prints "error: XDG_RUNTIME_DIR is
/// invalid or not set in the environment." twice and the layer falls back to its other rules.
/// There, and only where the user has not steered the layer (`MESA_VK_DEVICE_SELECT`,
/// `DRI_PRIME`, `NODEVICE_SELECT`), this turns the layer off with its own switch,
/// `NODEVICE_SELECT=1`; adapter choice is wgpu's (high performance first) either way.
#[cfg(not(target_arch = "wasm32"))]
pub fn quiet_display_probe() {
    use std::env::var_os;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let steered = ["MESA_VK_DEVICE_SELECT", "DRI_PRIME", "NODEVICE_SELECT"]
            .iter()
            .any(|k| var_os(k).is_some());
        let no_compositor = ["WAYLAND_DISPLAY", "WAYLAND_SOCKET", "XDG_RUNTIME_DIR"]
            .iter()
            .all(|k| var_os(k).is_none());
        if no_compositor && !steered {
            // Before any instance exists; the only other readers of the environment at this
            // point are threads that do not touch these variables.
            std::env::set_var("NODEVICE_SELECT", "1");
        }
    });
}

/// In the browser the page's WebGPU has no such probe.
#[cfg(target_arch = "wasm32")]
pub fn quiet_display_probe() {}

/// Seconds on a monotonic clock, for speed figures.
#[cfg(not(target_arch = "wasm32"))]
pub fn now_seconds() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Seconds since an arbitrary origin: `performance.now()` where the global scope has it (window,
/// worker, Node), else `Date.now()`.
#[cfg(target_arch = "wasm32")]
pub fn now_seconds() -> f64 {
    use js_sys::{Function, Reflect};
    let global = js_sys::global();
    let perf = Reflect::get(&global, &"performance".into()).ok();
    if let Some(perf) = perf.filter(|p| p.is_object()) {
        if let Ok(now) = Reflect::get(&perf, &"now".into()) {
            if let Some(f) = now.dyn_ref::<Function>() {
                if let Some(ms) = f.call0(&perf).ok().and_then(|v| v.as_f64()) {
                    return ms / 1000.0;
                }
            }
        }
    }
    js_sys::Date::now() / 1000.0
}

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::JsCast;

/// Runs `request`, wgpu's `Adapter::request_device` (which calls the adapter's JS
/// `requestDevice` before it returns its future), so that the browser's device also gets the
/// `subgroups` feature where the adapter has it and `want` says so. wgpu 30's WebGPU backend has no
/// mapping for that feature (gfx-rs/wgpu#10146; the fix, PR #10220, is not released), so it never
/// asks for it and never reports it: without this the browser ran only the kernels without
/// subgroups. Natively wgpu asks for it itself.
#[cfg(target_arch = "wasm32")]
pub fn request_device_with_subgroups<T>(want: bool, request: impl FnOnce() -> T) -> T {
    if !want {
        return request();
    }
    let patched = subgroups_js::patch_request_device(true);
    let out = request();
    if patched {
        subgroups_js::patch_request_device(false);
    }
    out
}

#[cfg(not(target_arch = "wasm32"))]
pub fn request_device_with_subgroups<T>(_want: bool, request: impl FnOnce() -> T) -> T {
    request()
}

/// Whether the browser's device got `subgroups` ([`request_device_with_subgroups`]).
#[cfg(target_arch = "wasm32")]
pub fn browser_device_has_subgroups(device: &wgpu::Device) -> bool {
    device
        .as_webgpu()
        .is_some_and(|d| d.features().has("subgroups"))
}

/// Natively wgpu reports subgroups in `Adapter::features`.
#[cfg(not(target_arch = "wasm32"))]
pub fn browser_device_has_subgroups(_device: &wgpu::Device) -> bool {
    false
}

/// The JS side of [`request_device_with_subgroups`]: `GPUAdapter.prototype.requestDevice` wrapped
/// for the one synchronous call wgpu makes (`patch_request_device(true)`, which says whether it
/// wrapped it), then put back (`false`). One function: wasm-bindgen imports an inline module once
/// per function, and the bundler warns about the duplicate.
#[cfg(target_arch = "wasm32")]
mod subgroups_js {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(inline_js = r#"
let original = null;
export function patch_request_device(on) {
  if (!on) {
    if (original) globalThis.GPUAdapter.prototype.requestDevice = original;
    original = null;
    return false;
  }
  const proto = globalThis.GPUAdapter && globalThis.GPUAdapter.prototype;
  if (!proto || typeof proto.requestDevice !== "function" || original) return false;
  original = proto.requestDevice;
  const call = original;
  proto.requestDevice = function (desc) {
    const d = Object.assign({}, desc);
    const features = Array.from(d.requiredFeatures || []);
    if (this.features.has("subgroups") && !features.includes("subgroups")) features.push("subgroups");
    d.requiredFeatures = features;
    return call.call(this, d);
  };
  return true;
}
"#)]
    extern "C" {
        pub fn patch_request_device(on: bool) -> bool;
    }
}

/// Waits for `future` on this thread: natively by blocking, which the browser cannot do (there,
/// callers `.await` instead).
#[cfg(not(target_arch = "wasm32"))]
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    pollster::block_on(future)
}

/// Seconds since 1970-01-01 UTC by the wall clock, where there is one.
#[cfg(not(target_arch = "wasm32"))]
pub fn unix_seconds() -> Option<f64> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(d.as_secs_f64())
}

/// Seconds since 1970-01-01 UTC by the wall clock (`Date.now()`).
#[cfg(target_arch = "wasm32")]
pub fn unix_seconds() -> Option<f64> {
    Some(js_sys::Date::now() / 1000.0)
}

/// Whether the WGSL compiler takes `dot4I8Packed` (the language extension
/// packed_4x8_integer_dot_product): naga always does (a polyfill where the device lacks the
/// instruction).
#[cfg(not(target_arch = "wasm32"))]
pub fn wgsl_has_packed_dot(instance: &wgpu::Instance) -> bool {
    instance
        .wgsl_language_features()
        .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct)
}

/// In the browser, `navigator.gpu.wgslLanguageFeatures.has(...)`. Not wgpu's
/// `Instance::wgsl_language_features`: it iterates the set's keys and panics where they are not a
/// JS iterator (Dawn for Node's set-like object).
#[cfg(target_arch = "wasm32")]
pub fn wgsl_has_packed_dot(_instance: &wgpu::Instance) -> bool {
    use js_sys::{Function, Reflect};
    let get = |o: &wasm_bindgen::JsValue, k: &str| Reflect::get(o, &k.into()).ok();
    let Some(features) = get(&js_sys::global(), "navigator")
        .and_then(|n| get(&n, "gpu"))
        .and_then(|g| get(&g, "wgslLanguageFeatures"))
        .filter(|f| f.is_object())
    else {
        return false;
    };
    get(&features, "has")
        .and_then(|h| h.dyn_into::<Function>().ok())
        .and_then(|has| {
            has.call1(&features, &"packed_4x8_integer_dot_product".into())
                .ok()
        })
        .is_some_and(|v| v.is_truthy())
}

/// Stack of the thread [`with_deep_stack`] runs its work on. Address space is reserved, pages are
/// committed only as the stack grows. 128 MiB holds the deepest value a chat template's largest
/// budget can build, in a debug build too (`tokenizer::chat::MAX_TEMPLATE_FUEL`).
#[cfg(not(target_arch = "wasm32"))]
pub const DEEP_STACK_BYTES: usize = 128 << 20;

/// Runs `work` where deep recursion cannot overflow the caller's stack: natively on a scoped
/// thread with a [`DEEP_STACK_BYTES`] stack (a tokio worker has 2 MiB, a test thread 2 MiB); in
/// the browser, where there are no threads, on the current stack. Chat templates use it: a
/// hostile template can build values nested tens of thousands deep, which minijinja drops
/// recursively. A panic in `work` is resumed in the caller; Err when no thread can be started.
#[cfg(not(target_arch = "wasm32"))]
pub fn with_deep_stack<R: Send>(work: impl FnOnce() -> R + Send) -> std::io::Result<R> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("tandem-deep-stack".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(s, work)?;
        Ok(handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

#[cfg(target_arch = "wasm32")]
pub fn with_deep_stack<R: Send>(work: impl FnOnce() -> R + Send) -> std::io::Result<R> {
    Ok(work())
}
