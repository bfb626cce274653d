#!/usr/bin/env python3
"""Make random-weight models of real shapes with the official ONNX Runtime GenAI builder, for benchmarks.

These are NOT committed (they are hundreds of MB to tens of GB). Write them somewhere git ignores,
e.g. target/bench-models/ in the repository root.

How to run (python 3.11; offline once the packages are installed):

    python3.11 -m venv .venv-bench
    .venv-bench/bin/pip install -r models/requirements-bench.txt
    # a small CPU machine: the 0.5B shape for the CPU execution provider (fp32 ~2.0 GB, int4 ~0.31 GB;
    # ~45 s and ~6 GB of memory on 2 cores)
    .venv-bench/bin/python models/make_bench_models.py --shape qwen2.5-0.5b --precision fp32,int4 \
        --ep cpu --out target/bench-models
    # a CUDA machine (torch with CUDA; weights are made on the GPU in fp16, which is much faster)
    python models/make_bench_models.py --shape qwen2.5-1.5b,llama3-8b --precision fp16,int4 \
        --ep cuda --device cuda --out target/bench-models

Options:
  --shape      comma list of: qwen2.5-0.5b, qwen2.5-1.5b, llama3-8b, llama3.2-1b (default
               qwen2.5-0.5b)
  --precision  comma list; fp32 and/or int4 with --ep cpu, fp16 and/or int4 with --ep cuda
               (default: fp32,int4 for cpu, fp16,int4 for cuda). int4 is the builder's default:
               MatMulNBits, 4 bits, block 32, symmetric, accuracy_level 4 on CPU.
  --ep         cpu | cuda: the builder's execution provider (-e)
  --out        output folder; each model goes to OUT/<shape>-<precision>-<ep>/
  --device     cpu | cuda: where torch makes the random weights (default cpu)
  --seed       torch seed for the weights (default 0, as in shared/tools/peer_decode_bench.py, but
               the qwen biases are drawn here, so the weights are not that tool's; the values also
               depend on the device: a cpu and a cuda run give different weights)
  --tokenizer-dir  folder with tokenizer.json + tokenizer_config.json
               (default: fixtures/qwen2-fp32-cpu beside this script)
  --keep-hf    keep the intermediate Hugging Face checkpoint (OUT/hf-<shape>-<dtype>/, reused by
               later runs); without it the checkpoint is this run's own (OUT/.hf-<shape>-<dtype>-<pid>/,
               deleted at the end), so runs side by side do not share or delete each other's
  --force      rebuild a model whose folder already holds genai_config.json (default: skip it)
  --layers     N decoder layers instead of the shape's own, every layer the shape's size (quicker
               models for per-layer A/B runs); folders are named <shape>-l<N>-...

What it does, per shape:
  1. builds the Hugging Face config of the real model (the published sizes, see SHAPES below, with
     max_position_embeddings 4096 to keep the rotary cos/sin caches and the default KV buffer small),
     makes the model with transformers' own random init under torch.manual_seed(seed) (then draws the
     biases, which transformers zero-inits and the builder would drop, from N(0, 0.02)) and saves it
     with save_pretrained: fp32 for --ep cpu (the builder reads fp32 for both fp32 and int4 CPU
     exports), fp16 for --ep cuda;
  2. copies the tokenizer in (see below), so nothing is downloaded;
  3. runs `python -m onnxruntime_genai.models.builder -i HF_DIR -o OUT/<name> -p PRECISION -e EP`
     with HF_HUB_OFFLINE=1 for every precision, then deletes the HF checkpoint unless --keep-hf;
  4. writes bench_model.json into each exported folder and prints it as one JSON line: the folder,
     its size on disk, and the weight bytes read per decoded token.

The tokenizer: a bundled fixture's tokenizer (default the qwen2 fixture's byte-level BPE) has only
512 tokens, far fewer than the model's vocab (151936 / 128256). The model still has its real
embedding and lm_head sizes; the tokenizer only covers ids 0..511. That is fine for benchmarks that
feed token ids (prompt ids drawn below the tokenizer's vocab) and decode greedily with EOS
suppressed (min_length = max_length), but generated ids >= 512 cannot be decoded to text, and the
weights are random, so the text means nothing anyway. bos/eos/pad ids come from the tokenizer
(bos = pad = <|endoftext|> = 0, eos = <|im_end|> = 2 for the qwen2 fixture).

Weight bytes read per decoded token ("weight_bytes_per_token"): the bytes of every initializer of the
exported graph that a decode step reads in full, that is, all weights except the embedding table
(a Gather reads one row of it) and the rotary cos/sin caches (one row each). When the embeddings are
tied, the builder (0.18) keeps one table, the lm_head's weight, and feeds the embedding from it
(fp32: Gather on a Transpose of lm_head.MatMul.weight, which ONNX Runtime constant-folds into a
second copy in memory at load; int4: GatherBlockQuantized on the lm_head's MatMulNBits weight and
scales), so the lm_head reads it once per token and it is counted once. Also printed:
"hf_weight_bytes_per_token", the same rule on the Hugging Face parameters in the checkpoint's dtype
(the number peer_decode_bench.py reports), and "kv_bytes_per_position", the KV cache bytes each
decode step reads per cached position (layers x 2 x kv_heads x head_dim x KV element size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
DEFAULT_TOKENIZER_DIR = HERE / "fixtures" / "qwen2-fp32-cpu"
MAX_POS = 4096

# Published configs of the real models (the same as shared/tools/peer_decode_bench.py, plus their
# published rms_norm_eps); the weights are random.
SHAPES = {
    "qwen2.5-0.5b": ("qwen2", dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1e6,
                     rms_norm_eps=1e-6)),
    "qwen2.5-1.5b": ("qwen2", dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                     num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1e6,
                     rms_norm_eps=1e-6)),
    "llama3-8b": ("llama", dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False, rope_theta=5e5,
                  rms_norm_eps=1e-5)),
    # Llama-3.2-1B without its llama3 rope scaling (random weights: the speed is the same).
    "llama3.2-1b": ("llama", dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True, rope_theta=5e5,
                    rms_norm_eps=1e-5)),
}
PRECISIONS = {"cpu": ("fp32", "int4"), "cuda": ("fp16", "int4")}
HF_DTYPE = {"cpu": "float32", "cuda": "float16"}


def emit(**kw):
    print(json.dumps(kw), flush=True)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------
def tokenizer_info(tok_dir: Path):
    """Special ids (bos/eos/pad) and the vocab size of the tokenizer in tok_dir."""
    tj = json.loads((tok_dir / "tokenizer.json").read_text())
    tc = json.loads((tok_dir / "tokenizer_config.json").read_text())
    ids = dict(tj["model"]["vocab"])
    for t in tj.get("added_tokens", []):
        ids[t["content"]] = t["id"]

    def tid(key):
        v = tc.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        return ids.get(v) if v is not None else None

    special = {k: tid(k + "_token") for k in ("bos", "eos", "pad")}
    if special["eos"] is None:
        raise SystemExit(f"{tok_dir}: tokenizer_config.json names no eos_token found in tokenizer.json")
    if special["pad"] is None:
        special["pad"] = special["eos"]
    if special["bos"] is None:
        special["bos"] = special["eos"]
    return special, max(ids.values()) + 1


def copy_tokenizer(tok_dir: Path, hf_dir: Path):
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (tok_dir / name).exists():
            shutil.copyfile(tok_dir / name, hf_dir / name)


# ---------------------------------------------------------------------------------------------
# Hugging Face checkpoint
# ---------------------------------------------------------------------------------------------
def shape_config(shape, layers):
    """The shape's Hugging Face config values, with `layers` decoder layers when given."""
    family, kw = SHAPES[shape]
    return family, {**kw, **({"num_hidden_layers": layers} if layers else {})}


def make_hf(shape, hf_dir: Path, ep, device, seed, tok_dir: Path, layers=None):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    family, kw = shape_config(shape, layers)
    special, _ = tokenizer_info(tok_dir)
    cls, arch = (Qwen2Config, "Qwen2ForCausalLM") if family == "qwen2" else (LlamaConfig, "LlamaForCausalLM")
    cfg = cls(max_position_embeddings=MAX_POS, bos_token_id=special["bos"], eos_token_id=special["eos"],
              pad_token_id=special["pad"], **kw)
    cfg.architectures = [arch]
    dtype = getattr(torch, HF_DTYPE[ep])
    t = time.perf_counter()
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.eval()
    # transformers zero-inits biases, and the builder drops an all-zero q/k/v bias (no Add in the
    # graph). The real Qwen2.5 has nonzero q/k/v biases, so draw them: N(0, 0.02), same seed stream.
    with torch.no_grad():
        for name, prm in model.named_parameters():
            if name.endswith(".bias"):
                prm.normal_(0.0, 0.02)
    n_params = sum(p.numel() for p in model.parameters())
    hf_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(hf_dir))
    gen_cfg = {"bos_token_id": special["bos"], "eos_token_id": special["eos"], "pad_token_id": special["pad"],
               "do_sample": False}
    (hf_dir / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2) + "\n")
    copy_tokenizer(tok_dir, hf_dir)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    log(f"[{shape}] HF checkpoint ({n_params / 1e6:.1f} M params, {HF_DTYPE[ep]}, made on {device}) "
        f"in {time.perf_counter() - t:.1f} s")


def hf_weight_bytes(hf_dir: Path):
    """All saved tensors in their dtype, minus the embedding table when the lm_head has its own weight
    (save_pretrained stores a tied table once, as model.embed_tokens.weight). Reads only the
    safetensors headers."""
    sizes = {}
    for f in sorted(hf_dir.glob("*.safetensors")):
        with open(f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                sizes[k] = v["data_offsets"][1] - v["data_offsets"][0]
    total = sum(sizes.values())
    if "lm_head.weight" in sizes:
        total -= sum(v for k, v in sizes.items() if k.endswith("embed_tokens.weight"))
    return total


# ---------------------------------------------------------------------------------------------
# Builder and the exported graph
# ---------------------------------------------------------------------------------------------
def run_builder(hf_dir: Path, out_dir: Path, precision, ep, cache_dir: Path):
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", precision, "-e", ep, "-c", str(cache_dir)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        tail = (res.stdout + res.stderr).strip().splitlines()[-25:]
        raise RuntimeError("builder failed (rc %d):\n%s" % (res.returncode, "\n".join(tail)))
    return " ".join(["python", "-m", "onnxruntime_genai.models.builder", "-i", "HF_DIR", "-o", out_dir.name,
                     "-p", precision, "-e", ep])


def _init_bytes(t):
    from onnx import helper

    for e in t.external_data:
        if e.key == "length":
            return int(e.value)
    if t.raw_data:
        return len(t.raw_data)
    n = 1
    for d in t.dims:
        n *= d
    np_dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    bits = 4 if t.data_type in (22, 21) else np_dtype.itemsize * 8  # INT4 / UINT4
    return (n * bits + 7) // 8


def graph_stats(out_dir: Path):
    """Weight bytes read per decode step, and what went into them, from the exported model.onnx."""
    import onnx

    cfg = json.loads((out_dir / "genai_config.json").read_text())
    m = onnx.load(str(out_dir / cfg["model"]["decoder"]["filename"]), load_external_data=False)
    g = m.graph
    sizes = {t.name: _init_bytes(t) for t in g.initializer}
    consumers = {}
    for node in g.node:
        for i in node.input:
            if i in sizes:
                consumers.setdefault(i, set()).add(node.op_type)
    gathers = {"Gather", "GatherBlockQuantized"}
    embedding, rotary, read = 0, 0, 0
    for name, b in sizes.items():
        ops = consumers.get(name, set())
        if "cos_cache" in name or "sin_cache" in name:
            rotary += b
        elif ops and ops <= gathers:
            embedding += b  # only gathered: one row per token
        else:
            read += b  # includes a table shared by Gather and the lm_head (counted once)
    ops = {}
    for node in g.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    past = [i for i in g.input if i.name.startswith("past_key_values.")]
    elem = {1: 4, 10: 2, 16: 2}[past[0].type.tensor_type.elem_type] if past else 0
    d = cfg["model"]["decoder"]
    kv_per_pos = d["num_hidden_layers"] * 2 * d["num_key_value_heads"] * d["head_size"] * elem
    return dict(weight_bytes_per_token=read, embedding_only_bytes=embedding, rotary_cache_bytes=rotary,
                initializer_bytes=sum(sizes.values()), kv_bytes_per_position=kv_per_pos,
                ops={k: ops[k] for k in sorted(ops)})


def folder_size(p: Path):
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def disk_usage(p: Path):
    return sum(f.stat().st_blocks * 512 for f in p.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen2.5-0.5b")
    ap.add_argument("--precision", default=None)
    ap.add_argument("--ep", default="cpu", choices=sorted(PRECISIONS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer-dir", default=str(DEFAULT_TOKENIZER_DIR))
    ap.add_argument("--keep-hf", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--layers", type=int, default=None,
                    help="decoder layers instead of the shape's own (every layer keeps its shape): "
                         "quicker models for per-layer A/B runs; folders get a -l<N> suffix")
    a = ap.parse_args()

    shapes = [s for s in a.shape.split(",") if s]
    if a.layers is not None and a.layers < 1:
        ap.error("--layers must be at least 1")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s!r}; known: {', '.join(SHAPES)}")
    precisions = [p for p in (a.precision or ",".join(PRECISIONS[a.ep])).split(",") if p]
    for p in precisions:
        if p not in PRECISIONS[a.ep]:
            ap.error(f"precision {p!r} is not made for -e {a.ep} (allowed: {', '.join(PRECISIONS[a.ep])})")
    tok_dir = Path(a.tokenizer_dir).resolve()
    _, tok_vocab = tokenizer_info(tok_dir)
    out_root = Path(a.out).resolve()
    out_root.mkdir(parents=True, exist_ok=True)

    import onnxruntime_genai
    import torch
    import transformers

    for shape in shapes:
        name = f"{shape}-l{a.layers}" if a.layers else shape
        todo = [p for p in precisions
                if a.force or not (out_root / f"{name}-{p}-{a.ep}" / "genai_config.json").exists()]
        # A checkpoint this run deletes when done is its own (runs side by side, e.g. the fp16
        # and the int4 model of one shape, must not delete each other's); --keep-hf shares one.
        hf_name = f"hf-{name}-{HF_DTYPE[a.ep]}"
        hf_dir = out_root / (hf_name if a.keep_hf else f".{hf_name}-{os.getpid()}")
        hf_bytes = None
        if todo:
            if (hf_dir / "config.json").exists() and not a.force:
                log(f"[{shape}] reusing {hf_dir}")
            else:
                make_hf(shape, hf_dir, a.ep, a.device, a.seed, tok_dir, a.layers)
            hf_bytes = hf_weight_bytes(hf_dir)
        for p in precisions:
            out_dir = out_root / f"{name}-{p}-{a.ep}"
            info_path = out_dir / "bench_model.json"
            if p not in todo:
                log(f"[{shape}] {out_dir} exists; skipped (--force rebuilds it)")
                if info_path.exists():
                    emit(**json.loads(info_path.read_text()))
                continue
            if out_dir.exists():
                shutil.rmtree(out_dir)
            cache = out_root / f".builder-cache-{name}-{p}-{a.ep}"
            t = time.perf_counter()
            log(f"[{shape}] building {p} for -e {a.ep} ...")
            cmd = run_builder(hf_dir, out_dir, p, a.ep, cache)
            secs = time.perf_counter() - t
            shutil.rmtree(cache, ignore_errors=True)
            info = dict(kind="bench_model", model=name, family=SHAPES[shape][0], precision=p, ep=a.ep,
                        dir=str(out_dir), size_bytes=None, disk_bytes=None, **graph_stats(out_dir),
                        hf_weight_bytes_per_token=hf_bytes, hf_dtype=HF_DTYPE[a.ep], init_device=a.device,
                        seed=a.seed, config={**shape_config(shape, a.layers)[1], "max_position_embeddings": MAX_POS},
                        tokenizer_vocab=tok_vocab, tokenizer_from=tok_dir.name, builder_command=cmd,
                        build_seconds=round(secs, 1),
                        versions=dict(onnxruntime_genai=getattr(onnxruntime_genai, "__version__", "unknown"),
                                      transformers=transformers.__version__, torch=torch.__version__))
            info_path.write_text(json.dumps(info, indent=2) + "\n")
            info["size_bytes"], info["disk_bytes"] = folder_size(out_dir), disk_usage(out_dir)
            info_path.write_text(json.dumps(info, indent=2) + "\n")
            emit(**info)
        if hf_dir.exists() and not a.keep_hf:
            shutil.rmtree(hf_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
