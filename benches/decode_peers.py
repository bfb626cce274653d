#!/usr/bin/env python3
"""Helpers of benches/decode_h200.sh: the peers and the bookkeeping of one decode benchmark run.

Every measurement is one JSON line (kind "decode") appended to the run's decode.jsonl, with the same
fields whatever produced it (see FIELDS). Subcommands:

  bandwidth  --out J ...            device copy bandwidth (torch, two 2 GiB buffers, read + write
                                    counted), one line of kind "bandwidth"
  fill       --out J --input F ...  turns the output of `genai-bridge bench --json` into a decode line:
                                    overrides commit (BENCH_COMMIT) and machine, fills bytes_per_token,
                                    measured_bandwidth_gbs and roofline_fraction where the binary left
                                    them out; a failed run (rc != 0 or no JSON) becomes a line of kind
                                    "error" with the end of its stderr
  hf         HF_DIR --out J ...     Hugging Face transformers on the same checkpoint: "eager" (dynamic
                                    cache, eager forward) and "compiled" (StaticCache plus
                                    torch.compile(mode="reduce-overhead", fullgraph=True) of the decode
                                    step), each a manual greedy loop; TTFT, prefill and decode speed,
                                    median over --runs runs after a warm-up
  graph-dir  SRC DST                a sibling of model folder SRC whose genai_config.json asks the CUDA
                                    execution provider for its CUDA graph (enable_cuda_graph "1"); the
                                    other files are symbolic links
  probe      --out J ...            compares two `genai-bridge generate --json` outputs (ONNX Runtime
                                    route, CUDA graph off and on) and records whether the tokens agree
  note       --out J key=value ...  any other line (kind "skipped", "step", ...)

Only the Python standard library is needed, except by bandwidth and hf (torch, transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

# Fields every decode line has (None where one does not apply).
FIELDS = ("commit", "machine", "model", "model_dir", "precision", "engine", "backend", "device", "batch",
          "prompt_tokens", "decode_tokens", "runs", "decode_tok_s", "prefill_tok_s", "ttft_ms",
          "bytes_per_token", "bytes_source", "measured_bandwidth_gbs", "roofline_fraction",
          "graph_captures", "graph_fallbacks", "cuda_graph")


def append(path, obj):
    with open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")


def read_lines(path):
    rows = []
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return rows


def commit_of(args_commit, fallback=None):
    return os.environ.get("BENCH_COMMIT") or args_commit or fallback or "unknown"


def roofline(tok_s, bytes_per_token, bw_gbs):
    if not tok_s or not bytes_per_token or not bw_gbs:
        return None
    return round(tok_s * bytes_per_token / (bw_gbs * 1e9), 4)


def bytes_for(out, model_dir_name, model_folder=None, prefer_native=True):
    """The weight bytes a decode step reads for a model folder, as every row of it uses them:
    genai-bridge's own figure from this run's native line of the same folder, else the
    builder-graph count that make_bench_models.py wrote to bench_model.json."""
    if prefer_native:
        for r in reversed(read_lines(out)):
            if (r.get("kind") == "decode" and r.get("engine") == "genai-bridge" and r.get("backend") == "native"
                    and r.get("model_dir") == model_dir_name and r.get("bytes_per_token")):
                return int(r["bytes_per_token"]), "genai-bridge native weight_bytes_per_token"
    if model_folder:
        info = Path(model_folder) / "bench_model.json"
        if info.exists():
            b = json.loads(info.read_text()).get("weight_bytes_per_token")
            if b:
                return int(b), "bench_model.json weight_bytes_per_token (builder graph)"
    return None, None


def bandwidth_of(out, given):
    if given:
        return float(given)
    for r in reversed(read_lines(out)):
        if r.get("kind") == "bandwidth" and r.get("measured_bandwidth_gbs"):
            return float(r["measured_bandwidth_gbs"])
    return None


# ---------------------------------------------------------------------------------------------
def cmd_bandwidth(a):
    import torch

    n = 1 << 30  # elements of fp16: 2 GiB per buffer
    src = torch.empty(n, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    reps = 20
    t = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t) / reps
    gbs = 2 * n * 2 / dt / 1e9  # bytes read + bytes written
    del src, dst
    torch.cuda.empty_cache()
    line = dict(kind="bandwidth", commit=commit_of(a.commit), machine=a.machine, method="torch copy_, 2 GiB fp16 "
                "buffers, read+write bytes, mean of 20 after 3 warm-ups", measured_bandwidth_gbs=round(gbs, 1),
                device=torch.cuda.get_device_name(0))
    append(a.out, line)
    print(json.dumps(line))


# ---------------------------------------------------------------------------------------------
def cmd_fill(a):
    text = Path(a.input).read_text() if os.path.exists(a.input) else ""
    bench = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                bench = json.loads(line)
            except json.JSONDecodeError:
                pass
    base = dict(model=a.model, model_dir=Path(a.model_dir).name, precision=a.precision, engine="genai-bridge",
                backend=a.backend, step=a.step)
    if a.rc != 0 or bench is None:
        err = Path(a.stderr).read_text()[-1500:] if a.stderr and os.path.exists(a.stderr) else ""
        line = dict(kind="error", commit=commit_of(a.commit), machine=a.machine, **base, rc=a.rc,
                    timed_out=a.rc in (124, 137), stderr_tail=err, stdout_tail=text[-500:])
        append(a.out, line)
        print(f"  ERROR {a.step}: rc={a.rc} {err.strip().splitlines()[-1] if err.strip() else ''}"[:300])
        return
    line = dict(bench)
    line["kind"] = "decode"
    line["commit_binary"] = bench.get("commit")
    line["commit"] = commit_of(a.commit, bench.get("commit"))
    line["machine_cpu"] = bench.get("machine")
    if a.machine:
        line["machine"] = a.machine
    if bench.get("precision") and bench.get("precision") != a.precision:
        line["precision_reported"] = bench.get("precision")
    line.update(base)
    line["backend"] = bench.get("backend", a.backend)
    if line["backend"] != a.backend:
        line["route_mismatch"] = f"asked {a.backend}, ran {line['backend']}"
    # bytes per token: the binary's (bytes_per_token, else weight_bytes_per_token), else the native row
    # of the same folder in this run, else bench_model.json.
    b = bench.get("bytes_per_token") or bench.get("weight_bytes_per_token")
    src = "genai-bridge bench" if b else None
    if not b:
        b, src = bytes_for(a.out, Path(a.model_dir).name, a.model_dir)
    line["bytes_per_token"] = b
    line["bytes_source"] = src
    bw = bench.get("measured_bandwidth_gbs")
    line["bandwidth_source"] = "genai-bridge bench" if bw else "this run's torch copy"
    if not bw:
        bw = bandwidth_of(a.out, a.bandwidth)
    line["measured_bandwidth_gbs"] = bw
    if bench.get("roofline_fraction") is None or "bytes_per_token" not in bench:
        line["roofline_fraction"] = roofline(line.get("decode_tok_s"), b, bw)
    if a.backend == "native":
        line["cuda_graph_requested"] = bool(a.cuda_graph)
        line["cuda_graph"] = bool(a.cuda_graph) and (bench.get("graph_captures") or 0) > 0
    else:
        # The graph counters are the native decoder's; they say nothing about ONNX Runtime.
        line["graph_captures"] = None
        line["graph_replays"] = None
        line["graph_fallbacks"] = None
        line["cuda_graph"] = bool(a.cuda_graph)
        if a.cuda_graph_note:
            line["cuda_graph_note"] = a.cuda_graph_note
    line.setdefault("batch", 1)
    for k in FIELDS:
        line.setdefault(k, None)
    append(a.out, line)
    rf = line.get("roofline_fraction")
    print(f"  {a.step}: decode {line.get('decode_tok_s', 0):.1f} tok/s, TTFT {line.get('ttft_ms', 0):.1f} ms, "
          f"prefill {line.get('prefill_tok_s', 0):.0f} tok/s, roofline {rf if rf is not None else '-'}, "
          f"graph captures {line.get('graph_captures')} fallbacks {line.get('graph_fallbacks')}")


# ---------------------------------------------------------------------------------------------
def cmd_graph_dir(a):
    src, dst = Path(a.src).resolve(), Path(a.dst)
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        link = dst / f.name
        if f.name == "genai_config.json":
            continue
        if not link.exists() and not link.is_symlink():
            link.symlink_to(f)
    cfg = json.loads((src / "genai_config.json").read_text())
    so = cfg["model"]["decoder"].setdefault("session_options", {})
    providers = so.setdefault("provider_options", [])
    cuda = next((p for p in providers if "cuda" in p), None)
    if cuda is None:
        cuda = {"cuda": {}}
        providers.insert(0, cuda)
    cuda["cuda"]["enable_cuda_graph"] = "1"
    (dst / "genai_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    print(dst)


def cuda_graph_option(model_dir):
    """Whether a model folder's genai_config.json asks the CUDA EP for its CUDA graph."""
    try:
        cfg = json.loads((Path(model_dir) / "genai_config.json").read_text())
        for p in cfg["model"]["decoder"].get("session_options", {}).get("provider_options", []):
            if "cuda" in p:
                return str(p["cuda"].get("enable_cuda_graph", "0")) == "1"
    except (OSError, KeyError, json.JSONDecodeError):
        pass
    return False


def cmd_graph_option(a):
    print("1" if cuda_graph_option(a.dir) else "0")


def cmd_probe(a):
    def load(p):
        try:
            for line in Path(p).read_text().splitlines():
                if line.strip().startswith("{"):
                    return json.loads(line)
        except (OSError, json.JSONDecodeError):
            pass
        return None

    off, on = load(a.off), load(a.on)
    line = dict(kind="ort_graph_probe", commit=commit_of(a.commit), machine=a.machine, model=a.model,
                model_dir=a.model_dir, rc_off=a.rc_off, rc_on=a.rc_on, tokens=a.tokens)
    if off and on:
        s0, s1 = off.get("sequence", []), on.get("sequence", [])
        line["equal"] = s0 == s1
        if s0 != s1:
            line["first_diff"] = next((i for i in range(min(len(s0), len(s1))) if s0[i] != s1[i]),
                                      min(len(s0), len(s1)))
        line["decode_tok_s_off"] = (off.get("timings") or {}).get("decode_tokens_per_s")
        line["decode_tok_s_on"] = (on.get("timings") or {}).get("decode_tokens_per_s")
        line["route_on"] = on.get("route")
    else:
        line["equal"] = False
    for tag, p in (("stderr_off", a.off_err), ("stderr_on", a.on_err)):
        if p and os.path.exists(p):
            t = Path(p).read_text()
            if t.strip():
                line[tag] = t[-1200:]
    line["usable"] = bool(line["equal"] and a.rc_on == 0)
    append(a.out, line)
    print(f"  ORT CUDA-graph probe on {a.model}: graph-off rc={a.rc_off}, graph-on rc={a.rc_on}, "
          f"tokens equal={line['equal']} -> {'usable' if line['usable'] else 'NOT usable'}")
    sys.exit(0 if line["usable"] else 3)


def cmd_note(a):
    line = {}
    for kv in a.pairs:
        k, _, v = kv.partition("=")
        try:
            line[k] = json.loads(v)
        except json.JSONDecodeError:
            line[k] = v
    line.setdefault("commit", commit_of(None))
    append(a.out, line)


# ---------------------------------------------------------------------------------------------
# Hugging Face transformers
# ---------------------------------------------------------------------------------------------
class HfRunner:
    """A manual greedy loop over a causal LM, written against the transformers 5.x API but
    tolerant of the small renames between 5.x releases (past_key_values -> cache, cache_position)."""

    def __init__(self, hf_dir, device):
        import inspect

        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.device = device
        t = time.perf_counter()
        try:  # straight onto the device (needs accelerate, which the H200 machine has)
            self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float16, device_map=device)
        except (TypeError, ValueError, ImportError):
            try:
                self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float16).to(device)
            except TypeError:  # releases before `dtype` was accepted
                self.model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float16).to(device)
        self.model.eval()
        self.load_s = time.perf_counter() - t
        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.has_cache_position = "cache_position" in params
        self.has_logits_to_keep = "logits_to_keep" in params
        self.vocab = self.model.config.vocab_size
        self.attn = getattr(self.model.config, "_attn_implementation", None)

    def weight_bytes(self):
        """All weights a decode step reads: every parameter once (a tied table once, as the lm_head),
        less an untied embedding table, of which a step gathers one row."""
        emb = self.model.get_input_embeddings().weight
        head = self.model.get_output_embeddings().weight
        seen, total = set(), 0
        for p in self.model.parameters():
            if p.data_ptr() in seen:
                continue
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
        if head.data_ptr() != emb.data_ptr():
            total -= emb.numel() * emb.element_size()
        return total

    def forward(self, ids, cache, pos, prefill=False):
        """One forward pass; `pos` holds the positions of `ids` (1-D)."""
        kw = {self.cache_kw: cache, "position_ids": pos.view(1, -1), "use_cache": True}
        if self.has_cache_position:
            kw["cache_position"] = pos
        if prefill and self.has_logits_to_keep:
            kw["logits_to_keep"] = 1
        return self.model(input_ids=ids, **kw)

    def returned_cache(self, out, cache):
        for name in ("cache", "past_key_values"):
            c = getattr(out, name, None)
            if c is not None:
                return c
        return cache

    def static_cache(self, max_len):
        from transformers import StaticCache

        try:
            return StaticCache(config=self.model.config, max_cache_len=max_len)
        except TypeError:
            return StaticCache(config=self.model.config, max_batch_size=1, max_cache_len=max_len,
                               device=self.device, dtype=self.torch.float16)

    def dynamic_cache(self):
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:
            return DynamicCache()

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def generate(self, prompt, n_new, cache, step, sync_each_step):
        """Greedy: prefill, then n_new - 1 decode steps. Returns (ttft_s, prefill_s, decode_s, steps,
        tokens)."""
        torch = self.torch
        P = prompt.shape[1]
        self.sync()
        t0 = time.perf_counter()
        with torch.no_grad():  # not inference_mode: the static cache is reset in place between runs
            out = self.forward(prompt, cache, torch.arange(P, device=self.device), prefill=True)
            cache = self.returned_cache(out, cache)
            tok = out.logits[:, -1, :].argmax(-1, keepdim=True)
            self.sync()
            t_prefill = time.perf_counter() - t0
            tokens = [int(tok.item())]
            t_first = time.perf_counter() - t0
            pos = torch.tensor([P], device=self.device, dtype=torch.long)
            t1 = time.perf_counter()
            for _ in range(n_new - 1):
                tok, cache = step(tok, pos, cache)
                pos += 1
                if sync_each_step:
                    tokens.append(int(tok.item()))  # what a generator must do to stream or stop at EOS
            self.sync()
            decode_s = time.perf_counter() - t1
        return t_first, t_prefill, decode_s, n_new - 1, tokens

    def eager_step(self, tok, pos, cache):
        out = self.forward(tok, cache, pos)
        return out.logits[:, -1, :].argmax(-1, keepdim=True), self.returned_cache(out, cache)


def dynamo_counters():
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    out = {"stats": dict(counters.get("stats", {})),
           "graph_breaks": int(sum(counters.get("graph_break", {}).values())),
           "recompiles": dict(counters.get("recompiles", {})) if "recompiles" in counters else None}
    ind = counters.get("inductor", {})
    out["inductor_cudagraph"] = {k: v for k, v in ind.items() if "cudagraph" in k}
    return out


def cmd_hf(a):
    import numpy as np
    import torch

    device = a.device
    variants = [v for v in a.variants.replace(",", " ").split() if v]
    if device.startswith("cuda"):
        machine = a.machine or torch.cuda.get_device_name(0)
    else:
        machine = a.machine or "cpu"
    r = HfRunner(a.hf_dir, device)
    bw = bandwidth_of(a.out, a.bandwidth)
    b, bsrc = bytes_for(a.out, Path(a.model_dir).name if a.model_dir else None, a.model_dir)
    if not b:
        b, bsrc = r.weight_bytes(), "transformers parameters (all weights less an untied embedding table)"
    rng = np.random.default_rng(a.seed)
    prompt = torch.tensor([rng.integers(0, r.vocab, a.prompt_tokens).tolist()], device=device)
    total = a.prompt_tokens + a.decode_tokens
    import transformers

    base = dict(kind="decode", commit=commit_of(a.commit), machine=machine, model=a.model,
                model_dir=Path(a.hf_dir).name, precision="fp16", engine="transformers", device="cuda"
                if device.startswith("cuda") else device, batch=1, prompt_tokens=a.prompt_tokens,
                decode_tokens=a.decode_tokens, runs=a.runs, bytes_per_token=b, bytes_source=bsrc,
                measured_bandwidth_gbs=bw, graph_captures=None, graph_fallbacks=None,
                sync_each_step=not a.no_sync, attn_implementation=r.attn, load_s=round(r.load_s, 1),
                versions=dict(torch=torch.__version__, transformers=transformers.__version__))
    print(f"  transformers {transformers.__version__}, torch {torch.__version__}: loaded {a.hf_dir} in "
          f"{r.load_s:.1f} s, cache argument {r.cache_kw!r}, cache_position {r.has_cache_position}", flush=True)

    seen = {}

    def measure(name, make_cache, step, warm_tokens, extra):
        runs = []
        t = time.perf_counter()
        # warm-up; never longer than a measured run (the static cache holds prompt + decode_tokens)
        r.generate(prompt, min(warm_tokens, a.decode_tokens), make_cache(), step, not a.no_sync)
        warm_s = time.perf_counter() - t
        first = None
        for _ in range(a.runs):
            ttft, pre, dec, steps, tokens = r.generate(prompt, a.decode_tokens, make_cache(), step, not a.no_sync)
            runs.append((ttft, pre, dec, steps))
            first = first or tokens
        tps = statistics.median(s / d for _, _, d, s in runs)
        if name == "hf-eager":
            seen["eager_tokens"] = first
        elif seen.get("eager_tokens") and first and not a.no_sync:
            ref = seen["eager_tokens"]
            extra = dict(extra, tokens_equal_eager=ref == first,
                         first_diff_vs_eager=next((i for i, (x, y) in enumerate(zip(ref, first)) if x != y), None))
        line = dict(base, backend=name, decode_tok_s=round(tps, 2),
                    prefill_tok_s=round(statistics.median(a.prompt_tokens / p for _, p, _, _ in runs), 1),
                    ttft_ms=round(statistics.median(x[0] for x in runs) * 1e3, 2),
                    roofline_fraction=roofline(tps, b, bw), warmup_s=round(warm_s, 1),
                    decode_tok_s_runs=[round(s / d, 2) for _, _, d, s in runs],
                    first_tokens=first[:8] if first else None, **extra)
        append(a.out, line)
        print(f"  {name}: decode {tps:.1f} tok/s, TTFT {line['ttft_ms']:.1f} ms, prefill {line['prefill_tok_s']:.0f} "
              f"tok/s (warm-up {warm_s:.1f} s)", flush=True)
        return line

    def fail(name, e, **extra):
        line = dict(base, kind="error", backend=name, error=f"{type(e).__name__}: {e}"[-1500:], **extra)
        append(a.out, line)
        print(f"  ERROR {name}: {line['error'][:300]}", flush=True)

    if "eager" in variants:
        try:
            measure("hf-eager", r.dynamic_cache, r.eager_step, a.warmup_tokens,
                    dict(cuda_graph=False, cache="DynamicCache", compiled=False))
        except Exception as e:  # noqa: BLE001 - recorded, then the next variant runs
            fail("hf-eager", e)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()

    if "compiled" in variants:
        import torch._dynamo

        cache = r.static_cache(total)
        for fullgraph in (True, False) if a.allow_graph_breaks else (True,):
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()

            def one_step(tok, pos, _cache=cache):
                out = r.forward(tok, _cache, pos)
                return out.logits[:, -1, :].argmax(-1, keepdim=True)

            compiled = torch.compile(one_step, mode=a.compile_mode, fullgraph=fullgraph)
            timing = {}

            def step(tok, pos, c):
                if hasattr(torch.compiler, "cudagraph_mark_step_begin"):
                    torch.compiler.cudagraph_mark_step_begin()
                if "first_s" not in timing:
                    t = time.perf_counter()
                    out = compiled(tok, pos)
                    r.sync()
                    timing["first_s"] = time.perf_counter() - t
                    return out.clone(), c
                return compiled(tok, pos).clone(), c  # clone: a cudagraph output is overwritten by the next replay

            def fresh():
                cache.reset()  # in place: the static addresses the graph captured stay valid
                return cache

            try:
                # The prefill runs eagerly (it also allocates the static cache's tensors outside the
                # compiled region, as transformers expects); only the 1-token decode step is compiled.
                t = time.perf_counter()
                r.generate(prompt, min(4, a.decode_tokens), fresh(), step, not a.no_sync)
                compile_s = time.perf_counter() - t
                c = dynamo_counters()
                stats = c.get("stats", {})
                skips = sum(c.get("inductor_cudagraph", {}).get(k, 0) for k in ("cudagraph_skips",))
                extra = dict(cache="StaticCache", compiled=True, compile_mode=a.compile_mode, fullgraph=fullgraph,
                             compile_s=round(compile_s, 1), first_step_s=round(timing.get("first_s", 0), 1),
                             dynamo=c, cuda_graph=(a.compile_mode == "reduce-overhead" and skips == 0
                                                   and device.startswith("cuda")),
                             ttft_note="prefill runs eagerly into the StaticCache; only the decode step is compiled")
                print(f"  hf-compiled: compiled in {compile_s:.1f} s (first step {timing.get('first_s', 0):.1f} s), "
                      f"unique graphs {stats.get('unique_graphs')}, graph breaks {c.get('graph_breaks')}, "
                      f"cudagraph counters {c.get('inductor_cudagraph')}", flush=True)
                line = measure("hf-compiled", fresh, step, a.warmup_tokens, extra)
                after = dynamo_counters()
                line_recompiled = after.get("stats", {}).get("unique_graphs") != stats.get("unique_graphs")
                if line_recompiled:
                    append(a.out, dict(kind="warning", model=a.model, backend="hf-compiled",
                                       message="the compiled step recompiled during the timed runs",
                                       dynamo_after=after))
                    print("  WARNING: recompiled during the timed runs", flush=True)
                break
            except Exception as e:  # noqa: BLE001
                fail("hf-compiled", e, fullgraph=fullgraph, compile_mode=a.compile_mode)


# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--out", required=True, help="the run's decode.jsonl (appended to)")
        p.add_argument("--commit", default=None, help="commit measured (env BENCH_COMMIT wins)")
        p.add_argument("--machine", default=None)

    p = sub.add_parser("bandwidth")
    common(p)
    p.set_defaults(fn=cmd_bandwidth)

    p = sub.add_parser("fill")
    common(p)
    p.add_argument("--input", required=True, help="stdout of genai-bridge bench --json")
    p.add_argument("--stderr", default=None)
    p.add_argument("--rc", type=int, default=0)
    p.add_argument("--model", required=True, help="the shape, e.g. qwen2.5-1.5b")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--precision", required=True)
    p.add_argument("--backend", required=True, choices=["native", "ort"])
    p.add_argument("--cuda-graph", type=int, default=0)
    p.add_argument("--cuda-graph-note", default=None)
    p.add_argument("--bandwidth", type=float, default=None)
    p.add_argument("--step", default="")
    p.set_defaults(fn=cmd_fill)

    p = sub.add_parser("hf")
    common(p)
    p.add_argument("hf_dir")
    p.add_argument("--model", required=True)
    p.add_argument("--model-dir", default=None, help="the fp16 ONNX folder made from the same checkpoint")
    p.add_argument("--variants", default="eager,compiled")
    p.add_argument("--device", default="cuda")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--decode-tokens", type=int, default=256)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--warmup-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bandwidth", type=float, default=None)
    p.add_argument("--compile-mode", default="reduce-overhead")
    p.add_argument("--allow-graph-breaks", action="store_true",
                   help="if fullgraph=True fails, record the error and compile again with fullgraph=False")
    p.add_argument("--no-sync", action="store_true",
                   help="do not read each token back to the host (the default reads it, as a generator must)")
    p.set_defaults(fn=cmd_hf)

    p = sub.add_parser("graph-dir")
    p.add_argument("src")
    p.add_argument("dst")
    p.set_defaults(fn=cmd_graph_dir)

    p = sub.add_parser("graph-option")
    p.add_argument("dir")
    p.set_defaults(fn=cmd_graph_option)

    p = sub.add_parser("probe")
    common(p)
    p.add_argument("--model", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--off", required=True)
    p.add_argument("--on", required=True)
    p.add_argument("--off-err", default=None)
    p.add_argument("--on-err", default=None)
    p.add_argument("--rc-off", type=int, required=True)
    p.add_argument("--rc-on", type=int, required=True)
    p.add_argument("--tokens", type=int, default=None)
    p.set_defaults(fn=cmd_probe)

    p = sub.add_parser("note")
    p.add_argument("--out", required=True)
    p.add_argument("pairs", nargs="*", help="key=value (values parsed as JSON where they are JSON)")
    p.set_defaults(fn=cmd_note)

    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
