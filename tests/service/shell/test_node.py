"""``service.shell.node`` is the one composition root: no other module of the four packages constructs the
process's parts (the LogManager, the cleaner, the scheduler, the engine, the metadata, the metrics, the
API). The daemon and the offline commands build them through ``service.shell.node``'s functions."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO as _ROOT

_PACKAGES = ("service", "api", "cleaner", "scheduler")
_COMPOSITION_ROOT = Path("service/shell/node.py")
_PARTS = frozenset(
    {
        "LogManager",
        "CleanerManager",
        "LogCleaner",
        "LogScheduler",
        "InProcessEngine",
        "PerRoundEngine",
        "SparkEngine",
        "MetadataSource",
        "ServiceMetrics",
        "ApiServer",
        "create_app",
    }
)


def _constructions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if name in _PARTS:
                found.append(f"{path.relative_to(_ROOT)}:{node.lineno} {name}(...)")
    return found


def test_only_the_composition_root_constructs_the_parts() -> None:
    outside = [
        hit
        for package in _PACKAGES
        for path in sorted((_ROOT / package).rglob("*.py"))
        if path.relative_to(_ROOT) != _COMPOSITION_ROOT
        for hit in _constructions(path)
    ]
    assert outside == []


def test_the_composition_root_constructs_them() -> None:
    """The check above looks for the right names: the composition root's own calls are found."""
    names = {hit.rsplit(" ", 1)[1].removesuffix("(...)") for hit in _constructions(_ROOT / _COMPOSITION_ROOT)}
    assert names == _PARTS
