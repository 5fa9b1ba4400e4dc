"""``system_libraries``: the system's snappy, lz4 and zstd through ctypes, as ``_codecs.c`` calls them. Each
compresses into what an independent decoder (cramjam's) reads back; lz4 gives None where a block would not
shrink; each zstd frame is whole (several in a row on one thread's context). (.ci/run installs the
libraries: Debian's libsnappy1v5, and the lz4 and zstd libraries every Debian has.) That both paths write the
same batch bytes is ``test_codec_paths.py``'s."""

from __future__ import annotations

import os

import cramjam

from service.storage.system_libraries import lz4_library, snappy_library, zstd_library

TEXT = b"the same line of a log, again and again; " * 400
NOISE = os.urandom(4096)


def test_snappy_writes_raw_blocks_that_decode() -> None:
    snappy = snappy_library()
    assert snappy is not None, "libsnappy.so.1 did not load: apt-get install libsnappy1v5"

    for data in (TEXT, NOISE, b""):
        block = snappy.compress_block(data)
        assert block is not None
        assert bytes(cramjam.snappy.decompress_raw(block)) == data
    assert len(snappy.compress_block(TEXT) or TEXT) < len(TEXT) // 10


def test_lz4_writes_blocks_that_decode_or_none_where_nothing_shrinks() -> None:
    lz4 = lz4_library()
    assert lz4 is not None, "liblz4.so.1 did not load"

    block = lz4.compress_block(TEXT)
    assert block is not None and len(block) < len(TEXT)
    assert bytes(cramjam.lz4.decompress_block(block, output_len=len(TEXT))) == TEXT
    assert lz4.compress_block(NOISE) is None  # random bytes do not shrink


def test_zstd_writes_whole_frames_at_the_level_asked() -> None:
    zstd = zstd_library()
    assert zstd is not None, "libzstd.so.1 did not load"

    frames = [zstd.compress(data, level) for data, level in ((TEXT, 3), (NOISE, 1), (TEXT, 19), (b"", 3))]

    assert all(frame is not None for frame in frames)
    assert [bytes(cramjam.zstd.decompress(frame or b"")) for frame in frames] == [TEXT, NOISE, TEXT, b""]
    assert len(frames[2] or b"") <= len(frames[0] or b"")  # a higher level is no larger here


def test_each_library_is_loaded_once() -> None:
    assert snappy_library() is snappy_library()
    assert lz4_library() is lz4_library()
    assert zstd_library() is zstd_library()
