"""The README's examples as a new user runs them. The CLI tour, command by command: each one succeeds on
the files the commands before it wrote. The REST examples, request by request, against a real ``serve``:
each answers 2xx. Only the log dir (``/tmp/logs``) is moved into the test's own folder, and ``serve`` gets
any free port (the README's 8080 may be taken); it runs until it has started, then gets a SIGTERM, as the
tour says. The ``curl`` lines are sent as curl would send them (method, headers, body), through urllib:
CI machines need not have curl."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.service.test_serve import READY, Serve

REPO = Path(__file__).resolve().parents[2]
README_LOG_DIR = "/tmp/logs"


def sh_block(heading: str, first: str = "") -> str:
    """The first ``sh`` block under ``heading`` whose text starts with ``first``."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ")[0]
    blocks = [block.split("\n```", 1)[0] for block in section.split("```sh\n")[1:]]
    return next(block for block in blocks if block.startswith(first))


def shell_commands(block: str) -> list[str]:
    """The block's commands as the shell reads them: continuations joined, a quote may span lines, comment
    lines dropped."""
    commands, pending = [], ""
    for line in block.replace("\\\n", " ").splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on on the next line
            continue
        if words:
            commands.append(pending.strip())
        pending = ""
    return commands


def logcleaner_env() -> dict[str, str]:
    """``logcleaner`` on PATH: the installed entry point, next to this Python."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def curl_request(words: list[str], api: str) -> urllib.request.Request:
    """The request ``curl`` would send for the README's ``words`` (-s, -X, -H, -d and a URL)."""
    assert words[0] == "curl", words
    method, headers, data, url = None, {}, None, None
    args = iter(words[1:])
    for word in args:
        if word == "-X":
            method = next(args)
        elif word == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            data = next(args).encode()
        elif word != "-s":
            assert url is None and word.startswith("$API/"), f"unexpected curl argument {word!r}"
            url = api + word.removeprefix("$API")
    assert url is not None, words
    return urllib.request.Request(
        url, data=data, headers=headers, method=method or ("POST" if data else "GET")
    )


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    env = logcleaner_env()
    assert shutil.which("logcleaner", path=env["PATH"]), "logcleaner is not installed (pip install -e .)"
    commands = shell_commands(sh_block("## CLI tour"))
    assert commands[0].startswith("logcleaner gen") and commands[-1].startswith("logcleaner -v serve")
    log_dir = str(tmp_path / "logs")
    for command in commands:
        line = command.replace(README_LOG_DIR, log_dir)
        if " serve " in f"{line} ":
            shell = ["env", f"PATH={env['PATH']}", "bash", "-c", f"exec {line} --override api.port=0"]
            serve = Serve(tmp_path, command=shell)
            serve.wait_for(READY)
            assert serve.stop() == 0, serve.log
            continue
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}\nexit {done.returncode}: {done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{command}: printed nothing"


def test_the_readme_rest_examples_answer(tmp_path: Path) -> None:
    block = sh_block("## REST API", "API=")
    assert block.startswith("API=http://127.0.0.1:8080\n")
    requests = shell_commands(block)[1:]
    assert len(requests) > 10
    serve = Serve(tmp_path)
    try:
        serve.wait_for(READY)
        found = re.search(r"REST API on (http://127\.0\.0\.1:\d+)", serve.log)
        assert found, serve.log
        for text in requests:
            words = shlex.split(text, comments=True)
            request = curl_request(words, found.group(1))
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    status, body = response.status, response.read()
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read()
            assert 200 <= status < 300, f"{text}: {status} {body[:500]!r}"
            if body:
                json.loads(body)  # every answer is JSON
    finally:
        assert serve.stop() == 0, serve.log
