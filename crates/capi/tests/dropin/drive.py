# Drives the official onnxruntime_genai Python API over model folders and writes every observable result to one JSON file (drop-in test).
"""Drive `onnxruntime_genai` (whatever library the package loads) over model folders.

    python drive.py --out results.json MODEL_DIR [MODEL_DIR ...] [--skip SCENARIO ...]

Every scenario is independent: an exception inside one is recorded (type name and message) and the run
goes on. Results are JSON: {"meta": {...}, "models": {NAME: {"dir": ..., "scenarios": {SCENARIO: OUTCOME}}}}
where an OUTCOME is {"raised": false, "value": ...} or {"raised": true, "type": ..., "message": ...}.
Values may contain nested outcomes (steps that are expected to fail). Any key containing "logits" holds
floating-point logits ({"shape", "dtype", "values"}), which compare.py checks with a tolerance; everything
else is compared exactly.

The file is rewritten after every scenario and names the scenario in progress ("running"), so that if the
process dies (abort, segfault) the caller can tell where, and re-run with --skip for the rest.
"""

import argparse
import faulthandler
import json
import os
import sys
import traceback

import numpy as np

import onnxruntime_genai as og

# Texts for encode/decode. Covers ASCII, Latin-1 accents, emoji and CJK (multi-byte UTF-8, byte fallback),
# the empty string and whitespace-only strings.
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "héllo wörld 🙂 日本語 — ü",
    "",
    " ",
    "  \n\t  leading and trailing  ",
    "line one\nline two\n\n",
    "<|im_start|>user\nhi<|im_end|>",
    "1234567890 + 42 = ?",
]
TEXT_PROMPT = "The quick brown fox"
DEFAULT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello! What is the weather like today?"},
    {"role": "assistant", "content": "Sunny."},
    {"role": "user", "content": "héllo 🙂"},
]
EXPLICIT_TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)
MAX_LEN_CAP = 40  # keeps a debug build of the replacement library fast enough


# ----------------------------------------------------------------------------------------------------
# Helpers that turn API results into JSON.


def ids(arr):
    """Token ids (numpy array or list) as a flat list of Python ints."""
    return [int(x) for x in np.asarray(arr).reshape(-1).tolist()]


def floats(arr):
    """A float tensor as shape, dtype and the flat list of values (exact float32/float16 values)."""
    a = np.asarray(arr)
    return {
        "shape": [int(s) for s in a.shape],
        "dtype": str(a.dtype),
        "values": [float(x) for x in a.astype(np.float32).reshape(-1).tolist()],
    }


def attempt(fn):
    """Run fn() and return an outcome: its value, or the exception's type name and message."""
    try:
        return {"raised": False, "value": fn()}
    except Exception as e:  # noqa: BLE001 - every exception is data here
        return {"raised": True, "type": type(e).__name__, "message": str(e)}


def i32(seq):
    return np.asarray(seq, dtype=np.int32)


def load_config(model_dir):
    cfg = og.Config(model_dir)
    cfg.clear_providers()  # CPU only: the cuda fixtures name the CUDA provider
    return cfg


def params(model, **opts):
    p = og.GeneratorParams(model)
    if opts:
        p.set_search_options(**opts)
    return p


def run_to_end(gen, limit=1000):
    """generate_next_token until is_done; returns the get_next_tokens after every step."""
    nexts = []
    while not gen.is_done() and len(nexts) < limit:
        gen.generate_next_token()
        nexts.append(ids(gen.get_next_tokens()))
    return nexts


def cap(max_length, prompt_len):
    return max(min(int(max_length), MAX_LEN_CAP), prompt_len + 1)


# ----------------------------------------------------------------------------------------------------
# Per-model context: the model, tokenizer, prompts.


class Ctx:
    def __init__(self, model_dir):
        self.dir = model_dir
        self.name = os.path.basename(os.path.normpath(model_dir))
        self.model = None
        self.tokenizer = None
        self.vocab = None  # from the logits shape
        self.expected = {}
        path = os.path.join(model_dir, "expected_ort_genai_0.18.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.expected = json.load(f)
        self.prompts = [
            {"name": "case%d" % i, "ids": [int(t) for t in c["prompt_ids"]], "max_length": int(c.get("max_length", 32))}
            for i, c in enumerate(self.expected.get("cases", []))
        ]
        if not self.prompts:
            self.prompts = [{"name": "case0", "ids": [5, 6, 7, 8], "max_length": 32}]

    def need_model(self):
        if self.model is None:
            raise RuntimeError("SCENARIO-SETUP: model could not be loaded")
        return self.model

    def need_tokenizer(self):
        if self.tokenizer is None:
            raise RuntimeError("SCENARIO-SETUP: tokenizer could not be created")
        return self.tokenizer

    def need_vocab(self):
        if self.vocab is None:
            raise RuntimeError("SCENARIO-SETUP: vocabulary size unknown")
        return self.vocab

    def text_prompt_ids(self):
        """The tokenizer-encoded text prompt; ids outside the model's vocabulary make this a failing prompt
        (the gpt2 conformance model has a 1000-token model under a full GPT-2 tokenizer)."""
        return ids(self.need_tokenizer().encode(TEXT_PROMPT))

    def all_prompts(self):
        out = list(self.prompts)
        if self.tokenizer is not None:
            out.append({"name": "text", "ids": self.text_prompt_ids(), "max_length": 32})
        return out


# ----------------------------------------------------------------------------------------------------
# Scenarios. Each takes the context and returns a JSON value; exceptions are recorded by the runner.


def sc_model_from_config(ctx):
    cfg = load_config(ctx.dir)
    ctx.model = og.Model(cfg)
    return {"type": ctx.model.type, "device_type": ctx.model.device_type}


def sc_model_from_path(ctx):
    # Uses the providers named in genai_config.json (the cuda fixtures ask for CUDA).
    m = og.Model(ctx.dir)
    return {"type": m.type, "device_type": m.device_type}


def sc_config_append_cpu(ctx):
    cfg = og.Config(ctx.dir)
    cfg.clear_providers()
    cfg.append_provider("cpu")
    m = og.Model(cfg)
    return {"type": m.type, "device_type": m.device_type}


def sc_config_overlay(ctx):
    cfg = load_config(ctx.dir)
    overlay = {"search": {"max_length": 24, "min_length": 3, "top_k": 7, "top_p": 0.5,
                          "temperature": 0.25, "repetition_penalty": 1.5, "do_sample": True}}
    cfg.overlay(json.dumps(overlay))
    m = og.Model(cfg)
    out = {"search_options": params(m).get_search_options()}
    bad_json = load_config(ctx.dir)
    out["overlay_invalid_json"] = attempt(lambda: bad_json.overlay("{not json"))
    bad_key = load_config(ctx.dir)
    out["overlay_unknown_key"] = attempt(lambda: bad_key.overlay('{"search": {"no_such_option": 1}}'))
    return out


def sc_tokenizer_create(ctx):
    ctx.tokenizer = og.Tokenizer(ctx.need_model())
    return True


def sc_vocab_probe(ctx):
    """Vocabulary size from the logits of a one-token prompt (used by later scenarios)."""
    m = ctx.need_model()
    g = og.Generator(m, params(m, max_length=8))
    g.append_tokens(i32(ctx.prompts[0]["ids"][:1]))
    ctx.vocab = int(np.asarray(g.get_logits()).shape[-1])
    return ctx.vocab


def sc_tokenizer_special(ctx):
    t = ctx.need_tokenizer()
    return {
        "bos_token_id": attempt(lambda: int(t.bos_token_id)),
        "eos_token_ids": attempt(lambda: ids(t.eos_token_ids)),
        "pad_token_id": attempt(lambda: int(t.pad_token_id)),
    }


def sc_tokenizer_encode_decode(ctx):
    t = ctx.need_tokenizer()
    out = []
    for text in TEXTS:
        enc = attempt(lambda: ids(t.encode(text)))
        dec = attempt(lambda: t.decode(i32(enc["value"]))) if not enc["raised"] else None
        out.append({"text": text, "encode": enc, "decode": dec})
    return out


def sc_tokenizer_decode_ids(ctx):
    t = ctx.need_tokenizer()
    cases = [c["ids"] for c in ctx.expected.get("decode_cases", [])]
    special = []
    for name in ("bos_token_id", "pad_token_id"):
        try:
            special.append(int(getattr(t, name)))
        except Exception:  # noqa: BLE001
            pass
    try:
        special += ids(t.eos_token_ids)
    except Exception:  # noqa: BLE001
        pass
    cases.append(special)
    cases.append(special + [5, 6, 7] + special)
    cases.append([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    cases.append([])
    return [{"ids": c, "decode": attempt(lambda: t.decode(i32(c)))} for c in cases]


def sc_tokenizer_batch(ctx):
    t = ctx.need_tokenizer()
    texts = ["Hello world", "a", "The quick brown fox jumps over the lazy dog.", ""]
    tensor = t.encode_batch(texts)
    arr = tensor.as_numpy()
    return {
        "shape": [int(s) for s in tensor.shape()],
        "ids": [ids(row) for row in arr],
        "decode_batch": attempt(lambda: list(t.decode_batch(tensor))),
    }


def sc_tokenizer_to_token_id(ctx):
    t = ctx.need_tokenizer()
    words = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "Hello", "a", "the",
             "\u2581the", "Ġthe", "zzzz_not_a_token_zzzz", ""]
    return {w: attempt(lambda: int(t.to_token_id(w))) for w in words}


def sc_chat_template(ctx):
    t = ctx.need_tokenizer()
    messages = json.dumps(ctx.expected.get("chat_template_messages") or DEFAULT_MESSAGES)
    messages2 = json.dumps(DEFAULT_MESSAGES)
    return {
        "own_default": attempt(lambda: t.apply_chat_template(messages)),
        "own_gen_prompt": attempt(lambda: t.apply_chat_template(messages, add_generation_prompt=True)),
        "own_no_gen_prompt": attempt(lambda: t.apply_chat_template(messages, add_generation_prompt=False)),
        "own_multi_turn": attempt(lambda: t.apply_chat_template(messages2, add_generation_prompt=True)),
        "explicit_gen_prompt": attempt(
            lambda: t.apply_chat_template(messages2, template_str=EXPLICIT_TEMPLATE, add_generation_prompt=True)),
        "explicit_no_gen_prompt": attempt(
            lambda: t.apply_chat_template(messages2, template_str=EXPLICIT_TEMPLATE, add_generation_prompt=False)),
    }


def sc_stream_text(ctx):
    """Streaming detokenizer over the ids of texts with multi-byte characters."""
    t = ctx.need_tokenizer()
    out = []
    for text in TEXTS:
        toks = ids(t.encode(text))
        s = t.create_stream()
        out.append({"ids": toks, "pieces": [s.decode(int(x)) for x in toks]})
    return out


def sc_search_options(ctx):
    m = ctx.need_model()
    out = {"default": params(m).get_search_options()}
    p = params(m, max_length=30, min_length=5, repetition_penalty=1.2, no_repeat_ngram_size=3, do_sample=False,
               batch_size=1, top_k=10, top_p=0.9, temperature=0.7, random_seed=5)
    out["after_set"] = p.get_search_options()
    p2 = og.GeneratorParams(m)
    out["unknown_option"] = attempt(lambda: p2.set_search_options(no_such_option=1))
    out["after_unknown"] = p2.get_search_options()
    out["non_integer_min_length"] = attempt(lambda: og.GeneratorParams(m).set_search_options(min_length=2.5))
    return out


def greedy_scenario(prompt):
    def run(ctx):
        m, t = ctx.need_model(), ctx.need_tokenizer()
        ml = cap(prompt["max_length"], len(prompt["ids"]))
        g = og.Generator(m, params(m, max_length=ml, do_sample=False))
        g.append_tokens(i32(prompt["ids"]))
        count_after_prompt = int(g.token_count())
        nexts = run_to_end(g)
        seq = ids(g.get_sequence(0))
        s = t.create_stream()
        return {
            "max_length": ml,
            "token_count_after_prompt": count_after_prompt,
            "next_tokens": nexts,
            "sequence": seq,
            "token_count": int(g.token_count()),
            "is_done": bool(g.is_done()),
            "generate_after_done": attempt(lambda: g.generate_next_token()),
            "after_extra_generate": attempt(
                lambda: {"sequence": ids(g.get_sequence(0)), "next_tokens": ids(g.get_next_tokens()),
                         "is_done": bool(g.is_done()), "token_count": int(g.token_count())}),
            "decoded": t.decode(i32(seq)),
            "decoded_generated": t.decode(i32(seq[len(prompt["ids"]):])),
            "stream_pieces": [s.decode(int(x)) for x in seq],
        }
    return run


def logits_scenario(prompt, with_output):
    def run(ctx):
        m = ctx.need_model()
        ml = cap(prompt["max_length"], len(prompt["ids"]))
        g = og.Generator(m, params(m, max_length=ml))
        g.append_tokens(i32(prompt["ids"]))
        out = {"logits_after_prompt": floats(g.get_logits())}
        if with_output:
            out["get_output_logits_after_prompt"] = attempt(lambda: floats(g.get_output("logits")))
        steps = []
        for _ in range(3):
            if g.is_done():
                break
            g.generate_next_token()
            step = {"next_tokens": ids(g.get_next_tokens()), "logits": floats(g.get_logits())}
            if with_output:
                step["get_output_logits"] = attempt(lambda: floats(g.get_output("logits")))
            steps.append(step)
        out["steps"] = steps
        out["sequence"] = ids(g.get_sequence(0))
        return out
    return run


def sc_rewind(ctx):
    m = ctx.need_model()
    prompt = ctx.prompts[0]["ids"]
    ml = cap(32, len(prompt))
    g = og.Generator(m, params(m, max_length=ml))
    g.append_tokens(i32(prompt))
    for _ in range(6):
        if not g.is_done():
            g.generate_next_token()
    out = {"before": ids(g.get_sequence(0))}
    n = len(prompt) + 2
    g.rewind_to(n)
    out["after_rewind"] = ids(g.get_sequence(0))
    out["token_count_after_rewind"] = int(g.token_count())
    out["is_done_after_rewind"] = bool(g.is_done())
    run_to_end(g)
    out["continued"] = ids(g.get_sequence(0))
    # Rewind into the middle, append different tokens, continue.
    g.rewind_to(len(prompt) + 1)
    g.append_tokens(i32([5, 6]))
    out["logits_after_rewind_append"] = floats(g.get_logits())
    run_to_end(g)
    out["after_rewind_append"] = ids(g.get_sequence(0))
    # Rewind to 0 and start again with the same prompt: must equal the first run.
    g.rewind_to(0)
    out["after_rewind_0"] = ids(g.get_sequence(0))
    out["token_count_after_rewind_0"] = int(g.token_count())
    g.append_tokens(i32(prompt))
    run_to_end(g)
    out["rerun"] = ids(g.get_sequence(0))
    out["rewind_beyond"] = attempt(lambda: g.rewind_to(len(out["rerun"]) + 5))
    out["sequence_after_failed_rewind"] = ids(g.get_sequence(0))
    return out


def sc_append_in_chunks(ctx):
    """The prompt appended in two pieces, then generation (chunked prefill)."""
    m = ctx.need_model()
    prompt = max((p["ids"] for p in ctx.prompts), key=len)
    if len(prompt) < 2:
        prompt = prompt + [5]
    ml = cap(32, len(prompt))
    g = og.Generator(m, params(m, max_length=ml))
    half = len(prompt) // 2
    g.append_tokens(i32(prompt[:half]))
    g.append_tokens(i32(prompt[half:]))
    out = {"logits_after_prompt": floats(g.get_logits())}
    run_to_end(g)
    out["sequence"] = ids(g.get_sequence(0))
    g2 = og.Generator(m, params(m, max_length=ml))
    g2.append_tokens(prompt)  # a plain Python list is accepted too
    run_to_end(g2)
    out["sequence_list_input"] = ids(g2.get_sequence(0))
    return out


def penalty_scenario(opts):
    def run(ctx):
        m = ctx.need_model()
        out = []
        for prompt in ctx.prompts[:2]:
            ml = cap(32, len(prompt["ids"]))
            g = og.Generator(m, params(m, max_length=ml, **opts))
            g.append_tokens(i32(prompt["ids"]))
            run_to_end(g)
            out.append({"prompt": prompt["ids"], "sequence": ids(g.get_sequence(0))})
        return out
    return run


def sc_min_length_eos(ctx):
    """min_length on a prompt that stops at EOS greedily (when a fixture has one): EOS must be held off."""
    m = ctx.need_model()
    out = []
    for prompt in ctx.prompts:
        ml = cap(prompt["max_length"], len(prompt["ids"]))
        g = og.Generator(m, params(m, max_length=ml))
        g.append_tokens(i32(prompt["ids"]))
        run_to_end(g)
        seq = ids(g.get_sequence(0))
        if len(seq) >= ml:
            continue
        g2 = og.Generator(m, params(m, max_length=ml, min_length=min(ml, len(seq) + 4)))
        g2.append_tokens(i32(prompt["ids"]))
        run_to_end(g2)
        out.append({"prompt": prompt["ids"], "plain": seq, "min_length": ids(g2.get_sequence(0))})
    return out


def sc_set_logits(ctx):
    m = ctx.need_model()
    vocab = ctx.need_vocab()
    prompt = ctx.prompts[0]["ids"]
    g = og.Generator(m, params(m, max_length=cap(32, len(prompt))))
    g.append_tokens(i32(prompt))
    forced = 7 % vocab
    logits = np.full((1, vocab), -10.0, dtype=np.float32)
    logits[0, forced] = 5.0
    g.set_logits(logits)
    out = {"get_logits_after_set": floats(g.get_logits())}
    g.generate_next_token()
    out["chosen"] = ids(g.get_next_tokens())
    for _ in range(2):
        if not g.is_done():
            g.generate_next_token()
    out["sequence"] = ids(g.get_sequence(0))
    # After a generate_next_token the next logits are not computed yet in the official runtime.
    out["set_logits_after_step"] = attempt(lambda: g.set_logits(logits))

    def wrong_size():
        g2 = og.Generator(m, params(m, max_length=16))
        g2.append_tokens(i32(prompt))
        g2.set_logits(np.zeros((1, vocab + 3), dtype=np.float32))
    out["set_logits_wrong_size"] = attempt(wrong_size)
    return out


def sc_terminate(ctx):
    m = ctx.need_model()
    prompt = ctx.prompts[0]["ids"]
    g = og.Generator(m, params(m, max_length=cap(32, len(prompt))))
    g.append_tokens(i32(prompt))
    g.generate_next_token()
    out = {"set_option": attempt(lambda: g.set_runtime_option("terminate_session", "1"))}
    out["generate_after_terminate"] = attempt(lambda: g.generate_next_token())
    out["sequence_after_terminate"] = ids(g.get_sequence(0))
    return out


def sc_batch(ctx):
    m, t = ctx.need_model(), ctx.need_tokenizer()
    pad = int(t.pad_token_id)
    # Two prompts of different lengths (at most 8 tokens, so that most of the length is generated): a case
    # prompt of 3..8 tokens (or a cut of the longest) and a shorter one. Neither contains the pad id.
    cands = [p["ids"] for p in ctx.prompts if pad not in p["ids"]] or [[5, 6, 7]]
    a = next((c for c in sorted(cands, key=len) if 3 <= len(c) <= 8), max(cands, key=len)[:8])
    if len(a) < 3:
        a = (a + [5, 6, 7])[:3]
    b = min(cands, key=len)
    if len(b) >= len(a):
        b = a[:1]
    width = max(len(a), len(b))
    rows = [a + [pad] * (width - len(a)), b + [pad] * (width - len(b))]  # right padding with pad_token_id
    ml = width + 12
    g = og.Generator(m, params(m, max_length=ml, batch_size=2))
    g.append_tokens(i32(rows))
    out = {"rows": rows, "logits_after_prompt": floats(g.get_logits())}
    nexts = run_to_end(g)
    out["next_tokens"] = nexts
    out["sequences"] = [ids(g.get_sequence(0)), ids(g.get_sequence(1))]
    singles = []
    for prompt in (a, b):
        g1 = og.Generator(m, params(m, max_length=ml))
        g1.append_tokens(i32(prompt))
        run_to_end(g1)
        singles.append(ids(g1.get_sequence(0)))
    out["singles"] = singles
    # encode_batch's tensor straight into append_tokens (Tensor overload).
    tensor = t.encode_batch(["Hello world", "a"])
    width = int(tensor.shape()[1])
    g2 = og.Generator(m, params(m, max_length=cap(24, width), batch_size=2))
    out["append_tensor"] = attempt(lambda: g2.append_tokens(tensor))
    if not out["append_tensor"]["raised"]:
        run_to_end(g2)
        out["tensor_sequences"] = [ids(g2.get_sequence(0)), ids(g2.get_sequence(1))]
    return out


def sc_beam(ctx):
    m = ctx.need_model()
    prompt = ctx.prompts[0]["ids"]
    g = og.Generator(m, params(m, max_length=cap(20, len(prompt)), num_beams=2))
    g.append_tokens(i32(prompt))
    run_to_end(g)
    return {"sequence": ids(g.get_sequence(0))}


def sc_sampling(ctx):
    """Sampled generation. A different random number generator is allowed, so only properties that every
    correct implementation shares are recorded: lengths, tokens in range and among the top-k of the logits
    they were drawn from, the same seed giving the same sequence within one implementation, and the cases
    where the cut leaves one token (top_k=1, tiny top_p), which must equal greedy exactly."""
    m = ctx.need_model()
    vocab = ctx.need_vocab()
    prompt = ctx.prompts[0]["ids"]
    ml = cap(32, len(prompt))
    k = 5

    eos = set(ids(ctx.need_tokenizer().eos_token_ids))

    def sample(seed, check_topk=False, **opts):
        g = og.Generator(m, params(m, max_length=ml, do_sample=True, random_seed=seed, **opts))
        g.append_tokens(i32(prompt))
        in_topk = True
        last = None
        while not g.is_done():
            if check_topk:
                lg = np.asarray(g.get_logits(), dtype=np.float32).reshape(-1)
                allowed = set(int(i) for i in np.argsort(-lg, kind="stable")[:k])
            g.generate_next_token()
            last = int(ids(g.get_next_tokens())[0])
            if check_topk and last not in allowed:
                in_topk = False
        seq = ids(g.get_sequence(0))
        # Generation ends at max_length, or earlier only on a sampled EOS (which length it is depends on the RNG).
        ended_right = len(seq) == ml or (len(seq) < ml and last in eos)
        return seq, in_topk, ended_right

    s1, topk_ok, end1 = sample(1234, check_topk=True, top_k=k, top_p=0.9, temperature=0.8)
    s2, _, _ = sample(1234, check_topk=False, top_k=k, top_p=0.9, temperature=0.8)
    s3, _, end3 = sample(99, top_k=0, top_p=1.0, temperature=1.5)  # top_k 0: no top-k cut
    g = og.Generator(m, params(m, max_length=ml, do_sample=False))
    g.append_tokens(i32(prompt))
    run_to_end(g)
    greedy = ids(g.get_sequence(0))
    topk1 = sample(7, top_k=1, temperature=3.0)[0]
    tiny_p = sample(7, top_k=50, top_p=1e-6)[0]
    temp0 = sample(7, temperature=0.0)[0]
    return {
        "ends_at_max_length_or_eos": end1 and end3,
        "prompt_kept": s1[:len(prompt)] == prompt and s3[:len(prompt)] == prompt,
        "tokens_in_range": all(0 <= x < vocab for x in s1 + s3),
        "tokens_in_top_k": topk_ok,
        "same_seed_same_sequence": s1 == s2,
        "top_k_1_sequence": topk1,
        "top_k_1_equals_greedy": topk1 == greedy,
        "tiny_top_p_sequence": tiny_p,
        "temperature_0_sequence": temp0,
    }


def sc_errors(ctx):
    m = ctx.need_model()
    vocab = ctx.need_vocab()
    t = ctx.need_tokenizer()
    prompt = ctx.prompts[0]["ids"]
    out = {}
    out["model_bad_path"] = attempt(lambda: og.Model(os.path.join(ctx.dir, "no_such_subdir")))
    out["config_bad_path"] = attempt(lambda: og.Config(os.path.join(ctx.dir, "no_such_subdir")))

    def append(tokens, ml=16):
        def f():
            g = og.Generator(m, params(m, max_length=ml))
            g.append_tokens(i32(tokens))
            return {"logits": floats(g.get_logits())}
        return f

    out["append_token_eq_vocab"] = attempt(append([vocab]))
    out["append_token_huge"] = attempt(append([vocab * 1000 + 17]))
    # ONNX Gather accepts negative indices down to -vocab, so -1 may succeed in the official runtime.
    out["append_token_minus_1"] = attempt(append([-1]))
    out["append_token_very_negative"] = attempt(append([-(vocab * 1000 + 17)]))
    out["append_empty"] = attempt(append([]))
    out["append_longer_than_max_length"] = attempt(append(list(range(1, 12)), ml=8))

    def rewind_beyond():
        g = og.Generator(m, params(m, max_length=16))
        g.append_tokens(i32(prompt))
        g.rewind_to(len(prompt) + 3)
    out["rewind_beyond"] = attempt(rewind_beyond)
    out["decode_out_of_range"] = attempt(lambda: t.decode(i32([10 ** 6])))
    out["decode_minus_1"] = attempt(lambda: t.decode(i32([-1])))
    out["stream_decode_out_of_range"] = attempt(lambda: t.create_stream().decode(10 ** 6))
    def get_output_unknown():
        g = og.Generator(m, params(m, max_length=16))
        g.append_tokens(i32(prompt))
        return floats(g.get_output("no_such_output"))
    out["get_output_unknown"] = attempt(get_output_unknown)
    out["max_length_zero"] = attempt(lambda: og.GeneratorParams(m).set_search_options(max_length=0))
    return out


def sc_lazy_logits_at_end(ctx):
    """The official runtime computes a step's logits lazily: get_logits() after the last step runs another
    forward pass and makes is_done() false again. A drop-in reproduces that."""
    m = ctx.need_model()
    prompt = ctx.prompts[0]["ids"]
    ml = len(prompt) + 3
    g = og.Generator(m, params(m, max_length=ml))
    g.append_tokens(i32(prompt))
    run_to_end(g)
    out = {"is_done": bool(g.is_done()), "sequence": ids(g.get_sequence(0))}
    out["get_logits"] = attempt(lambda: floats(g.get_logits()))
    out["is_done_after_get_logits"] = bool(g.is_done())
    out["generate"] = attempt(lambda: g.generate_next_token())
    return out


# Scenarios that fill the context (model, tokenizer, vocabulary size) for the others. When the caller
# resumes after a crash they run again, unrecorded, unless they are the ones that crashed.
SETUP = ("model_from_config", "tokenizer_create", "vocab_probe")


def scenarios(ctx):
    """(name, function) in run order. Setup scenarios come first; the prompt list needs the tokenizer."""
    yield "model_from_config", sc_model_from_config
    yield "tokenizer_create", sc_tokenizer_create
    yield "vocab_probe", sc_vocab_probe
    yield "model_from_path", sc_model_from_path
    yield "config_append_cpu", sc_config_append_cpu
    yield "config_overlay", sc_config_overlay
    yield "tokenizer_special", sc_tokenizer_special
    yield "tokenizer_encode_decode", sc_tokenizer_encode_decode
    yield "tokenizer_decode_ids", sc_tokenizer_decode_ids
    yield "tokenizer_batch", sc_tokenizer_batch
    yield "tokenizer_to_token_id", sc_tokenizer_to_token_id
    yield "chat_template", sc_chat_template
    yield "stream_text", sc_stream_text
    yield "search_options", sc_search_options
    try:
        prompts = ctx.all_prompts()
    except Exception:  # noqa: BLE001 - the text prompt needs the tokenizer; id prompts still run
        prompts = list(ctx.prompts)
    for i, p in enumerate(prompts):
        yield "greedy_" + p["name"], greedy_scenario(p)
        yield "logits_" + p["name"], logits_scenario(p, with_output=(i < 2))
    yield "rewind", sc_rewind
    yield "append_in_chunks", sc_append_in_chunks
    yield "repetition_penalty", penalty_scenario({"repetition_penalty": 1.3})
    yield "no_repeat_ngram_1", penalty_scenario({"no_repeat_ngram_size": 1})
    yield "no_repeat_ngram_2", penalty_scenario({"no_repeat_ngram_size": 2})
    yield "penalties_combined", penalty_scenario(
        {"repetition_penalty": 1.2, "no_repeat_ngram_size": 2, "min_length": 12})
    yield "min_length_eos", sc_min_length_eos
    yield "set_logits", sc_set_logits
    yield "batch", sc_batch
    yield "beam", sc_beam
    yield "sampling", sc_sampling
    yield "errors", sc_errors
    yield "lazy_logits_at_end", sc_lazy_logits_at_end
    yield "terminate", sc_terminate


# ----------------------------------------------------------------------------------------------------


def loaded_genai_library():
    """Path of the libonnxruntime-genai.so this process mapped (proves which library is under test)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                if "libonnxruntime-genai" in line:
                    return os.path.realpath(line.split()[-1])
    except OSError:
        pass
    return None


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=None, ensure_ascii=False)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--skip", action="append", default=[],
                    help="scenario already recorded: not recorded again (setup scenarios still run; repeatable)")
    ap.add_argument("--crashed", action="append", default=[],
                    help="scenario that killed an earlier run: not run at all (repeatable)")
    ap.add_argument("--traceback", action="store_true", help="also record tracebacks of failed scenarios")
    ap.add_argument("models", nargs="+", help="model folders")
    args = ap.parse_args()

    data = {
        "meta": {
            "package_file": og.__file__,
            "package_version": getattr(og, "__version__", None),
            "genai_library": loaded_genai_library(),
            "python": sys.version.split()[0],
        },
        "models": {},
        "running": None,
    }
    faulthandler.enable()  # a crash prints the Python stack to stderr, which the caller keeps
    skip, crashed = set(args.skip), set(args.crashed)
    for model_dir in args.models:
        ctx = Ctx(model_dir)
        entry = {"dir": model_dir, "scenarios": {}}
        data["models"][ctx.name] = entry
        for name, fn in scenarios(ctx):
            if name in crashed:
                continue
            if name in skip:
                if name in SETUP:
                    try:
                        fn(ctx)
                    except Exception:  # noqa: BLE001 - already recorded by the earlier run
                        pass
                continue
            data["running"] = [ctx.name, name]
            write(args.out, data)
            try:
                outcome = {"raised": False, "value": fn(ctx)}
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                outcome = {"raised": True, "type": type(e).__name__, "message": str(e)}
                if args.traceback:
                    outcome["traceback"] = traceback.format_exc()
            entry["scenarios"][name] = outcome
        data["running"] = None
        write(args.out, data)
    data["meta"]["genai_library"] = loaded_genai_library()
    write(args.out, data)


if __name__ == "__main__":
    main()
