#!/usr/bin/env bash
# The GPU checks, prepared to run in one go on a machine with a CUDA GPU (CI never runs them):
#   bash scripts/gpu_check.sh tests    # the GPU-marked tests (tests/test_gpu.py), about 2 minutes
#   bash scripts/gpu_check.sh bench    # bench/bench_gpu.py, CPU (2 threads) and CUDA, under 10 minutes
# Each writes its log under $OUT (or bench/out). It needs a CUDA build of torch there: requirements.txt pins the
# CPU wheel, which servers without a GPU use.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
python3 - <<'PY' || exit 2
import torch
assert torch.cuda.is_available(), f"torch {torch.__version__} sees no CUDA device"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}, "
      f"bf16 {torch.cuda.is_bf16_supported()}")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null | tee "$out/gpu.txt"
case "${1:-all}" in
  tests) timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -rs 2>&1 |
           tee "$out/gpu_tests.log" ;;
  bench) shift; timeout 590 python3 bench/bench_gpu.py --threads 2 "$@" 2>&1 | tee "$out/bench_gpu.log" ;;
  *) echo "usage: bash scripts/gpu_check.sh tests|bench [bench options]"; exit 2 ;;
esac
