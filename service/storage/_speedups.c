/*
 * Optional C fast path for the one hot loop of the storage engine: decoding the records of a v2 batch.
 *
 * decode_records(raw, count, base_offset, base_timestamp, log_append_time) mirrors
 * service.storage.records._decode_records_py exactly for valid input and returns a list of Record
 * tuples. On ANY anomaly (truncation, bad lengths, bad UTF-8, overflow) it raises _Fallback, and the
 * Python decoder runs instead and raises the precise CorruptDataError. So this file holds no error
 * messages and no format rules beyond the byte layout; the Python code stays the specification.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "varint.h" /* csrc/: the varint reader shared with cleaner._native */

static PyTypeObject *record_type = NULL;
static PyTypeObject *header_type = NULL;
static PyObject *fallback_error = NULL;
static PyObject *empty_tuple = NULL;

/* A nullable byte field (-1 = null); NULL on error, new reference otherwise. */
static PyObject *
read_bytes_field(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t length;
    if (read_varint_any(buf, end, pos, &length) < 0 || length < -1) {
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
    if (read_varint_any(buf, end, pos, &count) < 0 || count < 0 || count > end - *pos) {
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
        if (read_varint_any(buf, end, pos, &key_length) < 0 || key_length < 0 || key_length > end - *pos) {
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

/* How one record's decode ended: built, malformed (the Python decoder is the judge), or out of memory. */
enum record_outcome { RECORD_OK = 0, RECORD_MALFORMED = -1, RECORD_ERROR = -2 };

/* The batch fields every record of it is decoded against. */
typedef struct {
    int64_t base_offset;
    int64_t base_timestamp;
    int has_log_append_time;
    int64_t log_append_time;
} batch_base_t;

/* One record at *pos as a Record tuple in *out; *pos moves past it. */
static enum record_outcome
decode_one_record(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, const batch_base_t *base,
                  PyObject **out)
{
    int64_t length, ts_delta, offset_delta, timestamp, offset;
    if (read_varint_any(buf, end, pos, &length) < 0 || length < 0 || length > end - *pos) {
        return RECORD_MALFORMED;
    }
    Py_ssize_t record_end = *pos + (Py_ssize_t)length;
    *pos += 1; /* record attributes: unused */
    if (read_varint_any(buf, end, pos, &ts_delta) < 0 || read_varint_any(buf, end, pos, &offset_delta) < 0) {
        return RECORD_MALFORMED;
    }
    if (__builtin_add_overflow(base->base_offset, offset_delta, &offset)) {
        return RECORD_MALFORMED;
    }
    if (base->has_log_append_time) {
        timestamp = base->log_append_time;
    }
    else if (__builtin_add_overflow(base->base_timestamp, ts_delta, &timestamp)) {
        return RECORD_MALFORMED;
    }
    PyObject *key = read_bytes_field(buf, end, pos);
    if (key == NULL) {
        return RECORD_MALFORMED;
    }
    PyObject *value = read_bytes_field(buf, end, pos);
    if (value == NULL) {
        Py_DECREF(key);
        return RECORD_MALFORMED;
    }
    PyObject *headers = read_headers(buf, end, pos);
    if (headers == NULL || *pos != record_end) {
        Py_DECREF(key);
        Py_DECREF(value);
        Py_XDECREF(headers);
        return RECORD_MALFORMED;
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
        return RECORD_ERROR;
    }
    PyTuple_SET_ITEM(record, 0, py_offset);
    PyTuple_SET_ITEM(record, 1, py_timestamp);
    PyTuple_SET_ITEM(record, 2, key);
    PyTuple_SET_ITEM(record, 3, value);
    PyTuple_SET_ITEM(record, 4, headers);
    *out = record;
    return RECORD_OK;
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
    batch_base_t base = {base_offset, base_timestamp, log_append_time_obj != Py_None, 0};
    if (base.has_log_append_time) {
        base.log_append_time = PyLong_AsLongLong(log_append_time_obj);
        if (base.log_append_time == -1 && PyErr_Occurred()) {
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
        PyObject *record = NULL;
        enum record_outcome outcome = decode_one_record(buf, end, &pos, &base, &record);
        if (outcome == RECORD_MALFORMED) {
            goto fallback;
        }
        if (outcome == RECORD_ERROR) {
            goto error;
        }
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

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS, "Decode a records area (valid input only)."},
    {"init", init, METH_VARARGS, "Register the Record and Header tuple classes."},
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
    return m;
}
