/* The common tar header in one call: checksum, size and name of a regular member, for tarread.py.
 *
 * Optional: tarread.py parses every header in Python when this is not built, and also takes over here
 * whenever this returns None (any header it does not read: pax, long names, ustar prefixes, other
 * checksum or number spellings, damage). So this only has to be right about what it accepts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define BLOCK 512

/* An octal field: leading spaces, at least one digit, then NUL, space or the field's end. -1 if not. */
static long long octal_field(const unsigned char *field, int width) {
    int i = 0;
    long long value = 0;
    while (i < width && field[i] == ' ') i++;
    int first = i;
    while (i < width && field[i] >= '0' && field[i] <= '7') {
        value = value * 8 + (field[i] - '0');
        i++;
    }
    if (i == first || (i < width && field[i] != 0 && field[i] != ' ')) return -1;
    return value;
}

static PyObject *decode(const unsigned char *start, Py_ssize_t length) {
    return PyUnicode_DecodeUTF8((const char *)start, length, "surrogateescape");
}

/* header_at(buffer, pos) -> (size, key, ext) | None
 *
 * The 512-byte header at buffer[pos:] when it is a regular file ('0', NUL or '7') with a matching
 * checksum, an octal size and a name without a ustar prefix; the name split by the key/extension
 * rule (keys.split_member_name): the key runs up to the first dot after the last slash.
 */
static PyObject *header_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "header_at(buffer, pos) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len - BLOCK) {
        PyErr_Format(PyExc_IndexError, "no 512-byte header at %zd in a buffer of %zd", pos, view.len);
        goto done;
    }
    const unsigned char *h = (const unsigned char *)view.buf + pos;
    unsigned char type = h[156];
    if (type != '0' && type != 0 && type != '7') goto none;
    if (h[345] != 0) goto none; /* a ustar prefix */
    long long sum = 8 * ' ';    /* the checksum field counts as spaces */
    for (int i = 0; i < 148; i++) sum += h[i];
    for (int i = 156; i < BLOCK; i++) sum += h[i];
    if (octal_field(h + 148, 8) != sum) goto none;
    long long size = octal_field(h + 124, 12);
    if (size < 0) goto none;
    Py_ssize_t length = 0;
    while (length < 100 && h[length] != 0) length++;
    Py_ssize_t slash = -1, dot = -1;
    for (Py_ssize_t i = 0; i < length; i++)
        if (h[i] == '/') slash = i;
    for (Py_ssize_t i = slash + 1; i < length; i++)
        if (h[i] == '.') {
            dot = i;
            break;
        }
    PyObject *key = decode(h, dot >= 0 ? dot : length);
    PyObject *ext = key == NULL ? NULL : (dot >= 0 ? decode(h + dot + 1, length - dot - 1)
                                                   : PyUnicode_FromStringAndSize("", 0));
    if (ext == NULL) {
        Py_XDECREF(key);
        goto done;
    }
    result = Py_BuildValue("(LNN)", size, key, ext);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"header_at", (PyCFunction)(void (*)(void))header_at, METH_FASTCALL,
     "header_at(buffer, pos) -> (size, key, ext) | None: a regular member's tar header, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tarscan", NULL, 0, methods};

PyMODINIT_FUNC PyInit__tarscan(void) { return PyModuleDef_Init(&module); }
