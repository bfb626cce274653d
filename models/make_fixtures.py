#!/usr/bin/env python3
"""Regenerate the tiny model fixtures in models/fixtures/ and their reference outputs.

How to run (from the repository root; python 3.11; offline once the packages are installed):

    python3.11 -m venv .venv-fixtures
    .venv-fixtures/bin/pip install -r models/requirements.txt
    HF_HUB_OFFLINE=1 .venv-fixtures/bin/python models/make_fixtures.py

Options: `--only NAME [NAME ...]` rebuilds just those fixtures (names as in FIXTURES below),
`--out DIR` writes somewhere else (default: models/fixtures beside this script),
`--keep-hf DIR` keeps the intermediate Hugging Face checkpoints there, `--list` prints the names.

What it does, all seeded and offline:
  1. trains three small tokenizers with the `tokenizers` library on the English text in CORPUS:
     "bytelevel" (GPT-2/Qwen style byte-level BPE, ChatML specials), "spm" (Llama/SentencePiece
     style: Metaspace pre-tokenizer, BPE with byte_fallback, <unk>/<s>/</s>) and "spm_legacy" (the same
     vocabulary with the older Prepend+Replace normalizer instead of Metaspace);
  2. builds one random-init Hugging Face checkpoint per family (llama, qwen2, qwen3, mistral, phi3),
     hidden 64, intermediate 128, 2 layers, 4 heads, 2 KV heads (head_dim 16), weights drawn from a
     seeded torch.Generator (independent of transformers' own init code);
  3. runs the official builder `python -m onnxruntime_genai.models.builder -i HF -o OUT -p P -e EP`
     for every fixture, keeping its output as written (for mistral/phi3 the tokenizer files are
     replaced by the script's own, see FAMILIES);
  4. writes `expected_ort_genai_0.18.json` (the official onnxruntime-genai runtime on CPU) and, for
     fp32 fixtures, `expected_transformers.json` (transformers greedy generate on the same checkpoint,
     with a comparison against the official runtime);
  5. writes models/fixtures/SUMMARY.json (sizes, graph inputs/outputs/ops, failures).

No absolute paths end up in the outputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 20261130

# ---------------------------------------------------------------------------------------------
# Tokenizer training text (written for this project; no third-party text).
# ---------------------------------------------------------------------------------------------
CORPUS = """\
Once upon a time, in a small village near the sea, there lived an old fisherman and his wife.
Every morning he went out in his boat, and every evening he came back with fish for the market.
The village was quiet, the houses were white, and the streets were narrow and steep.
Children played by the water while their parents worked in the fields or mended nets on the shore.

The quick brown fox jumps over the lazy dog. Hello world! How are you today? I am fine, thank you.
A model reads a prompt, turns the words into tokens, and predicts the next token one step at a time.
When the model is small and the weights are random, the text it writes is strange, but it is still
text: a sequence of tokens that can be decoded back into letters, spaces and punctuation.

In the morning the baker opened the shop at six o'clock. She sold bread, cakes and hot coffee.
The café on the corner served tea in blue cups, and the teacher from the school came every day
to read the newspaper and to talk about the weather, the harvest and the price of flour.
It rained on Monday, it was windy on Tuesday, and on Wednesday the sun finally came out again.

Numbers matter too: one, two, three, four, five, six, seven, eight, nine and ten.
The train leaves at 7:45 and arrives at 10:30; the ticket costs 12 dollars and 50 cents.
Please write your name, your address and your phone number on the first page of the form.
Questions? Answers! Lists, commas, quotes "like this", and (parentheses) are all part of writing.

The system prompt says: you are a helpful assistant. The user asks a question, and the assistant
answers it clearly and politely. If the assistant does not know the answer, it says so, and then it
tries to help in another way. Good answers are short, correct and easy to understand.

Rivers flow from the mountains to the sea. Birds fly south in the autumn and return in the spring.
The forest is green in summer, red and yellow in autumn, and white with snow in the long winter.
Scientists study the stars, the planets and the moon; engineers build bridges, roads and machines.
def main(): print("hello, world") # a line of code, because models often see code as well.
"""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Zephyr/TinyLlama-style template for the SentencePiece-style tokenizer (uses eos_token).
ZEPHYR_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% elif message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endif %}"
    "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
    "{% endfor %}"
)

CHAT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello! What is the weather like today?"},
]

TOKENIZER_TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Café au lait, naïve résumé: 中文 and an emoji 🙂!",
    "  leading spaces,\ttabs\nand newlines  ",
]

# ---------------------------------------------------------------------------------------------
# Model shapes and fixtures
# ---------------------------------------------------------------------------------------------
HIDDEN = 64
INTERMEDIATE = 128
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS  # 16
MAX_POS = 256
INIT_STD = 0.3

# family -> (tokenizer kind, seed offset, tokenizer packaging in the fixture folder)
#   "builder": the folder keeps the tokenizer files exactly as the builder wrote them (it re-saves the
#              tokenizer with transformers 5: tokenizer.json, tokenizer_config.json, chat_template.jinja);
#   "source":  the builder's tokenizer files are replaced by this script's own tokenizer.json and a
#              tokenizer_config.json that holds the chat_template (no chat_template.jinja), the way
#              folders made with transformers 4.x look.
FAMILIES = {
    "llama": ("spm", 1, "builder"),
    "qwen2": ("bytelevel", 2, "builder"),
    "qwen3": ("bytelevel", 3, "builder"),
    "mistral": ("spm_legacy", 4, "source"),
    "phi3": ("spm_legacy", 5, "source"),
}

# name, family, precision, execution provider, extra_options for the builder
FIXTURES = [
    ("llama-fp32-cpu", "llama", "fp32", "cpu", []),
    ("llama-int4-cpu", "llama", "int4", "cpu", []),
    ("qwen2-fp32-cpu", "qwen2", "fp32", "cpu", []),
    ("qwen2-int4-cpu", "qwen2", "int4", "cpu", []),
    ("llama-fp16-cuda", "llama", "fp16", "cuda", []),
    ("qwen3-fp32-cpu", "qwen3", "fp32", "cpu", []),
    ("mistral-fp32-cpu", "mistral", "fp32", "cpu", []),
    ("phi3-fp32-cpu", "phi3", "fp32", "cpu", []),
    ("llama-bf16-cuda", "llama", "bf16", "cuda", []),
    ("qwen2-int4-bs64-cpu", "qwen2", "int4", "cpu", ["block_size=64"]),
    ("qwen2-int4-bs16-cpu", "qwen2", "int4", "cpu", ["block_size=16"]),
]

REF_SOURCE = "onnxruntime-genai {og} with onnxruntime {ort}, CPU"


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------
def corpus_lines():
    return [line for line in CORPUS.splitlines() if line.strip()]


def train_bytelevel(vocab_size=512):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    special = {"bos": "<|endoftext|>", "eos": "<|im_end|>", "pad": "<|endoftext|>"}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": special["bos"],
        "eos_token": special["eos"],
        "pad_token": special["pad"],
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POS,
        "chat_template": CHATML_TEMPLATE,
    }
    return tok, special, config


def train_spm(vocab_size=512, legacy=False):
    """Llama/SentencePiece-style: BPE with byte_fallback, <0xNN> byte tokens, <unk>/<s>/</s>.
    legacy=False: Metaspace pre-tokenizer (prepend_scheme "first"), as transformers converts today.
    legacy=True: normalizer Prepend("▁") + Replace(" ", "▁") and no pre-tokenizer, as in the
    tokenizer.json of Llama-2, Mistral-7B-v0.1 and Phi-3. Same vocabulary and merges either way."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    # Train the merges on Metaspace-split words, then renumber: specials, 256 byte tokens, pieces.
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(byte_tokens),
        special_tokens=specials,
        show_progress=False,
    )
    base.train_from_iterator(corpus_lines(), trainer=trainer)
    trained = json.loads(base.to_str())["model"]
    pieces = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for t in specials + byte_tokens:
        vocab[t] = len(vocab)
    for t, _ in pieces:
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    special = {"bos": "<s>", "eos": "</s>", "pad": "</s>", "unk": "<unk>"}
    config = {
        "tokenizer_class": "LlamaTokenizer",
        "bos_token": special["bos"],
        "eos_token": special["eos"],
        "pad_token": special["pad"],
        "unk_token": special["unk"],
        "add_bos_token": True,
        "add_eos_token": False,
        "legacy": legacy,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POS,
        "chat_template": ZEPHYR_TEMPLATE,
    }
    return tok, special, config


def make_tokenizer(kind):
    tok, special, config = {
        "bytelevel": train_bytelevel,
        "spm": train_spm,
        "spm_legacy": lambda: train_spm(legacy=True),
    }[kind]()
    ids = {k: tok.token_to_id(v) for k, v in special.items()}
    return {"kind": kind, "tok": tok, "special": special, "ids": ids, "config": config}


def write_tokenizer(tk, out_dir: Path):
    tk["tok"].save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tk["config"], indent=2, ensure_ascii=False) + "\n")
    # Plain special-token map, as older Hugging Face folders have.
    stm = {k + "_token": v for k, v in tk["special"].items()}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(stm, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# Hugging Face checkpoints
# ---------------------------------------------------------------------------------------------
def hf_config(family, vocab, ids):
    import transformers as tf

    common = dict(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POS,
        rms_norm_eps=1e-6,
        initializer_range=INIT_STD,
        tie_word_embeddings=False,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        hidden_act="silu",
        attention_dropout=0.0,
    )
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    if family == "llama":
        cfg = tf.LlamaConfig(**common, head_dim=HEAD_DIM, attention_bias=False, mlp_bias=False, rope_parameters=rope)
        arch = "LlamaForCausalLM"
    elif family == "qwen2":
        cfg = tf.Qwen2Config(**common, use_sliding_window=False, sliding_window=None, rope_parameters=rope)
        arch = "Qwen2ForCausalLM"
    elif family == "qwen3":
        cfg = tf.Qwen3Config(
            **common, head_dim=HEAD_DIM, attention_bias=False, use_sliding_window=False, sliding_window=None,
            rope_parameters=rope,
        )
        arch = "Qwen3ForCausalLM"
    elif family == "mistral":
        cfg = tf.MistralConfig(**common, head_dim=HEAD_DIM, sliding_window=None, rope_parameters=rope)
        arch = "MistralForCausalLM"
    elif family == "phi3":
        cfg = tf.Phi3Config(
            **common, original_max_position_embeddings=MAX_POS, sliding_window=None,
            rope_parameters=dict(rope, partial_rotary_factor=1.0), resid_pdrop=0.0, embd_pdrop=0.0,
        )
        arch = "Phi3ForCausalLM"
    else:
        raise ValueError(family)
    cfg.architectures = [arch]
    return cfg


def seeded_init(model, seed):
    """Deterministic weights independent of transformers' init code: N(0, INIT_STD) for matrices,
    1 + N(0, 0.1) for norm scales, N(0, 0.1) for biases. Parameters are visited in sorted order."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            if "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.1 * torch.randn(shape, generator=gen)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(shape, generator=gen)
            else:
                v = INIT_STD * torch.randn(shape, generator=gen)
            p.copy_(v.to(p.dtype))


def make_hf_checkpoint(family, tk, out_dir: Path):
    import transformers as tf

    vocab = tk["tok"].get_vocab_size()
    cfg = hf_config(family, vocab, tk["ids"])
    torch.manual_seed(SEED)
    cls = getattr(tf, cfg.architectures[0])
    model = cls(cfg).to(torch.float32).eval()
    seeded_init(model, SEED + 1000 * FAMILIES[family][1])
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    gen_cfg = {
        "bos_token_id": tk["ids"]["bos"],
        "eos_token_id": tk["ids"]["eos"],
        "pad_token_id": tk["ids"]["pad"],
        "do_sample": False,
    }
    (out_dir / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2) + "\n")
    write_tokenizer(tk, out_dir)
    return model


# ---------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------
def run_builder(hf_dir: Path, out_dir: Path, precision, ep, extra, cache_dir: Path, log_path: Path):
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", precision, "-e", ep, "-c", str(cache_dir)]
    if extra:
        cmd += ["--extra_options", *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log_path.write_text(res.stdout + "\n--- stderr ---\n" + res.stderr)
    if res.returncode != 0:
        tail = (res.stdout + res.stderr).strip().splitlines()[-15:]
        raise RuntimeError("builder failed (rc %d):\n%s" % (res.returncode, "\n".join(tail)))
    shown = ["python", "-m", "onnxruntime_genai.models.builder", "-i", "HF_DIR", "-o", out_dir.name,
             "-p", precision, "-e", ep] + (["--extra_options", *extra] if extra else [])
    return " ".join(shown)


def finish_fixture_tokenizer(tk, out_dir: Path, packaging):
    """See FAMILIES: keep the builder's tokenizer files, or put back this script's own."""
    if packaging == "builder":
        return
    for extra in ("chat_template.jinja", "special_tokens_map.json"):
        p = out_dir / extra
        if p.exists():
            p.unlink()
    write_tokenizer(tk, out_dir)
    (out_dir / "special_tokens_map.json").unlink()


def fixture_tokenizer(tk, out_dir: Path):
    """The tokenizer as the fixture folder holds it (same vocabulary and special ids as tk)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out_dir / "tokenizer.json"))
    for k, v in tk["special"].items():
        assert tok.token_to_id(v) == tk["ids"][k], (k, v)
    return dict(tk, tok=tok)


# ---------------------------------------------------------------------------------------------
# Reference outputs
# ---------------------------------------------------------------------------------------------
def prompt_cases(tk):
    tok = tk["tok"]
    bos = [tk["ids"]["bos"]] if tk["kind"].startswith("spm") else []

    def enc(text):
        return bos + tok.encode(text, add_special_tokens=False).ids

    chat = ("<|im_start|>user\nHi! Tell me a story.<|im_end|>\n<|im_start|>assistant\n" if tk["kind"] == "bytelevel"
            else "<|user|>\nHi! Tell me a story.</s>\n<|assistant|>\n")
    once = tok.encode("Once", add_special_tokens=False).ids[:1]
    cases = [
        (once, 32),
        (enc("Hello world"), 32),
        (enc("The quick brown fox jumps over the lazy dog."), 48),
        (bos + tok.encode(chat, add_special_tokens=False).ids, 48),
        (enc("Once upon a time"), 80),
    ]
    return cases


def decode_case_ids(tk, cases):
    """Extra decode-only cases: special tokens first / in the middle, a lone byte-fallback or partial
    UTF-8 piece, and the full greedy sequence of the first and the chat prompt."""
    tok = tk["tok"]
    ids = tk["ids"]
    hello = tok.encode("Hello world", add_special_tokens=False).ids
    emoji = tok.encode("\U0001F642 ok", add_special_tokens=False).ids
    out = [
        [ids["bos"]] + hello,
        hello + [ids["eos"]] + hello,
        emoji[:1],
        emoji,
        cases[0]["greedy_sequence"],
        cases[3]["greedy_sequence"],
    ]
    return [[int(t) for t in x] for x in out]


def og_reference(fixture_dir: Path, tk, cases):
    import onnxruntime
    import onnxruntime_genai as og

    config = og.Config(str(fixture_dir))
    config.clear_providers()
    model = og.Model(config)
    out_cases, all_steps = [], []
    for prompt, max_length in cases:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=max_length, do_sample=False)
        gen = og.Generator(model, params)
        gen.append_tokens(np.array(prompt, dtype=np.int32))
        # steps[k] = the logits that choose generated token k. Read them BEFORE each
        # generate_next_token: in 0.18, get_logits() after a generate_next_token runs the decode step
        # for the newest token at once (the next generate_next_token then only samples), and calling
        # it once the sequence is at max_length makes is_done() report false again.
        steps = []
        while not gen.is_done():
            steps.append(np.array(gen.get_logits(), dtype=np.float32).reshape(-1))
            gen.generate_next_token()
        first = steps[0]
        seq = [int(t) for t in gen.get_sequence(0)]
        last = [int(t) for t in gen.get_next_tokens()]
        top2 = [np.sort(l)[-2:] for l in steps]
        out_cases.append({
            "prompt_ids": [int(t) for t in prompt],
            "max_length": max_length,
            "greedy_sequence": seq,
            "first_step_logits_head": [float(x) for x in first[:16]],
            "first_step_logits": [float(x) for x in first],
            # extra: why generation stopped, the token the last generate_next_token chose (0.18 does
            # NOT append a generated EOS to the sequence), and the smallest top-1 minus top-2 logit
            # gap over all steps (how robust the greedy choice is to small numeric differences)
            "finish_reason": "eos" if len(seq) < max_length else "max_length",
            "last_next_tokens": last,
            "min_top1_margin": float(min(t[1] - t[0] for t in top2)),
        })
        all_steps.append(steps)
        del gen, params

    tokenizer = og.Tokenizer(model)
    tok_cases = []
    for text in TOKENIZER_TEXTS:
        ids = [int(t) for t in tokenizer.encode(text)]
        tok_cases.append({"text": text, "ids": ids, "decoded": tokenizer.decode(np.array(ids, dtype=np.int32))})
    dec_cases = []
    for ids in decode_case_ids(tk, out_cases):
        dec_cases.append({"ids": ids, "decoded": tokenizer.decode(np.array(ids, dtype=np.int32))})
    result = {
        "source": REF_SOURCE.format(og=og.__version__, ort=onnxruntime.__version__),
        "cases": out_cases,
        "tokenizer": tok_cases,
        "decode_cases": dec_cases,
        "tokenizer_special_ids": {
            "bos_token_id": int(tokenizer.bos_token_id),
            "eos_token_ids": [int(t) for t in tokenizer.eos_token_ids],
            "pad_token_id": int(tokenizer.pad_token_id),
        },
    }
    try:
        result["chat_template_output"] = tokenizer.apply_chat_template(
            json.dumps(CHAT_MESSAGES), add_generation_prompt=True)
        result["chat_template_messages"] = CHAT_MESSAGES
    except Exception as e:  # noqa: BLE001
        result["chat_template_error"] = f"{type(e).__name__}: {e}"
    return result, all_steps


def hf_reference(hf_dir: Path, fixture_dir: Path, tk, cases, decode_ids):
    import transformers as tf

    model = tf.AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    out_cases, all_steps = [], []
    for prompt, max_length in cases:
        ids = torch.tensor([prompt], dtype=torch.long)
        with torch.no_grad():
            gc = tf.GenerationConfig(
                do_sample=False, max_length=max_length, min_length=0, num_beams=1,
                eos_token_id=tk["ids"]["eos"], pad_token_id=tk["ids"]["pad"], bos_token_id=tk["ids"]["bos"],
                temperature=None, top_k=None, top_p=None,
            )
            seq = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)[0].tolist()
            full = torch.tensor([seq], dtype=torch.long)
            logits = model(full).logits[0].float().numpy()
        # logits that chose token k sit at position len(prompt)-1+k
        steps = [logits[len(prompt) - 1 + k] for k in range(len(seq) - len(prompt))]
        first = model(ids).logits[0, -1].detach().float().numpy()
        out_cases.append({
            "prompt_ids": [int(t) for t in prompt],
            "max_length": max_length,
            "greedy_sequence": [int(t) for t in seq],
            "first_step_logits_head": [float(x) for x in first[:16]],
            "first_step_logits": [float(x) for x in first],
        })
        all_steps.append(steps)
    if decode_ids is None:
        decode_ids = decode_case_ids(tk, out_cases)
    tok = tf.AutoTokenizer.from_pretrained(str(fixture_dir))
    tok_cases = []
    for text in TOKENIZER_TEXTS:
        enc_ids = tok.encode(text, add_special_tokens=False)
        tok_cases.append({"text": text, "ids": enc_ids, "decoded": tok.decode(enc_ids, skip_special_tokens=True)})
    dec_cases = [{"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=True)} for ids in decode_ids]
    chat = tok.apply_chat_template(CHAT_MESSAGES, add_generation_prompt=True, tokenize=False)
    # The same folder through the bare `tokenizers` library (what the Rust `tokenizers` crate does):
    # transformers 5 may rebuild parts of the pipeline from tokenizer_class, this does not.
    raw = tk["tok"]
    raw_cases = []
    for text in TOKENIZER_TEXTS:
        enc_ids = raw.encode(text, add_special_tokens=False).ids
        raw_cases.append({"text": text, "ids": enc_ids, "decoded": raw.decode(enc_ids, skip_special_tokens=True)})
    raw_dec = [{"ids": ids, "decoded": raw.decode(ids, skip_special_tokens=True)} for ids in decode_ids]
    result = {
        "source": f"transformers {tf.__version__} with torch {torch.__version__}, CPU, fp32, eager attention, "
                  "generate(do_sample=False); tokenizer: AutoTokenizer on the fixture folder "
                  f"({type(tok).__name__}), encode(add_special_tokens=False), decode(skip_special_tokens=True)",
        "cases": out_cases,
        "tokenizer": tok_cases,
        "decode_cases": dec_cases,
        "chat_template_output": chat,
        "tokenizers_lib_source": "tokenizers " + __import__("tokenizers").__version__
        + ": Tokenizer.from_file(tokenizer.json), encode(add_special_tokens=False), decode(skip_special_tokens=True)",
        "tokenizers_lib_tokenizer": raw_cases,
        "tokenizers_lib_decode_cases": raw_dec,
    }
    return result, all_steps


def strip_eos(seq, eos):
    return seq[:-1] if seq and seq[-1] == eos else seq


def compare(og_res, og_steps, hf_res, hf_steps, eos):
    per_case = []
    worst_first, worst_all = 0.0, 0.0
    for a, b, sa, sb in zip(og_res["cases"], hf_res["cases"], og_steps, hf_steps):
        d_first = float(np.max(np.abs(np.array(a["first_step_logits"]) - np.array(b["first_step_logits"]))))
        ga, gb = a["greedy_sequence"][len(a["prompt_ids"]):], b["greedy_sequence"][len(b["prompt_ids"]):]
        n = min(len(sa), len(sb), len(ga), len(gb))
        # compare per-step logits while the two sequences agree
        common = 0
        for k in range(n):
            if ga[k] != gb[k]:
                break
            common += 1
        d_all = max([float(np.max(np.abs(sa[k] - sb[k]))) for k in range(min(common + 1, n))] or [0.0])
        worst_first, worst_all = max(worst_first, d_first), max(worst_all, d_all)
        per_case.append({
            "prompt_len": len(a["prompt_ids"]),
            "max_length": a["max_length"],
            "sequences_equal": a["greedy_sequence"] == b["greedy_sequence"],
            # transformers keeps a generated EOS in the sequence, onnxruntime-genai 0.18 does not
            "sequences_equal_ignoring_trailing_eos": strip_eos(a["greedy_sequence"], eos)
            == strip_eos(b["greedy_sequence"], eos),
            "generated": [len(ga), len(gb)],
            "first_step_max_abs_diff": d_first,
            "all_steps_max_abs_diff": d_all,
        })
    return {
        "all_sequences_equal": all(c["sequences_equal"] for c in per_case),
        "all_sequences_equal_ignoring_trailing_eos": all(c["sequences_equal_ignoring_trailing_eos"] for c in per_case),
        "first_step_max_abs_diff": worst_first,
        "all_steps_max_abs_diff": worst_all,
        "tokenizer_ids_equal": [x["ids"] for x in og_res["tokenizer"]] == [x["ids"] for x in hf_res["tokenizer"]],
        "tokenizer_decoded_equal": [x["decoded"] for x in og_res["tokenizer"]]
        == [x["decoded"] for x in hf_res["tokenizer"]],
        "tokenizer_mismatches": [
            {"text": x["text"], "ort_genai": [x["ids"], x["decoded"]], "transformers": [y["ids"], y["decoded"]]}
            for x, y in zip(og_res["tokenizer"], hf_res["tokenizer"]) if x != y],
        "decode_mismatches": [
            {"ids": x["ids"], "ort_genai": x["decoded"], "transformers": y["decoded"]}
            for x, y in zip(og_res["decode_cases"], hf_res["decode_cases"]) if x["decoded"] != y["decoded"]],
        "chat_template_equal": og_res.get("chat_template_output") == hf_res.get("chat_template_output"),
        "tokenizers_lib_ids_equal": [x["ids"] for x in og_res["tokenizer"]]
        == [x["ids"] for x in hf_res["tokenizers_lib_tokenizer"]],
        "tokenizers_lib_decoded_equal": [x["decoded"] for x in og_res["tokenizer"]]
        == [x["decoded"] for x in hf_res["tokenizers_lib_tokenizer"]],
        "tokenizers_lib_tokenizer_mismatches": [
            {"text": x["text"], "ort_genai": [x["ids"], x["decoded"]], "tokenizers_lib": [y["ids"], y["decoded"]]}
            for x, y in zip(og_res["tokenizer"], hf_res["tokenizers_lib_tokenizer"]) if x != y],
        "tokenizers_lib_decode_mismatches": [
            {"ids": x["ids"], "ort_genai": x["decoded"], "tokenizers_lib": y["decoded"]}
            for x, y in zip(og_res["decode_cases"], hf_res["tokenizers_lib_decode_cases"])
            if x["decoded"] != y["decoded"]],
        "cases": per_case,
    }


def _fmt(obj, indent=0):
    """JSON with lists of numbers kept on one line (the logits would otherwise take a line each)."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(k, ensure_ascii=False)}: {_fmt(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(isinstance(x, (int, float, bool)) or x is None for x in obj):
            return json.dumps(obj)
        items = [f"{pad} {_fmt(v, indent + 1)}" for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def dump_json(path: Path, obj):
    text = _fmt(obj) + "\n"
    assert json.loads(text) == json.loads(json.dumps(obj))
    path.write_text(text)


# ---------------------------------------------------------------------------------------------
# Graph summary
# ---------------------------------------------------------------------------------------------
def graph_summary(fixture_dir: Path):
    import onnx

    cfg = json.loads((fixture_dir / "genai_config.json").read_text())
    m = onnx.load(str(fixture_dir / cfg["model"]["decoder"]["filename"]), load_external_data=False)

    def vi(v):
        t = v.type.tensor_type
        dims = [d.dim_param or d.dim_value for d in t.shape.dim]
        return {"name": v.name, "type": onnx.TensorProto.DataType.Name(t.elem_type).lower(), "shape": dims}

    ops = {}
    for n in m.graph.node:
        key = (n.domain or "ai.onnx") + ":" + n.op_type
        ops[key] = ops.get(key, 0) + 1
    attrs, node_io = {}, {}
    for n in m.graph.node:
        if n.op_type in ("GroupQueryAttention", "MatMulNBits", "Attention", "MultiHeadAttention") and n.op_type not in attrs:
            attrs[n.op_type] = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            attrs[n.op_type] = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs[n.op_type].items()}
            node_io[n.op_type] = {"name": n.name, "inputs": list(n.input), "outputs": list(n.output)}
    inits = {i.name: [onnx.TensorProto.DataType.Name(i.data_type).lower(), list(i.dims)] for i in m.graph.initializer}
    return {
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "inputs": [vi(v) for v in m.graph.input],
        "outputs": [vi(v) for v in m.graph.output],
        "ops": dict(sorted(ops.items())),
        "op_attributes": attrs,
        "example_nodes": node_io,
        "initializers": inits,
        "past_present_share_buffer": cfg["search"].get("past_present_share_buffer"),
        "provider_options": cfg["model"]["decoder"]["session_options"].get("provider_options"),
    }


def folder_size(p: Path):
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "fixtures"))
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--keep-hf", default=None, help="keep the Hugging Face checkpoints in this folder")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for f in FIXTURES:
            print(f[0])
        return 0

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    out_root = Path(args.out).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    wanted = [f for f in FIXTURES if args.only is None or f[0] in args.only]
    if args.only:
        unknown = set(args.only) - {f[0] for f in FIXTURES}
        if unknown:
            ap.error(f"unknown fixtures: {sorted(unknown)}")

    summary_path = out_root / "SUMMARY.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary.setdefault("fixtures", {})

    tmp = Path(tempfile.mkdtemp(prefix="genai-fixtures-"))
    hf_root = Path(args.keep_hf).resolve() if args.keep_hf else tmp / "hf"
    try:
        tokenizers_ = {}
        hf_dirs = {}
        for name, family, precision, ep, extra in wanted:
            kind = FAMILIES[family][0]
            if kind not in tokenizers_:
                tokenizers_[kind] = make_tokenizer(kind)
                print(f"[tokenizer] {kind}: vocab {tokenizers_[kind]['tok'].get_vocab_size()} "
                      f"special ids {tokenizers_[kind]['ids']}", flush=True)
            tk = tokenizers_[kind]
            if family not in hf_dirs:
                hf_dirs[family] = hf_root / family
                if hf_dirs[family].exists():
                    shutil.rmtree(hf_dirs[family])
                make_hf_checkpoint(family, tk, hf_dirs[family])
                print(f"[hf] {family} checkpoint written", flush=True)

            out_dir = out_root / name
            if out_dir.exists():
                shutil.rmtree(out_dir)
            packaging = FAMILIES[family][2]
            entry = {"family": family, "precision": precision, "execution_provider": ep,
                     "extra_options": extra, "tokenizer": kind, "tokenizer_packaging": packaging}
            summary["fixtures"][name] = entry
            try:
                entry["command"] = run_builder(hf_dirs[family], out_dir, precision, ep, extra, tmp / "cache",
                                               tmp / f"{name}.builder.log")
            except Exception as e:  # noqa: BLE001
                entry["status"] = "builder_failed"
                entry["error"] = str(e)
                print(f"[{name}] BUILDER FAILED: {e}", flush=True)
                if out_dir.exists():
                    shutil.rmtree(out_dir)
                continue
            finish_fixture_tokenizer(tk, out_dir, packaging)
            tkf = fixture_tokenizer(tk, out_dir)
            entry["graph"] = graph_summary(out_dir)
            cases = prompt_cases(tkf)
            try:
                og_res, og_steps = og_reference(out_dir, tkf, cases)
                dump_json(out_dir / "expected_ort_genai_0.18.json", og_res)
                entry["ort_genai_reference"] = True
                entry["cases"] = [{"prompt_len": len(c["prompt_ids"]), "max_length": c["max_length"],
                                   "generated": len(c["greedy_sequence"]) - len(c["prompt_ids"]),
                                   "finish_reason": c["finish_reason"],
                                   "min_top1_margin": c["min_top1_margin"]} for c in og_res["cases"]]
                for c in og_res["cases"]:
                    gen = c["greedy_sequence"][len(c["prompt_ids"]):]
                    print(f"[{name}] prompt {len(c['prompt_ids'])} -> {len(gen)} generated, "
                          f"{len(set(gen))} distinct: {gen[:12]}...", flush=True)
            except Exception as e:  # noqa: BLE001
                entry["ort_genai_reference"] = False
                entry["ort_genai_error"] = f"{type(e).__name__}: {e}"
                print(f"[{name}] official runtime on CPU failed: {e}", flush=True)
                traceback.print_exc()
                og_res = None
                (out_dir / "NOTES.md").write_text(
                    f"# {name}: no official reference\n\n"
                    "`expected_ort_genai_0.18.json` is missing on purpose: the official runtime "
                    "(onnxruntime-genai 0.18.0 on onnxruntime 1.31.1) could not run this model on CPU "
                    "with the provider list cleared (`og.Config(dir).clear_providers()`):\n\n"
                    f"    {type(e).__name__}: {e}\n")
            if precision == "fp32":
                # decode the same ids as the official reference did (its greedy sequences)
                decode_ids = [c["ids"] for c in og_res["decode_cases"]] if og_res is not None else None
                hf_res, hf_steps = hf_reference(hf_dirs[family], out_dir, tkf, cases, decode_ids)
                if og_res is not None:
                    hf_res["comparison_with_ort_genai"] = compare(og_res, og_steps, hf_res, hf_steps,
                                                                  tkf["ids"]["eos"])
                    cmp = hf_res["comparison_with_ort_genai"]
                    entry["vs_transformers"] = {k: (len(v) if k.endswith("mismatches") else v)
                                                for k, v in cmp.items() if k != "cases"}
                    print(f"[{name}] vs transformers: {entry['vs_transformers']}", flush=True)
                dump_json(out_dir / "expected_transformers.json", hf_res)
            if ep != "cpu" and og_res is not None:
                (out_dir / "NOTES.md").write_text(
                    f"# {name}: reference made on CPU\n\n"
                    f"This folder was built for the {ep.upper()} execution provider (`-e {ep} -p {precision}`; "
                    "genai_config.json names its provider options), but `expected_ort_genai_0.18.json` was "
                    "produced by the official runtime (onnxruntime-genai 0.18.0, onnxruntime 1.31.1) on CPU "
                    "with the provider list cleared (`og.Config(dir).clear_providers()`), i.e. with ONNX "
                    f"Runtime's CPU kernels for {precision}. A CUDA run may differ in the last bits of the "
                    "logits and, where the top two logits are close, in the greedy tokens.\n")
            entry["files"] = {f.name: f.stat().st_size for f in sorted(out_dir.iterdir())}
            entry["size_bytes"] = folder_size(out_dir)
            entry["status"] = "ok"
            entry["sha256_model_onnx"] = hashlib.sha256((out_dir / "model.onnx").read_bytes()).hexdigest()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    summary["fixtures"] = {k: summary["fixtures"][k] for k in [f[0] for f in FIXTURES] if k in summary["fixtures"]}
    dump_json(summary_path, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
