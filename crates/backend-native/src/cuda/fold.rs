//! The RMS norms between a decode step's dense linears, folded into the linears around them
//! (`ROW_NORM` / `ROW_RESIDUAL` in kernels/prelude.cuh): the linear before a norm adds its
//! output into the residual row itself, and each block of the linears after it computes the
//! norm's scale from that row exactly as the norm launch would (`row_rms_scale`) and normalises
//! the row as it reads it. A decode step then has no norm launch between layers (two fewer
//! launches a layer), with the same bits as with them.

use genai_frontend::{DecoderPlan, Layer, Linear, Mlp, Norm, NormKind, Qkv, Weight};

/// Set to `1` to fold both norms of every layer, `attn` or `mlp` to fold only the norms before
/// the attention (and the down projection's residual add before them) or only those before the
/// MLP. Unset or anything else: no fold (every norm a launch of its own). An experiment switch,
/// off by default (CUDA_NOTES round 24).
pub const NORM_FOLD_ENV: &str = "GENAI_BRIDGE_NORM_FOLD";

/// Which of a layer's norms a one-row step folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FoldAt {
    /// The norm before the attention (after the previous layer's down projection).
    pub attn: bool,
    /// The norm before the MLP (after the output projection).
    pub mlp: bool,
}

impl FoldAt {
    pub const NONE: FoldAt = FoldAt {
        attn: false,
        mlp: false,
    };

    /// The norms [`NORM_FOLD_ENV`]'s value names (unset or anything else: none).
    fn named(value: Option<&str>) -> FoldAt {
        match value.map(str::trim) {
            Some("1") => FoldAt {
                attn: true,
                mlp: true,
            },
            Some("attn") => FoldAt {
                attn: true,
                mlp: false,
            },
            Some("mlp") => FoldAt {
                attn: false,
                mlp: true,
            },
            _ => FoldAt::NONE,
        }
    }
}

/// The norms this model's one-row steps fold: those [`NORM_FOLD_ENV`] names where the hidden
/// width is one the norm kernel takes (at most 8,192) and every layer [`layer_folds`], else
/// none.
pub(crate) fn folds_norms(plan: &DecoderPlan) -> FoldAt {
    let at = FoldAt::named(std::env::var(NORM_FOLD_ENV).ok().as_deref());
    if plan.layers.is_empty() || plan.dims.hidden > 8192 || !plan.layers.iter().all(layer_folds) {
        return FoldAt::NONE;
    }
    at
}

/// Whether a layer's two norms can fold: both RMS without a bias, and every linear that reads
/// or feeds them (q/k/v, the MLP's first linears, the output and down projections) dense, so
/// each has the norm and residual entries.
pub(crate) fn layer_folds(layer: &Layer) -> bool {
    let rms = |n: &Norm| n.kind == NormKind::Rms && n.bias.is_none();
    let dense = |l: &Linear| matches!(l.weight, Weight::Dense { .. });
    let qkv: Vec<&Linear> = match &layer.attention.qkv {
        Qkv::Fused { linear, .. } => vec![linear],
        Qkv::Separate { q, k, v } => vec![q, k, v],
    };
    let mlp: Vec<&Linear> = match &layer.mlp {
        Mlp::Gated { gate, up, down, .. } => vec![gate, up, down],
        Mlp::GatedFused { gate_up, down, .. } => vec![gate_up, down],
        Mlp::Plain { up, down, .. } => vec![up, down],
    };
    rms(&layer.attn_norm)
        && rms(&layer.mlp_norm)
        && qkv.into_iter().chain(mlp).all(dense)
        && dense(&layer.attention.output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str) -> genai_frontend::Tensor {
        genai_frontend::Tensor {
            name: name.into(),
            dtype: genai_frontend::WeightDType::F16,
            dims: vec![8, 8],
        }
    }

    fn linear(name: &str, int4: bool) -> Linear {
        let weight = if int4 {
            Weight::Int4(genai_frontend::Int4Weight {
                packed: name.into(),
                scales: tensor("scales"),
                zero_points: None,
                k: 8,
                n: 8,
                block_size: 32,
                accuracy_level: 4,
            })
        } else {
            Weight::Dense {
                tensor: tensor(name),
                transposed: false,
            }
        };
        Linear {
            weight,
            bias: None,
            k: 8,
            n: 8,
        }
    }

    fn rms() -> Norm {
        Norm {
            kind: NormKind::Rms,
            weight: tensor("g"),
            bias: None,
            epsilon: 1e-6,
        }
    }

    /// A Llama-like layer: RMS norms, separate q/k/v, a gated MLP; `int4` names the linear
    /// stored as MatMulNBits (or none).
    fn layer(int4: &str) -> Layer {
        let l = |name: &str| linear(name, name == int4);
        Layer {
            attn_norm: rms(),
            attention: genai_frontend::Attention {
                qkv: Qkv::Separate {
                    q: l("q"),
                    k: l("k"),
                    v: l("v"),
                },
                q_norm: None,
                k_norm: None,
                output: l("o"),
                heads: 1,
                kv_heads: 1,
                head_size: 8,
                scale: 1.0,
                rotary: false,
                window: None,
                softcap: None,
            },
            mlp_norm: rms(),
            mlp: Mlp::Gated {
                gate: l("gate"),
                up: l("up"),
                down: l("down"),
                activation: genai_frontend::Activation::Silu,
            },
        }
    }

    #[test]
    fn a_layer_folds_only_with_bias_free_rms_norms_and_every_linear_dense() {
        assert!(layer_folds(&layer("")));
        for int4 in ["q", "k", "v", "o", "gate", "up", "down"] {
            assert!(!layer_folds(&layer(int4)), "{int4} as int4");
        }
        let mut layer_norm = layer("");
        layer_norm.mlp_norm.kind = NormKind::Layer;
        assert!(!layer_folds(&layer_norm));
        let mut biased = layer("");
        biased.attn_norm.bias = Some(tensor("beta"));
        assert!(!layer_folds(&biased));
    }

    #[test]
    fn the_switch_names_the_folded_norms() {
        let both = FoldAt {
            attn: true,
            mlp: true,
        };
        assert_eq!(FoldAt::named(None), FoldAt::NONE);
        assert_eq!(FoldAt::named(Some(" 1")), both);
        assert_eq!(FoldAt::named(Some("0")), FoldAt::NONE);
        assert_eq!(FoldAt::named(Some("yes")), FoldAt::NONE);
        assert!(FoldAt::named(Some("attn")).attn && !FoldAt::named(Some("attn")).mlp);
        assert!(!FoldAt::named(Some("mlp")).attn && FoldAt::named(Some("mlp")).mlp);
    }
}
