#ifndef LOGCLEANER_KEY_MAP_H
#define LOGCLEANER_KEY_MAP_H

#define INLINE_KEY_BYTES 12

/* 32 bytes; a key of up to INLINE_KEY_BYTES lives in the slot itself (no second cache miss). */
typedef struct {
    uint64_t hash;
    int64_t offset;
    int32_t key_length; /* -1: empty slot */
    unsigned char key[INLINE_KEY_BYTES]; /* the key, or (longer keys) its int64 position in the arena */
} Slot;

_Static_assert(sizeof(Slot) == 32, "a slot is half a cache line");

/* Short keys compared inline (a libc memcmp call costs more than the compare itself): up to 16 bytes as
 * two words that overlap, each read within the n bytes of both keys. */
static inline int
keys_equal(const unsigned char *a, const unsigned char *b, Py_ssize_t n)
{
    if (n > 16) {
        return memcmp(a, b, (size_t)n) == 0;
    }
    if (n >= 8) {
        uint64_t a0, b0, a1, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + n - 8, 8);
        memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4) {
        uint32_t a0, b0, a1, b1;
        memcpy(&a0, a, 4);
        memcpy(&b0, b, 4);
        memcpy(&a1, a + n - 4, 4);
        memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    unsigned char diff = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        diff |= a[i] ^ b[i];
    }
    return diff == 0;
}

static inline const unsigned char *
slot_key(const unsigned char *arena, const Slot *s)
{
    if (s->key_length <= INLINE_KEY_BYTES) {
        return s->key;
    }
    int64_t at;
    memcpy(&at, s->key, sizeof at);
    return arena + at;
}

/*
 * The superseded bitmap: while every put comes from a scan of the log in offset order (map_batches,
 * map_records), bit (o - base) is set when the key of the record at offset o is put again at a later
 * offset. For a record at offset o in [base, last put] that the scan put (keyed, not in an aborted or
 * control batch), "o < latest offset of its key" is then that bit: the filter of plain batches reads it
 * instead of hashing and looking up the key (a random access into the table) a second time. A put from
 * Python (any order: Spark's aggregation, the Python rules) or out of order turns it off for the round.
 */
enum { BITS_EMPTY = 0, BITS_VALID = 1, BITS_OFF = 2 };
#define MAX_BITMAP_BITS ((int64_t)1 << 29) /* 64 MiB: a wider range of offsets falls back to lookups */

typedef struct {
    PyObject_HEAD
    Slot *slots;
    Py_ssize_t capacity; /* a power of two */
    Py_ssize_t size;
    unsigned char *arena;
    Py_ssize_t arena_used;
    Py_ssize_t arena_capacity;
    uint64_t *bits;
    int64_t bits_base;   /* the offset of bit 0: the first put's */
    int64_t bits_last;   /* the last put's offset */
    int64_t bits_words;  /* allocated 64-bit words */
    int bits_state;
    unsigned char *reserve; /* the address range the slots grow in (see keymap_grow), or NULL: malloc'd */
    uint32_t key_class;  /* with classes > 1, the map takes only the keys of this hash class (set_key_class) */
    uint32_t classes;
    int checks_none;     /* its scans check no batch: a later pass checks them all first (skip_batch_checks) */
    int bits_foreign;    /* its bitmap holds bits OR'd in from other maps (or_superseded_bits), not its scan's */
    Py_buffer *deferred; /* blobs put only when the map is first read (defer_key_map) */
    Py_ssize_t deferred_count, deferred_done, deferred_capacity;
    struct PutPipe *pipe; /* while the scan's puts run on their own thread (start_pipeline), else NULL */
    int64_t scan_base;   /* the scan's first put (bits_base until finish_spill widens the bitmap) */
    struct Spill *spill; /* a budget for the table (spill_key_map), until finish_spill; else NULL */
    int spilled;         /* finish_spill replayed it: only the bitmap answers (keymap_superseded) */
    int64_t spilled_keys; /* then: its keys, every class's */
} KeyMap;

typedef struct Spill Spill;

/* key_map.c: the slow paths of the inline functions below */
int keymap_grow(KeyMap *m);
__attribute__((noinline)) int keymap_insert(KeyMap *m, Slot **s, const unsigned char *key, Py_ssize_t n, uint64_t hash);
void bits_reserve(KeyMap *m, int64_t offset);
int keymap_complete(KeyMap *m); /* blob_io.c: the deferred blobs put */
int pipe_finish(KeyMap *m); /* put_pipeline.c */
int spill_put_scanned(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset); /* spill.c */
void spill_free(KeyMap *m);

static inline void
bits_off(KeyMap *m)
{
    free(m->bits);
    m->bits = NULL;
    m->bits_words = 0;
    m->bits_state = BITS_OFF;
}

static inline uint64_t
hash_bytes(const unsigned char *s, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) {
        h = (h ^ s[i]) * 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* A key's hash class of `classes` (the map by key hash of a parallel round): from the hash's high half,
 * so that it does not follow the table's home slot, which its low bits give. */
static inline uint32_t
key_class_of(uint64_t hash, uint32_t classes)
{
    return (uint32_t)(((hash >> 32) * (uint64_t)classes) >> 32);
}

static inline int
keymap_takes(const KeyMap *m, uint64_t hash)
{
    return m->classes <= 1 || key_class_of(hash, m->classes) == m->key_class;
}

/*
 * Whether this map's scan checks the batch at base_offset (its CRC, every field of every record) or only
 * reads its keys. A map of every key checks every batch. Of K maps by key hash over one log, each checks
 * the batches of one class of base offsets (hashed), so every batch is checked once by one of them; if a
 * batch is corrupt, the map that checks it fails (the Python decoder raises) and with it the round, so the
 * keys that another map read from it unchecked are never used. A map told to skip the checks
 * (skip_batch_checks) checks none: its round checks every batch again before anything is used.
 */
static inline int
keymap_checks_batch(const KeyMap *m, int64_t base_offset)
{
    if (m->checks_none) {
        return 0;
    }
    if (m->classes <= 1) {
        return 1;
    }
    uint64_t h = (uint64_t)base_offset * 0x9E3779B97F4A7C15ULL;
    return key_class_of(h ^ (h >> 29), m->classes) == m->key_class;
}

/*
 * Whether every batch of offsets [first, last] was read this round by the scan whose puts made this map's
 * bitmap, its CRC and every record checked (a map of every key that checks every batch): the filter then
 * need not check it again. The scan reads the whole dirty section in offset order, so a batch that lies
 * within the bitmap's offsets is one it read; the segments are sealed, and the cleaner holds the log.
 */
static inline int
keymap_scan_checked(const KeyMap *m, int64_t first, int64_t last)
{
    return m->bits_state == BITS_VALID && !m->bits_foreign && !m->checks_none && m->classes <= 1 &&
           first >= m->scan_base && last <= m->bits_last;
}

/* The slot holding the key, or the empty slot where it would go. Inlined: a scan's put is mostly this. */
static inline __attribute__((always_inline)) Slot *
keymap_find(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash)
{
    Py_ssize_t j = (Py_ssize_t)(hash & (uint64_t)(m->capacity - 1));
    for (;;) {
        Slot *s = &m->slots[j];
        if (s->key_length < 0 ||
            (s->hash == hash && s->key_length == n && keys_equal(slot_key(m->arena, s), key, n))) {
            return s;
        }
        j = (j + 1) & (m->capacity - 1);
    }
}

/* How many keys ahead a loop over a batch's keys asks for their slots: enough to overlap the misses,
 * few enough that the CPU keeps every request (it tracks only so many). */
#define PREFETCH_DISTANCE 24

/* Hint the CPU to fetch the key's slot now: a batch's lookups then overlap their cache misses. */
static inline void
keymap_prefetch(const KeyMap *m, uint64_t hash)
{
    __builtin_prefetch(&m->slots[hash & (uint64_t)(m->capacity - 1)]);
}

/* Map the key to offset; *previous (if given) gets the offset it replaced, or -1. */
static inline int
keymap_put_hashed(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset,
                  int64_t *previous)
{
    Slot *s = keymap_find(m, key, n, hash);
    if (s->key_length < 0 && keymap_insert(m, &s, key, n, hash) < 0) {
        return -1;
    }
    if (previous != NULL) {
        *previous = s->offset;
    }
    s->offset = offset;
    return 0;
}

/* The put of a scan whose bitmap is valid and covers `offset`: the offset it supersedes gets its bit. */
static inline int
keymap_put_superseding(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset)
{
    int64_t previous;
    if (keymap_put_hashed(m, key, n, hash, offset, &previous) < 0) {
        return -1;
    }
    int64_t bit = previous - m->bits_base;
    if (previous >= 0 && bit >= 0) {
        m->bits[bit / 64] |= (uint64_t)1 << (bit % 64);
    }
    m->bits_last = offset;
    return 0;
}

/* keymap_put_hashed for a put of the log scan, in offset order: keeps the superseded bitmap. */
static inline int
keymap_put_scanned_table(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset)
{
    if (m->bits_state == BITS_VALID && offset > m->bits_last && offset - m->bits_base < m->bits_words * 64) {
        /* the usual case: the next offset of the scan, its bit already allocated */
        return keymap_put_superseding(m, key, n, hash, offset);
    }
    if (m->bits_state == BITS_EMPTY) {
        m->bits_state = BITS_VALID;
        m->bits_base = m->scan_base = offset;
        m->bits_last = offset - 1;
    }
    if (m->bits_state == BITS_VALID) {
        if (offset <= m->bits_last) {
            bits_off(m);
        }
        else {
            bits_reserve(m, offset);
        }
    }
    if (m->bits_state != BITS_VALID) {
        return keymap_put_hashed(m, key, n, hash, offset, NULL);
    }
    return keymap_put_superseding(m, key, n, hash, offset);
}

/* A put of the log scan: into the table, or (a map over its budget: spill.c) to its class's file. */
static inline int
keymap_put_scanned(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset)
{
    if (__builtin_expect(m->spill != NULL, 0)) {
        return spill_put_scanned(m, key, n, hash, offset);
    }
    return keymap_put_scanned_table(m, key, n, hash, offset);
}

/* 1: the record at `offset` is superseded, 0: it is its key's latest, -1: the bitmap cannot tell. A
 * spilled map's bitmap covers the round from its first offset: past its last put, nothing supersedes. */
static inline int
keymap_superseded(const KeyMap *m, int64_t offset)
{
    if (m->spilled && m->bits_state == BITS_VALID && offset > m->bits_last) {
        return 0;
    }
    if (m->bits_state != BITS_VALID || offset < m->bits_base || offset > m->bits_last) {
        return -1;
    }
    int64_t bit = offset - m->bits_base;
    return (int)((m->bits[bit / 64] >> (bit % 64)) & 1);
}

static inline int64_t
keymap_get_hashed(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash)
{
    if (m->capacity == 0) {
        return -1;
    }
    Slot *s = keymap_find(m, key, n, hash);
    return s->key_length < 0 ? -1 : s->offset;
}

/* A put from Python or a blob (any order): the superseded bitmap is off for the round. */
static inline int
keymap_put(KeyMap *m, const unsigned char *key, Py_ssize_t n, int64_t offset)
{
    bits_off(m);
    uint64_t hash = hash_bytes(key, n);
    return keymap_takes(m, hash) ? keymap_put_hashed(m, key, n, hash, offset, NULL) : 0;
}

#endif
