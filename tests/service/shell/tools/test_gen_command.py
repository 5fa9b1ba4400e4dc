"""``gen_command``: ``logcleaner gen``'s command line. A bad value exits 2 with nothing written; an option
the chosen workload does not read is refused naming the workloads that do; every option is read by some
workload, and those every workload reads are taken by each. (What each workload writes is in ``test_gen.py``,
``test_gen_offsets.py`` and ``test_gen_txn_state.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.shell.cli import main
from service.shell.tools.gen_command import _SHARED_OPTIONS, _WORKLOAD_OPTIONS, gen_command


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["gen", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args",
    [
        ["--records", "-1"],
        ["--partitions", "0"],
        ["--topics", "0"],
        ["--batch-size", "0"],
        ["--keys", "0"],
        ["--value-size", "-5"],
        ["--tombstones", "1.5"],
        ["--future-share", "-0.1"],
        ["--timestamp-spread", "-1"],
        ["--segment-bytes", "13"],
        ["--compression", "brotli"],
        ["--cleanup-policy", "forever"],
        ["--topic", "bad name"],
        ["--topic", ".."],
        ["--topic", "a", "--topic", "a"],
        ["--topics", "2", "--topic", "x"],
        ["--workload", "consumer-offsets", "--idempotent"],
        ["--workload", "consumer-offsets", "--transaction-batches", "3"],
        ["--idempotent", "--transaction-batches", "3"],
        ["--aborted-transactions", "0.5"],
        ["--transaction-batches", "-1"],
        ["--transaction-batches", "2", "--aborted-transactions", "2"],
    ],
)
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, err = run(capsys, "--log-dir", str(tmp_path / "d"), *args)
    assert code == 2 and out == "" and err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    ("args", "readers"),
    [
        (["--workload", "records", "--groups", "3"], "consumer-offsets"),
        (["--workload", "transaction-state", "--commits", "2"], "consumer-offsets"),
        (["--workload", "consumer-offsets", "--expired-ids", "0.5"], "transaction-state"),
        (["--workload", "consumer-offsets", "--aborted-transactions", "0.5"], "records or transaction-state"),
        (["--workload", "transaction-state", "--records", "5"], "records"),
        (["--workload", "consumer-offsets", "--compression", "none"], "records"),  # its default, still given
    ],
)
def test_an_option_the_workload_does_not_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], readers: str
) -> None:
    code, out, err = run(capsys, "--log-dir", str(tmp_path / "d"), *args)
    assert (code, out) == (2, "")
    message = f"'{args[2]}': --workload {args[1]} does not read it: it is for --workload {readers}"
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_every_option_is_read_by_some_workload() -> None:
    """An option in no list would be refused by every workload, with no workload to name."""
    listed = _SHARED_OPTIONS.union(*_WORKLOAD_OPTIONS.values())
    assert {param.name for param in gen_command.params} == listed


def test_the_options_every_workload_reads_are_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = ["--partitions", "2", "--timestamp-start", "0", "--timestamp-spread", "10", "--seed", "3"]
    for workload in ("records", "consumer-offsets", "transaction-state"):
        code, _out, err = run(capsys, "--log-dir", str(tmp_path / workload), "--workload", workload, *shared)
        assert (code, err) == (0, "")


def test_log_dir_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--records", "1")
    assert code == 2 and "--log-dir" in err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--future-share" in out and "--cleanup-policy" in out
