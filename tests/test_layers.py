"""Every module of the four packages falls under a layer of the import-linter ``layers`` contract.

A module left out of every layer escapes the contract: ``lint-imports`` would let it import upwards.
"""

from __future__ import annotations

import re
import tomllib

import grimp

from tests.paths import REPO as _ROOT

_PACKAGES = ("service", "api", "cleaner", "scheduler")


def _layer_modules() -> set[str]:
    config = tomllib.loads((_ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [
        contract["layers"]
        for contract in contracts
        if contract["type"] == "layers" and "containers" not in contract  # the packages', not one's own
    ]
    return {name for layer in layers for name in re.split(r"[|:\s]+", layer) if name}


def test_every_module_is_in_a_layer() -> None:
    named = _layer_modules()
    graph = grimp.build_graph(*_PACKAGES)
    outside = sorted(
        module
        for module in graph.modules
        if module not in _PACKAGES
        and module.split(".")[0] in _PACKAGES
        and not any(module == name or module.startswith(name + ".") for name in named)
    )
    assert outside == []


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in helper modules and fixtures; a test module imported by another would run its
    tests' imports (and hide which tests share what)."""
    graph = grimp.build_graph("tests")
    importing = sorted(
        f"{importer} imports {imported}"
        for imported in graph.modules
        if imported.rsplit(".", 1)[-1].startswith("test_")
        for importer in graph.find_modules_that_directly_import(imported)
    )
    assert importing == []
