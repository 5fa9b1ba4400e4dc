#ifndef LOGCLEANER_VARINT_H
#define LOGCLEANER_VARINT_H

/* -- varints ------------------------------------------------------------------------------------- */

/* A zig-zag varint in its shortest form (what the Python encoder writes); -1 otherwise. */
static inline int
read_long_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
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
            if (i > 0 && b == 0) { /* a zero last group: not the shortest form */
                return -1;
            }
            *pos = p;
            *out = (int64_t)((result >> 1) ^ (0 - (result & 1)));
            return 0;
        }
    }
    return -1;
}

/* read_long_varint, with the one-byte case (most lengths and deltas) inline. */
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
