"""The README's set-up, its tour and the manual's examples, as a new user runs them.

- The README's tour, command by command: each one succeeds on the files the commands before it wrote;
  ``serve`` runs until it has started, then the tour's ``curl`` requests each answer 2xx, then it gets a
  SIGTERM.
- The CLI examples of ``docs/cli.md``, command by command, the same way.
- The REST examples of ``docs/rest-api.md``, request by request, against a real ``serve``: each answers 2xx.
- ``.ci/run`` runs exactly the README's test command.

Only the log dir (``/tmp/logs``) is moved into the test's own folder, and ``serve`` gets any free port (the
documented 8080 may be taken). The ``curl`` lines are sent as curl would send them (method, headers, body),
through urllib: CI machines need not have curl."""

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
from collections.abc import Sequence
from pathlib import Path

from tests.paths import REPO
from tests.service.serve_process import READY, Serve

README_LOG_DIR = "/tmp/logs"
TOUR_API = "http://127.0.0.1:8080"  # the server's URL in the README's tour


def sh_block(heading: str, first: str = "", page: str = "README.md") -> str:
    """The first ``sh`` block under ``heading`` of ``page`` whose text starts with ``first``."""
    section = (REPO / page).read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ")[0]
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


def curl_request(words: list[str], api: str, base: str = "$API") -> urllib.request.Request:
    """The request ``curl`` would send for the documented ``words`` (-s, -X, -H, -d and a URL starting with
    ``base``, which stands for the server's URL)."""
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
            assert url is None and word.startswith(f"{base}/"), f"unexpected curl argument {word!r}"
            url = api + word.removeprefix(base)
    assert url is not None, words
    return urllib.request.Request(
        url, data=data, headers=headers, method=method or ("POST" if data else "GET")
    )


def send(text: str, api: str, base: str = "$API") -> tuple[int, bytes, str]:
    """Sends the documented ``curl`` line ``text`` to ``api``: its status, body and content type."""
    request = curl_request(shlex.split(text, comments=True), api, base)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def served_url(serve: Serve) -> str:
    """The URL ``serve`` says its REST API listens on."""
    found = re.search(r"REST API on (http://127\.0\.0\.1:\d+)", serve.log)
    assert found, serve.log
    return found.group(1)


def run_commands(commands: list[str], tmp_path: Path, after_serve: Sequence[str] = ()) -> None:
    """Runs the documented commands one after the other, ``/tmp/logs`` moved to ``tmp_path``; ``serve`` is
    started on a free port, given the ``after_serve`` requests once it has started, then stopped."""
    env = logcleaner_env()
    assert shutil.which("logcleaner", path=env["PATH"]), "logcleaner is not installed (pip install -e .)"
    log_dir = str(tmp_path / "logs")
    for command in commands:
        line = command.replace(README_LOG_DIR, log_dir)
        if " serve " in f"{line} ":
            shell = ["env", f"PATH={env['PATH']}", "bash", "-c", f"exec {line} --override api.port=0"]
            serve = Serve(tmp_path, command=shell)
            try:
                serve.wait_for(READY)
                for text in after_serve:
                    status, body, _ = send(text, served_url(serve), TOUR_API)
                    assert 200 <= status < 300, f"{text}: {status} {body[:500]!r}"
                    assert body, f"{text}: an empty answer"
            finally:
                assert serve.stop() == 0, serve.log
            continue
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}\nexit {done.returncode}: {done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{command}: printed nothing"


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    commands = shell_commands(sh_block("## A five-minute tour"))
    steps = [words[1] if words[0] == "logcleaner" else words[0] for words in map(str.split, commands)]
    assert steps[:4] == ["gen", "explain", "clean", "serve"], steps
    assert steps[4:] and set(steps[4:]) == {"curl"}, steps
    run_commands(commands[:4], tmp_path, after_serve=commands[4:])


def test_the_cli_examples_run_as_written(tmp_path: Path) -> None:
    commands = shell_commands(sh_block("## Examples", page="docs/cli.md"))
    assert commands[0].startswith("logcleaner gen") and commands[-1].startswith("logcleaner -v serve")
    run_commands(commands, tmp_path)


def test_the_rest_examples_answer(tmp_path: Path) -> None:
    block = sh_block("## Examples", "API=", page="docs/rest-api.md")
    assert block.startswith(f"API={TOUR_API}\n")
    requests = shell_commands(block)[1:]
    assert len(requests) > 10
    serve = Serve(tmp_path)
    try:
        serve.wait_for(READY)
        api = served_url(serve)
        for text in requests:
            status, body, _ = send(text, api)
            assert 200 <= status < 300, f"{text}: {status} {body[:500]!r}"
            if body:
                json.loads(body)  # every answer is JSON
    finally:
        assert serve.stop() == 0, serve.log


def test_ci_runs_the_readme_test_command() -> None:
    """``.ci/run`` calls the README's test command exactly, then the checks from the same environment."""
    setup = (REPO / "README.md").read_text(encoding="utf-8").split("\n## Set-up\n", 1)[1].split("\n## ")[0]
    commands = [block.split("\n```", 1)[0].strip() for block in setup.split("```sh\n")[1:]]
    assert len(commands) == 2, "Set-up shows two commands: serve, and the tests"
    serve_command, test_command = commands
    assert serve_command.endswith(".venv/bin/logcleaner serve"), serve_command
    assert test_command.endswith(".venv/bin/python -m pytest"), test_command
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [line for line in ci.splitlines() if line and not line.startswith("#")]
    assert test_command in ci_lines, ".ci/run must run the README's test command as written"
    after = ci_lines[ci_lines.index(test_command) + 1 :]
    assert after == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/mypy",
        ".venv/bin/lint-imports",
    ], after


def test_the_docs_links_resolve() -> None:
    """Every relative link of the READMEs and the manual names a file (and a heading) that exists."""
    pages = [REPO / "README.md", REPO / "deploy" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as ``-``."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_the_readmes_claim_of_help_and_json_holds_for_every_command() -> None:
    """ "Every command has --help, and every one but serve has --json": checked against the CLI itself."""
    from click.testing import CliRunner

    from service.shell.cli import cli

    runner = CliRunner()
    assert "every one but `serve`" in (REPO / "README.md").read_text()
    for name in cli.commands:  # a click Group
        shown = runner.invoke(cli, [name, "--help"]).output
        assert ("--json" in shown) is (name != "serve"), name
        assert "(Its length" not in shown and "the body only" not in shown, f"{name}: a note for developers"
