/* tidemq._accel: the read path: record checks, scan_run, damaged, decode_run, frame_records (the record layout and the list of functions: accel.h) */

#include "accel.h"

/* ---------------------------------------------------------------------------- record checks */

/* Is the record at p (size bytes, within the buffer) intact: its body CRC and record CRC hold,
   the "\x02" after the digits is there? (integrity.damaged_records / StoredMessage.intact) */
static int record_intact(const unsigned char *p, int64_t size) {
    if (size < RECORD_MIN) return 0;
    uint32_t bcrc = rd32(p + 8);
    int64_t blen = (int32_t)rd32(p + 84);
    if (blen < 0 || OFF_BODY + blen + TAIL_MIN > size) return 0;
    if ((crc32_of(0, p + OFF_BODY, (size_t)blen) & 0x7FFFFFFF) != bcrc) return 0;
    const unsigned char *end = p + size;
    if (end[-1] != 2) return 0;
    int64_t stored = read_digits10(end - CRC_DIGITS_BACK);
    if (stored < 0) return 0;
    const unsigned char *tail = p + OFF_BODY + blen;
    uint32_t tc = crc32_of(0, tail, (size_t)(end - CRC_DIGITS_BACK - tail));
    return (int64_t)crc32_of(tc, p, OFF_BODY) == stored;
}

/* What a read through consume-queue units expects of each record (units have no CRC of their own:
   a damaged unit can point at an intact record of another queue): its topic, queue id and queue
   offset. Parsed from a caller's (topic bytes, queue id, queue offsets: an int64 buffer) by
   expect_of, the topic copied (nothing another thread changes is read after the GIL is released). */
typedef struct {
    int on;
    int64_t queue_id;
    Py_ssize_t tlen;                    /* > 255: no record can be of it (TOPICLEN is one byte) */
    unsigned char topic[256];
} expect_t;

/* Is the record at p (size bytes, within the buffer; intact or not) the one its unit stands for:
   queue id e->queue_id, queue offset qoff, topic e->topic? Reads only bytes of the record. */
static int record_is(const unsigned char *p, int64_t size, const expect_t *e, int64_t qoff) {
    if (size < RECORD_MIN || e->tlen > 255) return 0;
    if ((int64_t)(int32_t)rd32(p + 12) != e->queue_id || (int64_t)rd64(p + 20) != qoff) return 0;
    int64_t blen = (int32_t)rd32(p + 84);
    if (blen < 0 || blen > size - OFF_BODY - 1 - e->tlen) return 0;
    const unsigned char *t = p + OFF_BODY + blen;
    return t[0] == e->tlen && memcmp(t + 1, e->topic, (size_t)e->tlen) == 0;
}

/* expect (None, or (topic bytes, queue id, queue offsets)) into e, the offsets' buffer into qo
   (its length checked against n records): 0, or -1 with an exception set (qo released by the caller
   when qo->obj is set) */
static int expect_of(PyObject *expect, Py_ssize_t n, expect_t *e, Py_buffer *qo) {
    e->on = 0;
    qo->obj = NULL;
    if (expect == Py_None) return 0;
    Py_buffer t;
    long long qid;
    if (!PyTuple_Check(expect) || !PyArg_ParseTuple(expect, "y*Ly*:expect", &t, &qid, qo)) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "expect must be None or (topic bytes, queue id, queue offsets int64)");
        }
        qo->obj = NULL;
        return -1;
    }
    e->on = 1;
    e->queue_id = qid;
    e->tlen = t.len;
    if (t.len <= 255) memcpy(e->topic, t.buf, (size_t)t.len);
    PyBuffer_Release(&t);
    if (qo->len != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "expect: one int64 queue offset per record");
        return -1;
    }
    return 0;
}

/* scan_run(buf, pos, limit, positions=None) -> (pos, records, body bytes): codec.scan_run */
PyObject *py_scan_run(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit;
    PyObject *positions = Py_None;
    if (!PyArg_ParseTuple(args, "y*nn|O:scan_run", &buf, &pos, &limit, &positions)) return NULL;
    if (positions != Py_None && !PyList_Check(positions)) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_TypeError, "positions must be a list or None");
        return NULL;
    }
    if (limit > buf.len) limit = buf.len;
    const unsigned char *b = (const unsigned char *)buf.buf;
    Py_ssize_t n = 0;
    long long body_bytes = 0;
    /* (pos, limit and size compared by differences: no sum of a caller's numbers can overflow) */
    while (pos >= 0 && limit >= 0 && pos <= limit && limit - pos >= FIXED_OVERHEAD) {
        const unsigned char *p = b + pos;
        int64_t size = (int32_t)rd32(p);
        if (rd32(p + 4) != MAGIC_U32 || size < RECORD_MIN || size > limit - pos) break;
        if (!record_intact(p, size)) break;
        if (positions != Py_None) {
            PyObject *v = PyLong_FromSsize_t(pos);
            if (v == NULL || PyList_Append(positions, v) < 0) {
                Py_XDECREF(v);
                PyBuffer_Release(&buf);
                return NULL;
            }
            Py_DECREF(v);
        }
        body_bytes += (int32_t)rd32(p + 84);
        pos += size;
        n++;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("nnL", pos, n, body_bytes);
}

/* damaged(buf, starts, sizes, expect=None) -> list of indexes: integrity.damaged_records (starts,
   sizes: int64 buffers of the same length; every record within buf; expect: None, or (topic bytes,
   queue id, queue offsets: an int64 buffer of the same length): a record that is not the one its
   unit stands for is listed too) */
PyObject *py_damaged(PyObject *self, PyObject *args) {
    Py_buffer buf, st, sz, qo = {0};
    PyObject *expect = Py_None;
    expect_t e;
    if (!PyArg_ParseTuple(args, "y*y*y*|O:damaged", &buf, &st, &sz, &expect)) return NULL;
    PyObject *out = NULL;
    if (st.len != sz.len || st.len % 8) {
        PyErr_SetString(PyExc_ValueError, "damaged: starts and sizes must be int64 arrays of one length");
        goto done;
    }
    if (expect_of(expect, st.len / 8, &e, &qo) < 0) goto done;
    out = PyList_New(0);
    if (out == NULL) goto done;
    const unsigned char *b = (const unsigned char *)buf.buf;
    for (Py_ssize_t k = 0; k < st.len / 8; k++) {
        int64_t s = ld_i64(st.buf, k), z = ld_i64(sz.buf, k);
        int ok = s >= 0 && z >= RECORD_MIN && s <= buf.len && z <= buf.len - s &&
                 record_intact(b + s, z) && (!e.on || record_is(b + s, z, &e, ld_i64(qo.buf, k)));
        if (!ok) {
            PyObject *v = PyLong_FromSsize_t(k);
            if (v == NULL || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(out);
                goto done;
            }
            Py_DECREF(v);
        }
    }
done:
    if (qo.obj != NULL) PyBuffer_Release(&qo);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&st);
    PyBuffer_Release(&sz);
    return out;
}

/* ------------------------------------------------------------------------------- decode_run() */

/* decode_run(cls, data, sizes) -> list: codec.decode_records. ``cls`` is codec.StoredMessage
   (a __slots__ class: _head, body, _tail, _f, _topic, _props); one instance per record of
   ``data`` (records back to back, ``sizes`` an int32 buffer), made as its __init__ would
   (copies of the header, body and tail; the lazy fields None), each record's framing checked
   as decode_record checks it (ValueError naming the position otherwise). */
static Py_ssize_t slot_off[6];
static PyObject *slot_cls = NULL;
static const char *slot_names[6] = {"_head", "body", "_tail", "_f", "_topic", "_props"};

static int slots_of(PyObject *cls) {
    if (cls == slot_cls) return 0;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "decode_run: cls must be a class");
        return -1;
    }
    for (int k = 0; k < 6; k++) {
        PyObject *d = PyObject_GetAttrString(cls, slot_names[k]);
        if (d == NULL) return -1;
        /* a slot of this very class (a descriptor of another class names an offset of that class's
           layout, which this one's instances may not have) */
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 PyDescr_TYPE(d) == (PyTypeObject *)cls &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 ((PyMemberDescrObject *)d)->d_member->offset >= (Py_ssize_t)sizeof(PyObject) &&
                 ((PyMemberDescrObject *)d)->d_member->offset + (Py_ssize_t)sizeof(PyObject *) <=
                     ((PyTypeObject *)cls)->tp_basicsize;
        if (ok) slot_off[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "decode_run: %s is not a slot", slot_names[k]);
            return -1;
        }
    }
    Py_XDECREF(slot_cls);
    Py_INCREF(cls);
    slot_cls = cls;
    return 0;
}

PyObject *py_decode_run(PyObject *self, PyObject *args) {
    PyObject *cls;
    Py_buffer data, sizes;
    if (!PyArg_ParseTuple(args, "Oy*y*:decode_run", &cls, &data, &sizes)) return NULL;
    PyObject *out = NULL;
    if (slots_of(cls) < 0) goto done;
    PyTypeObject *tp = (PyTypeObject *)cls;
    Py_ssize_t n = sizes.len / 4;
    out = PyList_New(n);
    if (out == NULL) goto done;
    const unsigned char *b = (const unsigned char *)data.buf;
    Py_ssize_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t size = ld_i32(sizes.buf, k);
        const unsigned char *p = b + pos;
        if (size < OFF_BODY || size > data.len - pos) {
            PyErr_Format(PyExc_ValueError, "short record at %zd", pos);
            goto fail;
        }
        int64_t blen = (int32_t)rd32(p + 84);
        int64_t b1 = OFF_BODY + blen;
        if (rd32(p + 4) != MAGIC_U32 || (int32_t)rd32(p) != size || blen < 0 || b1 + 3 > size) {
            PyErr_Format(PyExc_ValueError, "not a record at %zd", pos);
            goto fail;
        }
        int64_t tl = p[b1], tail_len = size - b1;
        if (tl + 3 > tail_len || tl + 3 + (int16_t)((p[b1 + 1 + tl] << 8) | p[b1 + 2 + tl]) != tail_len) {
            PyErr_Format(PyExc_ValueError, "inconsistent lengths at %zd", pos);
            goto fail;
        }
        PyObject *m = tp->tp_alloc(tp, 0);
        if (m == NULL) goto fail;
        PyList_SET_ITEM(out, k, m);
        PyObject *v[3] = {PyBytes_FromStringAndSize((const char *)p, OFF_BODY),
                          PyBytes_FromStringAndSize((const char *)p + OFF_BODY, blen),
                          PyBytes_FromStringAndSize((const char *)p + b1, tail_len)};
        for (int j = 0; j < 3; j++) *(PyObject **)((char *)m + slot_off[j]) = v[j];
        for (int j = 3; j < 6; j++) {
            Py_INCREF(Py_None);
            *(PyObject **)((char *)m + slot_off[j]) = Py_None;
        }
        if (!v[0] || !v[1] || !v[2]) goto fail;
        pos += size;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&sizes);
    return out;
}

/* ---------------------------------------------------------------------- frame_records() */

/* frame_records(buf, starts, sizes, room, head=None, expect=None) -> (frame, bad, headed):
   record/framing.frame_records. A new bytes object: ``room`` zero bytes, the sizes as i32
   little-endian, then the records at ``starts`` (int64 buffers of one length, each record within
   buf) copied back to back; ``bad`` lists the records that fail their CRCs, checked on the copy (a
   second pass: checking each record right after its copy measured twice as slow) and, with
   ``expect`` (topic bytes, queue id, queue offsets: damaged's), in the same pass those that are not
   the records their units stand for. With ``head`` (a callable), the header is written into the
   room in the same pass, before anything but this function has the object: head(crc, bad) (crc:
   CRC-32 of everything after the room) answers the header's bytes (at most ``room``) or None
   (``headed`` False: the room stays zero, for an answer made another way).

   The starts, sizes, queue offsets and topic are checked and copied before the GIL is released
   (nothing a caller's other thread changes is read after); buf stays mapped meanwhile (the caller
   holds it), and nothing else sees the new object until it is returned. */
PyObject *py_frame_records(PyObject *self, PyObject *args) {
    Py_buffer buf, st, sz, qo = {0};
    Py_ssize_t room;
    PyObject *head = Py_None, *expect = Py_None;
    expect_t e;
    e.on = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*n|OO:frame_records", &buf, &st, &sz, &room, &head, &expect)) return NULL;
    PyObject *frame = NULL, *bad = NULL, *out = NULL, *headed = Py_False;
    Py_ssize_t *bad_at = NULL, nbad = 0;
    int64_t *at = NULL;
    Py_ssize_t n = st.len / 8, total = 0;
    uint32_t crc = 0;
    if (st.len != sz.len || st.len % 8 || room < 0 || room > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "frame_records: starts and sizes must be int64 arrays of one length "
                                          "(room: 0 .. 1 MiB)");
        goto done;
    }
    if (head != Py_None && !PyCallable_Check(head)) {
        PyErr_SetString(PyExc_TypeError, "frame_records: head must be callable or None");
        goto done;
    }
    if (expect_of(expect, n, &e, &qo) < 0) goto done;
    if (n > (PY_SSIZE_T_MAX - room) / 24) {
        PyErr_NoMemory();
        goto done;
    }
    at = PyMem_Malloc(sizeof(int64_t) * 3 * (size_t)(n ? n : 1));   /* private copies: starts, sizes, queue offsets */
    bad_at = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (at == NULL || bad_at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t s = ld_i64(st.buf, k), z = ld_i64(sz.buf, k);
        if (s < 0 || z < 0 || z > INT32_MAX || s > buf.len || z > buf.len - s) {
            PyErr_Format(PyExc_ValueError, "frame_records: record %zd lies outside the buffer", k);
            goto done;
        }
        if (z > PY_SSIZE_T_MAX - room - 4 * n - total) {
            PyErr_NoMemory();
            goto done;
        }
        at[2 * k] = s;
        at[2 * k + 1] = z;
        if (e.on) at[2 * n + k] = ld_i64(qo.buf, k);
        total += (Py_ssize_t)z;
    }
    frame = PyBytes_FromStringAndSize(NULL, room + 4 * n + total);
    if (frame == NULL) goto done;
    unsigned char *f = (unsigned char *)PyBytes_AS_STRING(frame);
    const unsigned char *b = (const unsigned char *)buf.buf;
    int want_crc = head != Py_None;
    Py_BEGIN_ALLOW_THREADS
    memset(f, 0, (size_t)room);
    unsigned char *sizes_at = f + room, *rec = f + room + 4 * n;
    for (Py_ssize_t k = 0; k < n; k++) {
        uint32_t v = (uint32_t)at[2 * k + 1];
        sizes_at[4 * k] = (unsigned char)v;
        sizes_at[4 * k + 1] = (unsigned char)(v >> 8);
        sizes_at[4 * k + 2] = (unsigned char)(v >> 16);
        sizes_at[4 * k + 3] = (unsigned char)(v >> 24);
        memcpy(rec, b + at[2 * k], (size_t)at[2 * k + 1]);
        rec += at[2 * k + 1];
    }
    rec = f + room + 4 * n;
    for (Py_ssize_t k = 0; k < n; k++) {
        /* (the CRCs first: record_is then reads lines they have just read, in the cache) */
        if (!record_intact(rec, at[2 * k + 1]) || (e.on && !record_is(rec, at[2 * k + 1], &e, at[2 * n + k])))
            bad_at[nbad++] = k;
        rec += at[2 * k + 1];
    }
    if (want_crc) crc = crc32_of(0, f + room, (size_t)(4 * n + total));
    Py_END_ALLOW_THREADS
    bad = PyList_New(nbad);
    if (bad == NULL) goto done;
    for (Py_ssize_t j = 0; j < nbad; j++) {
        PyObject *v = PyLong_FromSsize_t(bad_at[j]);
        if (v == NULL) goto done;
        PyList_SET_ITEM(bad, j, v);
    }
    if (head != Py_None) {             /* the frame is still this function's alone: its header goes in now */
        PyObject *h = PyObject_CallFunction(head, "kO", (unsigned long)crc, bad);
        if (h == NULL) goto done;
        if (h != Py_None) {
            if (!PyBytes_Check(h) || PyBytes_GET_SIZE(h) > room) {
                PyErr_SetString(PyExc_ValueError, "frame_records: head() must answer bytes of at most room, or None");
                Py_DECREF(h);
                goto done;
            }
            memcpy(PyBytes_AS_STRING(frame), PyBytes_AS_STRING(h), (size_t)PyBytes_GET_SIZE(h));
            headed = Py_True;
        }
        Py_DECREF(h);
    }
    out = PyTuple_Pack(3, frame, bad, headed);
done:
    Py_XDECREF(frame);
    Py_XDECREF(bad);
    PyMem_Free(bad_at);
    PyMem_Free(at);
    if (qo.obj != NULL) PyBuffer_Release(&qo);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&st);
    PyBuffer_Release(&sz);
    return out;
}
