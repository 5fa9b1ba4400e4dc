/*
 * The system's codec libraries, where present (libz.so.1, liblz4.so.1, libzstd.so.1: every Debian or Ubuntu
 * system with apt has them; libsnappy.so.1: Debian's libsnappy1v5), loaded at import with dlopen: no
 * headers or libraries are needed to build.
 *
 * compress(codec, data) writes what service.storage.compression.compress promises (one gzip member at level
 * 6 with Java's header; snappy in snappy-java's xerial framing, a raw block per 32 KiB of input; lz4 in
 * Kafka's framing, each 64 KiB of input an independent block, stored when it does not shrink; one zstd
 * frame at level 3, framed as Kafka's), with a deflater and a zstd context kept per thread; decompress(codec, data) reads
 * gzip members, xerial-framed snappy (concatenated streams too) or one bare raw snappy block, Kafka-framed
 * lz4 and zstd frames. Both return None for a codec without a library or input they do not take:
 * compression.py then uses cramjam, which reads the input or names the error (and, without this module,
 * calls the same libraries through ctypes: system_libraries.py). The GIL is released while they run. The
 * same functions serve the cleaner's C loops through the capsule `system_codecs` (system_codecs.h), so that
 * C and Python write the same bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "system_codecs.h"

enum { CODEC_GZIP = 1, CODEC_SNAPPY = 2, CODEC_LZ4 = 3, CODEC_ZSTD = 4 }; /* compression.py's codec ids */
enum { GZIP_LEVEL = 6, ZSTD_LEVEL = 3 };                 /* zlib's default (Kafka's -1); Kafka's zstd default */

/* -- the libraries' functions ---------------------------------------------------------------------------- */

/* zlib's z_stream, by its ABI */
typedef struct {
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state, *zalloc, *zfree, *opaque;
    int data_type;
    unsigned long adler, reserved;
} ZStream;
enum { Z_OK = 0, Z_STREAM_END = 1, Z_NO_FLUSH = 0, Z_FINISH = 4, Z_BUF_ERROR = -5, Z_DEFLATED = 8 };
enum { GZIP_WINDOW_BITS = 31, Z_MEM_LEVEL = 8 }; /* a gzip wrapper around a 32 KiB window; zlib's default */
/* The header's OS byte (RFC 1952): "unknown", as Java's GZIPOutputStream (JDK 16 on) writes it for Kafka, and
 * compression.py's _GZIP_OS_UNKNOWN; zlib writes its build's OS (3 on Unix) there. */
enum { GZIP_OS_OFFSET = 9, GZIP_OS_UNKNOWN = 0xFF };
#define DEFLATE_MAX_RATIO 1032 /* deflate's greatest compression ratio */

typedef struct {
    const void *src;
    size_t size, pos;
} ZstdIn;
typedef struct {
    void *dst;
    size_t size, pos;
} ZstdOut;
#define ZSTD_RESET_SESSION_ONLY 1
enum { ZSTD_C_COMPRESSION_LEVEL = 100, ZSTD_E_CONTINUE = 0, ZSTD_E_FLUSH = 1, ZSTD_E_END = 2 }; /* zstd.h */

static int (*z_deflate_init2)(ZStream *, int, int, int, int, int, const char *, int);
static int (*z_deflate)(ZStream *, int);
static int (*z_deflate_reset)(ZStream *);
static int (*z_deflate_end)(ZStream *);
static unsigned long (*z_deflate_bound)(ZStream *, unsigned long);
static int (*z_inflate_init2)(ZStream *, int, const char *, int);
static int (*z_inflate)(ZStream *, int);
static int (*z_inflate_reset)(ZStream *);
static int (*z_inflate_end)(ZStream *);
static const char *(*z_version)(void);
static int (*snappy_compress_fn)(const char *, size_t, char *, size_t *); /* snappy-c.h; 0: SNAPPY_OK */
static int (*snappy_uncompress_fn)(const char *, size_t, char *, size_t *);
static size_t (*snappy_max_compressed_length_fn)(size_t);
static int (*snappy_uncompressed_length_fn)(const char *, size_t, size_t *);
static int (*lz4_compress_default)(const char *, char *, int, int);
static int (*lz4_compress_bound)(int);
static int (*lz4_decompress_safe)(const char *, char *, int, int);
static void *(*zstd_create_cctx)(void);
static size_t (*zstd_free_cctx)(void *);
static size_t (*zstd_cctx_reset)(void *, int);
static size_t (*zstd_cctx_set_parameter)(void *, int, int);
static size_t (*zstd_compress_stream2)(void *, ZstdOut *, ZstdIn *, int);
static size_t (*zstd_compress_bound)(size_t);
static void *(*zstd_create_dctx)(void);
static size_t (*zstd_free_dctx)(void *);
static size_t (*zstd_dctx_reset)(void *, int);
static size_t (*zstd_decompress_stream)(void *, ZstdOut *, ZstdIn *);
static unsigned (*zstd_is_error)(size_t);

/* each thread's contexts, freed with the thread */
static pthread_key_t deflater_key, inflater_key, zstd_cctx_key, zstd_dctx_key;

static void
free_deflater(void *z)
{
    z_deflate_end(z);
    free(z);
}

static void
free_inflater(void *z)
{
    z_inflate_end(z);
    free(z);
}

static void
free_zstd_cctx(void *cctx)
{
    zstd_free_cctx(cctx);
}

static void
free_zstd_dctx(void *dctx)
{
    zstd_free_dctx(dctx);
}

#define LOAD(handle, fn, name) (*(void **)&(fn) = dlsym(handle, name))

/* The codecs whose every function loaded, as SystemCodecs.served bits. */
static unsigned
load_system_codecs(void)
{
    unsigned served = 0;
    void *zlib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (zlib != NULL && LOAD(zlib, z_deflate_init2, "deflateInit2_") && LOAD(zlib, z_deflate, "deflate") &&
        LOAD(zlib, z_deflate_reset, "deflateReset") && LOAD(zlib, z_deflate_end, "deflateEnd") &&
        LOAD(zlib, z_deflate_bound, "deflateBound") && LOAD(zlib, z_inflate_init2, "inflateInit2_") &&
        LOAD(zlib, z_inflate, "inflate") && LOAD(zlib, z_inflate_reset, "inflateReset") &&
        LOAD(zlib, z_inflate_end, "inflateEnd") && LOAD(zlib, z_version, "zlibVersion") &&
        pthread_key_create(&deflater_key, free_deflater) == 0 &&
        pthread_key_create(&inflater_key, free_inflater) == 0) {
        served |= 1u << CODEC_GZIP;
    }
    void *snappy = dlopen("libsnappy.so.1", RTLD_NOW | RTLD_LOCAL);
    if (snappy != NULL && LOAD(snappy, snappy_compress_fn, "snappy_compress") &&
        LOAD(snappy, snappy_uncompress_fn, "snappy_uncompress") &&
        LOAD(snappy, snappy_max_compressed_length_fn, "snappy_max_compressed_length") &&
        LOAD(snappy, snappy_uncompressed_length_fn, "snappy_uncompressed_length")) {
        served |= 1u << CODEC_SNAPPY;
    }
    void *lz4 = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lz4 != NULL && LOAD(lz4, lz4_compress_default, "LZ4_compress_default") &&
        LOAD(lz4, lz4_compress_bound, "LZ4_compressBound") &&
        LOAD(lz4, lz4_decompress_safe, "LZ4_decompress_safe")) {
        served |= 1u << CODEC_LZ4;
    }
    void *zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (zstd != NULL && LOAD(zstd, zstd_create_cctx, "ZSTD_createCCtx") &&
        LOAD(zstd, zstd_free_cctx, "ZSTD_freeCCtx") && LOAD(zstd, zstd_cctx_reset, "ZSTD_CCtx_reset") &&
        LOAD(zstd, zstd_cctx_set_parameter, "ZSTD_CCtx_setParameter") &&
        LOAD(zstd, zstd_compress_stream2, "ZSTD_compressStream2") &&
        LOAD(zstd, zstd_compress_bound, "ZSTD_compressBound") && LOAD(zstd, zstd_create_dctx, "ZSTD_createDCtx") &&
        LOAD(zstd, zstd_free_dctx, "ZSTD_freeDCtx") && LOAD(zstd, zstd_dctx_reset, "ZSTD_DCtx_reset") &&
        LOAD(zstd, zstd_decompress_stream, "ZSTD_decompressStream") && LOAD(zstd, zstd_is_error, "ZSTD_isError") &&
        pthread_key_create(&zstd_cctx_key, free_zstd_cctx) == 0 &&
        pthread_key_create(&zstd_dctx_key, free_zstd_dctx) == 0) {
        served |= 1u << CODEC_ZSTD;
    }
    return served;
}

/* The thread's context under `key`, made by `make` at its first use; NULL if that failed. */
static void *
thread_context(pthread_key_t key, void *(*make)(void), void (*drop)(void *))
{
    void *context = pthread_getspecific(key);
    if (context == NULL && (context = make()) != NULL && pthread_setspecific(key, context) != 0) {
        drop(context);
        context = NULL;
    }
    return context;
}

static void *
new_deflater(void)
{
    ZStream *z = calloc(1, sizeof *z);
    if (z != NULL && z_deflate_init2(z, GZIP_LEVEL, Z_DEFLATED, GZIP_WINDOW_BITS, Z_MEM_LEVEL, 0, z_version(),
                                     (int)sizeof *z) != Z_OK) {
        free(z);
        z = NULL;
    }
    return z;
}

static void *
new_inflater(void)
{
    ZStream *z = calloc(1, sizeof *z);
    if (z != NULL && z_inflate_init2(z, GZIP_WINDOW_BITS, z_version(), (int)sizeof *z) != Z_OK) {
        free(z);
        z = NULL;
    }
    return z;
}

static int
reserve(CodecBuffer *out, size_t need)
{
    if (need <= out->capacity) {
        return 0;
    }
    size_t capacity = out->capacity * 2 > need ? out->capacity * 2 : need;
    unsigned char *grown = realloc(out->data, capacity);
    if (grown == NULL) {
        return -1;
    }
    out->data = grown;
    out->capacity = capacity;
    return 0;
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* -- gzip ------------------------------------------------------------------------------------------------ */

static int
gzip_compress(const unsigned char *src, size_t n, CodecBuffer *out)
{
    ZStream *z = pthread_getspecific(deflater_key);
    if (z == NULL) {
        z = thread_context(deflater_key, new_deflater, free_deflater);
    }
    else if (z_deflate_reset(z) != Z_OK) {
        return -2;
    }
    if (z == NULL) {
        return -1;
    }
    size_t bound = z_deflate_bound(z, (unsigned long)n);
    if (n > 0xFFFFFFFFu || bound > 0xFFFFFFFFu) {
        return -2;
    }
    if (reserve(out, bound) < 0) {
        return -1;
    }
    z->next_in = src;
    z->avail_in = (unsigned)n;
    z->next_out = out->data;
    z->avail_out = (unsigned)bound;
    if (z_deflate(z, Z_FINISH) != Z_STREAM_END) {
        return -2;
    }
    out->length = (size_t)(z->next_out - out->data);
    out->data[GZIP_OS_OFFSET] = GZIP_OS_UNKNOWN; /* no header CRC is written: nothing else to mend */
    return 0;
}

/* One or more members (compression.py reads several); -2 for a damaged or cut stream, or bytes after the
 * last member. */
static int
gzip_decompress(const unsigned char *p, size_t n, CodecBuffer *out)
{
    if (n == 0 || n > 0xFFFFFFFFu) {
        return -2; /* empty: corrupt, as Python says */
    }
    ZStream *z = thread_context(inflater_key, new_inflater, free_inflater);
    /* room for what the last member's trailer says it holds, to start with, where deflate could have
     * written that (at most 1032:1): a damaged trailer reserves no gigabytes */
    size_t last_member_size = n >= 4 ? le32(p + n - 4) : 0;
    int plausible = last_member_size > 2 * n && last_member_size / DEFLATE_MAX_RATIO <= n;
    size_t start = plausible ? last_member_size : 2 * n;
    if (z == NULL || reserve(out, start + 64) < 0) {
        return -1;
    }
    size_t length = 0, pos = 0;
    while (pos < n) {
        if (z_inflate_reset(z) != Z_OK) {
            return -2;
        }
        z->next_in = p + pos;
        z->avail_in = (unsigned)(n - pos);
        int rc;
        do {
            if (length == out->capacity && reserve(out, out->capacity * 2) < 0) {
                return -1;
            }
            size_t room = out->capacity - length;
            z->next_out = out->data + length;
            z->avail_out = (unsigned)(room < 0xFFFFFFFFu ? room : 0xFFFFFFFFu);
            rc = z_inflate(z, Z_NO_FLUSH);
            length = (size_t)(z->next_out - out->data);
        } while (rc == Z_OK || (rc == Z_BUF_ERROR && z->avail_out == 0));
        if (rc != Z_STREAM_END) {
            return -2; /* damaged, or cut short (no progress left with room to write) */
        }
        pos = n - z->avail_in;
    }
    out->length = length;
    return 0;
}

/* -- snappy, in snappy-java's xerial framing ----------------------------------------------------------- */

static const unsigned char XERIAL_HEADER[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, /* magic */
                                                0, 0, 0, 1, 0, 0, 0, 1}; /* version 1, min version 1 (BE) */
#define XERIAL_MAGIC_BYTES 8 /* the version fields after it go unchecked on read (kafka-python issue 2414) */
#define XERIAL_CHUNK_BYTES 32768
#define SNAPPY_MAX_RATIO 32 /* no raw block inflates more: a 3-byte copy writes at most 64 bytes */

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (24 - 8 * i));
    }
}

static int
snappy_compress(const unsigned char *src, size_t n, CodecBuffer *out)
{
    size_t chunks = (n + XERIAL_CHUNK_BYTES - 1) / XERIAL_CHUNK_BYTES;
    size_t bound = snappy_max_compressed_length_fn(XERIAL_CHUNK_BYTES);
    if (reserve(out, sizeof XERIAL_HEADER + chunks * (4 + bound)) < 0) {
        return -1;
    }
    unsigned char *o = out->data;
    memcpy(o, XERIAL_HEADER, sizeof XERIAL_HEADER);
    size_t at = sizeof XERIAL_HEADER;
    for (size_t start = 0; start < n; start += XERIAL_CHUNK_BYTES) {
        size_t chunk = n - start < XERIAL_CHUNK_BYTES ? n - start : XERIAL_CHUNK_BYTES, packed = bound;
        if (snappy_compress_fn((const char *)src + start, chunk, (char *)o + at + 4, &packed) != 0) {
            return -2;
        }
        put_be32(o + at, (uint32_t)packed);
        at += 4 + packed;
    }
    out->length = at;
    return 0;
}

/* One raw block appended to out; -2 if it is not one. */
static int
snappy_block(const unsigned char *p, size_t n, CodecBuffer *out)
{
    size_t length;
    if (snappy_uncompressed_length_fn((const char *)p, n, &length) != 0 ||
        length > SNAPPY_MAX_RATIO * n + 64) {
        return -2;
    }
    if (reserve(out, out->length + length + 1) < 0) { /* + 1: data is set even for an empty block */
        return -1;
    }
    if (snappy_uncompress_fn((const char *)p, n, (char *)out->data + out->length, &length) != 0) {
        return -2;
    }
    out->length += length;
    return 0;
}

/* xerial chunks, a header (again) before any of them; or, without the magic first, one bare raw block. */
static int
snappy_decompress(const unsigned char *p, size_t n, CodecBuffer *out)
{
    out->length = 0;
    if (n < XERIAL_MAGIC_BYTES || memcmp(p, XERIAL_HEADER, XERIAL_MAGIC_BYTES) != 0) {
        return snappy_block(p, n, out);
    }
    size_t pos = 0;
    while (pos < n) {
        if (n - pos >= XERIAL_MAGIC_BYTES && memcmp(p + pos, XERIAL_HEADER, XERIAL_MAGIC_BYTES) == 0) {
            if (n - pos < sizeof XERIAL_HEADER) {
                return -2;
            }
            pos += sizeof XERIAL_HEADER;
            continue;
        }
        if (n - pos < 4) {
            return -2;
        }
        size_t length = be32(p + pos);
        pos += 4;
        if (length == 0 || length > n - pos) {
            return -2;
        }
        int rc = snappy_block(p + pos, length, out);
        if (rc != 0) {
            return rc;
        }
        pos += length;
    }
    return 0;
}

/* -- lz4, in Kafka's framing (compression.py: independent blocks of at most 64 KiB, no checksums) -------- */

static const unsigned char KAFKA_LZ4_HEADER[7] = {0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82};
#define LZ4_BLOCK_BYTES 65536
#define LZ4_STORED_FLAG 0x80000000u

static int
lz4_compress(const unsigned char *src, size_t n, CodecBuffer *out)
{
    size_t blocks = (n + LZ4_BLOCK_BYTES - 1) / LZ4_BLOCK_BYTES;
    size_t bound = (size_t)lz4_compress_bound(LZ4_BLOCK_BYTES);
    if (reserve(out, sizeof KAFKA_LZ4_HEADER + blocks * (4 + bound) + 4) < 0) {
        return -1;
    }
    unsigned char *o = out->data;
    memcpy(o, KAFKA_LZ4_HEADER, sizeof KAFKA_LZ4_HEADER);
    size_t at = sizeof KAFKA_LZ4_HEADER;
    for (size_t start = 0; start < n; start += LZ4_BLOCK_BYTES) {
        int chunk = (int)(n - start < LZ4_BLOCK_BYTES ? n - start : LZ4_BLOCK_BYTES);
        int packed = lz4_compress_default((const char *)src + start, (char *)o + at + 4, chunk, (int)bound);
        uint32_t word = (uint32_t)packed;
        if (packed <= 0 || packed >= chunk) { /* it does not shrink: stored */
            memcpy(o + at + 4, src + start, (size_t)chunk);
            packed = chunk;
            word = (uint32_t)chunk | LZ4_STORED_FLAG;
        }
        for (int i = 0; i < 4; i++) {
            o[at + i] = (unsigned char)(word >> (8 * i));
        }
        at += 4 + (size_t)packed;
    }
    memset(o + at, 0, 4);
    out->length = at + 4;
    return 0;
}

/* Block by block; -2 for any other framing (content size, checksums, linked blocks, several frames). */
static int
lz4_decompress(const unsigned char *p, size_t n, CodecBuffer *out)
{
    if (n < sizeof KAFKA_LZ4_HEADER || memcmp(p, KAFKA_LZ4_HEADER, sizeof KAFKA_LZ4_HEADER) != 0) {
        return -2;
    }
    size_t pos = sizeof KAFKA_LZ4_HEADER, length = 0;
    while (n - pos >= 4) {
        uint32_t size = le32(p + pos);
        pos += 4;
        if (size == 0) {
            out->length = length;
            return pos == n ? 0 : -2; /* concatenated frames: Python's */
        }
        size_t block = size & ~LZ4_STORED_FLAG;
        if (block > n - pos || block > LZ4_BLOCK_BYTES) {
            return -2;
        }
        if (reserve(out, length + LZ4_BLOCK_BYTES) < 0) {
            return -1;
        }
        if (size & LZ4_STORED_FLAG) {
            memcpy(out->data + length, p + pos, block);
            length += block;
        }
        else {
            int written = lz4_decompress_safe((const char *)p + pos, (char *)out->data + length, (int)block,
                                              LZ4_BLOCK_BYTES);
            if (written < 0) {
                return -2;
            }
            length += (size_t)written;
        }
        pos += block;
    }
    return -2;
}

/* -- zstd -------------------------------------------------------------------------------------------------- */

/* One frame as Kafka's ZstdCompression writes it through zstd-jni's ZstdOutputStream: the input streamed in
 * (no content size in the header, so the parameters for an unknown size), flushed (its blocks, none marked
 * last), then ended (an empty last block). compression.py's ctypes path makes the same three calls. */
static int
zstd_compress(const unsigned char *src, size_t n, CodecBuffer *out)
{
    void *cctx = thread_context(zstd_cctx_key, zstd_create_cctx, free_zstd_cctx);
    if (cctx == NULL || reserve(out, zstd_compress_bound(n) + 64) < 0) {
        return -1;
    }
    if (zstd_is_error(zstd_cctx_reset(cctx, ZSTD_RESET_SESSION_ONLY)) ||
        zstd_is_error(zstd_cctx_set_parameter(cctx, ZSTD_C_COMPRESSION_LEVEL, ZSTD_LEVEL))) {
        return -2;
    }
    ZstdIn in = {src, n, 0};
    ZstdOut o = {out->data, out->capacity, 0};
    static const int steps[] = {ZSTD_E_CONTINUE, ZSTD_E_FLUSH, ZSTD_E_END};
    for (size_t step = 0; step < sizeof steps / sizeof *steps; step++) {
        size_t left;
        do {
            if (o.pos == o.size) {
                if (reserve(out, out->capacity * 2) < 0) {
                    return -1;
                }
                o.dst = out->data;
                o.size = out->capacity;
            }
            left = zstd_compress_stream2(cctx, &o, &in, steps[step]);
            if (zstd_is_error(left)) {
                return -2;
            }
        } while (steps[step] == ZSTD_E_CONTINUE ? in.pos < in.size : left != 0);
    }
    out->length = o.pos;
    return 0;
}

/* One or more frames, streamed (Kafka's producers write no content size); -2 for a frame cut short. */
static int
zstd_decompress(const unsigned char *p, size_t n, CodecBuffer *out)
{
    void *dctx = thread_context(zstd_dctx_key, zstd_create_dctx, free_zstd_dctx);
    if (dctx == NULL) {
        return -1;
    }
    if (zstd_is_error(zstd_dctx_reset(dctx, ZSTD_RESET_SESSION_ONLY))) {
        return -2;
    }
    ZstdIn in = {p, n, 0};
    ZstdOut o = {NULL, 0, 0};
    size_t left = 1;
    while (in.pos < in.size || o.pos == o.size) {
        if (o.pos == o.size) {
            if (reserve(out, o.size < 4096 ? 4 * n + 4096 : o.size * 2) < 0) {
                return -1;
            }
            o.dst = out->data;
            o.size = out->capacity;
        }
        size_t before_in = in.pos, before_out = o.pos;
        left = zstd_decompress_stream(dctx, &o, &in);
        if (zstd_is_error(left)) {
            return -2;
        }
        if (in.pos == before_in && o.pos == before_out && o.pos < o.size) {
            break; /* no progress with room to write: the input is used up */
        }
    }
    out->length = o.pos;
    return left == 0 ? 0 : -2;
}

/* -- the two entry points, for C (the capsule) and Python ---------------------------------------------------- */

static SystemCodecs system_codecs = {NULL, NULL, 0};

static int
system_compress(unsigned codec, const unsigned char *src, size_t n, CodecBuffer *out)
{
    if (codec > CODEC_ZSTD || !(system_codecs.served >> codec & 1)) {
        return -2;
    }
    return codec == CODEC_GZIP ? gzip_compress(src, n, out)
           : codec == CODEC_SNAPPY ? snappy_compress(src, n, out)
           : codec == CODEC_LZ4 ? (n <= 0x7FFFFFFF ? lz4_compress(src, n, out) : -2)
           : codec == CODEC_ZSTD ? zstd_compress(src, n, out)
                                 : -2;
}

static int
system_decompress(unsigned codec, const unsigned char *src, size_t n, CodecBuffer *out)
{
    if (codec > CODEC_ZSTD || !(system_codecs.served >> codec & 1)) {
        return -2;
    }
    return codec == CODEC_GZIP ? gzip_decompress(src, n, out)
           : codec == CODEC_SNAPPY ? snappy_decompress(src, n, out)
           : codec == CODEC_LZ4 ? lz4_decompress(src, n, out)
           : codec == CODEC_ZSTD ? zstd_decompress(src, n, out)
                                 : -2;
}

/* fn(codec, data) -> bytes, or None (-2); the GIL released meanwhile. */
static PyObject *
call_codec(codec_fn fn, PyObject *args)
{
    unsigned int codec;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Iy*", &codec, &view)) {
        return NULL;
    }
    CodecBuffer out = {NULL, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(codec, view.buf, (size_t)view.len, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = rc == 0    ? PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.length)
                       : rc == -1 ? PyErr_NoMemory()
                                  : Py_NewRef(Py_None);
    free(out.data);
    return result;
}

static PyObject *
compress_py(PyObject *self, PyObject *args)
{
    return call_codec(system_compress, args);
}

static PyObject *
decompress_py(PyObject *self, PyObject *args)
{
    return call_codec(system_decompress, args);
}

static PyObject *
served_py(PyObject *self, PyObject *unused)
{
    PyObject *served = PyList_New(0);
    for (unsigned codec = 0; served != NULL && codec <= CODEC_ZSTD; codec++) {
        PyObject *id = system_codecs.served >> codec & 1 ? PyLong_FromUnsignedLong(codec) : NULL;
        if (system_codecs.served >> codec & 1 && (id == NULL || PyList_Append(served, id) < 0)) {
            Py_CLEAR(served);
        }
        Py_XDECREF(id);
    }
    PyObject *result = served == NULL ? NULL : PyList_AsTuple(served);
    Py_XDECREF(served);
    return result;
}

static PyMethodDef methods[] = {
    {"compress", compress_py, METH_VARARGS,
     "A gzip, snappy, lz4 or zstd blob by the system's library, or None."},
    {"decompress", decompress_py, METH_VARARGS, "What a gzip, snappy, lz4 or zstd blob holds, or None."},
    {"served", served_py, METH_NOARGS, "The codec ids the system's libraries serve."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codecs", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__codecs(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    system_codecs.served = load_system_codecs();
    system_codecs.compress = system_compress;
    system_codecs.decompress = system_decompress;
    PyObject *capsule = PyCapsule_New(&system_codecs, SYSTEM_CODECS_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObjectRef(m, "system_codecs", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(capsule);
    return m;
}
