"""``port_owner``: the program listening on a port, from /proc, named when serve cannot listen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from api.port_owner import port_owner

LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
)


def test_the_process_listening_on_a_port_is_named_with_its_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        owner = port_owner(port)
        assert owner is not None and owner.startswith(Path(sys.executable).name), owner
        assert f"pid {proc.pid}" in owner, owner
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_port_nobody_listens_on_names_nobody(tmp_path: Path) -> None:
    assert port_owner(1) is None
    assert port_owner(8080, proc=tmp_path) is None, "no /proc to read: nothing is guessed"
