"""Checks the ONNX Runtime CUDA route on a GPU machine: runs `genai-bridge generate --backend ort
--device cuda` on every case of every bundled fixture and compares the sequences with the official
runtime's CPU references. Writes $OUT/h200_check.json and prints a summary.

usage (repository root, on the GPU machine, with the GPU build of ONNX Runtime 1.31.1 unpacked as
../shared/tools/ort-gpu-parts.sh describes, ORT_DYLIB_PATH and LD_LIBRARY_PATH set):
    python3 scripts/device/ort_cuda_check.py [BINARY]      (default BINARY: carry/genai-bridge)
"""
import json, os, subprocess, sys, glob
out = os.environ.get("OUT", ".")
binary = sys.argv[1] if len(sys.argv) > 1 else "carry/genai-bridge"
results = []
dirs = sorted(glob.glob("models/fixtures/*/expected_ort_genai_0.18.json"))
for exp_path in dirs:
    d = os.path.dirname(exp_path)
    exp = json.load(open(exp_path))
    for case in exp["cases"]:
        args = [binary, "generate", d, "--backend", "ort", "--device", "cuda", "--json",
                "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "--max-length", str(case["max_length"])]
        p = subprocess.run(args, capture_output=True, text=True)
        r = {"model": os.path.basename(d), "prompt_len": len(case["prompt_ids"]), "rc": p.returncode}
        if p.returncode == 0:
            o = json.loads(p.stdout)
            r["route"] = o["route"]["device"] + "/" + o["route"]["backend"]
            r["equal"] = o["sequence"] == case["greedy_sequence"]
            if not r["equal"]:
                a, b = o["sequence"], case["greedy_sequence"]
                r["first_diff"] = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            r["decode_tok_s"] = o["timings"]["decode_tokens_per_s"]
        else:
            r["stderr"] = p.stderr[-500:]
        results.append(r)
json.dump(results, open(os.path.join(out, "h200_check.json"), "w"), indent=1)
ok = sum(1 for r in results if r.get("equal"))
print(f"{ok}/{len(results)} sequences equal to the official CPU references")
for r in results:
    if not r.get("equal"):
        print(r)
