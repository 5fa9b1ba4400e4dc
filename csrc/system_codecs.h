/*
 * The system's codec libraries as service/storage/_codecs.c offers them to other C code (cleaner._native)
 * through a capsule: one implementation of each codec's framing, so that every caller writes the same bytes.
 */
#ifndef LOGCLEANER_SYSTEM_CODECS_H
#define LOGCLEANER_SYSTEM_CODECS_H

#include <stddef.h>

#define SYSTEM_CODECS_CAPSULE "service.storage._codecs.system_codecs"

/* A codec function's output, grown (realloc) as needed; the caller frees data. */
typedef struct {
    unsigned char *data;
    size_t length, capacity;
} CodecBuffer;

/* Each returns 0 (the result in out), -1 (no memory) or -2 (no library for the codec, or input it does not
 * take: the caller goes to the Python codec, which reads it or names the error). No GIL needed. */
typedef int (*codec_fn)(unsigned codec, const unsigned char *src, size_t n, CodecBuffer *out);

typedef struct {
    codec_fn compress;   /* compression.compress's bytes exactly: gzip 6, xerial snappy, Kafka's lz4, zstd 3 */
    codec_fn decompress; /* gzip members, xerial or bare snappy, Kafka-framed lz4, zstd frames */
    unsigned served;     /* bit (1 << codec id) for each codec the system has a library for */
} SystemCodecs;

#endif
