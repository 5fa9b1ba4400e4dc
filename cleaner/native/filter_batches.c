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
