/*
 * The cleaner's per-record work in C: the key map and the record filter of a batch's records area.
 *
 * KeyMap: exact key bytes -> latest offset, an open-addressing table over a byte arena (no Python object
 * per key). KeyMap.map_records(raw, count, base_offset, start) puts every keyed record at or above
 * `start` of one decompressed records area. filter_records(...) applies the record rules of
 * cleaner.compaction.rules.filter_batch to one records area and re-encodes the survivors (attributes 0, timestamp
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
#include "native.h"

PyObject *fallback_error = NULL;

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
        PyModule_AddObjectRef(m, "KeyMap", (PyObject *)&KeyMapType) < 0 || add_key_map_blob_functions(m) < 0 ||
        add_spill_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
