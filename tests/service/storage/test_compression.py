"""The codecs round-trip, interoperate with kafka-python both ways, frame as Kafka does, and fail cleanly."""

from __future__ import annotations

import contextlib
import ctypes.util
import gzip
import random
import struct
import warnings
from pathlib import Path

import cramjam
import lz4.block  # type: ignore[import-untyped]  # python-lz4 ships no type hints
import lz4.frame  # type: ignore[import-untyped]  # python-lz4 ships no type hints
import pytest
import snappy  # type: ignore[import-untyped]  # python-snappy ships no type hints
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage import compression as compression_module
from service.storage.compression import (
    CompressionType,
    _compress_lz4_frame,
    _compress_xerial,
    _decompress_kafka_lz4,
    compress,
    compression_from_name,
    decompress,
)

with warnings.catch_warnings():
    # kafka-python 3.0 imports its admin client, which calls the deprecated importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec

CODECS = list(CompressionType)
COMPRESSED_CODECS = [codec for codec in CompressionType if codec is not CompressionType.NONE]

_rng = random.Random(20261122)
_TEXT = b" ".join(
    _rng.choice([b"alpha", b"beta", b"gamma", b"kafka", b"offset", b"segment"]) for _ in range(80_000)
)
LARGE_INPUTS = {
    "random-150KiB": _rng.randbytes(150 * 1024),
    "text": _TEXT,
    "zeros-1MiB": bytes(1 << 20),
    "mixed": _rng.randbytes(40_000) + bytes(100_000) + _TEXT[:70_000],
    "two-lz4-blocks": _rng.randbytes(128 * 1024),
    "two-lz4-blocks-plus-1": _TEXT[: 128 * 1024 + 1],
    "four-snappy-chunks": _TEXT[: 128 * 1024],
    "four-snappy-chunks-minus-1": _rng.randbytes(128 * 1024 - 1),
}
large_inputs = pytest.mark.parametrize("data", list(LARGE_INPUTS.values()), ids=list(LARGE_INPUTS))

KAFKA_PYTHON_ENCODERS = {
    CompressionType.GZIP: kafka.codec.gzip_encode,
    CompressionType.SNAPPY: kafka.codec.snappy_encode,
    CompressionType.LZ4: kafka.codec.lz4_encode,
    CompressionType.ZSTD: kafka.codec.zstd_encode,
}
KAFKA_PYTHON_DECODERS = {
    CompressionType.GZIP: kafka.codec.gzip_decode,
    CompressionType.SNAPPY: kafka.codec.snappy_decode,
    CompressionType.LZ4: kafka.codec.lz4_decode,
    CompressionType.ZSTD: kafka.codec.zstd_decode,
}

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
LZ4_HEADER = bytes.fromhex("04224d18604082")
MAGIC_PREFIXES = [b"", b"\x1f\x8b\x08\x00", XERIAL_HEADER, b"\x82SNAPPY\x00", LZ4_HEADER, b"\x28\xb5\x2f\xfd"]
garbage = st.one_of(
    st.binary(max_size=300),
    st.tuples(st.sampled_from(MAGIC_PREFIXES), st.binary(max_size=300)).map(lambda pair: pair[0] + pair[1]),
)


def _lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    """Split one of our LZ4 frames into (is_stored, data) blocks, checking the end mark."""
    blocks: list[tuple[bool, bytes]] = []
    position = len(LZ4_HEADER)
    while True:
        (size,) = struct.unpack_from("<I", frame, position)
        position += 4
        if size == 0:
            assert position == len(frame)
            return blocks
        length = size & 0x7FFFFFFF
        blocks.append((bool(size & 0x80000000), frame[position : position + length]))
        position += length


def _xerial_chunks(stream: bytes) -> list[bytes]:
    chunks: list[bytes] = []
    position = len(XERIAL_HEADER)
    while position < len(stream):
        (length,) = struct.unpack_from(">i", stream, position)
        chunks.append(stream[position + 4 : position + 4 + length])
        position += 4 + length
    assert position == len(stream)
    return chunks


# --- names and ids ---------------------------------------------------------------------------------------


def test_codec_ids_and_labels_are_kafkas() -> None:
    assert [(int(codec), codec.label) for codec in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_compression_from_name_round_trips_label(codec: CompressionType) -> None:
    assert compression_from_name(codec.label) is codec


def test_uncompressed_names_none() -> None:
    assert compression_from_name("uncompressed") is CompressionType.NONE


@pytest.mark.parametrize("name", ["", "GZIP", "producer", "lz4hc", " zstd"])
def test_compression_from_name_rejects_unknown_names(name: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        compression_from_name(name)
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert repr(name) in message
    for allowed in ("gzip", "lz4", "none", "snappy", "uncompressed", "zstd"):
        assert allowed in message


# --- round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=4096))
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    compressed = compress(codec, data)
    assert decompress(codec, compressed) == data
    assert decompress(codec, memoryview(compressed)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_empty(codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, b"")) == b""


@pytest.mark.parametrize("codec", CODECS)
@large_inputs
def test_round_trip_large(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_decompress_reads_a_slice_of_a_larger_buffer(codec: CompressionType) -> None:
    data = LARGE_INPUTS["mixed"]
    buffer = b"junk" + compress(codec, data) + b"more junk"
    assert decompress(codec, memoryview(buffer)[4:-9]) == data


def test_none_is_identity() -> None:
    data = LARGE_INPUTS["random-150KiB"]
    assert compress(CompressionType.NONE, data) == data
    assert decompress(CompressionType.NONE, memoryview(data)) == data


# --- kafka-python reads what we write, we read what it writes ----------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=4096))
def test_kafka_python_decodes_ours(codec: CompressionType, data: bytes) -> None:
    assert KAFKA_PYTHON_DECODERS[codec](compress(codec, data)) == data


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_kafka_python_decodes_ours_empty(codec: CompressionType) -> None:
    """Not snappy: kafka-python takes a bare 16-byte xerial header for raw snappy (it wants > 16 bytes)."""
    assert KAFKA_PYTHON_DECODERS[codec](compress(codec, b"")) == b""


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=4096))
def test_we_decode_kafka_python(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, KAFKA_PYTHON_ENCODERS[codec](data)) == data


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@large_inputs
def test_kafka_python_interop_large(codec: CompressionType, data: bytes) -> None:
    assert KAFKA_PYTHON_DECODERS[codec](compress(codec, data)) == data
    assert decompress(codec, KAFKA_PYTHON_ENCODERS[codec](data)) == data


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=4096))
def test_we_decode_kafka_python_raw_snappy(data: bytes) -> None:
    raw = kafka.codec.snappy_encode(data, xerial_compatible=False)
    assert not raw.startswith(b"\x82SNAPPY\x00")
    assert decompress(CompressionType.SNAPPY, raw) == data


@large_inputs
def test_we_decode_kafka_python_snappy_framings_large(data: bytes) -> None:
    assert (
        decompress(CompressionType.SNAPPY, kafka.codec.snappy_encode(data, xerial_compatible=False)) == data
    )
    small_chunks = kafka.codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=1000)
    assert decompress(CompressionType.SNAPPY, small_chunks) == data


# --- framing: snappy ---------------------------------------------------------------------------------------


@large_inputs
def test_snappy_is_xerial_framed_in_32_kib_chunks(data: bytes) -> None:
    stream = compress(CompressionType.SNAPPY, data)
    assert stream[:16] == bytes.fromhex("82534e41505059000000000100000001")
    decoded = [snappy.decompress(chunk) for chunk in _xerial_chunks(stream)]
    assert b"".join(decoded) == data
    assert all(len(part) == 32 * 1024 for part in decoded[:-1])
    assert 0 < len(decoded[-1]) <= 32 * 1024


def test_snappy_of_empty_input_is_the_bare_header() -> None:
    assert compress(CompressionType.SNAPPY, b"") == XERIAL_HEADER


def test_snappy_reads_concatenated_xerial_streams() -> None:
    first, second = LARGE_INPUTS["text"][:50_000], LARGE_INPUTS["random-150KiB"][:70_000]
    stream = kafka.codec.snappy_encode(first) + kafka.codec.snappy_encode(second)
    assert decompress(CompressionType.SNAPPY, stream) == first + second


def test_snappy_ignores_xerial_version_fields() -> None:
    """Some producers write the version fields little-endian (kafka-python issue 2414)."""
    stream = compress(CompressionType.SNAPPY, b"payload")
    little_endian = stream[:8] + struct.pack("<ii", 1, 1) + stream[16:]
    assert decompress(CompressionType.SNAPPY, little_endian) == b"payload"


# --- framing: lz4 ------------------------------------------------------------------------------------------


def test_lz4_header_is_kafkas() -> None:
    frame = compress(CompressionType.LZ4, b"some records")
    assert frame[:7] == bytes.fromhex("04224d18604082")
    flg = frame[4]
    assert flg >> 6 == 0b01  # version
    assert flg & 0x20  # independent blocks
    assert not flg & 0x1F  # no block checksum, content size, content checksum or dict id
    assert frame[5] == 0x40  # 64 KiB blocks


def test_lz4_header_matches_the_reference_library() -> None:
    reference = lz4.frame.compress(
        b"",
        block_linked=False,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        content_checksum=False,
        store_size=False,
    )
    assert reference[:7] == LZ4_HEADER
    assert compress(CompressionType.LZ4, b"") == LZ4_HEADER + bytes(4)


@large_inputs
def test_lz4_frames_in_kafkas_framing_are_read_block_by_block(data: bytes) -> None:
    """Ours, and the reference library's with Kafka's settings (independent 64 KiB blocks, no checksums, no
    content size), take the block-by-block path; two frames end to end are left to cramjam's frame reader,
    which reads both."""
    compressor = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    theirs = compressor.begin() + compressor.compress(data) + compressor.flush()
    for frame in (compress(CompressionType.LZ4, data), theirs):
        assert _decompress_kafka_lz4(memoryview(frame)) == data
        assert decompress(CompressionType.LZ4, frame) == data
    both = compress(CompressionType.LZ4, data) + compress(CompressionType.LZ4, b"tail")
    assert _decompress_kafka_lz4(memoryview(both)) is None
    assert decompress(CompressionType.LZ4, both) == data + b"tail"


@pytest.mark.parametrize("block_linked", [False, True])
@pytest.mark.parametrize("content_checksum", [False, True])
@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize(
    "block_size",
    [
        lz4.frame.BLOCKSIZE_MAX64KB,
        lz4.frame.BLOCKSIZE_MAX256KB,
        lz4.frame.BLOCKSIZE_MAX1MB,
        lz4.frame.BLOCKSIZE_MAX4MB,
    ],
)
def test_lz4_header_checksum_agrees_with_the_reference_library(
    block_linked: bool, content_checksum: bool, store_size: bool, block_size: int
) -> None:
    frame = lz4.frame.compress(
        b"x" * 100,
        block_linked=block_linked,
        content_checksum=content_checksum,
        store_size=store_size,
        block_size=block_size,
    )
    descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)
    assert compression_module._lz4_header_checksum(frame[4:descriptor_end]) == frame[descriptor_end]


@large_inputs
def test_lz4_blocks_are_independent_and_at_most_64_kib(data: bytes) -> None:
    blocks = _lz4_blocks(compress(CompressionType.LZ4, data))
    decoded = [
        block if is_stored else lz4.block.decompress(block, uncompressed_size=64 * 1024)
        for is_stored, block in blocks
    ]
    assert b"".join(decoded) == data
    assert all(len(part) == 64 * 1024 for part in decoded[:-1])
    assert 0 < len(decoded[-1]) <= 64 * 1024


@pytest.mark.parametrize(
    ("codec", "library"),
    [
        (CompressionType.GZIP, "z"),
        (CompressionType.SNAPPY, "snappy"),
        (CompressionType.LZ4, "lz4"),
        (CompressionType.ZSTD, "zstd"),
    ],
)
@pytest.mark.parametrize(
    "data", [b"", b"k" * 1000, *LARGE_INPUTS.values()], ids=["empty", "1000", *LARGE_INPUTS]
)
def test_gzip_snappy_lz4_and_zstd_are_compressed_by_the_system_libraries_where_present(
    codec: CompressionType, library: str, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the system has libz, libsnappy, liblz4 and libzstd, ``compress`` and ``decompress`` use them
    (the C functions the cleaner's C loops call too), in the same framing as cramjam's path; without them,
    cramjam serves. Either reads back, by us with and without them, kafka-python and (gzip) the standard
    library."""
    codecs = compression_module._codecs
    assert codecs is not None, "the C module is built"
    packed = codecs.compress(codec, data)
    assert (packed is not None) == (ctypes.util.find_library(library) is not None)
    assert (codec in codecs.served()) == (packed is not None)
    assert packed is None or codecs.decompress(codec, packed) == data
    assert compress(codec, data) == (packed if packed is not None else compress(codec, data))
    by_cramjam = {
        CompressionType.GZIP: lambda: bytes(cramjam.gzip.compress(data, level=6)),
        CompressionType.SNAPPY: lambda: _compress_xerial(memoryview(data)),
        CompressionType.LZ4: lambda: _compress_lz4_frame(memoryview(data)),
        CompressionType.ZSTD: lambda: bytes(cramjam.zstd.compress(data, level=3)),
    }[codec]()
    assert decompress(codec, compress(codec, data)) == data == decompress(codec, by_cramjam)
    if data or codec is not CompressionType.SNAPPY:  # kafka-python takes a bare xerial header for raw snappy
        assert KAFKA_PYTHON_DECODERS[codec](compress(codec, data)) == data
    if codec is CompressionType.SNAPPY:
        if data:  # one bare raw block, as kafka-python writes without xerial framing
            raw = kafka.codec.snappy_encode(data, xerial_compatible=False)
            assert codecs.decompress(codec, raw) == (None if packed is None else data)
        assert [len(snappy.decompress(chunk)) for chunk in _xerial_chunks(compress(codec, data))] == [
            len(data[start : start + 32 * 1024]) for start in range(0, len(data), 32 * 1024)
        ], "a raw block per 32 KiB of input"
    if codec is CompressionType.GZIP:
        assert gzip.decompress(compress(codec, data)) == data
    if codec is CompressionType.LZ4:
        assert [stored for stored, _ in _lz4_blocks(compress(codec, data))] == [
            stored for stored, _ in _lz4_blocks(by_cramjam)
        ], "the same blocks, stored where they do not shrink"
    blob = compress(codec, data)
    monkeypatch.setattr(compression_module, "_codecs", None)
    assert decompress(codec, blob) == data, "cramjam reads what the system's library wrote"


def test_other_codecs_and_input_they_do_not_take_are_left_to_cramjam() -> None:
    codecs = compression_module._codecs
    assert codecs is not None
    assert [codecs.compress(codec, b"x") for codec in (0, 5, 99)] == [None] * 3
    # b"x" is no codec's blob; as a raw snappy block it would claim 120 bytes from one
    assert [codecs.decompress(codec, b"x") for codec in (0, 1, 2, 3, 4, 5, 99)] == [None] * 7


@pytest.mark.parametrize(
    "blob",
    [
        XERIAL_HEADER[:12],  # the header cut short
        XERIAL_HEADER + b"\x00\x00",  # a chunk length cut short
        XERIAL_HEADER + struct.pack(">i", 0),  # an empty chunk
        XERIAL_HEADER + struct.pack(">i", 9) + b"\x05abc",  # a chunk longer than what is left
        XERIAL_HEADER + struct.pack(">i", 3) + b"\x05ab",  # a block cut short
        b"\xff\xff\xff\xff\x0f" + b"\x00" * 20,  # a raw block claiming 4 GiB
    ],
    ids=["short header", "short length", "empty chunk", "long chunk", "short block", "4 GiB claimed"],
)
def test_snappy_the_system_library_cannot_read_is_named_by_the_python_codec(blob: bytes) -> None:
    """``_codecs`` leaves a damaged snappy blob to the Python codec (None), reserving nothing for what a
    block claims beyond snappy's greatest ratio; ``decompress`` then names what is wrong."""
    codecs = compression_module._codecs
    assert codecs is not None
    started = _peak_virtual_kib()
    assert codecs.decompress(CompressionType.SNAPPY, blob) is None
    assert _peak_virtual_kib() - started < 1 << 20, "no GiB reserved"
    with pytest.raises(CorruptDataError, match=r"^snappy: "):
        decompress(CompressionType.SNAPPY, blob)


def _peak_virtual_kib() -> int:
    """This process's peak virtual size (``VmPeak``): a reserved but untouched buffer counts there."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmPeak:"):
            return int(line.split()[1])
    raise AssertionError("no VmPeak in /proc/self/status")


def test_a_gzip_trailer_claiming_gigabytes_is_corrupt_data_not_an_allocation() -> None:
    """The size in a gzip member's trailer sizes the first output buffer only within deflate's greatest
    ratio: a damaged one claiming 4 GiB is read as the corrupt member it is."""
    blob = bytearray(compress(CompressionType.GZIP, b"k" * 1000))
    blob[-4:] = b"\xff\xff\xff\xff"
    codecs = compression_module._codecs
    assert codecs is not None
    started = _peak_virtual_kib()
    assert codecs.decompress(CompressionType.GZIP, bytes(blob)) is None, "left to cramjam, which names it"
    assert _peak_virtual_kib() - started < 1 << 20, "no GiB reserved (or refused, under a memory limit)"
    with pytest.raises(CorruptDataError, match="gzip"):
        decompress(CompressionType.GZIP, bytes(blob))


def test_lz4_stores_incompressible_blocks_uncompressed() -> None:
    data = LARGE_INPUTS["random-150KiB"]
    blocks = _lz4_blocks(compress(CompressionType.LZ4, data))
    assert [is_stored for is_stored, _ in blocks] == [True, True, True]
    assert b"".join(block for _, block in blocks) == data


def test_lz4_compresses_compressible_blocks() -> None:
    data = LARGE_INPUTS["text"]
    frame = compress(CompressionType.LZ4, data)
    assert not any(is_stored for is_stored, _ in _lz4_blocks(frame))
    assert len(frame) < len(data) // 2


@pytest.mark.parametrize("block_linked", [False, True])
@pytest.mark.parametrize("content_checksum", [False, True])
@pytest.mark.parametrize("block_checksum", [False, True])
@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB])
@pytest.mark.parametrize("compression_level", [0, 9])
def test_lz4_reads_any_valid_frame(
    block_linked: bool, content_checksum: bool, block_checksum: bool, block_size: int, compression_level: int
) -> None:
    data = LARGE_INPUTS["mixed"]
    compressor = lz4.frame.LZ4FrameCompressor(
        block_size=block_size,
        block_linked=block_linked,
        compression_level=compression_level,
        content_checksum=content_checksum,
        block_checksum=block_checksum,
    )
    frame = compressor.begin(source_size=len(data)) + compressor.compress(data) + compressor.flush()
    assert decompress(CompressionType.LZ4, frame) == data


# --- gzip and zstd variants -------------------------------------------------------------------------------


def test_gzip_is_standard_and_reads_multiple_members() -> None:
    data = LARGE_INPUTS["mixed"]
    assert gzip.decompress(compress(CompressionType.GZIP, data)) == data
    members = gzip.compress(data[:1000], compresslevel=1) + gzip.compress(data[1000:], compresslevel=9)
    assert decompress(CompressionType.GZIP, members) == data


def test_zstd_is_standard_and_reads_streamed_and_multiple_frames() -> None:
    data = LARGE_INPUTS["mixed"]
    frame = compress(CompressionType.ZSTD, data)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN, "as Kafka's"
    assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == data
    streamer = zstandard.ZstdCompressor(level=3, write_content_size=False, write_checksum=True).compressobj()
    streamed = streamer.compress(data[:1000]) + streamer.compress(data[1000:]) + streamer.flush()
    assert decompress(CompressionType.ZSTD, streamed) == data
    frames = zstandard.ZstdCompressor(level=1).compress(data[:7]) + zstandard.ZstdCompressor().compress(
        data[7:]
    )
    assert decompress(CompressionType.ZSTD, frames) == data


# --- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@settings(max_examples=300, deadline=None)
@given(data=garbage)
def test_arbitrary_bytes_raise_only_corrupt_data_error(codec: CompressionType, data: bytes) -> None:
    try:
        result = decompress(codec, data)
    except CorruptDataError as error:
        assert codec.label in str(error)
    else:
        assert isinstance(result, bytes)


@settings(max_examples=300, deadline=None)
@given(data=garbage)
def test_arbitrary_bytes_pass_through_none(data: bytes) -> None:
    assert decompress(CompressionType.NONE, data) == data


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_empty_input_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptDataError, match=rf"^{codec.label}: "):
        decompress(codec, b"")


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_truncated_input_is_corrupt(codec: CompressionType) -> None:
    data = LARGE_INPUTS["mixed"]
    compressed = compress(codec, data)
    cuts = {1, 2, 4, 7, 15, 16, 17, 20, len(compressed) // 2, len(compressed) - 4, len(compressed) - 1}
    for cut in sorted(cuts):
        try:
            result = decompress(codec, compressed[:cut])
        except CorruptDataError as error:
            assert error.__cause__ is not None or codec is CompressionType.SNAPPY
        else:
            # xerial has no end mark: a stream cut at a chunk boundary is a shorter valid stream
            assert codec is CompressionType.SNAPPY
            assert len(result) % (32 * 1024) == 0
            assert data.startswith(result)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@settings(max_examples=100, deadline=None)
@given(position=st.integers(min_value=0), flip=st.integers(min_value=1, max_value=255))
def test_flipped_bytes_decode_or_raise_corrupt_data_error(
    codec: CompressionType, position: int, flip: int
) -> None:
    compressed = bytearray(compress(codec, LARGE_INPUTS["mixed"][:5000]))
    compressed[position % len(compressed)] ^= flip
    with contextlib.suppress(CorruptDataError):
        decompress(codec, bytes(compressed))


@pytest.mark.parametrize(
    ("stream", "problem"),
    [
        (XERIAL_HEADER[:12], "xerial header at position 0 is truncated"),
        (XERIAL_HEADER + b"\x00\x00", "chunk length at position 16 is truncated"),
        (XERIAL_HEADER + struct.pack(">i", -5) + b"abcde", "declares -5 bytes"),
        (XERIAL_HEADER + struct.pack(">i", 0), "declares 0 bytes"),
        (XERIAL_HEADER + struct.pack(">i", 10) + b"abc", "declares 10 bytes; allowed 1..3"),
        (
            XERIAL_HEADER + struct.pack(">i", 3) + b"\xff\xff\xff",
            "cannot decompress the 3-byte block at position 20",
        ),
    ],
)
def test_bad_xerial_framing_is_named(stream: bytes, problem: str) -> None:
    with pytest.raises(CorruptDataError, match=r"^snappy: ") as caught:
        decompress(CompressionType.SNAPPY, stream)
    assert problem in str(caught.value)
