# The environment every H200 script runs under (sourced from the repository root, so $PWD is
# it): the CUDA libraries of the machine, the kernel cache, the carried model builder
# (carry/bench/site), the fixtures, and nothing fetched from the network.
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GENAI_BRIDGE_KERNEL_CACHE="${GENAI_BRIDGE_KERNEL_CACHE:-/tmp/genai-kernels}"
export PYTHONPATH="$PWD/carry/bench/site${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export GENAI_FIXTURES="$PWD/models/fixtures"
