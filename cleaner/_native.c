/*
 * The cleaner's per-record work in C: the key map and the record filter of a batch's records area.
 *
 * KeyMap: exact key bytes -> latest offset, an open-addressing table over a byte arena (no Python object
 * per key). KeyMap.map_records(raw, count, base_offset, start) puts every keyed record at or above
 * `start` of one decompressed records area. filter_records(...) applies the record rules of
 * cleaner.rules.filter_batch to one records area and re-encodes the survivors (attributes 0, timestamp
 * delta against the new base timestamp, every other field copied), exactly as the Python encoder writes
 * them. KeyMap.map_batches and filter_batches do the same for a run of data batches (header and CRC-32C
 * included; compressed ones decompressed by the system's libraries through service.storage._codecs, or by
 * a registered Python codec function); the map built by such scans in offset order also answers "is this record superseded?" from a
 * bitmap, without a second lookup; between start_pipeline and finish_pipeline a map's scans hand their
 * puts to a thread of the map's own. scan_producer_headers reads a segment's batch headers. All release
 * the GIL for their loops.
 *
 * On ANY anomaly (truncation, bad lengths, a varint not in its shortest form, invalid UTF-8 in a header
 * key, overflow) they raise Fallback, and the caller runs the Python rules, which stay the specification
 * and the source of every error message. So this file holds no format rules beyond the byte layout.
 */
#define _GNU_SOURCE /* sync_file_range */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <errno.h>
#include <unistd.h>
#include <pthread.h>

#include "../service/storage/system_codecs.h"
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && __GNUC__ >= 10))
#define CRC32C_VPCLMUL 1 /* the compiler knows the AVX-512 carry-less multiply: crc32c_vpclmul */
#include <immintrin.h>
#endif

static PyObject *fallback_error = NULL;

/* -- varints ------------------------------------------------------------------------------------- */

/* A zig-zag varint in its shortest form (what the Python encoder writes); -1 otherwise. */
static int
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

static Py_ssize_t
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

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF), as Python's decoder accepts it. */
static int
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

/* -- the key map --------------------------------------------------------------------------------- */

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
} KeyMap;

static int keymap_complete(KeyMap *m); /* with the blob functions, at the end of the file */
static int pipe_finish(KeyMap *m); /* with the put pipeline, after the map's scans */

static uint64_t
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
           first >= m->bits_base && last <= m->bits_last;
}

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

static int
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

/* A new key into its empty slot *s (the table grown first if it would fill past 3/4, *s found again):
 * 0, or -1 (no memory). Out of line: most puts of a scan find their key. */
static __attribute__((noinline)) int
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

static void
bits_off(KeyMap *m)
{
    free(m->bits);
    m->bits = NULL;
    m->bits_words = 0;
    m->bits_state = BITS_OFF;
}

/* Make room for bit (offset - base), or turn the bitmap off (too wide a range, no memory). */
static void
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
static int
keymap_put_scanned(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash, int64_t offset)
{
    if (m->bits_state == BITS_VALID && offset > m->bits_last && offset - m->bits_base < m->bits_words * 64) {
        /* the usual case: the next offset of the scan, its bit already allocated */
        return keymap_put_superseding(m, key, n, hash, offset);
    }
    if (m->bits_state == BITS_EMPTY) {
        m->bits_state = BITS_VALID;
        m->bits_base = offset;
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

/* 1: the record at `offset` is superseded, 0: it is its key's latest, -1: the bitmap cannot tell. */
static inline int
keymap_superseded(const KeyMap *m, int64_t offset)
{
    if (m->bits_state != BITS_VALID || offset < m->bits_base || offset > m->bits_last) {
        return -1;
    }
    int64_t bit = offset - m->bits_base;
    return (int)((m->bits[bit / 64] >> (bit % 64)) & 1);
}

/* Whether the bitmap covers [first, last] and marks every offset in it superseded (a word at a time). */
static int
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

static int
keymap_put(KeyMap *m, const unsigned char *key, Py_ssize_t n, int64_t offset)
{
    bits_off(m);
    uint64_t hash = hash_bytes(key, n);
    return keymap_takes(m, hash) ? keymap_put_hashed(m, key, n, hash, offset, NULL) : 0;
}

static int64_t
keymap_get_hashed(KeyMap *m, const unsigned char *key, Py_ssize_t n, uint64_t hash)
{
    if (m->capacity == 0) {
        return -1;
    }
    Slot *s = keymap_find(m, key, n, hash);
    return s->key_length < 0 ? -1 : s->offset;
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

/* -- CRC-32C (Castagnoli), as Kafka's batch CRC ------------------------------------------------------ */

/*
 * The CPU's crc32 instruction takes 3 cycles but can start one every cycle: three streams over three
 * blocks run at once, and their CRCs are combined by "shifting" a CRC over a block of zeros, a linear map
 * over GF(2) applied through four byte tables (Mark Adler's crc32c.c, zlib licence).
 */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc32c_long[4][256];
static uint32_t crc32c_short[4][256];

static uint32_t
gf2_matrix_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++) {
        if (vec & 1) {
            sum ^= *mat;
        }
    }
    return sum;
}

static void
gf2_matrix_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++) {
        square[n] = gf2_matrix_times(mat, mat[n]);
    }
}

/* The operator appending `len` zero bytes (a power of two) to a CRC's input. */
static void
crc32c_zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32];
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++) {
        odd[n] = (uint32_t)1 << (n - 1);
    }
    gf2_matrix_square(even, odd); /* two zero bits */
    gf2_matrix_square(odd, even); /* four */
    do {
        gf2_matrix_square(even, odd); /* first pass: one zero byte */
        len >>= 1;
        if (len == 0) {
            return;
        }
        gf2_matrix_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof odd);
}

static void
crc32c_zeros(uint32_t zeros[4][256], size_t len)
{
    uint32_t op[32];
    crc32c_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_matrix_times(op, n);
        zeros[1][n] = gf2_matrix_times(op, n << 8);
        zeros[2][n] = gf2_matrix_times(op, n << 16);
        zeros[3][n] = gf2_matrix_times(op, n << 24);
    }
}

static inline uint32_t
crc32c_shift(uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xFF] ^ zeros[1][(crc >> 8) & 0xFF] ^ zeros[2][(crc >> 16) & 0xFF] ^ zeros[3][crc >> 24];
}

static uint32_t crc32c_table[256];
static int has_sse42 = 0;
#ifdef CRC32C_VPCLMUL
static int has_vpclmul = 0; /* VPCLMULQDQ on 512-bit registers: crc32c_vpclmul */
#endif

static void
crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc32c_table[i] = c;
    }
    crc32c_zeros(crc32c_long, CRC_LONG);
    crc32c_zeros(crc32c_short, CRC_SHORT);
#if defined(__x86_64__)
    __builtin_cpu_init();
    has_sse42 = __builtin_cpu_supports("sse4.2");
#ifdef CRC32C_VPCLMUL
    has_vpclmul = has_sse42 && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("pclmul");
#endif
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static inline uint64_t
crc32c_word(uint64_t c, const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return __builtin_ia32_crc32di(c, w);
}

/* Three streams of `block` bytes at a time while 3 blocks remain; returns the bytes consumed. */
__attribute__((target("sse4.2"))) static size_t
crc32c_sse42_blocks(uint32_t *c, const unsigned char *p, size_t n, size_t block, uint32_t zeros[4][256])
{
    size_t done = 0;
    while (n - done >= 3 * block) {
        const unsigned char *q = p + done, *end = q + block;
        uint64_t c0 = *c, c1 = 0, c2 = 0;
        for (; q < end; q += 8) {
            c0 = crc32c_word(c0, q);
            c1 = crc32c_word(c1, q + block);
            c2 = crc32c_word(c2, q + 2 * block);
        }
        *c = crc32c_shift(zeros, (uint32_t)c0) ^ (uint32_t)c1;
        *c = crc32c_shift(zeros, *c) ^ (uint32_t)c2;
        done += 3 * block;
    }
    return done;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t c, const unsigned char *p, size_t n)
{
    size_t done = crc32c_sse42_blocks(&c, p, n, CRC_LONG, crc32c_long);
    done += crc32c_sse42_blocks(&c, p + done, n - done, CRC_SHORT, crc32c_short);
    p += done;
    n -= done;
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        c64 = crc32c_word(c64, p);
    }
    c = (uint32_t)c64;
    for (; n; n--, p++) {
        c = __builtin_ia32_crc32qi(c, *p);
    }
    return c;
}
#endif

/*
 * CRC-32C by carry-less multiplication on 512-bit registers (VPCLMULQDQ), where the CPU has it: 256 bytes
 * a step in 16 lanes of 128 bits, each lane folded 2048 bits forward (lane' = lo * K1 ^ hi * K2 ^ next
 * 16 bytes, the K the reflected x^(d+32), x^(d-32) mod P shifted left by one, as in Intel's "Fast CRC
 * computation using PCLMULQDQ"); then the lanes folded into one, whose 16 bytes the crc32 instruction
 * finishes, and the tail of under 256 bytes by crc32c_sse42. The running value in and out is the raw
 * register (no inversion), as crc32c_sse42's. Needs n >= 256.
 */
#ifdef CRC32C_VPCLMUL
#define FOLD_KEYS(d_plus, d_minus) _mm512_set_epi64(d_minus, d_plus, d_minus, d_plus, d_minus, d_plus, d_minus, d_plus)

__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2"))) static inline __m512i
fold512(__m512i x, __m512i keys, __m512i next)
{
    __m512i lo = _mm512_clmulepi64_epi128(x, keys, 0x00), hi = _mm512_clmulepi64_epi128(x, keys, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2"))) static inline __m128i
fold128(__m128i x, uint64_t k_plus, uint64_t k_minus, __m128i next)
{
    __m128i keys = _mm_set_epi64x((long long)k_minus, (long long)k_plus);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, keys, 0x00), _mm_clmulepi64_si128(x, keys, 0x11)),
                         next);
}

__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2"))) static uint32_t
crc32c_vpclmul(uint32_t c, const unsigned char *p, size_t n)
{
    __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128),
            x3 = _mm512_loadu_si512(p + 192);
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
    p += 256;
    n -= 256;
    const __m512i k2048 = FOLD_KEYS(0x0dcb17aa4LL, 0x0b9e02b86LL);
    for (; n >= 256; n -= 256, p += 256) {
        x0 = fold512(x0, k2048, _mm512_loadu_si512(p));
        x1 = fold512(x1, k2048, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k2048, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k2048, _mm512_loadu_si512(p + 192));
    }
    /* x0..x2 folded 1536, 1024, 512 bits forward onto x3 */
    x3 = fold512(x0, FOLD_KEYS(0x0a87ab8a8LL, 0x0ab7aff2aLL), x3);
    x3 = fold512(x1, FOLD_KEYS(0x06992cea2LL, 0x00d3b6092LL), x3);
    x3 = fold512(x2, FOLD_KEYS(0x0740eef02LL, 0x09e4addf8LL), x3);
    /* its lanes 0..2 folded 384, 256, 128 bits forward onto lane 3 */
    __m128i a = _mm512_extracti32x4_epi32(x3, 3);
    a = fold128(_mm512_extracti32x4_epi32(x3, 0), 0x01c291d04ULL, 0x1d82c63daULL, a);
    a = fold128(_mm512_extracti32x4_epi32(x3, 1), 0x1384aa63aULL, 0x0ba4fc28eULL, a);
    a = fold128(_mm512_extracti32x4_epi32(x3, 2), 0x0f20c0dfeULL, 0x14cd00bd6ULL, a);
    uint64_t r = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(a));
    r = __builtin_ia32_crc32di(r, (uint64_t)_mm_extract_epi64(a, 1));
    return crc32c_sse42((uint32_t)r, p, n);
}
#endif

static uint32_t
crc32c_by_table(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n; n--, p++) {
        c = crc32c_table[(c ^ *p) & 0xFF] ^ (c >> 8);
    }
    return ~c;
}

static uint32_t
crc32c(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
#ifdef CRC32C_VPCLMUL
    if (has_vpclmul && n >= 256) {
        return ~crc32c_vpclmul(0xFFFFFFFFu, p, n);
    }
#endif
    if (has_sse42) {
        return ~crc32c_sse42(0xFFFFFFFFu, p, n);
    }
#endif
    return crc32c_by_table(p, n);
}

/* crc32c_by_table(data): the portable path, for the tests on machines with SSE4.2 */
static PyObject *
crc32c_by_table_py(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t c = crc32c_by_table(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *
crc32c_py(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t c;
    Py_BEGIN_ALLOW_THREADS
    c = crc32c(view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

/* -- mapping records ------------------------------------------------------------------------------- */

/*
 * A scan parses records into entries (key hash, offset, key bytes: a copy, so the read buffer can be
 * reused at once), then puts them in order. The two halves are about equal work (the puts wait on the
 * table's cache misses), so while a pipeline runs (start_pipeline) the puts go to a thread of their own:
 * the parsing thread hands over each call's entries as a block and goes on with the next read chunk.
 */
typedef struct PutBlock {
    unsigned char *data;
    size_t used, capacity;
    struct PutBlock *next;
} PutBlock;

#define ENTRY_HEADER 20 /* key hash (uint64), offset (int64), key length (uint32); then the key, to 8 bytes */

static inline size_t
entry_size(uint32_t key_length)
{
    return (ENTRY_HEADER + (size_t)key_length + 7) & ~(size_t)7;
}

/* Room for `more` bytes of entries; 0, or -1 (no memory: the block is as it was). */
static int
block_reserve(PutBlock *b, size_t more)
{
    if (b->used + more <= b->capacity) {
        return 0;
    }
    size_t capacity = b->capacity ? b->capacity : 1 << 16;
    while (capacity < b->used + more) {
        capacity *= 2;
    }
    unsigned char *data = realloc(b->data, capacity);
    if (data == NULL) {
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

/* The entry after `e`. */
static inline const unsigned char *
next_entry(const unsigned char *e)
{
    uint32_t n;
    memcpy(&n, e + 16, 4);
    return e + entry_size(n);
}

/* Put entries [p, end) in order, each slot asked for PREFETCH_DISTANCE entries ahead: 0, or -1 (no memory). */
static int
put_entries(KeyMap *m, const unsigned char *p, const unsigned char *end)
{
    const unsigned char *ahead = p;
    for (int i = 0; i < PREFETCH_DISTANCE && ahead < end; i++) {
        uint64_t hash;
        memcpy(&hash, ahead, 8);
        keymap_prefetch(m, hash);
        ahead = next_entry(ahead);
    }
    while (p < end) {
        uint64_t hash;
        int64_t offset;
        uint32_t n;
        memcpy(&hash, p, 8);
        memcpy(&offset, p + 8, 8);
        memcpy(&n, p + 16, 4);
        if (ahead < end) {
            uint64_t next_hash;
            memcpy(&next_hash, ahead, 8);
            keymap_prefetch(m, next_hash);
            ahead = next_entry(ahead);
        }
        if (keymap_put_scanned(m, p + ENTRY_HEADER, (Py_ssize_t)n, hash, offset) < 0) {
            return -1;
        }
        p += entry_size(n);
    }
    return 0;
}

/* -- the put pipeline: a thread that puts the scan's blocks of entries, in the order they came -------- */

#define PIPE_BLOCKS 4 /* blocks in flight: the parser waits for a free one beyond that */

typedef struct PutPipe {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    PutBlock *head, *tail; /* to put, in order */
    PutBlock *spare;       /* put, to reuse */
    int blocks;            /* allocated */
    int busy;              /* the thread is putting a block */
    int stop;
    int failed;            /* a put ran out of memory: the map is incomplete, the next drain says so */
} PutPipe;

static void *
pipe_main(void *arg)
{
    KeyMap *m = arg;
    PutPipe *p = m->pipe;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->head == NULL && !p->stop) {
            pthread_cond_wait(&p->changed, &p->lock);
        }
        PutBlock *b = p->head;
        if (b == NULL) {
            break;
        }
        p->head = b->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        p->busy = 1;
        int failed = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (!failed && put_entries(m, b->data, b->data + b->used) < 0) {
            failed = 1;
        }
        pthread_mutex_lock(&p->lock);
        p->failed = failed;
        p->busy = 0;
        b->used = 0;
        b->next = p->spare;
        p->spare = b;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* A block to fill (waits while PIPE_BLOCKS are in flight), or NULL (no memory). */
static PutBlock *
pipe_take(PutPipe *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->spare == NULL && p->blocks >= PIPE_BLOCKS) {
        pthread_cond_wait(&p->changed, &p->lock);
    }
    PutBlock *b = p->spare;
    if (b != NULL) {
        p->spare = b->next;
    }
    else if ((b = calloc(1, sizeof(PutBlock))) != NULL) {
        p->blocks++;
    }
    pthread_mutex_unlock(&p->lock);
    return b;
}

/* Hand a filled block to the putting thread (an empty one goes back to the spares). */
static void
pipe_push(PutPipe *p, PutBlock *b)
{
    pthread_mutex_lock(&p->lock);
    b->next = NULL;
    if (b->used == 0) {
        b->next = p->spare;
        p->spare = b;
    }
    else if (p->tail != NULL) {
        p->tail->next = b;
        p->tail = b;
    }
    else {
        p->head = p->tail = b;
    }
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* Wait until every block handed over is put: 0, or -1 (a put ran out of memory). No GIL needed. */
static int
pipe_drain(PutPipe *p)
{
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    while (p->head != NULL || p->busy) {
        pthread_cond_wait(&p->changed, &p->lock);
    }
    int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return failed ? -1 : 0;
}

/* Stop the thread once every block is put, free the pipeline: 0, or -1 (a put ran out of memory). */
static int
pipe_finish(KeyMap *m)
{
    PutPipe *p = m->pipe;
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    int failed = p->failed;
    while (p->spare != NULL) {
        PutBlock *b = p->spare;
        p->spare = b->next;
        free(b->data);
        free(b);
    }
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
    m->pipe = NULL;
    return failed ? -1 : 0;
}

/* The map settled for a read or a put from Python: the pipeline's blocks put (the GIL released while
 * waiting), and with `complete`, the deferred blobs too. 0, or -1 with MemoryError set. */
static int
keymap_settle(KeyMap *m, int complete)
{
    int rc = 0;
    if (m->pipe != NULL) {
        Py_BEGIN_ALLOW_THREADS
        rc = pipe_drain(m->pipe);
        Py_END_ALLOW_THREADS
    }
    if (rc == 0 && complete) {
        rc = keymap_complete(m);
    }
    if (rc < 0) {
        PyErr_NoMemory();
    }
    return rc;
}

/* start_pipeline() -> bool: from now on map_batches and map_records hand their puts to a thread of the
 * map's own (False: no thread could start; the puts stay on the caller's thread). Until finish_pipeline,
 * every other use of the map first waits for the puts handed over. */
static PyObject *
keymap_start_pipeline(KeyMap *m, PyObject *unused)
{
    if (m->pipe != NULL) {
        Py_RETURN_TRUE;
    }
    PutPipe *p = calloc(1, sizeof(PutPipe));
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    m->pipe = p;
    if (pthread_create(&p->thread, NULL, pipe_main, m) != 0) {
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        free(p);
        m->pipe = NULL;
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* finish_pipeline() -> None: every handed-over put done, the thread ended (MemoryError if a put failed). */
static PyObject *
keymap_finish_pipeline(KeyMap *m, PyObject *unused)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pipe_finish(m);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* Parse one records area into entries appended to `b` (the keyed records at or above `start` of this
 * map's class): 0 ok, 1 fallback (nothing appended: every record is parsed before the caller puts), 2 no
 * memory. *last_put: the last entry's offset, or unchanged. */
static int
parse_area(const KeyMap *m, PutBlock *b, const unsigned char *buf, Py_ssize_t end, Py_ssize_t count,
           int64_t base_offset, int64_t start, int64_t *last_put, int checks)
{
    if (count < 0 || count > end) { /* a record takes at least 7 bytes: a corrupt count */
        return 1;
    }
    /* each entry is at most its key plus ENTRY_HEADER + 7 */
    if (block_reserve(b, (size_t)end + (size_t)count * (ENTRY_HEADER + 7)) < 0) {
        return 2;
    }
    size_t mark = b->used;
    int64_t last = -1;
    Py_ssize_t pos = 0;
    for (Py_ssize_t n = 0; n < count; n++) {
        RecordView r;
        int64_t offset;
        if ((checks ? read_record(buf, end, &pos, &r) : read_record_key(buf, end, &pos, &r)) < 0
            || __builtin_add_overflow(base_offset, r.offset_delta, &offset)) {
            b->used = mark;
            return 1;
        }
        if (r.key >= 0 && offset >= start) {
            uint64_t hash = hash_bytes(buf + r.key, r.key_length);
            if (!keymap_takes(m, hash)) {
                continue; /* another class's key (a map by key hash) */
            }
            unsigned char *e = b->data + b->used;
            uint32_t n32 = (uint32_t)r.key_length;
            memcpy(e, &hash, 8);
            memcpy(e + 8, &offset, 8);
            memcpy(e + 16, &n32, 4);
            memcpy(e + ENTRY_HEADER, buf + r.key, (size_t)r.key_length);
            b->used += entry_size(n32);
            last = offset;
        }
    }
    if (pos != end) {
        b->used = mark;
        return 1;
    }
    if (last >= 0) {
        *last_put = last;
    }
    return 0;
}

/* The entries a call parsed into `b`: handed to the pipeline (which then owns `b`), or put here and `b`
 * emptied for the next batch. 0, or 2 (no memory). */
static int
put_or_hand_over(KeyMap *m, PutBlock *b)
{
    if (m->pipe != NULL) {
        pipe_push(m->pipe, b);
        return 0;
    }
    int rc = put_entries(m, b->data, b->data + b->used);
    b->used = 0;
    return rc < 0 ? 2 : 0;
}

/* The block a call parses into: the pipeline's next one, or `own` (emptied); NULL if no memory. */
static PutBlock *
block_for_call(KeyMap *m, PutBlock *own)
{
    own->used = 0;
    return m->pipe != NULL ? pipe_take(m->pipe) : own;
}

/* map_records(raw, count, base_offset, start) -> (records read, last offset put or -1) */
static PyObject *
keymap_map_records(KeyMap *m, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, start;
    if (!PyArg_ParseTuple(args, "y*nLL", &view, &count, &base_offset, &start)) {
        return NULL;
    }
    if (m->deferred_done < m->deferred_count && keymap_settle(m, 1) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PutBlock own = {0};
    int64_t last_put = -1;
    int status = 2;
    Py_BEGIN_ALLOW_THREADS
    PutBlock *b = block_for_call(m, &own);
    if (b != NULL) {
        status = parse_area(m, b, view.buf, view.len, count, base_offset, start, &last_put, 1);
        if (status == 0) {
            status = put_or_hand_over(m, b);
        }
        else if (b != &own) {
            pipe_push(m->pipe, b); /* left empty by the parse: back to the spares */
        }
    }
    Py_END_ALLOW_THREADS
    free(own.data);
    PyBuffer_Release(&view);
    if (status == 1) {
        PyErr_SetString(fallback_error, "records area needs the Python decoder");
        return NULL;
    }
    if (status == 2) {
        return PyErr_NoMemory();
    }
    return Py_BuildValue("nL", count, (long long)last_put);
}

static inline uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

#define BATCH_OVERHEAD 61
#define CODEC_BITS 0x07
#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20 /* a control batch (a transaction marker) is always the Python rules' */
#define CODECS 5              /* none, gzip, snappy, lz4, zstd */

/*
 * Compressed batches: the codec library's work, called from the C loops. cleaner.native registers the
 * decompress and compress functions of service.storage.compression (and its CompressionType members, by
 * id) at import, so a batch the C loops decompress or re-compress goes through the very functions the Python
 * rules call: same bytes out, the codecs' framing in one place. Each call takes the GIL back for its time.
 */
static PyObject *codec_decompress = NULL, *codec_compress = NULL, *codec_types = NULL;

/* The system's codec libraries as service.storage._codecs offers them (system_codecs.h, from its capsule):
 * called without the GIL, its compress writes what `compress` writes, its decompress reads what
 * `decompress` reads; -2 from either sends the batch to the registered function. */
static const SystemCodecs *system_codecs = NULL;
static int system_codecs_on = 1; /* set_system_codecs(False): the tests' way to the Python functions */

/* set_codecs(decompress, compress, codec_types[, system_codecs capsule]) -> None */
static PyObject *
set_codecs(PyObject *self, PyObject *args)
{
    PyObject *decompress, *compress, *types, *capsule = Py_None;
    if (!PyArg_ParseTuple(args, "OOO!|O", &decompress, &compress, &PyTuple_Type, &types, &capsule)) {
        return NULL;
    }
    if (!PyCallable_Check(decompress) || !PyCallable_Check(compress) || PyTuple_GET_SIZE(types) != CODECS) {
        PyErr_SetString(PyExc_TypeError, "set_codecs(decompress, compress, a tuple of the 5 codec types)");
        return NULL;
    }
    const SystemCodecs *codecs = NULL;
    if (capsule != Py_None && (codecs = PyCapsule_GetPointer(capsule, SYSTEM_CODECS_CAPSULE)) == NULL) {
        return NULL;
    }
    Py_XSETREF(codec_decompress, Py_NewRef(decompress));
    Py_XSETREF(codec_compress, Py_NewRef(compress));
    Py_XSETREF(codec_types, Py_NewRef(types));
    system_codecs = codecs;
    Py_RETURN_NONE;
}

/* Whether the C loops read a batch with these attributes: a data batch, with no codec or one whose functions
 * are registered; transactional, or an uncompressed control batch (a marker), only when the caller hands over
 * the transaction state (`transactional`: a TxnCursor). */
static inline int
loops_read(unsigned attributes, int transactional)
{
    unsigned codec = attributes & CODEC_BITS;
    if (attributes & CONTROL_BIT) {
        return transactional && codec == 0;
    }
    return (transactional || !(attributes & TRANSACTIONAL_BIT)) &&
           (codec == 0 || (codec < CODECS && codec_types != NULL));
}

enum { MARKER_ABORT = 0, MARKER_COMMIT = 1 };

/* The type of the transaction marker in the control batch at b of `size` bytes (one record, whose key is
 * version 0 and type ABORT or COMMIT), or -1: any other control batch is the Python rules'. */
static int
marker_type(const unsigned char *b, int64_t size)
{
    Py_ssize_t pos = 0, end = (Py_ssize_t)size - BATCH_OVERHEAD;
    RecordView r;
    if ((int32_t)be32(b + 57) != 1 || read_record(b + BATCH_OVERHEAD, end, &pos, &r) < 0 || pos != end ||
        r.key < 0 || r.key_length != 4) {
        return -1;
    }
    const unsigned char *key = b + BATCH_OVERHEAD + r.key;
    return key[0] == 0 && key[1] == 0 && key[2] == 0 && key[3] <= MARKER_COMMIT ? key[3] : -1;
}

/*
 * The aborted transactions of CleanedTransactionMetadata as the C loops read and change them, in an int64
 * buffer of the caller's (txn_metadata.NativeTxnCursor, which lays it out and takes it back): a header
 * (transactions, the next to start, ongoing, retained, ongoing when laid out), then per transaction its
 * (first offset, producer id), the ongoing ones first, then the pending ones in the order they start; per
 * ongoing aborted transaction (producer id, transaction, last offset of a data batch of it read, or -1);
 * the transactions whose ABORT marker a round kept (to re-index), in order.
 */
enum { TXN_COUNT, TXN_NEXT, TXN_ONGOING, TXN_RETAINED, TXN_HEADER = 5 };

typedef struct {
    int64_t *header, *txns, *ongoing, *retained;
    int reading;                       /* txn_read was called for a batch not taken yet */
    int64_t saved_next, saved_ongoing; /* the state before it: back if the loop leaves it to Python */
} TxnCursor;

/* The cursor over `obj`, a writable buffer of int64 laid out as above, its view held in `view` until the
 * caller releases it (when `t->header` is set): 0, or -1 with the error set (ValueError when it is not laid
 * out so). None leaves `t` unset: no transaction state handed over. */
static int
txn_cursor_get(PyObject *obj, Py_buffer *view, TxnCursor *t)
{
    if (obj == Py_None) {
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0) {
        return -1;
    }
    int64_t *cells = view->buf;
    Py_ssize_t n = view->len / 8 >= TXN_HEADER ? cells[TXN_COUNT] : -1;
    if (view->len % 8 != 0 || n < 0 || view->len / 8 != TXN_HEADER + 6 * n || cells[TXN_NEXT] < 0 ||
        cells[TXN_NEXT] > n || cells[TXN_ONGOING] < 0 || cells[TXN_ONGOING] > n || cells[TXN_RETAINED] < 0 ||
        cells[TXN_RETAINED] > n) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "not a transaction cursor");
        return -1;
    }
    t->header = cells;
    t->txns = cells + TXN_HEADER;
    t->ongoing = t->txns + 2 * n;
    t->retained = t->ongoing + 3 * n;
    return 0;
}

/* The producer's ongoing aborted transaction (its triple), or NULL. */
static int64_t *
txn_ongoing(const TxnCursor *t, int64_t producer_id)
{
    for (int64_t i = 0; i < t->header[TXN_ONGOING]; i++) {
        if (t->ongoing[3 * i] == producer_id) {
            return t->ongoing + 3 * i;
        }
    }
    return NULL;
}

/* _consume_aborted_up_to before reading a batch ending at `last_offset`: each transaction starting at or
 * before it becomes its producer's ongoing one (unless the producer has one). Until txn_taken, txn_leave
 * undoes it. */
static void
txn_read(TxnCursor *t, int64_t last_offset)
{
    int64_t *h = t->header;
    t->reading = 1;
    t->saved_next = h[TXN_NEXT];
    t->saved_ongoing = h[TXN_ONGOING];
    for (; h[TXN_NEXT] < h[TXN_COUNT] && t->txns[2 * h[TXN_NEXT]] <= last_offset; h[TXN_NEXT]++) {
        int64_t producer_id = t->txns[2 * h[TXN_NEXT] + 1];
        if (txn_ongoing(t, producer_id) == NULL) {
            int64_t *o = t->ongoing + 3 * h[TXN_ONGOING]++;
            o[0] = producer_id;
            o[1] = h[TXN_NEXT];
            o[2] = -1;
        }
    }
}

/* The batch txn_read was called for is taken: what reading it changed stays. */
static inline void
txn_taken(TxnCursor *t)
{
    t->reading = 0;
}

/* At a loop's end: a batch txn_read was called for but not taken is the Python rules', the state as
 * before it. */
static void
txn_leave(TxnCursor *t)
{
    if (t->reading) {
        t->header[TXN_NEXT] = t->saved_next;
        t->header[TXN_ONGOING] = t->saved_ongoing;
        t->reading = 0;
    }
}

/* An ABORT marker taken ends its producer's ongoing transaction `o` (from txn_ongoing), which is retained
 * (re-indexed) if a batch of its data was read. */
static void
txn_end_aborted(TxnCursor *t, int64_t *o)
{
    int64_t *h = t->header;
    if (o[2] >= 0) {
        t->retained[h[TXN_RETAINED]++] = o[1];
    }
    int64_t *last = t->ongoing + 3 * --h[TXN_ONGOING];
    if (o != last) {
        memcpy(o, last, 3 * sizeof(int64_t));
    }
}

/*
 * fn(codec, the n bytes at p) for a registered codec function, called with the GIL held: 0 and *out a new
 * bytes object; 1 when the function raised an Exception or returned no bytes (cleared: the batch is then
 * the Python rules', which raise the error with its context); 4 when it raised a BaseException that is no
 * Exception (KeyboardInterrupt, SystemExit), left set for the caller to return.
 */
static int
codec_call(PyObject *fn, unsigned codec, const unsigned char *p, Py_ssize_t n, PyObject **out)
{
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    PyObject *result = view == NULL ? NULL
                       : PyObject_CallFunctionObjArgs(fn, PyTuple_GET_ITEM(codec_types, codec), view, NULL);
    Py_XDECREF(view);
    if (result != NULL && PyBytes_CheckExact(result)) {
        *out = result;
        return 0;
    }
    Py_XDECREF(result);
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception)) {
        return 4;
    }
    PyErr_Clear();
    return 1;
}

/* Grow the array *slot to n items of item_size bytes; on failure it keeps its old block (freed later). */
static int
grow_array(void *slot, Py_ssize_t n, size_t item_size)
{
    void **array = (void **)slot;
    void *grown = realloc(*array, (size_t)n * item_size);
    if (grown == NULL) {
        return -1;
    }
    *array = grown;
    return 0;
}

/* The records area of a batch compressed with `codec`, by the system's library into f, without the GIL: 0,
 * or -1 when the Python function must read it (or no memory: then it tries). */
static int
system_decompress(unsigned codec, const unsigned char *p, size_t n, CodecBuffer *f)
{
    if (!system_codecs_on || system_codecs == NULL) {
        return -1;
    }
    return system_codecs->decompress(codec, p, n, f) == 0 ? 0 : -1;
}

/*
 * A compressed batch's records area (*area, *length), decompressed: by the system's library into f, else by
 * the registered Python function into *raw (the previous one released), the GIL taken back from *save for
 * that call. Called without the GIL, from inside Py_BEGIN_ALLOW_THREADS (save: &_save). 0 and *area,
 * *length now the records; else codec_call's 1 (the batch is the Python rules') or 4 (an error is set).
 */
static int
inflate_area(unsigned codec, const unsigned char **area, Py_ssize_t *length, CodecBuffer *f, PyObject **raw,
             PyThreadState **save)
{
    if (system_decompress(codec, *area, (size_t)*length, f) == 0) {
        *area = f->data;
        *length = (Py_ssize_t)f->length;
        return 0;
    }
    PyEval_RestoreThread(*save);
    Py_CLEAR(*raw);
    int rc = codec_call(codec_decompress, codec, *area, *length, raw);
    *save = PyEval_SaveThread();
    if (rc == 0) {
        *area = (const unsigned char *)PyBytes_AS_STRING(*raw);
        *length = PyBytes_GET_SIZE(*raw);
    }
    return rc;
}

/* set_system_codecs(on) -> None: whether the C loops use the system's libraries (service.storage._codecs's
 * served() lists them) or the registered Python functions alone */
static PyObject *
set_system_codecs(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    system_codecs_on = on;
    Py_RETURN_NONE;
}

/* Whether `value` is among the `n` ascending int64 at `values`. */
static int
sorted_contains(const int64_t *values, Py_ssize_t n, int64_t value)
{
    Py_ssize_t low = 0, high = n;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (values[middle] < value) {
            low = middle + 1;
        }
        else {
            high = middle;
        }
    }
    return low < n && values[low] == value;
}

/*
 * map_batches(buf, position, limit, start[, txns[, aborted]])
 *   -> (position reached, batches, records, bytes, last offset of the last batch or -1, latest or -1)
 *
 * Maps the data batches (magic 2, CRC-32C valid, at least one record, records in the encoder's form;
 * compressed ones decompressed by the system's codec library or the registered codec function; transactional
 * ones and COMMIT and ABORT markers only given `txns`, the aborted transactions of the map's
 * CleanedTransactionMetadata as a TxnCursor's buffer, which they change as its on_batch_read and
 * on_control_batch_read would: the data of an aborted transaction is read, not mapped; or given `aborted`
 * instead (txns None), the base offsets of the aborted data batches as sorted int64, which the caller
 * already knows: a data batch at one of them is read, not mapped, and every control batch of the encoder's
 * form is read, not mapped, whatever it marks) from `position` on,
 * each whole in `buf`, while the position is below `limit`; stops at the first other batch, which the caller
 * handles in Python (and which gets the right error message there). `latest` is where the key map's latest
 * offset stands after them.
 */
static PyObject *
keymap_map_batches(KeyMap *m, PyObject *args)
{
    Py_buffer view, txn_view = {0};
    Py_ssize_t pos, limit;
    long long start;
    PyObject *txn_obj = Py_None, *aborted_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*nnL|OO", &view, &pos, &limit, &start, &txn_obj, &aborted_obj)) {
        return NULL;
    }
    int transactional = txn_obj != Py_None;
    int listed = !transactional && aborted_obj != Py_None; /* the aborted data batches given by offset */
    Py_buffer listed_view = {0};
    TxnCursor txn = {0};
    if (txn_cursor_get(txn_obj, &txn_view, &txn) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (listed && PyObject_GetBuffer(aborted_obj, &listed_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const int64_t *listed_offsets = listed_view.buf;
    Py_ssize_t listed_count = listed_view.len / (Py_ssize_t)sizeof(int64_t);
    if (m->deferred_done < m->deferred_count && keymap_settle(m, 1) < 0) {
        if (transactional) {
            PyBuffer_Release(&txn_view);
        }
        if (listed) {
            PyBuffer_Release(&listed_view);
        }
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len, batches = 0, records = 0, bytes = 0;
    int64_t last_offset = -1, latest = -1;
    int status = 0;
    PutBlock own = {0};
    PyObject *raw = NULL; /* the last compressed batch's records, decompressed (released with the GIL) */
    CodecBuffer inflated = {0}; /* or decompressed by the system's codec library */
    if (pos < 0) {
        pos = len;
    }
    Py_BEGIN_ALLOW_THREADS
    PutBlock *block = block_for_call(m, &own);
    status = block == NULL ? 2 : 0;
    while (status == 0 && pos < limit && pos + BATCH_OVERHEAD <= len) {
        const unsigned char *b = buf + pos;
        int64_t size = (int64_t)(int32_t)be32(b + 8) + 12;
        if (size < BATCH_OVERHEAD || size > len - pos || b[16] != 2) {
            break;
        }
        unsigned attributes = (unsigned)b[21] << 8 | b[22];
        int32_t last_delta = (int32_t)be32(b + 23);
        int32_t count = (int32_t)be32(b + 57);
        int64_t base = be64(b);
        int checks = keymap_checks_batch(m, base);
        if (!loops_read(attributes, transactional || listed) || last_delta < 0 || count <= 0
            || (checks && crc32c(b + 21, (size_t)size - 21) != be32(b + 17))) {
            break;
        }
        int64_t *aborted = NULL; /* the ongoing aborted transaction the batch is of */
        int dropped = 0;        /* aborted data: read, not mapped */
        if (transactional) {
            txn_read(&txn, base + last_delta);
            aborted = (attributes & TRANSACTIONAL_BIT) ? txn_ongoing(&txn, be64(b + 43)) : NULL;
            dropped = aborted != NULL;
        }
        else if (listed && (attributes & (TRANSACTIONAL_BIT | CONTROL_BIT)) == TRANSACTIONAL_BIT) {
            dropped = sorted_contains(listed_offsets, listed_count, base);
        }
        if (attributes & CONTROL_BIT) {
            /* a marker: no key to put; an ABORT ends its producer's aborted transaction (a COMMIT changes
             * only what the map does not read of the transaction state: the ongoing committed producers);
             * given the aborted batches by offset, no state to change */
            int type = listed ? MARKER_COMMIT : checks ? marker_type(b, size) : -1;
            if (type < 0) {
                break;
            }
            if (type == MARKER_ABORT && aborted != NULL) {
                txn_end_aborted(&txn, aborted);
            }
            txn_taken(&txn);
            batches++;
            records += count;
            bytes += (Py_ssize_t)size;
            last_offset = base + last_delta;
            if (last_offset >= start) {
                latest = last_offset;
            }
            pos += (Py_ssize_t)size;
            continue;
        }
        int64_t last_put = -1;
        if (dropped) {
            if (aborted != NULL) {
                aborted[2] = base + last_delta;
            }
        }
        else {
            const unsigned char *area = b + BATCH_OVERHEAD;
            Py_ssize_t area_length = (Py_ssize_t)size - BATCH_OVERHEAD;
            if (attributes & CODEC_BITS) {
                int rc = inflate_area(attributes & CODEC_BITS, &area, &area_length, &inflated, &raw, &_save);
                if (rc != 0) {
                    status = rc == 1 ? 0 : rc; /* the codec refused it: Python's, with its error */
                    break;
                }
            }
            status = parse_area(m, block, area, area_length, count, base, start, &last_put, checks);
            if (status == 0 && block == &own) {
                status = put_or_hand_over(m, block); /* batch by batch: its keys still in cache */
            }
            if (status != 0) {
                status = status == 1 ? 0 : status; /* a batch in an odd encoding: Python's */
                break;
            }
        }
        txn_taken(&txn);
        batches++;
        records += count;
        bytes += (Py_ssize_t)size;
        last_offset = base + last_delta;
        if (last_put >= 0) {
            latest = last_put;
        }
        if (last_offset >= start) {
            latest = last_offset;
        }
        pos += (Py_ssize_t)size;
    }
    if (block != NULL && block != &own) {
        pipe_push(m->pipe, block); /* what it parsed: the run's batches before any it stopped at */
    }
    txn_leave(&txn);
    Py_END_ALLOW_THREADS
    Py_XDECREF(raw);
    free(inflated.data);
    free(own.data);
    if (transactional) {
        PyBuffer_Release(&txn_view);
    }
    if (listed) {
        PyBuffer_Release(&listed_view);
    }
    PyBuffer_Release(&view);
    if (status == 2) {
        return PyErr_NoMemory();
    }
    if (status == 4) {
        return NULL; /* a codec call's KeyboardInterrupt or the like */
    }
    return Py_BuildValue("nnnnLL", pos, batches, records, bytes, (long long)last_offset, (long long)latest);
}

static PyObject *
keymap_get_py(KeyMap *m, PyObject *arg)
{
    Py_buffer view;
    if (keymap_settle(m, 1) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int64_t offset = keymap_get(m, view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(offset);
}

static PyObject *
keymap_put_py(KeyMap *m, PyObject *args)
{
    Py_buffer view;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &view, &offset)) {
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
    keymap_release_deferred(m);
    Py_RETURN_NONE;
}

static Py_ssize_t
keymap_len(KeyMap *m)
{
    if (keymap_settle(m, 1) < 0) {
        return -1;
    }
    return m->size;
}

static PyMethodDef keymap_methods[] = {
    {"map_records", (PyCFunction)keymap_map_records, METH_VARARGS,
     "Put the keyed records at or above start of one records area."},
    {"map_batches", (PyCFunction)keymap_map_batches, METH_VARARGS,
     "Map the data batches of a buffer from a position; stop at the first other one."},
    {"get", (PyCFunction)keymap_get_py, METH_O, "The key's latest offset, -1 if absent."},
    {"put", (PyCFunction)keymap_put_py, METH_VARARGS, "Map key to offset."},
    {"clear", (PyCFunction)keymap_clear, METH_NOARGS, "Forget every key."},
    {"start_pipeline", (PyCFunction)keymap_start_pipeline, METH_NOARGS,
     "Hand the scans' puts to a thread of the map's own, until finish_pipeline."},
    {"finish_pipeline", (PyCFunction)keymap_finish_pipeline, METH_NOARGS,
     "Wait for every handed-over put and end the map's put thread."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods keymap_as_sequence = {.sq_length = (lenfunc)keymap_len};

static PyTypeObject KeyMapType = {
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

/* -- the record filter --------------------------------------------------------------------------- */

/* Work arrays of the filter, grown as batches need them (malloc: used with the GIL released). */
typedef struct {
    RecordView *views;
    RecordView *kept;
    uint64_t *hashes;
    int64_t *timestamps;
    Py_ssize_t capacity;
    unsigned char *out; /* the survivors' records area */
    size_t out_capacity;
} FilterScratch;

static int
filter_scratch_reserve(FilterScratch *sc, Py_ssize_t n, size_t out_bytes)
{
    if (n > sc->capacity) {
        if (grow_array(&sc->views, n, sizeof(RecordView)) < 0 || grow_array(&sc->kept, n, sizeof(RecordView)) < 0
            || grow_array(&sc->hashes, n, sizeof(uint64_t)) < 0
            || grow_array(&sc->timestamps, n, sizeof(int64_t)) < 0) {
            return -1;
        }
        sc->capacity = n;
    }
    if (out_bytes > sc->out_capacity) {
        unsigned char *out = realloc(sc->out, out_bytes);
        if (out == NULL) {
            return -1;
        }
        sc->out = out;
        sc->out_capacity = out_bytes;
    }
    return 0;
}

static void
filter_scratch_free(FilterScratch *sc)
{
    free(sc->views);
    free(sc->kept);
    free(sc->hashes);
    free(sc->timestamps);
    free(sc->out);
}

typedef struct {
    /* inputs */
    int64_t base_offset, base_timestamp, log_append_time, horizon, map_latest_offset, now_ms, new_horizon;
    int has_log_append_time, has_horizon, discard_all, is_control, can_discard;
    int use_bitmap; /* a plain batch: the key map's superseded bitmap may answer for it */
    KeyMap *key_map;
    /* outputs */
    Py_ssize_t read, kept, invalid, out_length; /* out_length 0: nothing kept, or the batch unchanged */
    int64_t max_ts, new_base;
    int horizon_out; /* 0 none, else the batch's own (has_horizon) or new_horizon */
} FilterCall;

/*
 * The record rules of rules.filter_batch over one records area; the survivors re-encoded into sc->out
 * (attributes 0, timestamp delta against the new base timestamp, every other field copied) when some
 * record goes or a horizon is added. 0 ok, 1 fallback (odd encoding), 2 no memory.
 */
static int
filter_area(FilterScratch *sc, const unsigned char *buf, Py_ssize_t end, Py_ssize_t count, FilterCall *c)
{
    c->read = c->kept = c->invalid = c->out_length = 0;
    c->max_ts = INT64_MIN;
    c->new_base = 0;
    c->horizon_out = 0;
    if (count < 0 || count > end) { /* a record takes at least 7 bytes: a corrupt count */
        return 1;
    }
    /* each record grows at most by its timestamp delta's new size (<= 10) minus the old (>= 1) */
    if (filter_scratch_reserve(sc, count, (size_t)end + (size_t)count * 20 + 16) < 0) {
        return 2;
    }
    KeyMap *key_map = c->key_map != NULL && c->key_map->capacity ? c->key_map : NULL;
    int retains_deletes = !c->has_horizon || c->now_ms < c->horizon;
    int has_tombstone = 0;
    Py_ssize_t pos = 0;
    /* pass 1: parse every record, prefetching the key map slot of each key that will be looked up */
    for (; c->read < count; c->read++) {
        RecordView *r = &sc->views[c->read];
        if (read_record(buf, end, &pos, r) < 0) {
            return 1;
        }
        r->superseded = -1;
        if (!c->discard_all && !c->is_control && r->key >= 0 && key_map != NULL) {
            int64_t offset;
            if (c->use_bitmap && !__builtin_add_overflow(c->base_offset, r->offset_delta, &offset)) {
                r->superseded = keymap_superseded(key_map, offset);
            }
            if (r->superseded < 0) {
                if (keymap_complete(key_map) < 0) { /* a first lookup the bitmap cannot answer */
                    return 2;
                }
                sc->hashes[c->read] = hash_bytes(buf + r->key, r->key_length);
                keymap_prefetch(key_map, sc->hashes[c->read]);
            }
        }
    }
    if (pos != end) {
        return 1;
    }
    /* pass 2: the record rules, in order */
    for (Py_ssize_t i = 0; !c->discard_all && i < c->read; i++) {
        RecordView *r = &sc->views[i];
        int64_t offset;
        if (__builtin_add_overflow(c->base_offset, r->offset_delta, &offset)) {
            return 1;
        }
        if (!c->is_control && offset <= c->map_latest_offset) {
            if (r->key < 0) {
                c->invalid++;
                continue;
            }
            int superseded = r->superseded;
            if (superseded < 0) {
                int64_t latest = key_map == NULL ? -1
                                 : keymap_get_hashed(key_map, buf + r->key, r->key_length, sc->hashes[i]);
                superseded = offset < latest;
            }
            if (superseded || (!r->has_value && !retains_deletes)) {
                continue;
            }
        }
        int64_t ts;
        if (c->has_log_append_time) {
            ts = c->log_append_time;
        }
        else if (__builtin_add_overflow(c->base_timestamp, r->timestamp_delta, &ts)) {
            return 1;
        }
        sc->timestamps[c->kept] = ts;
        sc->kept[c->kept++] = *r;
        has_tombstone = has_tombstone || !r->has_value;
        if (ts > c->max_ts) {
            c->max_ts = ts;
        }
    }
    int needs_horizon = !c->has_horizon && (has_tombstone || (c->can_discard && c->is_control));
    if (c->kept > 0) {
        c->horizon_out = c->has_horizon || needs_horizon;
    }
    if (c->kept == 0 || (c->kept == count && !needs_horizon)) {
        return 0;
    }
    c->new_base = c->has_horizon ? c->horizon : needs_horizon ? c->new_horizon : sc->timestamps[0];
    unsigned char *out = sc->out;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < c->kept; i++) {
        RecordView *r = &sc->kept[i];
        int64_t delta;
        if (__builtin_sub_overflow(sc->timestamps[i], c->new_base, &delta)) {
            return 1;
        }
        unsigned char delta_bytes[10];
        Py_ssize_t delta_size = write_varint(delta_bytes, delta);
        Py_ssize_t body = 1 + delta_size + (r->end - r->tail);
        n += write_varint(out + n, (int64_t)body);
        out[n++] = 0;
        memcpy(out + n, delta_bytes, (size_t)delta_size);
        n += delta_size;
        memcpy(out + n, buf + r->tail, (size_t)(r->end - r->tail));
        n += r->end - r->tail;
    }
    c->out_length = n;
    return 0;
}

/*
 * filter_records(raw, count, base_offset, base_timestamp, log_append_time|None, key_map|None,
 *                map_latest_offset, now_ms, existing_horizon|None, new_horizon, discard_all,
 *                is_control, can_discard[, use_bitmap])
 * -> (area|None, records read, kept, invalid, max kept timestamp, base timestamp used, horizon|None)
 *
 * area is None when nothing is kept, or when everything is kept and no horizon is added (the batch is
 * unchanged). The horizon is the batch's own, else `new_horizon` if a kept record is a tombstone (or a
 * discardable control batch keeps records), else none. With use_bitmap (a data batch outside any
 * transaction: the map's scan put its keyed records of the dirty section, as it puts a plain batch's),
 * "superseded" comes from the key map's bitmap where it covers the record, as in filter_batches: a Spark
 * task's map then needs its deferred blobs only for records the bitmap does not cover.
 */
static PyObject *
filter_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_timestamp, map_latest_offset, now_ms, new_horizon;
    PyObject *log_append_time_obj, *key_map_obj, *existing_horizon_obj;
    int discard_all, is_control, can_discard, use_bitmap = 0;
    if (!PyArg_ParseTuple(args, "y*nLLOOLLOLppp|p", &view, &count, &base_offset, &base_timestamp,
                          &log_append_time_obj, &key_map_obj, &map_latest_offset, &now_ms,
                          &existing_horizon_obj, &new_horizon, &discard_all, &is_control, &can_discard,
                          &use_bitmap)) {
        return NULL;
    }
    FilterCall c = {0};
    if (key_map_obj != Py_None) {
        if (!PyObject_TypeCheck(key_map_obj, &KeyMapType)) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "key_map must be a KeyMap or None");
            return NULL;
        }
        c.key_map = (KeyMap *)key_map_obj;
        if (keymap_settle(c.key_map, 0) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    c.has_log_append_time = log_append_time_obj != Py_None;
    c.log_append_time = c.has_log_append_time ? PyLong_AsLongLong(log_append_time_obj) : 0;
    c.has_horizon = existing_horizon_obj != Py_None;
    c.horizon = c.has_horizon ? PyLong_AsLongLong(existing_horizon_obj) : 0;
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    c.base_offset = base_offset;
    c.base_timestamp = base_timestamp;
    c.map_latest_offset = map_latest_offset;
    c.now_ms = now_ms;
    c.new_horizon = new_horizon;
    c.discard_all = discard_all;
    c.is_control = is_control;
    c.use_bitmap = use_bitmap;
    c.can_discard = can_discard;
    FilterScratch sc = {0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = filter_area(&sc, view.buf, view.len, count, &c);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status != 0) {
        filter_scratch_free(&sc);
        if (status == 2) {
            return PyErr_NoMemory();
        }
        PyErr_SetString(fallback_error, "records area needs the Python rules");
        return NULL;
    }
    PyObject *area = c.out_length ? PyBytes_FromStringAndSize((const char *)sc.out, c.out_length)
                                  : Py_NewRef(Py_None);
    filter_scratch_free(&sc);
    if (area == NULL) {
        return NULL;
    }
    PyObject *horizon_out = !c.horizon_out ? Py_NewRef(Py_None)
                            : PyLong_FromLongLong(c.has_horizon ? c.horizon : c.new_horizon);
    if (horizon_out == NULL) {
        Py_DECREF(area);
        return NULL;
    }
    return Py_BuildValue("NnnnLLN", area, c.read, c.kept, c.invalid, (long long)c.max_ts,
                         (long long)c.new_base, horizon_out);
}

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
put_be64(unsigned char *p, int64_t v)
{
    put_be32(p, (uint32_t)((uint64_t)v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

enum { BATCH_DROPPED = 0, BATCH_UNCHANGED = 1, BATCH_REWRITTEN = 2 };
#define META_FIELDS 10

/* Whether the data batch ending at `last`, of producer `pid`, is that producer's last data batch
 * (rules.is_last_record_of_producer): `ends` holds n (last data offset, producer id) pairs sorted by offset. */
static int
is_producers_last(const int64_t *ends, Py_ssize_t n, int64_t last, int64_t pid)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ends[2 * mid] < last) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    for (; lo < n && ends[2 * lo] == last; lo++) {
        if (ends[2 * lo + 1] == pid) {
            return 1;
        }
    }
    return 0;
}

/* A transaction event of a filter run, kept until the run applies them in order to the state's set of
 * ongoing committed producers: a producer id to add (a transactional batch read), or ~id to discard (a COMMIT
 * marker that found it). 0, or -1: no memory. */
static int
push_txn_event(int64_t **events, size_t *count, size_t *capacity, int64_t event)
{
    if (*count > 0 && (*events)[*count - 1] == event && event >= 0) {
        return 0; /* the same producer's next batch */
    }
    if (*count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 16;
        if (grow_array(events, (Py_ssize_t)grown, sizeof(int64_t)) < 0) {
            return -1;
        }
        *capacity = grown;
    }
    (*events)[(*count)++] = event;
    return 0;
}

/* The events pushed so far, applied to `committed` in order and forgotten (the GIL held): 0, or -1 with the
 * error set. */
static int
apply_txn_events(PyObject *committed, const int64_t *events, size_t *count)
{
    int rc = 0; /* PySet_Discard's 1 (it was there) is no error */
    for (size_t i = 0; i < *count && rc >= 0; i++) {
        PyObject *producer = PyLong_FromLongLong(events[i] >= 0 ? events[i] : ~events[i]);
        rc = producer == NULL ? -1 : events[i] >= 0 ? PySet_Add(committed, producer) : PySet_Discard(committed, producer);
        Py_XDECREF(producer);
    }
    *count = 0;
    return rc < 0 ? -1 : 0;
}

/* rules.empty_batch of the batch at b (Kafka writeEmptyHeader): its header alone, no records, no codec or
 * horizon, base timestamp -1, every other field kept. */
static void
write_empty_batch(unsigned char *o, const unsigned char *b, unsigned attributes)
{
    memcpy(o, b, BATCH_OVERHEAD);
    put_be32(o + 8, BATCH_OVERHEAD - 12);
    o[16] = 2;
    o[21] = 0;
    o[22] = (unsigned char)(attributes & (0x08 | TRANSACTIONAL_BIT | CONTROL_BIT));
    put_be64(o + 27, -1);
    put_be32(o + 57, 0);
    put_be32(o + 17, crc32c(o + 21, BATCH_OVERHEAD - 21));
}

/*
 * filter_batches(buf, position, limit, key_map, map_latest_offset, now_ms, new_horizon, upper_bound[, out
 *                [, producer_ends[, committed, txns]]])
 *   -> (position reached, output bytes, metadata bytes)
 *   or, given `out` (a writable buffer), -> (position reached, output length, metadata bytes)
 *
 * rules.filter_batch over the data batches from `position` on (magic 2, CRC-32C valid unless the scan behind
 * the key map's bitmap checked it this round (keymap_scan_checked), at least one record,
 * not ending at the round's upper bound, records in the encoder's form; with a producer id only given
 * `producer_ends`; transactional ones and their COMMIT and ABORT markers only given the transaction state:
 * `committed`, the set of ongoing committed producers, which CleanedTransactionMetadata's on_batch_read and
 * on_control_batch_read add to and take from, and `txns`, its aborted transactions (a TxnCursor's buffer),
 * both changed as those methods change them for the batches taken;
 * compressed ones through the system's codec library or the registered codec functions), each whole in
 * `buf`, while the position is below `limit` (a batch whose every
 * offset the key map's bitmap marks superseded is dropped without reading its records); stops at the first
 * other batch, which the caller runs through the Python rules. Such a batch's retention is DELETE_EMPTY (it
 * goes when no record survives), or RETAIN_EMPTY (kept as its bare header) if it is its producer's last
 * data batch: `producer_ends` holds the active producers' (last data offset, producer id) as int64 pairs in
 * native order, sorted by offset. Per batch, ten int64 in native order: outcome (0 dropped, 1 unchanged, 2
 * rewritten), its position in buf, its size, where its bytes start in the output and how many, its last
 * offset, its max timestamp as written, records read, kept, invalid. An unchanged batch's bytes are in the
 * output too (the caller needs them once the cleaned segment exists).
 *
 * With `out`, the output goes straight into it, with the GIL released but for codec calls (the caller's
 * buffer, reused from call to call: no allocation, no fresh pages, no copy into a bytes object while holding
 * the GIL), and the run stops before the first batch whose output would not fit (ValueError if that is the
 * first batch and uncompressed: twice the bytes from `position` to the end of `buf`, plus 64 KiB, always
 * fits it; a compressed one is left to the Python rules).
 */
static PyObject *
filter_batches(PyObject *self, PyObject *args)
{
    Py_buffer view, out_view = {0}, ends_view = {0}, txn_view = {0};
    Py_ssize_t pos, limit;
    PyObject *key_map_obj, *out_obj = Py_None, *ends_obj = Py_None, *committed_obj = Py_None, *txn_obj = Py_None;
    long long map_latest_offset, now_ms, new_horizon, upper_bound;
    if (!PyArg_ParseTuple(args, "y*nnOLLLL|OOOO", &view, &pos, &limit, &key_map_obj, &map_latest_offset, &now_ms,
                          &new_horizon, &upper_bound, &out_obj, &ends_obj, &committed_obj, &txn_obj)) {
        return NULL;
    }
    if (!PyObject_TypeCheck(key_map_obj, &KeyMapType) || (committed_obj != Py_None && !PySet_Check(committed_obj)) ||
        (committed_obj == Py_None) != (txn_obj == Py_None)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "key_map must be a KeyMap; committed a set and txns a cursor, or neither");
        return NULL;
    }
    KeyMap *key_map = (KeyMap *)key_map_obj;
    if (keymap_settle(key_map, 0) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int has_ends = ends_obj != Py_None;
    if (has_ends && PyObject_GetBuffer(ends_obj, &ends_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (has_ends && ends_view.len % 16 != 0) {
        PyBuffer_Release(&ends_view);
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "producer_ends must hold int64 pairs");
        return NULL;
    }
    int transactional = txn_obj != Py_None;
    TxnCursor txn = {0};
    if (txn_cursor_get(txn_obj, &txn_view, &txn) < 0) {
        if (has_ends) {
            PyBuffer_Release(&ends_view);
        }
        PyBuffer_Release(&view);
        return NULL;
    }
    const int64_t *ends = has_ends ? ends_view.buf : NULL;
    Py_ssize_t ends_count = has_ends ? ends_view.len / 16 : 0;
    int has_out = out_obj != Py_None;
    if (has_out && PyObject_GetBuffer(out_obj, &out_view, PyBUF_WRITABLE) < 0) {
        if (has_ends) {
            PyBuffer_Release(&ends_view);
        }
        if (transactional) {
            PyBuffer_Release(&txn_view);
        }
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len;
    if (pos < 0 || pos > len) {
        pos = len;
    }
    size_t out_capacity = has_out ? (size_t)out_view.len
                                  : (size_t)(limit > pos ? (limit < len ? limit : len) - pos : 0) * 2 + (1 << 16);
    unsigned char *out = has_out ? out_view.buf : malloc(out_capacity);
    size_t meta_capacity = 64;
    int64_t *meta = malloc(meta_capacity * META_FIELDS * sizeof(int64_t));
    Py_ssize_t out_length = 0, batches = 0;
    int status = 0;
    FilterScratch sc = {0};
    PyObject *raw = NULL, *packed = NULL; /* a compressed batch's records, and its survivors compressed */
    CodecBuffer inflated = {0};           /* or its records decompressed by the system's codec library */
    CodecBuffer deflated = {0};           /* or its survivors compressed by it */
    int64_t *txn_events = NULL;           /* push_txn_event's, not applied yet */
    size_t txn_count = 0, txn_capacity = 0;
    if (out == NULL || meta == NULL) {
        if (has_out) {
            PyBuffer_Release(&out_view);
        }
        else {
            free(out);
        }
        if (has_ends) {
            PyBuffer_Release(&ends_view);
        }
        if (transactional) {
            PyBuffer_Release(&txn_view);
        }
        free(meta);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    while (pos < limit && pos + BATCH_OVERHEAD <= len) {
        const unsigned char *b = buf + pos;
        int64_t size = (int64_t)(int32_t)be32(b + 8) + 12;
        if (size < BATCH_OVERHEAD || size > len - pos || b[16] != 2) {
            break;
        }
        unsigned attributes = (unsigned)b[21] << 8 | b[22], codec = attributes & CODEC_BITS;
        int32_t last_delta = (int32_t)be32(b + 23);
        int64_t base = be64(b), base_ts = be64(b + 27), max_ts = be64(b + 35), producer_id = be64(b + 43);
        int32_t count = (int32_t)be32(b + 57);
        if (!loops_read(attributes, transactional) || (producer_id != -1 && !has_ends) || last_delta < 0 || count <= 0 ||
            base + last_delta + 1 == upper_bound ||
            (!keymap_scan_checked(key_map, base, base + last_delta) &&
             crc32c(b + 21, (size_t)size - 21) != be32(b + 17))) {
            break;
        }
        int retain_empty = producer_id != -1 && is_producers_last(ends, ends_count, base + last_delta, producer_id);
        int is_marker = (attributes & CONTROL_BIT) != 0, can_discard = 0, kept_committed = 0;
        int64_t *aborted = NULL; /* the producer's ongoing aborted transaction, for its data and ABORT marker */
        if (transactional) {
            txn_read(&txn, base + last_delta);
            aborted = (attributes & TRANSACTIONAL_BIT) ? txn_ongoing(&txn, producer_id) : NULL;
        }
        if (!is_marker && aborted != NULL) {
            /* on_batch_read: aborted data, which goes (rules.batch_retention's DELETE); its producer's last
             * batch, kept as a bare header after its records are read, is the Python rules' */
            can_discard = 1;
            if (retain_empty) {
                break;
            }
        }
        if (is_marker) {
            /* CleanedTransactionMetadata.on_control_batch_read: an ABORT marker is kept if data of its
             * producer's ongoing aborted transaction was read (which is retained), else it may go; a COMMIT
             * marker is kept while its producer is among the ongoing committed (and it leaves them), else it
             * may go. A producer whose last entry is a marker (no data offset: rules.is_last_record_of_producer
             * by epoch) leaves it to the Python rules. */
            int type = marker_type(b, size);
            if (type < 0 || is_producers_last(ends, ends_count, -1, producer_id)) {
                break;
            }
            if (type != MARKER_ABORT) {
                aborted = NULL; /* a COMMIT leaves an aborted transaction of its producer as it is */
            }
            if (type == MARKER_COMMIT) {
                Py_BLOCK_THREADS
                PyObject *producer = NULL;
                if (apply_txn_events(committed_obj, txn_events, &txn_count) < 0 ||
                    (producer = PyLong_FromLongLong(producer_id)) == NULL ||
                    (kept_committed = PySet_Contains(committed_obj, producer)) < 0) {
                    status = 4;
                }
                Py_XDECREF(producer);
                Py_UNBLOCK_THREADS
                if (status != 0) {
                    break;
                }
            }
            can_discard = type == MARKER_ABORT ? aborted == NULL || aborted[2] < 0 : !kept_committed;
        }
        int discard_records = is_marker ? can_discard && (attributes & 0x40) && base_ts <= now_ms : can_discard;
        FilterCall c = {0};
        if (discard_records) {
            retain_empty = 0; /* rules.batch_retention's DELETE: gone, its records not read */
        }
        else if (!is_marker && count == (int64_t)last_delta + 1 && base + last_delta <= map_latest_offset &&
            keymap_all_superseded(key_map, base, base + last_delta)) {
            /* every offset holds a keyed record a later one supersedes (the map's scan read each of them
             * this round, so they are well formed): none survives, none is parsed */
            c.read = count;
        }
        else {
            const unsigned char *area = b + BATCH_OVERHEAD;
            Py_ssize_t area_length = (Py_ssize_t)size - BATCH_OVERHEAD;
            if (codec && (status = inflate_area(codec, &area, &area_length, &inflated, &raw, &_save)) != 0) {
                status = status == 1 ? 0 : status; /* the codec refused it: Python's, with its error */
                break;
            }
            c.base_offset = base;
            c.base_timestamp = base_ts;
            c.has_log_append_time = (attributes & 0x08) != 0;
            c.log_append_time = max_ts;
            c.has_horizon = (attributes & 0x40) != 0;
            c.horizon = base_ts;
            c.key_map = key_map;
            c.use_bitmap = !is_marker;
            c.is_control = is_marker;
            c.can_discard = can_discard;
            c.map_latest_offset = map_latest_offset;
            c.now_ms = now_ms;
            c.new_horizon = new_horizon;
            status = filter_area(&sc, area, area_length, count, &c);
            if (status != 0) {
                status = status == 1 ? 0 : status; /* a batch in an odd encoding: Python's */
                break;
            }
        }
        /* the survivors' records area as written: re-encoded, and compressed again with the batch's codec (by
         * the system's library, as `compress` would, else by a call of `compress`) */
        const unsigned char *kept_area = sc.out;
        Py_ssize_t kept_length = c.out_length;
        int by_system = codec && c.out_length > 0 && system_codecs != NULL && system_codecs_on
                            ? system_codecs->compress(codec, sc.out, (size_t)c.out_length, &deflated)
                            : -2;
        if (by_system == -1) {
            status = 2;
            break;
        }
        if (by_system == 0) {
            kept_area = deflated.data;
            kept_length = (Py_ssize_t)deflated.length;
        }
        else if (codec && c.out_length > 0) {
            Py_BLOCK_THREADS
            Py_CLEAR(raw);
            Py_CLEAR(packed);
            status = codec_call(codec_compress, codec, sc.out, c.out_length, &packed);
            Py_UNBLOCK_THREADS
            if (status != 0) {
                status = status == 1 ? 0 : status;
                break;
            }
            kept_area = (const unsigned char *)PyBytes_AS_STRING(packed);
            kept_length = PyBytes_GET_SIZE(packed);
        }
        int empty = c.kept == 0 && retain_empty;
        int64_t outcome, written_max_ts = max_ts;
        Py_ssize_t written = c.kept == 0 ? (empty ? BATCH_OVERHEAD : 0)
                             : c.out_length > 0 ? BATCH_OVERHEAD + kept_length : (Py_ssize_t)size;
        size_t need = (size_t)out_length + (size_t)written;
        if (need > out_capacity && has_out) {
            /* stops before this batch; the caller's next call takes it (a compressed one: Python's) */
            status = batches == 0 && !codec ? 3 : 0;
            break;
        }
        if (need > out_capacity) {
            size_t capacity = out_capacity * 2 > need ? out_capacity * 2 : need;
            unsigned char *grown = realloc(out, capacity);
            if (grown == NULL) {
                status = 2;
                break;
            }
            out = grown;
            out_capacity = capacity;
        }
        unsigned char *o = out + out_length;
        if (c.kept == 0) {
            outcome = empty ? BATCH_REWRITTEN : BATCH_DROPPED;
            if (empty) {
                write_empty_batch(o, b, attributes);
            }
        }
        else if (c.out_length == 0) {
            outcome = BATCH_UNCHANGED;
            memcpy(o, b, (size_t)size);
        }
        else {
            /* encode_rebuilt_batch: the header with the survivors' count, timestamps and horizon bit */
            written_max_ts = c.has_log_append_time ? max_ts : c.max_ts;
            memcpy(o, b, BATCH_OVERHEAD);
            put_be32(o + 8, (uint32_t)(written - 12));
            o[16] = 2;
            unsigned new_attributes =
                (attributes & (0x0F | TRANSACTIONAL_BIT | CONTROL_BIT)) | (c.horizon_out ? 0x40 : 0);
            o[21] = (unsigned char)(new_attributes >> 8);
            o[22] = (unsigned char)new_attributes;
            put_be64(o + 27, c.new_base);
            put_be64(o + 35, written_max_ts);
            put_be32(o + 57, (uint32_t)c.kept);
            memcpy(o + BATCH_OVERHEAD, kept_area, (size_t)kept_length);
            put_be32(o + 17, crc32c(o + 21, (size_t)written - 21));
            outcome = written == size && memcmp(o, b, (size_t)size) == 0 ? BATCH_UNCHANGED : BATCH_REWRITTEN;
        }
        if (batches == (Py_ssize_t)meta_capacity) {
            int64_t *grown = realloc(meta, meta_capacity * 2 * META_FIELDS * sizeof(int64_t));
            if (grown == NULL) {
                status = 2;
                break;
            }
            meta = grown;
            meta_capacity *= 2;
        }
        /* the batch is taken: what reading it changes in the transaction state, in order */
        if (((attributes & TRANSACTIONAL_BIT) && !is_marker && aborted == NULL) || kept_committed) {
            int64_t event = is_marker ? ~producer_id : producer_id;
            if (push_txn_event(&txn_events, &txn_count, &txn_capacity, event) < 0) {
                status = 2;
                break;
            }
        }
        if (aborted != NULL && is_marker) {
            txn_end_aborted(&txn, aborted);
        }
        else if (aborted != NULL) {
            aborted[2] = base + last_delta;
        }
        txn_taken(&txn);
        int64_t *row = meta + batches * META_FIELDS;
        row[0] = outcome;
        row[1] = pos;
        row[2] = size;
        row[3] = out_length;
        row[4] = written;
        row[5] = base + last_delta;
        row[6] = written_max_ts;
        row[7] = c.read;
        row[8] = c.kept;
        row[9] = c.invalid;
        out_length += written;
        batches++;
        pos += (Py_ssize_t)size;
    }
    txn_leave(&txn);
    Py_END_ALLOW_THREADS
    Py_XDECREF(raw);
    Py_XDECREF(packed);
    free(inflated.data);
    free(deflated.data);
    filter_scratch_free(&sc);
    if (status != 2 && status != 4 && apply_txn_events(committed_obj, txn_events, &txn_count) < 0) {
        status = 4; /* the error is set */
    }
    free(txn_events);
    if (has_ends) {
        PyBuffer_Release(&ends_view);
    }
    if (transactional) {
        PyBuffer_Release(&txn_view);
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (status == 2) {
        PyErr_NoMemory();
    }
    else if (status == 3) {
        PyErr_Format(PyExc_ValueError, "output buffer of %zd bytes too small for the batch at %zd", out_view.len, pos);
    }
    else if (status == 4) {
        /* a codec call's KeyboardInterrupt or the like: already set */
    }
    else if (has_out) {
        result = Py_BuildValue("nny#", pos, out_length, (const char *)meta,
                               (Py_ssize_t)(batches * META_FIELDS * sizeof(int64_t)));
    }
    else {
        result = Py_BuildValue("ny#y#", pos, (const char *)out, out_length, (const char *)meta,
                               (Py_ssize_t)(batches * META_FIELDS * sizeof(int64_t)));
    }
    if (has_out) {
        PyBuffer_Release(&out_view);
    }
    else {
        free(out);
    }
    free(meta);
    return result;
}

#define HEADER_READ_BYTES 8192 /* a producer scan's reads; after a batch this large, only the next header */

/* A walk over a .log's batch headers from a position, reading around each header (the header scans). */
typedef struct {
    int fd;
    long long position, end;
    unsigned char *buf;
    long long chunk;      /* bytes a read takes while batches are small */
    long long buf_start, last_size;
    Py_ssize_t buf_len;
    int error;            /* errno of a failed read */
} HeaderWalk;

/* The header of the batch at w->position, whole in w->buf, and the batch's size in *size; NULL at the end,
 * after a short or failed read (w->error), or at a batch whose size is below a header's or that ends past
 * w->end. Reads w->chunk bytes at a time, only the next header after a batch of 8 KiB or more (most of a log
 * of large batches is never copied out of the page cache). Runs without the GIL. */
static const unsigned char *
header_walk_at(HeaderWalk *w, int64_t *size)
{
    while (w->position + BATCH_OVERHEAD <= w->end) {
        if (w->position + BATCH_OVERHEAD > w->buf_start + w->buf_len) {
            long long want = w->last_size >= HEADER_READ_BYTES ? BATCH_OVERHEAD : w->chunk;
            if (want > w->end - w->position) {
                want = w->end - w->position;
            }
            ssize_t got = pread(w->fd, w->buf, (size_t)want, (off_t)w->position);
            if (got < 0) {
                if (errno == EINTR) {
                    continue;
                }
                w->error = errno;
                return NULL;
            }
            w->buf_start = w->position;
            w->buf_len = got;
            if (got < BATCH_OVERHEAD) {
                return NULL;
            }
        }
        const unsigned char *b = w->buf + (w->position - w->buf_start);
        *size = (int64_t)(int32_t)be32(b + 8) + 12;
        if (*size < BATCH_OVERHEAD || w->position + *size > w->end) {
            return NULL;
        }
        return b;
    }
    return NULL;
}

static inline void
header_walk_next(HeaderWalk *w, int64_t size)
{
    w->position += size;
    w->last_size = size;
}

/* Append one row of `width` int64 to *rows (grown as needed): 0, or -1 (no memory). */
static int
append_row(int64_t **rows, size_t *used, size_t *capacity, const int64_t *row, size_t width)
{
    if (*used == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 64;
        int64_t *more = realloc(*rows, grown * width * sizeof(int64_t));
        if (more == NULL) {
            return -1;
        }
        *rows = more;
        *capacity = grown;
    }
    memcpy(*rows + *used * width, row, width * sizeof(int64_t));
    (*used)++;
    return 0;
}

/* Per producer id, the row of its last data batch while no marker of its producer came after it (-1:
 * none): open addressing, at most half full. */
typedef struct {
    int64_t producer_id; /* -1: an empty slot */
    int64_t row;
} RowSlot;

typedef struct {
    RowSlot *slots;
    size_t capacity, used;
} RowIndex;

static inline size_t
row_index_home(int64_t producer_id, size_t capacity)
{
    return (size_t)(((uint64_t)producer_id * 0x9E3779B97F4A7C15ULL) >> 32) & (capacity - 1);
}

/* The row of `producer_id` in `x` (a new producer's is -1), or NULL (no memory). */
static int64_t *
row_index_slot(RowIndex *x, int64_t producer_id)
{
    if (2 * (x->used + 1) > x->capacity) {
        size_t capacity = x->capacity ? 2 * x->capacity : 64;
        RowSlot *slots = malloc(capacity * sizeof(RowSlot));
        if (slots == NULL) {
            return NULL;
        }
        for (size_t i = 0; i < capacity; i++) {
            slots[i].producer_id = -1;
        }
        for (size_t i = 0; i < x->capacity; i++) {
            if (x->slots[i].producer_id >= 0) {
                size_t j = row_index_home(x->slots[i].producer_id, capacity);
                while (slots[j].producer_id >= 0) {
                    j = (j + 1) & (capacity - 1);
                }
                slots[j] = x->slots[i];
            }
        }
        free(x->slots);
        x->slots = slots;
        x->capacity = capacity;
    }
    size_t j = row_index_home(producer_id, x->capacity);
    while (x->slots[j].producer_id >= 0 && x->slots[j].producer_id != producer_id) {
        j = (j + 1) & (x->capacity - 1);
    }
    if (x->slots[j].producer_id < 0) {
        x->slots[j] = (RowSlot){producer_id, -1};
        x->used++;
    }
    return &x->slots[j].row;
}

/* After a walk, with the GIL: the Python error of a failed read, or of no memory; 1 if one was set. */
static int
header_walk_failed(const HeaderWalk *w, int no_memory)
{
    if (w->error) {
        errno = w->error;
        PyErr_SetFromErrno(PyExc_OSError);
        return 1;
    }
    if (no_memory) {
        PyErr_NoMemory();
        return 1;
    }
    return 0;
}

/*
 * scan_producer_headers(fd, position, end) -> (position reached, rows)
 *
 * rules._iter_headers over the batches of a .log from `position`, reading only around each batch header
 * (8 KiB at a time: the headers of small batches come in one read; after a batch of 8 KiB or more, only
 * the next header),
 * with the GIL released. Per batch with a producer id (>= 0), four int64 in native order: attributes (as
 * the signed int16 of the header), last offset, producer id, producer epoch; but a data batch whose
 * producer's last row is of a data batch takes that row's place (RowIndex), so the rows' fold in
 * rules._scan_headers, where a data batch sets its producer's entry whatever was there, ends the same
 * (rows of different producers never touch each other's entries; each producer's rows stay in order).
 * Stops before a header that does not fit before `end`, or a batch whose size is below the header's or
 * that ends past `end` (a partial tail).
 */
static PyObject *
scan_producer_headers(PyObject *self, PyObject *args)
{
    int fd;
    long long position, end;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &position, &end)) {
        return NULL;
    }
    unsigned char *buf = malloc(HEADER_READ_BYTES);
    size_t rows_capacity = 0, rows_used = 0;
    int64_t *rows = NULL;
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    int no_memory = 0;
    HeaderWalk w = {.fd = fd, .position = position, .end = end, .buf = buf, .chunk = HEADER_READ_BYTES,
                    .buf_start = position};
    RowIndex index = {0};
    const unsigned char *b;
    int64_t size;
    Py_BEGIN_ALLOW_THREADS
    while ((b = header_walk_at(&w, &size)) != NULL) {
        int64_t producer_id = be64(b + 43);
        if (producer_id >= 0) {
            int64_t row[4] = {
                (int16_t)((unsigned)b[21] << 8 | b[22]),
                (int64_t)((uint64_t)be64(b) + (uint64_t)(int64_t)(int32_t)be32(b + 23)), /* wraps, never UB */
                producer_id,
                (int16_t)((unsigned)b[51] << 8 | b[52]),
            };
            int64_t *data_row = row_index_slot(&index, producer_id);
            if (data_row == NULL) {
                no_memory = 1;
                break;
            }
            int control = (b[22] & CONTROL_BIT) != 0;
            if (!control && *data_row >= 0) {
                memcpy(rows + *data_row * 4, row, sizeof(row));
            }
            else if (append_row(&rows, &rows_used, &rows_capacity, row, 4) < 0) {
                no_memory = 1;
                break;
            }
            else {
                *data_row = control ? -1 : (int64_t)rows_used - 1;
            }
        }
        header_walk_next(&w, size);
    }
    Py_END_ALLOW_THREADS
    free(index.slots);
    free(buf);
    PyObject *result = header_walk_failed(&w, no_memory) ? NULL
                       : Py_BuildValue("Ly#", w.position, rows ? (const char *)rows : "",
                                       (Py_ssize_t)(rows_used * 4 * sizeof(int64_t)));
    free(rows);
    return result;
}

/*
 * start_writeback(fd, offset, nbytes) -> bool
 *
 * Asks the kernel to start writing the file's dirty pages in the range to disk now, without waiting
 * (Linux sync_file_range, SYNC_FILE_RANGE_WRITE): the fsync that seals the file then has less left to
 * wait for. A hint only: False where the call is not available or fails; nothing depends on it.
 */
static PyObject *
start_writeback(PyObject *self, PyObject *args)
{
    int fd;
    long long offset, nbytes;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &offset, &nbytes)) {
        return NULL;
    }
    int rc = -1;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    Py_BEGIN_ALLOW_THREADS
    rc = sync_file_range(fd, (off_t)offset, (off_t)nbytes, SYNC_FILE_RANGE_WRITE);
    Py_END_ALLOW_THREADS
#endif
    return PyBool_FromLong(rc == 0);
}

#define RUN_SCAN_CHUNK (1 << 20)
#define RUN_FIELDS 5
enum { RUN_PLAIN = 0, RUN_OTHER = 1 };

/*
 * scan_batch_runs(fd, end, split) -> (position reached, rows, headers)
 *
 * The batch headers of a .log from position 0 for the Spark driver's transaction replay (txn_replay), with
 * the GIL released: runs of consecutive plain data batches (neither transactional nor control) collapse
 * into one row, since all such a batch does to the replay's state is move it to its last offset. Per row,
 * five int64 in native order: kind (0 a run of plain batches, 1 any other batch), its first position, its
 * bytes, its last offset, its records. A run does not cross `split` (the map pass's first position in the
 * segment; -1: none). `headers` holds the RECORD_BATCH header (61 bytes) of each kind-1 row, in order.
 * Reads 1 MiB at a time while batches are small, only the next header after a large one. Stops before a
 * header that does not fit before `end` or a batch that ends past it: the caller reads on from the
 * position reached, in Python, which raises the error that names it.
 */
static PyObject *
scan_batch_runs(PyObject *self, PyObject *args)
{
    int fd;
    long long end, split;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &end, &split)) {
        return NULL;
    }
    unsigned char *buf = malloc(RUN_SCAN_CHUNK);
    size_t rows_used = 0, rows_capacity = 0, headers_used = 0, headers_capacity = 0;
    int64_t *rows = NULL;
    unsigned char *headers = NULL;
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    int no_memory = 0;
    HeaderWalk w = {.fd = fd, .end = end, .buf = buf, .chunk = RUN_SCAN_CHUNK};
    int64_t run[RUN_FIELDS] = {0};
    int in_run = 0;
    const unsigned char *b;
    int64_t size;
    Py_BEGIN_ALLOW_THREADS
    while ((b = header_walk_at(&w, &size)) != NULL) {
        long long position = w.position;
        unsigned attributes = (unsigned)b[21] << 8 | b[22];
        int64_t last_offset = (int64_t)((uint64_t)be64(b) + (uint64_t)(int64_t)(int32_t)be32(b + 23));
        int64_t records = (int32_t)be32(b + 57);
        int plain = (attributes & 0x30) == 0; /* neither transactional (0x10) nor control (0x20) */
        if (in_run && (!plain || position == split)) {
            if (append_row(&rows, &rows_used, &rows_capacity, run, RUN_FIELDS) < 0) {
                no_memory = 1;
                break;
            }
            in_run = 0;
        }
        if (plain) {
            if (!in_run) {
                run[0] = RUN_PLAIN;
                run[1] = position;
                run[2] = 0;
                run[4] = 0;
                in_run = 1;
            }
            run[2] += size;
            run[3] = last_offset;
            run[4] += records;
        }
        else {
            int64_t row[RUN_FIELDS] = {RUN_OTHER, position, size, last_offset, records};
            if (headers_used + BATCH_OVERHEAD > headers_capacity) {
                size_t grown = headers_capacity ? headers_capacity * 2 : 64 * BATCH_OVERHEAD;
                unsigned char *more = realloc(headers, grown);
                if (more == NULL) {
                    no_memory = 1;
                    break;
                }
                headers = more;
                headers_capacity = grown;
            }
            if (append_row(&rows, &rows_used, &rows_capacity, row, RUN_FIELDS) < 0) {
                no_memory = 1;
                break;
            }
            memcpy(headers + headers_used, b, BATCH_OVERHEAD);
            headers_used += BATCH_OVERHEAD;
        }
        header_walk_next(&w, size);
    }
    if (in_run && !w.error && !no_memory && append_row(&rows, &rows_used, &rows_capacity, run, RUN_FIELDS) < 0) {
        no_memory = 1;
    }
    Py_END_ALLOW_THREADS
    free(buf);
    /* y# of NULL is None: an empty segment gives empty bytes */
    PyObject *result = header_walk_failed(&w, no_memory) ? NULL
                       : Py_BuildValue("Ly#y#", w.position, rows ? (const char *)rows : "",
                                       (Py_ssize_t)(rows_used * RUN_FIELDS * sizeof(int64_t)),
                                       headers ? (const char *)headers : "", (Py_ssize_t)headers_used);
    free(rows);
    free(headers);
    return result;
}

static PyMethodDef methods[] = {
    {"start_writeback", start_writeback, METH_VARARGS, "Start writing a file range's dirty pages (a hint)."},
    {"scan_producer_headers", scan_producer_headers, METH_VARARGS,
     "The producer batches' headers of a .log from a position, read around each header."},
    {"scan_batch_runs", scan_batch_runs, METH_VARARGS,
     "A .log's batch headers, runs of plain batches collapsed, for the transaction replay."},
    {"filter_records", filter_records, METH_VARARGS, "Filter and re-encode one records area."},
    {"set_codecs", set_codecs, METH_VARARGS, "Register the codec functions the C loops call."},
    {"set_system_codecs", set_system_codecs, METH_O,
     "Whether the C loops use the system's codec libraries."},
    {"filter_batches", filter_batches, METH_VARARGS,
     "Filter the plain batches of a buffer from a position; stop at the first other one."},
    {"crc32c", crc32c_py, METH_O, "CRC-32C of a bytes-like object (Kafka's batch CRC)."},
    {"crc32c_by_table", crc32c_by_table_py, METH_O, "crc32c without the CPU's instruction."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

static int add_key_map_blob_functions(PyObject *m); /* at the end of the file */

PyMODINIT_FUNC
PyInit__native(void)
{
    crc32c_init();
    if (PyType_Ready(&KeyMapType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    fallback_error = PyErr_NewException("cleaner._native.Fallback", PyExc_ValueError, NULL);
    if (fallback_error == NULL || PyModule_AddObjectRef(m, "Fallback", fallback_error) < 0 ||
        PyModule_AddObjectRef(m, "KeyMap", (PyObject *)&KeyMapType) < 0 || add_key_map_blob_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

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
static int
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
static PyObject *
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
static PyObject *
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
static PyObject *
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
static PyObject *
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
static PyObject *
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

static int
add_key_map_blob_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, key_map_blob_methods);
}
