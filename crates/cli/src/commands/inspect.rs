//! `genai-bridge inspect`: what a model folder holds — config, graph inputs and outputs, op
//! histogram and weight bytes.

use crate::args::InspectArgs;
use anyhow::Result;
use serde_json::json;

pub fn run(args: &InspectArgs) -> Result<()> {
    let config = genai_runtime::load_config(&args.model_dir)?;
    let model = genai_runtime::load_graph(&config)?;
    let report = model.report();
    let plan = genai_frontend::lift(&model, &config);
    let decoder = &config.model.decoder;
    if args.json {
        let output = json!({
            "model_dir": args.model_dir.display().to_string(),
            "config": {
                "type": config.model.model_type,
                "vocab_size": config.model.vocab_size,
                "context_length": config.model.context_length,
                "hidden_size": decoder.hidden_size,
                "num_hidden_layers": decoder.num_hidden_layers,
                "num_attention_heads": decoder.num_attention_heads,
                "num_key_value_heads": decoder.num_key_value_heads,
                "head_size": decoder.head_size,
                "eos_token_ids": config.model.eos_token_ids,
                "providers": decoder.session_options.provider_options.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                "unsupported": config.unsupported,
            },
            "graph": report,
            "plan": match &plan {
                Ok(plan) => json!({ "lifted": true, "plan": plan, "summary": plan.summary() }),
                Err(why) => json!({ "lifted": false, "node": why.node, "op_type": why.op_type, "reason": why.reason }),
            },
        });
        println!("{}", serde_json::to_string_pretty(&output)?);
        return Ok(());
    }
    println!("model folder: {}", args.model_dir.display());
    println!(
        "type {}; {} layers, hidden {}, {} heads ({} KV) of {}, vocab {}, context {}",
        config.model.model_type,
        decoder.num_hidden_layers,
        decoder.hidden_size,
        decoder.num_attention_heads,
        decoder.num_key_value_heads,
        decoder.head_size,
        config.model.vocab_size,
        config.model.context_length
    );
    for section in &config.unsupported {
        println!("not run by genai-bridge: {section}");
    }
    println!("{report}");
    match &plan {
        Ok(plan) => println!(
            "decoder plan (native backend can run it):\n{}",
            plan.summary()
        ),
        Err(why) => println!("not liftable to a decoder plan (ONNX Runtime only): {why}"),
    }
    Ok(())
}
