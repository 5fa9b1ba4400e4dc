/* filter_batches: a run of plain batches filtered, their headers rewritten, the transaction state kept. */
#include "native.h"

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

/* One filter_batches call: its buffers, its output and what its steps share from batch to batch. */
typedef struct {
    Py_buffer view, out_view, ends_view, txn_view;
    int has_view, has_out, has_ends, transactional;
    const unsigned char *buf;
    Py_ssize_t len, pos, limit;
    KeyMap *key_map;
    int64_t map_latest_offset, now_ms, new_horizon, upper_bound;
    const int64_t *ends; /* producer_ends: ends_count (last data offset, producer id) pairs */
    Py_ssize_t ends_count;
    PyObject *committed;
    TxnCursor txn;
    unsigned char *out;
    size_t out_capacity;
    Py_ssize_t out_length, batches;
    int64_t *meta; /* META_FIELDS per batch */
    size_t meta_capacity;
    int status;                           /* 0, or 2 no memory, 3 `out` too small, 4 an error set */
    FilterScratch sc;
    PyObject *raw, *packed;               /* a compressed batch's records, and its survivors compressed */
    CodecBuffer inflated;                 /* or its records decompressed by the system's codec library */
    CodecBuffer deflated;                 /* or its survivors compressed by it */
    int64_t *txn_events;                  /* push_txn_event's, not applied yet */
    size_t txn_count, txn_capacity;
    PyThreadState *save;                  /* the GIL released: taken back for codec and set calls */
} BatchFilter;

/* A v2 batch header's fields the filter reads. */
typedef struct {
    int64_t size, base, base_ts, max_ts, producer_id, last;
    unsigned attributes, codec;
    int32_t last_delta, count;
} BatchHeader;

/* What the transaction state says of a batch. */
typedef struct {
    int retain_empty, is_marker, can_discard, kept_committed;
    int64_t *aborted; /* the producer's ongoing aborted transaction, for its data and ABORT marker */
} BatchVerdict;

/* The arguments and buffers of a call: 0, or -1 with the error set (batch_filter_free releases what was taken). */
static int
batch_filter_open(BatchFilter *f, PyObject *args)
{
    PyObject *key_map_obj, *out_obj = Py_None, *ends_obj = Py_None, *committed_obj = Py_None, *txn_obj = Py_None;
    long long map_latest_offset, now_ms, new_horizon, upper_bound;
    if (!PyArg_ParseTuple(args, "y*nnOLLLL|OOOO", &f->view, &f->pos, &f->limit, &key_map_obj, &map_latest_offset,
                          &now_ms, &new_horizon, &upper_bound, &out_obj, &ends_obj, &committed_obj, &txn_obj)) {
        return -1;
    }
    f->has_view = 1;
    if (!PyObject_TypeCheck(key_map_obj, &KeyMapType) || (committed_obj != Py_None && !PySet_Check(committed_obj)) ||
        (committed_obj == Py_None) != (txn_obj == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "key_map must be a KeyMap; committed a set and txns a cursor, or neither");
        return -1;
    }
    f->key_map = (KeyMap *)key_map_obj;
    if (keymap_settle(f->key_map, 0) < 0) {
        return -1;
    }
    f->has_ends = ends_obj != Py_None && PyObject_GetBuffer(ends_obj, &f->ends_view, PyBUF_SIMPLE) == 0;
    if (ends_obj != Py_None && !f->has_ends) {
        return -1;
    }
    if (f->has_ends && f->ends_view.len % 16 != 0) {
        PyErr_SetString(PyExc_ValueError, "producer_ends must hold int64 pairs");
        return -1;
    }
    if (txn_cursor_get(txn_obj, &f->txn_view, &f->txn) < 0) {
        return -1;
    }
    f->transactional = txn_obj != Py_None;
    f->has_out = out_obj != Py_None && PyObject_GetBuffer(out_obj, &f->out_view, PyBUF_WRITABLE) == 0;
    if (out_obj != Py_None && !f->has_out) {
        return -1;
    }
    f->ends = f->has_ends ? f->ends_view.buf : NULL;
    f->ends_count = f->has_ends ? f->ends_view.len / 16 : 0;
    f->committed = committed_obj;
    f->map_latest_offset = map_latest_offset;
    f->now_ms = now_ms;
    f->new_horizon = new_horizon;
    f->upper_bound = upper_bound;
    f->buf = f->view.buf;
    f->len = f->view.len;
    if (f->pos < 0 || f->pos > f->len) {
        f->pos = f->len;
    }
    Py_ssize_t limit = f->limit < f->len ? f->limit : f->len;
    f->out_capacity = f->has_out ? (size_t)f->out_view.len : (size_t)(f->limit > f->pos ? limit - f->pos : 0) * 2 + (1 << 16);
    f->out = f->has_out ? f->out_view.buf : malloc(f->out_capacity);
    f->meta_capacity = 64;
    f->meta = malloc(f->meta_capacity * META_FIELDS * sizeof(int64_t));
    if (f->out == NULL || f->meta == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Everything a call took (what batch_filter_open took, if it failed). */
static void
batch_filter_free(BatchFilter *f)
{
    Py_XDECREF(f->raw);
    Py_XDECREF(f->packed);
    free(f->inflated.data);
    free(f->deflated.data);
    filter_scratch_free(&f->sc);
    free(f->txn_events);
    if (f->has_ends) {
        PyBuffer_Release(&f->ends_view);
    }
    if (f->transactional) {
        PyBuffer_Release(&f->txn_view);
    }
    if (f->has_out) {
        PyBuffer_Release(&f->out_view);
    }
    else {
        free(f->out);
    }
    free(f->meta);
    if (f->has_view) {
        PyBuffer_Release(&f->view);
    }
}

/* The batch's header at b, or -1: not one the C loops read (the Python rules' from here on). */
static inline int
batch_header_read(const BatchFilter *f, const unsigned char *b, BatchHeader *h)
{
    h->size = (int64_t)(int32_t)be32(b + 8) + 12;
    if (h->size < BATCH_OVERHEAD || h->size > f->len - f->pos || b[16] != 2) {
        return -1;
    }
    h->attributes = (unsigned)b[21] << 8 | b[22];
    h->codec = h->attributes & CODEC_BITS;
    h->last_delta = (int32_t)be32(b + 23);
    h->base = be64(b);
    h->base_ts = be64(b + 27);
    h->max_ts = be64(b + 35);
    h->producer_id = be64(b + 43);
    h->count = (int32_t)be32(b + 57);
    if (!loops_read(h->attributes, f->transactional) || (h->producer_id != -1 && !f->has_ends) || h->last_delta < 0 ||
        h->count <= 0 || h->base + h->last_delta + 1 == f->upper_bound ||
        (!keymap_scan_checked(f->key_map, h->base, h->base + h->last_delta) &&
         crc32c(b + 21, (size_t)h->size - 21) != be32(b + 17))) {
        return -1;
    }
    h->last = h->base + h->last_delta;
    return 0;
}

/*
 * CleanedTransactionMetadata.on_control_batch_read: an ABORT marker is kept if data of its producer's ongoing
 * aborted transaction was read (which is retained), else it may go; a COMMIT marker is kept while its producer
 * is among the ongoing committed (and it leaves them), else it may go. A producer whose last entry is a marker
 * (no data offset: rules.is_last_record_of_producer by epoch) leaves it to the Python rules (-1).
 */
static int
marker_verdict(BatchFilter *f, const unsigned char *b, const BatchHeader *h, BatchVerdict *v)
{
    int type = marker_type(b, h->size);
    if (type < 0 || is_producers_last(f->ends, f->ends_count, -1, h->producer_id)) {
        return -1;
    }
    if (type != MARKER_ABORT) {
        v->aborted = NULL; /* a COMMIT leaves an aborted transaction of its producer as it is */
    }
    if (type == MARKER_COMMIT) {
        PyEval_RestoreThread(f->save);
        PyObject *producer = NULL;
        if (apply_txn_events(f->committed, f->txn_events, &f->txn_count) < 0 ||
            (producer = PyLong_FromLongLong(h->producer_id)) == NULL ||
            (v->kept_committed = PySet_Contains(f->committed, producer)) < 0) {
            f->status = 4;
        }
        Py_XDECREF(producer);
        f->save = PyEval_SaveThread();
        if (f->status != 0) {
            return -1;
        }
    }
    v->can_discard = type == MARKER_ABORT ? v->aborted == NULL || v->aborted[2] < 0 : !v->kept_committed;
    return 0;
}

/* The batch's retention from the transaction state: 0, or -1 (the Python rules', or f->status set). */
static inline int
batch_verdict(BatchFilter *f, const unsigned char *b, const BatchHeader *h, BatchVerdict *v)
{
    v->retain_empty = h->producer_id != -1 && is_producers_last(f->ends, f->ends_count, h->last, h->producer_id);
    v->is_marker = (h->attributes & CONTROL_BIT) != 0;
    v->can_discard = 0;
    v->kept_committed = 0;
    v->aborted = NULL;
    if (f->transactional) {
        txn_read(&f->txn, h->last);
        v->aborted = (h->attributes & TRANSACTIONAL_BIT) ? txn_ongoing(&f->txn, h->producer_id) : NULL;
    }
    if (v->is_marker) {
        return marker_verdict(f, b, h, v);
    }
    if (v->aborted != NULL) {
        /* on_batch_read: aborted data, which goes (rules.batch_retention's DELETE); its producer's last
         * batch, kept as a bare header after its records are read, is the Python rules' */
        v->can_discard = 1;
        return v->retain_empty ? -1 : 0;
    }
    return 0;
}

/* The record rules over the batch's records (none read if the batch goes whole): 0, or -1. */
static inline int
batch_records(BatchFilter *f, const unsigned char *b, const BatchHeader *h, BatchVerdict *v, FilterCall *c)
{
    int discard_records =
        v->is_marker ? v->can_discard && (h->attributes & 0x40) && h->base_ts <= f->now_ms : v->can_discard;
    if (discard_records) {
        v->retain_empty = 0; /* rules.batch_retention's DELETE: gone, its records not read */
        return 0;
    }
    if (!v->is_marker && h->count == (int64_t)h->last_delta + 1 && h->last <= f->map_latest_offset &&
        keymap_all_superseded(f->key_map, h->base, h->last)) {
        /* every offset holds a keyed record a later one supersedes (the map's scan read each of them
         * this round, so they are well formed): none survives, none is parsed */
        c->read = h->count;
        return 0;
    }
    const unsigned char *area = b + BATCH_OVERHEAD;
    Py_ssize_t area_length = (Py_ssize_t)h->size - BATCH_OVERHEAD;
    int status;
    if (h->codec && (status = inflate_area(h->codec, &area, &area_length, &f->inflated, &f->raw, &f->save)) != 0) {
        f->status = status == 1 ? 0 : status; /* the codec refused it: Python's, with its error */
        return -1;
    }
    c->base_offset = h->base;
    c->base_timestamp = h->base_ts;
    c->has_log_append_time = (h->attributes & 0x08) != 0;
    c->log_append_time = h->max_ts;
    c->has_horizon = (h->attributes & 0x40) != 0;
    c->horizon = h->base_ts;
    c->key_map = f->key_map;
    c->use_bitmap = !v->is_marker;
    c->is_control = v->is_marker;
    c->can_discard = v->can_discard;
    c->map_latest_offset = f->map_latest_offset;
    c->now_ms = f->now_ms;
    c->new_horizon = f->new_horizon;
    if ((status = filter_area(&f->sc, area, area_length, h->count, c)) != 0) {
        f->status = status == 1 ? 0 : status; /* a batch in an odd encoding: Python's */
        return -1;
    }
    return 0;
}

/* The survivors' records area as written: re-encoded, and compressed again with the batch's codec (by the
 * system's library, as `compress` would, else by a call of `compress`). 0, or -1 (f->status says why). */
static inline int
batch_compress(BatchFilter *f, const BatchHeader *h, const FilterCall *c, const unsigned char **kept_area,
               Py_ssize_t *kept_length)
{
    *kept_area = f->sc.out;
    *kept_length = c->out_length;
    int by_system = h->codec && c->out_length > 0 && system_codecs != NULL && system_codecs_on
                        ? system_codecs->compress(h->codec, f->sc.out, (size_t)c->out_length, &f->deflated)
                        : -2;
    if (by_system == -1) {
        f->status = 2;
        return -1;
    }
    if (by_system == 0) {
        *kept_area = f->deflated.data;
        *kept_length = (Py_ssize_t)f->deflated.length;
    }
    else if (h->codec && c->out_length > 0) {
        PyEval_RestoreThread(f->save);
        Py_CLEAR(f->raw);
        Py_CLEAR(f->packed);
        int status = codec_call(codec_compress, h->codec, f->sc.out, c->out_length, &f->packed);
        f->save = PyEval_SaveThread();
        if (status != 0) {
            f->status = status == 1 ? 0 : status;
            return -1;
        }
        *kept_area = (const unsigned char *)PyBytes_AS_STRING(f->packed);
        *kept_length = PyBytes_GET_SIZE(f->packed);
    }
    return 0;
}

/* Room for `need` bytes of output: 0, or -1 (f->status says why; 0: the caller's next call takes the batch). */
static int
batch_out_reserve(BatchFilter *f, const BatchHeader *h, size_t need)
{
    if (need <= f->out_capacity) {
        return 0;
    }
    if (f->has_out) {
        /* stops before this batch; the caller's next call takes it (a compressed one: Python's) */
        f->status = f->batches == 0 && !h->codec ? 3 : 0;
        return -1;
    }
    size_t capacity = f->out_capacity * 2 > need ? f->out_capacity * 2 : need;
    unsigned char *grown = realloc(f->out, capacity);
    if (grown == NULL) {
        f->status = 2;
        return -1;
    }
    f->out = grown;
    f->out_capacity = capacity;
    return 0;
}

/* The batch at the output's end (dropped, a bare header, unchanged, or rebuilt around its survivors): its
 * outcome, or -1 (f->status says why). */
static inline int
batch_write(BatchFilter *f, const unsigned char *b, const BatchHeader *h, const BatchVerdict *v, const FilterCall *c,
            const unsigned char *kept_area, Py_ssize_t kept_length, Py_ssize_t *written, int64_t *written_max_ts)
{
    int empty = c->kept == 0 && v->retain_empty;
    *written_max_ts = h->max_ts;
    *written = c->kept == 0 ? (empty ? BATCH_OVERHEAD : 0)
               : c->out_length > 0 ? BATCH_OVERHEAD + kept_length : (Py_ssize_t)h->size;
    if (batch_out_reserve(f, h, (size_t)f->out_length + (size_t)*written) < 0) {
        return -1;
    }
    unsigned char *o = f->out + f->out_length;
    if (c->kept == 0) {
        if (empty) {
            write_empty_batch(o, b, h->attributes);
        }
        return empty ? BATCH_REWRITTEN : BATCH_DROPPED;
    }
    if (c->out_length == 0) {
        memcpy(o, b, (size_t)h->size);
        return BATCH_UNCHANGED;
    }
    /* encode_rebuilt_batch: the header with the survivors' count, timestamps and horizon bit */
    *written_max_ts = c->has_log_append_time ? h->max_ts : c->max_ts;
    memcpy(o, b, BATCH_OVERHEAD);
    put_be32(o + 8, (uint32_t)(*written - 12));
    o[16] = 2;
    unsigned new_attributes = (h->attributes & (0x0F | TRANSACTIONAL_BIT | CONTROL_BIT)) | (c->horizon_out ? 0x40 : 0);
    o[21] = (unsigned char)(new_attributes >> 8);
    o[22] = (unsigned char)new_attributes;
    put_be64(o + 27, c->new_base);
    put_be64(o + 35, *written_max_ts);
    put_be32(o + 57, (uint32_t)c->kept);
    memcpy(o + BATCH_OVERHEAD, kept_area, (size_t)kept_length);
    put_be32(o + 17, crc32c(o + 21, (size_t)*written - 21));
    return *written == h->size && memcmp(o, b, (size_t)h->size) == 0 ? BATCH_UNCHANGED : BATCH_REWRITTEN;
}

/* The batch is taken: its metadata row, and what reading it changes in the transaction state, in order. */
static inline int
batch_taken(BatchFilter *f, const BatchHeader *h, const BatchVerdict *v, const FilterCall *c, int outcome,
            Py_ssize_t written, int64_t written_max_ts)
{
    if (f->batches == (Py_ssize_t)f->meta_capacity) {
        int64_t *grown = realloc(f->meta, f->meta_capacity * 2 * META_FIELDS * sizeof(int64_t));
        if (grown == NULL) {
            f->status = 2;
            return -1;
        }
        f->meta = grown;
        f->meta_capacity *= 2;
    }
    if (((h->attributes & TRANSACTIONAL_BIT) && !v->is_marker && v->aborted == NULL) || v->kept_committed) {
        int64_t event = v->is_marker ? ~h->producer_id : h->producer_id;
        if (push_txn_event(&f->txn_events, &f->txn_count, &f->txn_capacity, event) < 0) {
            f->status = 2;
            return -1;
        }
    }
    if (v->aborted != NULL && v->is_marker) {
        txn_end_aborted(&f->txn, v->aborted);
    }
    else if (v->aborted != NULL) {
        v->aborted[2] = h->last;
    }
    txn_taken(&f->txn);
    int64_t *row = f->meta + f->batches * META_FIELDS;
    row[0] = outcome;
    row[1] = f->pos;
    row[2] = h->size;
    row[3] = f->out_length;
    row[4] = written;
    row[5] = h->last;
    row[6] = written_max_ts;
    row[7] = c->read;
    row[8] = c->kept;
    row[9] = c->invalid;
    f->out_length += written;
    f->batches++;
    f->pos += (Py_ssize_t)h->size;
    return 0;
}

/* The batches from f->pos, with the GIL released, until one is not the C loops' (or the limit, or an error). */
static void
batch_filter_run(BatchFilter *f)
{
    while (f->pos < f->limit && f->pos + BATCH_OVERHEAD <= f->len) {
        const unsigned char *b = f->buf + f->pos;
        BatchHeader h;
        BatchVerdict v;
        FilterCall c = {0};
        const unsigned char *kept_area;
        Py_ssize_t kept_length, written;
        int64_t written_max_ts;
        int outcome;
        if (batch_header_read(f, b, &h) < 0 || batch_verdict(f, b, &h, &v) < 0 || batch_records(f, b, &h, &v, &c) < 0 ||
            batch_compress(f, &h, &c, &kept_area, &kept_length) < 0 ||
            (outcome = batch_write(f, b, &h, &v, &c, kept_area, kept_length, &written, &written_max_ts)) < 0 ||
            batch_taken(f, &h, &v, &c, outcome, written, written_max_ts) < 0) {
            break;
        }
    }
    txn_leave(&f->txn);
}

/* The call's result, or NULL with the error set. */
static PyObject *
batch_filter_result(BatchFilter *f)
{
    if (f->status != 2 && f->status != 4 && apply_txn_events(f->committed, f->txn_events, &f->txn_count) < 0) {
        f->status = 4; /* the error is set */
    }
    Py_ssize_t meta_bytes = (Py_ssize_t)(f->batches * META_FIELDS * sizeof(int64_t));
    switch (f->status) {
    case 2:
        return PyErr_NoMemory();
    case 3:
        return PyErr_Format(PyExc_ValueError, "output buffer of %zd bytes too small for the batch at %zd",
                            f->out_view.len, f->pos);
    case 4:
        return NULL; /* a codec call's KeyboardInterrupt or the like: already set */
    }
    if (f->has_out) {
        return Py_BuildValue("nny#", f->pos, f->out_length, (const char *)f->meta, meta_bytes);
    }
    return Py_BuildValue("ny#y#", f->pos, (const char *)f->out, f->out_length, (const char *)f->meta, meta_bytes);
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
PyObject *
filter_batches(PyObject *self, PyObject *args)
{
    BatchFilter f = {0};
    if (batch_filter_open(&f, args) < 0) {
        batch_filter_free(&f);
        return NULL;
    }
    f.save = PyEval_SaveThread();
    batch_filter_run(&f);
    PyEval_RestoreThread(f.save);
    PyObject *result = batch_filter_result(&f);
    batch_filter_free(&f);
    return result;
}
