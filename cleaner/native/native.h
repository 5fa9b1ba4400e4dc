/*
 * The internal interface of cleaner._native's translation units (one module, PyInit__native in module.c):
 * the shared types, the hot helpers as static inline functions (so the record loops keep them inlined
 * across files), and the functions one file calls in another. Everything here is hidden: only the module
 * init is exported from the shared object.
 */
#ifndef LOGCLEANER_NATIVE_H
#define LOGCLEANER_NATIVE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sync_file_range */
#endif
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

#include "system_codecs.h"

/* Hidden symbols: calls between the files bind locally (no PLT, no interposition), and nothing but
 * PyInit__native (PyMODINIT_FUNC: default visibility) leaks into the dynamic symbol table. */
#pragma GCC visibility push(hidden)

extern PyObject *fallback_error; /* cleaner._native.Fallback: the caller runs the Python rules */

/* codecs.c: the registered Python codec functions and the system's libraries (see set_codecs) */
extern PyObject *codec_decompress, *codec_compress, *codec_types;
extern const SystemCodecs *system_codecs;
extern int system_codecs_on;

#include "varint.h"
#include "record_layout.h"
#include "key_map.h"
#include "batch.h"

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

/* The entry after `e`. */
static inline const unsigned char *
next_entry(const unsigned char *e)
{
    uint32_t n;
    memcpy(&n, e + 16, 4);
    return e + entry_size(n);
}

/* -- the record filter's types (filter_area.c, filter_batches.c) -- */
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

/* key_map.c */
extern PyTypeObject KeyMapType;

typedef struct PutPipe PutPipe; /* put_pipeline.c */

/* key_map.c */
int keymap_all_superseded(const KeyMap *m, int64_t first, int64_t last);

/* crc32c.c */
void crc32c_init(void);
uint32_t crc32c_by_table(const unsigned char *p, size_t n);
uint32_t crc32c(const unsigned char *p, size_t n);
PyObject *crc32c_by_table_py(PyObject *self, PyObject *arg);
PyObject *crc32c_py(PyObject *self, PyObject *arg);

/* put_pipeline.c */
int block_reserve(PutBlock *b, size_t more);
int put_entries(KeyMap *m, const unsigned char *p, const unsigned char *end);
PutBlock *pipe_take(PutPipe *p);
void pipe_push(PutPipe *p, PutBlock *b);
int pipe_finish(KeyMap *m);
int keymap_settle(KeyMap *m, int complete);
PyObject *keymap_start_pipeline(KeyMap *m, PyObject *unused);
PyObject *keymap_finish_pipeline(KeyMap *m, PyObject *unused);

/* map_scan.c */
PyObject *keymap_map_records(KeyMap *m, PyObject *args);
PyObject *keymap_map_batches(KeyMap *m, PyObject *args);

/* codecs.c */
PyObject *set_codecs(PyObject *self, PyObject *args);
int codec_call(PyObject *fn, unsigned codec, const unsigned char *p, Py_ssize_t n, PyObject **out);
int grow_array(void *slot, Py_ssize_t n, size_t item_size);
int inflate_area(unsigned codec, const unsigned char **area, Py_ssize_t *length, CodecBuffer *f, PyObject **raw, PyThreadState **save);
PyObject *set_system_codecs(PyObject *self, PyObject *arg);

/* txn_cursor.c */
int txn_cursor_get(PyObject *obj, Py_buffer *view, TxnCursor *t);
int64_t *txn_ongoing(const TxnCursor *t, int64_t producer_id);
void txn_read(TxnCursor *t, int64_t last_offset);
void txn_leave(TxnCursor *t);
void txn_end_aborted(TxnCursor *t, int64_t *o);

/* filter_area.c */
void filter_scratch_free(FilterScratch *sc);
int filter_area(FilterScratch *sc, const unsigned char *buf, Py_ssize_t end, Py_ssize_t count, FilterCall *c);
PyObject *filter_records(PyObject *self, PyObject *args);

/* filter_batches.c */
PyObject *filter_batches(PyObject *self, PyObject *args);

/* scans.c */
PyObject *scan_producer_headers(PyObject *self, PyObject *args);
PyObject *start_writeback(PyObject *self, PyObject *args);
PyObject *scan_batch_runs(PyObject *self, PyObject *args);

/* blob_io.c */
int keymap_complete(KeyMap *m);
PyObject *defer_key_map(PyObject *self, PyObject *args);
PyObject *set_key_class(PyObject *self, PyObject *args);
PyObject *skip_batch_checks(PyObject *self, PyObject *arg);
PyObject *key_class(PyObject *self, PyObject *args);
PyObject *or_superseded_bits(PyObject *self, PyObject *args);
int add_key_map_blob_functions(PyObject *m);

/* spill.c */
int add_spill_functions(PyObject *module);

#pragma GCC visibility pop

#endif
