/*
 * Optional C fast path for serve's start-up: the system calls a clean load makes in each partition dir,
 * made in one call with the GIL released, so that they run on another core while the interpreter imports
 * the API (service/storage/prescan.py runs it on a thread).
 *
 * scan_partitions(log_dir, names, max_read[, time_edges]) -> list, one item per name: None if log_dir/name
 * cannot be opened as a directory, else a tuple
 *
 *     (sizes, active_stem, offset_index, time_index, log_position, log_tail, shape, next_offset)
 *
 * - sizes: {file name: st_size} for every entry of the dir, in listing order, so that list(sizes) is
 *   what os.listdir returns: os.stat's size (symlinks followed) of each ".log", ".index" and ".timeindex"
 *   file, -1 for any other name (not stat'ed: the loader needs no other size) or a failed stat; None when
 *   the dir has a shape (below), which holds the sizes the loader needs;
 * - active_stem: the stem of the ".log" file with the largest all-digit stem (the active segment's), or
 *   None; the Python loader uses what follows only if that is the segment it finds active itself;
 * - offset_index, time_index: the whole "<stem>.index" and "<stem>.timeindex" files (bytes), or None if missing,
 *   longer than max_read, or not read whole;
 * - log_position, log_tail: the ".log" bytes from the position of the offset index's last whole entry
 *   (0 with no entry) to its size, or None (no index read, or more than max_read bytes);
 * - shape: when every name is "<20 digits>.log|.index|.timeindex|.txnindex|.snapshot" (a value that fits
 *   a signed 64-bit int), "leader-epoch-checkpoint" or "partition.metadata", and every index file has its
 *   ".log", the tuple (log_bases, txn_index_bases, snapshot_offsets, log_sizes, index_sizes,
 *   time_index_sizes, other_names): the first three sorted tuples of ints, then for each log base the
 *   sizes of its three files (None: no such file; -1: the stat failed), then the names of the two other
 *   kinds present; else None (the loader then sorts the names out itself, as it always can). With
 *   time_edges true (an inspection, which asks every segment's largest timestamp), an eighth item: for
 *   each log base but the last, the ".timeindex" file's first and last entries (its first 12 bytes, then
 *   its last 12 when it holds more than one entry: 12 or 24 bytes; b"" when it is empty), or None when
 *   it is missing, holds a partial entry or was not read whole; None for the last (active) segment, whose
 *   whole file is time_index above.
 *
 * - next_offset: the active segment's log end offset when the three reads above hold what a clean close
 *   leaves and the Python loader's checks would pass them (both indexes present with whole entries, the
 *   offset index's relative offsets rising and its last position inside the log, the time index's last
 *   timestamp not below its first and its last offset below the end, every batch of the tail whole with
 *   magic 2, a batch header and non-negative counts, no ".txnindex" for the segment); else None, and the
 *   loader runs its own checks on the bytes (which then say what is wrong).
 *
 * read_time_index_edges(paths) -> list, one item per path: None if it cannot be opened, else (length, edges):
 * its size, and its edges as scan_partitions reads a sealed segment's (None when the size is not a whole
 * number of entries or the reads fell short). The daemon's summary reads the sealed segments' largest
 * timestamps with it, with the GIL released.
 *
 * read_small_files(log_dir, names, file_name, max_read) -> list, one item per name: the first max_read bytes
 * of log_dir/name/file_name, or None if it cannot be opened or read (the stray-replica survey's
 * partition.metadata of every partition dir, read with the GIL released).
 *
 * Nothing here interprets the data beyond that position: the Python loader checks what it reads exactly
 * as it checks what it reads itself, and reads the files itself whenever an item is None or disagrees.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *name;
    long long size;
    int kind;  /* with find_shape: classify's kind, and the base of a numbered kind */
    long long base;
} entry_t;

typedef struct {
    const char *dir_name;
    int ok;
    entry_t *entries;
    size_t count;
    size_t capacity;
    Py_ssize_t active;  /* entry index of the active .log, -1 if none */
    char *index;
    Py_ssize_t index_len;  /* -1: not read */
    char *time_index;
    Py_ssize_t time_index_len;
    long long log_position;
    char *tail;
    Py_ssize_t tail_len;
    int regular;  /* the shape below holds */
    long long *logs, *txns, *snapshots, *indexed;  /* bases by kind; `indexed`: of the index files */
    size_t n_logs, n_txns, n_snapshots, n_indexed;
    long long *log_sizes;  /* with the shape: per log base, its .log, .index and .timeindex sizes (or NOT_LISTED) */
    char **edges;  /* with time_edges: per log base, the time index's first and last entries, or NULL */
    Py_ssize_t *edges_len;
    int has_next_offset;
    long long next_offset;
} partition_t;

enum { KIND_LOG, KIND_INDEX, KIND_TIME_INDEX, KIND_TXN_INDEX, KIND_SNAPSHOT, KIND_OTHER_FILE, KIND_IRREGULAR };

#define NOT_LISTED LLONG_MIN /* a log base's file the dir does not have (-1 is a failed stat) */

/* The kind of a name, and its base offset for the numbered kinds. */
static int
classify(const char *name, long long *base)
{
    if (name[0] < '0' || name[0] > '9') {
        int other = strcmp(name, "leader-epoch-checkpoint") == 0 || strcmp(name, "partition.metadata") == 0;
        return other ? KIND_OTHER_FILE : KIND_IRREGULAR;
    }
    unsigned long long value = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return KIND_IRREGULAR;
        }
        value = value * 10 + (unsigned long long)(name[i] - '0');
    }
    if (name[20] != '.' || value > (unsigned long long)INT64_MAX) {
        return KIND_IRREGULAR;
    }
    *base = (long long)value;
    const char *ext = name + 21;
    if (strcmp(ext, "log") == 0) {
        return KIND_LOG;
    }
    if (strcmp(ext, "index") == 0) {
        return KIND_INDEX;
    }
    if (strcmp(ext, "timeindex") == 0) {
        return KIND_TIME_INDEX;
    }
    if (strcmp(ext, "txnindex") == 0) {
        return KIND_TXN_INDEX;
    }
    if (strcmp(ext, "snapshot") == 0) {
        return KIND_SNAPSHOT;
    }
    return KIND_IRREGULAR;
}

static int
compare_long_long(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Sets p->regular and the sorted bases (runs without the GIL). */
static void
find_shape(partition_t *p)
{
    p->regular = 0;
    size_t n = p->count ? p->count : 1;
    p->logs = malloc(n * sizeof(long long));
    p->txns = malloc(n * sizeof(long long));
    p->snapshots = malloc(n * sizeof(long long));
    p->indexed = malloc(n * sizeof(long long));
    if (p->logs == NULL || p->txns == NULL || p->snapshots == NULL || p->indexed == NULL) {
        return;
    }
    for (size_t i = 0; i < p->count; i++) {
        long long base = 0;
        p->entries[i].kind = classify(p->entries[i].name, &base);
        p->entries[i].base = base;
        switch (p->entries[i].kind) {
        case KIND_LOG:
            p->logs[p->n_logs++] = base;
            break;
        case KIND_TXN_INDEX:
            p->txns[p->n_txns++] = base;
            p->indexed[p->n_indexed++] = base;
            break;
        case KIND_INDEX:
        case KIND_TIME_INDEX:
            p->indexed[p->n_indexed++] = base;
            break;
        case KIND_SNAPSHOT:
            p->snapshots[p->n_snapshots++] = base;
            break;
        case KIND_OTHER_FILE:
            break;
        default:
            return;
        }
    }
    qsort(p->logs, p->n_logs, sizeof(long long), compare_long_long);
    qsort(p->txns, p->n_txns, sizeof(long long), compare_long_long);
    qsort(p->snapshots, p->n_snapshots, sizeof(long long), compare_long_long);
    for (size_t i = 0; i < p->n_indexed; i++) {
        if (bsearch(&p->indexed[i], p->logs, p->n_logs, sizeof(long long), compare_long_long) == NULL) {
            return;  /* an index file without its .log: the loader deletes it */
        }
    }
    p->log_sizes = malloc(3 * (p->n_logs ? p->n_logs : 1) * sizeof(long long));
    if (p->log_sizes == NULL) {
        return;
    }
    for (size_t i = 0; i < 3 * p->n_logs; i++) {
        p->log_sizes[i] = NOT_LISTED;
    }
    for (size_t i = 0; i < p->count; i++) {  /* each file's size at its base: no name formatted, none compared */
        int kind = p->entries[i].kind;
        if (kind == KIND_LOG || kind == KIND_INDEX || kind == KIND_TIME_INDEX) {
            const long long *at =
                bsearch(&p->entries[i].base, p->logs, p->n_logs, sizeof(long long), compare_long_long);
            p->log_sizes[3 * (size_t)(at - p->logs) + (kind == KIND_LOG ? 0 : kind == KIND_INDEX ? 1 : 2)] =
                p->entries[i].size;
        }
    }
    p->regular = 1;
}

static int
add_entry(partition_t *p, const char *name, long long size)
{
    if (p->count == p->capacity) {
        size_t capacity = p->capacity ? p->capacity * 2 : 16;
        entry_t *grown = realloc(p->entries, capacity * sizeof(entry_t));
        if (grown == NULL) {
            return -1;
        }
        p->entries = grown;
        p->capacity = capacity;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        return -1;
    }
    p->entries[p->count].name = copy;
    p->entries[p->count].size = size;
    p->count++;
    return 0;
}

/* The stem's value if name is "<digits>.log" (at most 19 digits: larger ones are left to Python), else -1. */
static long long
log_stem_value(const char *name)
{
    size_t len = strlen(name);
    if (len < 5 || strcmp(name + len - 4, ".log") != 0 || len - 4 > 20) {
        return -1;
    }
    unsigned long long value = 0;
    for (size_t i = 0; i < len - 4; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return -1;
        }
        value = value * 10 + (unsigned long long)(name[i] - '0');
        if (value > (unsigned long long)INT64_MAX) {
            return -1;
        }
    }
    return (long long)value;
}

/* Whether the loader uses the file's size: a ".log", ".index" or ".timeindex" (no other file is stat'ed). */
static int
wants_size(const char *name)
{
    size_t len = strlen(name);
    return (len > 4 && strcmp(name + len - 4, ".log") == 0) || (len > 6 && strcmp(name + len - 6, ".index") == 0)
           || (len > 10 && strcmp(name + len - 10, ".timeindex") == 0);
}

/* Read exactly `size` bytes of dir_fd/name from `position`; NULL (and *len = -1) if not possible. */
static char *
read_range(int dir_fd, const char *name, long long position, long long size, Py_ssize_t *len)
{
    *len = -1;
    if (size == 0) {  /* nothing to read: it was there when listed, under the dir's lock */
        char *empty = malloc(1);
        if (empty != NULL) {
            *len = 0;
        }
        return empty;
    }
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    char *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf == NULL) {
        close(fd);
        return NULL;
    }
    long long done = 0;
    while (done < size) {
        ssize_t n = pread(fd, buf + done, (size_t)(size - done), (off_t)(position + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        done += n;
    }
    close(fd);
    if (done != size) {
        free(buf);
        return NULL;
    }
    *len = (Py_ssize_t)size;
    return buf;
}

static long long
size_of(partition_t *p, const char *name)
{
    for (size_t i = 0; i < p->count; i++) {
        if (strcmp(p->entries[i].name, name) == 0) {
            return p->entries[i].size;
        }
    }
    return -1;
}

#define TIME_INDEX_ENTRY 12
#define OFFSET_INDEX_ENTRY 8
#define LOG_OVERHEAD 12
#define MAGIC_OFFSET 16
#define RECORD_BATCH_OVERHEAD 61
#define LAST_OFFSET_DELTA_AT 23
#define RECORD_COUNT_AT 57

static long long
be_int(const unsigned char *at, int bytes)
{
    unsigned long long value = 0;
    for (int i = 0; i < bytes; i++) {
        value = (value << 8) | at[i];
    }
    if (bytes == 4) {
        return (long long)(int32_t)(uint32_t)value;
    }
    return (long long)value;
}

/* The active segment's end offset if its bytes pass every check the Python loader makes of a clean
 * active segment (see the module comment), else leaves has_next_offset 0. Runs without the GIL. */
static void
verify_active(partition_t *p, long long base)
{
    if (p->index_len < 0 || p->time_index_len < 0 || p->tail_len < 0 || p->index_len % OFFSET_INDEX_ENTRY != 0
        || p->time_index_len % TIME_INDEX_ENTRY != 0 || base < 0 || base > INT64_MAX / 2) {
        return;
    }
    for (size_t i = 0; i < p->n_txns; i++) {
        if (p->txns[i] == base) {
            return;  /* its check is the Python loader's */
        }
    }
    const unsigned char *index = (const unsigned char *)p->index;
    Py_ssize_t entries = p->index_len / OFFSET_INDEX_ENTRY;
    long long previous = -1, position = 0;
    for (Py_ssize_t i = 0; i < entries; i++) {
        long long relative = be_int(index + i * OFFSET_INDEX_ENTRY, 4);
        long long at = be_int(index + i * OFFSET_INDEX_ENTRY + 4, 4);
        if (relative <= previous || at < position) {
            return;  /* not rising: the loader's own lookup decides */
        }
        previous = relative;
        position = at;
    }
    long long log_size = p->entries[p->active].size;
    if ((entries > 0 && position >= log_size) || p->log_position != position
        || position + p->tail_len != log_size) {
        return;
    }
    const unsigned char *tail = (const unsigned char *)p->tail;
    long long next = base;
    for (Py_ssize_t at = 0; at < p->tail_len;) {
        Py_ssize_t left = p->tail_len - at;
        if (left < RECORD_BATCH_OVERHEAD) {
            return;
        }
        long long size = be_int(tail + at + 8, 4) + LOG_OVERHEAD;
        if (size < RECORD_BATCH_OVERHEAD || size > left || tail[at + MAGIC_OFFSET] != 2) {
            return;
        }
        long long batch_base = be_int(tail + at, 8);
        long long last_delta = be_int(tail + at + LAST_OFFSET_DELTA_AT, 4);
        if (be_int(tail + at + RECORD_COUNT_AT, 4) < 0 || last_delta < 0 || batch_base < 0
            || batch_base > INT64_MAX / 2) {
            return;
        }
        next = batch_base + last_delta + 1;
        at += (Py_ssize_t)size;
    }
    Py_ssize_t time_entries = p->time_index_len / TIME_INDEX_ENTRY;
    if (time_entries > 0) {
        const unsigned char *times = (const unsigned char *)p->time_index;
        const unsigned char *last = times + (time_entries - 1) * TIME_INDEX_ENTRY;
        long long last_relative = be_int(last + 8, 4);
        if (be_int(last, 8) < be_int(times, 8) || last_relative < 0 || base + last_relative >= next) {
            return;
        }
    }
    p->has_next_offset = 1;
    p->next_offset = next;
}

/* The first and last entries of the time index open as fd, `size` bytes long (a whole number of entries):
 * its first 12 bytes, then its last 12 when it holds more than one entry; NULL (and *len = -1) if they
 * cannot be read. Runs without the GIL. */
static char *
read_edges(int fd, long long size, Py_ssize_t *len)
{
    *len = -1;
    long long want = size <= 2 * TIME_INDEX_ENTRY ? size : 2 * TIME_INDEX_ENTRY;
    char *edges = malloc(want > 0 ? (size_t)want : 1);
    if (edges == NULL) {
        return NULL;
    }
    long long first = want < TIME_INDEX_ENTRY ? want : TIME_INDEX_ENTRY;
    long long done = 0;
    while (done < want) {  /* [0, first) from 0, then the rest from the last entry's position */
        off_t at = done < first ? (off_t)done : (off_t)(size - (want - done));
        long long part = done < first ? first - done : want - done;
        ssize_t n = pread(fd, edges + done, (size_t)part, at);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            free(edges);
            return NULL;
        }
        done += n;
    }
    *len = (Py_ssize_t)want;
    return edges;
}

/* Each sealed segment's time-index edges (see the module comment); runs without the GIL. */
static void
read_time_edges(int dir_fd, partition_t *p)
{
    p->edges = calloc(p->n_logs ? p->n_logs : 1, sizeof(char *));
    p->edges_len = malloc((p->n_logs ? p->n_logs : 1) * sizeof(Py_ssize_t));
    if (p->edges == NULL || p->edges_len == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n_logs; i++) {
        p->edges_len[i] = -1;
        if (i + 1 == p->n_logs) {
            continue;  /* the active segment's whole file is read already */
        }
        char name[64];
        snprintf(name, sizeof(name), "%020lld.timeindex", p->logs[i]);
        long long size = p->log_sizes[3 * i + 2];
        if (size < 0 || size % TIME_INDEX_ENTRY != 0) { /* NOT_LISTED too */
            continue;  /* missing or partial: the Python check reads the file and says so */
        }
        int fd = size == 0 ? -1 : openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
        if (size == 0) {  /* nothing to read: it was there when listed, under the dir's lock */
            p->edges[i] = read_range(dir_fd, name, 0, 0, &p->edges_len[i]);
        } else if (fd >= 0) {
            p->edges[i] = read_edges(fd, size, &p->edges_len[i]);
            close(fd);
        }
    }
}

/* Runs without the GIL. */
static void
scan_one(int log_dir_fd, partition_t *p, long long max_read, int time_edges)
{
    p->active = -1;
    p->index_len = p->time_index_len = p->tail_len = -1;
    int dir_fd = openat(log_dir_fd, p->dir_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        return;
    }
    p->ok = 1;
    long long active_value = -1;
    /* getdents64 straight on the dir's descriptor: what readdir does, without fdopendir's fcntl calls */
    char listing[32768] __attribute__((aligned(8)));
    long got;
    while (p->ok && (got = syscall(SYS_getdents64, dir_fd, listing, sizeof(listing))) != 0) {
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            p->ok = 0; /* not listed whole: the loader lists it itself */
            break;
        }
        for (long at = 0; p->ok && at < got;) {
            struct dirent64 *entry = (struct dirent64 *)(listing + at);
            at += entry->d_reclen;
            const char *name = entry->d_name;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
                continue;
            }
            struct stat st;
            long long size = -1;
            if (wants_size(name) && fstatat(dir_fd, name, &st, 0) == 0) {
                size = (long long)st.st_size;
            }
            if (add_entry(p, name, size) < 0) {
                p->ok = 0;
                break;
            }
            long long value = log_stem_value(name);
            if (value > active_value) {
                active_value = value;
                p->active = (Py_ssize_t)p->count - 1;
            }
        }
    }
    if (p->ok) {
        find_shape(p);
    }
    if (p->ok && p->active >= 0 && p->entries[p->active].size >= 0) {
        const char *log_name = p->entries[p->active].name;
        size_t stem_len = strlen(log_name) - 4;
        char name[64];
        memcpy(name, log_name, stem_len);
        strcpy(name + stem_len, ".index");
        long long index_size = size_of(p, name);
        if (index_size >= 0 && index_size <= max_read) {
            p->index = read_range(dir_fd, name, 0, index_size, &p->index_len);
        }
        strcpy(name + stem_len, ".timeindex");
        long long time_size = size_of(p, name);
        if (time_size >= 0 && time_size <= max_read) {
            p->time_index = read_range(dir_fd, name, 0, time_size, &p->time_index_len);
        }
        if (p->index_len >= 0) {
            Py_ssize_t entries = p->index_len / 8;
            long long position = 0;
            if (entries > 0) {
                const unsigned char *last = (const unsigned char *)p->index + (entries - 1) * 8 + 4;
                position = ((long long)last[0] << 24) | (last[1] << 16) | (last[2] << 8) | last[3];
            }
            long long log_size = p->entries[p->active].size;
            if (position <= log_size && log_size - position <= max_read) {
                p->log_position = position;
                p->tail = read_range(dir_fd, log_name, position, log_size - position, &p->tail_len);
            }
        }
    }
    if (p->ok && p->regular && p->active >= 0 && p->n_logs > 0) {
        verify_active(p, p->logs[p->n_logs - 1]);
    }
    if (p->ok && p->regular && time_edges) {
        read_time_edges(dir_fd, p);
    }
    close(dir_fd);
}

static PyObject *
int_tuple(const long long *values, size_t n)
{
    PyObject *tuple = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; tuple != NULL && i < n; i++) {
        PyObject *value = PyLong_FromLongLong(values[i]);
        if (value == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, value);
    }
    return tuple;
}

/* Each log base's listed size of one of its files (column 0: .log, 1: .index, 2: .timeindex): an int, or None
 * when the dir has no such file. */
static PyObject *
sizes_tuple(partition_t *p, size_t column)
{
    PyObject *tuple = PyTuple_New((Py_ssize_t)p->n_logs);
    for (size_t i = 0; tuple != NULL && i < p->n_logs; i++) {
        long long size = p->log_sizes[3 * i + column];
        PyObject *item = size == NOT_LISTED ? Py_NewRef(Py_None) : PyLong_FromLongLong(size);
        if (item == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, item);
    }
    return tuple;
}

static PyObject *
other_names(partition_t *p)
{
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list != NULL && i < p->count; i++) {
        const char *name = p->entries[i].name;
        if (name[0] < '0' || name[0] > '9') {
            PyObject *text = PyUnicode_DecodeFSDefault(name);
            if (text == NULL || PyList_Append(list, text) < 0) {
                Py_XDECREF(text);
                Py_CLEAR(list);
                break;
            }
            Py_DECREF(text);
        }
    }
    if (list == NULL) {
        return NULL;
    }
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
}

/* Set item i of the new list *result to `item`; a NULL item (its exception set) drops the list. */
static void
put_item(PyObject **result, Py_ssize_t i, PyObject *item)
{
    if (item == NULL) {
        Py_CLEAR(*result);
    } else {
        PyList_SET_ITEM(*result, i, item);
    }
}

static PyObject *
bytes_or_none(const char *data, Py_ssize_t len)
{
    if (len < 0) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize(data, len);
}

static PyObject *
edges_tuple(partition_t *p)
{
    PyObject *tuple = PyTuple_New((Py_ssize_t)p->n_logs);
    for (size_t i = 0; tuple != NULL && i < p->n_logs; i++) {
        PyObject *item = p->edges == NULL ? Py_NewRef(Py_None) : bytes_or_none(p->edges[i], p->edges_len[i]);
        if (item == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, item);
    }
    return tuple;
}

static PyObject *
shape_of(partition_t *p, int time_edges)
{
    if (!p->regular) {
        Py_RETURN_NONE;
    }
    int n = time_edges ? 8 : 7;
    PyObject *items[8] = {
        int_tuple(p->logs, p->n_logs),
        int_tuple(p->txns, p->n_txns),
        int_tuple(p->snapshots, p->n_snapshots),
        sizes_tuple(p, 0),
        sizes_tuple(p, 1),
        sizes_tuple(p, 2),
        other_names(p),
        time_edges ? edges_tuple(p) : NULL,
    };
    PyObject *shape = PyTuple_New(n);
    for (int i = 0; i < n; i++) {
        if (items[i] == NULL || shape == NULL) {
            for (int j = 0; j < 8; j++) {
                Py_XDECREF(items[j]);
            }
            Py_XDECREF(shape);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        PyTuple_SET_ITEM(shape, i, items[i]);
    }
    return shape;
}

/* The Python item of one scanned partition (with the GIL); NULL on error. */
static PyObject *
build_item(partition_t *p, int time_edges)
{
    if (!p->ok) {
        Py_RETURN_NONE;
    }
    PyObject *sizes = p->regular ? Py_NewRef(Py_None) : PyDict_New();
    if (sizes == NULL) {
        return NULL;
    }
    for (size_t i = 0; !p->regular && i < p->count; i++) {
        PyObject *key = PyUnicode_DecodeFSDefault(p->entries[i].name);
        PyObject *value = key == NULL ? NULL : PyLong_FromLongLong(p->entries[i].size);
        if (value == NULL || PyDict_SetItem(sizes, key, value) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_DECREF(sizes);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    PyObject *stem;
    if (p->active >= 0) {
        const char *log_name = p->entries[p->active].name;
        stem = PyUnicode_DecodeFSDefaultAndSize(log_name, (Py_ssize_t)strlen(log_name) - 4);
    } else {
        stem = Py_NewRef(Py_None);
    }
    PyObject *index = bytes_or_none(p->index, p->index_len);
    PyObject *time_index = bytes_or_none(p->time_index, p->time_index_len);
    PyObject *tail = bytes_or_none(p->tail, p->tail_len);
    PyObject *shape = shape_of(p, time_edges);
    if (stem == NULL || index == NULL || time_index == NULL || tail == NULL || shape == NULL) {
        Py_DECREF(sizes);
        Py_XDECREF(stem);
        Py_XDECREF(index);
        Py_XDECREF(time_index);
        Py_XDECREF(tail);
        Py_XDECREF(shape);
        return NULL;
    }
    PyObject *next_offset = p->has_next_offset ? PyLong_FromLongLong(p->next_offset) : Py_NewRef(Py_None);
    if (next_offset == NULL) {
        Py_DECREF(sizes);
        Py_DECREF(stem);
        Py_DECREF(index);
        Py_DECREF(time_index);
        Py_DECREF(tail);
        Py_DECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(NNNNLNNN)", sizes, stem, index, time_index, p->log_position, tail, shape, next_offset);
}

static void
free_partition(partition_t *p)
{
    for (size_t i = 0; i < p->count; i++) {
        free(p->entries[i].name);
    }
    free(p->entries);
    free(p->index);
    free(p->time_index);
    free(p->tail);
    free(p->logs);
    free(p->txns);
    free(p->snapshots);
    free(p->indexed);
    free(p->log_sizes);
    for (size_t i = 0; p->edges != NULL && i < p->n_logs; i++) {
        free(p->edges[i]);
    }
    free(p->edges);
    free(p->edges_len);
}

/* `names` (a list of str) as file-system bytes, in a new list that keeps them alive while the GIL is
 * released; NULL with an exception set. */
static PyObject *
encode_names(PyObject *names)
{
    Py_ssize_t n = PyList_GET_SIZE(names);
    PyObject *encoded = PyList_New(n);
    for (Py_ssize_t i = 0; encoded != NULL && i < n; i++) {
        PyObject *name_bytes = NULL;
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(names, i), &name_bytes)) {
            Py_CLEAR(encoded);
        } else {
            PyList_SET_ITEM(encoded, i, name_bytes);
        }
    }
    return encoded;
}

static PyObject *
scan_partitions(PyObject *self, PyObject *args)
{
    PyObject *log_dir_arg, *names;
    long long max_read;
    int time_edges = 0;
    if (!PyArg_ParseTuple(args, "O&O!L|p", PyUnicode_FSConverter, &log_dir_arg, &PyList_Type, &names,
                          &max_read, &time_edges)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(names);
    PyObject *encoded = encode_names(names);
    partition_t *parts = encoded == NULL ? NULL : calloc(n > 0 ? (size_t)n : 1, sizeof(partition_t));
    if (parts == NULL) {
        Py_DECREF(log_dir_arg);
        Py_XDECREF(encoded);
        return encoded == NULL ? NULL : PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        parts[i].dir_name = PyBytes_AS_STRING(PyList_GET_ITEM(encoded, i));
    }
    const char *log_dir = PyBytes_AS_STRING(log_dir_arg);
    Py_BEGIN_ALLOW_THREADS
    int log_dir_fd = open(log_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (log_dir_fd >= 0) {
        for (Py_ssize_t i = 0; i < n; i++) {
            scan_one(log_dir_fd, &parts[i], max_read, time_edges);
        }
        close(log_dir_fd);
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (result != NULL) {
            put_item(&result, i, build_item(&parts[i], time_edges));
        }
        free_partition(&parts[i]);
    }
    free(parts);
    Py_DECREF(encoded);
    Py_DECREF(log_dir_arg);
    return result;
}

typedef struct {
    const char *dir_name;
    char *data;
    Py_ssize_t len;  /* -1: not read */
} small_file_t;

static void
read_small_file(int log_dir_fd, small_file_t *f, const char *file_name, long long max_read)
{
    f->len = -1;
    f->data = NULL;
    size_t path_len = strlen(f->dir_name) + 1 + strlen(file_name) + 1;
    char *path = malloc(path_len);
    if (path == NULL) {
        return;
    }
    snprintf(path, path_len, "%s/%s", f->dir_name, file_name);
    int fd = openat(log_dir_fd, path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) {
        return;
    }
    char *data = malloc(max_read > 0 ? (size_t)max_read : 1);
    Py_ssize_t len = 0;
    while (data != NULL && len < max_read) {
        ssize_t got = read(fd, data + len, (size_t)(max_read - len));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            free(data);
            data = NULL;
            break;
        }
        if (got == 0) {
            break;
        }
        len += got;
    }
    close(fd);
    if (data != NULL) {
        f->data = data;
        f->len = len;
    }
}

static PyObject *
read_small_files(PyObject *self, PyObject *args)
{
    PyObject *log_dir_arg, *names;
    const char *file_name;
    long long max_read;
    if (!PyArg_ParseTuple(args, "O&O!sL", PyUnicode_FSConverter, &log_dir_arg, &PyList_Type, &names,
                          &file_name, &max_read)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(names);
    PyObject *encoded = encode_names(names);
    small_file_t *files = encoded == NULL ? NULL : calloc(n > 0 ? (size_t)n : 1, sizeof(small_file_t));
    if (files == NULL) {
        Py_DECREF(log_dir_arg);
        Py_XDECREF(encoded);
        return encoded == NULL ? NULL : PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        files[i].dir_name = PyBytes_AS_STRING(PyList_GET_ITEM(encoded, i));
        files[i].len = -1;
    }
    const char *log_dir = PyBytes_AS_STRING(log_dir_arg);
    Py_BEGIN_ALLOW_THREADS
    int log_dir_fd = open(log_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (log_dir_fd >= 0) {
        for (Py_ssize_t i = 0; i < n; i++) {
            read_small_file(log_dir_fd, &files[i], file_name, max_read);
        }
        close(log_dir_fd);
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (result != NULL) {
            put_item(&result, i, bytes_or_none(files[i].data, files[i].len));
        }
        free(files[i].data);
    }
    free(files);
    Py_DECREF(encoded);
    Py_DECREF(log_dir_arg);
    return result;
}

typedef struct {
    const char *path;
    long long length;  /* -1: not opened or not stat'ed */
    char *edges;
    Py_ssize_t edges_len;  /* -1: not read */
} edges_file_t;

/* One time index: its length, and its edges when it holds whole entries. Runs without the GIL. */
static void
read_file_edges(edges_file_t *f)
{
    f->length = -1;
    f->edges = NULL;
    f->edges_len = -1;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    struct stat st;
    if (fstat(fd, &st) == 0) {
        f->length = (long long)st.st_size;
        if (f->length % TIME_INDEX_ENTRY == 0) {
            f->edges = read_edges(fd, f->length, &f->edges_len);
        }
    }
    close(fd);
}

static PyObject *
read_time_index_edges(PyObject *self, PyObject *args)
{
    PyObject *paths;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &paths)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(paths);
    PyObject *encoded = encode_names(paths);
    edges_file_t *files = encoded == NULL ? NULL : calloc(n > 0 ? (size_t)n : 1, sizeof(edges_file_t));
    if (files == NULL) {
        Py_XDECREF(encoded);
        return encoded == NULL ? NULL : PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        files[i].path = PyBytes_AS_STRING(PyList_GET_ITEM(encoded, i));
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        read_file_edges(&files[i]);
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (result != NULL) {
            put_item(&result, i,
                     files[i].length < 0 ? Py_NewRef(Py_None)
                                         : Py_BuildValue("(LN)", files[i].length,
                                                         bytes_or_none(files[i].edges, files[i].edges_len)));
        }
        free(files[i].edges);
    }
    free(files);
    Py_DECREF(encoded);
    return result;
}

static PyMethodDef methods[] = {
    {"read_small_files", read_small_files, METH_VARARGS,
     "read_small_files(log_dir, names, file_name, max_read): log_dir/name/file_name's first bytes, or None."},
    {"scan_partitions", scan_partitions, METH_VARARGS,
     "scan_partitions(log_dir, names, max_read[, time_edges]): each partition dir's sizes and active "
     "segment's bytes (and its sealed segments' time-index edges)."},
    {"read_time_index_edges", read_time_index_edges, METH_VARARGS,
     "read_time_index_edges(paths): each time index's (length, edges), edges None unless whole entries "
     "were read; None for a file that cannot be opened."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dirscan", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__dirscan(void)
{
    return PyModule_Create(&module);
}
