//! The precision a decoder plan stores its weights in, which picks the parity tolerance.

use genai_frontend::{DecoderPlan, Weight, WeightDType};
use genai_parity::Precision;

/// The weights' precision as the plan stores them: int4 when any linear is 4-bit (a builder
/// model may keep its lm_head, or other nodes, out of the quantization), else the lm_head's
/// element type.
pub fn precision_of(plan: &DecoderPlan) -> Precision {
    let any_int4 = plan
        .linears()
        .iter()
        .any(|linear| matches!(linear.weight, Weight::Int4(_)));
    match &plan.lm_head.weight {
        Weight::Dense { tensor, .. } if !any_int4 => match tensor.dtype {
            WeightDType::F32 => Precision::Fp32,
            WeightDType::F16 => Precision::Fp16,
            WeightDType::BF16 => Precision::Bf16,
        },
        _ => Precision::Int4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genai_config::Config;
    use genai_onnx::OnnxModel;

    fn fixture(name: &str) -> (Config, OnnxModel) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/fixtures")
            .join(name);
        let config = Config::load(&dir).expect("fixture config");
        let model = OnnxModel::load(&config.decoder_path()).expect("fixture graph");
        (config, model)
    }

    #[test]
    fn a_plan_with_any_four_bit_linear_is_int4_whatever_its_lm_head() {
        let (config, model) = fixture("qwen2-int4-cpu");
        let mut plan = genai_frontend::lift(&model, &config).expect("int4 fixture lifts");
        assert_eq!(precision_of(&plan), Precision::Int4);
        let (config, model) = fixture("qwen2-fp32-cpu");
        let dense = genai_frontend::lift(&model, &config).expect("fp32 fixture lifts");
        assert_eq!(precision_of(&dense), Precision::Fp32);
        // The builder can keep the lm_head out of the quantization: the layers stay 4-bit.
        plan.lm_head = dense.lm_head.clone();
        assert!(matches!(plan.lm_head.weight, Weight::Dense { .. }));
        assert_eq!(precision_of(&plan), Precision::Int4);
    }
}
