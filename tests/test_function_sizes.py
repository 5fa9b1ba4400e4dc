"""No Python function over 80 lines and no C function over 100, without exception (issue 51).

A Python function's size is ``end_lineno - lineno + 1`` of its ``def`` (decorators excluded), methods and
nested functions each counted on their own. A C function's size runs from the first line of its declaration
to its closing brace, found by a brace-depth scan of the file with comments, literals and preprocessor lines
blanked out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.paths import REPO

MAX_PYTHON_LINES = 80
MAX_C_LINES = 100
PYTHON_ROOTS = ("service", "cleaner", "api", "scheduler", "tests", "deploy")
SKIPPED_DIRS = frozenset({".venv", "venv", "build", "__pycache__", ".git", "node_modules"})
FunctionSizes = Callable[[str], Iterator[tuple[str, int, int]]]  # source -> (name, first line, lines)

# comments, string and char literals, each replaced by blanks that keep its newlines
_C_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
_C_ATTRIBUTES = frozenset({"__attribute__", "__declspec", "_Alignas"})
_C_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)


def _files(root: Path, pattern: str) -> Iterator[Path]:
    for path in sorted(root.rglob(pattern)):
        if not SKIPPED_DIRS.intersection(path.relative_to(REPO).parts):
            yield path


def python_function_sizes(source: str) -> Iterator[tuple[str, int, int]]:
    """(name, first line, lines) of every function and method in ``source``, nested ones included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None  # set by ast.parse on every statement
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def c_function_sizes(source: str) -> Iterator[tuple[str, int, int]]:
    """(name, first line, lines) of every top-level function definition in C ``source``: a ``{`` at depth 0
    whose declaration has a parameter list and no ``=`` (not an initializer, struct or enum)."""
    code = _C_DIRECTIVE.sub(_blank, _C_NOISE.sub(_blank, source))
    depth = 0
    declaration_start = 0  # offset just past the last top-level ';' or '}'
    opened: tuple[str, int] | None = None  # the open function's name and first line
    for offset, char in enumerate(code):
        if char == "{":
            if depth == 0:
                opened = _function_head(code, declaration_start, offset)
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                if opened is not None:
                    name, first_line = opened
                    yield name, first_line, code.count("\n", 0, offset) + 1 - first_line + 1
                opened = None
                declaration_start = offset + 1
        elif char == ";" and depth == 0:
            declaration_start = offset + 1


def _function_head(code: str, start: int, brace: int) -> tuple[str, int] | None:
    """The name and first line of the function whose body opens at ``brace``; None if the declaration is not
    a function's. The name is the last identifier before a parenthesis at depth 0, attributes aside."""
    head = code[start:brace]
    if "=" in head:
        return None
    names = [
        found.group(1)
        for found in re.finditer(r"(\w+)\s*\(", head)
        if head.count("(", 0, found.start()) == head.count(")", 0, found.start())
        and found.group(1) not in _C_ATTRIBUTES
    ]
    if not names:
        return None
    first = start + len(head) - len(head.lstrip())
    return names[-1], code.count("\n", 0, first) + 1


def _too_long(pattern: str, roots: tuple[Path, ...], sizes: FunctionSizes, limit: int) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{line} {name} is {lines} lines (at most {limit})"
        for root in roots
        for path in _files(root, pattern)
        for name, line, lines in sizes(path.read_text(encoding="utf-8"))
        if lines > limit
    ]


def test_no_python_function_is_over_80_lines() -> None:
    roots = tuple(REPO / name for name in PYTHON_ROOTS if (REPO / name).is_dir())
    assert _too_long("*.py", roots, python_function_sizes, MAX_PYTHON_LINES) == []


def test_no_c_function_is_over_100_lines() -> None:
    assert list(_files(REPO, "*.c")), "the scan found no C file: the repository's layout changed"
    assert _too_long("*.c", (REPO,), c_function_sizes, MAX_C_LINES) == []


def test_python_sizes_count_the_def_to_its_last_line_without_decorators() -> None:
    body = "".join(f"    x = {i}\n" for i in range(79))
    method_body = body.replace("    ", "        ")
    source = f"@decorator\ndef fits():\n{body}\n\nclass C:\n    def long(self):\n{method_body}        y = 1\n"
    sizes = {name: (line, lines) for name, line, lines in python_function_sizes(source)}
    assert sizes == {"fits": (2, 80), "long": (85, 81)}


def test_c_scan_finds_a_long_function_and_ignores_braces_in_comments_strings_and_initializers() -> None:
    body = "".join(f"    x += {i};\n" for i in range(98))
    source = (
        '#include "native.h"\n'
        "#define EMPTY { }\n"
        "static PyMethodDef methods[] = {\n    {NULL, NULL, 0, NULL},\n};\n"
        "struct pair { int a; int b; };\n"
        "/* a comment { with a brace */\n"
        "static int\nfits(int x)\n{\n" + "".join(body.splitlines(keepends=True)[:96]) + "}\n"
        '__attribute__((target("sse4.2"))) static int\n'
        "too_long(int x, void (*callback)(int))  // {\n"
        "{\n"
        '    const char *s = "}";\n'
        "    char c = '{';\n" + body + "}\n"
    )
    sizes = {name: (line, lines) for name, line, lines in c_function_sizes(source)}
    assert sizes == {"fits": (8, 100), "too_long": (108, 104)}
    too_long = [name for name, _line, lines in c_function_sizes(source) if lines > MAX_C_LINES]
    assert too_long == ["too_long"]
