"""Several copies (replicas) of the app behind HAProxy with session affinity, on one machine.

    python deploy/replicas.py --replicas 3               # then open http://127.0.0.1:8501
    python deploy/replicas.py --replicas 2 --port 8080 --bind 0.0.0.0

Each replica is `streamlit run app.py` on 127.0.0.1 (ports port+10, port+11, ...), all with one cookie secret
(STREAMLIT_SERVER_COOKIE_SECRET, else a random one for this run). HAProxy (Debian's `haproxy` package) reads
deploy/haproxy.cfg with its bind address and server lines replaced by these replicas. Ctrl-C stops everything.

The same `Replicas` class starts them for tests/browser/test_replicas.py and bench/bench_replicas.py. A replica can be
killed (as a crash would) and started again; HAProxy takes it out of the pool and back by its health check.
"""
from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "haproxy.cfg"
COOKIE = "AE_REPLICA"  # the affinity cookie of deploy/haproxy.cfg (its "cookie" line)
# Debian installs HAProxy in /usr/sbin, which is not on every user's PATH.
HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)


@dataclass
class Replica:
    """One `streamlit run app.py` process and how long it took to answer its health check."""
    name: str                        # HAProxy's server name, also the value of the affinity cookie
    port: int
    proc: subprocess.Popen | None = None
    started: float = 0.0             # perf_counter at the start of its process
    healthy_s: float | None = None   # process start -> /_stcore/health answered

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def haproxy_config(template: str, bind: str, replicas: list[Replica]) -> str:
    """deploy/haproxy.cfg with its `bind` address and its `server` lines replaced by these replicas."""
    lines, servers_done = [], False
    for line in template.splitlines():
        stripped = line.strip()
        if stripped.startswith("bind "):
            line = re.sub(r"bind \S+", f"bind {bind}", line)
        elif stripped.startswith("server "):
            if servers_done:
                continue
            indent = line[: len(line) - len(line.lstrip())]
            line = "\n".join(f"{indent}server {r.name} 127.0.0.1:{r.port} cookie {r.name}" for r in replicas)
            servers_done = True
        lines.append(line)
    if not servers_done:
        raise ValueError("the HAProxy template has no server line to replace")
    return "\n".join(lines) + "\n"


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> float:
    """Seconds until `url`/_stcore/health answers 200 (TimeoutError past timeout_s; RuntimeError if proc exits)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url}/_stcore/health did not answer within {timeout_s:.0f} s")


def sticky_cookie(url: str, cookie: str = "") -> str:
    """What a browser does first: GET the page (with the cookie it has, if any) and keep the affinity cookie the load
    balancer sets. Returns "AE_REPLICA=<name>" (the old cookie when the balancer kept it)."""
    request = urllib.request.Request(url + "/", headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=30) as answer:
        jar = SimpleCookie()
        for header in answer.headers.get_all("Set-Cookie") or []:
            jar.load(header)
    return f"{COOKIE}={jar[COOKIE].value}" if COOKIE in jar else cookie


def replica_of(cookie: str) -> str:
    """The replica a "AE_REPLICA=<name>" cookie names."""
    return cookie.partition(f"{COOKIE}=")[2].split(";")[0]


def free_base_port(n: int, low: int = 20000, high: int = 32000) -> int:
    """A `port` for Replicas(n, port=...) whose HAProxy port and replica ports (port+10 ... port+10+n-1) are all free
    now. Drawn below Linux's ephemeral range (32768 and up): a port picked by binding port 0 elsewhere (another test
    worker's server) can never land on one of them between this check and the replicas' start."""
    import random
    import socket
    for _ in range(200):
        port = random.randrange(low, high - 10 - n)
        try:
            for p in (port, *range(port + 10, port + 10 + n)):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no free ports between {low} and {high}")


@dataclass
class Replicas:
    """N replicas of the app in `root` and HAProxy in front of them: `with Replicas(2) as lb: lb.url`."""
    n: int = 2
    port: int = 8501                 # HAProxy's port; replicas listen on port+10, port+11, ...
    bind_host: str = "127.0.0.1"
    root: Path = ROOT
    env: dict = field(default_factory=dict)   # extra environment of every replica (ATTN_* settings)
    timeout_s: float = 120.0         # a replica's start to healthy
    quiet: bool = True               # replicas' and HAProxy's output to a log folder instead of this terminal
    replicas: list[Replica] = field(default_factory=list)

    def __post_init__(self):
        if HAPROXY is None:
            raise RuntimeError("HAProxy is not installed: apt-get install haproxy (Debian's package)")
        self.cookie_secret = os.environ.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32)
        self.logs = Path(tempfile.mkdtemp(prefix="ae-replicas-"))
        self.replicas = [Replica(f"r{i + 1}", self.port + 10 + i) for i in range(self.n)]
        self._haproxy: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Replicas":
        try:
            for replica in self.replicas:
                self.start(replica, wait=False)
            for replica in self.replicas:
                wait_healthy(replica.url, self.timeout_s, replica.proc)
                replica.healthy_s = time.perf_counter() - replica.started
            self._start_haproxy()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for replica in self.replicas:
            self.stop(replica.name)
        if self._haproxy is not None and self._haproxy.poll() is None:
            self._haproxy.terminate()
            self._haproxy.wait(timeout=10)

    # ------------------------------------------------------------ replicas
    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def start(self, replica: Replica, wait: bool = True) -> None:
        """Start one replica's process (again, after kill); with wait, until its health check answers."""
        env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
                   STREAMLIT_SERVER_COOKIE_SECRET=self.cookie_secret, **self.env)
        out = open(self.logs / f"{replica.name}.log", "ab") if self.quiet else None  # noqa: SIM115 - the child's
        replica.started = time.perf_counter()
        replica.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(replica.port), "--server.address", "127.0.0.1"],
            cwd=self.root, env=env, stdout=out, stderr=subprocess.STDOUT if out else None,
            start_new_session=True)  # its own process group: kill() takes its children (model conversion) too
        if out is not None:
            out.close()
        if wait:
            wait_healthy(replica.url, self.timeout_s, replica.proc)
            replica.healthy_s = time.perf_counter() - replica.started

    def kill(self, name: str) -> None:
        """Kill a replica and its children at once (SIGKILL), as a crash or an out-of-memory kill would."""
        replica = self.replica(name)
        if replica.alive:
            os.killpg(replica.proc.pid, signal.SIGKILL)
            replica.proc.wait(timeout=10)

    def stop(self, name: str) -> None:
        """Stop a replica as a restart would (SIGTERM, then SIGKILL after 20 s)."""
        replica = self.replica(name)
        if not replica.alive:
            return
        os.killpg(replica.proc.pid, signal.SIGTERM)
        try:
            replica.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(replica.proc.pid, signal.SIGKILL)
            replica.proc.wait(timeout=10)

    # ------------------------------------------------------------ the load balancer
    def _start_haproxy(self) -> None:
        config = self.logs / "haproxy.cfg"
        config.write_text(haproxy_config(CONFIG.read_text(), f"{self.bind_host}:{self.port}", self.replicas))
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode:
            raise RuntimeError(f"HAProxy refused its configuration: {check.stderr.strip()}")
        out = open(self.logs / "haproxy.log", "ab") if self.quiet else None  # noqa: SIM115
        self._haproxy = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdout=out,
                                         stderr=subprocess.STDOUT if out else None)
        if out is not None:
            out.close()
        wait_healthy(self.url, 30, self._haproxy)
        self.wait_in_pool(len(self.replicas))

    def in_pool(self) -> int:
        """Replicas HAProxy sends their own browsers to: a GET with a replica's cookie keeps that cookie while the
        replica is up, and gets another replica's once HAProxy's health check has taken it out of the pool."""
        return sum(sticky_cookie(self.url, f"{COOKIE}={r.name}") == f"{COOKIE}={r.name}" for r in self.replicas)

    def wait_in_pool(self, n: int, timeout_s: float = 30) -> None:
        """Until n replicas are in HAProxy's pool (its health checks have seen them up)."""
        end = time.monotonic() + timeout_s
        while self.in_pool() < n:
            if time.monotonic() > end:
                raise TimeoutError(f"HAProxy did not put {n} replicas in its pool within {timeout_s:.0f} s")
            time.sleep(0.25)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=2, help="copies of the app (default 2)")
    p.add_argument("--port", type=int, default=8501, help="HAProxy's port (replicas: port+10, port+11, ...)")
    p.add_argument("--bind", default="127.0.0.1", help="HAProxy's address (0.0.0.0 to serve other machines)")
    args = p.parse_args(argv)
    with Replicas(args.replicas, port=args.port, bind_host=args.bind, quiet=False) as lb:
        for replica in lb.replicas:
            print(f"{replica.name}: {replica.url} healthy after {replica.healthy_s:.1f} s")
        print(f"HAProxy: http://{args.bind}:{args.port} (Ctrl-C stops everything)", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
