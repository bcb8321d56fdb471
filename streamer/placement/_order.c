/* An epoch's shard order in C: the keyed permutation's loop (streamer/permute.py, Permutation.array) and
 * where each shard of the order ends in the stream (placement.stream_ends). Both give exactly what their
 * numpy forms give, without the temporaries: at 10^7 shards fresh memory costs more than the arithmetic.
 *
 * permute(n, half, keys, indices, out)
 *   n: the domain [0, n); half: bits in each Feistel half; keys: the 6 round keys, uint64 little-endian bytes;
 *   indices: a uint64 buffer of inputs, or None for 0, 1, ..., len(out) - 1; out: a writable int64 buffer.
 * Every step wraps modulo 2^64 exactly as numpy's uint64 arithmetic does, so both forms agree bit for bit.
 *
 * ends(counts, order, out) -> total
 *   out[i] = counts[order[0]] + ... + counts[order[i]], as numpy's cumsum(counts[order]) but without its
 *   temporary as large as the order. All buffers int64; every order[i] is checked to be a shard.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROUNDS 6 /* permute.py's _ROUNDS; fixed here so the compiler unrolls the rounds */

static inline uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static inline uint64_t encrypt(uint64_t x, unsigned half, uint64_t mask, const uint64_t *keys) {
    uint64_t left = x >> half, right = x & mask;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t next = left ^ (mix(right ^ keys[r]) & mask);
        left = right;
        right = next;
    }
    return (left << half) | right;
}

/* The same loop built for AVX-512 and AVX2 as well, picked at load time where the CPU has them (GCC on
 * x86-64 Linux): the rounds vectorise there, about 2.5x faster; elsewhere the plain build alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

CLONES static void encrypt_all(uint64_t *values, Py_ssize_t m, unsigned half, uint64_t mask, const uint64_t *keys) {
    for (Py_ssize_t j = 0; j < m; j++) values[j] = encrypt(values[j], half, mask, keys);
}

#define BLOCK 2048

/* Blocks of BLOCK inputs: encrypt them all, keep those outside [0, n) (under 3 in 4) and encrypt those
 * again until none is left; cycle walking, with no branch in the loops that do the work. */
static void permute_all(int64_t *out, const uint64_t *indices, Py_ssize_t count, uint64_t n, unsigned half,
                        const uint64_t *keys) {
    const uint64_t mask = (UINT64_C(1) << half) - 1;
    uint64_t values[BLOCK];
    uint32_t places[BLOCK];
    for (Py_ssize_t begin = 0; begin < count; begin += BLOCK) {
        Py_ssize_t length = count - begin < BLOCK ? count - begin : BLOCK;
        for (Py_ssize_t j = 0; j < length; j++) values[j] = indices ? indices[begin + j] : (uint64_t)(begin + j);
        encrypt_all(values, length, half, mask, keys);
        Py_ssize_t left = 0;
        for (Py_ssize_t j = 0; j < length; j++) {
            uint64_t y = values[j];
            out[begin + j] = (int64_t)y;
            places[left] = (uint32_t)j;
            values[left] = y;
            left += y >= n;
        }
        while (left > 0) {
            encrypt_all(values, left, half, mask, keys);
            Py_ssize_t kept = 0;
            for (Py_ssize_t j = 0; j < left; j++) {
                uint64_t y = values[j];
                uint32_t place = places[j];
                out[begin + place] = (int64_t)y;  /* final once in range; overwritten otherwise */
                places[kept] = place;
                values[kept] = y;
                kept += y >= n;
            }
            left = kept;
        }
    }
}

static PyObject *permute(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long n;
    unsigned int half;
    Py_buffer keys_buf, out_buf;
    PyObject *indices_obj;
    if (!PyArg_ParseTuple(args, "KIy*Ow*", &n, &half, &keys_buf, &indices_obj, &out_buf)) return NULL;
    Py_buffer indices_buf = {0};
    int have_indices = indices_obj != Py_None;
    PyObject *result = NULL;
    if (have_indices && PyObject_GetBuffer(indices_obj, &indices_buf, PyBUF_SIMPLE) < 0) goto release;
    Py_ssize_t count = out_buf.len / (Py_ssize_t)sizeof(int64_t);
    if (keys_buf.len != ROUNDS * (Py_ssize_t)sizeof(uint64_t) || out_buf.len % (Py_ssize_t)sizeof(int64_t)
        || half < 1 || half > 32 || n < 1 || (half < 32 && n > (UINT64_C(1) << (2 * half)))
        || (have_indices && indices_buf.len != out_buf.len)) {
        PyErr_SetString(PyExc_ValueError, "permute: keys, indices and out do not fit n and half (see _order.c)");
        goto release;
    }
    /* An input outside [0, n) may sit on a cycle that never comes back below n: refuse it, never spin. */
    for (Py_ssize_t i = 0; have_indices && i < count; i++) {
        if (((const uint64_t *)indices_buf.buf)[i] >= n) {
            PyErr_Format(PyExc_IndexError, "permute: indices[%zd] is outside [0, %llu)", i, n);
            goto release;
        }
    }
    uint64_t keys[ROUNDS];
    memcpy(keys, keys_buf.buf, sizeof keys);
    const uint64_t *indices = have_indices ? (const uint64_t *)indices_buf.buf : NULL;
    int64_t *out = (int64_t *)out_buf.buf;
    Py_BEGIN_ALLOW_THREADS
    permute_all(out, indices, count, (uint64_t)n, half, keys);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release:
    if (have_indices && indices_buf.obj != NULL) PyBuffer_Release(&indices_buf);
    PyBuffer_Release(&keys_buf);
    PyBuffer_Release(&out_buf);
    return result;
}

static PyObject *ends(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer counts_buf, order_buf, out_buf;
    if (!PyArg_ParseTuple(args, "y*y*w*", &counts_buf, &order_buf, &out_buf)) return NULL;
    PyObject *result = NULL;
    const Py_ssize_t size = (Py_ssize_t)sizeof(int64_t);
    if (counts_buf.len % size || order_buf.len % size || out_buf.len != order_buf.len) {
        PyErr_SetString(PyExc_ValueError, "ends: counts, order and out must be int64 buffers, out as long as order");
        goto release;
    }
    const int64_t *counts = (const int64_t *)counts_buf.buf, *order = (const int64_t *)order_buf.buf;
    int64_t *out = (int64_t *)out_buf.buf;
    const Py_ssize_t n = counts_buf.len / size, length = order_buf.len / size;
    int64_t total = 0;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < length; i++) {
        int64_t shard = order[i];
        if (shard < 0 || shard >= n) {
            bad = i;
            break;
        }
        total += counts[shard];
        out[i] = total;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "ends: order[%zd] = %lld is not a shard of %zd", bad, (long long)order[bad], n);
        goto release;
    }
    result = PyLong_FromLongLong(total);
release:
    PyBuffer_Release(&counts_buf);
    PyBuffer_Release(&order_buf);
    PyBuffer_Release(&out_buf);
    return result;
}

static PyMethodDef methods[] = {
    {"permute", permute, METH_VARARGS, "permute(n, half, keys, indices, out): out[i] = the permutation of indices[i]"},
    {"ends", ends, METH_VARARGS, "ends(counts, order, out) -> total: out = cumsum(counts[order]) (see the file)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_order", NULL, -1, methods};

PyMODINIT_FUNC PyInit__order(void) { return PyModule_Create(&module); }
