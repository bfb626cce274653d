#!/usr/bin/env python3
"""Markdown table of a decode benchmark run (benches/decode_h200.sh's decode.jsonl).

usage: decode_table.py DECODE_JSONL [--no-steps]

Per shape and precision: weight bytes per token, the roofline (measured copy bandwidth / bytes per
token), decode tok/s of genai-bridge native (CUDA graph / eager), the fastest ONNX Runtime CUDA EP
row (genai-bridge's ORT backend, or the official ONNX Runtime GenAI with its CUDA graph off or on;
the cell says which), transformers eager and compiled, the ratios native / ORT and native / best
transformers,
native's roofline fraction and graph counters; then time to first token of each, then the issue's
targets with PASS / FAIL / n/a (n/a: the rows it needs are missing). Missing rows print as "–".
When a measurement appears more than once, the last line wins.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

SHAPE_ORDER = ["qwen2.5-0.5b", "qwen2.5-1.5b", "llama3-8b"]
PREC_ORDER = ["fp16", "bf16", "int4", "fp32"]
DASH = "–"
# Targets from issue 5.
ROOFLINE_TARGET = {"qwen2.5-1.5b": 0.85, "llama3-8b": 0.85}  # fp16
TOKS_TARGET = {"qwen2.5-0.5b": 2000.0}  # fp16
HF_FACTOR = 2.0


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"<!-- line {n} is not JSON; ignored -->")
    return rows


def column(r):
    """Which column a decode line belongs to, or None."""
    engine, backend = r.get("engine"), r.get("backend")
    if engine == "transformers" or str(backend).startswith("hf-"):
        return backend if backend in ("hf-eager", "hf-compiled") else None
    if backend == "native":
        graph = r.get("cuda_graph_requested", r.get("cuda_graph"))
        return "native-graph" if graph else "native-eager"
    if backend == "ort":
        return "ort-graph" if r.get("cuda_graph") else "ort"
    if engine == "onnxruntime-genai":
        return "ortgenai-graph" if r.get("cuda_graph") else "ortgenai"
    return None


ORT_COLUMNS = ("ort", "ort-graph", "ortgenai", "ortgenai-graph")
ORT_LABELS = {"ort": "", "ort-graph": " (graph)", "ortgenai": " (GenAI)", "ortgenai-graph": " (GenAI, graph)"}


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def fmt_tps(x):
    x = num(x)
    if x is None:
        return DASH
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def fmt_ms(x):
    x = num(x)
    return DASH if x is None else (f"{x:,.1f}" if x < 1000 else f"{x:,.0f}")


def fmt_ratio(a, b):
    a, b = num(a), num(b)
    return DASH if a is None or not b else f"{a / b:.2f}×"


def fmt_pct(x):
    x = num(x)
    return DASH if x is None else f"{100 * x:.1f}%"


def order_key(values, order):
    return sorted(values, key=lambda v: (order.index(v) if v in order else len(order), v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl")
    ap.add_argument("--no-steps", action="store_true", help="leave out the step times")
    a = ap.parse_args()
    rows = load(a.jsonl)

    decode = [r for r in rows if r.get("kind") == "decode"]
    cells = {}  # (model, precision) -> column -> row (last wins)
    for r in decode:
        col = column(r)
        if col and r.get("model") and r.get("precision"):
            cells.setdefault((r["model"], r["precision"]), {})[col] = r

    bws = [r["measured_bandwidth_gbs"] for r in rows if r.get("kind") == "bandwidth" and num(r.get("measured_bandwidth_gbs"))]
    bw = bws[-1] if bws else None
    if bw is None:
        seen = [num(r.get("measured_bandwidth_gbs")) for r in decode if num(r.get("measured_bandwidth_gbs"))]
        bw = statistics.median(seen) if seen else None
    commits = sorted({str(r.get("commit")) for r in decode if r.get("commit")})
    machines = sorted({str(r.get("machine")) for r in decode if r.get("machine")})
    settings = sorted({(r.get("prompt_tokens"), r.get("decode_tokens"), r.get("runs")) for r in decode
                       if r.get("prompt_tokens") and r.get("decode_tokens")}, key=str)

    print("## Batch-1 decode, same weights, one run")
    print()
    print(f"- commit: {', '.join(commits) or DASH}")
    print(f"- machine: {'; '.join(machines) or DASH}")
    print(f"- measured copy bandwidth: {f'{bw:,.0f} GB/s' if bw else DASH} (roofline = bandwidth ÷ weight bytes per token)")
    for p, d, n in settings:
        print(f"- prompt {p} tokens, {d} decode tokens, median of {n} runs after a warm-up")
    print()

    models = order_key({m for m, _ in cells}, SHAPE_ORDER)
    keys = []
    for m in models:
        for p in order_key({p for mm, p in cells if mm == m}, PREC_ORDER):
            keys.append((m, p))

    def hf_cells(m, p):
        """transformers figures for a row: its own, else the same shape's fp16 (marked †)."""
        c = cells.get((m, p), {})
        own = {k: c[k] for k in ("hf-eager", "hf-compiled") if k in c}
        if own or p == "fp16":
            return own, False
        f = cells.get((m, "fp16"), {})
        return {k: f[k] for k in ("hf-eager", "hf-compiled") if k in f}, True

    def ort_best(c):
        cands = [(k, c[k]) for k in ORT_COLUMNS if k in c and num(c[k].get("decode_tok_s"))]
        if not cands:
            return None
        k, r = max(cands, key=lambda kr: kr[1]["decode_tok_s"])
        return dict(r, label=ORT_LABELS[k])

    def bytes_of(c):
        for k in ("native-graph", "native-eager", *ORT_COLUMNS, "hf-eager", "hf-compiled"):
            if k in c and num(c[k].get("bytes_per_token")):
                return c[k]["bytes_per_token"]
        return None

    def tps(c, k):
        return num(c[k].get("decode_tok_s")) if k in c else None

    print("### Decode tokens/s")
    print()
    print("| shape | precision | bytes/token | roofline tok/s | native graph | native eager | ORT CUDA EP | "
          "HF eager | HF compiled | native ÷ ORT | native ÷ best HF | native roofline fraction | "
          "graph captures / fallbacks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    dagger = False
    results = {}
    for m, p in keys:
        c = cells[(m, p)]
        b = bytes_of(c)
        roof = bw * 1e9 / b if bw and b else None
        nat = tps(c, "native-graph")
        ort = ort_best(c)
        hf, borrowed = hf_cells(m, p)
        dagger |= borrowed and bool(hf)
        mark = "†" if borrowed and hf else ""
        best_hf = max((num(r.get("decode_tok_s")) or 0 for r in hf.values()), default=0) or None
        ng = c.get("native-graph", {})
        rf = num(ng.get("roofline_fraction"))
        if rf is None and nat and roof:
            rf = nat / roof
        ort_txt = DASH if ort is None else fmt_tps(ort["decode_tok_s"]) + ort["label"]
        hfc = hf.get("hf-compiled")
        hfc_txt = fmt_tps(hfc.get("decode_tok_s")) if hfc else DASH
        if hfc and hfc.get("fullgraph") is False:
            hfc_txt += " (graph breaks)"
        if hfc and hfc.get("cuda_graph") is False:
            hfc_txt += " (no CUDA graph)"
        counters = DASH
        if ng:
            counters = f"{ng.get('graph_captures', DASH)} / {ng.get('graph_fallbacks', DASH)}"
        print(f"| {m} | {p} | {f'{b / 1e9:.2f} GB' if b else DASH} | {fmt_tps(roof)} | {fmt_tps(nat)} | "
              f"{fmt_tps(tps(c, 'native-eager'))} | {ort_txt} | "
              f"{fmt_tps(hf['hf-eager'].get('decode_tok_s')) + mark if 'hf-eager' in hf else DASH} | "
              f"{hfc_txt + mark if hfc else DASH} | {fmt_ratio(nat, ort and ort['decode_tok_s'])} | "
              f"{fmt_ratio(nat, best_hf)}{mark if best_hf else ''} | {fmt_pct(rf)} | {counters} |")
        results[(m, p)] = dict(nat=nat, ort=ort and ort["decode_tok_s"], best_hf=best_hf, rf=rf, ng=ng, roof=roof,
                               borrowed=borrowed)
    if not keys:
        print(f"| {DASH} | | | | | | | | | | | | |")
    print()
    if dagger:
        print("† transformers has no int4 MatMulNBits: int4 rows show (and compare against) the fp16 "
              "transformers figure of the same shape.")
        print()

    prompts = sorted({r.get("prompt_tokens") for r in decode if r.get("prompt_tokens")})
    print(f"### Time to first token (ms, {'/'.join(map(str, prompts)) or '?'}-token prompt)")
    print()
    print("| shape | precision | native graph | native eager | ORT CUDA EP | HF eager | HF compiled |")
    print("|---|---|---|---|---|---|---|")
    for m, p in keys:
        c = cells[(m, p)]
        ort = ort_best(c)
        hf, borrowed = hf_cells(m, p)
        mark = "†" if borrowed and hf else ""

        def t(r):
            return fmt_ms(r.get("ttft_ms")) if r else DASH

        ort_ttft = t(ort) + (ort["label"] if ort else "")
        print(f"| {m} | {p} | {t(c.get('native-graph'))} | {t(c.get('native-eager'))} | {ort_ttft} | "
              f"{t(hf.get('hf-eager')) + (mark if 'hf-eager' in hf else '')} | "
              f"{t(hf.get('hf-compiled')) + (mark if 'hf-compiled' in hf else '')} |")
    print()
    if any("hf-compiled" in cells[k] for k in cells):
        print("HF compiled: the prompt runs eagerly into the StaticCache; only the one-token decode step is "
              "compiled, so its TTFT is an eager prefill.")
        print()

    # ----------------------------------------------------------------------------------------
    print("### Targets (issue 5)")
    print()

    def status(ok):
        return "n/a" if ok is None else ("PASS" if ok else "FAIL")

    for shape, target in ROOFLINE_TARGET.items():
        r = results.get((shape, "fp16"))
        rf = r and r["rf"]
        print(f"- ≥{target:.0%} of roofline, {shape} fp16 (native graph): "
              f"{status(None if rf is None else rf >= target)} ({fmt_pct(rf)})")
    for shape, target in TOKS_TARGET.items():
        r = results.get((shape, "fp16"))
        v = r and r["nat"]
        print(f"- ≥{target:,.0f} tok/s, {shape} fp16 (native graph): "
              f"{status(None if v is None else v >= target)} ({fmt_tps(v)} tok/s)")

    def every(label, test):
        have, bad, missing = [], [], []
        for k in keys:
            r = results[k]
            verdict = test(r)
            name = f"{k[0]} {k[1]}"
            if verdict is None:
                missing.append(name)
            else:
                have.append(name)
                if not verdict[0]:
                    bad.append(f"{name} ({verdict[1]})")
        ok = None if not have else not bad
        extra = []
        if bad:
            extra.append("failing: " + ", ".join(bad))
        if missing:
            extra.append("no data: " + ", ".join(missing))
        print(f"- {label}: {status(ok)} ({len(have) - len(bad)}/{len(have)} rows"
              f"{'; ' + '; '.join(extra) if extra else ''})")

    every("faster than the ONNX Runtime CUDA EP on every row",
          lambda r: None if not r["nat"] or not r["ort"] else (r["nat"] > r["ort"], fmt_ratio(r["nat"], r["ort"])))
    def hf_factor(r):
        if not r["nat"] or not r["best_hf"]:
            return None
        text = fmt_ratio(r["nat"], r["best_hf"])
        need = HF_FACTOR * r["best_hf"]
        if r["nat"] < need and r["roof"] and need > r["roof"]:
            # The target asks for more than the memory-bandwidth roofline allows on this row.
            text += f"; {HF_FACTOR:.0f}× is {fmt_tps(need)} tok/s, above the roofline's {fmt_tps(r['roof'])}"
        return r["nat"] >= need, text

    every(f"≥{HF_FACTOR:.0f}× the best transformers on every row", hf_factor)

    def fallbacks(r):
        ng = r["ng"]
        if not ng or num(ng.get("graph_fallbacks")) is None:
            return None
        ok = ng["graph_fallbacks"] == 0 and (num(ng.get("graph_captures")) or 0) > 0
        return ok, f"{ng.get('graph_captures')} captures, {ng['graph_fallbacks']} fallbacks"

    every("zero graph fallbacks (native, graph on, with captures)", fallbacks)
    print()

    # ----------------------------------------------------------------------------------------
    compiled = [r for r in decode if r.get("backend") == "hf-compiled"]
    probes = [r for r in rows if r.get("kind") == "ort_graph_probe"]
    og_graph = [r for r in decode if column(r) == "ortgenai-graph" and "tokens_equal_graph_off" in r]
    problems = [r for r in rows if r.get("kind") in ("error", "skipped", "warning")]
    if compiled or probes or problems or og_graph:
        print("### Notes")
        print()
    for r in compiled:
        d = r.get("dynamo") or {}
        st = d.get("stats") or {}
        print(f"- transformers compile, {r.get('model')}: {r.get('compile_s', DASH)} s "
              f"({r.get('compile_mode', '?')}, fullgraph={r.get('fullgraph')}), unique graphs "
              f"{st.get('unique_graphs', DASH)}, graph breaks {d.get('graph_breaks', DASH)}, cudagraph counters "
              f"{d.get('inductor_cudagraph', DASH)}; tokens equal to eager: {r.get('tokens_equal_eager', DASH)}")
    for r in probes:
        why = ""
        if not r.get("usable"):
            err = (r.get("stderr_on") or "").strip().splitlines()
            why = f"; graph-on stderr: {err[-1][:200]}" if err else ""
        diff = f" (first difference at token {r['first_diff']})" if r.get("first_diff") is not None else ""
        print(f"- ONNX Runtime CUDA EP graph through genai-bridge's ORT backend ({r.get('model')}): "
              f"graph off rc={r.get('rc_off')}, graph on rc={r.get('rc_on')}, tokens equal: {r.get('equal')}{diff}"
              f" -> {'usable' if r.get('usable') else 'not usable'}{why}")
    for r in og_graph:
        diff = r.get("first_diff_vs_graph_off")
        print(f"- ONNX Runtime GenAI {r.get('versions', {}).get('onnxruntime_genai', '?')}, {r.get('model')} "
              f"{r.get('precision')}: tokens with the CUDA graph equal those without: {r['tokens_equal_graph_off']}"
              f"{'' if diff is None else f' (first difference at token {diff})'}")
    for r in problems:
        what = r.get("step") or " ".join(str(r.get(k)) for k in ("model", "precision", "backend") if r.get(k))
        reason = r.get("reason") or r.get("error") or r.get("message") or ""
        if not reason and r.get("stderr_tail"):
            tail = str(r["stderr_tail"]).strip().splitlines()
            reason = tail[-1] if tail else ""
        if r.get("timed_out"):
            reason = "timed out. " + reason
        print(f"- {r['kind']}: {what}: {str(reason)[:240]}")
    if compiled or probes or problems or og_graph:
        print()

    steps = [r for r in rows if r.get("kind") == "step"]
    if steps and not a.no_steps:
        total = sum(num(r.get("seconds")) or 0 for r in steps)
        print(f"### Step times ({total:,.0f} s in all)")
        print()
        print("| step | seconds | rc |")
        print("|---|---|---|")
        for r in steps:
            print(f"| {r.get('step')} | {r.get('seconds')} | {r.get('rc')} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
