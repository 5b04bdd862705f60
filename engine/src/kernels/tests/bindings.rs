//! The Rust side of every kernel against its WGSL, as naga reads it: for every variant in
//! `gpu::shaders::SHADERS`, the kernel's entry in `kernels::BINDS` (declared next to the
//! family's layouts and `Params`) must match what the WGSL declares in group 0, binding by
//! binding (storage read = `Binding::Read`, storage read_write = `Binding::ReadWrite`, uniform =
//! `Binding::Uniform`), each uniform's WGSL size must equal the size of the Rust value written to
//! it, and the WGSL `const`s and `override` defaults the entry names must equal the Rust
//! constants. A variant whose kernel has no entry fails, so a new kernel cannot skip the check.
//! No GPU: this runs natively and in the browser build alike.

use crate::gpu::shaders::{source_for, SHADERS};
use crate::gpu::Binding;
use crate::kernels::{qtype_suffix, KernelBinds, BINDS};
use crate::quant::GgmlType;

/// The variant suffixes of every weight type the kernels take (`q4_k`, ...).
fn qtype_suffixes() -> Vec<&'static str> {
    (0..256)
        .filter_map(|id| qtype_suffix(GgmlType::from_id(id)).ok())
        .collect()
}

/// The entries whose kernel `variant` is a variant of: `<stem>`, `<stem>_<qtype>` or (a pair,
/// build.rs's `tandem:pairs`) `<stem>_<qtype>_<qtype>`, either with `_sg`.
fn entries_of(variant: &str, suffixes: &[&str]) -> Vec<&'static KernelBinds> {
    let base = variant.strip_suffix("_sg").unwrap_or(variant);
    let base = base.strip_suffix("_kv32").unwrap_or(base);
    BINDS
        .iter()
        .flat_map(|family| family.iter())
        .filter(|k| {
            base == k.stem
                || base
                    .strip_prefix(k.stem)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|q| {
                        suffixes.contains(&q)
                            || suffixes.iter().any(|a| {
                                q.strip_prefix(a)
                                    .and_then(|b| b.strip_prefix('_'))
                                    .is_some_and(|b| suffixes.contains(&b))
                            })
                    })
        })
        .collect()
}

/// The value of a `u32` literal in the module's global expressions.
fn literal_u32(module: &naga::Module, e: naga::Handle<naga::Expression>) -> Option<u32> {
    match module.global_expressions[e] {
        naga::Expression::Literal(naga::Literal::U32(v)) => Some(v),
        naga::Expression::Literal(naga::Literal::I32(v)) => u32::try_from(v).ok(),
        naga::Expression::Literal(naga::Literal::AbstractInt(v)) => u32::try_from(v).ok(),
        _ => None,
    }
}

/// `name`'s value in the module: a `const`, or the default of an `override`.
fn constant(module: &naga::Module, name: &str) -> Result<u32, String> {
    let named = |n: &Option<String>| n.as_deref() == Some(name);
    let init = if let Some((_, c)) = module.constants.iter().find(|(_, c)| named(&c.name)) {
        Some(c.init)
    } else if let Some((_, o)) = module.overrides.iter().find(|(_, o)| named(&o.name)) {
        o.init
    } else {
        return Err("no such const or override".into());
    };
    init.and_then(|e| literal_u32(module, e))
        .ok_or_else(|| "not a u32 literal".into())
}

/// Every mismatch between `variant`'s WGSL and its entry `k`, one message each.
fn check(variant: &str, k: &KernelBinds) -> Vec<String> {
    let mut errs = Vec::new();
    let source = source_for(variant, wgpu::Backend::Vulkan).expect("a listed variant");
    let module = match naga::front::wgsl::parse_str(source) {
        Ok(m) => m,
        Err(e) => return vec![format!("{variant}: {}", e.emit_to_string(source))],
    };
    let mut declared = Vec::new();
    for (_, gv) in module.global_variables.iter() {
        let Some(rb) = &gv.binding else { continue };
        let name = gv.name.as_deref().unwrap_or("?");
        let b = rb.binding;
        if rb.group != 0 {
            errs.push(format!(
                "{variant}: `{name}` is in group {}; kernels bind group 0 only",
                rb.group
            ));
            continue;
        }
        declared.push(b);
        let wgsl = match gv.space {
            naga::AddressSpace::Storage { access }
                if access.contains(naga::StorageAccess::STORE) =>
            {
                Binding::ReadWrite
            }
            naga::AddressSpace::Storage { .. } => Binding::Read,
            naga::AddressSpace::Uniform => Binding::Uniform,
            other => {
                errs.push(format!("{variant}: binding {b} `{name}` is in {other:?}"));
                continue;
            }
        };
        let layout = k.layout.get(b as usize);
        if layout != Some(&wgsl) || k.unused.contains(&b) {
            errs.push(format!(
                "{variant}: binding {b} `{name}` is {wgsl:?} in the WGSL, but {} in `{}`'s Rust layout",
                match layout {
                    Some(l) if !k.unused.contains(&b) => format!("{l:?}"),
                    Some(_) => "declared unused".into(),
                    None => format!("missing (the layout has {})", k.layout.len()),
                },
                k.stem
            ));
        }
        let rust_size = k.uniforms.iter().find(|u| u.0 == b).map(|u| u.1);
        if wgsl == Binding::Uniform {
            let size = module.types[gv.ty].inner.size(module.to_ctx()) as usize;
            match rust_size {
                Some(r) if r == size => {}
                Some(r) => errs.push(format!(
                    "{variant}: uniform {b} `{name}` is {size} bytes in the WGSL, {r} bytes in Rust"
                )),
                None => errs.push(format!(
                    "{variant}: uniform {b} `{name}` ({size} bytes in the WGSL) has no Rust size in `{}`'s entry",
                    k.stem
                )),
            }
        } else if rust_size.is_some() {
            errs.push(format!(
                "{variant}: binding {b} `{name}` has a Rust uniform size but is {wgsl:?} in the WGSL"
            ));
        }
    }
    for (b, l) in k.layout.iter().enumerate() {
        let b = b as u32;
        if !declared.contains(&b) && !k.unused.contains(&b) {
            errs.push(format!(
                "{variant}: binding {b} is {l:?} in `{}`'s Rust layout, but the WGSL declares no binding {b} \
                 (it declares {} bindings; list it in `unused` if another kernel shares the bind group)",
                k.stem,
                declared.len()
            ));
        }
    }
    for &(u, _) in k.uniforms {
        if !declared.contains(&u) {
            errs.push(format!(
                "{variant}: `{}`'s entry has a uniform size for binding {u}, which the WGSL does not declare",
                k.stem
            ));
        }
    }
    for &(name, want) in k.constants {
        match constant(&module, name) {
            Ok(got) if got == want => {}
            Ok(got) => errs.push(format!(
                "{variant}: `{name}` is {got} in the WGSL, {want} in Rust"
            )),
            Err(e) => errs.push(format!(
                "{variant}: `{name}`: {e} in the WGSL (Rust: {want})"
            )),
        }
    }
    errs
}

async fn every_variant_binds_what_rust_declares() {
    let suffixes = qtype_suffixes();
    let mut errs = Vec::new();
    let mut used = Vec::new();
    for (variant, _) in SHADERS {
        match entries_of(variant, &suffixes)[..] {
            [k] => {
                used.push(k.stem);
                errs.extend(check(variant, k));
            }
            [] => errs.push(format!(
                "{variant}: no entry in `kernels::BINDS`; declare its layout, uniform sizes and \
                 constants in its family's `BINDS`"
            )),
            ref many => errs.push(format!(
                "{variant}: matches several entries: {:?}",
                many.iter().map(|k| k.stem).collect::<Vec<_>>()
            )),
        }
    }
    for k in BINDS.iter().flat_map(|family| family.iter()) {
        if !used.contains(&k.stem) {
            errs.push(format!(
                "`{}`: an entry in `kernels::BINDS` with no variant in SHADERS",
                k.stem
            ));
        }
    }
    assert!(
        errs.is_empty(),
        "{} mismatches between the WGSL and the Rust side:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

super::gpu_tests!(every_variant_binds_what_rust_declares);
