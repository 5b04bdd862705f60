//! The forward pass as a recipe: a [`Recorder`] owns the session's buffers and offers the steps a
//! layer is made of, so [`record_forward`] reads as the model's paper does. Decode passes (one
//! token) take the fused kernels (the RMSNorm in the matvec prologue, gate/up/activation in one
//! matvec, RoPE and the KV store in attention's prologue); batched passes take the norm, the
//! tiled matmuls and the activation one by one. Each step records both; a dispatch's grid rule
//! (`When`) picks which run in a given pass.

use crate::gpu::Gpu;
use crate::kernels::{
    self, AttnOpts, DecodeRope, Dispatch, GpuWeight, Heads, KvBuffers, MatOpts, NormOpts, Q8From,
    Rows, When,
};
use crate::{Error, Result};

use super::plan::{kv_positions, share_slots, Activations, LayerKv, MtpBuffers, SessionOptions};
use super::{Ffn, Layer, Model};

mod ffn;

/// The forward pass of `model` over the session's activations and KV cache, as a list of
/// dispatches recorded once and replayed for every pass.
pub(super) fn record_forward(
    gpu: &Gpu,
    model: &Model,
    act: &Activations,
    kv: &[LayerKv],
    opts: SessionOptions,
) -> Result<Vec<Dispatch>> {
    let mut r = Recorder::new(gpu, model, act, opts);
    r.share_slots = share_slots(gpu, model);
    r.embed()?;
    for (il, (layer, kv)) in model.weights.layers.iter().zip(kv).enumerate() {
        r.attention_block(il as u32, layer, kv)?;
        match &layer.ffn {
            Ffn::Dense(f) => r.dense_ffn(layer, f)?,
            Ffn::Moe(m) => r.moe_ffn(il as u32, layer, m)?,
        }
    }
    r.output()?;
    Ok(r.d)
}

/// The MTP layer's pass (DeepSeek-V3's multi-token prediction, as llama.cpp's glm4moe runs it):
/// for each pair of a hidden state `h` (the target's after its final norm, or the previous draft
/// step's) and the token after it, `x = eh_proj [enorm(embed(token)) | hnorm(h)]`, the layer's
/// block over its own KV cache, then for the output rows `h = head_norm(x)` (the next draft step's
/// input) and the logits. `act` is the session's activations with the MTP's token ids and step.
pub(super) fn record_mtp(
    gpu: &Gpu,
    model: &Model,
    act: &Activations,
    m: &MtpBuffers,
    opts: SessionOptions,
) -> Result<Vec<Dispatch>> {
    let (c, w) = (&model.config, &model.weights);
    let Some(l) = &w.mtp else {
        return Err(Error::InvalidArgument("the model has no MTP layer".into()));
    };
    let mut r = Recorder::new(gpu, model, act, opts);
    let embed = l.embed.as_ref().unwrap_or(&w.token_embd);
    r.d.extend(kernels::embed(
        gpu,
        embed,
        &act.tokens,
        &m.e,
        &act.step,
        c.embed_scale,
    )?);
    let n = c.n_embd;
    for (x, norm, col0) in [(&m.e, &l.enorm, 0), (&m.h, &l.hnorm, n)] {
        let opts = NormOpts {
            accumulate: false,
            rows: Rows::Tokens,
            when: When::Always,
            subgroups: true,
            y_cols: Some((2 * n, col0)),
        };
        let d = kernels::rmsnorm(gpu, x, norm, &m.eh, &act.step, n, c.rms_eps, opts)?;
        r.d.push(d);
    }
    r.mat(&l.eh_proj, &m.eh, &act.x, &MatOpts::default())?;
    r.attention_block(c.n_layer, &l.block, &m.kv)?;
    match &l.block.ffn {
        Ffn::Dense(f) => r.dense_ffn(&l.block, f)?,
        Ffn::Moe(f) => r.moe_ffn(c.n_layer, &l.block, f)?,
    }
    let head_norm = l.head_norm.as_ref().unwrap_or(&w.output_norm);
    let head = l
        .head
        .as_ref()
        .or(w.output.as_ref())
        .unwrap_or(&w.token_embd);
    r.head(head_norm, &m.h, head)?;
    Ok(r.d)
}

/// Records dispatches over one session's buffers.
struct Recorder<'a> {
    gpu: &'a Gpu,
    model: &'a Model,
    a: &'a Activations,
    opts: SessionOptions,
    d: Vec<Dispatch>,
    /// Each main layer's slot of router shares ([`share_slots`]); empty for the MTP layer's pass.
    share_slots: Vec<Option<u32>>,
}

impl<'a> Recorder<'a> {
    fn new(gpu: &'a Gpu, model: &'a Model, a: &'a Activations, opts: SessionOptions) -> Self {
        Recorder {
            gpu,
            model,
            a,
            opts,
            d: Vec::new(),
            share_slots: Vec::new(),
        }
    }

    /// Layer il's slot of router shares and the slot it clears, in words, where its router folds
    /// into its attention output ([`share_slots`]).
    fn share_at(&self, il: u32) -> Option<(u32, u32)> {
        let slot = (*self.share_slots.get(il as usize)?)?;
        let n = self.share_slots.iter().flatten().count() as u32;
        let mc = self.model.config.moe.as_ref()?;
        let words = kernels::route_slot_words(mc.routing.n_expert);
        Some((slot * words, (slot + n - 1) % n * words))
    }

    /// `x = embed_scale * token_embd[tokens]`.
    fn embed(&mut self) -> Result<()> {
        let (w, a) = (&self.model.weights, self.a);
        let scale = self.model.config.embed_scale;
        let d = kernels::embed(self.gpu, &w.token_embd, &a.tokens, &a.x, &a.step, scale)?;
        self.d.extend(d);
        Ok(())
    }

    /// Pre-norm attention: `qkv = Wqkv RMSNorm(x) (+ b)`, q/k norm and RoPE, the KV-cache store,
    /// attention over the cache, then `x += Wo attn` (through the post-norm where there is one).
    fn attention_block(&mut self, il: u32, l: &Layer, kv: &LayerKv) -> Result<()> {
        let (c, a) = (&self.model.config, self.a);
        let sliding = c.is_sliding(il);
        self.normed_mat(&l.wqkv, &l.attn_norm, &a.qkv, l.bqkv.as_ref(), None, true)?;
        let qk_norm = match (&l.q_norm, &l.k_norm) {
            (Some(qn), Some(kn)) => Some((qn, kn, c.rms_eps)),
            _ => None,
        };
        let rope = if sliding { c.rope_local } else { c.rope };
        let heads = self.heads();
        // Decode passes do this in attention's prologue.
        let kv_buffers = KvBuffers {
            qkv: &a.qkv,
            k_cache: &kv.k,
            v_cache: &kv.v,
            kv: self.opts.kv,
        };
        let store = kernels::rope_store(
            self.gpu,
            &kv_buffers,
            &a.step,
            &a.rows,
            heads,
            rope,
            qk_norm,
            &a.dummy,
        )?;
        self.d.push(store.only(When::Batch));
        // The small passes whose output projection reads only int8 x' take it quantized by the
        // attention's combine where that runs, else by a quantize dispatch.
        let o_q8 = self.small_q8(&l.wo).1 && heads.head_dim.is_multiple_of(32);
        let min_grouped = kernels::ATTN_MIN_WORKGROUPS;
        let attention = kernels::attention(
            self.gpu,
            &a.qkv,
            &kv.k,
            &kv.v,
            &a.attn,
            &a.attn_partial,
            &a.step,
            &a.rows,
            heads,
            AttnOpts {
                scale: c.attn_scale,
                window: match c.sliding_window {
                    Some(sw) if sliding => sw.size,
                    _ => 0,
                },
                softcap: c.attn_softcap,
                decode_rope: Some(DecodeRope { rope, qk_norm }),
                subgroups: true,
                kv: self.opts.kv,
                min_grouped_workgroups: min_grouped,
                out_q8: o_q8.then_some(&a.x_q8),
            },
        )?;
        self.d.extend(attention);
        let attn_q8 = if o_q8 {
            let combines = kernels::attention::combines(&heads, min_grouped);
            let n_cols = l.wo.n_cols;
            let q = kernels::quantize_q8(
                self.gpu,
                &a.attn,
                &a.x_q8,
                &a.step,
                n_cols,
                Rows::Tokens,
                Q8From::X,
            )?;
            self.d.push(q.only_if(move |s| !combines(s)));
            Some(&a.x_q8)
        } else {
            None
        };
        match (self.share_at(il), &l.ffn, &a.moe) {
            (Some((at, clear)), Ffn::Moe(m), Some(mb)) => {
                // Decode steps add the router's shares as they write x; the others as usual.
                let share = kernels::RouteShare {
                    router: &m.router,
                    norm: &l.ffn_norm,
                    shares: &mb.shares,
                    at,
                    clear,
                };
                let d = kernels::matvec_route(
                    self.gpu, &l.wo, &a.attn, &a.x, &a.step, &a.dummy, &share, None,
                )?;
                self.d.extend(d);
                let batch = MatOpts {
                    accumulate: true,
                    when: When::Batch,
                    x_q8: attn_q8,
                    ..Default::default()
                };
                self.mat(&l.wo, &a.attn, &a.x, &batch)
            }
            _ => self.residual(&l.wo, &l.post_attn_norm, &a.attn, attn_q8),
        }
    }

    /// `out_norm = RMSNorm(x)` of the rows that want logits, then `logits = W_out out_norm`.
    fn output(&mut self) -> Result<()> {
        let (w, a) = (&self.model.weights, self.a);
        let out = w.output.as_ref().unwrap_or(&w.token_embd);
        self.head(&w.output_norm, &a.out_norm, out)
    }

    /// `normed = RMSNorm(x) * norm_w` of the rows that want logits, then `logits = W normed`.
    fn head(&mut self, norm_w: &wgpu::Buffer, normed: &wgpu::Buffer, w: &GpuWeight) -> Result<()> {
        let (c, a) = (&self.model.config, self.a);
        let norm = NormOpts {
            accumulate: false,
            rows: Rows::Out,
            when: When::Always,
            subgroups: true,
            y_cols: None,
        };
        let d = kernels::rmsnorm(
            self.gpu, &a.x, norm_w, normed, &a.step, c.n_embd, c.rms_eps, norm,
        )?;
        self.d.push(d);
        let opts = MatOpts {
            rows: Rows::Out,
            ..Default::default()
        };
        self.mat(w, normed, &a.logits, &opts)
    }

    // -- the steps the blocks above are made of

    fn heads(&self) -> Heads {
        let c = &self.model.config;
        Heads {
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            head_dim: c.head_dim,
            ctx: kv_positions(self.opts.ctx),
        }
    }

    /// `kernels::mat` over input `x`; for the passes that take the small-batch kernel, `x`
    /// quantized first where that pays for `w` ([`Recorder::small_q8`]), unless `opts.x_q8`
    /// holds it already (an earlier dispatch quantized it).
    fn mat<'b>(
        &mut self,
        w: &GpuWeight,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        opts: &MatOpts<'b>,
    ) -> Result<()>
    where
        'a: 'b,
    {
        let small = matches!(opts.when, When::Always | When::Batch | When::Small);
        let x_q8 = match opts.x_q8 {
            Some(q) => Some(q),
            None => (small && self.small_q8(w).0)
                .then(|| self.quantize(x, w.n_cols, opts.rows, Q8From::X))
                .transpose()?,
        };
        self.mat_from(w, x, x_q8, y, opts)
    }

    /// `kernels::mat` with `x_q8` (quantized by [`Recorder::quantize`]) for the small passes.
    fn mat_from<'b>(
        &mut self,
        w: &GpuWeight,
        x: &wgpu::Buffer,
        x_q8: Option<&'b wgpu::Buffer>,
        y: &wgpu::Buffer,
        opts: &MatOpts<'b>,
    ) -> Result<()>
    where
        'a: 'b,
    {
        let a = self.a;
        // x_q8 also holds x as f16 for the long passes on the matrix units (kernels::mat's
        // to_f16): each pass writes it in one form only.
        let opts = MatOpts {
            x_q8,
            x_f16: Some(&a.x_q8),
            ..*opts
        };
        let d = kernels::mat(self.gpu, w, x, y, &a.step, &a.dummy, &opts)?;
        self.d.extend(d);
        Ok(())
    }

    /// Whether the small passes quantize x for `w`, and whether every chunk of it then reads x'
    /// ([`kernels::small_q8_reads`]).
    fn small_q8(&self, w: &GpuWeight) -> (bool, bool) {
        kernels::small_q8_reads(self.gpu, w)
    }

    /// Records the small passes' quantization of `x` (`n_cols` values a row, as `from` says)
    /// into the activations' `x_q8`, and returns it.
    fn quantize(
        &mut self,
        x: &wgpu::Buffer,
        n_cols: u32,
        rows: Rows,
        from: Q8From,
    ) -> Result<&'a wgpu::Buffer> {
        let a = self.a;
        let d = kernels::quantize_q8(self.gpu, x, &a.x_q8, &a.step, n_cols, rows, from)?;
        self.d.push(d);
        Ok(&a.x_q8)
    }

    /// `y = RMSNorm(x) * weight` over the pass's tokens (`accumulate`: `y +=`).
    fn norm(
        &mut self,
        x: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        y: &wgpu::Buffer,
        accumulate: bool,
        when: When,
    ) -> Result<()> {
        let c = &self.model.config;
        let opts = NormOpts {
            accumulate,
            rows: Rows::Tokens,
            when,
            subgroups: true,
            y_cols: None,
        };
        let d = kernels::rmsnorm(
            self.gpu,
            x,
            weight,
            y,
            &self.a.step,
            c.n_embd,
            c.rms_eps,
            opts,
        )?;
        self.d.push(d);
        Ok(())
    }

    /// `y = W RMSNorm(x) (+ bias)`: the norm in the matvec's prologue for decode, and in the
    /// small-batch kernel's where the small passes take `w` on f32 x; quantized with the norm for
    /// the small passes on int8 x'; otherwise the norm into `xn`, then the product. `later_xn`:
    /// the batched passes (the long ones among them) in which later dispatches read xn too.
    /// `decode`: whether decode passes take the product here at all.
    fn normed_mat(
        &mut self,
        w: &GpuWeight,
        norm_w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        bias: Option<&wgpu::Buffer>,
        later_xn: Option<When>,
        decode: bool,
    ) -> Result<()> {
        let (eps, a) = (self.model.config.rms_eps, self.a);
        let norm = Some((norm_w, eps));
        let (any_q8, all_q8) = self.small_q8(w);
        let small_prologue = !any_q8;
        let fused = if small_prologue {
            [When::Decode, When::Small].as_slice()
        } else {
            &[When::Decode]
        };
        for &when in fused.iter().filter(|&&w| decode || w != When::Decode) {
            let opts = MatOpts {
                bias,
                norm,
                when,
                ..Default::default()
            };
            self.mat(w, &a.x, y, &opts)?;
        }
        // The norm into xn for the long passes, the small ones where some chunks of w take int8
        // x' and others f32 x, and `later_xn`.
        let xn_when = if any_q8 && !all_q8 {
            When::Batch
        } else {
            later_xn.unwrap_or(When::Large)
        };
        let x_q8 = self.normed_input(w, norm_w, xn_when)?;
        let batch = MatOpts {
            bias,
            when: if small_prologue {
                When::Large
            } else {
                When::Batch
            },
            ..Default::default()
        };
        self.mat_from(w, &a.xn, x_q8, y, &batch)
    }

    /// A batched pass's input to `w`, RMSNorm(x) * `norm_w`: quantized with the norm for the
    /// small passes where `w` takes int8 x' (returned), and into `xn` for the passes `xn_when`
    /// (the long ones among them).
    fn normed_input(
        &mut self,
        w: &GpuWeight,
        norm_w: &wgpu::Buffer,
        xn_when: When,
    ) -> Result<Option<&'a wgpu::Buffer>> {
        let (eps, a) = (self.model.config.rms_eps, self.a);
        let x_q8 = self
            .small_q8(w)
            .0
            .then(|| self.quantize(&a.x, w.n_cols, Rows::Tokens, Q8From::Norm(norm_w, eps)))
            .transpose()?;
        self.norm(&a.x, norm_w, &a.xn, false, xn_when)?;
        Ok(x_q8)
    }

    /// `x += W input`, or through the post-norm where the model has one (Gemma):
    /// `x += RMSNorm(W input)`. `input_q8`: the small passes' input, already quantized (then
    /// they do not read `input`).
    fn residual(
        &mut self,
        w: &GpuWeight,
        post_norm: &Option<wgpu::Buffer>,
        input: &wgpu::Buffer,
        input_q8: Option<&'a wgpu::Buffer>,
    ) -> Result<()> {
        let a = self.a;
        let (y, accumulate) = match post_norm {
            None => (&a.x, true),
            Some(_) => (&a.tmp, false),
        };
        let opts = MatOpts {
            accumulate,
            x_q8: input_q8,
            ..Default::default()
        };
        self.mat(w, input, y, &opts)?;
        match post_norm {
            Some(pn) => self.norm(&a.tmp, pn, &a.x, true, When::Always),
            None => Ok(()),
        }
    }
}
