"""The sidecar's HTTP sessions read the environment once, when made: the proxy for the address
(with ``NO_PROXY``), the CA bundle and a ``.netrc`` login apply as requests would apply them, and
a request made later does not read the environment again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sidecar.client import ServiceClient
from sidecar.sessions import session_for


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f'{{"auth": "{self.headers.get("Authorization", "")}"}}'.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture
def local_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def test_the_proxy_bundle_and_login_the_environment_gives_apply(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "svc.internal")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/private-ca.pem")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine connect.example login sink password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    outside = session_for("https://connect.example:8083")
    assert outside.proxies.get("https") == "http://proxy.example:3128"
    assert outside.verify == "/etc/ssl/private-ca.pem"
    assert outside.auth == ("sink", "s3cret")
    assert not outside.trust_env
    inside = session_for("https://svc.internal:8080")
    assert "https" not in inside.proxies and inside.auth is None


def test_a_later_request_does_not_read_the_environment(monkeypatch: pytest.MonkeyPatch, local_url: str) -> None:
    session = session_for(local_url)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: read now, the request fails
    monkeypatch.setenv("NO_PROXY", "")
    assert session.get(f"{local_url}/x", timeout=5).status_code == 200


def test_the_service_token_is_the_login_whatever_netrc_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, local_url: str
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password else\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    client = ServiceClient(local_url, "sidecar-token")
    assert client._call("GET", "/v1/tables") == {"auth": "Bearer sidecar-token"}
