#!/usr/bin/env python3
"""The peer of the weight-paging benchmark: Hugging Face accelerate CPU offload, under the same
budgets as `genai-bridge bench --budget-sweep`, on the same Hugging Face checkpoint (fp16) that
models/make_bench_models.py --keep-hf leaves beside the exported models.

For each budget percent P (largest first):
  * budget bytes = P% of the model's weight bytes as transformers counts them
    (get_memory_footprint of the model built on the meta device; computed once);
  * load with from_pretrained(dtype=float16, device_map="auto",
    max_memory={0: budget bytes, "cpu": CPU_MEM}); what does not fit stays in host memory and
    accelerate's hooks copy it to the GPU for every forward pass;
  * a short warm-up (8-token prompt, 2 tokens), then greedy decoding after a PROMPT-token random
    prompt with a DynamicCache: TTFT = the prompt's forward pass and the first argmax, decode tok/s
    = decode steps / their time (CUDA synchronize + perf_counter around each phase);
  * one JSON line: backend "hf-accelerate-offload", model, precision, budget_fraction, decode_tok_s,
    ttft_ms, offloaded_bytes (parameter bytes on "cpu"/"disk" per the device map), ...
  * the model is deleted and the CUDA cache emptied before the next budget.

Wall time: accelerate offload copies from pageable memory on every step, so a low budget runs at
a few tokens per second or less. The decode length is DECODE_PEER (env, default 32) or --decode,
and every line says over how many decode steps its rate was measured. With --deadline-s, each
budget gets an equal share of the time left; decoding stops early (after at least 3 steps) when the
share is spent, and budgets that cannot start in time are reported as skipped.

usage: python3 benches/paging_peer.py --hf-dir DIR [--model NAME] [--budgets 100,75,50,25,10]
       [--prompt 128] [--decode N] [--deadline-s S] [--cpu-mem 120GiB] [--seed 0]
needs: torch (CUDA), transformers, accelerate; runs offline.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BACKEND = "hf-accelerate-offload"
DEVICE = "cuda:0"  # accelerate's main device: inputs go here, offloaded weights are copied here


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def emit(**kw):
    print(json.dumps(kw), flush=True)


def log(msg):
    print(f"[peer] {msg}", file=sys.stderr, flush=True)


def weight_bytes(hf_dir, dtype):
    """Parameter (+ buffer) bytes of the model as transformers counts them, without loading it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(hf_dir)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    params = sum(p.numel() * p.element_size() for p in m.parameters())
    try:
        total = int(m.get_memory_footprint())
    except Exception:  # older/newer API: fall back to the parameters
        total = params
    vocab = int(getattr(cfg, "vocab_size", 32000))
    del m
    return total, params, vocab


def offloaded_bytes(model):
    """Parameter bytes whose module the device map puts on the host ("cpu") or on disk."""
    dm = getattr(model, "hf_device_map", None) or {}
    keys = sorted(dm, key=len, reverse=True)  # longest prefix first

    def device_of(name):
        for k in keys:
            if k == "" or name == k or name.startswith(k + "."):
                return dm[k]
        return None

    off = 0
    for name, p in model.named_parameters():
        if str(device_of(name)) in ("cpu", "disk"):
            off += p.numel() * p.element_size()
    return off, sorted({str(v) for v in dm.values()})


def greedy(model, prompt, n, stop_at=None, min_steps=3):
    """Prompt forward + argmax (TTFT), then up to n-1 greedy decode steps. Returns
    (ttft_s, decode_steps, decode_s)."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([prompt], device=DEVICE)
        sync()
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        past = out.past_key_values
        del out
        sync()
        t1 = time.perf_counter()
        steps = 0
        for _ in range(n - 1):
            out = model(input_ids=nxt.to(DEVICE), past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
            del out
            steps += 1
            if stop_at is not None and steps >= min_steps and time.perf_counter() > stop_at:
                break
        sync()
        t2 = time.perf_counter()
    del past, nxt, ids
    return t1 - t0, steps, t2 - t1


def free_cuda():
    import torch

    gc.collect()
    sync()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hf-dir", required=True, help="the Hugging Face checkpoint (fp16)")
    ap.add_argument("--model", default=None, help="model name for the JSON lines (default: the folder name)")
    ap.add_argument("--budgets", default="100,75,50,25,10", help="percent of the weight bytes, comma list")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=int(os.environ.get("DECODE_PEER", "32")),
                    help="tokens generated per budget, the first from the prompt (default: env DECODE_PEER or 32)")
    ap.add_argument("--deadline-s", type=float, default=0.0, help="wall-time cap for the whole run (0: none)")
    ap.add_argument("--cpu-mem", default="120GiB")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    try:
        import accelerate
        acc_version = accelerate.__version__
    except ImportError:
        acc_version = None
    start = time.perf_counter()
    budgets = [float(b) for b in a.budgets.replace(" ", ",").split(",") if b]
    budgets.sort(reverse=True)
    name = a.model or os.path.basename(os.path.normpath(a.hf_dir))
    dtype = torch.float16
    total, params, vocab = weight_bytes(a.hf_dir, dtype)
    rng = random.Random(a.seed)
    hi = max(4, min(vocab, 32000))
    prompt = [rng.randrange(3, hi) for _ in range(a.prompt)]
    warm_prompt = prompt[:8]
    device_name = torch.cuda.get_device_name(0)
    base = dict(kind="peer", backend=BACKEND, model=name, precision="fp16", device="cuda", batch=1,
                prompt_tokens=a.prompt, decode_tokens=a.decode, weight_bytes=total, weight_param_bytes=params,
                gpu=device_name, versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                                               accelerate=acc_version))
    log(f"{name}: {total / 1e9:.2f} GB of weights as transformers counts them; budgets {budgets}; "
        f"{a.decode} tokens per budget")
    last_cost = None
    for i, pct in enumerate(budgets):
        frac = pct / 100.0
        budget = int(total * frac)
        line = dict(base, budget_fraction=frac, budget_bytes=budget)
        elapsed = time.perf_counter() - start
        left = a.deadline_s - elapsed if a.deadline_s > 0 else None
        if left is not None:
            need = 30.0 if last_cost is None else min(last_cost, 90.0)
            if left < need:
                for rest in budgets[i:]:
                    emit(**dict(base, budget_fraction=rest / 100.0, budget_bytes=int(total * rest / 100.0)),
                         skipped=True, reason=f"deadline: {left:.0f} s left of {a.deadline_s:.0f} s")
                break
        share = None if left is None else left / (len(budgets) - i)
        t_budget = time.perf_counter()
        model = None
        try:
            t = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(
                a.hf_dir, dtype=dtype, device_map="auto", max_memory={0: budget, "cpu": a.cpu_mem})
            model.eval()
            load_s = time.perf_counter() - t
            off, devices = offloaded_bytes(model)
            torch.cuda.reset_peak_memory_stats()
            greedy(model, warm_prompt, 2)
            stop_at = None if share is None else t_budget + share
            ttft, steps, dec_s = greedy(model, prompt, a.decode, stop_at=stop_at)
            peak = torch.cuda.max_memory_allocated() / 2**20
            rate = steps / dec_s if dec_s > 0 and steps > 0 else None
            emit(**line, decode_tok_s=None if rate is None else round(rate, 3), ttft_ms=round(ttft * 1e3, 2),
                 decode_steps_measured=steps, offloaded_bytes=off, gpu_weight_bytes=total - off,
                 offloaded_fraction=round(off / total, 4) if total else None, devices=devices,
                 load_s=round(load_s, 2), peak_device_mb=round(peak, 1),
                 seconds=round(time.perf_counter() - t_budget, 1),
                 note=f"decode rate over {steps} decode steps (DECODE_PEER={a.decode} tokens incl. the first, "
                      f"which comes from the {a.prompt}-token prompt and is timed as TTFT)"
                      + ("; stopped early by the deadline" if steps < a.decode - 1 else ""))
        except Exception as e:  # e.g. out of memory at a tiny budget: report it, go on
            emit(**line, error=f"{type(e).__name__}: {str(e)[:400]}")
        finally:
            del model
            free_cuda()
        last_cost = time.perf_counter() - t_budget
    return 0


if __name__ == "__main__":
    sys.exit(main())
