/* Header and batch-run scans of a .log (scan_producer_headers, scan_batch_runs) and start_writeback. */
#include "native.h"

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
PyObject *
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
PyObject *
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
PyObject *
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
