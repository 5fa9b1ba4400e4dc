/* The key map's table: its slots' memory, growth, inserts, the superseded bitmap's upkeep, and the KeyMap type. */
#include "native.h"

/* -- the key map --------------------------------------------------------------------------------- */

#define HUGE_PAGE_BYTES (2u << 20)

/*
 * A table of HUGE_PAGE_BYTES or more lives at the start of an address range reserved for the map
 * (SLOT_RESERVE_BYTES, no memory until used) and grows in place: the pages of the smaller table are reused,
 * and only the new half is fresh. Fresh pages cost the kernel's zeroing (a 64 MiB table grown by copying
 * zeroed 128 MiB: a tenth of a 1.1 GiB round on this project's machine). On huge pages where the kernel
 * allows it: a lookup is a random access, and with 4 KiB pages most of them would also miss the TLB.
 */
#define SLOT_RESERVE_BYTES ((size_t)1 << 36) /* 64 GiB of addresses: 2^31 slots */

/* Make [used, bytes) of the reserved range usable; 0, or -1 (the range is as it was). */
static int
commit_slots(unsigned char *reserve, size_t used, size_t bytes)
{
    if (bytes > SLOT_RESERVE_BYTES) {
        return -1;
    }
    if (mprotect(reserve + used, bytes - used, PROT_READ | PROT_WRITE) != 0) {
        return -1;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(reserve + used, bytes - used, MADV_HUGEPAGE); /* a hint: without it the table works the same */
#endif
    return 0;
}

/* Reserve the map's address range, aligned for huge pages; NULL if the system refuses. */
static unsigned char *
reserve_slots(void)
{
    size_t span = SLOT_RESERVE_BYTES + HUGE_PAGE_BYTES;
    unsigned char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    size_t lead = (HUGE_PAGE_BYTES - (uintptr_t)p % HUGE_PAGE_BYTES) % HUGE_PAGE_BYTES;
    if (lead) {
        munmap(p, lead);
    }
    munmap(p + lead + SLOT_RESERVE_BYTES, HUGE_PAGE_BYTES - lead);
    return p + lead;
}

static void
free_slots(KeyMap *m)
{
    if (m->reserve != NULL) {
        munmap(m->reserve, SLOT_RESERVE_BYTES);
        m->reserve = NULL;
    }
    else {
        free(m->slots);
    }
    m->slots = NULL;
}

/* Insert slot s (its key absent) by linear probing from its hash's home in a table of `capacity`. */
static void
place_slot(Slot *slots, Py_ssize_t capacity, const Slot *s)
{
    Py_ssize_t j = (Py_ssize_t)(s->hash & (uint64_t)(capacity - 1));
    while (slots[j].key_length >= 0) {
        j = (j + 1) & (capacity - 1);
    }
    slots[j] = *s;
}

/*
 * Double the table where it is (slots [0, old) hold it, [old, 2 old) are usable). Each slot's new home is
 * its old home or old home + old. The old slots are taken out and put back one by one, in probe order: from
 * just after an empty slot, so that each cluster is visited from its first slot on. A slot put back probes
 * from its new home only over slots already visited (put back or emptied), never over one still to visit,
 * so taking out a later slot cannot cut the probe path of an earlier one; except a probe that would wrap
 * from the top of the table to its bottom, where unvisited slots are: such slots wait in `deferred` and
 * go in last. 0, or -1 (no memory for the deferred: the table is unchanged but for [old, 2 old)).
 */
static int
grow_in_place(Slot *slots, Py_ssize_t old)
{
    Py_ssize_t capacity = old * 2, empty = 0, deferred_count = 0, deferred_capacity = 0;
    Slot *deferred = NULL;
    for (Py_ssize_t i = old; i < capacity; i++) {
        slots[i].key_length = -1;
    }
    while (slots[empty].key_length >= 0) { /* the load factor keeps one */
        empty++;
    }
    for (Py_ssize_t k = 1; k <= old; k++) {
        Py_ssize_t i = (empty + k) & (old - 1);
        if (slots[i].key_length < 0) {
            continue;
        }
        Slot s = slots[i];
        slots[i].key_length = -1;
        Py_ssize_t j = (Py_ssize_t)(s.hash & (uint64_t)(capacity - 1));
        while (j < capacity && slots[j].key_length >= 0) {
            j++;
        }
        if (j < capacity) {
            slots[j] = s;
            continue;
        }
        if (deferred_count == deferred_capacity) {
            Py_ssize_t grown = deferred_capacity ? deferred_capacity * 2 : 64;
            Slot *more = realloc(deferred, (size_t)grown * sizeof(Slot));
            if (more == NULL) { /* cannot happen in practice; put it back where it was */
                slots[i] = s;
                free(deferred);
                return -1;
            }
            deferred = more;
            deferred_capacity = grown;
        }
        deferred[deferred_count++] = s;
    }
    for (Py_ssize_t i = 0; i < deferred_count; i++) {
        place_slot(slots, capacity, &deferred[i]);
    }
    free(deferred);
    return 0;
}

int
keymap_grow(KeyMap *m)
{
    Py_ssize_t capacity = m->capacity ? m->capacity * 2 : 1024;
    size_t bytes = (size_t)capacity * sizeof(Slot);
    if (m->reserve != NULL) {
        if (commit_slots(m->reserve, (size_t)m->capacity * sizeof(Slot), bytes) < 0) {
            return -1;
        }
        if (grow_in_place(m->slots, m->capacity) < 0) {
            return -1;
        }
        m->capacity = capacity;
        return 0;
    }
    unsigned char *reserve = NULL;
    Slot *slots;
    if (bytes >= HUGE_PAGE_BYTES && (reserve = reserve_slots()) != NULL) {
        if (commit_slots(reserve, 0, bytes) < 0) {
            munmap(reserve, SLOT_RESERVE_BYTES);
            return -1;
        }
        slots = (Slot *)reserve;
    }
    else if ((slots = malloc(bytes)) == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < capacity; i++) {
        slots[i].key_length = -1;
    }
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        if (m->slots[i].key_length >= 0) {
            place_slot(slots, capacity, &m->slots[i]);
        }
    }
    free_slots(m);
    m->slots = slots;
    m->reserve = reserve;
    m->capacity = capacity;
    return 0;
}

/* A new key into its empty slot *s (the table grown first if it would fill past 3/4, *s found again):
 * 0, or -1 (no memory). Out of line: most puts of a scan find their key. */
__attribute__((noinline)) int
keymap_insert(KeyMap *m, Slot **s, const unsigned char *key, Py_ssize_t n, uint64_t hash)
{
    if (n > INT32_MAX) {
        return -1;
    }
    if ((m->size + 1) * 4 > m->capacity * 3) { /* a new key would fill the table past 3/4 */
        if (keymap_grow(m) < 0) {
            return -1;
        }
        *s = keymap_find(m, key, n, hash);
    }
    Slot *slot = *s;
    if (n <= INLINE_KEY_BYTES) {
        memcpy(slot->key, key, (size_t)n);
    }
    else {
        if (m->arena_used + n > m->arena_capacity) {
            Py_ssize_t capacity = m->arena_capacity ? m->arena_capacity * 2 : 65536;
            while (capacity < m->arena_used + n) {
                capacity *= 2;
            }
            unsigned char *arena = realloc(m->arena, (size_t)capacity);
            if (arena == NULL) {
                return -1;
            }
            m->arena = arena;
            m->arena_capacity = capacity;
        }
        memcpy(m->arena + m->arena_used, key, (size_t)n);
        int64_t at = (int64_t)m->arena_used;
        memcpy(slot->key, &at, sizeof at);
        m->arena_used += n;
    }
    slot->hash = hash;
    slot->key_length = (int32_t)n;
    slot->offset = -1;
    m->size++;
    return 0;
}

/* Make room for bit (offset - base), or turn the bitmap off (too wide a range, no memory). */
void
bits_reserve(KeyMap *m, int64_t offset)
{
    int64_t bit = offset - m->bits_base;
    if (bit >= MAX_BITMAP_BITS) {
        bits_off(m);
        return;
    }
    int64_t words = bit / 64 + 1;
    if (words <= m->bits_words) {
        return;
    }
    int64_t capacity = m->bits_words ? m->bits_words : 1024;
    while (capacity < words) {
        capacity *= 2;
    }
    uint64_t *grown = realloc(m->bits, (size_t)capacity * sizeof(uint64_t));
    if (grown == NULL) {
        bits_off(m);
        return;
    }
    memset(grown + m->bits_words, 0, (size_t)(capacity - m->bits_words) * sizeof(uint64_t));
    m->bits = grown;
    m->bits_words = capacity;
}

/* Whether the bitmap covers [first, last] and marks every offset in it superseded (a word at a time). */
int
keymap_all_superseded(const KeyMap *m, int64_t first, int64_t last)
{
    if (m->bits_state != BITS_VALID || first < m->bits_base || last > m->bits_last || first > last) {
        return 0;
    }
    int64_t bit = first - m->bits_base, end = last - m->bits_base + 1;
    while (bit < end) {
        int64_t word = bit / 64, shift = bit % 64, take = 64 - shift < end - bit ? 64 - shift : end - bit;
        uint64_t mask = (take == 64 ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1)) << shift;
        if ((m->bits[word] & mask) != mask) {
            return 0;
        }
        bit += take;
    }
    return 1;
}

static int64_t
keymap_get(KeyMap *m, const unsigned char *key, Py_ssize_t n)
{
    return keymap_get_hashed(m, key, n, hash_bytes(key, n));
}

/* Drop the deferred blobs, put or not (with the GIL: their buffers are released). */
static void
keymap_release_deferred(KeyMap *m)
{
    for (Py_ssize_t i = 0; i < m->deferred_count; i++) {
        PyBuffer_Release(&m->deferred[i]);
    }
    free(m->deferred);
    m->deferred = NULL;
    m->deferred_count = m->deferred_done = m->deferred_capacity = 0;
}

static void
keymap_dealloc(KeyMap *m)
{
    /* A round's map is megabytes of touched pages: giving them back (munmap) runs without the GIL, as
     * nothing else can reach the map any more. */
    Py_BEGIN_ALLOW_THREADS
    (void)pipe_finish(m);
    spill_free(m);
    free_slots(m);
    free(m->arena);
    free(m->bits);
    Py_END_ALLOW_THREADS
    keymap_release_deferred(m);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *
keymap_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    KeyMap *m = (KeyMap *)type->tp_alloc(type, 0);
    if (m != NULL && keymap_grow(m) < 0) {
        Py_DECREF(m);
        return PyErr_NoMemory();
    }
    return (PyObject *)m;
}

static PyObject *
keymap_get_py(KeyMap *m, PyObject *arg)
{
    Py_buffer view;
    if (keymap_settle(m, 1) < 0) {
        return NULL;
    }
    if (m->spilled) {
        PyErr_SetString(PyExc_RuntimeError, "a spilled key map answers only superseded(key, offset)");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int64_t offset = keymap_get(m, view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(offset);
}

/* superseded(key, offset) -> bool: whether a later offset of the dirty section holds the key (a spilled
 * map: from its bitmap, RuntimeError for an offset it does not cover). */
static PyObject *
keymap_superseded_py(KeyMap *m, PyObject *args)
{
    Py_buffer view;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &view, &offset)) {
        return NULL;
    }
    int superseded = -1;
    if (keymap_settle(m, 1) == 0) {
        superseded = m->spilled ? keymap_superseded(m, offset) : offset < keymap_get(m, view.buf, view.len);
        if (superseded < 0) {
            PyErr_Format(PyExc_RuntimeError, "the spilled key map does not cover offset %lld", offset);
        }
    }
    PyBuffer_Release(&view);
    return superseded < 0 ? NULL : PyBool_FromLong(superseded);
}

static PyObject *
keymap_put_py(KeyMap *m, PyObject *args)
{
    Py_buffer view;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &view, &offset)) {
        return NULL;
    }
    if (m->spill != NULL || m->spilled) {
        PyBuffer_Release(&view);
        PyErr_SetString(fallback_error, "a key map with a budget takes only its scans' puts");
        return NULL;
    }
    int rc = keymap_settle(m, 1) < 0 ? -1 : keymap_put(m, view.buf, view.len, offset);
    PyBuffer_Release(&view);
    if (rc < 0) {
        return PyErr_NoMemory(); /* the settle's or the put's: either ran out of memory */
    }
    Py_RETURN_NONE;
}

static PyObject *
keymap_clear(KeyMap *m, PyObject *unused)
{
    if (keymap_settle(m, 0) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        m->slots[i].key_length = -1;
    }
    m->size = 0;
    m->arena_used = 0;
    free(m->bits);
    m->bits = NULL;
    m->bits_words = 0;
    m->bits_state = BITS_EMPTY;
    m->bits_foreign = 0;
    spill_free(m);
    m->spilled = 0;
    m->spilled_keys = 0;
    keymap_release_deferred(m);
    Py_RETURN_NONE;
}

static Py_ssize_t
keymap_len(KeyMap *m)
{
    if (keymap_settle(m, 1) < 0) {
        return -1;
    }
    return m->spilled ? (Py_ssize_t)m->spilled_keys : m->size;
}

static PyMethodDef keymap_methods[] = {
    {"map_records", (PyCFunction)keymap_map_records, METH_VARARGS,
     "Put the keyed records at or above start of one records area."},
    {"map_batches", (PyCFunction)keymap_map_batches, METH_VARARGS,
     "Map the data batches of a buffer from a position; stop at the first other one."},
    {"get", (PyCFunction)keymap_get_py, METH_O, "The key's latest offset, -1 if absent."},
    {"put", (PyCFunction)keymap_put_py, METH_VARARGS, "Map key to offset."},
    {"superseded", (PyCFunction)keymap_superseded_py, METH_VARARGS,
     "Whether a later offset of the dirty section holds the key."},
    {"clear", (PyCFunction)keymap_clear, METH_NOARGS, "Forget every key."},
    {"start_pipeline", (PyCFunction)keymap_start_pipeline, METH_NOARGS,
     "Hand the scans' puts to a thread of the map's own, until finish_pipeline."},
    {"finish_pipeline", (PyCFunction)keymap_finish_pipeline, METH_NOARGS,
     "Wait for every handed-over put and end the map's put thread."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods keymap_as_sequence = {.sq_length = (lenfunc)keymap_len};

PyTypeObject KeyMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cleaner._native.KeyMap",
    .tp_basicsize = sizeof(KeyMap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Exact key bytes -> latest offset, for one cleaning round (one thread at a time).",
    .tp_new = keymap_new,
    .tp_dealloc = (destructor)keymap_dealloc,
    .tp_methods = keymap_methods,
    .tp_as_sequence = &keymap_as_sequence,
};
