"""``load_native_module``: the built extension, or None where the pure-Python path serves: the module is not
built, or ``LOGCLEANER_PURE_PYTHON`` is set (how the tests hold both paths to the same output)."""

from __future__ import annotations

import pytest

from service.storage.native_module import load_native_module

BUILT = "service.storage._speedups"  # built into the tree (``pip install -e``, as .ci/run does)


def test_a_built_extension_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGCLEANER_PURE_PYTHON", raising=False)

    module = load_native_module(BUILT)

    assert module is not None and module.__name__ == BUILT
    assert module.__file__ is not None and module.__file__.endswith(".so")


def test_pure_python_is_chosen_by_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGCLEANER_PURE_PYTHON", "1")

    assert load_native_module(BUILT) is None


def test_a_module_that_is_not_built_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGCLEANER_PURE_PYTHON", raising=False)

    assert load_native_module("service.storage._no_such_extension") is None
