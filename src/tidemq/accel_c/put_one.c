/* tidemq._accel: the one-message put's common case in one call (store/put_one.py; the record layout
   and the list of functions: accel.h).

   put_one(t, body, props, mf, born_ms, born_host, sys_flag, now_ms, store_host, index, reserved,
           max_body, max_record) -> ((units, index_items, now_ms, phys, end), queue_offset) or None

   StoreWriter.put_encoded of one entry (body, props) of topic ``t`` (its TopicState) appended into
   the mapped segment ``mf`` (a MappedFile: its mapping, wrote_pos, size, start_offset), for a caller
   holding the put lock that found the store taking puts, the log not failing, ``mf`` the log's last
   segment, not full, its directory online. ``born_ms`` (None: now), ``born_host`` (8 bytes) and
   ``sys_flag`` as put_encoded takes them; ``index``: the store indexes keys; ``reserved``: the
   property names the caller may not give (validate.ENCODED_RESERVED); ``max_body``, ``max_record``:
   the store's bounds.

   Taken: the record is written at wrote_pos (queue round-robin over the topic's write_ids, its queue
   offset taken, the body CRC and the record CRC), ``mf.wrote_pos`` and ``mf.last_store_timestamp_ms``
   moved, the topic's next offset and round-robin counter moved; returned: the dispatch entry the
   put lock defers (put_lock.PutLock.defer: the units {consume queue: [queue offset, unit]}, the
   index items as index_file.HASHED_ITEM bytes, the store time, the record's offset and the log's end
   after it) and the queue offset.

   None, having changed nothing, wherever put_encoded would do anything else than append this record
   into this segment: a body or properties that are not bytes or past the bounds test of put_encoded
   (the validators say why), properties the record validator refuses (check_encoded), a born time
   or sys flag put_encoded refuses, a topic with no queue to write, a record that does not fit in
   the rest of the segment (the caller's Python path ends the segment and rolls), keys that index
   nothing. The caller then puts it through put_encoded. Never releases the GIL. */

#define PY_SSIZE_T_CLEAN
#include "accel.h"

#define BLANK_MIN 8
#define TAIL_LEN 20                   /* codec.RECORD_CRC_TAIL_LEN: "__CRC32#\x01" + 10 digits + "\x02" */
#define PROPERTIES_MAX 32767
#define USER_PROPERTIES_MAX (PROPERTIES_MAX - TAIL_LEN)

static const char MARK[] = "__CRC32#\x01";

static PyObject *s_mapping, *s_wrote_pos, *s_size, *s_start_offset, *s_last_ts;

/* the last value of property ``name`` in checked properties: its place, or NULL */
static const unsigned char *value_at(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t nl,
                                     Py_ssize_t *len) {
    const unsigned char *found = NULL;
    Py_ssize_t a = 0;
    while (a < n) {
        const unsigned char *e = memchr(p + a, 2, (size_t)(n - a));
        Py_ssize_t b = e - p;
        if (b - a > nl && memcmp(p + a, name, (size_t)nl) == 0 && p[a + nl] == 1) {
            found = p + a + nl + 1;
            *len = b - (a + nl + 1);
        }
        a = b + 1;
    }
    return found;
}

/* an exact int attribute of ``o``; 0 or -1 (exception set) */
static int attr_i64(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = exact_i64(v, out);
    Py_DECREF(v);
    return r;
}

/* a message's exact int within [lo, hi]: 1, or 0 (not one: put_encoded refuses it; no exception left) */
static int field_ok(PyObject *o, long long lo, long long hi, long long *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int over = 0;
    *out = PyLong_AsLongLongAndOverflow(o, &over);
    if (over || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return *out >= lo && *out <= hi;
}

PyObject *py_put_one(PyObject *self, PyObject *args) {
    PyObject *t, *body, *props, *mf, *born_obj, *sys_obj, *reserved;
    Py_buffer bhost, shost, map = {0};
    long long now_ms;
    int index;
    Py_ssize_t max_body, max_record;
    if (!PyArg_ParseTuple(args, "OOOOOy*OLy*pOnn:put_one", &t, &body, &props, &mf, &born_obj, &bhost, &sys_obj,
                          &now_ms, &shost, &index, &reserved, &max_body, &max_record))
        return NULL;
    PyObject *result = NULL, *units = NULL, *items = NULL, *next = NULL, *wrote = NULL, *now = NULL, *phys_o = NULL,
             *end_o = NULL, *qoff_o = NULL, *entry = NULL, *cq = NULL;
    topic_cur cur = {0};
    int have_map = 0;
    if (bhost.len != 8 || shost.len != 8) {
        PyErr_SetString(PyExc_ValueError, "put_one: hosts are 8 bytes");
        goto done;
    }
    if (!accel_reserved_ok(reserved, "put_one")) goto done;
    /* put_encoded's bounds test, its born fields, then the record validator: any doubt declines */
    if (!PyBytes_CheckExact(body) || !PyBytes_CheckExact(props)) goto decline;
    const unsigned char *bp = (const unsigned char *)PyBytes_AS_STRING(body),
                        *pp = (const unsigned char *)PyBytes_AS_STRING(props);
    Py_ssize_t bl = PyBytes_GET_SIZE(body), pl = PyBytes_GET_SIZE(props);
    long long born = 0, sys_flag = 0;
    if (born_obj != Py_None && !field_ok(born_obj, INT64_MIN, INT64_MAX, &born)) goto decline;
    if (!field_ok(sys_obj, INT32_MIN, INT32_MAX, &sys_flag)) goto decline;
    if (born == 0) born = now_ms;                     /* (born_ms or now) */
    if (bl > max_body || pl > USER_PROPERTIES_MAX) goto decline;
    Py_ssize_t at = 0, alen = 0;
    if (pl && accel_check_props(pp, pl, reserved, &at, &alen)) goto decline;
    Py_ssize_t lt = 0, li = 0, lk = 0;
    const unsigned char *tags = value_at(pp, pl, "TAGS", 4, &lt), *uniq = value_at(pp, pl, "UNIQ_KEY", 8, &li),
                        *keys = value_at(pp, pl, "KEYS", 4, &lk);
    if (tags == NULL) lt = 0;
    if (uniq == NULL) li = 0;
    if (keys == NULL) lk = 0;
    uint32_t th = 0;
    if (lt) accel_utf8_ok(tags, lt, &th);             /* (checked above: the hash only) */
    /* the topic: its queue round-robin, the queue's next offset */
    if (topic_load(&cur, t) < 0) goto decline_error;
    Py_ssize_t tl = PyBytes_GET_SIZE(cur.name), PL = pl + TAIL_LEN;
    if (max_record < 0 || bl > max_record - FIXED_OVERHEAD - TAIL_LEN - tl - pl)     /* the record too large */
        goto decline;                                 /* (a negative bound: the difference could overflow) */
    long long qid, qoff;
    if (next_queue(&cur, &qid) < 0) goto decline_error;
    /* (the queue held, the offset read now: the attribute reads and sets below may run a caller's code that
       changes the topic's lists) */
    cq = PyList_GET_ITEM(cur.queues, qid);
    Py_INCREF(cq);
    if (exact_i64(PyList_GET_ITEM(cur.offsets, qid), &qoff) < 0) goto decline_error;
    if (qoff < 0 || qoff == INT64_MAX) goto decline;
    /* the segment: the record at wrote_pos, if it fits before the room kept for a BLANK */
    long long pos, size, start;
    if (attr_i64(mf, s_wrote_pos, &pos) < 0 || attr_i64(mf, s_size, &size) < 0 ||
        attr_i64(mf, s_start_offset, &start) < 0)
        goto done;
    Py_ssize_t n = FIXED_OVERHEAD + bl + tl + PL;
    if (pos < 0 || start < 0 || size < 0 || n > size - BLANK_MIN - pos) goto decline;   /* a roll: Python's */
    PyObject *mapping = PyObject_GetAttr(mf, s_mapping);
    if (mapping == NULL) goto done;
    int got = PyObject_GetBuffer(mapping, &map, PyBUF_WRITABLE);
    Py_DECREF(mapping);
    if (got < 0) goto done;
    have_map = 1;
    if (pos + n > map.len || start > INT64_MAX - size) {
        PyErr_SetString(PyExc_ValueError, "put_one: the segment's mapping is shorter than its size");
        goto done;
    }
    long long phys = start + pos;
    /* what the dispatch needs: built before anything changes */
    unsigned char unit[UNIT_SIZE];
    be64(unit, (uint64_t)phys);
    be32(unit + 8, (uint32_t)n);
    be64(unit + 12, (uint64_t)(int64_t)(int32_t)th);
    units = PyDict_New();
    items = PyByteArray_FromStringAndSize(NULL, 0);
    if (units == NULL || items == NULL || add_unit(units, cq, qoff, unit) < 0) goto done;
    if (index && (lk || li)) {
        uint32_t prefix = crc32_of(crc32_of(0, (const unsigned char *)PyBytes_AS_STRING(cur.name), (size_t)tl),
                                   (const unsigned char *)"#", 1);
        if (add_index_items(items, prefix, keys, lk, uniq, li, phys) < 0) goto done;
        if (PyByteArray_GET_SIZE(items) == 0) goto decline;       /* keys of spaces only: put_encoded's way */
    }
    next = PyLong_FromLongLong(qoff + 1);
    wrote = PyLong_FromLongLong(pos + n);
    now = PyLong_FromLongLong(now_ms);
    phys_o = PyLong_FromLongLong(phys);
    end_o = PyLong_FromLongLong(phys + n);
    qoff_o = PyLong_FromLongLong(qoff);
    if (!next || !wrote || !now || !phys_o || !end_o || !qoff_o) goto done;
    entry = PyTuple_Pack(5, units, items, now, phys_o, end_o);
    if (entry == NULL) goto done;
    result = PyTuple_Pack(2, entry, qoff_o);
    if (result == NULL) goto done;
    /* the record: nothing below fails but a set of an attribute (slots of ours: never) */
    unsigned char *r = (unsigned char *)map.buf + pos;
    header_t h = {(uint32_t)n, crc32_of(0, bp, (size_t)bl) & 0x7FFFFFFF, (uint32_t)qid, 0, (uint32_t)sys_flag, 0,
                  (uint32_t)bl, qoff, phys, born, now_ms, 0, (const unsigned char *)bhost.buf,
                  (const unsigned char *)shost.buf};
    write_head(r, &h, bp);
    unsigned char *q = r + OFF_BODY + bl;
    q[0] = (unsigned char)tl;
    memcpy(q + 1, PyBytes_AS_STRING(cur.name), (size_t)tl);
    q[1 + tl] = (unsigned char)(PL >> 8);
    q[2 + tl] = (unsigned char)PL;
    memcpy(q + 3 + tl, pp, (size_t)pl);
    memcpy(q + 3 + tl + pl, MARK, sizeof MARK - 1);
    q[3 + tl + PL - 1] = 2;
    uint32_t tcrc = crc32_of(0, q, (size_t)(3 + tl + PL - CRC_DIGITS_BACK));
    digits10(r + n - CRC_DIGITS_BACK, crc32_of(tcrc, r, OFF_BODY));
    if (PyObject_SetAttr(mf, s_wrote_pos, wrote) < 0 || PyObject_SetAttr(mf, s_last_ts, now) < 0) goto fail;
    cur.rr++;
    if (topic_flush(&cur) < 0) goto fail;
    int set = PyList_SetItem(cur.offsets, qid, next);  /* steals next (also when the list got shorter: an IndexError) */
    next = NULL;
    if (set < 0) goto fail;
    goto done;
fail:
    Py_CLEAR(result);
    goto done;
decline_error:
    PyErr_Clear();                /* (put_encoded meets it again and says what it is) */
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    topic_clear(&cur);
    if (have_map) PyBuffer_Release(&map);
    Py_XDECREF(units);
    Py_XDECREF(items);
    Py_XDECREF(next);
    Py_XDECREF(wrote);
    Py_XDECREF(now);
    Py_XDECREF(phys_o);
    Py_XDECREF(end_o);
    Py_XDECREF(qoff_o);
    Py_XDECREF(entry);
    Py_XDECREF(cq);
    PyBuffer_Release(&bhost);
    PyBuffer_Release(&shost);
    return result;
}

int accel_put_one_init(void) {
    s_mapping = PyUnicode_InternFromString("mapping");
    s_wrote_pos = PyUnicode_InternFromString("wrote_pos");
    s_size = PyUnicode_InternFromString("size");
    s_start_offset = PyUnicode_InternFromString("start_offset");
    s_last_ts = PyUnicode_InternFromString("last_store_timestamp_ms");
    return s_mapping && s_wrote_pos && s_size && s_start_offset && s_last_ts ? 0 : -1;
}
