"""check_no_duplicate_partition_dirs: which names are one partition, which may repeat, and what is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import DuplicatePartitionDirError
from service.storage.duplicate_dirs import check_no_duplicate_partition_dirs

FUTURE = "t-0.0123456789abcdef0123456789abcdef-future"
OTHER_FUTURE = "t-0.fedcba9876543210fedcba9876543210-future"


def log_dirs(root: Path, layout: dict[str, list[str]]) -> list[Path]:
    for name, children in layout.items():
        for child in children:
            (root / name / child).mkdir(parents=True)
        (root / name).mkdir(exist_ok=True)
    return [root / name for name in layout]


@pytest.mark.parametrize(
    "layout",
    [
        {"a": ["t-0", "t-1", "t-10", "u-0"], "b": ["t-2", "t-01x", "lost+found"]},
        {"a": ["t-0", FUTURE], "b": []},  # a replica being moved
        {"a": ["t-0.1-delete", "__cluster_metadata-0"], "b": ["t-0.1-delete", "__cluster_metadata-0"]},
        {"a": ["t-0.1-stray"], "b": ["t-0.2-stray", "t-0"]},
    ],
    ids=["distinct", "future-beside-current", "delete-and-metadata-repeat", "strays-repeat"],
)
def test_layouts_without_a_duplicate_pass(tmp_path: Path, layout: dict[str, list[str]]) -> None:
    check_no_duplicate_partition_dirs(log_dirs(tmp_path, layout))


@pytest.mark.parametrize(
    ("layout", "named"),
    [
        ({"a": ["t-0"], "b": ["t-0"]}, ("a/t-0", "b/t-0")),
        ({"a": ["t-007", "t-7"], "b": []}, ("a/t-007", "a/t-7")),
        ({"a": ["t-00"], "b": ["t-0"]}, ("a/t-00", "b/t-0")),
        ({"a": [FUTURE], "b": [OTHER_FUTURE]}, (f"a/{FUTURE}", f"b/{OTHER_FUTURE}")),
        ({"a": ["z-1", "t-3"], "b": ["z-1", "t-3"]}, ("a/t-3", "b/t-3")),  # the first in partition order
    ],
    ids=["two-log-dirs", "zero-padded", "zero-padded-zero", "two-futures", "first-named"],
)
def test_a_duplicate_names_both_dirs(
    tmp_path: Path, layout: dict[str, list[str]], named: tuple[str, str]
) -> None:
    with pytest.raises(DuplicatePartitionDirError) as raised:
        check_no_duplicate_partition_dirs(log_dirs(tmp_path, layout))
    assert raised.value.paths == tuple(str(tmp_path / n) for n in named)
    assert f"{tmp_path / named[0]}" in str(raised.value) and f"{tmp_path / named[1]}" in str(raised.value)


def test_a_stray_copy_is_set_aside_but_two_live_copies_are_still_one_too_many(tmp_path: Path) -> None:
    dirs = log_dirs(tmp_path, {"a": ["t-0"], "b": ["t-0"], "c": ["t-0"]})
    check_no_duplicate_partition_dirs(dirs[:2], strays=[dirs[0] / "t-0"])
    with pytest.raises(DuplicatePartitionDirError) as raised:
        check_no_duplicate_partition_dirs(dirs, strays=[dirs[0] / "t-0"])
    assert raised.value.paths == (str(dirs[1] / "t-0"), str(dirs[2] / "t-0"))
