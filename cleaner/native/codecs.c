/* Compressed batches: the registered Python codec functions and the system's libraries (system_codecs.h). */
#include "native.h"

/*
 * Compressed batches: the codec library's work, called from the C loops. cleaner.native registers the
 * decompress and compress functions of service.storage.compression (and its CompressionType members, by
 * id) at import, so a batch the C loops decompress or re-compress goes through the very functions the Python
 * rules call: same bytes out, the codecs' framing in one place. Each call takes the GIL back for its time.
 */
PyObject *codec_decompress = NULL, *codec_compress = NULL, *codec_types = NULL;

/* The system's codec libraries as service.storage._codecs offers them (system_codecs.h, from its capsule):
 * called without the GIL, its compress writes what `compress` writes, its decompress reads what
 * `decompress` reads; -2 from either sends the batch to the registered function. */
const SystemCodecs *system_codecs = NULL;
int system_codecs_on = 1; /* set_system_codecs(False): the tests' way to the Python functions */

/* set_codecs(decompress, compress, codec_types[, system_codecs capsule]) -> None */
PyObject *
set_codecs(PyObject *self, PyObject *args)
{
    PyObject *decompress, *compress, *types, *capsule = Py_None;
    if (!PyArg_ParseTuple(args, "OOO!|O", &decompress, &compress, &PyTuple_Type, &types, &capsule)) {
        return NULL;
    }
    if (!PyCallable_Check(decompress) || !PyCallable_Check(compress) || PyTuple_GET_SIZE(types) != CODECS) {
        PyErr_SetString(PyExc_TypeError, "set_codecs(decompress, compress, a tuple of the 5 codec types)");
        return NULL;
    }
    const SystemCodecs *codecs = NULL;
    if (capsule != Py_None && (codecs = PyCapsule_GetPointer(capsule, SYSTEM_CODECS_CAPSULE)) == NULL) {
        return NULL;
    }
    Py_XSETREF(codec_decompress, Py_NewRef(decompress));
    Py_XSETREF(codec_compress, Py_NewRef(compress));
    Py_XSETREF(codec_types, Py_NewRef(types));
    system_codecs = codecs;
    Py_RETURN_NONE;
}

/*
 * fn(codec, the n bytes at p) for a registered codec function, called with the GIL held: 0 and *out a new
 * bytes object; 1 when the function raised an Exception or returned no bytes (cleared: the batch is then
 * the Python rules', which raise the error with its context); 4 when it raised a BaseException that is no
 * Exception (KeyboardInterrupt, SystemExit), left set for the caller to return.
 */
int
codec_call(PyObject *fn, unsigned codec, const unsigned char *p, Py_ssize_t n, PyObject **out)
{
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    PyObject *result = view == NULL ? NULL
                       : PyObject_CallFunctionObjArgs(fn, PyTuple_GET_ITEM(codec_types, codec), view, NULL);
    Py_XDECREF(view);
    if (result != NULL && PyBytes_CheckExact(result)) {
        *out = result;
        return 0;
    }
    Py_XDECREF(result);
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception)) {
        return 4;
    }
    PyErr_Clear();
    return 1;
}

/* Grow the array *slot to n items of item_size bytes; on failure it keeps its old block (freed later). */
int
grow_array(void *slot, Py_ssize_t n, size_t item_size)
{
    void **array = (void **)slot;
    void *grown = realloc(*array, (size_t)n * item_size);
    if (grown == NULL) {
        return -1;
    }
    *array = grown;
    return 0;
}

/* The records area of a batch compressed with `codec`, by the system's library into f, without the GIL: 0,
 * or -1 when the Python function must read it (or no memory: then it tries). */
static int
system_decompress(unsigned codec, const unsigned char *p, size_t n, CodecBuffer *f)
{
    if (!system_codecs_on || system_codecs == NULL) {
        return -1;
    }
    return system_codecs->decompress(codec, p, n, f) == 0 ? 0 : -1;
}

/*
 * A compressed batch's records area (*area, *length), decompressed: by the system's library into f, else by
 * the registered Python function into *raw (the previous one released), the GIL taken back from *save for
 * that call. Called without the GIL, from inside Py_BEGIN_ALLOW_THREADS (save: &_save). 0 and *area,
 * *length now the records; else codec_call's 1 (the batch is the Python rules') or 4 (an error is set).
 */
int
inflate_area(unsigned codec, const unsigned char **area, Py_ssize_t *length, CodecBuffer *f, PyObject **raw,
             PyThreadState **save)
{
    if (system_decompress(codec, *area, (size_t)*length, f) == 0) {
        *area = f->data;
        *length = (Py_ssize_t)f->length;
        return 0;
    }
    PyEval_RestoreThread(*save);
    Py_CLEAR(*raw);
    int rc = codec_call(codec_decompress, codec, *area, *length, raw);
    *save = PyEval_SaveThread();
    if (rc == 0) {
        *area = (const unsigned char *)PyBytes_AS_STRING(*raw);
        *length = PyBytes_GET_SIZE(*raw);
    }
    return rc;
}

/* set_system_codecs(on) -> None: whether the C loops use the system's libraries (service.storage._codecs's
 * served() lists them) or the registered Python functions alone */
PyObject *
set_system_codecs(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    system_codecs_on = on;
    Py_RETURN_NONE;
}
