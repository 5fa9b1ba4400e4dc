/* A key map as one blob (the Spark engine's partial maps): dump, load, defer, key classes, bitmaps. */
#include "native.h"

/* -- a key map as one blob (the Spark engine's partial maps) -------------------------------------- */

/* Blob entry: key length (uint32, little-endian), offset (int64, little-endian), the key bytes. */
#define BLOB_ENTRY_HEADER 12

static void
put_le(unsigned char *p, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        p[i] = (unsigned char)(value >> (8 * i));
    }
}

/* A blob entry's header (the key's length, uint32; its offset, int64; little-endian) at out. */
static void
blob_entry_header(unsigned char *out, const Slot *s)
{
    put_le(out, (uint64_t)(uint32_t)s->key_length, 4);
    put_le(out + 4, (uint64_t)s->offset, 8);
}

/* The slot's whole blob entry at out (header, then the key bytes); its size. */
static size_t
blob_entry(unsigned char *out, const KeyMap *m, const Slot *s)
{
    blob_entry_header(out, s);
    memcpy(out + BLOB_ENTRY_HEADER, slot_key(m->arena, s), (size_t)s->key_length);
    return BLOB_ENTRY_HEADER + (size_t)s->key_length;
}

static uint64_t
get_le(const unsigned char *p, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) {
        value |= (uint64_t)p[i] << (8 * i);
    }
    return value;
}

/* `arg` as a KeyMap, or NULL with a TypeError naming `function`. */
static KeyMap *
key_map_arg(PyObject *arg, const char *function)
{
    if (!PyObject_TypeCheck(arg, &KeyMapType)) {
        PyErr_Format(PyExc_TypeError, "%s needs a KeyMap", function);
        return NULL;
    }
    return (KeyMap *)arg;
}

/* dump_key_map(key_map) -> bytes: every (key, offset) entry, in table order. */
static PyObject *
dump_key_map(PyObject *self, PyObject *arg)
{
    KeyMap *m = key_map_arg(arg, "dump_key_map");
    if (m == NULL) {
        return NULL;
    }
    if (keymap_settle(m, 1) < 0) {
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        if (m->slots[i].key_length >= 0) {
            total += BLOB_ENTRY_HEADER + m->slots[i].key_length;
        }
    }
    PyObject *blob = PyBytes_FromStringAndSize(NULL, total);
    if (blob == NULL) {
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(blob);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        const Slot *s = &m->slots[i];
        if (s->key_length < 0) {
            continue;
        }
        out += blob_entry(out, m, s);
    }
    Py_END_ALLOW_THREADS
    return blob;
}

/* Write all n bytes at `position` of fd (pwrite until done): 0, or -1 with errno set. */
static int
pwrite_all(int fd, const unsigned char *p, size_t n, int64_t position)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)position);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        p += w;
        n -= (size_t)w;
        position += w;
    }
    return 0;
}

#define DUMP_CHUNK_BYTES (1 << 20)

/*
 * dump_key_map_to(key_map, fd, position) -> bytes written: dump_key_map's blob written into the file from
 * `position` on, the GIL released, one pass over the table through a reused 1 MiB buffer: no blob object,
 * whose fresh pages (86 MiB for 4M keys) would cost their first touch, and no second copy.
 */
static PyObject *
dump_key_map_to(PyObject *self, PyObject *args)
{
    PyObject *target;
    int fd;
    long long position;
    if (!PyArg_ParseTuple(args, "O!iL", &KeyMapType, &target, &fd, &position)) {
        return NULL;
    }
    KeyMap *m = (KeyMap *)target;
    if (keymap_settle(m, 1) < 0) {
        return NULL;
    }
    unsigned char *buf = malloc(DUMP_CHUNK_BYTES);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    int64_t start = position;
    size_t used = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m->capacity && !failed; i++) {
        const Slot *s = &m->slots[i];
        if (s->key_length < 0) {
            continue;
        }
        size_t need = BLOB_ENTRY_HEADER + (size_t)s->key_length;
        if (used + need > DUMP_CHUNK_BYTES) {
            failed = pwrite_all(fd, buf, used, position) < 0;
            position += (int64_t)used;
            used = 0;
        }
        if (!failed && need > DUMP_CHUNK_BYTES) { /* a key longer than the buffer: straight to the file */
            unsigned char header[BLOB_ENTRY_HEADER];
            blob_entry_header(header, s);
            failed = pwrite_all(fd, header, BLOB_ENTRY_HEADER, position) < 0 ||
                     pwrite_all(fd, slot_key(m->arena, s), (size_t)s->key_length, position + BLOB_ENTRY_HEADER) < 0;
            position += (int64_t)need;
        }
        else if (!failed) {
            used += blob_entry(buf + used, m, s);
        }
    }
    if (!failed && used > 0) {
        failed = pwrite_all(fd, buf, used, position) < 0;
        position += (int64_t)used;
    }
    Py_END_ALLOW_THREADS
    free(buf);
    if (failed) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(position - start);
}

/* load_key_map(key_map, blob) -> None: put every entry of a dump_key_map blob (a later put wins), the GIL
 * released. */
static PyObject *
load_key_map(PyObject *self, PyObject *args)
{
    PyObject *target;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "O!y*", &KeyMapType, &target, &view)) {
        return NULL;
    }
    KeyMap *m = (KeyMap *)target;
    if (keymap_settle(m, 1) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t left = view.len;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    while (left > 0) {
        if (left < BLOB_ENTRY_HEADER) {
            status = 1;
            break;
        }
        uint64_t n = get_le(p, 4);
        int64_t offset = (int64_t)get_le(p + 4, 8);
        if (n > (uint64_t)(left - BLOB_ENTRY_HEADER) || n > INT32_MAX) {
            status = 1;
            break;
        }
        if (keymap_put(m, p + BLOB_ENTRY_HEADER, (Py_ssize_t)n, offset) < 0) {
            status = 2;
            break;
        }
        p += BLOB_ENTRY_HEADER + (Py_ssize_t)n;
        left -= BLOB_ENTRY_HEADER + (Py_ssize_t)n;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status == 1) {
        PyErr_SetString(PyExc_ValueError, "not a key map blob: an entry runs past its end");
        return NULL;
    }
    if (status == 2) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/*
 * A map's superseded bitmap leaves its task with its blob (cleaner/spark/partial_maps.py), so that the task
 * that rewrites a range reads "superseded" from bits as the in-process filter does (or_superseded_bits).
 */

/* dump_superseded_bits(key_map) -> bytes or None: bits_base, bits_last (int64 LE), then the words
 * covering [bits_base, bits_last]; None when the map keeps no valid bitmap. */
static PyObject *
dump_superseded_bits(PyObject *self, PyObject *arg)
{
    KeyMap *m = key_map_arg(arg, "dump_superseded_bits");
    if (m == NULL || keymap_settle(m, 0) < 0) {
        return NULL;
    }
    if (m->bits_state != BITS_VALID || m->bits_last < m->bits_base) {
        Py_RETURN_NONE;
    }
    int64_t words = (m->bits_last - m->bits_base) / 64 + 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(16 + words * 8));
    if (out == NULL) {
        return NULL;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    put_le(p, (uint64_t)m->bits_base, 8);
    put_le(p + 8, (uint64_t)m->bits_last, 8);
    for (int64_t i = 0; i < words; i++) {
        put_le(p + 16 + 8 * i, m->bits[i], 8);
    }
    return out;
}

/*
 * The map by key hash (cleaner/spark/partial_maps.py, several map tasks over one log): map task k of K scans
 * the whole dirty section in offset order but its map takes only the keys of hash class k (set_key_class),
 * so it builds a table of about 1/K of the keys and the superseded bits of its keys' records. The classes
 * partition the keys, so the K bitmaps OR'd (or_superseded_bits) are the bitmap of one map of every key, and
 * the K blobs together are that map's entries: a rewrite task installs the bits and defers the blobs
 * (defer_key_map), which are put only if a record needs a lookup the bitmap cannot answer.
 */

/* The entries of a dump_key_map blob are whole; 0, or -1. */
static int
blob_is_whole(const unsigned char *p, Py_ssize_t left)
{
    while (left > 0) {
        if (left < BLOB_ENTRY_HEADER) {
            return -1;
        }
        uint64_t n = get_le(p, 4);
        if (n > (uint64_t)(left - BLOB_ENTRY_HEADER) || n > INT32_MAX) {
            return -1;
        }
        p += BLOB_ENTRY_HEADER + (Py_ssize_t)n;
        left -= BLOB_ENTRY_HEADER + (Py_ssize_t)n;
    }
    return 0;
}

#define COMPLETE_AHEAD 16 /* entries hashed (their slots prefetched) before the first of them is put */

/* Put the deferred blobs (checked whole by defer_key_map), keeping the bitmap: 0, or -1 (no memory; what
 * is put stays, and the next call puts the rest again). Needs no GIL: called from the filter's loop. */
int
keymap_complete(KeyMap *m)
{
    while (m->deferred_done < m->deferred_count) {
        const unsigned char *p = m->deferred[m->deferred_done].buf;
        const unsigned char *end = p + m->deferred[m->deferred_done].len;
        const unsigned char *keys[COMPLETE_AHEAD];
        uint64_t hashes[COMPLETE_AHEAD];
        while (p < end) {
            int n = 0;
            for (; n < COMPLETE_AHEAD && p < end; n++) {
                keys[n] = p;
                Py_ssize_t length = (Py_ssize_t)get_le(p, 4);
                hashes[n] = hash_bytes(p + BLOB_ENTRY_HEADER, length);
                keymap_prefetch(m, hashes[n]);
                p += BLOB_ENTRY_HEADER + length;
            }
            for (int i = 0; i < n; i++) {
                Py_ssize_t length = (Py_ssize_t)get_le(keys[i], 4);
                int64_t offset = (int64_t)get_le(keys[i] + 4, 8);
                if (keymap_put_hashed(m, keys[i] + BLOB_ENTRY_HEADER, length, hashes[i], offset, NULL) < 0) {
                    return -1;
                }
            }
        }
        m->deferred_done++;
    }
    return 0;
}

/* defer_key_map(key_map, blob) -> None: the blob's entries are put (a later blob wins) when the map is
 * first read beyond its bitmap: a lookup the bitmap cannot answer, get, len, a dump or a put. The map keeps
 * the blob (a buffer) until then; its bitmap stays as it is: the blobs are the key classes of the scan
 * the bitmap is of. */
PyObject *
defer_key_map(PyObject *self, PyObject *args)
{
    PyObject *target, *blob;
    if (!PyArg_ParseTuple(args, "O!O", &KeyMapType, &target, &blob)) {
        return NULL;
    }
    KeyMap *m = (KeyMap *)target;
    if (keymap_settle(m, 0) < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(blob, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (blob_is_whole(view.buf, view.len) < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "not a key map blob: an entry runs past its end");
        return NULL;
    }
    if (m->deferred_count == m->deferred_capacity) {
        Py_ssize_t grown = m->deferred_capacity ? m->deferred_capacity * 2 : 8;
        Py_buffer *more = realloc(m->deferred, (size_t)grown * sizeof(Py_buffer));
        if (more == NULL) {
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
        m->deferred = more;
        m->deferred_capacity = grown;
    }
    m->deferred[m->deferred_count++] = view;
    Py_RETURN_NONE;
}

/* set_key_class(key_map, key_class, classes) -> None: from now on the map takes only keys of that class
 * (its scans skip the others; put ignores them); classes 1: every key. The map must be empty. */
PyObject *
set_key_class(PyObject *self, PyObject *args)
{
    PyObject *target;
    unsigned int key_class, classes;
    if (!PyArg_ParseTuple(args, "O!II", &KeyMapType, &target, &key_class, &classes)) {
        return NULL;
    }
    KeyMap *m = (KeyMap *)target;
    if (keymap_settle(m, 0) < 0) {
        return NULL;
    }
    if (classes < 1 || key_class >= classes) {
        PyErr_Format(PyExc_ValueError, "key class %u of %u classes", key_class, classes);
        return NULL;
    }
    if (m->size != 0 || m->deferred_count != 0 || m->bits_state != BITS_EMPTY) {
        PyErr_SetString(PyExc_ValueError, "set_key_class needs an empty KeyMap");
        return NULL;
    }
    m->key_class = key_class;
    m->classes = classes;
    Py_RETURN_NONE;
}

/* skip_batch_checks(key_map) -> None: from now on the map's scans read only the keys of a plain batch (no
 * CRC, no check of the other fields). For a map whose round reads every batch it maps again, checked,
 * before anything of the round is used: a Spark round's tasks rewrite every batch, and the driver swaps
 * nothing in unless every task succeeded. */
PyObject *
skip_batch_checks(PyObject *self, PyObject *arg)
{
    KeyMap *m = key_map_arg(arg, "skip_batch_checks");
    if (m == NULL) {
        return NULL;
    }
    m->checks_none = 1;
    Py_RETURN_NONE;
}

/* key_class(key, classes) -> int: the key's hash class (the one whose map takes it). */
PyObject *
key_class(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int classes;
    if (!PyArg_ParseTuple(args, "y*I", &view, &classes)) {
        return NULL;
    }
    if (classes < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "classes must be >= 1");
        return NULL;
    }
    uint32_t k = key_class_of(hash_bytes(view.buf, view.len), classes);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(k);
}

/* OR the `words` words of src (bit 0 = offset src_base) into dst (bit 0 = offset dst_base <= src_base),
 * which has room for them (dst_words words). */
static void
or_bits_at(uint64_t *dst, int64_t dst_words, int64_t dst_base, const unsigned char *src, int64_t words,
           int64_t src_base)
{
    int64_t at = src_base - dst_base;
    int64_t w = at / 64;
    int s = (int)(at % 64);
    for (int64_t i = 0; i < words; i++) {
        uint64_t v = get_le(src + 8 * i, 8);
        if (v == 0) {
            continue;
        }
        dst[w + i] |= v << s;
        if (s != 0 && w + i + 1 < dst_words) {
            dst[w + i + 1] |= v >> (64 - s);
        }
    }
}

/* or_superseded_bits(key_map, bits or None) -> None: OR one key class's dump_superseded_bits bitmap into
 * the map's (an empty map takes it as it is), over the union of their offsets; None (a class whose map
 * kept no bitmap) turns the map's off: its lookups then go to the (deferred) entries. */
PyObject *
or_superseded_bits(PyObject *self, PyObject *args)
{
    PyObject *target, *bits;
    if (!PyArg_ParseTuple(args, "O!O", &KeyMapType, &target, &bits)) {
        return NULL;
    }
    KeyMap *m = (KeyMap *)target;
    if (keymap_settle(m, 0) < 0) {
        return NULL;
    }
    if (bits == Py_None) {
        bits_off(m);
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bits, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *p = view.buf;
    int64_t base = 0, last = -1, words = -1;
    if (view.len >= 16) {
        base = (int64_t)get_le(p, 8);
        last = (int64_t)get_le(p + 8, 8);
        words = last >= base && last - base < MAX_BITMAP_BITS ? (last - base) / 64 + 1 : -1;
    }
    if (words < 0 || view.len != 16 + words * 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "not a superseded bitmap");
        return NULL;
    }
    if (m->bits_state == BITS_OFF) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    int64_t new_base = base, new_last = last;
    if (m->bits_state == BITS_VALID) {
        new_base = m->bits_base < base ? m->bits_base : base;
        new_last = m->bits_last > last ? m->bits_last : last;
    }
    if (new_last - new_base >= MAX_BITMAP_BITS) {
        PyBuffer_Release(&view);
        bits_off(m);
        Py_RETURN_NONE;
    }
    int64_t new_words = (new_last - new_base) / 64 + 1;
    uint64_t *merged = calloc((size_t)new_words, sizeof(uint64_t));
    if (merged == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    if (m->bits_state == BITS_VALID) {
        int64_t old_words = (m->bits_last - m->bits_base) / 64 + 1;
        unsigned char *old = malloc((size_t)old_words * 8);
        if (old == NULL) {
            free(merged);
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
        for (int64_t i = 0; i < old_words; i++) {
            put_le(old + 8 * i, m->bits[i], 8);
        }
        or_bits_at(merged, new_words, new_base, old, old_words, m->bits_base);
        free(old);
    }
    or_bits_at(merged, new_words, new_base, p + 16, words, base);
    PyBuffer_Release(&view);
    free(m->bits);
    m->bits = merged;
    m->bits_words = new_words;
    m->bits_base = new_base;
    m->bits_last = new_last;
    m->bits_state = BITS_VALID;
    m->bits_foreign = 1;
    Py_RETURN_NONE;
}

static PyMethodDef key_map_blob_methods[] = {
    {"defer_key_map", defer_key_map, METH_VARARGS, "Put a blob's entries when the map is first read."},
    {"set_key_class", set_key_class, METH_VARARGS, "Make a KeyMap take only the keys of one hash class."},
    {"skip_batch_checks", skip_batch_checks, METH_O, "Make a KeyMap's scans read only the keys of batches."},
    {"key_class", key_class, METH_VARARGS, "A key's hash class."},
    {"or_superseded_bits", or_superseded_bits, METH_VARARGS, "OR a key class's superseded bitmap in."},
    {"dump_key_map", dump_key_map, METH_O, "A KeyMap's entries as one blob."},
    {"dump_key_map_to", dump_key_map_to, METH_VARARGS, "dump_key_map's blob written into a file."},
    {"load_key_map", load_key_map, METH_VARARGS, "Put a blob's entries into a KeyMap."},
    {"dump_superseded_bits", dump_superseded_bits, METH_O, "A scanned KeyMap's superseded bitmap."},
    {NULL, NULL, 0, NULL},
};

int
add_key_map_blob_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, key_map_blob_methods);
}
