"""Our batch blobs against Kafka's own compressors (the release's ``Compression``, 3.8 on): gzip, snappy and
lz4 come out byte for byte as Kafka writes them; zstd in Kafka's framing (no content size, the data's
blocks not marked last, an empty last block), its blocks as this machine's libzstd compresses them (zstd-jni
bundles its own release, which can pick other matches)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from service.storage.compression import CompressionType, compress, decompress
from service.storage.records import Record, encode_records
from tests.kafka.distribution import KafkaDistribution

pytestmark = pytest.mark.kafka

KAFKA_COMPRESS = """
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.kafka.common.compress.Compression;

/** Each file named after the codec, compressed as a v2 batch's records by Kafka, into name + "." + codec. */
public class KafkaCompress {
    public static void main(String[] args) throws Exception {
        Class<?> stream = load("org.apache.kafka.common.utils.ByteBufferOutputStream",
                               "org.apache.kafka.common.utils.internals.ByteBufferOutputStream");
        Object builder = Compression.class.getMethod(args[0]).invoke(null);
        Compression compression = (Compression) builder.getClass().getMethod("build").invoke(builder);
        Method wrap = Compression.class.getMethod("wrapForOutput", stream, byte.class);
        for (int i = 1; i < args.length; i++) {
            Object out = stream.getConstructor(int.class).newInstance(1024);
            try (OutputStream compressing = (OutputStream) wrap.invoke(compression, out, (byte) 2)) {
                compressing.write(Files.readAllBytes(Paths.get(args[i])));
            }
            ByteBuffer buffer = (ByteBuffer) stream.getMethod("buffer").invoke(out);
            buffer.flip();
            byte[] bytes = new byte[buffer.remaining()];
            buffer.get(bytes);
            Files.write(Paths.get(args[i] + "." + args[0]), bytes);
        }
    }

    private static Class<?> load(String... names) throws ClassNotFoundException {
        for (String name : names) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // moved between releases: try the next name
            }
        }
        throw new ClassNotFoundException(String.join(" or ", names));
    }
}
"""

ZSTD_FRAME_START = bytes.fromhex("28b52ffd00")  # magic, then a descriptor with no content size, no checksum
ZSTD_EMPTY_LAST_BLOCK = bytes.fromhex("010000")


def _inputs() -> dict[str, bytes]:
    rng = random.Random(20261128)
    words = [rng.randbytes(rng.randint(2, 8)).hex().encode() for _ in range(500)]
    records = [
        Record(i, 1_700_000_000_000 + i, f"key-{i % 97}".encode(), rng.choice(words) * rng.randint(1, 30))
        for i in range(2000)
    ]
    return {
        "one-byte": b"k",
        "records": encode_records(records[:40], 0, 0),
        "records-several-blocks": encode_records(records, 0, 0),
        "random": rng.randbytes(70_000),
        "text": b" ".join(rng.choice(words) for _ in range(40_000)),
        "runs": bytes(100_000) + b"x" * 3000,
    }


@pytest.mark.parametrize("codec", [codec for codec in CompressionType if codec is not CompressionType.NONE])
def test_our_blobs_are_kafka_s(
    kafka_distribution: KafkaDistribution, tmp_path: Path, codec: CompressionType
) -> None:
    inputs = _inputs()
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "KafkaCompress.java").write_text(KAFKA_COMPRESS)
    subprocess.run(
        ["java", "-cp", kafka_distribution.classpath, "KafkaCompress.java", codec.label, *inputs],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    for name, data in inputs.items():
        kafka_s = (tmp_path / f"{name}.{codec.label}").read_bytes()
        ours = compress(codec, data)
        assert decompress(codec, kafka_s) == data, name
        if codec is CompressionType.ZSTD:
            assert ours[:5] == kafka_s[:5] == ZSTD_FRAME_START, name
            assert ours[5] == kafka_s[5], f"{name}: the same window"
            assert ours[-3:] == kafka_s[-3:] == ZSTD_EMPTY_LAST_BLOCK, name
        else:
            assert ours == kafka_s, name
