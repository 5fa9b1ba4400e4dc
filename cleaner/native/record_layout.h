#ifndef LOGCLEANER_RECORD_LAYOUT_H
#define LOGCLEANER_RECORD_LAYOUT_H

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF), as Python's decoder accepts it. */
static inline int
is_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        }
        else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        }
        else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        }
        else {
            return 0;
        }
        if (i + len > n) {
            return 0;
        }
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return 0;
        }
        i += len;
    }
    return 1;
}

/* -- one record's layout ------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start;       /* first byte of the length varint */
    Py_ssize_t tail;        /* first byte of the offset delta: copied from here to `end` */
    Py_ssize_t end;         /* one past the record */
    int64_t offset_delta;
    int64_t timestamp_delta;
    Py_ssize_t key;         /* position of the key bytes, -1 if null */
    Py_ssize_t key_length;
    int has_value;
    int superseded; /* the filter's: from the key map's bitmap (0, 1), or -1: look the key up */
} RecordView;

static inline int
read_nullable(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t *at, Py_ssize_t *length)
{
    int64_t n;
    if (read_varint(buf, end, pos, &n) < 0 || n < -1) {
        return -1;
    }
    if (n == -1) {
        *at = -1;
        *length = 0;
        return 0;
    }
    if (n > end - *pos) {
        return -1;
    }
    *at = *pos;
    *length = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 0;
}

/* Parse the record at *pos (validating it as the Python decoder does); -1 on any anomaly. */
static inline int
read_record(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, RecordView *r)
{
    int64_t length, count;
    r->start = *pos;
    if (read_varint(buf, end, pos, &length) < 0 || length < 0 || length > end - *pos) {
        return -1;
    }
    Py_ssize_t record_end = *pos + (Py_ssize_t)length;
    Py_ssize_t p = *pos + 1; /* attributes: unused */
    if (p > record_end) {
        return -1;
    }
    if (read_varint(buf, record_end, &p, &r->timestamp_delta) < 0) {
        return -1;
    }
    r->tail = p;
    if (read_varint(buf, record_end, &p, &r->offset_delta) < 0) {
        return -1;
    }
    if (read_nullable(buf, record_end, &p, &r->key, &r->key_length) < 0) {
        return -1;
    }
    Py_ssize_t value_at, value_length;
    if (read_nullable(buf, record_end, &p, &value_at, &value_length) < 0) {
        return -1;
    }
    r->has_value = value_at >= 0;
    if (read_varint(buf, record_end, &p, &count) < 0 || count < 0) {
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t key_length;
        if (read_varint(buf, record_end, &p, &key_length) < 0 || key_length < 0 || key_length > record_end - p) {
            return -1;
        }
        if (!is_utf8(buf + p, (Py_ssize_t)key_length)) {
            return -1;
        }
        p += (Py_ssize_t)key_length;
        Py_ssize_t hv_at, hv_length;
        if (read_nullable(buf, record_end, &p, &hv_at, &hv_length) < 0) {
            return -1;
        }
    }
    if (p != record_end) {
        return -1;
    }
    r->end = record_end;
    *pos = record_end;
    return 0;
}

/* read_record's fields that the key map needs (offset delta, key), the rest of the record skipped by its
 * length: for a map task that leaves checking the batch to another task (see map_batches). -1 if odd. */
static inline int
read_record_key(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, RecordView *r)
{
    int64_t length, timestamp_delta;
    if (read_varint(buf, end, pos, &length) < 0 || length < 0 || length > end - *pos) {
        return -1;
    }
    Py_ssize_t record_end = *pos + (Py_ssize_t)length;
    Py_ssize_t p = *pos + 1; /* attributes: unused */
    if (p > record_end || read_varint(buf, record_end, &p, &timestamp_delta) < 0
        || read_varint(buf, record_end, &p, &r->offset_delta) < 0
        || read_nullable(buf, record_end, &p, &r->key, &r->key_length) < 0) {
        return -1;
    }
    *pos = record_end;
    return 0;
}

#endif
