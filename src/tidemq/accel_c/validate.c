/* tidemq._accel: the record validator's byte checks (the rules, worded once, and their Python twins:
   store/validate.py; the record layout and the list of functions: accel.h). The helpers here are
   also what the compiled lanes check with (frame.c: a frame's ids and reserved names; send_one.c:
   which SendMessage request is the common one): one C copy of each rule.

   check_slices(data, fields, skip, reserved) -> (why, tags_hashes, names)
       every message of a MessageStore.put_slices batch not in ``skip`` (None, or a buffer of n
       bytes: nonzero = skipped): ``why`` n bytes, 0 or a validate.py reason (ID_TEXT ..
       PROPS_RESERVED); ``tags_hashes`` n int64, the tags hash of each message that passed (0: none);
       ``names`` {i: the reserved property name} of the PROPS_RESERVED ones. ``fields``: n x 10
       native uint32 (offsets, then lengths, of id, tags, keys, properties, body: each slice must lie
       within ``data``, else ValueError); ``reserved``: a tuple of bytes.
   check_encoded(properties, reserved) -> (why, name, tags_hash, uniq, keys)
       encoded record properties (without the CRC tail): their verdict, the reserved name (or None),
       and what the store reads from them: the TAGS value's hash, the UNIQ_KEY and KEYS values (str,
       or None), each the last one given, as codec.prop_value reads them.

   Neither releases the GIL: the buffers they read cannot change under them. */

#define PY_SSIZE_T_CLEAN                /* the "#" formats of Py_BuildValue */
#include "accel.h"

enum { ID_TEXT = 1, TAGS_TEXT, KEYS_UTF8, KEYS_FORM, PROPS_UTF8, PROPS_END, PROPS_PAIR, PROPS_RESERVED };

/* Is p[0:n] strict UTF-8 (Python's "strict" decoder: no overlong forms, no surrogates, nothing
   above U+10FFFF)? With ``hash`` set, also Java's String.hashCode over its UTF-16 units (codec.tags_hash). */
int accel_utf8_ok(const unsigned char *p, Py_ssize_t n, uint32_t *hash) {
    uint32_t h = 0;
    Py_ssize_t k = 0;
    while (k < n) {
        unsigned char c = p[k];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            k += 1;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (k + 1 >= n || (p[k + 1] & 0xC0) != 0x80) return 0;
            cp = ((uint32_t)(c & 0x1F) << 6) | (p[k + 1] & 0x3F);
            k += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (k + 2 >= n || (p[k + 1] & 0xC0) != 0x80 || (p[k + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && p[k + 1] < 0xA0) return 0;          /* overlong */
            if (c == 0xED && p[k + 1] >= 0xA0) return 0;         /* a surrogate */
            cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[k + 1] & 0x3F) << 6) | (p[k + 2] & 0x3F);
            k += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (k + 3 >= n || (p[k + 1] & 0xC0) != 0x80 || (p[k + 2] & 0xC0) != 0x80 || (p[k + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && p[k + 1] < 0x90) return 0;          /* overlong */
            if (c == 0xF4 && p[k + 1] >= 0x90) return 0;         /* above U+10FFFF */
            cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[k + 1] & 0x3F) << 12) |
                 ((uint32_t)(p[k + 2] & 0x3F) << 6) | (p[k + 3] & 0x3F);
            k += 4;
        } else {
            return 0;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    if (hash != NULL) *hash = h;
    return 1;
}

int accel_has_sep(const unsigned char *p, Py_ssize_t n) {
    return n > 0 && (memchr(p, 1, (size_t)n) != NULL || memchr(p, 2, (size_t)n) != NULL);
}

/* validate.text_ok: strict UTF-8 without the separators (``hash``: as accel_utf8_ok's) */
int accel_text_ok(const unsigned char *p, Py_ssize_t n, uint32_t *hash) {
    return !accel_has_sep(p, n) && accel_utf8_ok(p, n, hash);
}

/* validate.py_check_keys: 0, KEYS_UTF8 or KEYS_FORM (not separated by single spaces, a separator) */
int accel_check_keys(const unsigned char *p, Py_ssize_t n) {
    if (!accel_utf8_ok(p, n, NULL)) return KEYS_UTF8;
    if (accel_has_sep(p, n) || p[0] == ' ' || p[n - 1] == ' ') return KEYS_FORM;
    for (Py_ssize_t j = 1; j < n; j++)
        if (p[j] == ' ' && p[j - 1] == ' ') return KEYS_FORM;
    return 0;
}

/* validate.py_check_properties: 0 or a PROPS_* reason (n > 0); a reserved name's place in
   *name_at / *name_len. ``reserved``: a tuple of bytes (checked by the caller). */
int accel_check_props(const unsigned char *p, Py_ssize_t n, PyObject *reserved, Py_ssize_t *name_at,
                      Py_ssize_t *name_len) {
    if (!accel_utf8_ok(p, n, NULL)) return PROPS_UTF8;
    if (p[n - 1] != 2) return PROPS_END;
    Py_ssize_t a = 0, nr = PyTuple_GET_SIZE(reserved);
    while (a < n) {                       /* items name\x01value, each ended by \x02 */
        const unsigned char *e = memchr(p + a, 2, (size_t)(n - a));
        Py_ssize_t b = e - p;
        const unsigned char *sep = memchr(p + a, 1, (size_t)(b - a));
        if (sep == NULL || sep == p + a || memchr(sep + 1, 1, (size_t)(e - sep - 1)) != NULL) return PROPS_PAIR;
        Py_ssize_t nl = sep - (p + a);
        for (Py_ssize_t r = 0; r < nr; r++) {
            PyObject *rb = PyTuple_GET_ITEM(reserved, r);
            if (PyBytes_GET_SIZE(rb) == nl && memcmp(PyBytes_AS_STRING(rb), p + a, (size_t)nl) == 0) {
                *name_at = a;
                *name_len = nl;
                return PROPS_RESERVED;
            }
        }
        a = b + 1;
    }
    return 0;
}

int accel_reserved_ok(PyObject *reserved, const char *who) {
    if (!PyTuple_Check(reserved)) {
        PyErr_Format(PyExc_TypeError, "%s: reserved names must be a tuple of bytes", who);
        return 0;
    }
    for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(reserved); r++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(reserved, r))) {
            PyErr_Format(PyExc_TypeError, "%s: reserved names must be bytes", who);
            return 0;
        }
    }
    return 1;
}

/* {i: name} for a PROPS_RESERVED verdict: 0, or -1 with an exception */
static int note_name(PyObject *names, Py_ssize_t i, const unsigned char *p, Py_ssize_t at, Py_ssize_t len) {
    PyObject *key = PyLong_FromSsize_t(i);
    PyObject *nm = PyUnicode_DecodeUTF8((const char *)p + at, len, "strict");
    int r = (key && nm) ? PyDict_SetItem(names, key, nm) : -1;
    Py_XDECREF(key);
    Py_XDECREF(nm);
    return r;
}

PyObject *py_check_slices(PyObject *self, PyObject *args) {
    Py_buffer data, fields, skip = {0};
    PyObject *skip_obj, *reserved;
    if (!PyArg_ParseTuple(args, "y*y*OO:check_slices", &data, &fields, &skip_obj, &reserved)) return NULL;
    PyObject *why = NULL, *ths = NULL, *names = NULL, *result = NULL;
    int have_skip = 0;
    if (!accel_reserved_ok(reserved, "check_slices")) goto done;
    if (fields.len % 40 != 0) {
        PyErr_Format(PyExc_ValueError, "check_slices: %zd bytes of fields are not n x 10 uint32", fields.len);
        goto done;
    }
    Py_ssize_t n = fields.len / 40;
    if (skip_obj != Py_None) {
        if (PyObject_GetBuffer(skip_obj, &skip, PyBUF_SIMPLE) < 0) goto done;
        have_skip = 1;
        if (skip.len != n) {
            PyErr_Format(PyExc_ValueError, "check_slices: skip has %zd bytes for %zd messages", skip.len, n);
            goto done;
        }
    }
    const uint32_t *F = (const uint32_t *)fields.buf;
    const unsigned char *b = (const unsigned char *)data.buf, *S = have_skip ? (const unsigned char *)skip.buf : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {          /* every slice within data, before anything is read */
        for (int j = 0; j < 5; j++) {
            if ((uint64_t)F[10 * i + j] + F[10 * i + 5 + j] > (uint64_t)data.len) {
                PyErr_Format(PyExc_ValueError, "check_slices: message %zd's slice %d is not within the %zd bytes",
                             i, j, data.len);
                goto done;
            }
        }
    }
    why = PyByteArray_FromStringAndSize(NULL, n);
    ths = PyByteArray_FromStringAndSize(NULL, 8 * n);
    names = PyDict_New();
    if (!why || !ths || !names) goto done;
    unsigned char *W = (unsigned char *)PyByteArray_AS_STRING(why);
    int64_t *TH = (int64_t *)PyByteArray_AS_STRING(ths);
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint32_t *f = F + 10 * i;
        W[i] = 0;
        TH[i] = 0;
        if (S != NULL && S[i]) continue;
        Py_ssize_t li = f[5], lt = f[6], lk = f[7], lp = f[8];
        const unsigned char *mid = b + f[0], *tg = b + f[1], *ks = b + f[2], *ps = b + f[3];
        int w = 0;
        uint32_t th = 0;
        Py_ssize_t at = 0, len = 0;
        if (li && !accel_text_ok(mid, li, NULL)) w = ID_TEXT;
        else if (lt && !accel_text_ok(tg, lt, &th)) w = TAGS_TEXT;
        else if (lk) w = accel_check_keys(ks, lk);
        if (w == 0 && lp) w = accel_check_props(ps, lp, reserved, &at, &len);
        if (w == PROPS_RESERVED && note_name(names, i, ps, at, len) < 0) goto done;
        W[i] = (unsigned char)w;
        if (w == 0 && lt) TH[i] = (int64_t)(int32_t)th;
    }
    result = PyTuple_Pack(3, why, ths, names);
done:
    Py_XDECREF(why);
    Py_XDECREF(ths);
    Py_XDECREF(names);
    if (have_skip) PyBuffer_Release(&skip);
    PyBuffer_Release(&data);
    PyBuffer_Release(&fields);
    return result;
}

/* the value of property ``name`` (the last one given) in checked properties, as str; Py_None if absent */
static PyObject *value_of(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t nl) {
    const unsigned char *found = NULL;
    Py_ssize_t flen = 0, a = 0;
    while (a < n) {
        const unsigned char *e = memchr(p + a, 2, (size_t)(n - a));
        Py_ssize_t b = e - p;
        if (b - a > nl && memcmp(p + a, name, (size_t)nl) == 0 && p[a + nl] == 1) {
            found = p + a + nl + 1;
            flen = b - (a + nl + 1);
        }
        a = b + 1;
    }
    if (found == NULL) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8((const char *)found, flen, "strict");
}

PyObject *py_check_encoded(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *reserved;
    if (!PyArg_ParseTuple(args, "y*O:check_encoded", &raw, &reserved)) return NULL;
    PyObject *result = NULL;
    if (!accel_reserved_ok(reserved, "check_encoded")) goto done;
    const unsigned char *p = (const unsigned char *)raw.buf;
    Py_ssize_t n = raw.len, at = 0, len = 0;
    int w = n ? accel_check_props(p, n, reserved, &at, &len) : 0;
    if (w) {
        if (w == PROPS_RESERVED) result = Py_BuildValue("(is#iOO)", w, (const char *)p + at, len, 0, Py_None, Py_None);
        else result = Py_BuildValue("(iOiOO)", w, Py_None, 0, Py_None, Py_None);
        goto done;
    }
    PyObject *tags = value_of(p, n, "TAGS", 4), *uniq = NULL, *keys = NULL;
    if (tags == NULL) goto done;
    uint32_t th = 0;
    if (tags != Py_None) {
        Py_ssize_t tl;
        const char *t = PyUnicode_AsUTF8AndSize(tags, &tl);
        if (t == NULL) {
            Py_DECREF(tags);
            goto done;
        }
        accel_utf8_ok((const unsigned char *)t, tl, &th);
    }
    Py_DECREF(tags);
    uniq = value_of(p, n, "UNIQ_KEY", 8);
    keys = uniq != NULL ? value_of(p, n, "KEYS", 4) : NULL;
    if (uniq != NULL && keys != NULL) result = Py_BuildValue("(iOLOO)", 0, Py_None, (long long)(int32_t)th, uniq, keys);
    Py_XDECREF(uniq);
    Py_XDECREF(keys);
done:
    PyBuffer_Release(&raw);
    return result;
}
