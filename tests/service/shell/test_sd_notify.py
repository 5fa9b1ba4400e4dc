"""``sd_notify`` against a real datagram socket, as systemd listens under ``Type=notify``: the state is sent
to ``NOTIFY_SOCKET`` (a path, or ``@name`` in the abstract namespace); without the variable nothing is sent;
a send that fails is logged, never raised."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.shell.sd_notify import sd_notify


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        yield sock


def test_the_state_reaches_the_socket_named_by_path(
    tmp_path: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notify"
    listener.bind(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))

    assert sd_notify("READY=1") is True
    assert sd_notify("STOPPING=1") is True

    assert [listener.recv(64), listener.recv(64)] == [b"READY=1", b"STOPPING=1"]


def test_an_abstract_socket_is_named_with_an_at_sign(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"logcleaner-test-{os.getpid()}"
    listener.bind("\0" + name)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)

    assert sd_notify("READY=1") is True
    assert listener.recv(64) == b"READY=1"


def test_without_the_variable_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)

    assert sd_notify("READY=1") is False


def test_a_failed_send_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens"))

    with caplog.at_level(logging.WARNING, logger="service.shell.sd_notify"):
        assert sd_notify("READY=1") is False

    [warning] = caplog.records
    assert "READY=1" in warning.getMessage() and "nobody-listens" in warning.getMessage()
