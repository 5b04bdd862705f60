//! The feed-forward blocks of the forward pass ([`super::Recorder`]): the dense FFN, the mixture
//! of experts with its shared expert, and their common input side (gate, up and activation).

use crate::kernels::{self, moe, GpuWeight, MatOpts, Q8From, Rows, When};
use crate::model::{DenseFfn, Layer, MoeFfn};
use crate::{Error, Result};

use super::Recorder;

impl<'a> Recorder<'a> {
    /// Dense FFN: `hidden = act(G x') * (U x')` with `x' = RMSNorm(x)`, then `x += D hidden`.
    pub(super) fn dense_ffn(&mut self, l: &Layer, f: &DenseFfn) -> Result<()> {
        let x_q8 = self.ffn_in(l, f, true, Some(&f.down))?;
        self.residual(&f.down, &l.post_ffn_norm, &self.a.hidden, x_q8)
    }

    /// Mixture of experts: router logits from `RMSNorm(x)`, then the routed experts on the GPU
    /// ([`moe::routed`]: top-k and weights, the k experts' gate/up and down, their weighted sum
    /// added to `x`), and the shared expert beside them.
    pub(super) fn moe_ffn(&mut self, il: u32, l: &Layer, m: &MoeFfn) -> Result<()> {
        let (c, a) = (&self.model.config, self.a);
        let (Some(mc), Some(mb)) = (&c.moe, &a.moe) else {
            return Err(Error::InvalidArgument(
                "an MoE layer in a model without MoE metadata".into(),
            ));
        };
        // xn for the passes whose experts read it (past the per-route kernels' tokens), and for
        // the small ones where the shared expert does.
        let later_xn = match &m.shared {
            Some(sh) if !kernels::takes_glu_small(self.gpu, &sh.gate_up) => When::Batch,
            _ => When::MoreThan(moe::PER_ROUTE_MAX),
        };
        // Where the router folds into the attention output, decode steps route from its shares.
        let share_at = self.share_at(il).map(|s| s.0);
        let decode = share_at.is_none();
        self.normed_mat(
            &m.router,
            &l.ffn_norm,
            &mb.logits,
            None,
            Some(later_xn),
            decode,
        )?;
        // The shared expert's input side reads x (or xn), so it goes before anything adds to x.
        if let Some(sh) = &m.shared {
            self.ffn_in(l, sh, false, None)?;
        }
        let routed = moe::routed(
            self.gpu,
            &mc.routing,
            m.bias.as_ref(),
            &m.gate_up,
            &m.down,
            &a.x,
            Some((&l.ffn_norm, c.rms_eps)),
            &a.xn,
            &a.x,
            mb,
            share_at,
            &a.step,
            &a.dummy,
            c.activation,
            None,
        )?;
        self.d.extend(routed);
        if let Some(sh) = &m.shared {
            self.residual(&sh.down, &l.post_ffn_norm, &a.hidden, None)?;
        }
        Ok(())
    }

    /// The FFN's input side into `hidden`: one fused matvec (norm, gate, up, activation) for
    /// decode when gate and up share a buffer, and one small-batch dispatch for the small passes
    /// where they also take f32 x ([`kernels::glu_small`]), both from x; for the other batches
    /// the norm into `xn` (unless `batch_norm` is false: an earlier dispatch of this layer made
    /// it), the matmul and the activation. `down`: the product that reads `hidden` next, at once;
    /// where the small passes take it on int8 x' only, they quantize the activation of gate/up
    /// for it instead of writing `hidden` (returned: its `x_q8`).
    fn ffn_in(
        &mut self,
        l: &Layer,
        f: &DenseFfn,
        batch_norm: bool,
        down: Option<&GpuWeight>,
    ) -> Result<Option<&'a wgpu::Buffer>> {
        let (c, a) = (&self.model.config, self.a);
        let norm = Some((&l.ffn_norm, c.rms_eps));
        let fused = kernels::matvec_glu(
            self.gpu,
            &f.gate_up,
            &a.x,
            &a.hidden,
            &a.dummy,
            norm,
            c.activation,
        )?;
        // The small passes on f32 x take the norm, gate/up and activation in one dispatch too
        // (both want gate and up in one chunk, so `fused` is there where `small` is).
        let small = kernels::glu_small(
            self.gpu,
            &f.gate_up,
            &a.x,
            &a.hidden,
            &a.step,
            &a.dummy,
            norm,
            c.activation,
        )?;
        let batch_when = if small.is_some() {
            When::Large
        } else {
            When::Batch
        };
        // The small passes that write gate/up quantize its activation for `down`.
        let glu_q8 = batch_when == When::Batch && down.is_some_and(|d| self.small_q8(d).1);
        self.d.extend(small);
        let glu_when = match fused {
            Some(fd) => {
                self.d.push(fd);
                if glu_q8 {
                    When::Large
                } else {
                    batch_when
                }
            }
            None => {
                let decode = MatOpts {
                    norm,
                    when: When::Decode,
                    ..Default::default()
                };
                self.mat(&f.gate_up, &a.x, &a.gate_up, &decode)?;
                if glu_q8 {
                    When::NotSmall
                } else {
                    When::Always
                }
            }
        };
        let (any_q8, all_q8) = self.small_q8(&f.gate_up);
        // Without `batch_norm`, xn is an earlier dispatch's: small passes quantize it as it is.
        let x_q8 = if batch_norm {
            let xn_when = if batch_when == When::Batch && !all_q8 {
                When::Batch
            } else {
                When::Large
            };
            self.normed_input(&f.gate_up, &l.ffn_norm, xn_when)?
        } else if any_q8 {
            Some(self.quantize(&a.xn, f.gate_up.n_cols, Rows::Tokens, Q8From::X)?)
        } else {
            None
        };
        let batch = MatOpts {
            when: batch_when,
            ..Default::default()
        };
        self.mat_from(&f.gate_up, &a.xn, x_q8, &a.gate_up, &batch)?;
        let glu = kernels::glu(
            self.gpu,
            &a.gate_up,
            &a.hidden,
            &a.step,
            f.n_ff,
            c.activation,
            glu_when,
        )?;
        self.d.push(glu);
        let act = Q8From::Glu(c.activation);
        glu_q8
            .then(|| self.quantize(&a.gate_up, f.n_ff, Rows::Tokens, act))
            .transpose()
    }
}
