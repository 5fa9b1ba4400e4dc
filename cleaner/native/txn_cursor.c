/* The aborted transactions of CleanedTransactionMetadata as the C loops read and change them (TxnCursor). */
#include "native.h"

/* The cursor over `obj`, a writable buffer of int64 laid out as above, its view held in `view` until the
 * caller releases it (when `t->header` is set): 0, or -1 with the error set (ValueError when it is not laid
 * out so). None leaves `t` unset: no transaction state handed over. */
int
txn_cursor_get(PyObject *obj, Py_buffer *view, TxnCursor *t)
{
    if (obj == Py_None) {
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0) {
        return -1;
    }
    int64_t *cells = view->buf;
    Py_ssize_t n = view->len / 8 >= TXN_HEADER ? cells[TXN_COUNT] : -1;
    if (view->len % 8 != 0 || n < 0 || view->len / 8 != TXN_HEADER + 6 * n || cells[TXN_NEXT] < 0 ||
        cells[TXN_NEXT] > n || cells[TXN_ONGOING] < 0 || cells[TXN_ONGOING] > n || cells[TXN_RETAINED] < 0 ||
        cells[TXN_RETAINED] > n) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "not a transaction cursor");
        return -1;
    }
    t->header = cells;
    t->txns = cells + TXN_HEADER;
    t->ongoing = t->txns + 2 * n;
    t->retained = t->ongoing + 3 * n;
    return 0;
}

/* The producer's ongoing aborted transaction (its triple), or NULL. */
int64_t *
txn_ongoing(const TxnCursor *t, int64_t producer_id)
{
    for (int64_t i = 0; i < t->header[TXN_ONGOING]; i++) {
        if (t->ongoing[3 * i] == producer_id) {
            return t->ongoing + 3 * i;
        }
    }
    return NULL;
}

/* _consume_aborted_up_to before reading a batch ending at `last_offset`: each transaction starting at or
 * before it becomes its producer's ongoing one (unless the producer has one). Until txn_taken, txn_leave
 * undoes it. */
void
txn_read(TxnCursor *t, int64_t last_offset)
{
    int64_t *h = t->header;
    t->reading = 1;
    t->saved_next = h[TXN_NEXT];
    t->saved_ongoing = h[TXN_ONGOING];
    for (; h[TXN_NEXT] < h[TXN_COUNT] && t->txns[2 * h[TXN_NEXT]] <= last_offset; h[TXN_NEXT]++) {
        int64_t producer_id = t->txns[2 * h[TXN_NEXT] + 1];
        if (txn_ongoing(t, producer_id) == NULL) {
            int64_t *o = t->ongoing + 3 * h[TXN_ONGOING]++;
            o[0] = producer_id;
            o[1] = h[TXN_NEXT];
            o[2] = -1;
        }
    }
}

/* At a loop's end: a batch txn_read was called for but not taken is the Python rules', the state as
 * before it. */
void
txn_leave(TxnCursor *t)
{
    if (t->reading) {
        t->header[TXN_NEXT] = t->saved_next;
        t->header[TXN_ONGOING] = t->saved_ongoing;
        t->reading = 0;
    }
}

/* An ABORT marker taken ends its producer's ongoing transaction `o` (from txn_ongoing), which is retained
 * (re-indexed) if a batch of its data was read. */
void
txn_end_aborted(TxnCursor *t, int64_t *o)
{
    int64_t *h = t->header;
    if (o[2] >= 0) {
        t->retained[h[TXN_RETAINED]++] = o[1];
    }
    int64_t *last = t->ongoing + 3 * --h[TXN_ONGOING];
    if (o != last) {
        memcpy(o, last, 3 * sizeof(int64_t));
    }
}
