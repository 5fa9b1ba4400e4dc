/*
 * Optional C fast path for the one hot loop of the storage engine: decoding the records of a v2 batch.
 *
 * decode_records(raw, count, base_offset, base_timestamp, log_append_time) mirrors
 * service.storage.records._decode_records_py exactly for valid input and returns a list of Record
 * tuples. On ANY anomaly (truncation, bad lengths, bad UTF-8, overflow) it raises _Fallback, and the
 * Python decoder runs instead and raises the precise CorruptDataError. So this file holds no error
 * messages and no format rules beyond the byte layout; the Python code stays the specification.
 *
 * system_compress(codec, data) compresses gzip (level 6), lz4 (Kafka's framing) and zstd (level 3) blobs
 * with the system's libz.so.1, liblz4.so.1 and libzstd.so.1 where present (None otherwise: compression.py
 * uses cramjam), the GIL released; the same C function, as a capsule, serves the cleaner's C loops, so that both write the same
 * bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyTypeObject *record_type = NULL;
static PyTypeObject *header_type = NULL;
static PyObject *fallback_error = NULL;
static PyObject *empty_tuple = NULL;

/* Zig-zag varint of at most 10 bytes; -1 on truncation or overflow. */
static int
read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
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
            *pos = p;
            *out = (int64_t)((result >> 1) ^ (0 - (result & 1)));
            return 0;
        }
    }
    return -1;
}

/* A nullable byte field (-1 = null); NULL on error, new reference otherwise. */
static PyObject *
read_bytes_field(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t length;
    if (read_varint(buf, end, pos, &length) < 0 || length < -1) {
        return NULL;
    }
    if (length == -1) {
        Py_RETURN_NONE;
    }
    if (length > end - *pos) {
        return NULL;
    }
    PyObject *value = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)length);
    *pos += (Py_ssize_t)length;
    return value;
}

static PyObject *
new_tuple_of(PyTypeObject *type, Py_ssize_t size)
{
    /* A NamedTuple is a tuple subclass: allocate it as tuple's own subtype constructor does. */
    return type->tp_alloc(type, size);
}

static PyObject *
read_headers(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t count;
    if (read_varint(buf, end, pos, &count) < 0 || count < 0 || count > end - *pos) {
        return NULL;
    }
    if (count == 0) {
        Py_INCREF(empty_tuple);
        return empty_tuple;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t key_length;
        if (read_varint(buf, end, pos, &key_length) < 0 || key_length < 0 || key_length > end - *pos) {
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + *pos, (Py_ssize_t)key_length, NULL);
        if (key == NULL) {
            goto fail;
        }
        *pos += (Py_ssize_t)key_length;
        PyObject *value = read_bytes_field(buf, end, pos);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *header = new_tuple_of(header_type, 2);
        if (header == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(header, 0, key);
        PyTuple_SET_ITEM(header, 1, value);
        PyTuple_SET_ITEM(headers, i, header);
    }
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

static PyObject *
decode_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *log_append_time_obj;
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.init was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nLLO", &view, &count, &base_offset, &base_timestamp,
                          &log_append_time_obj)) {
        return NULL;
    }
    int has_log_append_time = log_append_time_obj != Py_None;
    long long log_append_time = 0;
    if (has_log_append_time) {
        log_append_time = PyLong_AsLongLong(log_append_time_obj);
        if (log_append_time == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len;
    Py_ssize_t pos = 0;
    PyObject *records = PyList_New(0);
    if (records == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        int64_t length, ts_delta, offset_delta, timestamp, offset;
        if (read_varint(buf, end, &pos, &length) < 0 || length < 0 || length > end - pos) {
            goto fallback;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos += 1; /* record attributes: unused */
        if (read_varint(buf, end, &pos, &ts_delta) < 0 || read_varint(buf, end, &pos, &offset_delta) < 0) {
            goto fallback;
        }
        if (__builtin_add_overflow((int64_t)base_offset, offset_delta, &offset)) {
            goto fallback;
        }
        if (has_log_append_time) {
            timestamp = log_append_time;
        }
        else if (__builtin_add_overflow((int64_t)base_timestamp, ts_delta, &timestamp)) {
            goto fallback;
        }
        PyObject *key = read_bytes_field(buf, end, &pos);
        if (key == NULL) {
            goto fallback;
        }
        PyObject *value = read_bytes_field(buf, end, &pos);
        if (value == NULL) {
            Py_DECREF(key);
            goto fallback;
        }
        PyObject *headers = read_headers(buf, end, &pos);
        if (headers == NULL || pos != record_end) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_XDECREF(headers);
            goto fallback;
        }
        PyObject *record = new_tuple_of(record_type, 5);
        PyObject *py_offset = PyLong_FromLongLong(offset);
        PyObject *py_timestamp = PyLong_FromLongLong(timestamp);
        if (record == NULL || py_offset == NULL || py_timestamp == NULL) {
            Py_XDECREF(record);
            Py_XDECREF(py_offset);
            Py_XDECREF(py_timestamp);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        PyTuple_SET_ITEM(record, 0, py_offset);
        PyTuple_SET_ITEM(record, 1, py_timestamp);
        PyTuple_SET_ITEM(record, 2, key);
        PyTuple_SET_ITEM(record, 3, value);
        PyTuple_SET_ITEM(record, 4, headers);
        int appended = PyList_Append(records, record);
        Py_DECREF(record);
        if (appended < 0) {
            goto error;
        }
    }
    if (pos != end) {
        goto fallback;
    }
    PyBuffer_Release(&view);
    return records;
fallback:
    PyErr_Clear();
    PyErr_SetNone(fallback_error);
error:
    Py_DECREF(records);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *
init(PyObject *self, PyObject *args)
{
    PyObject *record, *header;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &record, &PyType_Type, &header)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)record, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)header, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Record and Header must be tuple subclasses");
        return NULL;
    }
    Py_INCREF(record);
    Py_INCREF(header);
    Py_XSETREF(record_type, (PyTypeObject *)record);
    Py_XSETREF(header_type, (PyTypeObject *)header);
    Py_RETURN_NONE;
}

/* -- compression by the system's liblz4 and libzstd ---------------------------------------------------- */

static int (*lz4_compress_default)(const char *src, char *dst, int src_size, int dst_capacity) = NULL;
static int (*lz4_compress_bound)(int size) = NULL;
static void *(*zstd_create_cctx)(void) = NULL;
static size_t (*zstd_free_cctx)(void *) = NULL;
static size_t (*zstd_compress_cctx)(void *, void *, size_t, const void *, size_t, int) = NULL;
static size_t (*zstd_compress_bound)(size_t) = NULL;
static unsigned (*zstd_is_error)(size_t) = NULL;
static pthread_key_t zstd_cctx_key; /* each thread's compression context, freed with the thread */

/* zlib's z_stream (its ABI: zlib.h is not needed to build) and the deflate functions used */
typedef struct {
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state, *zalloc, *zfree, *opaque;
    int data_type;
    unsigned long adler, reserved;
} ZStream;
static int (*z_deflate_init2)(ZStream *, int, int, int, int, int, const char *, int) = NULL;
static int (*z_deflate)(ZStream *, int flush) = NULL;
static int (*z_deflate_reset)(ZStream *) = NULL;
static int (*z_deflate_end)(ZStream *) = NULL;
static unsigned long (*z_deflate_bound)(ZStream *, unsigned long) = NULL;
static const char *(*z_version)(void) = NULL;
static pthread_key_t deflater_key; /* each thread's gzip deflater, ended with the thread */

/* compression.py's codec ids; Kafka's default levels (zlib's default 6 for gzip), deflate's gzip set-up */
enum { CODEC_GZIP = 1, CODEC_LZ4 = 3, CODEC_ZSTD = 4, ZSTD_LEVEL = 3, GZIP_LEVEL = 6 };
enum { Z_OK = 0, Z_STREAM_END = 1, Z_FINISH = 4, Z_DEFLATED = 8, GZIP_WINDOW_BITS = 31, Z_MEM_LEVEL = 8 };
static const unsigned char KAFKA_LZ4_HEADER[7] = {0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82};
#define LZ4_BLOCK_BYTES 65536
#define LZ4_STORED_FLAG 0x80000000u

static void
free_zstd_cctx(void *cctx)
{
    zstd_free_cctx(cctx);
}

static void
free_deflater(void *z)
{
    z_deflate_end(z);
    free(z);
}

static void
load_system_codecs(void)
{
    void *lz4 = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lz4 != NULL) {
        lz4_compress_default = (int (*)(const char *, char *, int, int))dlsym(lz4, "LZ4_compress_default");
        lz4_compress_bound = (int (*)(int))dlsym(lz4, "LZ4_compressBound");
        if (lz4_compress_bound == NULL) {
            lz4_compress_default = NULL;
        }
    }
    void *zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (zstd != NULL) {
        zstd_create_cctx = (void *(*)(void))dlsym(zstd, "ZSTD_createCCtx");
        zstd_free_cctx = (size_t(*)(void *))dlsym(zstd, "ZSTD_freeCCtx");
        zstd_compress_cctx =
            (size_t(*)(void *, void *, size_t, const void *, size_t, int))dlsym(zstd, "ZSTD_compressCCtx");
        zstd_compress_bound = (size_t(*)(size_t))dlsym(zstd, "ZSTD_compressBound");
        zstd_is_error = (unsigned (*)(size_t))dlsym(zstd, "ZSTD_isError");
        if (zstd_free_cctx == NULL || zstd_compress_cctx == NULL || zstd_compress_bound == NULL ||
            zstd_is_error == NULL || pthread_key_create(&zstd_cctx_key, free_zstd_cctx) != 0) {
            zstd_create_cctx = NULL;
        }
    }
    void *zlib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (zlib != NULL) {
        z_deflate_init2 = (int (*)(ZStream *, int, int, int, int, int, const char *, int))dlsym(zlib, "deflateInit2_");
        z_deflate = (int (*)(ZStream *, int))dlsym(zlib, "deflate");
        z_deflate_reset = (int (*)(ZStream *))dlsym(zlib, "deflateReset");
        z_deflate_end = (int (*)(ZStream *))dlsym(zlib, "deflateEnd");
        z_deflate_bound = (unsigned long (*)(ZStream *, unsigned long))dlsym(zlib, "deflateBound");
        z_version = (const char *(*)(void))dlsym(zlib, "zlibVersion");
        if (z_deflate == NULL || z_deflate_reset == NULL || z_deflate_end == NULL || z_deflate_bound == NULL ||
            z_version == NULL || pthread_key_create(&deflater_key, free_deflater) != 0) {
            z_deflate_init2 = NULL;
        }
    }
}

static int
reserve(unsigned char **out, size_t *capacity, size_t need)
{
    if (need <= *capacity) {
        return 0;
    }
    unsigned char *grown = realloc(*out, need);
    if (grown == NULL) {
        return -1;
    }
    *out = grown;
    *capacity = need;
    return 0;
}

/* compression.py's _compress_lz4_frame: Kafka's frame header, each 64 KiB of input an LZ4 block (stored
 * when it does not shrink), the end mark. */
static int
lz4_frame_compress(const unsigned char *src, size_t n, unsigned char **out, size_t *length, size_t *capacity)
{
    size_t blocks = (n + LZ4_BLOCK_BYTES - 1) / LZ4_BLOCK_BYTES;
    size_t bound = (size_t)lz4_compress_bound(LZ4_BLOCK_BYTES);
    if (reserve(out, capacity, sizeof KAFKA_LZ4_HEADER + blocks * (4 + bound) + 4) < 0) {
        return -1;
    }
    unsigned char *o = *out;
    memcpy(o, KAFKA_LZ4_HEADER, sizeof KAFKA_LZ4_HEADER);
    size_t at = sizeof KAFKA_LZ4_HEADER;
    for (size_t start = 0; start < n; start += LZ4_BLOCK_BYTES) {
        int chunk = (int)(n - start < LZ4_BLOCK_BYTES ? n - start : LZ4_BLOCK_BYTES);
        int packed = lz4_compress_default((const char *)src + start, (char *)o + at + 4, chunk, (int)bound);
        uint32_t word = (uint32_t)packed;
        if (packed <= 0 || packed >= chunk) { /* it does not shrink: stored */
            memcpy(o + at + 4, src + start, (size_t)chunk);
            packed = chunk;
            word = (uint32_t)chunk | LZ4_STORED_FLAG;
        }
        for (int i = 0; i < 4; i++) {
            o[at + i] = (unsigned char)(word >> (8 * i));
        }
        at += 4 + (size_t)packed;
    }
    memset(o + at, 0, 4);
    *length = at + 4;
    return 0;
}

static int
zstd_compress(const unsigned char *src, size_t n, unsigned char **out, size_t *length, size_t *capacity)
{
    void *cctx = pthread_getspecific(zstd_cctx_key);
    if (cctx == NULL) {
        cctx = zstd_create_cctx();
        if (cctx == NULL || pthread_setspecific(zstd_cctx_key, cctx) != 0) {
            if (cctx != NULL) {
                zstd_free_cctx(cctx);
            }
            return -1;
        }
    }
    size_t bound = zstd_compress_bound(n);
    if (reserve(out, capacity, bound) < 0) {
        return -1;
    }
    size_t written = zstd_compress_cctx(cctx, *out, bound, src, n, ZSTD_LEVEL);
    if (zstd_is_error(written)) {
        return -2;
    }
    *length = written;
    return 0;
}

/* One gzip member at zlib's default level, by a deflater kept per thread (reset, not rebuilt, per call). */
static int
gzip_compress(const unsigned char *src, size_t n, unsigned char **out, size_t *length, size_t *capacity)
{
    ZStream *z = pthread_getspecific(deflater_key);
    if (z == NULL) {
        z = calloc(1, sizeof *z);
        if (z == NULL) {
            return -1;
        }
        if (z_deflate_init2(z, GZIP_LEVEL, Z_DEFLATED, GZIP_WINDOW_BITS, Z_MEM_LEVEL, 0, z_version(),
                            (int)sizeof *z) != Z_OK) {
            free(z);
            return -1;
        }
        if (pthread_setspecific(deflater_key, z) != 0) {
            free_deflater(z);
            return -1;
        }
    }
    else if (z_deflate_reset(z) != Z_OK) {
        return -2;
    }
    size_t bound = z_deflate_bound(z, (unsigned long)n);
    if (bound > 0xFFFFFFFFu || reserve(out, capacity, bound) < 0) {
        return bound > 0xFFFFFFFFu ? -2 : -1;
    }
    z->next_in = src;
    z->avail_in = (unsigned)n;
    z->next_out = *out;
    z->avail_out = (unsigned)bound;
    if (z_deflate(z, Z_FINISH) != Z_STREAM_END) {
        return -2;
    }
    *length = (size_t)(z->next_out - *out);
    return 0;
}

/*
 * The blob a `codec` batch carries for the n bytes at src, written at *out (a malloc'd buffer of *capacity
 * bytes, grown as needed, the caller's to free), its length at *length: 0; -1 out of memory; -2 when the
 * system has no library for the codec (or it failed): then compression.compress's cramjam path serves.
 * No GIL needed; a zstd compression context per thread.
 */
static int
system_compress_c(unsigned codec, const unsigned char *src, size_t n, unsigned char **out, size_t *length,
                  size_t *capacity)
{
    if (codec == CODEC_LZ4 && lz4_compress_default != NULL && n <= 0x7FFFFFFF) {
        return lz4_frame_compress(src, n, out, length, capacity);
    }
    if (codec == CODEC_ZSTD && zstd_create_cctx != NULL) {
        return zstd_compress(src, n, out, length, capacity);
    }
    if (codec == CODEC_GZIP && z_deflate_init2 != NULL && n <= 0xFFFFFFFFu) {
        return gzip_compress(src, n, out, length, capacity);
    }
    return -2;
}

static PyObject *
system_compress(PyObject *self, PyObject *args)
{
    unsigned int codec;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Iy*", &codec, &view)) {
        return NULL;
    }
    unsigned char *out = NULL;
    size_t length = 0, capacity = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = system_compress_c(codec, view.buf, (size_t)view.len, &out, &length, &capacity);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = rc == 0    ? PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)length)
                       : rc == -1 ? PyErr_NoMemory()
                                  : Py_NewRef(Py_None);
    free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS, "Decode a records area (valid input only)."},
    {"init", init, METH_VARARGS, "Register the Record and Header tuple classes."},
    {"system_compress", system_compress, METH_VARARGS,
     "A gzip, lz4 or zstd blob by the system's library, or None without it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    fallback_error = PyErr_NewException("service.storage._speedups.Fallback", PyExc_ValueError, NULL);
    empty_tuple = PyTuple_New(0);
    if (fallback_error == NULL || empty_tuple == NULL || PyModule_AddObjectRef(m, "Fallback", fallback_error) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    load_system_codecs();
    PyObject *capsule = PyCapsule_New((void *)system_compress_c, "service.storage._speedups.system_compress", NULL);
    if (capsule == NULL || PyModule_AddObjectRef(m, "system_compress_capsule", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(capsule);
    return m;
}
