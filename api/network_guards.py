"""Who may call: the ``Host`` and ``Origin`` checks, as ASGI middleware in front of everything else.

``HostGuard`` (DNS rebinding): a web page whose name an attacker re-points at this address reaches the API
with that name in ``Host``. A request is answered only if its ``Host`` (port aside) is the bound address
(``api.host``), a loopback name or address (``localhost``, ``127.0.0.0/8``, ``::1``), or a name listed in
``api.allowed.hosts`` (``*`` accepts any). Bound to a wildcard address (``0.0.0.0``, ``::``), any IP
address is accepted too: a rebinding attack needs a name, never an address. Anything else is 421
(Misdirected Request: this server does not answer for that name), on every path, ``/metrics`` included:
Prometheus sends its target's ``host:port``, which is the bound address or a name to list. A request
without ``Host`` (HTTP/1.0, no browser) passes.

``OriginGuard`` (cross-site requests): a browser names the page that sent a request in ``Origin``. A request
whose ``Origin`` is not the server's own (the ``Host`` it was sent to; scheme and default ports aside) or
one of ``api.allowed.origins`` is 403, whatever its method. ``Origin: null`` (sandboxed frames, files) is
cross-site. Requests without ``Origin`` (curl, Prometheus, scripts) pass.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_response

__all__ = ["HostGuard", "OriginGuard", "host_name"]

_LOOPBACK_NAMES = frozenset({"localhost"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def host_name(authority: str) -> str:
    """``host[:port]`` → the host, lower case, without brackets or a trailing dot (``[::1]:80`` → ``::1``)."""
    text = authority.strip().lower()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope["headers"]:
        if name == wanted:
            return bytes(value).decode("latin-1")
    return None


class HostGuard:
    def __init__(self, app: ASGIApp, *, bound_host: str, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        bound = host_name(bound_host)
        self._names = _LOOPBACK_NAMES | {bound} | {host_name(h) for h in allowed_hosts}
        self._any = "*" in self._names
        self._any_address = bound in _WILDCARDS

    def is_allowed(self, host: str) -> bool:
        name = host_name(host)
        if self._any or name in self._names:
            return True
        address = _ip(name)
        return address is not None and (address.is_loopback or self._any_address)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = _header(scope, b"host")
            if host is not None and not self.is_allowed(host):
                detail = (
                    f"this server does not answer for the host {host_name(host)!r} (Host header); "
                    "use its address or localhost, or list the name in api.allowed.hosts"
                )
                await problem_response(421, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _split_origin(origin: str) -> tuple[str, str] | None:
    """``scheme://host[:port]`` → (scheme, ``host[:port]`` without the scheme's default port), or ``None``
    when ``origin`` is not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path.strip("/") or parts.query:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = port is None or str(port) == _DEFAULT_PORTS[parts.scheme]
    return parts.scheme, host if default else f"{host}:{port}"


def _host_authority(host: str) -> str:
    text = host.strip().lower()
    for port in _DEFAULT_PORTS.values():
        text = text.removesuffix(f":{port}")
    return text


class OriginGuard:
    def __init__(self, app: ASGIApp, *, allowed_origins: Iterable[str]) -> None:
        self.app = app
        self._allowed = {o for o in (_split_origin(origin) for origin in allowed_origins) if o is not None}

    def is_allowed(self, origin: str, host: str | None) -> bool:
        """Same origin as the ``Host`` the request was sent to (any scheme: a TLS proxy may front us), or
        exactly one of ``api.allowed.origins``."""
        split = _split_origin(origin)
        if split is None:
            return False
        return (host is not None and split[1] == _host_authority(host)) or split in self._allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = _header(scope, b"origin")
            if origin is not None and not self.is_allowed(origin, _header(scope, b"host")):
                detail = (
                    f"cross-site request refused: Origin {origin!r} is not this server's own; "
                    "list it in api.allowed.origins to accept it"
                )
                await problem_response(403, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)
