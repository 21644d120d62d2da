"""The webhook SSRF guard: every private and metadata spelling refused, the DNS answer pinned (issue 12)."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dragoman.errors import InvalidWebhookUrl
from dragoman.service import netguard

REFUSED = [
    # loopback, in every spelling the C resolver takes
    "http://127.0.0.1/",
    "http://127.0.0.2:8080/hook",
    "http://2130706433/",  # decimal
    "http://0x7f000001/",  # hex
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",  # octal
    "http://017700000001/",
    "http://127.1/",  # shortened
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",  # IPv4-compatible IPv6
    "http://[64:ff9b::7f00:1]/",  # NAT64
    "http://[2002:7f00:1::]/",  # 6to4
    "http://localhost/",
    "http://LOCALHOST./",
    # unspecified
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    # private
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://[fd12:3456::1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:192.168.0.1]/",
    # link-local and metadata
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.1.1/",
    "http://2852039166/",  # 169.254.169.254 in decimal
    "http://0xa9fea9fe/",
    "http://0251.0376.0251.0376/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/",
    # CGNAT, multicast, reserved, documentation, broadcast
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://192.0.2.10/",
    "http://198.18.0.1/",
    "http://[2001:db8::1]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    # not http(s), malformed
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "javascript:alert(1)",
    "http:///nohost",
    "http://exa mple.com/",
    "http://example.com:99999/",
    "",
    "http://example.com/" + "a" * 3000,
]


@pytest.mark.parametrize("url", REFUSED)
def test_refused_urls(url: str) -> None:
    with pytest.raises(InvalidWebhookUrl) as info:
        netguard.check_url(url, allow_private=False)
    assert info.value.status == 400
    assert info.value.code == "invalid_webhook_url"


METADATA_ALWAYS = [
    "http://169.254.169.254/",
    "http://2852039166/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://metadata.google.internal/",
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://240.0.0.1/",
]


@pytest.mark.parametrize("url", METADATA_ALWAYS)
def test_metadata_multicast_and_reserved_refused_even_when_private_is_allowed(url: str) -> None:
    with pytest.raises(InvalidWebhookUrl):
        netguard.check_url(url, allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://[::1]:9/",
        "http://10.1.2.3/",
        "http://100.64.0.1/",
        "http://localhost/",
    ],
)
def test_private_allowed_when_the_operator_allows_it(url: str) -> None:
    assert netguard.check_url(url, allow_private=True) == url


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "http://8.8.8.8/",
        "http://[2606:4700::1111]/",
        "https://93.184.215.14:8443/",
    ],
)
def test_public_accepted(url: str) -> None:
    assert netguard.check_url(url, allow_private=False, resolver=lambda _h, _p: ["93.184.215.14"]) == url


def test_a_name_with_one_private_answer_is_refused() -> None:
    resolver = lambda _h, _p: ["93.184.215.14", "10.0.0.7"]  # noqa: E731
    with pytest.raises(InvalidWebhookUrl, match="private"):
        netguard.check_url("https://mixed.example/", allow_private=False, resolver=resolver)


def test_a_name_that_does_not_resolve_is_let_through_at_creation() -> None:
    def resolver(_host: str, _port: int) -> list[str]:
        raise socket.gaierror("no such name")

    assert netguard.check_url("https://later.example/h", allow_private=False, resolver=resolver)


# ----- the pinned connection --------------------------------------------------------------------------------
class _Hello(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        body = f"host={self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def receiver() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_name_resolving_to_loopback_is_refused_at_connect(receiver: int) -> None:
    """The guard checks what the resolver answers when it connects, whatever the name looks like."""
    calls: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    with netguard.guarded_client(allow_private=False, resolver=resolver) as client:
        with pytest.raises(InvalidWebhookUrl, match="loopback"):
            client.post(f"http://innocent.example:{receiver}/hook", content=b"{}")
    assert calls == ["innocent.example"]


def test_the_connection_goes_to_the_checked_address_and_keeps_the_name(receiver: int) -> None:
    """One lookup per connection (a rebinding second answer never reaches a socket); Host keeps the name."""
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])
    calls: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    with netguard.guarded_client(allow_private=True, resolver=resolver) as client:
        response = client.post(f"http://hooks.example:{receiver}/x", content=b"{}")
        assert response.status_code == 200
        assert response.text == f"host=hooks.example:{receiver}"
        assert calls == ["hooks.example"]
        with pytest.raises(InvalidWebhookUrl, match="metadata"):  # the rebinding answer: refused, no socket
            client.post(f"http://hooks.example:{receiver}/x", content=b"{}")
    assert calls == ["hooks.example", "hooks.example"]


def test_loopback_literal_refused_without_allow_private_and_sent_with_it(receiver: int) -> None:
    with netguard.guarded_client(allow_private=False) as client:
        with pytest.raises(InvalidWebhookUrl):
            client.post(f"http://127.0.0.1:{receiver}/", content=b"{}")
        with pytest.raises(InvalidWebhookUrl):
            client.post(f"http://[::ffff:127.0.0.1]:{receiver}/", content=b"{}")
    with netguard.guarded_client(allow_private=True) as client:
        assert client.post(f"http://127.0.0.1:{receiver}/", content=b"{}").status_code == 200


def test_no_redirects_and_no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    with netguard.guarded_client(allow_private=False) as client:
        assert client.follow_redirects is False
        assert client.trust_env is False
        assert client.timeout == httpx.Timeout(10.0)


def test_https_to_the_pinned_address_keeps_sni_and_the_certificate_check(tmp_path: Path) -> None:
    """TLS goes to the checked address while SNI, the certificate's name and Host stay the URL's name."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-subj", "/CN=hooks.example", "-addext", "subjectAltName=DNS:hooks.example"]
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject]
    subprocess.run(
        [*command, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60
    )
    names: list[str | None] = []
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    def note_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(name)

    server_context.set_servername_callback(note_sni)  # type: ignore[arg-type]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        trusted = ssl.create_default_context(cafile=str(cert))
        resolver = lambda _h, _p: ["127.0.0.1"]  # noqa: E731
        with netguard.guarded_client(allow_private=True, resolver=resolver, ssl_context=trusted) as client:
            response = client.post(f"https://hooks.example:{port}/x", content=b"{}")
            assert response.status_code == 200
            assert response.text == f"host=hooks.example:{port}"
            assert names == ["hooks.example"]
        with netguard.guarded_client(allow_private=True, resolver=resolver, ssl_context=trusted) as client:
            with pytest.raises(httpx.ConnectError):  # a name the certificate does not carry: refused
                client.post(f"https://other.example:{port}/x", content=b"{}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
