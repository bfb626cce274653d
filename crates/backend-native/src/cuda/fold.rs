//! The RMS norms between a decode step's dense linears, folded into the linears around them
//! (`ROW_NORM` / `ROW_RESIDUAL` in kernels/prelude.cuh). An RMS norm scales its row by one
//! scalar r = 1 / sqrt(mean(s^2) + eps) and then by its weight g, so the linear after it gives
//! sum_i W_ji g_i s_i r = r sum_i (W_ji g_i) s_i: with g multiplied into W's rows at load, a
//! one-row launch reads the raw residual s, sums s^2 beside its products and applies r to each
//! output, and the linear before the norm adds its output into the residual itself. A decode
//! step then has no norm launch between layers (two fewer launches a layer).
//!
//! The norm launches that remain (prompts, the final norm, any step that does not fold) run
//! with a unit weight, so the scaled weights serve every path. Not the unfolded step's bits:
//! the normed row is no longer rounded value by value, and W g is rounded to W's precision.
//! Off by default ([`NORM_FOLD_ENV`]; CUDA_NOTES round 24 has the measurements).

use crate::cuda::host::{HostLinear, HostWeight};
use crate::error::Error;
use genai_frontend::{DecoderPlan, Layer, Linear, Mlp, Norm, NormKind, Qkv, Weight};

/// Set to `1` to fold both norms of every layer, `attn` or `mlp` to fold only the norms before
/// the attention (and the down projection's residual add before them) or only those before the
/// MLP. Unset or anything else: no fold (every norm a launch of its own, the weights as
/// stored). An experiment switch, off by default: on the H200 (CUDA_NOTES round 24) the fold
/// is +9% on Qwen2.5-1.5B but -1 to -2% on Qwen2.5-0.5B and Llama-3-8B, and the folded norm
/// before the attention breaks the bf16 parity limits (top-1 96%).
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

/// The norms this model's one-row steps fold (their weights then go into the linears after
/// them at load): those [`NORM_FOLD_ENV`] names where every layer [`layer_folds`], else none.
pub(crate) fn folds_norms(plan: &DecoderPlan) -> FoldAt {
    let at = FoldAt::named(std::env::var(NORM_FOLD_ENV).ok().as_deref());
    if plan.layers.is_empty() || !plan.layers.iter().all(layer_folds) {
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

/// Multiplies each row of a dense layer (`[n, k]`) by the norm weight `g` (k values) along k,
/// rounding each product to the stored precision.
pub(crate) fn scale_inputs(layer: &mut HostLinear, g: &[f32]) -> Result<(), Error> {
    let k = layer.k;
    let HostWeight::Dense { kernel, nk } = &mut layer.weight else {
        return Err(Error::Invalid {
            what: "norm fold",
            why: "only a dense layer takes the norm's weight".into(),
        });
    };
    let size = if *kernel == "gemv_f32" { 4 } else { 2 };
    if g.len() != k || nk.len() != layer.n * k * size {
        return Err(Error::Invalid {
            what: "norm fold",
            why: format!(
                "a norm of {} values before a layer of {k} inputs ({} bytes)",
                g.len(),
                nk.len()
            ),
        });
    }
    let scale: fn(&mut [u8], f32) = match *kernel {
        "gemv_f32" => |v, g| {
            let x = f32::from_le_bytes([v[0], v[1], v[2], v[3]]) * g;
            v.copy_from_slice(&x.to_le_bytes());
        },
        "gemv_bf16" => |v, g| {
            let x = half::bf16::from_le_bytes([v[0], v[1]]).to_f32() * g;
            v.copy_from_slice(&half::bf16::from_f32(x).to_le_bytes());
        },
        _ => |v, g| {
            let x = half::f16::from_le_bytes([v[0], v[1]]).to_f32() * g;
            v.copy_from_slice(&half::f16::from_f32(x).to_le_bytes());
        },
    };
    let row = k * size;
    let rows_per_thread = layer
        .n
        .div_ceil(std::thread::available_parallelism().map_or(1, |p| p.get()))
        .max(64);
    std::thread::scope(|s| {
        for chunk in nk.chunks_mut(rows_per_thread * row) {
            s.spawn(move || {
                for r in chunk.chunks_exact_mut(row) {
                    for (v, &gi) in r.chunks_exact_mut(size).zip(g) {
                        scale(v, gi);
                    }
                }
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(kernel: &'static str, n: usize, k: usize, values: &[f32]) -> HostLinear {
        let nk = match kernel {
            "gemv_f32" => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            "gemv_bf16" => values
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
            _ => values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
        };
        HostLinear {
            weight: HostWeight::Dense { kernel, nk },
            bias: None,
            k,
            n,
        }
    }

    fn values(layer: &HostLinear) -> Vec<f32> {
        let HostWeight::Dense { kernel, nk } = &layer.weight else {
            panic!("dense");
        };
        match *kernel {
            "gemv_f32" => nk
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "gemv_bf16" => nk
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            _ => nk
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }

    #[test]
    fn each_row_is_scaled_along_k_and_rounded_to_its_precision() {
        // 300 rows of 5: several threads' chunks, and a last chunk shorter than the others.
        let (n, k) = (300, 5);
        let w: Vec<f32> = (0..n * k).map(|i| (i % 17) as f32 * 0.37 - 2.9).collect();
        let g = [0.5, -1.25, 3.0, 0.1, 1.0];
        for kernel in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            let mut layer = dense(kernel, n, k, &w);
            let stored = values(&layer);
            scale_inputs(&mut layer, &g).expect("a dense layer");
            let round = |x: f32| match kernel {
                "gemv_f32" => x,
                "gemv_bf16" => half::bf16::from_f32(x).to_f32(),
                _ => half::f16::from_f32(x).to_f32(),
            };
            let want: Vec<f32> = (0..n * k).map(|i| round(stored[i] * g[i % k])).collect();
            assert_eq!(values(&layer), want, "{kernel}");
        }
    }

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

    #[test]
    fn a_norm_of_the_wrong_width_or_an_int4_layer_is_an_error() {
        let mut layer = dense("gemv_f16", 2, 4, &[1.0; 8]);
        let err = scale_inputs(&mut layer, &[1.0; 3]).expect_err("3 values for 4 inputs");
        assert!(err.to_string().contains("3 values"), "{err}");
        let mut int4 = HostLinear {
            weight: HostWeight::Int4 {
                packed: vec![0; 4],
                scales: vec![1.0],
                zp_u8: None,
                zp_f32: None,
                block: 8,
                int8: false,
                prompt: crate::cuda::blas::GemmType::F16,
            },
            bias: None,
            k: 8,
            n: 1,
        };
        assert!(scale_inputs(&mut int4, &[1.0; 8]).is_err());
    }
}
