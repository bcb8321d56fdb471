/* The mixture interleave's hot loop (streamer/mixplan.py, Interleave.fill) in C: earliest deadline first
 * over per-source budgets, the same picks as the Python loop, about 40x faster per pick.
 *
 * fill(budgets, counts, position, n) -> list of source indices
 *   budgets, counts: int64 buffers of one length (counts is updated in place); position: sum(counts).
 * Source j's next sample (its count + 1st) is allowed from position count * L // budget + 1 and due by
 * ceil((count + 1) * L / budget), L = sum(budgets); ties go to the lower index, as in Python's heaps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct { int64_t due, j; } Ready;            /* allowed now, ordered by (due, j) */
typedef struct { int64_t from, due, j; } Waiting;    /* not yet allowed, ordered by (from, due, j) */

static int ready_before(const Ready *a, const Ready *b) {
    return a->due < b->due || (a->due == b->due && a->j < b->j);
}

static int waiting_before(const Waiting *a, const Waiting *b) {
    if (a->from != b->from) return a->from < b->from;
    return a->due < b->due || (a->due == b->due && a->j < b->j);
}

#define HEAP_FUNCS(T, BEFORE)                                                       \
    static void T##_up(T *h, Py_ssize_t i) {                                        \
        T x = h[i];                                                                 \
        while (i > 0) {                                                             \
            Py_ssize_t parent = (i - 1) / 2;                                        \
            if (!BEFORE(&x, &h[parent])) break;                                     \
            h[i] = h[parent];                                                       \
            i = parent;                                                             \
        }                                                                           \
        h[i] = x;                                                                   \
    }                                                                               \
    static void T##_down(T *h, Py_ssize_t n, Py_ssize_t i) {                        \
        T x = h[i];                                                                 \
        for (;;) {                                                                  \
            Py_ssize_t child = 2 * i + 1;                                           \
            if (child >= n) break;                                                  \
            if (child + 1 < n && BEFORE(&h[child + 1], &h[child])) child++;         \
            if (!BEFORE(&h[child], &x)) break;                                      \
            h[i] = h[child];                                                        \
            i = child;                                                              \
        }                                                                           \
        h[i] = x;                                                                   \
    }

HEAP_FUNCS(Ready, ready_before)
HEAP_FUNCS(Waiting, waiting_before)

static PyObject *fill(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer budgets_buf, counts_buf;
    long long position_arg, n_arg;
    if (!PyArg_ParseTuple(args, "y*w*LL", &budgets_buf, &counts_buf, &position_arg, &n_arg)) return NULL;
    PyObject *out = NULL;
    Ready *ready = NULL;
    Waiting *waiting = NULL;
    Py_ssize_t k = budgets_buf.len / (Py_ssize_t)sizeof(int64_t);
    if (counts_buf.len != budgets_buf.len || budgets_buf.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "budgets and counts must be int64 buffers of one length");
        goto done;
    }
    const int64_t *budgets = (const int64_t *)budgets_buf.buf;
    int64_t *counts = (int64_t *)counts_buf.buf;
    int64_t length = 0;
    for (Py_ssize_t j = 0; j < k; j++) length += budgets[j];
    int64_t position = position_arg;
    int64_t stop = position + (n_arg > 0 ? n_arg : 0);
    if (stop > length) stop = length;
    ready = PyMem_Malloc((size_t)(k > 0 ? k : 1) * sizeof(Ready));
    waiting = PyMem_Malloc((size_t)(k > 0 ? k : 1) * sizeof(Waiting));
    out = PyList_New(stop > position ? (Py_ssize_t)(stop - position) : 0);
    if (ready == NULL || waiting == NULL || out == NULL) {
        if (out == NULL) PyErr_NoMemory();
        Py_CLEAR(out);
        goto done;
    }
    Py_ssize_t n_ready = 0, n_waiting = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        int64_t count = counts[j], budget = budgets[j];
        if (count >= budget) continue;
        int64_t from = count * length / budget + 1, due = ((count + 1) * length + budget - 1) / budget;
        if (from <= position + 1) {
            ready[n_ready] = (Ready){due, j};
            Ready_up(ready, n_ready++);
        } else {
            waiting[n_waiting] = (Waiting){from, due, j};
            Waiting_up(waiting, n_waiting++);
        }
    }
    Py_ssize_t written = 0;
    while (position < stop) {
        position++;
        while (n_waiting > 0 && waiting[0].from <= position) {
            ready[n_ready] = (Ready){waiting[0].due, waiting[0].j};
            Ready_up(ready, n_ready++);
            waiting[0] = waiting[--n_waiting];
            if (n_waiting > 0) Waiting_down(waiting, n_waiting, 0);
        }
        if (n_ready == 0) {  /* cannot happen for budgets that sum to the length; never loop on it */
            PyErr_SetString(PyExc_RuntimeError, "interleave: no source is allowed at this position");
            Py_CLEAR(out);
            goto done;
        }
        int64_t j = ready[0].j;
        int64_t count = ++counts[j], budget = budgets[j];
        if (count < budget) {
            int64_t from = count * length / budget + 1, due = ((count + 1) * length + budget - 1) / budget;
            if (from <= position + 1) {
                ready[0] = (Ready){due, j};
                Ready_down(ready, n_ready, 0);
            } else {
                ready[0] = ready[--n_ready];
                if (n_ready > 0) Ready_down(ready, n_ready, 0);
                waiting[n_waiting] = (Waiting){from, due, j};
                Waiting_up(waiting, n_waiting++);
            }
        } else {
            ready[0] = ready[--n_ready];
            if (n_ready > 0) Ready_down(ready, n_ready, 0);
        }
        PyObject *index = PyLong_FromLongLong(j);
        if (index == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, written++, index);
    }
done:
    PyMem_Free(ready);
    PyMem_Free(waiting);
    PyBuffer_Release(&budgets_buf);
    PyBuffer_Release(&counts_buf);
    return out;
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS, "fill(budgets, counts, position, n) -> the next n sources (see the file)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_interleave", NULL, -1, methods};

PyMODINIT_FUNC PyInit__interleave(void) { return PyModule_Create(&module); }
