/* The record rules of cleaner.compaction.rules.filter_batch over one records area, and filter_records. */
#include "native.h"

/* -- the record filter --------------------------------------------------------------------------- */

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

void
filter_scratch_free(FilterScratch *sc)
{
    free(sc->views);
    free(sc->kept);
    free(sc->hashes);
    free(sc->timestamps);
    free(sc->out);
}

/* The survivors re-encoded into sc->out as the Python encoder writes them: attributes 0, the timestamp delta
 * against c->new_base, every other field copied. 0, or 1 (a delta out of range: the Python rules'). */
static inline int
encode_survivors(FilterScratch *sc, const unsigned char *buf, FilterCall *c)
{
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
 * The record rules of rules.filter_batch over one records area; the survivors re-encoded into sc->out
 * (attributes 0, timestamp delta against the new base timestamp, every other field copied) when some
 * record goes or a horizon is added. 0 ok, 1 fallback (odd encoding), 2 no memory.
 */
int
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
            if ((c->use_bitmap || key_map->spilled) && !__builtin_add_overflow(c->base_offset, r->offset_delta, &offset)) {
                r->superseded = keymap_superseded(key_map, offset);
            }
            if (r->superseded < 0 && key_map->spilled) {
                return 1; /* a spilled map has no table to look up: the Python rules raise */
            }
            if (r->superseded < 0) {
                /* a first lookup the bitmap cannot answer: the deferred blobs put first (a call only then) */
                if (key_map->deferred_done < key_map->deferred_count && keymap_complete(key_map) < 0) {
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
    return encode_survivors(sc, buf, c);
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
PyObject *
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
