"""``errors``: one root, each error also the matching built-in (so ``except ValueError`` callers and the
CLI's exit-code table treat them right), context kept as attributes, ``CorruptDataError`` naming where
(path, position; positions add up as a batch's inner error is located in its file), and the errors that
cross a process boundary (``shell.tools.shares`` pickles them) rebuilt whole."""

from __future__ import annotations

import pickle
import signal
from pathlib import Path

import pytest

from service.base.errors import (
    ConflictError,
    CorruptDataError,
    DuplicatePartitionDirError,
    InterruptedCommandError,
    InvalidInputError,
    LogCleanerError,
    LogClosedError,
    LogDirOfflineError,
    NotFoundError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedFormatError,
    WouldWriteError,
    corrupt_data_in,
)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidInputError, ValueError),
        (RecordTooLargeError, ValueError),
        (OffsetOutOfRangeError, ValueError),
        (DuplicatePartitionDirError, ValueError),
        (CorruptDataError, ValueError),
        (UnsupportedFormatError, ValueError),
        (NotFoundError, LookupError),
        (LogClosedError, LookupError),
        (LogDirOfflineError, OSError),
        (ConflictError, Exception),
        (WouldWriteError, Exception),
        (InterruptedCommandError, Exception),
    ],
)
def test_each_error_is_a_logcleaner_error_and_its_builtin(error: type[Exception], builtin: type) -> None:
    assert issubclass(error, LogCleanerError) and issubclass(error, builtin)


def test_unsupported_format_is_corrupt_data() -> None:
    """A magic 0/1 batch stops a read as corrupt data does (recovery truncates there)."""
    assert issubclass(UnsupportedFormatError, CorruptDataError)


@pytest.mark.parametrize(
    ("path", "position", "message"),
    [
        (None, None, "bad CRC"),
        ("/d/0.log", None, "/d/0.log: bad CRC"),
        (None, 61, "position 61: bad CRC"),
        ("/d/0.log", 61, "/d/0.log, position 61: bad CRC"),
        ("/d/0.log", 0, "/d/0.log, position 0: bad CRC"),  # position 0 is a position
    ],
)
def test_corrupt_data_names_where(path: str | None, position: int | None, message: str) -> None:
    error = CorruptDataError("bad CRC", path=path, position=position)
    assert str(error) == message
    assert (error.reason, error.path, error.position) == ("bad CRC", path, position)


def test_at_locates_a_copy_adding_positions() -> None:
    """An error at position 5 of a batch found at file position 100 is at 105 in the file; the copy keeps
    its class, its reason and its cause; the original is left as it was."""
    cause = KeyError("inner")
    inner = UnsupportedFormatError("magic 1", position=5)
    inner.__cause__ = cause
    located = inner.at(path="/d/0.log", position=100)
    assert type(located) is UnsupportedFormatError
    assert (located.reason, located.path, located.position) == ("magic 1", "/d/0.log", 105)
    assert located.__cause__ is cause
    assert (inner.path, inner.position) == (None, 5)
    assert CorruptDataError("x").at(position=7).position == 7
    assert CorruptDataError("x", path="/a").at(path=None).path == "/a", "a path already known stays"


def test_corrupt_data_in_names_the_file_when_the_error_names_none(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    with pytest.raises(CorruptDataError) as info, corrupt_data_in(path):
        raise CorruptDataError("bad varint", position=9)
    assert (info.value.path, info.value.position) == (str(path), 9)
    assert isinstance(info.value.__cause__, CorruptDataError)
    located = CorruptDataError("bad", path="/other.log")
    with pytest.raises(CorruptDataError) as info, corrupt_data_in(path):
        raise located
    assert info.value is located, "an error that names its file passes through as it is"
    with pytest.raises(KeyError), corrupt_data_in(path):
        raise KeyError("not corrupt data")


@pytest.mark.parametrize(
    "error",
    [
        CorruptDataError("bad CRC", path="/d/0.log", position=61),
        UnsupportedFormatError("magic 0", position=3),
        LogDirOfflineError("log dir /d is offline", log_dir="/d"),
        InvalidInputError("no key"),
        NotFoundError("no topic"),
    ],
)
def test_errors_rebuilt_from_a_pickle_keep_their_context(error: LogCleanerError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert vars(copy) == vars(error)


def test_the_offline_error_is_its_message_and_names_the_dir() -> None:
    error = LogDirOfflineError("log dir /d is offline after an I/O error", log_dir="/d")
    assert str(error) == "log dir /d is offline after an I/O error"
    assert error.log_dir == "/d"


def test_context_is_kept_as_attributes() -> None:
    out_of_range = OffsetOutOfRangeError("offset 9", offset=9, log_start_offset=2, log_end_offset=5)
    assert (out_of_range.offset, out_of_range.log_start_offset, out_of_range.log_end_offset) == (9, 2, 5)
    duplicate = DuplicatePartitionDirError("twice", topic="t", partition=7, paths=("/a/t-7", "/b/t-7"))
    assert (duplicate.topic, duplicate.partition, duplicate.paths) == ("t", 7, ("/a/t-7", "/b/t-7"))


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_command_exits_with_the_shells_code(signum: int, exit_code: int) -> None:
    assert InterruptedCommandError("stopped", signum=signum).exit_code == exit_code
