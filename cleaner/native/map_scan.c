/* KeyMap.map_records and KeyMap.map_batches: a scan's records parsed into entries and put (or handed to the pipeline). */
#include "native.h"

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
PyObject *
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

/* One map_batches call's scan, shared by its steps. */
typedef struct {
    KeyMap *m;
    PutBlock own, *block; /* the call's own block, or the pipeline's */
    const unsigned char *buf;
    Py_ssize_t len, pos, limit, batches, records, bytes;
    int64_t start, last_offset, latest;
    int transactional, listed, status;
    const int64_t *listed_offsets; /* the aborted data batches' base offsets, given by the caller */
    Py_ssize_t listed_count;
    TxnCursor txn;
    PyObject *raw;        /* the last compressed batch's records, decompressed (released with the GIL) */
    CodecBuffer inflated; /* or decompressed by the system's codec library */
    PyThreadState *save;  /* the GIL released: taken back for codec calls */
} MapScan;

/* A data batch's keys put (or parsed into the call's block): 0, or -1 (s->status says why). */
static inline int
map_batch_records(MapScan *s, const unsigned char *b, int64_t size, unsigned attributes, int32_t count,
                  int64_t base, int checks, int64_t *last_put)
{
    const unsigned char *area = b + BATCH_OVERHEAD;
    Py_ssize_t area_length = (Py_ssize_t)size - BATCH_OVERHEAD;
    if (attributes & CODEC_BITS) {
        int rc = inflate_area(attributes & CODEC_BITS, &area, &area_length, &s->inflated, &s->raw, &s->save);
        if (rc != 0) {
            s->status = rc == 1 ? 0 : rc; /* the codec refused it: Python's, with its error */
            return -1;
        }
    }
    int status = parse_area(s->m, s->block, area, area_length, count, base, s->start, last_put, checks);
    if (status == 0 && s->block == &s->own) {
        status = put_or_hand_over(s->m, s->block); /* batch by batch: its keys still in cache */
    }
    if (status != 0) {
        s->status = status == 1 ? 0 : status; /* a batch in an odd encoding: Python's */
        return -1;
    }
    return 0;
}

/* The batch at s->pos read and counted: 0, or -1 (not one the C loops read, or s->status set). */
static inline int
map_batch(MapScan *s)
{
    const unsigned char *b = s->buf + s->pos;
    int64_t size = (int64_t)(int32_t)be32(b + 8) + 12;
    if (size < BATCH_OVERHEAD || size > s->len - s->pos || b[16] != 2) {
        return -1;
    }
    unsigned attributes = (unsigned)b[21] << 8 | b[22];
    int32_t last_delta = (int32_t)be32(b + 23);
    int32_t count = (int32_t)be32(b + 57);
    int64_t base = be64(b);
    int checks = keymap_checks_batch(s->m, base);
    if (!loops_read(attributes, s->transactional || s->listed) || last_delta < 0 || count <= 0
        || (checks && crc32c(b + 21, (size_t)size - 21) != be32(b + 17))) {
        return -1;
    }
    int64_t *aborted = NULL; /* the ongoing aborted transaction the batch is of */
    int dropped = 0;        /* aborted data: read, not mapped */
    if (s->transactional) {
        txn_read(&s->txn, base + last_delta);
        aborted = (attributes & TRANSACTIONAL_BIT) ? txn_ongoing(&s->txn, be64(b + 43)) : NULL;
        dropped = aborted != NULL;
    }
    else if (s->listed && (attributes & (TRANSACTIONAL_BIT | CONTROL_BIT)) == TRANSACTIONAL_BIT) {
        dropped = sorted_contains(s->listed_offsets, s->listed_count, base);
    }
    int64_t last_put = -1;
    if (attributes & CONTROL_BIT) {
        /* a marker: no key to put; an ABORT ends its producer's aborted transaction (a COMMIT changes
         * only what the map does not read of the transaction state: the ongoing committed producers);
         * given the aborted batches by offset, no state to change */
        int type = s->listed ? MARKER_COMMIT : checks ? marker_type(b, size) : -1;
        if (type < 0) {
            return -1;
        }
        if (type == MARKER_ABORT && aborted != NULL) {
            txn_end_aborted(&s->txn, aborted);
        }
    }
    else if (dropped) {
        if (aborted != NULL) {
            aborted[2] = base + last_delta;
        }
    }
    else if (map_batch_records(s, b, size, attributes, count, base, checks, &last_put) < 0) {
        return -1;
    }
    txn_taken(&s->txn);
    s->batches++;
    s->records += count;
    s->bytes += (Py_ssize_t)size;
    s->last_offset = base + last_delta;
    if (last_put >= 0) {
        s->latest = last_put;
    }
    if (s->last_offset >= s->start) {
        s->latest = s->last_offset;
    }
    s->pos += (Py_ssize_t)size;
    return 0;
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
PyObject *
keymap_map_batches(KeyMap *m, PyObject *args)
{
    Py_buffer view, txn_view = {0}, listed_view = {0};
    long long start;
    PyObject *txn_obj = Py_None, *aborted_obj = Py_None;
    MapScan s = {.m = m, .last_offset = -1, .latest = -1};
    if (!PyArg_ParseTuple(args, "y*nnL|OO", &view, &s.pos, &s.limit, &start, &txn_obj, &aborted_obj)) {
        return NULL;
    }
    s.start = start;
    s.transactional = txn_obj != Py_None;
    s.listed = !s.transactional && aborted_obj != Py_None; /* the aborted data batches given by offset */
    if (txn_cursor_get(txn_obj, &txn_view, &s.txn) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (s.listed && PyObject_GetBuffer(aborted_obj, &listed_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    s.listed_offsets = listed_view.buf;
    s.listed_count = listed_view.len / (Py_ssize_t)sizeof(int64_t);
    if (m->deferred_done < m->deferred_count && keymap_settle(m, 1) < 0) {
        s.status = 5;
    }
    else {
        s.buf = view.buf;
        s.len = view.len;
        if (s.pos < 0) {
            s.pos = s.len;
        }
        s.save = PyEval_SaveThread();
        s.block = block_for_call(m, &s.own);
        s.status = s.block == NULL ? 2 : 0;
        while (s.status == 0 && s.pos < s.limit && s.pos + BATCH_OVERHEAD <= s.len && map_batch(&s) == 0) {
        }
        if (s.block != NULL && s.block != &s.own) {
            pipe_push(m->pipe, s.block); /* what it parsed: the run's batches before any it stopped at */
        }
        txn_leave(&s.txn);
        PyEval_RestoreThread(s.save);
    }
    Py_XDECREF(s.raw);
    free(s.inflated.data);
    free(s.own.data);
    if (s.transactional) {
        PyBuffer_Release(&txn_view);
    }
    if (s.listed) {
        PyBuffer_Release(&listed_view);
    }
    PyBuffer_Release(&view);
    if (s.status == 2) {
        return PyErr_NoMemory();
    }
    if (s.status == 4 || s.status == 5) {
        return NULL; /* a codec call's KeyboardInterrupt or the like, or the deferred blobs' error */
    }
    return Py_BuildValue("nnnnLL", s.pos, s.batches, s.records, s.bytes, (long long)s.last_offset,
                         (long long)s.latest);
}
