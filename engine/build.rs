//! Expands the WGSL kernels in `../wgsl` into the closed set of variants the engine uses, at build
//! time, so every variant can be listed, validated by naga without a GPU, and tested.
//!
//! A kernel file may start with directive comments:
//! - `// tandem:include common/x.wgsl`: prepend a helper file (include-only helpers live in common/;
//!   a helper may include others the same way; each file is included once).
//! - `// tandem:per-qtype`: build one variant per GGML weight type, named `<stem>_<qtype>`, each with
//!   `common/quant_<qtype>.wgsl` prepended (it defines the block layout and `dequant8`; every such
//!   helper is a weight type, and `quant::TYPES` must list it: `gpu::tests` checks), and every
//!   helper it includes, directly or nested, that has a twin `common/x_<qtype>.wgsl` beside
//!   `common/x.wgsl` replaced by the twin (same functions, written for that type's blocks).
//! - `// tandem:qtypes q4_k ...`: as `per-qtype`, for the listed weight types only (kernels whose
//!   twin helpers exist for some types, such as the `_q8` matrix products' common/unit_q8.wgsl).
//! - `// tandem:subgroups`: also build, for each variant `<v>` above, a variant `<v>_sg` for adapters
//!   with subgroups: `enable subgroups;` opens its source (WGSL wants enable directives before any
//!   declaration; `gpu::shaders::source_for` drops the line for naga, which rejects it), and every
//!   helper it includes, directly or nested, that has a twin `common/x_sg.wgsl` beside
//!   `common/x.wgsl` is replaced by the twin (same functions, subgroup operations inside). The
//!   portable variant stays as it was. At least one include must have a twin, and only `_sg`
//!   variants may include twins.
//! - `// tandem:coop`: the kernel uses cooperative matrices (wgpu's native-only extension, with f16
//!   operands): `enable f16;` and `enable wgpu_cooperative_matrix;` ([`ENABLE_COOP`]) open every
//!   variant's source. Such kernels have a plain twin that every adapter runs; the engine takes
//!   them only where `GpuFeatures::coop` says the adapter has the fragments they use.
//! - `// tandem:twin <t>`: also build, for each variant `<v>` above (before `_sg`), a variant
//!   `<v>_<t>` in which every included helper, directly or nested, that has a twin
//!   `common/x_<t>.wgsl` beside `common/x.wgsl` is replaced by it (at least one must). Several
//!   such lines multiply: `<v>`, `<v>_<t1>`, `<v>_<t2>`, `<v>_<t1>_<t2>`. Used for the KV cache's
//!   element (`kv32`: common/kv_f16_kv32.wgsl, an f32 cache) and for split attention's parts
//!   (`last`: common/attn_parts_last.wgsl, the last part's workgroup merges them).
//!
//! The output is `$OUT_DIR/shaders.rs` with `SHADERS: &[(&str, &str)]` (variant name, source) and
//! `ENABLE_SUBGROUPS`, the line that opens every `_sg` source, and `ENABLE_COOP`, the lines that
//! open every `tandem:coop` source.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The weight types: every `common/quant_<qtype>.wgsl`, sorted.
fn qtypes(wgsl: &Path) -> Vec<String> {
    let mut q: Vec<String> = std::fs::read_dir(wgsl.join("common"))
        .expect("wgsl/common/ folder")
        .filter_map(|e| {
            let name = e.expect("dir entry").file_name().into_string().ok()?;
            Some(
                name.strip_prefix("quant_")?
                    .strip_suffix(".wgsl")?
                    .to_string(),
            )
        })
        .collect();
    q.sort();
    q
}

/// The first line of every `_sg` variant (see `gpu::shaders::source_for`).
const ENABLE_SUBGROUPS: &str = "enable subgroups;\n";

/// The first lines of every `tandem:coop` kernel's variants.
const ENABLE_COOP: &str = "enable f16;\nenable wgpu_cooperative_matrix;\n";

/// The subgroup twin `common/x_sg.wgsl` of a helper `common/x.wgsl`, if there is one.
fn sg_twin(file: &Path) -> Option<PathBuf> {
    let stem = file.file_stem()?.to_str()?;
    if stem.ends_with("_sg") {
        return None;
    }
    let twin = file.with_file_name(format!("{stem}_sg.wgsl"));
    twin.exists().then_some(twin)
}

/// The `// tandem:include` paths of a file.
fn includes_of(wgsl: &Path, file: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("// tandem:include "))
        .map(|inc| wgsl.join(inc.trim()))
        .collect()
}

/// The twin `common/x_<qtype>.wgsl` of a helper `common/x.wgsl` for weight type `qtype`, if
/// there is one.
fn qtype_twin(file: &Path, qtype: &str) -> Option<PathBuf> {
    let stem = file.file_stem()?.to_str()?;
    let twin = file.with_file_name(format!("{stem}_{qtype}.wgsl"));
    twin.exists().then_some(twin)
}

/// `files` with every nested include placed before its includer, each once; helpers that have a
/// twin for `qtype` are replaced by it, then with `sg` those that have a subgroup twin, then those
/// that have a twin for one of the variant's `tandem:twin` suffixes (and the twin's own includes
/// followed).
fn resolve(wgsl: &Path, files: &[PathBuf], v: &Twins, out: &mut Vec<PathBuf>) {
    for f in files {
        assert!(f.exists(), "missing include {}", f.display());
        let f = v
            .qtype
            .and_then(|q| qtype_twin(f, q))
            .unwrap_or_else(|| f.clone());
        let f = match sg_twin(&f) {
            Some(twin) if v.sg => twin,
            _ => f,
        };
        let f = v.twins.iter().find_map(|t| qtype_twin(&f, t)).unwrap_or(f);
        if out.contains(&f) {
            continue;
        }
        resolve(wgsl, &includes_of(wgsl, &f), v, out);
        out.push(f);
    }
}

/// Which twins a variant takes.
#[derive(Clone, Copy)]
struct Twins<'a> {
    qtype: Option<&'a str>,
    sg: bool,
    /// The variant's `tandem:twin` suffixes.
    twins: &'a [&'a str],
}

fn main() {
    // Read at run time: a build-script binary shared between checkouts (one target dir for several
    // worktrees) must expand the kernels of the checkout being built.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let wgsl = Path::new(&manifest).join("../wgsl");
    // Watched paths are printed relative to the package root, which cargo resolves against the
    // checkout being built: absolute ones would keep watching the checkout that ran the script last.
    let watch = |p: &Path| {
        let rel = p.strip_prefix(&manifest).unwrap_or(p);
        println!("cargo:rerun-if-changed={}", rel.display());
    };
    watch(&wgsl);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wgsl)
        .expect("wgsl/ folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    files.sort();
    let qtypes = qtypes(&wgsl);
    watch(&wgsl.join("common"));

    let mut out = format!(
        "pub const ENABLE_SUBGROUPS: &str = {ENABLE_SUBGROUPS:?};\n\
         pub const ENABLE_COOP: &str = {ENABLE_COOP:?};\n\
         pub const SHADERS: &[(&str, &str)] = &[\n"
    );
    for file in &files {
        watch(file);
        let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read_to_string(file).expect("read kernel");
        let mut includes = Vec::new();
        let mut per_qtype: Option<Vec<String>> = None;
        let mut subgroups = false;
        let mut twins: Vec<String> = Vec::new();
        let mut coop = false;
        for line in text.lines() {
            let Some(d) = line.trim().strip_prefix("// tandem:") else {
                continue;
            };
            if let Some(inc) = d.strip_prefix("include ") {
                includes.push(wgsl.join(inc.trim()));
            } else if d.trim() == "per-qtype" {
                per_qtype = Some(qtypes.clone());
            } else if let Some(list) = d.strip_prefix("qtypes ") {
                let list: Vec<String> = list.split_whitespace().map(str::to_string).collect();
                for q in &list {
                    assert!(
                        qtypes.contains(q),
                        "{}: unknown weight type {q}",
                        file.display()
                    );
                }
                per_qtype = Some(list);
            } else if d.trim() == "subgroups" {
                subgroups = true;
            } else if let Some(t) = d.strip_prefix("twin ") {
                twins.push(t.trim().to_string());
            } else if d.trim() == "coop" {
                coop = true;
            } else {
                panic!("{}: unknown directive {d}", file.display());
            }
        }
        // (name, includes, weight type)
        type Variant<'a> = (String, Vec<PathBuf>, Option<&'a str>);
        let variants: Vec<Variant> = if let Some(types) = &per_qtype {
            types
                .iter()
                .map(|q| {
                    let mut inc = includes.clone();
                    inc.push(wgsl.join(format!("common/quant_{q}.wgsl")));
                    (format!("{stem}_{q}"), inc, Some(q.as_str()))
                })
                .collect()
        } else {
            vec![(stem.clone(), includes.clone(), None)]
        };
        // Each variant with every subset of the twins, in the directives' order.
        let mut variants: Vec<(Variant, Vec<&str>)> =
            variants.into_iter().map(|v| (v, Vec::new())).collect();
        for t in &twins {
            variants = variants
                .into_iter()
                .flat_map(|(v, ts)| {
                    let with = (
                        (format!("{}_{t}", v.0), v.1.clone(), v.2),
                        [ts.as_slice(), &[t.as_str()]].concat(),
                    );
                    [(v, ts), with]
                })
                .collect();
        }
        let variants: Vec<(Variant, Vec<&str>, bool)> = variants
            .into_iter()
            .flat_map(|(v, ts)| {
                let sg = subgroups
                    .then(|| ((format!("{}_sg", v.0), v.1.clone(), v.2), ts.clone(), true));
                std::iter::once((v, ts, false)).chain(sg)
            })
            .collect();
        for ((name, direct, qtype), ts, sg) in variants {
            let mut incs = Vec::new();
            resolve(
                &wgsl,
                &direct,
                &Twins {
                    qtype,
                    sg,
                    twins: &ts,
                },
                &mut incs,
            );
            for t in &ts {
                let suffix = format!("_{t}.wgsl");
                assert!(
                    incs.iter()
                        .any(|f| f.to_str().is_some_and(|s| s.ends_with(&suffix))),
                    "{}: `tandem:twin {t}`, but no included helper has a `_{t}` twin",
                    file.display()
                );
            }
            if sg {
                assert!(
                    incs.iter()
                        .any(|f| f.to_str().is_some_and(|s| s.ends_with("_sg.wgsl"))),
                    "{}: `tandem:subgroups`, but no included helper has a `_sg` twin",
                    file.display()
                );
            } else {
                assert!(
                    !incs
                        .iter()
                        .any(|f| f.to_str().is_some_and(|s| s.ends_with("_sg.wgsl"))),
                    "{}: includes a `_sg` helper directly; include the portable one and add \
                     `// tandem:subgroups`",
                    file.display()
                );
            }
            let mut parts = String::new();
            if coop {
                write!(parts, "{ENABLE_COOP:?}, ").unwrap();
            }
            if sg {
                write!(parts, "{ENABLE_SUBGROUPS:?}, ").unwrap();
            }
            for inc in &incs {
                assert!(
                    inc.exists(),
                    "{}: missing include {}",
                    file.display(),
                    inc.display()
                );
                watch(inc);
                write!(
                    parts,
                    "include_str!({:?}), \"\\n\", ",
                    inc.display().to_string()
                )
                .unwrap();
            }
            writeln!(
                out,
                "    ({name:?}, concat!({parts}include_str!({:?}))),",
                file.display().to_string()
            )
            .unwrap();
        }
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("shaders.rs");
    std::fs::write(dest, out).unwrap();
}
