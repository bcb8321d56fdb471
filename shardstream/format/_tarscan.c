/* The common member headers in one call, for tarread.py (reading) and scan.py (indexing), and a whole
 * sample's in one call for streamer/deferred.py (reading one sample): a plain ustar header, or a pax
 * header and then the plain one, as webdataset's writer (Python's tarfile) puts before every member:
 * checksums, size and name.
 *
 * Optional: both readers parse every header in Python when this is not built, and also take over
 * whenever this returns None (any header it does not read: long names, ustar prefixes without a pax path,
 * global pax headers, other checksum or number spellings, damage). So this only has to be right about
 * what it accepts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

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

/* A header block's checksum: its byte sum with the checksum field counted as spaces. */
static int checksum_ok(const unsigned char *h) {
    long long sum = 8 * ' ';
    for (int i = 0; i < 148; i++) sum += h[i];
    for (int i = 156; i < BLOCK; i++) sum += h[i];
    return octal_field(h + 148, 8) == sum;
}

/* Where a name's key ends (keys.split_member_name): at the first dot after the last slash, else its end. */
static Py_ssize_t key_length(const unsigned char *name, Py_ssize_t length) {
    Py_ssize_t slash = -1;
    for (Py_ssize_t i = 0; i < length; i++)
        if (name[i] == '/') slash = i;
    for (Py_ssize_t i = slash + 1; i < length; i++)
        if (name[i] == '.') return i;
    return length;
}

/* The extension of a name whose key ends at dot: what follows the dot, or "" when there is none. */
static PyObject *extension(const unsigned char *name, Py_ssize_t length, Py_ssize_t dot) {
    return dot < length ? decode(name + dot + 1, length - dot - 1) : PyUnicode_FromStringAndSize("", 0);
}

/* A member's size rounded up to whole blocks, as it lies in the archive. */
static long long padded(long long size) { return size + (BLOCK - size % BLOCK) % BLOCK; }

/* (size, key, ext, data_at): the name split by the key/extension rule
 * (keys.split_member_name): the key runs up to the first dot after the last slash. */
static PyObject *member_tuple(const unsigned char *name, Py_ssize_t length, long long size, PyObject *data_at) {
    if (data_at == NULL) return NULL;
    Py_ssize_t dot = key_length(name, length);
    PyObject *key = decode(name, dot);
    PyObject *ext = key == NULL ? NULL : extension(name, length, dot);
    if (ext == NULL) {
        Py_XDECREF(key);
        Py_XDECREF(data_at);
        return NULL;
    }
    return Py_BuildValue("(LNNN)", size, key, ext, data_at);
}

/* Walk pax records "%d %s=%s\n"; keep path and size. 0 on success, -1 on anything unexpected. */
static int pax_path_size(const unsigned char *p, Py_ssize_t n, const unsigned char **path, Py_ssize_t *path_len,
                         long long *size) {
    Py_ssize_t at = 0;
    while (at < n && p[at] != 0) {
        Py_ssize_t length = 0, i = at;
        while (i < n && p[i] >= '0' && p[i] <= '9' && length < (1LL << 40)) length = length * 10 + (p[i++] - '0');
        if (i == at || i >= n || p[i] != ' ' || length <= i - at + 1 || at + length > n) return -1;
        Py_ssize_t end = at + length; /* one past the record's newline */
        if (p[end - 1] != '\n') return -1;
        const unsigned char *key = p + i + 1;
        const unsigned char *eq = memchr(key, '=', (p + end - 1) - key);
        if (eq == NULL) return -1;
        Py_ssize_t key_len = eq - key;
        const unsigned char *value = eq + 1;
        Py_ssize_t value_len = (p + end - 1) - value;
        if (key_len == 4 && memcmp(key, "path", 4) == 0) {
            *path = value;
            *path_len = value_len;
        } else if (key_len == 4 && memcmp(key, "size", 4) == 0) {
            long long v = 0;
            if (value_len == 0 || value_len > 18) return -1;
            for (Py_ssize_t j = 0; j < value_len; j++) {
                if (value[j] < '0' || value[j] > '9') return -1;
                v = v * 10 + (value[j] - '0');
            }
            *size = v;
        }
        at = end;
    }
    return 0;
}

/* A regular member's headers at base[pos:], wholly within len: a plain header, or a local pax header ('x',
 * as Python's tarfile writes for webdataset's float mtimes) then a plain one. From pax only path and size
 * matter; other records are stepped over. Sets its name, size and where its data starts; 0 for anything
 * else (long names, ustar prefixes without a pax path, damage): Python reads those. pos must leave room
 * for one header. */
static int header_at(const unsigned char *base, Py_ssize_t len, Py_ssize_t pos, const unsigned char **name,
                     Py_ssize_t *name_len, long long *size, Py_ssize_t *data_at) {
    const unsigned char *h = base + pos;
    const unsigned char *path = NULL;
    Py_ssize_t path_len = 0;
    *size = -1;
    if (h[156] == 'x') {
        if (!checksum_ok(h)) return 0;
        long long pax_size = octal_field(h + 124, 12);
        if (pax_size < 0 || pos + BLOCK + pax_size > len) return 0;
        if (pax_path_size(h + BLOCK, (Py_ssize_t)pax_size, &path, &path_len, size) < 0) return 0;
        Py_ssize_t next = pos + BLOCK + (Py_ssize_t)padded(pax_size);
        if (next > len - BLOCK) return 0;
        h = base + next;
        if (path != NULL && path_len == 0) path = NULL; /* an empty pax path: the header's name counts */
    }
    unsigned char type = h[156];
    if (type != '0' && type != 0 && type != '7') return 0;
    if (!checksum_ok(h)) return 0;
    if (path == NULL) {
        if (h[345] != 0) return 0; /* a ustar prefix */
        path = h;
        while (path_len < 100 && h[path_len] != 0) path_len++;
    }
    if (*size < 0) *size = octal_field(h + 124, 12);
    if (*size < 0) return 0;
    *name = path;
    *name_len = path_len;
    *data_at = (Py_ssize_t)(h - base) + BLOCK;
    return 1;
}

/* member_at(buffer, pos) -> (size, key, ext, data_at) | None: the member at buffer[pos:] (header_at), its
 * name split by the key/extension rule; None for what header_at declines. */
static PyObject *member_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "member_at(buffer, pos) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    const unsigned char *name;
    Py_ssize_t name_len, data_at;
    long long size;
    if (pos < 0 || pos > view.len - BLOCK)
        PyErr_Format(PyExc_IndexError, "no 512-byte header at %zd in a buffer of %zd", pos, view.len);
    else if (!header_at((const unsigned char *)view.buf, view.len, pos, &name, &name_len, &size, &data_at))
        result = Py_NewRef(Py_None);
    else
        result = member_tuple(name, name_len, size, PyLong_FromSsize_t(data_at));
    PyBuffer_Release(&view);
    return result;
}

/* sample_at(buffer, members, pos, stop, url[, limit]) -> dict | None
 *
 * The sample in buffer[pos:stop] when its span holds exactly one key's members, each read by header_at:
 * {"__key__": key, "__url__": url, ext: members[data_at:data_at + size], ...}; None otherwise (the general
 * reader decides and names any damage). With limit (where the buffer's valid bytes end), also None when
 * the header at stop goes on with the key: an offsets sidecar that split a sample. members is what the values are sliced from (buffer itself, or a
 * memoryview of it for zero-copy reads). For streamer/deferred.py, which reads one sample per call:
 * the walk in Python cost ~2 us a sample, as much as the rest of a zero-copy read. */
static PyObject *sample_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "sample_at(buffer, members, pos, stop, url[, limit]): 5 or 6 args");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t stop = PyLong_AsSsize_t(args[3]);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t limit = 0; /* the buffer's valid bytes end here: the header at stop is looked at if it fits */
    if (nargs == 6) {
        limit = PyLong_AsSsize_t(args[5]);
        if (limit == -1 && PyErr_Occurred()) return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    PyObject *sample = NULL;
    const unsigned char *key = NULL;
    Py_ssize_t key_len = 0;
    if (pos < 0 || stop > view.len) goto none;
    while (pos < stop) {
        const unsigned char *name;
        Py_ssize_t name_len, data_at;
        long long size;
        if (pos > stop - BLOCK || !header_at(base, stop, pos, &name, &name_len, &size, &data_at)) goto none;
        if (size > stop - data_at) goto none;
        Py_ssize_t dot = key_length(name, name_len);
        if (sample == NULL) {
            key = name;
            key_len = dot;
            sample = PyDict_New();
            PyObject *text = sample == NULL ? NULL : decode(key, key_len);
            int failed = text == NULL || PyDict_SetItemString(sample, "__key__", text) < 0 ||
                         PyDict_SetItemString(sample, "__url__", args[4]) < 0;
            Py_XDECREF(text);
            if (failed) goto error;
        } else if (dot != key_len || memcmp(name, key, key_len) != 0) {
            goto none;
        }
        PyObject *ext = extension(name, name_len, dot);
        PyObject *data = ext == NULL ? NULL : PySequence_GetSlice(args[1], data_at, data_at + (Py_ssize_t)size);
        int failed = data == NULL || PyDict_SetItem(sample, ext, data) < 0;
        Py_XDECREF(ext);
        Py_XDECREF(data);
        if (failed) goto error;
        pos = data_at + (Py_ssize_t)padded(size);
    }
    if (pos == stop && sample != NULL) {
        /* The next header must not go on with this key (a sidecar that split a sample): the name field's
         * first bytes, when a plain ustar name; None lets the general reader name it. */
        if (limit > view.len) limit = view.len;
        if (stop <= limit - BLOCK && key_len < 100) {
            const unsigned char *next = base + stop;
            if (next[345] == 0 && memcmp(next, key, (size_t)key_len) == 0 &&
                (next[key_len] == '.' || next[key_len] == 0))
                goto none;
        }
        goto done;
    }
none:
    Py_XDECREF(sample);
    sample = Py_NewRef(Py_None);
    goto done;
error:
    Py_CLEAR(sample);
done:
    PyBuffer_Release(&view);
    return sample;
}

/* offset_in(member, mapping): where a member (a view into a mapped shard) starts in that mapping, or -1
 * when it does not lie inside it. For streamer/rawbatch.py, which sends members as (shard, start, end);
 * numpy's way of reading a buffer's address costs ~3 us a member there. */
static PyObject *offset_in(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "offset_in(member, mapping) takes two buffers");
        return NULL;
    }
    Py_buffer member, mapping;
    if (PyObject_GetBuffer(args[0], &member, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &mapping, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&member);
        return NULL;
    }
    const char *at = (const char *)member.buf, *base = (const char *)mapping.buf;
    Py_ssize_t offset = -1;
    if (at >= base && at + member.len <= base + mapping.len) offset = at - base;
    PyBuffer_Release(&member);
    PyBuffer_Release(&mapping);
    return PyLong_FromSsize_t(offset);
}

static PyMethodDef methods[] = {
    {"offset_in", (PyCFunction)(void (*)(void))offset_in, METH_FASTCALL,
     "offset_in(member, mapping) -> int: the member's start within the mapping, or -1 if outside it."},
    {"member_at", (PyCFunction)(void (*)(void))member_at, METH_FASTCALL,
     "member_at(buffer, pos) -> (size, key, ext, data_at) | None: a member's headers (plain or pax + plain)."},
    {"sample_at", (PyCFunction)(void (*)(void))sample_at, METH_FASTCALL,
     "sample_at(buffer, members, pos, stop, url[, limit]) -> dict | None: one key's members in "
     "buffer[pos:stop], the header at stop (below limit) not of that key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tarscan", NULL, 0, methods};

PyMODINIT_FUNC PyInit__tarscan(void) { return PyModuleDef_Init(&module); }
