//! `genai-bridge plot`: the budget-sweep SVG (`bench --plot`) drawn again from recorded
//! `bench --budget-sweep --json` lines, e.g. the ones kept in benches/results/.

use crate::args::PlotArgs;
use crate::plot;
use anyhow::{Context, Result, bail};
use serde_json::Value;

pub fn run(args: &PlotArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.lines)
        .with_context(|| format!("reading {}", args.lines.display()))?;
    let mut rows: Vec<(String, String, plot::Point)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: not JSON", args.lines.display(), i + 1))?;
        let Some(fraction) = v["budget_fraction"].as_f64() else {
            continue; // not a sweep line (a resident run, a note)
        };
        let Some(tokens_per_s) = v["decode_tok_s"].as_f64() else {
            bail!(
                "{} line {}: a sweep line without decode_tok_s",
                args.lines.display(),
                i + 1
            );
        };
        let text_of = |key: &str| v[key].as_str().unwrap_or_default().to_string();
        rows.push((
            text_of("model"),
            format!("{} (commit {})", text_of("precision"), text_of("commit")),
            plot::Point {
                budget_percent: fraction * 100.0,
                tokens_per_s,
                pcie_limit_tok_s: v["pcie_limit_tok_s"].as_f64(),
            },
        ));
    }
    let mut models: Vec<&str> = rows.iter().map(|(m, _, _)| m.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let model = match (&args.model, models.as_slice()) {
        (Some(m), _) => m.clone(),
        (None, [one]) => one.to_string(),
        (None, []) => bail!("{}: no budget-sweep lines", args.lines.display()),
        (None, many) => bail!(
            "{} holds sweeps of several models ({}): choose one with --model",
            args.lines.display(),
            many.join(", ")
        ),
    };
    let chosen: Vec<&(String, String, plot::Point)> =
        rows.iter().filter(|(m, _, _)| *m == model).collect();
    let Some((_, what, _)) = chosen.first() else {
        bail!("{}: no budget-sweep lines of {model}", args.lines.display());
    };
    let points: Vec<plot::Point> = chosen.iter().map(|(_, _, p)| *p).collect();
    let title = format!("{model} {what}: decode, batch 1");
    std::fs::write(&args.out, plot::svg(&title, &points))
        .with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}
