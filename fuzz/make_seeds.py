#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from the fixtures in
models/fixtures: configs, model graphs (without their weights), tokenizer ids and chat
templates. Run from anywhere; it rewrites the corpus folders it owns."""

import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "models", "fixtures")
CORPUS = os.path.join(HERE, "corpus")

# The fixture order of fuzz_targets/onnx_lift.rs and fuzz_targets/stream_decode.rs.
LIFT_FIXTURES = ["qwen2-fp32-cpu", "llama-fp32-cpu", "phi3-fp32-cpu", "qwen3-fp32-cpu",
                 "qwen2-int4-cpu", "llama-fp16-cuda", "llama-bf16-cuda"]
STREAM_FIXTURES = ["qwen2-fp32-cpu", "llama-fp32-cpu", "phi3-fp32-cpu", "mistral-fp32-cpu",
                   "qwen3-fp32-cpu"]


def read(*parts):
    with open(os.path.join(FIXTURES, *parts), "rb") as f:
        return f.read()


def fresh(target):
    path = os.path.join(CORPUS, target)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write(folder, name, data):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def config():
    out = fresh("config")
    seen = set()
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name, "genai_config.json")
        if not os.path.exists(path):
            continue
        data = read(name, "genai_config.json")
        if data in seen:
            continue
        seen.add(data)
        write(out, f"{name}.json", data)
    base = read("qwen2-fp32-cpu", "genai_config.json")
    overlays = [
        {"search": {"max_length": 64, "do_sample": True, "top_k": 5}},
        {"model": {"decoder": {"session_options": {"provider_options": [{"cuda": {}}]}}}},
        {"model": {"context_length": 0}},
        {"search": {"num_beams": -1}},
    ]
    for i, overlay in enumerate(overlays):
        write(out, f"overlay-{i}.json", base + b"\0" + json.dumps(overlay).encode())


def onnx_lift():
    out = fresh("onnx_lift")
    # Raw mode: selector (even, fixture index << 1), model length, the model (no weights).
    for index in (0, 1, 4):
        model = read(LIFT_FIXTURES[index], "model.onnx")
        write(out, f"raw-{LIFT_FIXTURES[index]}",
              bytes([index << 1]) + struct.pack("<I", len(model)) + model)
    # Raw mode with its own (tiny) external data file.
    model = read("qwen2-fp32-cpu", "model.onnx")
    write(out, "raw-own-data", bytes([0]) + struct.pack("<I", len(model)) + model + bytes(64))
    # Structured mode: selector (odd), then mutation choices.
    for index in range(len(LIFT_FIXTURES)):
        for j, tail in enumerate([b"\x00", b"\x03\x05\x11\x22", b"\x07\x0d\x40\x81\x02\x09\xff"]):
            write(out, f"mutate-{LIFT_FIXTURES[index]}-{j}", bytes([(index << 1) | 1]) + tail)


def encode(ids):
    data = b""
    for i in ids:
        if -32767 <= i <= 32767:
            data += struct.pack("<h", i)
        else:
            data += struct.pack("<hi", -32768, i)
    return data


def stream_decode():
    out = fresh("stream_decode")
    for index, name in enumerate(STREAM_FIXTURES):
        expected = os.path.join(FIXTURES, name, "expected_ort_genai_0.18.json")
        sequences = []
        if os.path.exists(expected):
            with open(expected) as f:
                doc = json.load(f)
            # Every list of ints in the file is a token sequence.
            stack = [doc]
            while stack:
                item = stack.pop()
                if isinstance(item, dict):
                    stack.extend(item.values())
                elif isinstance(item, list):
                    if item and all(isinstance(x, int) and not isinstance(x, bool) for x in item):
                        sequences.append(item)
                    else:
                        stack.extend(item)
        sequences.sort(key=len, reverse=True)
        for j, ids in enumerate(sequences[:3]):
            write(out, f"{name}-{j}", bytes([index]) + encode(ids[:256]))
        vocab = len(json.loads(read(name, "tokenizer.json"))["model"]["vocab"])
        edge = [0, 1, 2, vocab - 1, vocab, vocab + 1, vocab + 2, vocab + 3, -1, -2,
                2**31 - 1, -2**31, 4294967295 - 2**32]
        write(out, f"{name}-edges", bytes([index]) + encode(edge))


def chat_template():
    out = fresh("chat_template")
    messages = json.dumps([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hello <|im_start|> {{ 7*7 }}"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "\u00e9\u4e2d\ud83d\ude00"},
    ]).encode()
    tools = json.dumps([{"type": "function", "function": {"name": "f", "parameters": {}}}]).encode()
    for name in ("qwen2-fp32-cpu", "llama-fp32-cpu"):
        template = read(name, "chat_template.jinja")
        write(out, f"{name}", b"\x02" + template + b"\0" + messages)
        write(out, f"{name}-tools", b"\x00" + template + b"\0" + messages + b"\0" + tools)
    for name in ("phi3-fp32-cpu", "mistral-fp32-cpu"):
        template = json.loads(read(name, "tokenizer_config.json")).get("chat_template")
        if isinstance(template, str):
            write(out, name, b"\x02" + template.encode() + b"\0" + messages)
    write(out, "model-template", b"\x03\0" + messages)
    hostile = [
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "{{ 'x' * 100000 }}{{ messages | tojson }}",
        "{% include 'secret.txt' %}",
        "{% import 'x' as y %}{% extends 'base' %}",
        "{{ raise_exception('no') }}",
        "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ messages[0].content | upper | replace('a', 'b') }}",
        "{% set ns = namespace(a=0) %}{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
        "{{ messages[0]['content'].split(' ') | join(',') }}{{ bos_token }}{{ eos_token }}",
        "{{ range(10) | list | tojson(indent=4) }}",
    ]
    for i, template in enumerate(hostile):
        write(out, f"hostile-{i}", b"\x02" + template.encode() + b"\0" + messages)
    write(out, "bad-messages", b"\x02{{ messages }}\0{\"role\": 1}")


def capi_calls():
    out = fresh("capi_calls")
    # Opcodes of fuzz_targets/capi_calls.rs (one byte each, then the call's arguments).
    programs = {
        "generate": [26, 5, 28, 5, 0, 8, 31, 5, 5, 5, 34, 5, 6, 1, 2, 3, 4, 5, 6, 37, 5, 3, 41, 5, 0],
        "tokenize": [21, 5, 12, 5, 5, 3, 13, 5, 6, 10, 20, 30, 40, 50, 60, 70, 18, 5, 20, 5, 4, 1, 2, 3, 4],
        "stale": [21, 5, 22, 2, 22, 1, 23, 1, 3, 1, 2, 3, 26, 5, 27, 2, 28, 1, 0, 0, 31, 1, 1, 5],
        "chat": [15, 5, 2, 1, 7, 1, 11, 1, 1],
        "config": [2, 3, 5, 5, 3, 7, 5, 9, 8, 5, 3, 1, 5],
        "tensor": [47, 2, 2, 3, 4, 1, 5, 49, 5, 1, 48, 2, 49, 1, 2, 50, 51, 5, 2, 1, 52, 1],
    }
    for name, program in programs.items():
        write(out, name, bytes(program))


if __name__ == "__main__":
    config()
    onnx_lift()
    stream_decode()
    chat_template()
    capi_calls()
    total = 0
    for root, _, files in os.walk(CORPUS):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"seed corpora: {total} bytes")
