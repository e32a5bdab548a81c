"""deploy/haproxy.cfg and what deploy/replicas.py makes of it: the load balancer's configuration, read without
starting anything (tests/browser/test_replicas.py runs it)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.browser.conftest import ROOT

sys.path.insert(0, str(ROOT / "deploy"))
from replicas import CONFIG, COOKIE, HAPROXY, Replica, haproxy_config  # noqa: E402

TEXT = CONFIG.read_text()


def directives(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_sessions_keep_to_their_replica_and_move_when_it_dies():
    lines = directives(TEXT)
    assert ["cookie", COOKIE, "insert", "indirect", "nocache", "httponly"] in lines  # affinity by a cookie it sets
    assert ["option", "httpchk", "GET", "/_stcore/health"] in lines                 # Streamlit's health endpoint
    assert ["option", "redispatch", "1"] in lines             # a dead replica's browsers go to a live one
    assert ["balance", "leastconn"] in lines                  # websockets are long: count connections
    tunnel = next(line for line in lines if line[:2] == ["timeout", "tunnel"])
    assert tunnel[2] in ("1h", "3600s")                       # a websocket outlives the HTTP timeouts
    servers = [line for line in lines if line[0] == "server"]
    assert servers and all(line[line.index("cookie") + 1] == line[1] for line in servers)  # cookie value = name


def test_the_launcher_replaces_bind_and_servers_only():
    replicas = [Replica("r1", 9011), Replica("r2", 9012)]
    made = haproxy_config(TEXT, "0.0.0.0:9001", replicas)
    lines = directives(made)
    assert [line for line in lines if line[0] == "bind"] == [["bind", "0.0.0.0:9001"]]
    assert [line for line in lines if line[0] == "server"] == [
        ["server", "r1", "127.0.0.1:9011", "cookie", "r1"], ["server", "r2", "127.0.0.1:9012", "cookie", "r2"]]
    others = lambda ls: [line for line in ls if line[0] not in ("bind", "server")]  # noqa: E731
    assert others(lines) == others(directives(TEXT))
    with pytest.raises(ValueError):
        haproxy_config("backend x\n    balance leastconn\n", "127.0.0.1:1", replicas)


@pytest.mark.skipif(HAPROXY is None, reason="HAProxy is not installed (the README's test command installs it)")
def test_haproxy_accepts_the_shipped_and_the_generated_configuration(tmp_path):
    generated = tmp_path / "haproxy.cfg"
    generated.write_text(haproxy_config(TEXT, "127.0.0.1:9001", [Replica("r1", 9011)]))
    for path in (CONFIG, generated):
        check = subprocess.run([HAPROXY, "-c", "-f", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
