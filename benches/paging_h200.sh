#!/usr/bin/env bash
# Weight paging under a VRAM budget (issue 6, item 7): the benchmark, in one call on the H200 machine.
#
# For each precision in PRECISIONS (default "fp16 int4") of the Llama-3-8B shape (SHAPE, default
# llama3-8b; e.g. SHAPE=qwen2.5-1.5b for a quick run):
#   make      random-weight model by models/make_bench_models.py --ep cuda --device cuda --keep-hf
#             into /tmp/bench-models (MODELS); skipped when SKIP_MAKE=1 and the models exist
#             (make_bench_models.py skips a finished model anyway; SKIP_MAKE=1 also skips its imports)
#   resident  plain `genai-bridge bench` (no budget): the resident speed, recorded in paging.jsonl
#             with budget_fraction null and run_kind "resident"
#   sweep     `genai-bridge bench --budget-sweep BUDGETS --plot $OUT/sweep-<precision>.svg --json`,
#             one line per budget appended to $OUT/paging.jsonl (run_kind "sweep")
#   peer      fp16 only: benches/paging_peer.py, Hugging Face accelerate CPU offload on the same
#             HF checkpoint at the same budget percents, lines in $OUT/peer.jsonl
#   exact     `genai-bridge generate --vram-budget BYTES` at each budget vs fully resident (no flag),
#             EXACT_TOKENS (64) greedy tokens after a fixed 32-id prompt: equal/different per budget in
#             $OUT/exact.jsonl. BYTES is the sweep line's budget_bytes for that budget (the CLI's own
#             number), or, without a sweep line, percent × weight_bytes_per_token + embedding table +
#             KV for the generate length + EXACT_EXTRA_MB (default 512) from bench_model.json.
# and at the end the Markdown tables of benches/paging_table.py in $OUT/paging_table.md.
# BENCH_COMMIT (env), when set, overwrites the `commit` field of every bench line.
#
# What must be in carry/ (the machine has no Rust and no network):
#   carry/cuda/genai-bridge   cargo build --release --features cuda, at a commit whose CLI has
#                             `bench --budget-sweep/--plot` and `generate --vram-budget`
#   carry/bench/site/onnxruntime_genai/  the builder package of onnxruntime-genai 0.18 (its
#                             models/ folder plus an __init__.py stub), only needed to make models
# The machine's Python 3.12 (torch 2.11 cu130, transformers 5.17, accelerate 1.15, onnx, onnx_ir)
# does the rest.
#
# How to run (repository root; the `run` tool's working tree):
#   OUT=$OUT PRECISIONS="fp16 int4" bash benches/paging_h200.sh
#   OUT=$OUT SHAPE=qwen2.5-1.5b PRECISIONS=fp16 bash benches/paging_h200.sh         # quick
#   OUT=$OUT SKIP_MAKE=1 STEPS="sweep exact" DECODE_TOKENS=256 RUNS=2 PRECISIONS=fp16 \
#       WALL_S=560 bash benches/paging_h200.sh                                       # full length
# Knobs (env): STEPS (default "make resident sweep peer exact", in that order of priority, native
# first), BUDGETS (100,75,50,25,10), DECODE_TOKENS (64) and RUNS (1) of resident and sweep,
# PROMPT_TOKENS (128), EXACT_TOKENS (64), DECODE_PEER (32), WALL_S (530: the whole call's wall
# time; a step that cannot start with MIN_STEP_S=30 left is skipped and listed in skipped.txt; a
# running one is stopped by `timeout` at its cap), RESIDENT_CAP_S (90), SWEEP_CAP_S (300),
# PEER_CAP_S (150), EXACT_CAP_S (150), MODELS (/tmp/bench-models), BIN (carry/cuda/genai-bridge).
# Time: Llama-3-8B fp16 at 10% streams ~13.5 GB per token, i.e. <= ~4 tok/s at 55 GB/s, so the
# full 256-token, 2-run sweep alone takes ~9-10 min for fp16; the defaults (64 tokens, 1 run) keep
# one call under 9 min once the models exist. Making both 8B models takes minutes by itself: when
# it does, later steps are skipped (see skipped.txt) and a second call with SKIP_MAKE=1 on the
# still-warm machine finishes them.
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
out="${OUT:-paging-bench-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export GENAI_BRIDGE_KERNEL_CACHE=/tmp/genai-kernels
export PYTHONPATH="$PWD/carry/bench/site${PYTHONPATH:+:$PYTHONPATH}"
bin="${BIN:-carry/cuda/genai-bridge}"
shape="${SHAPE:-llama3-8b}"
precisions="${PRECISIONS:-fp16 int4}"
budgets="${BUDGETS:-100,75,50,25,10}"
steps=" ${STEPS:-make resident sweep peer exact} "
models="${MODELS:-/tmp/bench-models}"
prompt_tokens="${PROMPT_TOKENS:-128}"
decode_tokens="${DECODE_TOKENS:-64}"
runs="${RUNS:-1}"
exact_tokens="${EXACT_TOKENS:-64}"
decode_peer="${DECODE_PEER:-32}"
wall_s="${WALL_S:-530}"
min_step_s="${MIN_STEP_S:-30}"
hf_dir="$models/hf-$shape-float16"
mkdir -p "$GENAI_BRIDGE_KERNEL_CACHE"

has() { [[ "$steps" == *" $1 "* ]]; }
left() { echo $(( wall_s - (SECONDS - T0) )); }
# begin NAME CAP: sets $cap (CAP bounded by the time left), or returns 1 and records a skip.
begin() {
    step_name=$1
    local want=$2 rem
    rem=$(left)
    if (( rem < min_step_s )); then
        echo "[skip] $step_name: ${rem}s left of WALL_S=${wall_s}" | tee -a "$out/skipped.txt"
        return 1
    fi
    cap=$(( want < rem ? want : rem ))
    step_t=$SECONDS
    echo "[step] $step_name (cap ${cap}s, $(( SECONDS - T0 ))s elapsed) ..."
}
end() {
    local rc=$1 note=""
    (( rc == 124 || rc == 137 )) && note=" (stopped at its cap)"
    printf '%s\t%s\t%s\n' "$step_name" "$(( SECONDS - step_t ))" "$rc" >>"$out/steps.tsv"
    echo "[step] $step_name: $(( SECONDS - step_t )) s, rc $rc$note"
}

# Adds fields to the JSON lines of a bench run (commit from BENCH_COMMIT; key=json-value args,
# set only where the line has no such key unless the key is prefixed with '!'), writes them to
# stdout and a short summary to stderr; other lines go to stderr.
TAG_PY='
import json, os, sys
extra = []
for a in sys.argv[1:]:
    k, v = a.split("=", 1)
    extra.append((k.lstrip("!"), json.loads(v), k.startswith("!")))
commit = os.environ.get("BENCH_COMMIT")
keys = ("model", "budget_fraction", "decode_tok_s", "pcie_fraction", "streamed_bytes_per_token",
        "copy_stall_ms_per_token", "logits_checksum", "error")
for line in sys.stdin:
    s = line.strip()
    try:
        obj = json.loads(s) if s.startswith("{") else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        sys.stderr.write(line)
        continue
    if commit:
        obj["commit"] = commit
    for k, v, force in extra:
        if force or k not in obj:
            obj[k] = v
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.stderr.write("  " + " ".join(f"{k}={obj[k]}" for k in keys if k in obj)[:300] + "\n")
'

echo "== paging_h200.sh: shape $shape, precisions [$precisions], budgets $budgets, steps [${steps# }]," \
     "prompt $prompt_tokens, decode $decode_tokens x $runs run(s), WALL_S $wall_s"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv,noheader
printf '{"shape":"%s","precisions":"%s","budgets":"%s","steps":"%s","prompt_tokens":%s,"decode_tokens":%s,"runs":%s,"exact_tokens":%s,"decode_peer":%s,"bench_commit":"%s","wall_s":%s}\n' \
    "$shape" "$precisions" "$budgets" "${steps# }" "$prompt_tokens" "$decode_tokens" "$runs" "$exact_tokens" \
    "$decode_peer" "${BENCH_COMMIT:-}" "$wall_s" >"$out/run.json"
[[ -x "$bin" ]] || echo "!! $bin is missing or not executable: the genai-bridge steps will fail"

# Host->device copy bandwidth from torch (pinned and pageable, 1 GiB), to check the CLI's h2d_peak_gbs.
timeout 60 python3 - <<'PY' 2>&1 | tee -a "$out/machine.jsonl"
import json, time, torch
n = 1 << 30
dst = torch.empty(n, dtype=torch.uint8, device="cuda")
res = {"kind": "h2d", "gpu": torch.cuda.get_device_name(0), "bytes": n}
for kind in ("pinned", "pageable"):
    src = torch.ones(n, dtype=torch.uint8).pin_memory() if kind == "pinned" else torch.ones(n, dtype=torch.uint8)
    dst.copy_(src, non_blocking=True); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    res[f"{kind}_gbs"] = round(5 * n / (time.perf_counter() - t) / 1e9, 1)
    del src
print(json.dumps(res))
PY

# ---- make -------------------------------------------------------------------------------------
missing=()
for p in $precisions; do
    d="$models/$shape-$p-cuda"
    if [[ ! -f "$d/bench_model.json" ]]; then
        # a folder without bench_model.json is an interrupted build: make it again
        [[ -d "$d" ]] && rm -rf "$d"
        missing+=("$p")
    fi
done
if has peer && [[ " $precisions " == *" fp16 "* && ! -f "$hf_dir/config.json" ]]; then
    echo "note: $hf_dir is missing (models made without --keep-hf?): the peer step will be skipped"
fi
if (( ${#missing[@]} == 0 )); then
    echo "[step] make: every model of [$precisions] exists under $models"
elif ! has make; then
    echo "[skip] make: not in STEPS; missing: ${missing[*]}" | tee -a "$out/skipped.txt"
elif begin "make $shape ${missing[*]}" "$wall_s"; then
    plist=$(IFS=,; echo "${missing[*]}")
    timeout "$cap" python3 models/make_bench_models.py --shape "$shape" --precision "$plist" \
        --ep cuda --device cuda --keep-hf --out "$models" >>"$out/make.jsonl" 2>>"$out/make.log"
    end $?
    grep -E "^\[" "$out/make.log" | tail -n 8
fi
python3 - "$out/make.jsonl" "$models" "$shape" $precisions <<'PY'
import json, os, sys
_, _, models, shape, *precs = sys.argv
for p in precs:
    f = os.path.join(models, f"{shape}-{p}-cuda", "bench_model.json")
    if not os.path.exists(f):
        print(f"  {shape}-{p}-cuda: not made")
        continue
    i = json.load(open(f))
    print(f"  {shape}-{p}-cuda: {i.get('weight_bytes_per_token', 0) / 1e9:.2f} GB weights/token, "
          f"{(i.get('size_bytes') or 0) / 1e9:.2f} GB on disk, built in {i.get('build_seconds')} s")
PY

bench_args=(--backend native --device cuda --prompt-tokens "$prompt_tokens" --decode-tokens "$decode_tokens"
            --runs "$runs" --json)

# ---- resident and sweep, per precision ---------------------------------------------------------
for p in $precisions; do
    dir="$models/$shape-$p-cuda"
    [[ -f "$dir/genai_config.json" ]] || { echo "[skip] $p: $dir not made" | tee -a "$out/skipped.txt"; continue; }
    if has resident && begin "resident $p" "${RESIDENT_CAP_S:-90}"; then
        timeout "$cap" "$bin" bench "$dir" "${bench_args[@]}" 2>>"$out/bench-$p.log" \
            | python3 -c "$TAG_PY" '!budget_fraction=null' '!run_kind="resident"' >>"$out/paging.jsonl"
        end "${PIPESTATUS[0]}"
    fi
    if has sweep && begin "sweep $p" "${SWEEP_CAP_S:-300}"; then
        timeout "$cap" "$bin" bench "$dir" "${bench_args[@]}" --budget-sweep "$budgets" \
            --plot "$out/sweep-$p.svg" 2>>"$out/bench-$p.log" \
            | python3 -c "$TAG_PY" '!run_kind="sweep"' >>"$out/paging.jsonl"
        end "${PIPESTATUS[0]}"
    fi
done

# ---- peer (fp16 only) --------------------------------------------------------------------------
if has peer && [[ " $precisions " == *" fp16 "* ]]; then
    if [[ ! -f "$hf_dir/config.json" ]]; then
        echo "[skip] peer: no HF checkpoint at $hf_dir" | tee -a "$out/skipped.txt"
    elif begin "peer fp16 (accelerate offload)" "${PEER_CAP_S:-150}"; then
        # the peer stops itself ~20 s before the cap (its imports and the last load take time);
        # timeout is the backstop
        timeout "$cap" python3 benches/paging_peer.py --hf-dir "$hf_dir" --model "$shape" \
            --budgets "$budgets" --prompt "$prompt_tokens" --decode "$decode_peer" \
            --deadline-s $(( cap > 40 ? cap - 20 : cap / 2 )) \
            >>"$out/peer.jsonl" 2> >(tee -a "$out/peer.log" >&2)
        end $?
    fi
fi

# ---- byte-exactness through generate -----------------------------------------------------------
for p in $precisions; do
    dir="$models/$shape-$p-cuda"
    [[ -f "$dir/genai_config.json" ]] || continue
    has exact && begin "exact $p" "${EXACT_CAP_S:-150}" || continue
    python3 - "$bin" "$dir" "$p" "$budgets" "$out/paging.jsonl" "$out/exact.jsonl" "$cap" "$exact_tokens" \
        "${EXACT_EXTRA_MB:-512}" <<'PY'
import json, os, subprocess, sys, time
binary, d, precision, budgets, sweep_file, out_file, cap, ntok, extra_mb = sys.argv[1:10]
cap, ntok, extra = float(cap), int(ntok), int(extra_mb) << 20
t0 = time.perf_counter()
model = os.path.basename(os.path.normpath(d))
prompt = [3 + (i * 7919 + 13) % 500 for i in range(32)]  # fixed ids inside the bench tokenizer's 512
cmd = [binary, "generate", d, "--backend", "native", "--device", "cuda", "--prompt-ids", ",".join(map(str, prompt)),
       "--max-new-tokens", str(ntok), "--min-length", str(len(prompt) + ntok), "--json"]


def parse(text):
    dec, i = json.JSONDecoder(), text.find("{")
    while i >= 0:
        try:
            obj, _ = dec.raw_decode(text[i:])
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
        i = text.find("{", i + 1)
    return None


def run(extra_args):
    left = cap - (time.perf_counter() - t0)
    if left < 5:
        return dict(status="skipped: out of time")
    try:
        r = subprocess.run(cmd + extra_args, capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired:
        return dict(status="timeout")
    obj = parse(r.stdout) if r.returncode == 0 else None
    res = dict(rc=r.returncode)
    if obj is None:
        res.update(status=f"error rc {r.returncode}", stderr_tail=(r.stderr or r.stdout)[-600:])
        return res
    toks = obj.get("tokens")
    if toks is None:
        seq = obj.get("sequence") or []
        toks = seq[len(obj.get("prompt_ids") or prompt):]
    t = obj.get("timings") or {}
    res.update(status="ok", tokens=toks, stop_reason=obj.get("stop_reason"), load_ms=t.get("load_ms"),
               decode_tokens_per_s=t.get("decode_tokens_per_s"), counters=obj.get("counters"))
    return res


def budget_bytes(frac):
    """The sweep's budget_bytes for this model and fraction; else an estimate from bench_model.json."""
    best = None
    try:
        for line in open(sweep_file):
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if (isinstance(o, dict) and o.get("model") in (model, None) and o.get("precision") in (precision, None)
                    and isinstance(o.get("budget_fraction"), (int, float))
                    and abs(o["budget_fraction"] - frac) < 1e-6 and o.get("budget_bytes")):
                best = int(o["budget_bytes"])
    except OSError:
        pass
    if best:
        return best, "sweep budget_bytes"
    info = json.load(open(os.path.join(d, "bench_model.json")))
    kv = info.get("kv_bytes_per_position", 0) * (len(prompt) + ntok)
    return int(frac * info["weight_bytes_per_token"]) + info.get("embedding_only_bytes", 0) + kv + extra, \
        f"estimate: fraction x weight_bytes_per_token + embedding + KV + {extra_mb} MiB (not the sweep's number)"


def emit(**kw):
    line = dict(kind="exactness", model=model, precision=precision, prompt_tokens=len(prompt), **kw)
    if os.environ.get("BENCH_COMMIT"):
        line["commit"] = os.environ["BENCH_COMMIT"]
    with open(out_file, "a") as f:
        f.write(json.dumps(line) + "\n")


ref = run([])
emit(budget_fraction=None, vram_budget_bytes=None, reference=True, **ref)
print(f"  {precision} resident: {ref.get('status')}, {len(ref.get('tokens') or [])} tokens", file=sys.stderr)
for pct in sorted((float(b) for b in budgets.split(",") if b), reverse=True):
    frac = pct / 100.0
    if ref.get("status") != "ok":
        emit(budget_fraction=frac, equal=None, status="skipped: the resident reference failed")
        continue
    nbytes, source = budget_bytes(frac)
    res = run(["--vram-budget", str(nbytes)])
    equal, first = None, None
    if res.get("status") == "ok":
        a, b = ref["tokens"], res["tokens"]
        equal = a == b
        if not equal:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    emit(budget_fraction=frac, vram_budget_bytes=nbytes, budget_source=source, equal=equal, first_diff=first,
         n_tokens=len(res.get("tokens") or []), **res)
    verdict = {True: "equal", False: f"DIFFERENT from token {first}", None: res.get("status")}[equal]
    rate = res.get("decode_tokens_per_s")
    print(f"  {precision} {pct:g}% ({nbytes / 1e9:.2f} GB, {source.split(':')[0]}): {verdict}"
          + (f", {rate:.1f} tok/s" if isinstance(rate, (int, float)) else ""), file=sys.stderr)
PY
    end $?
done

# ---- tables ------------------------------------------------------------------------------------
python3 benches/paging_table.py "$out/paging.jsonl" "$out/peer.jsonl" --exact "$out/exact.jsonl" \
    >"$out/paging_table.md" 2>/dev/null
cat "$out/paging_table.md"
echo "== done in $(( SECONDS - T0 )) s; step timings in $out/steps.tsv"
[[ -s "$out/skipped.txt" ]] && { echo "== skipped:"; cat "$out/skipped.txt"; }
exit 0
