#!/usr/bin/env python3
"""Baseline decode speed of the official ONNX Runtime GenAI runtime on one model folder (CPU).

usage: python models/bench_ort_genai.py MODEL_DIR [--prompt-tokens 128] [--decode-tokens 64]
           [--threads 2] [--runs 3] [--warmup 1] [--seed 0]
needs: onnxruntime-genai==0.18.0, onnxruntime==1.31.1, numpy (models/requirements-bench.txt)

Made for the folders of models/make_bench_models.py (random weights of real shapes), but works on any
ORT GenAI decoder folder. It loads the model with the CPU provider only (`og.Config(dir)`,
`clear_providers()`) and sets the session's intra-op thread count with a config overlay
(`{"model": {"decoder": {"session_options": {"intra_op_num_threads": N}}}}`, the
genai_config.json key). Each run: a seeded random prompt of --prompt-tokens ids below the
tokenizer's vocab size (tokenizer.json beside the model), greedy (do_sample false) with
max_length = min_length = prompt + decode (so EOS cannot end it early), then
  t0 append_tokens(prompt)  t1 generate_next_token()  t2 generate_next_token() ... (decode-1 more)
append_tokens runs the prompt's forward pass; the first generate_next_token only samples from its
logits; each later one runs one decode step and samples. So:
  ttft_ms        t2 - t0 (median over the timed runs)
  prefill_tok_s  prompt_tokens / (t1 - t0)  (median over the timed runs)
  decode_ms_median, decode_ms_p90   over all per-token latencies of the later generate_next_token
                 calls in all timed runs (decode_tokens - 1 per run)
  decode_tok_s   1000 / decode_ms_median
  decode_tok_s_mean  (decode_tokens - 1) / total time of those calls, median over runs
--warmup runs (untimed) come first: the first run allocates the KV buffer and warms the arenas.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def tokenizer_vocab(model_dir: Path):
    tj = json.loads((model_dir / "tokenizer.json").read_text())
    ids = list(tj["model"]["vocab"].values()) + [t["id"] for t in tj.get("added_tokens", [])]
    return max(ids) + 1


def describe(model_dir: Path, cfg):
    """(model name, precision) from bench_model.json (make_bench_models.py) or the graph itself."""
    info = model_dir / "bench_model.json"
    if info.exists():
        d = json.loads(info.read_text())
        return d["model"], d["precision"]
    import onnx

    m = onnx.load(str(model_dir / cfg["model"]["decoder"]["filename"]), load_external_data=False)
    ops = {n.op_type for n in m.graph.node}
    if "MatMulNBits" in ops:
        bits = [a.i for n in m.graph.node if n.op_type == "MatMulNBits" for a in n.attribute if a.name == "bits"]
        precision = f"int{bits[0]}" if bits else "nbits"
    else:
        logits = [o for o in m.graph.output if o.name == "logits"][0]
        precision = {1: "fp32", 10: "fp16", 16: "bf16"}.get(logits.type.tensor_type.elem_type, "?")
    return model_dir.name, precision


def ort_version():
    try:
        import onnxruntime

        return onnxruntime.__version__
    except ImportError:
        return None


def load_model(og, model_dir: Path, device: str = "cpu", threads: int | None = None, cuda_graph: bool = False):
    """The model with one provider: the CPU (with `threads` intra-op threads when given, through a
    config overlay) or CUDA (its graph on or off). Returns (model, load seconds)."""
    config = og.Config(str(model_dir))
    config.clear_providers()
    if device == "cuda":
        config.append_provider("cuda")
        config.set_provider_option("cuda", "enable_cuda_graph", "1" if cuda_graph else "0")
    if threads:
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
    t = time.perf_counter()
    model = og.Model(config)
    return model, time.perf_counter() - t


def timed_generation(og, model, prompt, decode_tokens: int):
    """One greedy generation of exactly `decode_tokens` new tokens (min_length = max_length):
    (prefill s, TTFT s, the latencies of the decode_tokens - 1 later steps, the new token ids)."""
    total = len(prompt) + decode_tokens
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=total, min_length=total)
    gen = og.Generator(model, params)
    t0 = time.perf_counter()
    gen.append_tokens(prompt)
    t1 = time.perf_counter()
    gen.generate_next_token()
    t2 = time.perf_counter()
    lat = []
    while not gen.is_done():
        s = time.perf_counter()
        gen.generate_next_token()
        lat.append(time.perf_counter() - s)
    new = [int(t) for t in gen.get_sequence(0)[len(prompt):]]
    del gen, params
    if len(new) != decode_tokens or len(lat) != decode_tokens - 1:
        raise RuntimeError(f"generated {len(new)} tokens ({len(lat)} timed steps), expected {decode_tokens}")
    return t1 - t0, t2 - t0, lat, new


def percentile(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="timed runs (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.decode_tokens < 2:
        ap.error("--decode-tokens must be at least 2")

    import onnxruntime_genai as og

    model_dir = Path(a.model_dir).resolve()
    gcfg = json.loads((model_dir / "genai_config.json").read_text())
    name, precision = describe(model_dir, gcfg)

    model, load_s = load_model(og, model_dir, threads=a.threads)
    vocab = tokenizer_vocab(model_dir)
    prompt = np.random.default_rng(a.seed).integers(0, vocab, a.prompt_tokens).astype(np.int32)

    for _ in range(a.warmup):
        timed_generation(og, model, prompt, a.decode_tokens)
    prefill, ttft, lat_all, mean_tps = [], [], [], []
    for _ in range(a.runs):
        p, f, lat, _ = timed_generation(og, model, prompt, a.decode_tokens)
        prefill.append(p)
        ttft.append(f)
        lat_all += lat
        mean_tps.append(len(lat) / sum(lat))
    threads_os = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    med = percentile(lat_all, 50) * 1e3
    out = dict(
        model=name, precision=precision, backend="ort-genai", device="cpu", threads=a.threads,
        prompt_tokens=a.prompt_tokens, decode_tokens=a.decode_tokens,
        decode_tok_s=round(1e3 / med, 2),
        prefill_tok_s=round(a.prompt_tokens / float(np.median(prefill)), 1),
        ttft_ms=round(float(np.median(ttft)) * 1e3, 2),
        decode_ms_median=round(med, 3),
        decode_ms_p90=round(percentile(lat_all, 90) * 1e3, 3),
        decode_tok_s_mean=round(float(np.median(mean_tps)), 2),
        runs=a.runs, warmup=a.warmup, seed=a.seed, load_s=round(load_s, 2), process_threads=threads_os,
        versions=dict(onnxruntime_genai=og.__version__, onnxruntime=ort_version()),
    )
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
