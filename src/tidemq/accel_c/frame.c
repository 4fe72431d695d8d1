/* tidemq._accel: a SendRecords frame checked in one pass, into arrays (the record layout and the list
   of functions: accel.h; the frame: protocol/send_frame.py; the checks: broker/produce/send_records.py) */

#include "accel.h"

/* ------------------------------------------------------------------------------- frame_slices() */

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline int has_sep(const unsigned char *p, Py_ssize_t n) {
    return memchr(p, 1, (size_t)n) != NULL || memchr(p, 2, (size_t)n) != NULL;
}

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

enum {   /* why a message of a frame is refused (broker/produce/send_records.py words each) */
    BAD_BODY_EMPTY = 1, BAD_ID = 2, BAD_ID_UTF8 = 3,                  /* before the dedup window */
    BAD_TAGS = 4, BAD_KEYS_UTF8 = 5, BAD_KEYS = 6, BAD_PROPS_UTF8 = 7, BAD_PROPS_END = 8, BAD_PROPS_PAIR = 9,
    BAD_PROPS_RESERVED = 10,                                            /* after it */
};

/* the user properties' verdict: 0, or a BAD_PROPS_* (*name_at / *name_len: the reserved name) */
static int check_props(const unsigned char *p, Py_ssize_t n, PyObject *reserved, Py_ssize_t *name_at,
                       Py_ssize_t *name_len) {
    if (!accel_utf8_ok(p, n, NULL)) return BAD_PROPS_UTF8;
    if (p[n - 1] != 2) return BAD_PROPS_END;
    Py_ssize_t a = 0, nr = PyTuple_GET_SIZE(reserved);
    while (a < n) {                       /* items name\x01value, each ended by \x02 */
        const unsigned char *e = memchr(p + a, 2, (size_t)(n - a));
        Py_ssize_t b = e - p;
        const unsigned char *sep = memchr(p + a, 1, (size_t)(b - a));
        if (sep == NULL || sep == p + a || memchr(sep + 1, 1, (size_t)(e - sep - 1)) != NULL) return BAD_PROPS_PAIR;
        Py_ssize_t nl = sep - (p + a);
        for (Py_ssize_t r = 0; r < nr; r++) {
            PyObject *rb = PyTuple_GET_ITEM(reserved, r);
            if (PyBytes_GET_SIZE(rb) == nl && memcmp(PyBytes_AS_STRING(rb), p + a, (size_t)nl) == 0) {
                *name_at = a;
                *name_len = nl;
                return BAD_PROPS_RESERVED;
            }
        }
        a = b + 1;
    }
    return 0;
}

/* the keys' verdict: 0, BAD_KEYS_UTF8 or BAD_KEYS (not separated by single spaces, a separator) */
static int check_keys(const unsigned char *p, Py_ssize_t n) {
    if (!accel_utf8_ok(p, n, NULL)) return BAD_KEYS_UTF8;
    if (has_sep(p, n) || p[0] == ' ' || p[n - 1] == ' ') return BAD_KEYS;
    for (Py_ssize_t j = 1; j < n; j++)
        if (p[j] == ' ' && p[j - 1] == ' ') return BAD_KEYS;
    return 0;
}

/* frame_slices(raw, reserved, id_max) -> (topic, fields, why, names, tags_hashes, hashes)

   protocol/send_frame.decode_request's framing (ValueError in the same words) and the checks of
   broker/produce/send_records.py per message, in one pass, into arrays (no object per message).
   ``reserved``: a tuple of the reserved property names as bytes. Per message i of n:
     fields[i]      10 native uint32: the offsets in ``raw`` of its id, tags, keys, properties and
                    body, then their lengths (send_records.FIELDS)
     why[i]         0, or why it is refused (a BAD_* value above; below BAD_TAGS its id is unusable)
     tags_hashes[i] int64: codec.tags_hash of its tags (0: none, or refused)
     hashes[i]      16 bytes: the dedup window's key of (topic, id) (dedup.c), zero when the id is
                    unusable
   ``names``: {i: the reserved property name (str)} of the messages refused BAD_PROPS_RESERVED. */
PyObject *py_frame_slices(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *reserved;
    Py_ssize_t id_max;
    if (!PyArg_ParseTuple(args, "y*O!n:frame_slices", &raw, &PyTuple_Type, &reserved, &id_max)) return NULL;
    const unsigned char *b = (const unsigned char *)raw.buf;
    Py_ssize_t len = raw.len;
    PyObject *topic = NULL, *fields = NULL, *why = NULL, *names = NULL, *ths = NULL, *hashes = NULL, *result = NULL;
    for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(reserved); r++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(reserved, r))) {
            PyErr_SetString(PyExc_TypeError, "frame_slices: reserved names must be bytes");
            goto done;
        }
    }
    if (len < 10) {
        PyErr_Format(PyExc_ValueError, "%zd bytes: shorter than the 10-byte head", len);
        goto done;
    }
    if (memcmp(b, "TQB1", 4) != 0) {
        PyObject *m = PyBytes_FromStringAndSize((const char *)b, 4);
        if (m) PyErr_Format(PyExc_ValueError, "magic %R, expected b'TQB1'", m);
        Py_XDECREF(m);
        goto done;
    }
    uint32_t n = le32(b + 4);
    Py_ssize_t tl = b[8] | (b[9] << 8);
    if (n < 1 || n > 65536) {
        PyErr_Format(PyExc_ValueError, "count %u outside 1 .. 65536", n);
        goto done;
    }
    Py_ssize_t l0 = 10 + tl, d0 = l0 + 20 * (Py_ssize_t)n;
    if (d0 > len) {
        PyErr_Format(PyExc_ValueError, "%zd bytes cannot hold the topic and the lengths of %u messages", len, n);
        goto done;
    }
    topic = PyUnicode_DecodeASCII((const char *)b + 10, tl, "strict");
    if (topic == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        PyErr_Format(PyExc_ValueError, "the topic is not ascii: %S", ev);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        goto done;
    }
    unsigned long long total = 0;
    for (Py_ssize_t k = 0; k < 5 * (Py_ssize_t)n; k++) total += le32(b + l0 + 4 * k);
    if ((unsigned long long)(len - d0) != total) {
        PyErr_Format(PyExc_ValueError, "the lengths add up to %llu bytes of data, the frame has %zd", total, len - d0);
        goto done;
    }
    if (len > (Py_ssize_t)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%zd bytes: a frame holds at most %u", len, UINT32_MAX);
        goto done;
    }
    fields = PyByteArray_FromStringAndSize(NULL, 40 * (Py_ssize_t)n);
    why = PyByteArray_FromStringAndSize(NULL, n);
    ths = PyByteArray_FromStringAndSize(NULL, 8 * (Py_ssize_t)n);
    hashes = PyByteArray_FromStringAndSize(NULL, 16 * (Py_ssize_t)n);
    names = PyDict_New();
    if (!fields || !why || !ths || !hashes || !names) goto done;
    uint32_t *F = (uint32_t *)PyByteArray_AS_STRING(fields);
    unsigned char *W = (unsigned char *)PyByteArray_AS_STRING(why);
    int64_t *TH = (int64_t *)PyByteArray_AS_STRING(ths);
    uint64_t *H = (uint64_t *)PyByteArray_AS_STRING(hashes);
    Py_ssize_t pos = d0;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        const unsigned char *L = b + l0 + 20 * i;
        uint32_t *f = F + 10 * i;
        for (int j = 0; j < 5; j++) {
            f[j] = (uint32_t)pos;
            f[5 + j] = le32(L + 4 * j);
            pos += f[5 + j];
        }
        Py_ssize_t li = f[5], lt = f[6], lk = f[7], lp = f[8], lb = f[9];
        const unsigned char *mid = b + f[0], *tg = b + f[1], *ks = b + f[2], *ps = b + f[3];
        int w = 0;
        uint32_t th = 0;
        Py_ssize_t name_at = 0, name_len = 0;
        if (lb == 0) {
            w = BAD_BODY_EMPTY;
        } else if (li == 0 || li > id_max || has_sep(mid, li)) {
            w = BAD_ID;
        } else if (!accel_utf8_ok(mid, li, NULL)) {
            w = BAD_ID_UTF8;
        }
        if (w == 0 && lt && (has_sep(tg, lt) || !accel_utf8_ok(tg, lt, &th))) {
            w = BAD_TAGS;
            th = 0;
        }
        if (w == 0 && lk) w = check_keys(ks, lk);
        if (w == 0 && lp) w = check_props(ps, lp, reserved, &name_at, &name_len);
        if (w == BAD_PROPS_RESERVED) {
            PyObject *key = PyLong_FromSsize_t(i);
            PyObject *nm = PyUnicode_DecodeUTF8((const char *)ps + name_at, name_len, "strict");
            int r = (key && nm) ? PyDict_SetItem(names, key, nm) : -1;
            Py_XDECREF(key);
            Py_XDECREF(nm);
            if (r < 0) goto done;
        }
        W[i] = (unsigned char)w;
        TH[i] = w == 0 ? (int64_t)(int32_t)th : 0;
        if (w == 0 || w >= BAD_TAGS) {
            if (accel_id_hash(b + 10, (size_t)tl, mid, (size_t)li, H + 2 * i) < 0) goto done;
        } else {
            H[2 * i] = H[2 * i + 1] = 0;
        }
    }
    result = PyTuple_Pack(6, topic, fields, why, names, ths, hashes);
done:
    Py_XDECREF(topic);
    Py_XDECREF(fields);
    Py_XDECREF(why);
    Py_XDECREF(names);
    Py_XDECREF(ths);
    Py_XDECREF(hashes);
    PyBuffer_Release(&raw);
    return result;
}
