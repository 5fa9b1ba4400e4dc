/*
 * A key map bounded in memory: beyond its budget, a round's map spills to disk and stays exact and whole.
 *
 * A map given a budget (spill_key_map) builds its table in memory as any map does until the next growth of
 * its slots or key arena would pass the budget. Then it spills: the table's entries (each key once, with its
 * latest offset so far) go to `classes` files by key hash, the table is emptied, and every later put of the
 * scan is appended to its class's file (key hash, offset, key bytes: the put pipeline's entry layout),
 * written sequentially through a small buffer per class. The scan still keeps the superseded bitmap's range
 * (bits_base..bits_last), and puts in offset order, so each class file holds its keys' puts in offset order.
 *
 * The records below the dirty section (the clean section, which the filter looks up too) are then probed
 * (spill_probe_records): each keyed record's key and offset go to its class file, flagged as a probe.
 *
 * finish_spill then widens the bitmap down to the round's first offset and replays the classes one at a
 * time into the emptied table (so the table holds one class's keys at a time): a put sets the bit of the
 * offset it supersedes, exactly as the scan's own puts do; a probe (after every put of its class) sets its
 * own bit if its key's latest offset is later. Every record the filter asks about then has its answer in the
 * bitmap (keymap_superseded), the key bytes compared exactly, as in memory: the output is the same bytes.
 *
 * The class files are made with O_TMPFILE (no name: a crash leaves nothing), else under a `.deleted` name
 * unlinked at once (a crash between the two leaves a file Kafka's loader and logcleaner's delete at start).
 */
#include "native.h"

#define SPILL_BUFFER_BYTES (32 * 1024)
#define SPILL_READ_BYTES (1 << 20)
#define MAX_SPILL_CLASSES 256
#define PROBE_FLAG 0x80000000u /* in an entry's key length: a probe of the clean section, not a put */

struct Spill {
    char *directory;
    int64_t budget_bytes; /* the table's slots and key arena */
    int64_t upper_bound;  /* the scan's end: how many keys may still come */
    int spilling;
    uint32_t classes;
    int *fds;
    unsigned char **buffers;
    size_t *used;
    int error; /* errno of a failed open or write: finish_spill raises it */
};

/* The file class of a key hash: from bits other than the table's home slot (low) and key_class_of (high). */
static inline uint32_t
spill_class_of(uint64_t hash, uint32_t classes)
{
    return (uint32_t)((((hash >> 16) & 0xffffffffu) * (uint64_t)classes) >> 32);
}

/* Write all n bytes at the file's end: 0, or an errno. */
static int
write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, p, n);
        if (done < 0 && errno == EINTR) {
            continue;
        }
        if (done <= 0) {
            return done < 0 ? errno : EIO;
        }
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

static void
spill_write(Spill *sp, uint32_t k)
{
    if (sp->error == 0) {
        sp->error = write_all(sp->fds[k], sp->buffers[k], sp->used[k]);
    }
    sp->used[k] = 0;
}

/* Append one entry to its class's file (through the class's buffer); a write error is kept in sp->error. */
static void
spill_append(Spill *sp, uint64_t hash, int64_t offset, const unsigned char *key, uint32_t n, uint32_t flag)
{
    if (sp->error != 0) {
        return; /* the spill failed (finish_spill raises it): its buffers may not all be there */
    }
    uint32_t k = spill_class_of(hash, sp->classes);
    size_t size = entry_size(n);
    if (sp->used[k] + size > SPILL_BUFFER_BYTES) {
        spill_write(sp, k);
    }
    uint32_t length = n | flag;
    unsigned char header[ENTRY_HEADER];
    memcpy(header, &hash, 8);
    memcpy(header + 8, &offset, 8);
    memcpy(header + 16, &length, 4);
    if (size > SPILL_BUFFER_BYTES) { /* a key larger than the buffer: written on its own */
        static const unsigned char pad[8] = {0};
        int rc = write_all(sp->fds[k], header, ENTRY_HEADER);
        rc = rc ? rc : write_all(sp->fds[k], key, n);
        sp->error = rc ? rc : write_all(sp->fds[k], pad, size - ENTRY_HEADER - n);
        return;
    }
    unsigned char *e = sp->buffers[k] + sp->used[k];
    memcpy(e, header, ENTRY_HEADER);
    memcpy(e + ENTRY_HEADER, key, n);
    memset(e + ENTRY_HEADER + n, 0, size - ENTRY_HEADER - n);
    sp->used[k] += size;
}

/* A nameless file in the directory, else a named one unlinked at once; -1 with errno. */
static int
spill_open(const char *directory, uint32_t k)
{
#ifdef O_TMPFILE
    int fd = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
        return fd;
    }
#endif
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%020lld.keymap-spill-%ld-%u.deleted", directory, 0LL, (long)getpid(), k) >=
        (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int named = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (named >= 0) {
        (void)unlink(path);
    }
    return named;
}

/* Free the spill's files and buffers (the KeyMap keeps no spill after). */
void
spill_free(KeyMap *m)
{
    Spill *sp = m->spill;
    if (sp == NULL) {
        return;
    }
    for (uint32_t k = 0; k < sp->classes; k++) {
        if (sp->fds != NULL && sp->fds[k] >= 0) {
            close(sp->fds[k]);
        }
        if (sp->buffers != NULL) {
            free(sp->buffers[k]);
        }
    }
    free(sp->fds);
    free(sp->buffers);
    free(sp->used);
    free(sp->directory);
    free(sp);
    m->spill = NULL;
}

/* How many classes: every key that may still come (at most one an offset) in tables of the keys the budget
 * held, with a fifth to spare. */
static uint32_t
spill_classes(const KeyMap *m, int64_t offset)
{
    int64_t held = m->size > 0 ? m->size : 1;
    int64_t to_come = m->spill->upper_bound > offset ? m->spill->upper_bound - offset : 0;
    int64_t classes = ((held + to_come) * 5 / 4 + held - 1) / held;
    if (classes < 2) {
        classes = 2;
    }
    return (uint32_t)(classes > MAX_SPILL_CLASSES ? MAX_SPILL_CLASSES : classes);
}

/* Open the class files, move the table's entries there and empty it: 0, or -1 (no memory; sp->error for
 * a file that would not open). */
static int
spill_start(KeyMap *m, int64_t offset)
{
    Spill *sp = m->spill;
    uint32_t classes = spill_classes(m, offset);
    sp->spilling = 1; /* from now on, whatever happens here: a failure leaves sp->error, or no memory */
    sp->fds = malloc(classes * sizeof(int));
    sp->buffers = calloc(classes, sizeof(unsigned char *));
    sp->used = calloc(classes, sizeof(size_t));
    if (sp->fds == NULL || sp->buffers == NULL || sp->used == NULL) {
        return -1;
    }
    for (uint32_t k = 0; k < classes; k++) {
        sp->fds[k] = -1;
    }
    sp->classes = classes; /* spill_free's: every fd is -1 or open */
    for (uint32_t k = 0; k < classes; k++) {
        if ((sp->buffers[k] = malloc(SPILL_BUFFER_BYTES)) == NULL) {
            return -1;
        }
        if ((sp->fds[k] = spill_open(sp->directory, k)) < 0) {
            sp->error = errno ? errno : EIO; /* the puts are dropped; finish_spill raises it */
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        Slot *s = &m->slots[i];
        if (s->key_length >= 0) {
            spill_append(sp, s->hash, s->offset, slot_key(m->arena, s), (uint32_t)s->key_length, 0);
            s->key_length = -1;
        }
    }
    m->size = 0;
    m->arena_used = 0;
    return 0;
}

/* Whether a put of an n-byte key may grow the table or its arena past the budget. */
static inline int
table_would_pass(const KeyMap *m, Py_ssize_t n, int64_t budget)
{
    int64_t slots = (int64_t)m->capacity * (int64_t)sizeof(Slot), arena = m->arena_capacity;
    if ((m->size + 1) * 4 > m->capacity * 3 && 2 * slots + arena > budget) {
        return 1;
    }
    int64_t grown_arena = arena ? 2 * arena : 65536;
    return n > INLINE_KEY_BYTES && m->arena_used + n > m->arena_capacity && slots + grown_arena > budget;
}

/* keymap_put_scanned of a map with a budget: in the table while it fits, else appended to its class file. */
int
spill_put_scanned(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset)
{
    Spill *sp = m->spill;
    if (!sp->spilling) {
        if (sp->budget_bytes > 0 && !table_would_pass(m, n, sp->budget_bytes)) { /* 0: no table, every put spills */
            return keymap_put_scanned_table(m, key, n, hash, offset);
        }
        if (spill_start(m, offset) < 0) {
            return -1;
        }
    }
    if (m->bits_state == BITS_EMPTY) {
        m->bits_state = BITS_VALID;
        m->bits_base = m->scan_base = offset;
        m->bits_last = offset - 1;
    }
    if (m->bits_state == BITS_VALID) {
        if (offset <= m->bits_last) {
            bits_off(m); /* out of order: finish_spill refuses the map */
        }
        else {
            bits_reserve(m, offset);
            m->bits_last = offset;
        }
    }
    if (sp->error == 0) {
        spill_append(sp, hash, offset, key, (uint32_t)n, 0);
    }
    return 0;
}

/* -- the classes replayed: the bitmap of every record the filter asks about ------------------------------- */

static inline void
set_superseded(KeyMap *m, int64_t offset)
{
    int64_t bit = offset - m->bits_base;
    if (bit >= 0 && bit < m->bits_words * 64) {
        m->bits[bit / 64] |= (uint64_t)1 << (bit % 64);
    }
}

#define REPLAY_AHEAD 16 /* entries whose slots are prefetched before the first of them is put */

/* Replay the whole entries of [p, end): puts set the bit of the offset they supersede, probes their own if
 * a later offset holds their key. Returns where the first partial entry starts, or NULL (no memory). */
static const unsigned char *
replay_entries(KeyMap *m, const unsigned char *p, const unsigned char *end)
{
    for (;;) {
        const unsigned char *window[REPLAY_AHEAD];
        int count = 0;
        while (count < REPLAY_AHEAD && end - p >= ENTRY_HEADER) {
            uint32_t length;
            memcpy(&length, p + 16, 4);
            size_t size = entry_size(length & ~PROBE_FLAG);
            if ((size_t)(end - p) < size) {
                break;
            }
            uint64_t hash;
            memcpy(&hash, p, 8);
            keymap_prefetch(m, hash);
            window[count++] = p;
            p += size;
        }
        for (int i = 0; i < count; i++) {
            uint64_t hash;
            int64_t offset, previous;
            uint32_t length;
            memcpy(&hash, window[i], 8);
            memcpy(&offset, window[i] + 8, 8);
            memcpy(&length, window[i] + 16, 4);
            const unsigned char *key = window[i] + ENTRY_HEADER;
            Py_ssize_t n = (Py_ssize_t)(length & ~PROBE_FLAG);
            if (length & PROBE_FLAG) {
                if (keymap_get_hashed(m, key, n, hash) > offset) {
                    set_superseded(m, offset);
                }
            }
            else if (keymap_put_hashed(m, key, n, hash, offset, &previous) < 0) {
                return NULL;
            }
            else if (previous >= 0) {
                set_superseded(m, previous);
            }
        }
        if (count < REPLAY_AHEAD) {
            return p;
        }
    }
}

/* Replay one class file into the empty table: 0, -1 (no memory), or an errno. */
static int
replay_class(KeyMap *m, int fd, unsigned char **buf, size_t *capacity)
{
    size_t have = 0;
    off_t at = 0;
    for (;;) {
        if (*capacity - have < SPILL_READ_BYTES / 2) { /* room for a read; an entry longer than the buffer */
            unsigned char *grown = realloc(*buf, *capacity * 2);
            if (grown == NULL) {
                return -1;
            }
            *buf = grown;
            *capacity *= 2;
        }
        ssize_t got = pread(fd, *buf + have, *capacity - have, at);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        at += got;
        have += (size_t)got;
        const unsigned char *rest = replay_entries(m, *buf, *buf + have);
        if (rest == NULL) {
            return -1;
        }
        have = (size_t)(*buf + have - rest);
        if (got == 0) {
            return have == 0 ? 0 : EIO; /* a torn entry: the file is not what was written */
        }
        memmove(*buf, rest, have);
    }
}

/* The bitmap widened down to `first` (the round's first offset) and kept: 0, or -1 (no bitmap, too wide). */
static int
widen_bits(KeyMap *m, int64_t first)
{
    if (m->bits_state != BITS_VALID) {
        return -1;
    }
    if (first > m->bits_base) {
        first = m->bits_base;
    }
    if (m->bits_last - first >= MAX_BITMAP_BITS) {
        return -1;
    }
    int64_t words = (m->bits_last - first) / 64 + 1, shift = m->bits_base - first;
    uint64_t *bits = calloc((size_t)words, sizeof(uint64_t));
    if (bits == NULL) {
        return -1;
    }
    for (int64_t i = 0; i < m->bits_words; i++) {
        for (uint64_t w = m->bits[i]; w != 0; w &= w - 1) {
            int64_t bit = i * 64 + __builtin_ctzll(w) + shift;
            if (bit < words * 64) {
                bits[bit / 64] |= (uint64_t)1 << (bit % 64);
            }
        }
    }
    free(m->bits);
    m->bits = bits;
    m->bits_words = words;
    m->bits_base = first;
    return 0;
}

/* Every class replayed, one at a time: 0, -1 (no memory), or an errno. Without the GIL. */
static int
replay_classes(KeyMap *m)
{
    Spill *sp = m->spill;
    size_t capacity = SPILL_READ_BYTES;
    unsigned char *buf = malloc(capacity);
    int rc = buf == NULL ? -1 : 0;
    int64_t keys = 0;
    for (uint32_t k = 0; k < sp->classes && rc == 0; k++) {
        rc = replay_class(m, sp->fds[k], &buf, &capacity);
        keys += m->size;
        for (Py_ssize_t i = 0; i < m->capacity; i++) {
            m->slots[i].key_length = -1;
        }
        m->size = 0;
        m->arena_used = 0;
        close(sp->fds[k]);
        sp->fds[k] = -1;
    }
    free(buf);
    m->spilled_keys = keys;
    return rc;
}

/* -- the Python functions ------------------------------------------------------------------------------------ */

static KeyMap *
spill_map_arg(PyObject *arg, const char *function)
{
    if (!PyObject_TypeCheck(arg, &KeyMapType)) {
        PyErr_Format(PyExc_TypeError, "%s needs a KeyMap", function);
        return NULL;
    }
    KeyMap *m = (KeyMap *)arg;
    return keymap_settle(m, 0) < 0 ? NULL : m;
}

/* spill_key_map(key_map, budget_bytes, directory, upper_bound) -> None: the empty map's table and key arena
 * stay within budget_bytes; beyond it the scan's puts go to class files in `directory` (see above). A budget
 * of 0 spills from the first put (the spill's tests on small logs). */
static PyObject *
spill_key_map(PyObject *self, PyObject *args)
{
    PyObject *target, *directory;
    long long budget, upper_bound;
    if (!PyArg_ParseTuple(args, "OLO&L", &target, &budget, PyUnicode_FSConverter, &directory, &upper_bound)) {
        return NULL;
    }
    KeyMap *m = spill_map_arg(target, "spill_key_map");
    if (m == NULL || m->size != 0 || m->spill != NULL || m->spilled || m->classes > 1) {
        Py_DECREF(directory);
        if (m != NULL) {
            PyErr_SetString(PyExc_ValueError, "spill_key_map needs an empty KeyMap of every key");
        }
        return NULL;
    }
    Spill *sp = calloc(1, sizeof(Spill));
    char *path = sp == NULL ? NULL : strdup(PyBytes_AS_STRING(directory));
    Py_DECREF(directory);
    if (path == NULL) {
        free(sp);
        return PyErr_NoMemory();
    }
    sp->directory = path;
    sp->budget_bytes = budget;
    sp->upper_bound = upper_bound;
    m->spill = sp;
    Py_RETURN_NONE;
}

/* is_spilling(key_map) -> bool: the map passed its budget and its scan's puts went to disk. */
static PyObject *
is_spilling(PyObject *self, PyObject *arg)
{
    KeyMap *m = spill_map_arg(arg, "is_spilling");
    if (m == NULL) {
        return NULL;
    }
    return PyBool_FromLong(m->spill != NULL && m->spill->spilling);
}

/* spill_probe_records(key_map, raw, count, base_offset, below) -> None: the keyed records below `below` of
 * one records area (the clean section's) probed: finish_spill sets their bits. Fallback: an odd area. */
static PyObject *
spill_probe_records(PyObject *self, PyObject *args)
{
    PyObject *target;
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, below;
    if (!PyArg_ParseTuple(args, "Oy*nLL", &target, &view, &count, &base_offset, &below)) {
        return NULL;
    }
    KeyMap *m = spill_map_arg(target, "spill_probe_records");
    if (m == NULL || m->spill == NULL || !m->spill->spilling) {
        PyBuffer_Release(&view);
        if (m != NULL) {
            PyErr_SetString(PyExc_ValueError, "spill_probe_records needs a spilling KeyMap");
        }
        return NULL;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t pos = 0;
    int ok = count >= 0 && count <= view.len;
    for (Py_ssize_t i = 0; ok && i < count; i++) {
        RecordView r;
        int64_t offset;
        if (read_record(buf, view.len, &pos, &r) < 0 || __builtin_add_overflow(base_offset, r.offset_delta, &offset)) {
            ok = 0;
        }
        else if (r.key >= 0 && offset < below) {
            spill_append(m->spill, hash_bytes(buf + r.key, r.key_length), offset, buf + r.key, (uint32_t)r.key_length,
                         PROBE_FLAG);
        }
    }
    PyBuffer_Release(&view);
    if (!ok || pos != view.len) {
        PyErr_SetString(fallback_error, "records area needs the Python decoder");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* finish_spill(key_map, first_offset) -> int: a spilled map's classes replayed (their count; 0: the map
 * never spilled and is as it was). From then on the map answers only from its bitmap, which covers every
 * offset from first_offset on (keymap_superseded). Fallback: the map cannot answer so (a put out of order,
 * a range too wide for the bitmap); OSError: a spill file failed. Either way the map is to be cleared. */
static PyObject *
finish_spill(PyObject *self, PyObject *args)
{
    PyObject *target;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "OL", &target, &first_offset)) {
        return NULL;
    }
    KeyMap *m = spill_map_arg(target, "finish_spill");
    if (m == NULL) {
        return NULL;
    }
    Spill *sp = m->spill;
    if (sp == NULL || !sp->spilling) {
        spill_free(m);
        return PyLong_FromLong(0);
    }
    uint32_t classes = sp->classes;
    int rc = sp->error;
    Py_BEGIN_ALLOW_THREADS
    for (uint32_t k = 0; k < sp->classes && rc == 0; k++) {
        spill_write(sp, k);
        rc = sp->error;
    }
    if (rc == 0) {
        rc = widen_bits(m, first_offset) < 0 ? -2 : replay_classes(m);
    }
    Py_END_ALLOW_THREADS
    spill_free(m);
    if (rc == -2) {
        PyErr_SetString(fallback_error, "the spilled key map's bitmap cannot cover the round");
        return NULL;
    }
    if (rc == -1) {
        return PyErr_NoMemory();
    }
    if (rc > 0) {
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    m->spilled = 1;
    return PyLong_FromUnsignedLong(classes);
}

/* take_spilled_bits(key_map, bits, keys) -> None: the empty map takes a finished spilled map's bitmap
 * (dump_superseded_bits after finish_spill, e.g. in a file another task wrote) and from then on answers
 * only from it, as that map does: `keys` is what len() reports. ValueError: not a bitmap, or a map not empty. */
static PyObject *
take_spilled_bits(PyObject *self, PyObject *args)
{
    PyObject *target;
    Py_buffer view;
    long long keys;
    if (!PyArg_ParseTuple(args, "Oy*L", &target, &view, &keys)) {
        return NULL;
    }
    KeyMap *m = spill_map_arg(target, "take_spilled_bits");
    if (m == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *p = view.buf;
    int64_t base = 0, last = -1, words = -1;
    if (view.len >= 16) {
        memcpy(&base, p, 8);
        memcpy(&last, p + 8, 8);
        words = last >= base && last - base < MAX_BITMAP_BITS ? (last - base) / 64 + 1 : -1;
    }
    if (words < 0 || view.len != 16 + words * 8 || keys < 0 || m->size != 0 || m->spill != NULL || m->spilled ||
        m->bits_state != BITS_EMPTY || m->deferred_count != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "take_spilled_bits needs an empty KeyMap and a superseded bitmap");
        return NULL;
    }
    uint64_t *bits = malloc((size_t)words * sizeof(uint64_t));
    if (bits == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    for (int64_t i = 0; i < words; i++) {
        uint64_t word = 0;
        for (int b = 7; b >= 0; b--) { /* little-endian, as dump_superseded_bits writes it */
            word = (word << 8) | p[16 + 8 * i + b];
        }
        bits[i] = word;
    }
    PyBuffer_Release(&view);
    free(m->bits);
    m->bits = bits;
    m->bits_words = words;
    m->bits_base = m->scan_base = base;
    m->bits_last = last;
    m->bits_state = BITS_VALID;
    m->bits_foreign = 1;
    m->spilled = 1;
    m->spilled_keys = keys;
    Py_RETURN_NONE;
}

static PyMethodDef spill_methods[] = {
    {"spill_key_map", spill_key_map, METH_VARARGS, "Bound a key map's table; beyond it, spill to disk."},
    {"is_spilling", is_spilling, METH_O, "Whether the key map spilled."},
    {"spill_probe_records", spill_probe_records, METH_VARARGS, "Probe a clean records area's keys."},
    {"finish_spill", finish_spill, METH_VARARGS, "Replay a spilled key map's classes into its bitmap."},
    {"take_spilled_bits", take_spilled_bits, METH_VARARGS, "Answer from a spilled key map's bitmap."},
    {NULL, NULL, 0, NULL},
};

int
add_spill_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, spill_methods);
}
