/* tidemq._accel: a SendRecords frame parsed in one pass, into arrays (the record layout and the list
   of functions: accel.h; the frame: protocol/send_frame.py; the lane's checks: broker/produce/send_records.py;
   the record's rules: validate.c) */

#include "accel.h"

/* ------------------------------------------------------------------------------- frame_slices() */

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

enum {   /* why a frame cannot carry a message here (broker/produce/send_records.py words each) */
    BAD_BODY_EMPTY = 1, BAD_ID = 2, BAD_ID_UTF8 = 3,                  /* its id is not usable */
    BAD_PROPS_RESERVED = 10,                                            /* a property the broker writes */
};
#define PROPS_RESERVED_CHECK 8      /* validate.c's PROPS_RESERVED */

/* frame_slices(raw, reserved, id_max, key) -> (topic, fields, why, names, hashes)

   protocol/send_frame.decode_request's framing (ValueError in the same words) and what this lane
   checks per message itself (its id, the property names only the broker writes), in one pass, into
   arrays (no object per message); the record's own rules (texts, keys, properties) are the store's
   (validate.c: check_slices). ``reserved``: a tuple of the reserved property names as bytes. Per
   message i of n:
     fields[i]      10 native uint32: the offsets in ``raw`` of its id, tags, keys, properties and
                    body, then their lengths (send_records.FIELDS)
     why[i]         0, or why the lane refuses it (a BAD_* value above)
     hashes[i]      16 bytes: the dedup window's key of (topic, id) under ``key`` (16 bytes: dedup.c),
                    zero when the id is unusable (BAD_BODY_EMPTY, BAD_ID, BAD_ID_UTF8)
   ``names``: {i: the reserved property name (str)} of the messages refused BAD_PROPS_RESERVED. */
PyObject *py_frame_slices(PyObject *self, PyObject *args) {
    Py_buffer raw, key;
    PyObject *reserved;
    Py_ssize_t id_max;
    if (!PyArg_ParseTuple(args, "y*O!ny*:frame_slices", &raw, &PyTuple_Type, &reserved, &id_max, &key)) return NULL;
    const unsigned char *b = (const unsigned char *)raw.buf;
    Py_ssize_t len = raw.len;
    PyObject *topic = NULL, *fields = NULL, *why = NULL, *names = NULL, *hashes = NULL, *result = NULL;
    if (!accel_reserved_ok(reserved, "frame_slices")) goto done;
    if (key.len != DEDUP_KEY_BYTES) {
        PyErr_SetString(PyExc_ValueError, "frame_slices: the dedup key is 16 bytes");
        goto done;
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
    hashes = PyByteArray_FromStringAndSize(NULL, 16 * (Py_ssize_t)n);
    names = PyDict_New();
    if (!fields || !why || !hashes || !names) goto done;
    uint32_t *F = (uint32_t *)PyByteArray_AS_STRING(fields);
    unsigned char *W = (unsigned char *)PyByteArray_AS_STRING(why);
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
        Py_ssize_t li = f[5], lp = f[8], lb = f[9];
        const unsigned char *mid = b + f[0], *ps = b + f[3];
        int w = 0;
        Py_ssize_t name_at = 0, name_len = 0;
        if (lb == 0) {
            w = BAD_BODY_EMPTY;
        } else if (li == 0 || li > id_max || accel_has_sep(mid, li)) {
            w = BAD_ID;
        } else if (!accel_utf8_ok(mid, li, NULL)) {
            w = BAD_ID_UTF8;
        }
        /* a reserved name is the lane's refusal; malformed properties are the store's (check_slices) */
        if (w == 0 && lp && accel_check_props(ps, lp, reserved, &name_at, &name_len) == PROPS_RESERVED_CHECK) {
            w = BAD_PROPS_RESERVED;
            PyObject *key = PyLong_FromSsize_t(i);
            PyObject *nm = PyUnicode_DecodeUTF8((const char *)ps + name_at, name_len, "strict");
            int r = (key && nm) ? PyDict_SetItem(names, key, nm) : -1;
            Py_XDECREF(key);
            Py_XDECREF(nm);
            if (r < 0) goto done;
        }
        W[i] = (unsigned char)w;
        if (w == 0 || w == BAD_PROPS_RESERVED) {
            if (accel_id_hash(key.buf, b + 10, (size_t)tl, mid, (size_t)li, H + 2 * i) < 0) goto done;
        } else {
            H[2 * i] = H[2 * i + 1] = 0;
        }
    }
    result = PyTuple_Pack(5, topic, fields, why, names, hashes);
done:
    Py_XDECREF(topic);
    Py_XDECREF(fields);
    Py_XDECREF(why);
    Py_XDECREF(names);
    Py_XDECREF(hashes);
    PyBuffer_Release(&raw);
    PyBuffer_Release(&key);
    return result;
}
