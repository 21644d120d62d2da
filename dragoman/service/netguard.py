"""The SSRF guard of outgoing webhooks: which URLs the service calls, and a connection pinned to the checked
address (HOSTED.md, Webhooks).

A webhook URL is the customer's, so without a guard it would let anyone make the service call its own
network: the loopback daemon, the database, a cloud's metadata service (credentials). The rules:

- ``http`` and ``https`` only, a host and nothing else odd (no empty host, no spaces, ≤ 2,048 characters).
- The name is resolved **once per connection** and every address it gives is checked; one refused address
  refuses the URL (a name that answers a public and a private address is refused). The connection then goes
  to the checked address itself (:class:`GuardedBackend`: an ``httpcore`` network backend), so a second
  DNS answer (rebinding) never reaches a socket; the ``Host`` header and the TLS SNI and certificate check
  keep the name, since httpcore takes them from the URL, not from the socket.
- Refused: loopback, private (RFC 1918, IPv6 unique local), link-local, CGNAT (100.64.0.0/10), multicast,
  reserved, unspecified, documentation and benchmarking ranges — every address Python's ``ipaddress`` does
  not call global — and IPv6 addresses that carry one of those inside (IPv4-mapped ``::ffff:a.b.c.d``,
  IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``: the IPv4 address inside is checked; Teredo
  tunnels are refused). Every spelling of an address
  (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) reaches the check as the address the resolver
  makes of it, since the check is on what ``getaddrinfo`` answers, not on the text.
- ``allow_private`` (``DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE=1``, for operators with receivers on their own network
  and for tests on loopback) lets loopback, private, link-local and CGNAT addresses through — but never the
  cloud metadata addresses and names (:data:`METADATA_ADDRESSES`, :data:`METADATA_NAMES`), multicast or the
  unspecified address.

:func:`check_url` is the check at key creation and at request time (a typed 400 :class:`InvalidWebhookUrl`);
a name that does not resolve then is let through (it may resolve later), and every delivery checks again.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
import typing
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import httpcore
import httpx

from dragoman.errors import InvalidWebhookUrl

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Longest webhook URL accepted.
MAX_URL_LENGTH = 2048

#: Cloud metadata services (AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle: 169.254.169.254; AWS IPv6:
#: fd00:ec2::254; Alibaba: 100.100.100.200; Azure wire server 168.63.129.16), refused even with allow_private.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")

Resolver = Callable[[str, int], list[str]]


def _resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver; numeric spellings included)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]
        if address not in seen:
            seen.append(address)
    return seen


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    packed = address.packed
    if packed[:12] == bytes(12) and int(address) > 1:  # IPv4-compatible ::a.b.c.d (deprecated)
        return ipaddress.IPv4Address(packed[12:])
    return None


def refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why ``address`` may not be called (a few words), or None when it may."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:  # the packet goes to the IPv4 address inside: that is what is checked
            why = refusal(inner, allow_private=allow_private)
            return None if why is None else f"an IPv6 address carrying {inner}, {why}"
        if address.teredo is not None:  # a tunnel (2001::/32, not global): refused, naming what it carries
            return f"a Teredo tunnel address (carrying {address.teredo[1]})"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_global:
        return None
    if address.is_loopback:
        why = "a loopback address"
    elif address.is_link_local:
        why = "a link-local address"
    elif _in(address, _CGNAT):
        why = "a carrier-grade NAT address"
    elif _in(address, _PRIVATE):
        why = "a private address"
    else:  # reserved, documentation, benchmarking, protocol assignments: never a receiver
        return "a reserved or special-purpose address"
    return None if allow_private else why


_CGNAT = (ipaddress.ip_network("100.64.0.0/10"),)
_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)


def _in(address: IPAddress, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    return any(address.version == n.version and address in n for n in networks)


def _literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one in any spelling the C resolver takes (decimal, octal, hex,
    shortened ``127.1``), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def check_addresses(host: str, addresses: Iterable[str], *, allow_private: bool) -> list[IPAddress]:
    """``addresses`` of ``host`` as address objects; :class:`InvalidWebhookUrl` when any one is refused."""
    checked: list[IPAddress] = []
    for text in addresses:
        address = ipaddress.ip_address(text)
        why = refusal(address, allow_private=allow_private)
        if why is not None:
            shown = host if host == str(address) else f"{host} ({address})"
            liftable = not allow_private and refusal(address, allow_private=True) is None
            raise InvalidWebhookUrl(
                f"webhook host {shown} is {why}; webhooks are only sent to public addresses"
                + (
                    " (an operator may allow private ones: DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE=1)"
                    if liftable
                    else ""
                )
            )
        checked.append(address)
    if not checked:
        raise InvalidWebhookUrl(f"webhook host {host} resolves to no address")
    return checked


def _split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a webhook URL; :class:`InvalidWebhookUrl` when it is not one we call."""
    if not isinstance(url, str) or not url:
        raise InvalidWebhookUrl("the webhook URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidWebhookUrl(f"the webhook URL is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InvalidWebhookUrl("the webhook URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidWebhookUrl(f"the webhook URL is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidWebhookUrl(
            f"a webhook URL must be http or https, not {scheme or 'schemeless'}: {url[:80]}"
        )
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise InvalidWebhookUrl(f"the webhook URL has no host: {url[:80]}")
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


def check_name(host: str) -> None:
    """Refuse the cloud metadata names whatever they resolve to."""
    if host.lower().rstrip(".") in METADATA_NAMES:
        raise InvalidWebhookUrl(f"webhook host {host} is a cloud metadata name")


def check_url(
    url: str, *, allow_private: bool, resolver: Resolver | None = None, resolve: bool = True
) -> str:
    """``url`` when the service may call it (key creation, a per-request webhook); else a 400.

    The address checks run on the literal address, or on what the name resolves to now; a name that does
    not resolve is let through (delivery resolves and checks again, and refuses it then). ``resolve=False``
    makes the checks that need no lookup only (each delivery attempt, before connecting).
    """
    _scheme, host, port = _split(url)
    check_name(host)
    literal = _literal(host)
    if literal is not None:
        check_addresses(host, [str(literal)], allow_private=allow_private)
    elif resolve:
        try:
            addresses = (resolver or _resolve)(host, port)
        except (OSError, UnicodeError):
            addresses = []
        if addresses:
            check_addresses(host, addresses, allow_private=allow_private)
    try:  # what the client will send must parse there too (it refuses e.g. octal IPv4 spellings)
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise InvalidWebhookUrl(f"the webhook URL is malformed: {exc}") from None
    return url


# ----- the pinned connection -----------------------------------------------------------------------------
class _DeadlineStream(httpcore.NetworkStream):
    """A stream whose every read and write ends by one deadline: a receiver that drips its answer a byte at a
    time cannot hold a delivery past the total timeout (httpx's timeouts are per operation)."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the webhook delivery ran past its total timeout")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.NetworkBackend):
    """An httpcore network backend that resolves each host once, checks every address (:func:`refusal`) and
    connects to the checked address itself; ``total_timeout`` bounds each connection's whole life."""

    def __init__(
        self, *, allow_private: bool, total_timeout: float = 10.0, resolver: Resolver | None = None
    ) -> None:
        self.allow_private = allow_private
        self.total_timeout = total_timeout
        self._resolver = resolver or _resolve
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        deadline = time.monotonic() + self.total_timeout
        host = host.strip("[]")
        check_name(host)
        literal = _literal(host)
        try:
            addresses = [str(literal)] if literal is not None else self._resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        pinned = check_addresses(host, addresses, allow_private=self.allow_private)
        error: Exception | None = None
        for address in pinned:  # the checked addresses only: never a second lookup
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                stream = self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=left if timeout is None else min(timeout, left),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream, deadline)
        if error is not None:
            raise error
        raise httpcore.ConnectTimeout(f"connecting to {host} ran past the total timeout")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise InvalidWebhookUrl("webhooks are not sent over Unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def guarded_client(
    *,
    allow_private: bool,
    timeout: float = 10.0,
    resolver: Resolver | None = None,
    max_connections: int = 32,
    ssl_context: ssl.SSLContext | None = None,
    total_timeout: float | None = None,
) -> httpx.Client:
    """An httpx client for webhooks: the guarded, pinning backend; ``timeout`` seconds per operation and per
    connection in all; no redirects; no proxies or ``.netrc`` from the environment; no kept-alive connections
    (each delivery resolves, checks and connects afresh). ``ssl_context``: the certificates trusted (default:
    httpx's, certifi's roots). ``total_timeout``: the bound of each connection's whole life when it differs
    from ``timeout`` (a dub's media download: minutes in all, ``timeout`` per operation)."""
    transport = httpx.HTTPTransport(
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=0), retries=0
    )
    transport._pool = httpcore.ConnectionPool(  # the one way to give httpx a network backend
        ssl_context=ssl_context or httpx.create_ssl_context(),
        max_connections=max_connections,
        max_keepalive_connections=0,
        retries=0,
        network_backend=GuardedBackend(
            allow_private=allow_private,
            total_timeout=timeout if total_timeout is None else total_timeout,
            resolver=resolver,
        ),
    )
    return httpx.Client(
        transport=transport, timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False
    )
