/* The budget pool in C (streamer/budget/batcher.py and node.py): the same pool, batches and arrivals as the
 * Python loops, with each entry's (cost, arrival) kept in C arrays beside its id.
 *
 * Why a type and not a list of (cost, arrival, id) tuples: a batch's take and every insert search the pool,
 * and with the reading in between, a search through tuples misses the cache at every step (a tuple, then
 * its two ints). The keys side by side in one small array stay in cache: in the stream bench's epoch
 * (benchmarks/budget/budget_stream_bench.py, one process), the top-up and the take cost 0.63 us a sample
 * on a list of tuples and 0.43 on this type.
 *
 * A Pool is sorted by (cost, arrival); arrivals are unique, so the id never decides an order. As a sequence
 * it reads as the Python pool's list of (cost, arrival, id) tuples (len, pool[i], iteration, ==).
 *
 * Pool(entries=()): the entries insorted.
 * pool.insort(entry): bisect.insort(pool, entry).
 * pool.pop() -> entry: the largest, taken out.
 * pool.costs() -> bytes: the costs as int64s in pool order (for numpy).
 * pool.clear(): every entry taken out.
 * pool.cut(lo, hi) -> [entry, ...]: pool[lo:hi], taken out.
 * pool.take(budget, share, most) -> (ids, total): batcher.take_pack, the "pack" take.
 * pool.fit(ids, total, budget, share, most) -> total: batcher.fit_pack.
 * pool.feed(source, wanted, arrival, lists, load, budget, over) -> arrival: node.feed_pool.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *COST_KEY; /* "__cost__" */

typedef struct {
    PyObject_HEAD
    Py_ssize_t size, cap;
    long long *cost, *arrival;
    PyObject **ident; /* owned references */
} Pool;

static PyTypeObject PoolType;

/* The first index in [0, hi) whose entry sorts after (cost, arrival); by_arrival 0: after every entry of
 * that cost (bisect_right with (cost, inf)). */
static Py_ssize_t after(const Pool *p, Py_ssize_t hi, long long cost, long long arrival, int by_arrival) {
    Py_ssize_t lo = 0;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        long long c = p->cost[mid];
        if (c > cost || (by_arrival && c == cost && p->arrival[mid] > arrival))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* (cost, arrival, ident) inserted in order; ident's reference is taken (a new one). */
static int insert(Pool *p, long long cost, long long arrival, PyObject *ident) {
    if (p->size == p->cap) {
        Py_ssize_t cap = p->cap ? 2 * p->cap : 64;
        long long *c = PyMem_Realloc(p->cost, cap * sizeof(long long));
        if (c == NULL) return PyErr_NoMemory(), -1;
        p->cost = c;
        long long *a = PyMem_Realloc(p->arrival, cap * sizeof(long long));
        if (a == NULL) return PyErr_NoMemory(), -1;
        p->arrival = a;
        PyObject **i = PyMem_Realloc(p->ident, cap * sizeof(PyObject *));
        if (i == NULL) return PyErr_NoMemory(), -1;
        p->ident = i;
        p->cap = cap;
    }
    Py_ssize_t at = after(p, p->size, cost, arrival, 1), tail = p->size - at;
    memmove(p->cost + at + 1, p->cost + at, tail * sizeof(long long));
    memmove(p->arrival + at + 1, p->arrival + at, tail * sizeof(long long));
    memmove(p->ident + at + 1, p->ident + at, tail * sizeof(PyObject *));
    p->cost[at] = cost;
    p->arrival[at] = arrival;
    p->ident[at] = Py_NewRef(ident);
    p->size += 1;
    return 0;
}

/* The entry at `at` taken out: its id's reference handed to the caller. */
static PyObject *remove_at(Pool *p, Py_ssize_t at, long long *cost) {
    PyObject *ident = p->ident[at];
    Py_ssize_t tail = p->size - at - 1;
    if (cost != NULL) *cost = p->cost[at];
    memmove(p->cost + at, p->cost + at + 1, tail * sizeof(long long));
    memmove(p->arrival + at, p->arrival + at + 1, tail * sizeof(long long));
    memmove(p->ident + at, p->ident + at + 1, tail * sizeof(PyObject *));
    p->size -= 1;
    return ident;
}

static int pool_clear(Pool *p) {
    while (p->size > 0) Py_DECREF(remove_at(p, p->size - 1, NULL));
    return 0;
}

static PyObject *entry_at(const Pool *p, Py_ssize_t at) {
    return Py_BuildValue("(LLO)", p->cost[at], p->arrival[at], p->ident[at]);
}

/* An entry tuple's (cost, arrival) as C integers (only ints: no Python code runs in a search). */
static int entry_key(PyObject *entry, long long *cost, long long *arrival) {
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 || !PyLong_Check(PyTuple_GET_ITEM(entry, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(entry, 1))) {
        PyErr_Format(PyExc_TypeError, "a budget pool entry is an (int cost, int arrival, id) tuple, not %R", entry);
        return -1;
    }
    *cost = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0));
    if (*cost == -1 && PyErr_Occurred()) return -1;
    *arrival = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 1));
    return *arrival == -1 && PyErr_Occurred() ? -1 : 0;
}

static int insort_entry(Pool *p, PyObject *entry) {
    long long cost, arrival;
    if (entry_key(entry, &cost, &arrival) < 0) return -1;
    return insert(p, cost, arrival, PyTuple_GET_ITEM(entry, 2));
}

/* Arguments read without a tuple built per call (METH_FASTCALL): these run once per batch or sample. */
static int nargs_are(const char *name, Py_ssize_t nargs, Py_ssize_t wanted) {
    if (nargs == wanted) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, wanted, nargs);
    return -1;
}

static int ints(PyObject *const *args, Py_ssize_t n, long long *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* The entry at `at` moved out: its id appended to ids, its cost added to *total. */
static int move(Pool *p, Py_ssize_t at, PyObject *ids, long long *total) {
    long long cost;
    PyObject *ident = remove_at(p, at, &cost);
    int failed = PyList_Append(ids, ident);
    Py_DECREF(ident);
    *total += cost;
    return failed;
}

/* While ids holds less than `share` and `most`: the pool's largest entry that still fits, moved. */
static int fit_loop(Pool *p, PyObject *ids, long long *total, long long budget, long long share, long long most) {
    while (p->size > 0 && PyList_GET_SIZE(ids) < most && *total < share) {
        long long room = budget - *total;
        Py_ssize_t at = p->size - 1;
        if (p->cost[at] > room) { /* the largest that still fits: the last of cost <= room */
            at = after(p, at, room, 0, 0) - 1;
            if (at < 0) break;
        }
        if (move(p, at, ids, total) < 0) return -1;
    }
    return 0;
}

static PyObject *pool_take(Pool *p, PyObject *const *args, Py_ssize_t nargs) {
    long long n[3], total = 0; /* budget, share, most */
    if (nargs_are("take", nargs, 3) < 0 || ints(args, 3, n) < 0) return NULL;
    if (p->size == 0) {
        PyErr_SetString(PyExc_IndexError, "take from an empty budget pool");
        return NULL;
    }
    PyObject *ids = PyList_New(0);
    if (ids == NULL) return NULL;
    if (move(p, p->size - 1, ids, &total) < 0 || fit_loop(p, ids, &total, n[0], n[1], n[2]) < 0) {
        Py_DECREF(ids);
        return NULL;
    }
    return Py_BuildValue("(NL)", ids, total);
}

static PyObject *pool_fit(Pool *p, PyObject *const *args, Py_ssize_t nargs) {
    long long n[4]; /* total, budget, share, most */
    if (nargs_are("fit", nargs, 5) < 0 || ints(args + 1, 4, n) < 0) return NULL;
    if (!PyList_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "ids must be a list, not %.80s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (fit_loop(p, args[0], &n[0], n[1], n[2], n[3]) < 0) return NULL;
    return PyLong_FromLongLong(n[0]);
}

/* One sample of the source into the pool: 1 inserted, 0 skipped (over() said None), -1 error. */
static int feed_one(Pool *p, PyObject *item, long long arrival, PyObject *lists, PyObject *load, long long budget,
                    PyObject *over) {
    int result = -1;
    PyObject *seq = NULL, *costs = NULL, *cost = NULL, *ident = NULL;
    if (PyTuple_CheckExact(item)) /* the source's own items: no copy */
        seq = Py_NewRef(item);
    else if ((seq = PySequence_Fast(item, "a budget source item is a (shard, index, sample) tuple")) == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 3) {
        PyErr_Format(PyExc_ValueError, "a budget source item is a (shard, index, sample) tuple, not %R", item);
        goto done;
    }
    PyObject *shard = PySequence_Fast_GET_ITEM(seq, 0), *index = PySequence_Fast_GET_ITEM(seq, 1),
             *sample = PySequence_Fast_GET_ITEM(seq, 2);
    costs = PyDict_GetItemWithError(lists, shard);
    if (costs != NULL)
        Py_INCREF(costs);
    else if (PyErr_Occurred() || (costs = PyObject_CallOneArg(load, shard)) == NULL)
        goto done;
    if ((cost = PyObject_GetItem(costs, index)) == NULL) goto done;
    long long c = PyLong_AsLongLong(cost);
    if (c == -1 && PyErr_Occurred()) goto done;
    if (c > budget) {
        PyObject *admitted = PyObject_CallOneArg(over, cost);
        if (admitted == NULL) goto done;
        Py_SETREF(cost, admitted);
        if (cost == Py_None) {
            result = 0;
            goto done;
        }
        if (!PyLong_Check(cost)) {
            PyErr_Format(PyExc_TypeError, "a sample's cost is an int, not %R", cost);
            goto done;
        }
        if ((c = PyLong_AsLongLong(cost)) == -1 && PyErr_Occurred()) goto done;
    }
    if (PyDict_CheckExact(sample) && PyDict_SetItem(sample, COST_KEY, cost) < 0) goto done;
    if (PyTuple_CheckExact(item)) /* the item is already the (shard, index, sample) id */
        ident = Py_NewRef(item);
    else if ((ident = PyTuple_Pack(3, shard, index, sample)) == NULL)
        goto done;
    result = insert(p, c, arrival, ident) < 0 ? -1 : 1;
done:
    Py_XDECREF(seq);
    Py_XDECREF(costs);
    Py_XDECREF(cost);
    Py_XDECREF(ident);
    return result;
}

static PyObject *pool_feed(Pool *p, PyObject *const *args, Py_ssize_t nargs) {
    long long wanted, arrival, budget;
    if (nargs_are("feed", nargs, 7) < 0) return NULL;
    PyObject *source = args[0], *lists = args[3], *load = args[4], *over = args[6];
    if (ints(args + 1, 1, &wanted) < 0 || ints(args + 2, 1, &arrival) < 0 || ints(args + 5, 1, &budget) < 0) return NULL;
    if (!PyDict_Check(lists)) {
        PyErr_Format(PyExc_TypeError, "lists must be a dict, not %.80s", Py_TYPE(lists)->tp_name);
        return NULL;
    }
    if (!PyIter_Check(source)) {
        PyErr_SetString(PyExc_TypeError, "feed reads an iterator");
        return NULL;
    }
    long long goal = arrival + wanted;
    PyObject *item;
    while ((item = PyIter_Next(source)) != NULL) {
        int fed = feed_one(p, item, arrival, lists, load, budget, over);
        Py_DECREF(item);
        if (fed < 0) return NULL;
        arrival += fed;
        if (fed && arrival == goal) break;
    }
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(arrival);
}

static PyObject *pool_insort(Pool *p, PyObject *entry) {
    return insort_entry(p, entry) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *pool_pop(Pool *p, PyObject *Py_UNUSED(ignored)) {
    if (p->size == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty budget pool");
        return NULL;
    }
    PyObject *entry = entry_at(p, p->size - 1);
    if (entry != NULL) Py_DECREF(remove_at(p, p->size - 1, NULL));
    return entry;
}

/* The costs as the bytes of int64s in pool order (numpy.frombuffer reads them): the pad take scans every
 * entry's cost per batch, and an entry read as a tuple is three objects made. */
static PyObject *pool_costs(Pool *p, PyObject *Py_UNUSED(ignored)) {
    return PyBytes_FromStringAndSize((const char *)p->cost, p->size * (Py_ssize_t)sizeof(long long));
}

static PyObject *pool_clear_method(Pool *p, PyObject *Py_UNUSED(ignored)) {
    pool_clear(p);
    Py_RETURN_NONE;
}

static PyObject *pool_cut(Pool *p, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t lo, hi;
    if (nargs_are("cut", nargs, 2) < 0 || (lo = PyLong_AsSsize_t(args[0])) == -1 || (hi = PyLong_AsSsize_t(args[1])) == -1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "cut needs 0 <= lo <= hi <= len(pool)");
        return NULL;
    }
    if (lo < 0 || hi < lo || hi > p->size) {
        PyErr_Format(PyExc_IndexError, "cut(%zd, %zd) of a budget pool of %zd", lo, hi, p->size);
        return NULL;
    }
    PyObject *run = PyList_New(hi - lo);
    if (run == NULL) return NULL;
    for (Py_ssize_t i = lo; i < hi; i++) {
        PyObject *entry = entry_at(p, i);
        if (entry == NULL) return Py_DECREF(run), NULL;
        PyList_SET_ITEM(run, i - lo, entry);
    }
    for (Py_ssize_t i = hi; i > lo; i--) Py_DECREF(remove_at(p, i - 1, NULL));
    return run;
}

static Py_ssize_t pool_len(Pool *p) { return p->size; }

static PyObject *pool_item(Pool *p, Py_ssize_t at) {
    if (at < 0 || at >= p->size) {
        PyErr_SetString(PyExc_IndexError, "budget pool index out of range");
        return NULL;
    }
    return entry_at(p, at);
}

static PyObject *pool_richcompare(PyObject *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    PyObject *mine = PySequence_List(self), *theirs = PySequence_List(other), *out = NULL;
    if (mine != NULL && theirs != NULL) out = PyObject_RichCompare(mine, theirs, op);
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) { /* not a sequence: not equal */
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    return out;
}

static int pool_init(Pool *p, PyObject *args, PyObject *kwargs) {
    PyObject *entries = NULL;
    static char *names[] = {"entries", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Pool", names, &entries)) return -1;
    if (entries == NULL) return 0;
    PyObject *it = PyObject_GetIter(entries), *entry;
    if (it == NULL) return -1;
    while ((entry = PyIter_Next(it)) != NULL) {
        int failed = insort_entry(p, entry);
        Py_DECREF(entry);
        if (failed) return Py_DECREF(it), -1;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static int pool_traverse(Pool *p, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < p->size; i++) Py_VISIT(p->ident[i]);
    return 0;
}

static void pool_dealloc(Pool *p) {
    PyObject_GC_UnTrack(p);
    pool_clear(p);
    PyMem_Free(p->cost);
    PyMem_Free(p->arrival);
    PyMem_Free(p->ident);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

#define FAST(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL
static PyMethodDef pool_methods[] = {
    {"insort", (PyCFunction)pool_insort, METH_O, "insort(entry): bisect.insort by (cost, arrival)."},
    {"pop", (PyCFunction)pool_pop, METH_NOARGS, "pop() -> entry: the largest, taken out."},
    {"costs", (PyCFunction)pool_costs, METH_NOARGS, "costs() -> bytes: the costs as int64s, in order."},
    {"clear", (PyCFunction)pool_clear_method, METH_NOARGS, "clear(): every entry taken out."},
    {"cut", FAST(pool_cut), "cut(lo, hi) -> [entry, ...]: pool[lo:hi], taken out."},
    {"take", FAST(pool_take), "take(budget, share, most) -> (ids, total): the \"pack\" take."},
    {"fit", FAST(pool_fit), "fit(ids, total, budget, share, most) -> total: more of the pool into ids."},
    {"feed", FAST(pool_feed), "feed(source, wanted, arrival, lists, load, budget, over) -> arrival: a top-up."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods pool_sequence = {.sq_length = (lenfunc)pool_len, .sq_item = (ssizeargfunc)pool_item};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamer.budget._pool.Pool",
    .tp_doc = "A budget pool: (cost, arrival, id) entries sorted by (cost, arrival), keys in C arrays.",
    .tp_basicsize = sizeof(Pool),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pool_init,
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_traverse = (traverseproc)pool_traverse,
    .tp_clear = (inquiry)pool_clear,
    .tp_richcompare = pool_richcompare,
    .tp_as_sequence = &pool_sequence,
    .tp_methods = pool_methods,
    .tp_hash = PyObject_HashNotImplemented,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pool", "The budget pool in C.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pool(void) {
    COST_KEY = PyUnicode_InternFromString("__cost__");
    if (COST_KEY == NULL || PyType_Ready(&PoolType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "Pool", (PyObject *)&PoolType) < 0) Py_CLEAR(m);
    return m;
}
