"""Whether ``serve`` may listen where it is told to, checked before it binds or touches a log dir.

The API can delete topics and records. Listening beyond loopback (``api.host`` not in ``127.0.0.0/8``,
``::1`` or ``localhost``) without ``api.auth.token.file`` would hand that to anyone who reaches the port,
so it is an invalid configuration (``serve`` exits 2) unless ``api.auth.allow.anonymous=true`` says it is
meant. The offline commands listen nowhere, so only ``serve`` (the daemon's start) checks this.
"""

from __future__ import annotations

import ipaddress
import logging

from service.config.broker_config import BrokerConfig
from service.config.definitions import InvalidConfigError

__all__ = ["check_listen_policy", "is_loopback_host"]

logger = logging.getLogger(__name__)


def is_loopback_host(host: str) -> bool:
    """``localhost``, an address in ``127.0.0.0/8`` or ``::1`` (brackets allowed)."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_listen_policy(broker: BrokerConfig) -> None:
    """Raise :class:`InvalidConfigError` naming the key and the fix when ``serve`` must not start; warn
    when it starts open to the network because ``api.auth.allow.anonymous=true`` says so."""
    host = broker.api_host
    if is_loopback_host(host) or broker.api_auth_token_file:
        return
    if broker.api_auth_allow_anonymous:
        logger.warning(
            "The REST API listens on %s without authentication (api.auth.allow.anonymous=true): anyone "
            "who reaches the port can delete topics and records",
            host,
        )
        return
    raise InvalidConfigError(
        f"api.host={host} listens beyond loopback without authentication: set api.auth.token.file "
        "to a file holding a bearer token, or api.auth.allow.anonymous=true to serve anyone who reaches "
        "the port, or listen on 127.0.0.1",
        name="api.host",
        value=host,
    )
