/* A subset's kept bytes gathered from a mapped shard (streamer/chain/subsetread.py, KeptBytes) in C: the
 * same bytes as the Python loop, with one memcpy a span instead of a loop turn, a slice and a copy.
 *
 * gather(src, dst, spans, next, left, at) -> (filled, next, left, at)
 *   src: the mapped shard (any buffer); dst: the window's writable buffer; spans: int64 pairs (start, end)
 *   end to end (an array('q') or bytes); next: the span to start next; left: bytes left of the current
 *   span, read from byte at. Copies until dst is full or the spans are out; a span past src's end stops
 *   the copy there (the shard ended early: the tar reader says so). A span that ends before it starts,
 *   or starts below 0, is a ValueError (a damaged sidecar), never a read outside src.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *gather(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer src, dst, spans;
    Py_ssize_t next, left, at;
    if (!PyArg_ParseTuple(args, "y*w*y*nnn", &src, &dst, &spans, &next, &left, &at)) return NULL;
    const char *from = (const char *)src.buf;
    char *to = (char *)dst.buf;
    const long long *pairs = (const long long *)spans.buf;
    Py_ssize_t count = spans.len / (Py_ssize_t)(2 * sizeof(long long));
    Py_ssize_t filled = 0, size = dst.len;
    PyObject *result = NULL;
    if (next < 0 || left < 0 || at < 0) {
        PyErr_SetString(PyExc_ValueError, "gather: negative position");
        goto done;
    }
    while (filled < size) {
        if (left == 0) {
            if (next >= count) break;
            long long start = pairs[2 * next], end = pairs[2 * next + 1];
            next++;
            if (start < 0 || end < start) {
                PyErr_Format(PyExc_ValueError, "gather: span (%lld, %lld) is not a byte range", start, end);
                goto done;
            }
            left = (Py_ssize_t)(end - start);
            at = (Py_ssize_t)start;
        }
        Py_ssize_t take = left < size - filled ? left : size - filled;
        Py_ssize_t there = at < src.len ? src.len - at : 0;
        if (take > there) take = there;
        if (take == 0) { /* the shard ends early */
            left = 0;
            next = count;
            break;
        }
        memcpy(to + filled, from + at, (size_t)take);
        filled += take;
        left -= take;
        at += take;
    }
    result = Py_BuildValue("nnnn", filled, next, left, at);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&spans);
    return result;
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS, "Copy the next spans of a mapped shard into a buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_gather", "A subset's kept bytes copied in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gather(void) { return PyModule_Create(&module); }
