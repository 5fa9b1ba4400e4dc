"""``sd_notify``: systemd's readiness protocol, the few lines it needs (no dependency).

Under ``Type=notify`` systemd sets ``NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace) and
waits for ``READY=1``; ``STOPPING=1`` tells it the stop has begun. Without the variable this does nothing;
a send that fails is logged, never raised (the service runs as well without a supervisor).
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["sd_notify"]

logger = logging.getLogger(__name__)


def sd_notify(state: str) -> bool:
    """Send ``state`` (e.g. ``READY=1``) to systemd; True if it was sent."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError as exc:
        logger.warning("Could not notify systemd (%s) of %s: %s", os.environ.get("NOTIFY_SOCKET"), state, exc)
        return False
    return True
