# The official onnxruntime-genai-cuda Python package on genai-bridge's library, routed to the native CUDA decoder (GPU machine check).
"""Greedy generation through the official `onnxruntime_genai` package, one JSON line per model.

    GENAI_BRIDGE_LOG=1 python cuda_route.py --prompt-ids 1,2,3 --max-length 24 MODEL_DIR [MODEL_DIR ...]

Run with the package folder on PYTHONPATH and genai-bridge's `libonnxruntime-genai.so` (built with
`cargo build --release -p genai-capi --features cuda`) in place of the official one. Each line holds
the model folder and the sequence; with GENAI_BRIDGE_LOG=1 the library logs its route on stderr
("genai-bridge: native decoder on cuda: ..."), which benches/dropin_cuda_h200.sh checks together
with `genai-bridge generate --backend native --device cuda` giving the same sequence.
"""

import argparse
import json

import onnxruntime_genai as og


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt-ids", required=True)
    parser.add_argument("--max-length", type=int, required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    prompt = [int(t) for t in args.prompt_ids.split(",")]
    for folder in args.models:
        model = og.Model(folder)
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=args.max_length)
        generator = og.Generator(model, params)
        generator.append_tokens(prompt)
        while not generator.is_done():
            generator.generate_next_token()
        sequence = [int(t) for t in generator.get_sequence(0)]
        print(json.dumps({"model_dir": folder, "sequence": sequence}), flush=True)
        del generator, params, model


if __name__ == "__main__":
    main()
