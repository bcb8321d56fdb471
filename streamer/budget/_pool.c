/* The budget pool's per-sample loops (streamer/budget/batcher.py and node.py) in C: the same pool, batches
 * and arrivals as the Python loops, with (cost, arrival) compared as C integers instead of as tuples.
 *
 * The pool is a list of (cost, arrival, id) tuples sorted by (cost, arrival); arrivals are unique, so the
 * id never decides an order (Python's tuple compare would reach it only on equal arrivals).
 *
 * insort(pool, entry): bisect.insort(pool, entry).
 * take(pool, budget, share, most) -> (ids, total): batcher.take_pack, the "pack" take.
 * fit(pool, ids, total, budget, share, most) -> total: batcher.fit_pack.
 * feed(pool, source, wanted, arrival, lists, load, budget, over) -> arrival: node.feed_pool.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *COST_KEY; /* "__cost__" */

/* An entry's cost (and arrival, unless NULL) as C integers; -1 with an error set when it is not an entry.
 * Only ints are read (no __index__): no Python code runs while a search holds positions in the list. */
static int entry_key(PyObject *entry, long long *cost, long long *arrival) {
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 || !PyLong_Check(PyTuple_GET_ITEM(entry, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(entry, 1))) {
        PyErr_Format(PyExc_TypeError, "a budget pool entry is an (int cost, int arrival, id) tuple, not %R", entry);
        return -1;
    }
    *cost = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0));
    if (*cost == -1 && PyErr_Occurred()) return -1;
    if (arrival != NULL) {
        *arrival = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 1));
        if (*arrival == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* The first index in pool[0:hi] whose entry sorts after (cost, arrival); by_arrival 0: after every entry
 * of that cost (bisect_right with (cost, inf)). -1 with an error set. */
static Py_ssize_t after(PyObject *pool, Py_ssize_t hi, long long cost, long long arrival, int by_arrival) {
    Py_ssize_t lo = 0;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        long long c, a;
        if (entry_key(PyList_GET_ITEM(pool, mid), &c, by_arrival ? &a : NULL) < 0) return -1;
        if (c > cost || (by_arrival && c == cost && a > arrival))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int insert(PyObject *pool, PyObject *entry, long long cost, long long arrival) {
    Py_ssize_t at = after(pool, PyList_GET_SIZE(pool), cost, arrival, 1);
    return at < 0 ? -1 : PyList_Insert(pool, at, entry);
}

/* Arguments read without a tuple built per call (METH_FASTCALL): these run once per batch or sample. */
static int nargs_are(const char *name, Py_ssize_t nargs, Py_ssize_t wanted) {
    if (nargs == wanted) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, wanted, nargs);
    return -1;
}

static int list_arg(PyObject *arg, const char *what) {
    if (PyList_Check(arg)) return 0;
    PyErr_Format(PyExc_TypeError, "%s must be a list, not %.80s", what, Py_TYPE(arg)->tp_name);
    return -1;
}

static int ints(PyObject *const *args, Py_ssize_t n, long long *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *py_insort(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long cost, arrival;
    if (nargs_are("insort", nargs, 2) < 0 || list_arg(args[0], "pool") < 0) return NULL;
    PyObject *pool = args[0], *entry = args[1];
    if (entry_key(entry, &cost, &arrival) < 0 || insert(pool, entry, cost, arrival) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Moves the pool's entry at `at` out: its id appended to ids, its cost added to *total. */
static int move(PyObject *pool, Py_ssize_t at, PyObject *ids, long long *total) {
    PyObject *entry = PyList_GET_ITEM(pool, at);
    long long cost;
    if (entry_key(entry, &cost, NULL) < 0) return -1;
    if (PyList_Append(ids, PyTuple_GET_ITEM(entry, 2)) < 0) return -1;
    *total += cost;
    return PyList_SetSlice(pool, at, at + 1, NULL);
}

/* While ids holds less than `share` and `most`: the pool's largest entry that still fits, moved. */
static int fit_loop(PyObject *pool, PyObject *ids, long long *total, long long budget, long long share,
                    long long most) {
    Py_ssize_t n;
    while ((n = PyList_GET_SIZE(pool)) > 0 && PyList_GET_SIZE(ids) < most && *total < share) {
        long long room = budget - *total, largest;
        if (entry_key(PyList_GET_ITEM(pool, n - 1), &largest, NULL) < 0) return -1;
        Py_ssize_t at = n - 1;
        if (largest > room) { /* the largest that still fits: the last of cost <= room */
            at = after(pool, n - 1, room, 0, 0);
            if (at < 0 && PyErr_Occurred()) return -1;
            at -= 1;
            if (at < 0) break;
        }
        if (move(pool, at, ids, total) < 0) return -1;
    }
    return 0;
}

static PyObject *py_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long n[3], total = 0; /* budget, share, most */
    if (nargs_are("take", nargs, 4) < 0 || list_arg(args[0], "pool") < 0 || ints(args + 1, 3, n) < 0) return NULL;
    PyObject *pool = args[0];
    long long budget = n[0], share = n[1], most = n[2];
    if (PyList_GET_SIZE(pool) == 0) {
        PyErr_SetString(PyExc_IndexError, "take from an empty budget pool");
        return NULL;
    }
    PyObject *ids = PyList_New(0);
    if (ids == NULL) return NULL;
    if (move(pool, PyList_GET_SIZE(pool) - 1, ids, &total) < 0 || fit_loop(pool, ids, &total, budget, share, most) < 0) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *out = Py_BuildValue("(NL)", ids, total);
    return out;
}

static PyObject *py_fit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long n[4]; /* total, budget, share, most */
    if (nargs_are("fit", nargs, 6) < 0 || list_arg(args[0], "pool") < 0 || list_arg(args[1], "ids") < 0 ||
        ints(args + 2, 4, n) < 0)
        return NULL;
    if (fit_loop(args[0], args[1], &n[0], n[1], n[2], n[3]) < 0) return NULL;
    return PyLong_FromLongLong(n[0]);
}

/* One sample of the source into the pool: 1 inserted, 0 skipped (over() said None), -1 error. */
static int feed_one(PyObject *pool, PyObject *item, long long arrival, PyObject *lists, PyObject *load,
                    long long budget, PyObject *over) {
    int result = -1;
    PyObject *seq = NULL, *costs = NULL, *cost = NULL, *ident = NULL, *when = NULL, *entry = NULL;
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
        if ((c = PyLong_AsLongLong(cost)) == -1 && PyErr_Occurred()) goto done;
    }
    if (PyDict_CheckExact(sample) && PyDict_SetItem(sample, COST_KEY, cost) < 0) goto done;
    if (PyTuple_CheckExact(item)) { /* the item is already the (shard, index, sample) id */
        ident = Py_NewRef(item);
    } else if ((ident = PyTuple_Pack(3, shard, index, sample)) == NULL) {
        goto done;
    }
    if ((when = PyLong_FromLongLong(arrival)) == NULL || (entry = PyTuple_Pack(3, cost, when, ident)) == NULL)
        goto done;
    if (PyLong_Check(cost)) {
        result = insert(pool, entry, c, arrival) < 0 ? -1 : 1;
    } else {
        PyErr_Format(PyExc_TypeError, "a sample's cost is an int, not %R", cost);
    }
done:
    Py_XDECREF(seq);
    Py_XDECREF(costs);
    Py_XDECREF(cost);
    Py_XDECREF(ident);
    Py_XDECREF(when);
    Py_XDECREF(entry);
    return result;
}

static PyObject *py_feed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long wanted, arrival, budget;
    if (nargs_are("feed", nargs, 8) < 0 || list_arg(args[0], "pool") < 0) return NULL;
    PyObject *pool = args[0], *source = args[1], *lists = args[4], *load = args[5], *over = args[7];
    if (ints(args + 2, 1, &wanted) < 0 || ints(args + 3, 1, &arrival) < 0 || ints(args + 6, 1, &budget) < 0) return NULL;
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
        int fed = feed_one(pool, item, arrival, lists, load, budget, over);
        Py_DECREF(item);
        if (fed < 0) return NULL;
        arrival += fed;
        if (fed && arrival == goal) break;
    }
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(arrival);
}

#define FAST(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL
static PyMethodDef methods[] = {
    {"insort", FAST(py_insort), "insort(pool, entry): bisect.insort by (cost, arrival) as C integers."},
    {"take", FAST(py_take), "take(pool, budget, share, most) -> (ids, total): the \"pack\" take."},
    {"fit", FAST(py_fit), "fit(pool, ids, total, budget, share, most) -> total: more of the pool into ids."},
    {"feed", FAST(py_feed), "feed(pool, source, wanted, arrival, lists, load, budget, over) -> arrival: a top-up."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pool", "The budget pool's loops in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pool(void) {
    COST_KEY = PyUnicode_InternFromString("__cost__");
    if (COST_KEY == NULL) return NULL;
    return PyModule_Create(&module);
}
