"""``ApiServer``: uvicorn (one worker) in a background thread of the daemon.

``start()`` binds ``api.host``:``api.port`` on the caller's thread, so a port in use fails start-up at
once with the key named; port 0 takes any free port, and ``port`` tells which. It returns once uvicorn
serves. ``stop()`` stops accepting, lets requests in flight finish for up to ``graceful_timeout_s``, then
forces the exit; it returns within about twice that. uvicorn logs at WARNING, without an access log
(``access_log=True`` turns it on), through the process's logging set-up (handlers are the CLI's).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp

from api.port_owner import port_owner

__all__ = ["ApiServer"]

logger = logging.getLogger(__name__)

_POLL_S = 0.01


class ApiServer:
    """Owns the uvicorn server and its thread; ``start`` and ``stop`` come from one (the daemon's) thread."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        access_log: bool = False,
        graceful_timeout_s: float = 5.0,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.graceful_timeout_s = graceful_timeout_s
        self.start_timeout_s = start_timeout_s
        self._config = uvicorn.Config(
            app,
            workers=1,
            log_level="warning",
            log_config=None,  # keep the process's handlers; only the CLI configures logging
            access_log=access_log,
            lifespan="off",
            timeout_graceful_shutdown=max(1, round(graceful_timeout_s)),
            server_header=False,
        )
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind, start serving in the ``logcleaner-api`` thread, and return once it serves."""
        if self._thread is not None:
            raise RuntimeError("the API server was started already")
        self._socket = self._bind()
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="logcleaner-api", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the REST API on {self.url} stopped while starting (see the log)")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the REST API on {self.url} did not start in {self.start_timeout_s} s")
            time.sleep(_POLL_S)
        logger.info("REST API listening on %s", self.url)

    def _bind(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(
                self.host, self.requested_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family, kind, proto, _, address = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise OSError(f"cannot listen on {self.host}:{self.requested_port} (api.host): {exc}") from exc
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self._config.backlog)
        except OSError as exc:
            sock.close()
            reason = exc.strerror or str(exc)
            owner = port_owner(self.requested_port) if exc.errno == errno.EADDRINUSE else None
            if owner is not None:
                reason += f", by {owner}: set api.port to a free port"
            raise OSError(
                f"cannot listen on {self.host}:{self.requested_port} (api.host, api.port): {reason}"
            ) from exc
        sock.setblocking(False)
        return sock

    def stop(self) -> None:
        """Stop serving; bounded by about twice ``graceful_timeout_s``. Safe to call more than once."""
        thread = self._thread
        if thread is None:
            return
        self._server.should_exit = True
        thread.join(timeout=self.graceful_timeout_s + 1)
        if thread.is_alive():
            logger.warning(
                "REST API requests still running after %.0f s; closing them", self.graceful_timeout_s
            )
            self._server.force_exit = True
            thread.join(timeout=self.graceful_timeout_s)
        if self._socket is not None:
            self._socket.close()
        self._thread = None
        logger.info("REST API on %s stopped", self.url)
