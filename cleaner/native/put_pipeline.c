/* The put pipeline: a thread of a key map's own that puts a scan's blocks of entries, in the order they came. */
#include "native.h"

/* -- mapping records ------------------------------------------------------------------------------- */

/* Room for `more` bytes of entries; 0, or -1 (no memory: the block is as it was). */
int
block_reserve(PutBlock *b, size_t more)
{
    if (b->used + more <= b->capacity) {
        return 0;
    }
    size_t capacity = b->capacity ? b->capacity : 1 << 16;
    while (capacity < b->used + more) {
        capacity *= 2;
    }
    unsigned char *data = realloc(b->data, capacity);
    if (data == NULL) {
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

/* Put entries [p, end) in order, each slot asked for PREFETCH_DISTANCE entries ahead: 0, or -1 (no memory). */
int
put_entries(KeyMap *m, const unsigned char *p, const unsigned char *end)
{
    const unsigned char *ahead = p;
    for (int i = 0; i < PREFETCH_DISTANCE && ahead < end; i++) {
        uint64_t hash;
        memcpy(&hash, ahead, 8);
        keymap_prefetch(m, hash);
        ahead = next_entry(ahead);
    }
    while (p < end) {
        uint64_t hash;
        int64_t offset;
        uint32_t n;
        memcpy(&hash, p, 8);
        memcpy(&offset, p + 8, 8);
        memcpy(&n, p + 16, 4);
        if (ahead < end) {
            uint64_t next_hash;
            memcpy(&next_hash, ahead, 8);
            keymap_prefetch(m, next_hash);
            ahead = next_entry(ahead);
        }
        if (keymap_put_scanned(m, p + ENTRY_HEADER, (Py_ssize_t)n, hash, offset) < 0) {
            return -1;
        }
        p += entry_size(n);
    }
    return 0;
}

/* -- the put pipeline: a thread that puts the scan's blocks of entries, in the order they came -------- */

#define PIPE_BLOCKS 4 /* blocks in flight: the parser waits for a free one beyond that */

struct PutPipe {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    PutBlock *head, *tail; /* to put, in order */
    PutBlock *spare;       /* put, to reuse */
    int blocks;            /* allocated */
    int busy;              /* the thread is putting a block */
    int stop;
    int failed;            /* a put ran out of memory: the map is incomplete, the next drain says so */
};

static void *
pipe_main(void *arg)
{
    KeyMap *m = arg;
    PutPipe *p = m->pipe;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->head == NULL && !p->stop) {
            pthread_cond_wait(&p->changed, &p->lock);
        }
        PutBlock *b = p->head;
        if (b == NULL) {
            break;
        }
        p->head = b->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        p->busy = 1;
        int failed = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (!failed && put_entries(m, b->data, b->data + b->used) < 0) {
            failed = 1;
        }
        pthread_mutex_lock(&p->lock);
        p->failed = failed;
        p->busy = 0;
        b->used = 0;
        b->next = p->spare;
        p->spare = b;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* A block to fill (waits while PIPE_BLOCKS are in flight), or NULL (no memory). */
PutBlock *
pipe_take(PutPipe *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->spare == NULL && p->blocks >= PIPE_BLOCKS) {
        pthread_cond_wait(&p->changed, &p->lock);
    }
    PutBlock *b = p->spare;
    if (b != NULL) {
        p->spare = b->next;
    }
    else if ((b = calloc(1, sizeof(PutBlock))) != NULL) {
        p->blocks++;
    }
    pthread_mutex_unlock(&p->lock);
    return b;
}

/* Hand a filled block to the putting thread (an empty one goes back to the spares). */
void
pipe_push(PutPipe *p, PutBlock *b)
{
    pthread_mutex_lock(&p->lock);
    b->next = NULL;
    if (b->used == 0) {
        b->next = p->spare;
        p->spare = b;
    }
    else if (p->tail != NULL) {
        p->tail->next = b;
        p->tail = b;
    }
    else {
        p->head = p->tail = b;
    }
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* Wait until every block handed over is put: 0, or -1 (a put ran out of memory). No GIL needed. */
static int
pipe_drain(PutPipe *p)
{
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    while (p->head != NULL || p->busy) {
        pthread_cond_wait(&p->changed, &p->lock);
    }
    int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return failed ? -1 : 0;
}

/* Stop the thread once every block is put, free the pipeline: 0, or -1 (a put ran out of memory). */
int
pipe_finish(KeyMap *m)
{
    PutPipe *p = m->pipe;
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    int failed = p->failed;
    while (p->spare != NULL) {
        PutBlock *b = p->spare;
        p->spare = b->next;
        free(b->data);
        free(b);
    }
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
    m->pipe = NULL;
    return failed ? -1 : 0;
}

/* The map settled for a read or a put from Python: the pipeline's blocks put (the GIL released while
 * waiting), and with `complete`, the deferred blobs too. 0, or -1 with MemoryError set. */
int
keymap_settle(KeyMap *m, int complete)
{
    int rc = 0;
    if (m->pipe != NULL) {
        Py_BEGIN_ALLOW_THREADS
        rc = pipe_drain(m->pipe);
        Py_END_ALLOW_THREADS
    }
    if (rc == 0 && complete) {
        rc = keymap_complete(m);
    }
    if (rc < 0) {
        PyErr_NoMemory();
    }
    return rc;
}

/* start_pipeline() -> bool: from now on map_batches and map_records hand their puts to a thread of the
 * map's own (False: no thread could start; the puts stay on the caller's thread). Until finish_pipeline,
 * every other use of the map first waits for the puts handed over. */
PyObject *
keymap_start_pipeline(KeyMap *m, PyObject *unused)
{
    if (m->pipe != NULL) {
        Py_RETURN_TRUE;
    }
    PutPipe *p = calloc(1, sizeof(PutPipe));
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    m->pipe = p;
    if (pthread_create(&p->thread, NULL, pipe_main, m) != 0) {
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        free(p);
        m->pipe = NULL;
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* finish_pipeline() -> None: every handed-over put done, the thread ended (MemoryError if a put failed). */
PyObject *
keymap_finish_pipeline(KeyMap *m, PyObject *unused)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pipe_finish(m);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}
