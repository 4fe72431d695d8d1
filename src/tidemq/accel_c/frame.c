/* tidemq._accel: a SendRecords frame checked and turned into store columns (the record layout and the list of functions: accel.h) */

#include "accel.h"

/* -------------------------------------------------------------------------------- send_frame() */

/* Java's String.hashCode of a str (over its UTF-16 units): codec.tags_hash */
static long long java_hash(PyObject *u) {
    uint32_t h = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(u);
    int kind = PyUnicode_KIND(u);
    const void *d = PyUnicode_DATA(u);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, k);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return (int32_t)h;
}

static inline int has_sep(const unsigned char *p, Py_ssize_t n) {
    return memchr(p, 1, (size_t)n) != NULL || memchr(p, 2, (size_t)n) != NULL;
}

/* a strict UTF-8 str of p[0:n], or NULL with no exception set when it is not UTF-8 */
static PyObject *utf8_or_null(const unsigned char *p, Py_ssize_t n) {
    PyObject *u = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return u;
}

static const char UNIQ_PROP[] = "UNIQ_KEY\x01", MSGTYPE_PROP[] = "__MSGTYPE\x01NORMAL\x02";
static const char CRC_TAIL[] = "__CRC32#\x01" "0000000000" "\x02";

enum {   /* why a message of a frame is refused (protocol/send_frame.py words each) */
    BAD_BODY_EMPTY = 1, BAD_ID = 2, BAD_ID_UTF8 = 3,                  /* before the dedup window */
    BAD_TAGS = 4, BAD_KEYS_UTF8 = 5, BAD_KEYS = 6, BAD_PROPS_UTF8 = 7, BAD_PROPS_END = 8, BAD_PROPS_PAIR = 9,
    BAD_PROPS_RESERVED = 10,                                            /* after it */
};

/* the user properties' verdict: 0, or a BAD_PROPS_* (*name: the reserved name, new reference) */
static int check_props(const unsigned char *p, Py_ssize_t n, PyObject *reserved, PyObject **name) {
    PyObject *all = utf8_or_null(p, n);
    if (all == NULL) return PyErr_Occurred() ? -1 : BAD_PROPS_UTF8;
    Py_DECREF(all);
    if (p[n - 1] != 2) return BAD_PROPS_END;
    Py_ssize_t a = 0;
    while (a < n) {                       /* items name\x01value, each ended by \x02 */
        const unsigned char *e = memchr(p + a, 2, (size_t)(n - a));
        Py_ssize_t b = e - p;
        const unsigned char *sep = memchr(p + a, 1, (size_t)(b - a));
        if (sep == NULL || sep == p + a || memchr(sep + 1, 1, (size_t)(e - sep - 1)) != NULL) return BAD_PROPS_PAIR;
        PyObject *nm = PyUnicode_DecodeUTF8((const char *)(p + a), sep - (p + a), "strict");
        if (nm == NULL) return -1;
        int r = PySet_Contains(reserved, nm);
        if (r != 0) {
            if (r < 0) {
                Py_DECREF(nm);
                return -1;
            }
            *name = nm;
            return BAD_PROPS_RESERVED;
        }
        Py_DECREF(nm);
        a = b + 1;
    }
    return 0;
}

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* send_frame(raw, reserved, id_max) -> (topic, ids, bodies, properties, tags_hashes, keys, refused)

   protocol/send_frame.decode_request's framing (ValueError with the same words) and the checks of
   broker/produce/send_records.py per message, in one pass. Per message i: ids[i] its id (str;
   None when refused before the dedup window), bodies[i], properties[i] the record's properties
   as the store writes them (the user's, UNIQ_KEY, __MSGTYPE NORMAL, TAGS, KEYS, then the
   record-CRC tail), tags_hashes[i], keys[i] (list of str, or None); refused: {i: (why, name)}
   with a BAD_* value above (name: the reserved property's, else None). */
PyObject *py_send_frame(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *reserved;
    Py_ssize_t id_max;
    if (!PyArg_ParseTuple(args, "y*O!n:send_frame", &raw, &PySet_Type, &reserved, &id_max)) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {   /* a frozenset is a set too */
            PyErr_Clear();
            if (!PyArg_ParseTuple(args, "y*O!n:send_frame", &raw, &PyFrozenSet_Type, &reserved, &id_max)) return NULL;
        } else {
            return NULL;
        }
    }
    const unsigned char *b = (const unsigned char *)raw.buf;
    Py_ssize_t len = raw.len;
    PyObject *topic = NULL, *ids = NULL, *bodies = NULL, *props = NULL, *ths = NULL, *keys = NULL, *refused = NULL;
    PyObject *result = NULL;
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
    ids = PyList_New(n);
    bodies = PyList_New(n);
    props = PyList_New(n);
    ths = PyList_New(n);
    keys = PyList_New(n);
    refused = PyDict_New();
    if (!ids || !bodies || !props || !ths || !keys || !refused) goto done;
    Py_ssize_t pos = d0;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        const unsigned char *L = b + l0 + 20 * i;
        Py_ssize_t li = le32(L), lt = le32(L + 4), lk = le32(L + 8), lp = le32(L + 12), lb = le32(L + 16);
        const unsigned char *mid = b + pos, *tg = mid + li, *ks = tg + lt, *ps = ks + lk, *body = ps + lp;
        pos += li + lt + lk + lp + lb;
        int why = 0;
        PyObject *id = NULL, *name = NULL, *kl = NULL, *th = NULL;
        long long h = 0;
        Py_INCREF(Py_None);
        PyList_SET_ITEM(keys, i, Py_None);
        if (lb == 0) {
            why = BAD_BODY_EMPTY;
        } else if (li == 0 || li > id_max || has_sep(mid, li)) {
            why = BAD_ID;
        } else if ((id = utf8_or_null(mid, li)) == NULL) {
            if (PyErr_Occurred()) goto done;
            why = BAD_ID_UTF8;
        }
        if (why == 0 && lt) {
            PyObject *t = utf8_or_null(tg, lt);
            if (t == NULL) {
                if (PyErr_Occurred()) goto item_fail;
                why = BAD_TAGS;
            } else {
                if (has_sep(tg, lt)) why = BAD_TAGS;
                else h = java_hash(t);
                Py_DECREF(t);
            }
        }
        if (why == 0 && lk) {
            PyObject *t = utf8_or_null(ks, lk);
            if (t == NULL) {
                if (PyErr_Occurred()) goto item_fail;
                why = BAD_KEYS_UTF8;
            } else {
                int ok = !has_sep(ks, lk) && ks[0] != ' ' && ks[lk - 1] != ' ';
                for (Py_ssize_t j = 1; ok && j < lk; j++) ok = !(ks[j] == ' ' && ks[j - 1] == ' ');
                if (!ok) {
                    why = BAD_KEYS;
                } else {
                    PyObject *sp = PyUnicode_FromString(" ");
                    kl = sp ? PyUnicode_Split(t, sp, -1) : NULL;
                    Py_XDECREF(sp);
                    if (kl == NULL) {
                        Py_DECREF(t);
                        goto item_fail;
                    }
                }
                Py_DECREF(t);
            }
        }
        if (why == 0 && lp) {
            why = check_props(ps, lp, reserved, &name);
            if (why < 0) goto item_fail;
        }
        if (why) {
            PyObject *v = Py_BuildValue("(iO)", why, name ? name : Py_None);
            PyObject *key = PyLong_FromSsize_t(i);
            int r = (v && key) ? PyDict_SetItem(refused, key, v) : -1;
            Py_XDECREF(v);
            Py_XDECREF(key);
            Py_CLEAR(name);
            if (r < 0) goto item_fail;
        }
        if (why == 0 || why >= BAD_TAGS) {          /* the id is good: its properties are made */
            Py_ssize_t pl = lp + (Py_ssize_t)(sizeof UNIQ_PROP - 1) + li + 1 + (Py_ssize_t)(sizeof MSGTYPE_PROP - 1) +
                            (lt ? 6 + lt : 0) + (lk ? 6 + lk : 0) + (Py_ssize_t)(sizeof CRC_TAIL - 1);
            PyObject *pb = PyBytes_FromStringAndSize(NULL, pl);
            if (pb == NULL) goto item_fail;
            char *q = PyBytes_AS_STRING(pb);
            memcpy(q, ps, (size_t)lp); q += lp;
            memcpy(q, UNIQ_PROP, sizeof UNIQ_PROP - 1); q += sizeof UNIQ_PROP - 1;
            memcpy(q, mid, (size_t)li); q += li;
            *q++ = 2;
            memcpy(q, MSGTYPE_PROP, sizeof MSGTYPE_PROP - 1); q += sizeof MSGTYPE_PROP - 1;
            if (lt) {
                memcpy(q, "TAGS\x01", 5); q += 5;
                memcpy(q, tg, (size_t)lt); q += lt;
                *q++ = 2;
            }
            if (lk) {
                memcpy(q, "KEYS\x01", 5); q += 5;
                memcpy(q, ks, (size_t)lk); q += lk;
                *q++ = 2;
            }
            memcpy(q, CRC_TAIL, sizeof CRC_TAIL - 1);
            PyList_SET_ITEM(props, i, pb);
        } else {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(props, i, Py_None);
        }
        PyObject *bo = PyBytes_FromStringAndSize((const char *)body, lb);
        th = PyLong_FromLongLong(h);
        if (bo == NULL || th == NULL) {
            Py_XDECREF(bo);
            goto item_fail;
        }
        PyList_SET_ITEM(bodies, i, bo);
        PyList_SET_ITEM(ths, i, th);
        if (kl != NULL) PyList_SetItem(keys, i, kl);
        if (id == NULL) {
            Py_INCREF(Py_None);
            id = Py_None;
        }
        PyList_SET_ITEM(ids, i, id);
        continue;
    item_fail:
        Py_XDECREF(id);
        Py_XDECREF(name);
        Py_XDECREF(kl);
        /* the lists hold NULLs from here: they are dropped below */
        goto done;
    }
    result = PyTuple_Pack(7, topic, ids, bodies, props, ths, keys, refused);
done:
    if (result == NULL) {      /* half-filled lists: their empty slots are NULL, which list_dealloc skips */
    }
    Py_XDECREF(topic);
    Py_XDECREF(ids);
    Py_XDECREF(bodies);
    Py_XDECREF(props);
    Py_XDECREF(ths);
    Py_XDECREF(keys);
    Py_XDECREF(refused);
    PyBuffer_Release(&raw);
    return result;
}
