#!/usr/bin/env python3
"""The ONNX Runtime GenAI peer of benches/decode_h200.sh: the official onnxruntime-genai package
(whichever build is importable: the CUDA one on the GPU machine) on a model folder, with the CUDA
execution provider's graph off and on, batch 1, greedy, the protocol of the other rows: a prompt of
--prompt-tokens seeded random ids, --decode-tokens new tokens (min_length = max_length, so an end
token cannot stop it early), median of --runs runs after one warm-up run. One JSON line per setting
(kind "decode", engine "onnxruntime-genai", backend "ort-genai", cuda_graph true/false) is appended
to --out; a setting that fails becomes a line of kind "error".

Timing (models/bench_ort_genai.py's timed_generation, shared with the CPU baseline), with the 0.18
Python API: append_tokens(prompt) runs the prompt pass; the first
generate_next_token() only picks the first token from those logits (TTFT ends there); each later
generate_next_token() runs one decode step and picks its token (decode tok/s = those steps ÷ their
time). Prefill tok/s = prompt tokens ÷ the append_tokens time.

usage: ort_genai_peer.py MODEL_DIR --out J --model SHAPE --precision P [--device cuda|cpu]
       [--graphs 0,1] [--prompt-tokens 128] [--decode-tokens 256] [--runs 2] [--seed 0]
       [--bandwidth GBS] [--commit C] [--machine M]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
from bench_ort_genai import load_model, timed_generation  # noqa: E402
from decode_peers import append, bandwidth_of, bytes_for, commit_of, roofline  # noqa: E402


def vocab_of(model_dir: Path) -> int:
    cfg = json.loads((model_dir / "genai_config.json").read_text())
    return int(cfg["model"]["vocab_size"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", required=True, help="shape name, e.g. qwen2.5-1.5b")
    ap.add_argument("--precision", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--graphs", default="0,1", help="CUDA graph settings to run, comma separated")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bandwidth")
    ap.add_argument("--commit")
    ap.add_argument("--machine")
    a = ap.parse_args(argv)
    if a.decode_tokens < 2 or a.prompt_tokens < 1 or a.runs < 1:
        ap.error("need --prompt-tokens >= 1, --decode-tokens >= 2, --runs >= 1")

    import numpy as np
    import onnxruntime_genai as og

    bw = bandwidth_of(a.out, a.bandwidth)
    b, bsrc = bytes_for(a.out, a.model_dir.name, a.model_dir)
    rng = np.random.default_rng(a.seed)
    prompt = rng.integers(0, vocab_of(a.model_dir), a.prompt_tokens).tolist()
    base = dict(kind="decode", commit=commit_of(a.commit), machine=a.machine or a.device, model=a.model,
                model_dir=a.model_dir.name, precision=a.precision, engine="onnxruntime-genai",
                backend="ort-genai", device=a.device, batch=1, prompt_tokens=a.prompt_tokens,
                decode_tokens=a.decode_tokens, runs=a.runs, bytes_per_token=b, bytes_source=bsrc,
                measured_bandwidth_gbs=bw, graph_captures=None, graph_fallbacks=None,
                versions={"onnxruntime_genai": og.__version__, "package": getattr(og, "__id__", None)})
    tokens_by_graph = {}
    failed = 0
    for graph in [g.strip() == "1" for g in a.graphs.split(",") if g.strip()]:
        try:
            model, load_s = load_model(og, a.model_dir, a.device, cuda_graph=graph)
            timed_generation(og, model, prompt, min(a.decode_tokens, 32))  # warm-up (and the graph capture)
            runs = [timed_generation(og, model, prompt, a.decode_tokens) for _ in range(a.runs)]
            del model
        except Exception as e:  # noqa: BLE001 - recorded, then the next setting runs
            failed += 1
            append(a.out, dict(base, kind="error", cuda_graph=graph, error=f"{type(e).__name__}: {e}"[-1500:]))
            print(f"  ERROR ort-genai graph {int(graph)}: {e}", flush=True)
            continue
        tps = statistics.median(len(lat) / sum(lat) for _, _, lat, _ in runs)
        tokens = runs[0][3]
        tokens_by_graph[graph] = tokens
        extra = {}
        if graph and False in tokens_by_graph:
            off = tokens_by_graph[False]
            extra = dict(tokens_equal_graph_off=off == tokens,
                         first_diff_vs_graph_off=next((i for i, (x, y) in enumerate(zip(off, tokens)) if x != y),
                                                      None))
        line = dict(base, cuda_graph=graph, load_s=round(load_s, 1), decode_tok_s=round(tps, 2),
                    decode_tok_s_runs=[round(len(lat) / sum(lat), 2) for _, _, lat, _ in runs],
                    prefill_tok_s=round(statistics.median(a.prompt_tokens / p for p, _, _, _ in runs), 1),
                    ttft_ms=round(statistics.median(r[1] for r in runs) * 1e3, 2),
                    roofline_fraction=roofline(tps, b, bw), first_tokens=tokens[:8], **extra)
        append(a.out, line)
        print(f"  ort-genai graph {int(graph)}: decode {tps:.1f} tok/s, TTFT {line['ttft_ms']:.1f} ms", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
