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
//! - `// tandem:pairs q4_k:q6_k ...`: build one variant per pair of weight types, named
//!   `<stem>_<a>_<b>`, for a kernel over a matrix of two chunks of different types: its includes
//!   are resolved for `a` as with `tandem:qtypes`, and the files whose code depends on the type
//!   (resolved for `b`: those `a`'s resolution lacks, and those that include one) are added again
//!   for `b` with every name they declare suffixed `_b`, as is every name the kernel itself
//!   declares with a `_b` twin (the second chunk's bindings, which those files then read). The
//!   copied files may declare no bindings.
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
//! - `// tandem:with <t>`: as `tandem:twin <t>`, but only the twinned variants, named `<v>`: a
//!   kernel that always takes the `_<t>` helpers where its variant has them (at least one must;
//!   the pair kernel's and the small-batch kernel's `narrow` Q6_K unit).
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
        let f = twin(f, v);
        if out.contains(&f) {
            continue;
        }
        resolve(wgsl, &includes_of(wgsl, &f), v, out);
        out.push(f);
    }
}

/// The file a variant takes for the include `f`: its weight type's twin, then its subgroup twin,
/// then its twin for one of the variant's `tandem:twin` suffixes, where they exist and the
/// variant asks for them.
fn twin(f: &Path, v: &Twins) -> PathBuf {
    assert!(f.exists(), "missing include {}", f.display());
    let f = v
        .qtype
        .and_then(|q| qtype_twin(f, q))
        .unwrap_or_else(|| f.to_path_buf());
    let f = match sg_twin(&f) {
        Some(twin) if v.sg => twin,
        _ => f,
    };
    v.twins.iter().find_map(|t| qtype_twin(&f, t)).unwrap_or(f)
}

/// Suffix of the second chunk's names in a `tandem:pairs` variant.
const PAIR_SUFFIX: &str = "_b";

/// The names a WGSL file declares at module scope (`fn`, `const`, `override`, `alias`, `struct`,
/// `var`: lines that start with the keyword, as every file here writes them), and whether any
/// of them is a binding.
fn module_names(text: &str) -> (Vec<String>, bool) {
    let mut names = Vec::new();
    let mut binding = false;
    for line in text.lines() {
        let mut l = line;
        if let Some(rest) = l.strip_prefix('@') {
            binding |= rest.starts_with("group") || rest.starts_with("binding");
            // Attributes before the declaration: skip to the keyword.
            l = match ["var", "fn", "const", "override"]
                .iter()
                .filter_map(|k| l.find(&format!(" {k} ")).or(l.find(&format!(" {k}<"))))
                .min()
            {
                Some(i) => &l[i + 1..],
                None => continue,
            };
        }
        for kw in [
            "fn ",
            "const ",
            "override ",
            "alias ",
            "struct ",
            "var<",
            "var ",
        ] {
            if let Some(rest) = l.strip_prefix(kw) {
                let rest = if kw == "var<" {
                    &rest[rest.find('>').expect("var<...>") + 1..]
                } else {
                    rest
                };
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
    }
    (names, binding)
}

/// The field names of the structs a WGSL file declares (one field a line).
fn struct_fields(text: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("struct ") {
            inside = true;
        } else if l.starts_with('}') {
            inside = false;
        } else if inside {
            if let Some((name, _)) = l.split_once(':') {
                fields.push(name.trim().to_string());
            }
        }
    }
    fields
}

/// `text` with every identifier in `names` (not a member after `.`) suffixed with
/// [`PAIR_SUFFIX`].
fn suffix_names(text: &str, names: &[String]) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut chars = text.char_indices().peekable();
    let mut prev = ' ';
    while let Some((i, c)) = chars.next() {
        if c.is_ascii_digit() {
            // A number, suffix and hex digits included (`4u`, `0x0fu`): not an identifier.
            out.push(c);
            while let Some(&(_, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_' || d == '.') {
                    break;
                }
                out.push(d);
                chars.next();
            }
            prev = '0';
        } else if c.is_alphabetic() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let ident = &text[i..end];
            out.push_str(ident);
            if prev != '.' && names.iter().any(|n| n == ident) {
                out.push_str(PAIR_SUFFIX);
            }
            prev = 'a';
        } else {
            out.push(c);
            if !c.is_whitespace() {
                prev = c;
            }
        }
    }
    out
}

/// The second chunk's code of a `tandem:pairs` variant (first type `a`, second `b`): the files of
/// the kernel's includes resolved for `b` whose code depends on the weight type (a file the
/// first type's resolution lacks, or one that includes such a file: the quant helper, the unit
/// twins and the row pass that calls them), with every name they declare and every name the
/// kernel itself declares with [`PAIR_SUFFIX`] (its second chunk's bindings) suffixed, so both
/// chunks' code lives in one module. Helpers both types share are included once and see the first
/// chunk's bindings. Returns the code and the files copied.
fn pair_copy(
    wgsl: &Path,
    kernel: &Path,
    a: &[PathBuf],
    b: (&[PathBuf], &Twins),
) -> (String, Vec<PathBuf>) {
    let (a_files, mut b_files) = (a, Vec::new());
    resolve(wgsl, b.0, b.1, &mut b_files);
    let b = b.1;
    let mut copied: Vec<PathBuf> = Vec::new();
    for f in &b_files {
        // b_files lists every include before its includer, so `copied` is complete for them.
        let typed = !a_files.contains(f)
            || includes_of(wgsl, f)
                .iter()
                .any(|i| copied.contains(&twin(i, b)));
        if typed {
            copied.push(f.clone());
        }
    }
    let read =
        |f: &Path| std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    let (kernel_names, _) = module_names(&read(kernel));
    let mut names: Vec<String> = kernel_names
        .iter()
        .filter_map(|n| n.strip_suffix(PAIR_SUFFIX).map(str::to_string))
        .collect();
    for f in &copied {
        let text = read(f);
        let (declared, binding) = module_names(&text);
        assert!(
            !binding,
            "{}: declares a binding, but `tandem:pairs` copies it for the second chunk",
            f.display()
        );
        names.extend(declared);
    }
    for f in &copied {
        for field in struct_fields(&read(f)) {
            assert!(
                !names.contains(&field),
                "{}: a struct field is named `{field}`, a name `tandem:pairs` suffixes",
                f.display()
            );
        }
    }
    let text = copied
        .iter()
        .map(|f| {
            format!(
                "// {} for the second chunk\n{}\n",
                f.strip_prefix(wgsl).unwrap_or(f).display(),
                suffix_names(&read(f), &names)
            )
        })
        .collect();
    (text, copied)
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
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
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
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut subgroups = false;
        let mut twins: Vec<String> = Vec::new();
        let mut with: Vec<String> = Vec::new();
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
            } else if let Some(list) = d.strip_prefix("pairs ") {
                for pair in list.split_whitespace() {
                    let (a, b) = pair.split_once(':').expect("tandem:pairs a:b ...");
                    for q in [a, b] {
                        assert!(
                            qtypes.iter().any(|t| t == q),
                            "{}: unknown weight type {q}",
                            file.display()
                        );
                    }
                    pairs.push((a.to_string(), b.to_string()));
                }
            } else if d.trim() == "subgroups" {
                subgroups = true;
            } else if let Some(t) = d.strip_prefix("twin ") {
                twins.push(t.trim().to_string());
            } else if let Some(t) = d.strip_prefix("with ") {
                with.push(t.trim().to_string());
            } else if d.trim() == "coop" {
                coop = true;
            } else {
                panic!("{}: unknown directive {d}", file.display());
            }
        }
        // (name, includes, weight type, the second chunk's weight type of a pair)
        type Variant<'a> = (String, Vec<PathBuf>, Option<&'a str>, Option<&'a str>);
        let variants: Vec<Variant> = if let Some(types) = &per_qtype {
            types
                .iter()
                .map(|q| {
                    let mut inc = includes.clone();
                    inc.push(wgsl.join(format!("common/quant_{q}.wgsl")));
                    (format!("{stem}_{q}"), inc, Some(q.as_str()), None)
                })
                .collect()
        } else if !pairs.is_empty() {
            pairs
                .iter()
                .map(|(a, b)| {
                    let mut inc = includes.clone();
                    inc.push(wgsl.join(format!("common/quant_{a}.wgsl")));
                    (
                        format!("{stem}_{a}_{b}"),
                        inc,
                        Some(a.as_str()),
                        Some(b.as_str()),
                    )
                })
                .collect()
        } else {
            vec![(stem.clone(), includes.clone(), None, None)]
        };
        // Each variant with the `with` twins and every subset of the others, in the directives'
        // order.
        let with: Vec<&str> = with.iter().map(String::as_str).collect();
        let mut variants: Vec<(Variant, Vec<&str>)> =
            variants.into_iter().map(|v| (v, with.clone())).collect();
        for t in &twins {
            variants = variants
                .into_iter()
                .flat_map(|(v, ts)| {
                    let with = (
                        (format!("{}_{t}", v.0), v.1.clone(), v.2, v.3),
                        [ts.as_slice(), &[t.as_str()]].concat(),
                    );
                    [(v, ts), with]
                })
                .collect();
        }
        let variants: Vec<(Variant, Vec<&str>, bool)> = variants
            .into_iter()
            .flat_map(|(v, ts)| {
                let sg = subgroups.then(|| {
                    (
                        (format!("{}_sg", v.0), v.1.clone(), v.2, v.3),
                        ts.clone(),
                        true,
                    )
                });
                std::iter::once((v, ts, false)).chain(sg)
            })
            .collect();
        // The `with` twins some variant's helpers have (each must have one).
        let mut with_found = std::collections::HashSet::new();
        for ((name, direct, qtype, second), ts, sg) in variants {
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
            // A pair's second chunk: its code, renamed, written beside shaders.rs.
            let pair = second.map(|b| {
                let mut direct_b = includes.clone();
                direct_b.push(wgsl.join(format!("common/quant_{b}.wgsl")));
                let (text, files) = pair_copy(
                    &wgsl,
                    file,
                    &incs,
                    (
                        &direct_b,
                        &Twins {
                            qtype: Some(b),
                            sg,
                            twins: &ts,
                        },
                    ),
                );
                let path = Path::new(&out_dir).join(format!("{name}.second.wgsl"));
                std::fs::write(&path, text).unwrap();
                (path, files)
            });
            for t in &ts {
                let suffix = format!("_{t}.wgsl");
                let pair_files = pair.iter().flat_map(|p| &p.1);
                let found = incs
                    .iter()
                    .chain(pair_files)
                    .any(|f| f.to_str().is_some_and(|s| s.ends_with(&suffix)));
                if with.contains(t) {
                    with_found.extend(found.then_some(*t));
                } else {
                    assert!(
                        found,
                        "{}: `tandem:twin {t}`, but no included helper has a `_{t}` twin",
                        file.display()
                    );
                }
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
            if let Some((path, _)) = &pair {
                write!(
                    parts,
                    "include_str!({:?}), \"\\n\", ",
                    path.display().to_string()
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
        for t in &with {
            assert!(
                with_found.contains(t),
                "{}: `tandem:with {t}`, but no variant's helpers have a `_{t}` twin",
                file.display()
            );
        }
    }
    out.push_str("];\n");
    let dest = Path::new(&out_dir).join("shaders.rs");
    std::fs::write(dest, out).unwrap();
}
