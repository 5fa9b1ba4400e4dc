/*
 * Kafka's zig-zag varints (ByteUtils.readVarlong, ByteUtils.writeVarlong) over a bounded buffer: the one copy
 * the C extensions share (service.storage._speedups, cleaner._native). A read returns 0 (the value in *out,
 * *pos past it) or -1 (truncated, longer than 10 bytes, or out of the int64 range).
 */
#ifndef LOGCLEANER_VARINT_H
#define LOGCLEANER_VARINT_H

#include <Python.h>
#include <stdint.h>

/* `shortest` (a constant at each call, so each reader compiles to its own loop): only the shortest form. */
static inline int
varint_read(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out, int shortest)
{
    uint64_t result = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < 10; i++) {
        if (p >= end) {
            return -1;
        }
        unsigned char b = buf[p++];
        if (i == 9 && (b & 0x7F) > 1) {
            return -1;
        }
        result |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (shortest && i > 0 && b == 0) { /* a zero last group: not the shortest form */
                return -1;
            }
            *pos = p;
            *out = (int64_t)((result >> 1) ^ (0 - (result & 1)));
            return 0;
        }
    }
    return -1;
}

/* Any form ByteUtils.readVarlong reads: the records decoder, which mirrors the Python decoder. */
static inline int
read_varint_any(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    return varint_read(buf, end, pos, out, 0);
}

/* Only the shortest form (what the Python encoder writes): the cleaner copies record fields byte for byte,
 * so a record in another form is the Python rules'. */
static inline int
read_long_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    return varint_read(buf, end, pos, out, 1);
}

/* read_long_varint, with the one- and two-byte cases (most lengths and deltas) inline. */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) {
        uint64_t b = buf[p];
        *pos = p + 1;
        *out = (int64_t)((b >> 1) ^ (0 - (b & 1)));
        return 0;
    }
    if (p + 1 < end && buf[p + 1] < 0x80 && buf[p + 1] != 0) { /* two bytes, the second not a zero group */
        uint64_t b = (uint64_t)(buf[p] & 0x7F) | (uint64_t)buf[p + 1] << 7;
        *pos = p + 2;
        *out = (int64_t)((b >> 1) ^ (0 - (b & 1)));
        return 0;
    }
    return read_long_varint(buf, end, pos, out);
}

/* The shortest form of `value`, at most 10 bytes: how many were written. */
static inline Py_ssize_t
write_varint(unsigned char *out, int64_t value)
{
    uint64_t zz = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 0;
    while (zz >= 0x80) {
        out[n++] = (unsigned char)((zz & 0x7F) | 0x80);
        zz >>= 7;
    }
    out[n++] = (unsigned char)zz;
    return n;
}

#endif
