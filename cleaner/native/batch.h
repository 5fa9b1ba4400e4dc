#ifndef LOGCLEANER_BATCH_H
#define LOGCLEANER_BATCH_H

static inline uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

#define BATCH_OVERHEAD 61
#define CODEC_BITS 0x07
#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20 /* a control batch (a transaction marker) is always the Python rules' */
#define CODECS 5              /* none, gzip, snappy, lz4, zstd */

/* Whether the C loops read a batch with these attributes: a data batch, with no codec or one whose functions
 * are registered; transactional, or an uncompressed control batch (a marker), only when the caller hands over
 * the transaction state (`transactional`: a TxnCursor). */
static inline int
loops_read(unsigned attributes, int transactional)
{
    unsigned codec = attributes & CODEC_BITS;
    if (attributes & CONTROL_BIT) {
        return transactional && codec == 0;
    }
    return (transactional || !(attributes & TRANSACTIONAL_BIT)) &&
           (codec == 0 || (codec < CODECS && codec_types != NULL));
}

enum { MARKER_ABORT = 0, MARKER_COMMIT = 1 };

/* The type of the transaction marker in the control batch at b of `size` bytes (one record, whose key is
 * version 0 and type ABORT or COMMIT), or -1: any other control batch is the Python rules'. */
static inline int
marker_type(const unsigned char *b, int64_t size)
{
    Py_ssize_t pos = 0, end = (Py_ssize_t)size - BATCH_OVERHEAD;
    RecordView r;
    if ((int32_t)be32(b + 57) != 1 || read_record(b + BATCH_OVERHEAD, end, &pos, &r) < 0 || pos != end ||
        r.key < 0 || r.key_length != 4) {
        return -1;
    }
    const unsigned char *key = b + BATCH_OVERHEAD + r.key;
    return key[0] == 0 && key[1] == 0 && key[2] == 0 && key[3] <= MARKER_COMMIT ? key[3] : -1;
}

/*
 * The aborted transactions of CleanedTransactionMetadata as the C loops read and change them, in an int64
 * buffer of the caller's (txn_metadata.NativeTxnCursor, which lays it out and takes it back): a header
 * (transactions, the next to start, ongoing, retained, ongoing when laid out), then per transaction its
 * (first offset, producer id), the ongoing ones first, then the pending ones in the order they start; per
 * ongoing aborted transaction (producer id, transaction, last offset of a data batch of it read, or -1);
 * the transactions whose ABORT marker a round kept (to re-index), in order.
 */
enum { TXN_COUNT, TXN_NEXT, TXN_ONGOING, TXN_RETAINED, TXN_HEADER = 5 };

typedef struct {
    int64_t *header, *txns, *ongoing, *retained;
    int reading;                       /* txn_read was called for a batch not taken yet */
    int64_t saved_next, saved_ongoing; /* the state before it: back if the loop leaves it to Python */
} TxnCursor;

/* The batch txn_read was called for is taken: what reading it changed stays. */
static inline void
txn_taken(TxnCursor *t)
{
    t->reading = 0;
}

/* Whether `value` is among the `n` ascending int64 at `values`. */
static inline int
sorted_contains(const int64_t *values, Py_ssize_t n, int64_t value)
{
    Py_ssize_t low = 0, high = n;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (values[middle] < value) {
            low = middle + 1;
        }
        else {
            high = middle;
        }
    }
    return low < n && values[low] == value;
}

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
put_be64(unsigned char *p, int64_t v)
{
    put_be32(p, (uint32_t)((uint64_t)v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

enum { BATCH_DROPPED = 0, BATCH_UNCHANGED = 1, BATCH_REWRITTEN = 2 };
#define META_FIELDS 10

#endif
