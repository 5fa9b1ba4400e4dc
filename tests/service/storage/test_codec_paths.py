"""Both paths write the same batch bytes: the C codecs (``_codecs.c``, this process) and the pure-Python
path (``LOGCLEANER_PURE_PYTHON=1``, another process, since the path is chosen at import), for every codec
and batch shape. Compression levels are Kafka's defaults on both paths (no config key changes them), so
there is no level to vary. (``tests/kafka/test_compressors.py`` holds the blobs to Kafka's own.)"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.storage.compression import CompressionType
from service.storage.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    iter_batches,
)
from tests.service.storage.batch_encoder import BatchSpec, encode_spec, is_pure_python


class PureEncoder:
    """The ``batch_encoder`` process on the pure-Python path: one batch per call."""

    def __init__(self) -> None:
        env = {**os.environ, "LOGCLEANER_PURE_PYTHON": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.service.storage.batch_encoder"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.is_pure = json.loads(self.stdout.readline())["pure"]

    def encode(self, spec: BatchSpec) -> bytes:
        self.stdin.write(json.dumps(spec) + "\n")
        self.stdin.flush()
        return bytes.fromhex(self.stdout.readline().strip())

    def close(self) -> None:
        self.stdin.close()
        returncode = self.process.wait(timeout=30)
        self.stdout.close()
        assert returncode == 0


@pytest.fixture(scope="module")
def pure_encoder() -> Iterator[PureEncoder]:
    encoder = PureEncoder()
    yield encoder
    encoder.close()


def _blob(seed: int, size: int, repeat: int, max_size: int) -> str:
    """``size`` random bytes repeated ``repeat`` times, cut at ``max_size``, in hex: incompressible, or as
    compressible as wanted, and large enough (up to 96 KiB) to span several snappy chunks and lz4 blocks."""
    return (random.Random(seed).randbytes(size) * repeat)[:max_size].hex()


def _bytes(max_size: int) -> st.SearchStrategy[str | None]:
    """Null, or a blob of at most ``max_size`` bytes."""
    return st.none() | st.builds(
        _blob,
        st.integers(0, 2**32),
        st.integers(0, max_size),
        st.sampled_from([1, 1, 2, 7, 300]),
        st.just(max_size),
    )


@st.composite
def batch_specs(draw: st.DrawFn) -> BatchSpec:
    count = draw(st.integers(1, 40))
    base_offset = draw(st.integers(0, 2**40))
    base_timestamp = draw(st.integers(0, 2**41))
    records = [
        [
            base_offset + index,
            base_timestamp + draw(st.integers(-1000, 10**6)),
            draw(_bytes(40)),
            draw(_bytes(2000 if count > 4 else 96 * 1024)),
            draw(st.lists(st.tuples(st.text(max_size=8), _bytes(16)), max_size=3)),
        ]
        for index in range(count)
    ]
    producer = draw(
        st.sampled_from(
            [[NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, False], [7, 0, 3, False], [9, 2, 0, True]]
        )
    )
    return {
        "compression": int(draw(st.sampled_from(list(CompressionType)))),
        "timestamp_type": draw(st.integers(0, 1)),
        "producer": producer,
        "records": records,
    }


def test_the_two_processes_take_the_two_paths(pure_encoder: PureEncoder) -> None:
    assert not is_pure_python(), "the C modules are built and in use here"
    assert pure_encoder.is_pure


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(spec=batch_specs())
def test_the_pure_python_path_writes_the_c_path_s_batch_bytes(
    pure_encoder: PureEncoder, spec: BatchSpec
) -> None:
    written = encode_spec(spec)
    assert pure_encoder.encode(spec) == written
    (batch,) = iter_batches(written)
    assert int(batch.compression) == spec["compression"]
    assert [record.offset for record in batch.records()] == [record[0] for record in spec["records"]]
