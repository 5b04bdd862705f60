//! The generator's output parses with the engine's GGUF reader, its Config reads the MoE keys,
//! every tensor is where its header says and of the declared size, the weights dequantize to
//! sane magnitudes, and the sizes of the big presets are what the issue expects.

use std::io::Cursor;

use tandem_engine::gguf::Gguf;
use tandem_engine::model::{Arch, Config};
use tandem_engine::quant::dequantize;

#[test]
fn tiny_moe_parses_and_configures() {
    let shape = tandem_gen::preset("qwen3moe-tiny").unwrap();
    let spec = tandem_gen::model_spec(&shape);
    let mut buf = Cursor::new(Vec::new());
    tandem_gen::write_gguf(&spec, &mut buf, 7, 3, &mut |_, _| {}).unwrap();
    let bytes = buf.into_inner();
    let g = Gguf::parse(&bytes).unwrap();
    let c = Config::from_gguf(&g).unwrap();
    assert_eq!(c.arch, Arch::Qwen3Moe);
    assert_eq!(
        (c.n_layer, c.n_embd, c.n_vocab, c.head_dim),
        (2, 256, 1024, 64)
    );
    let m = c.moe.unwrap();
    assert_eq!((m.routing.n_expert, m.routing.k, m.n_ff_exp), (8, 2, 256));
    assert!(m.routing.norm);
    assert_eq!(g.tensors.len(), spec.tensors.len());
    for t in &spec.tensors {
        let info = g.tensor(&t.name).unwrap();
        assert_eq!(info.dims, t.dims, "{}", t.name);
        assert_eq!(info.ty, t.ty, "{}", t.name);
        let data = g.tensor_data(&bytes, info).unwrap();
        let mut vals = vec![0.0f32; t.n_elements() as usize];
        dequantize(t.ty, &data, &mut vals).unwrap();
        let max = vals.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let want = t.amp.abs();
        assert!(
            max > 0.3 * want && max < 1.5 * want && vals.iter().all(|v| v.is_finite()),
            "{}: max |w| {max}, amp {want}",
            t.name
        );
    }
    // The same seed gives the same bytes whatever the thread count.
    let mut again = Cursor::new(Vec::new());
    tandem_gen::write_gguf(&spec, &mut again, 7, 1, &mut |_, _| {}).unwrap();
    assert!(again.into_inner() == bytes);
}

#[test]
fn big_presets_have_the_expected_size() {
    let q = tandem_gen::model_spec(&tandem_gen::preset("qwen3-30b-a3b").unwrap());
    let gb = q.total_bytes() as f64 / 1e9;
    assert!((17.0..19.5).contains(&gb), "qwen3-30b-a3b: {gb:.2} GB");
    // Qwen3-8B at Q4_K_M: llama.cpp's file is 5.03 GB (4.68 GB of it the 36 layers).
    let d = tandem_gen::model_spec(&tandem_gen::preset("qwen3-8b").unwrap());
    let gb = d.total_bytes() as f64 / 1e9;
    assert!((4.6..5.3).contains(&gb), "qwen3-8b: {gb:.2} GB");
    let s = tandem_gen::model_spec(&tandem_gen::preset("smollm2-135m").unwrap());
    let mb = s.total_bytes() as f64 / 1e6;
    assert!((70.0..110.0).contains(&mb), "smollm2-135m: {mb:.1} MB");
}

/// With an MTP layer: block_count counts it, the engine's Config does not, and the model loads
/// with it (the layer's block, eh_proj, the norms; its head the output's).
#[test]
fn tiny_moe_with_an_mtp_layer_loads() {
    let mut shape = tandem_gen::preset("qwen3moe-tiny").unwrap();
    shape.mtp = true;
    let spec = tandem_gen::model_spec(&shape);
    let mut buf = Cursor::new(Vec::new());
    tandem_gen::write_gguf(&spec, &mut buf, 7, 2, &mut |_, _| {}).unwrap();
    let bytes = buf.into_inner();
    let g = Gguf::parse(&bytes).unwrap();
    let c = Config::from_gguf(&g).unwrap();
    assert_eq!((c.n_layer, c.n_nextn), (2, 1));
    assert!(g.tensor("blk.2.nextn.eh_proj.weight").is_some());
    assert!(g.tensor("blk.2.ffn_gate_exps.weight").is_some());
    let gpu = std::sync::Arc::new(
        tandem_engine::platform::block_on(tandem_engine::gpu::Gpu::new(&Default::default()))
            .unwrap(),
    );
    let model = tandem_engine::platform::block_on(tandem_engine::model::Model::load(
        gpu,
        &g,
        &bytes,
        &mut |_| {},
    ))
    .unwrap();
    assert!(model.weights.mtp.is_some());
}
