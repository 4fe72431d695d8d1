/* tidemq._accel: the write path: append, append_slices, index_put, index_put_hashed (the record layout and the list of functions: accel.h) */

#include "accel.h"

/* ------------------------------------------------------------------------------------ append() */

static PyObject *s_rr, *s_queue_count, *s_next_offsets, *s_queues, *s_name_bytes, *s_write_ids, *s_start, *s_step;

static int as_i64(PyObject *o, long long *out) {
    return exact_i64(o, out);         /* an int: no caller's __index__ runs inside a loop over its lists */
}
static int as_i32(PyObject *o, long long *out) {
    if (as_i64(o, out) < 0) return -1;
    if (*out < INT32_MIN || *out > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a 32-bit field out of range");
        return -1;
    }
    return 0;
}

void topic_clear(topic_cur *c) {
    Py_CLEAR(c->offsets);
    Py_CLEAR(c->queues);
    Py_CLEAR(c->name);
    Py_CLEAR(c->ids);
    c->t = NULL;
}

/* write back the round-robin counter; 0 or -1 (exception set) */
int topic_flush(topic_cur *c) {
    if (c->t == NULL) return 0;
    PyObject *v = PyLong_FromLongLong(c->rr);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(c->t, s_rr, v);
    Py_DECREF(v);
    return r;
}

/* the topic's write_ids (the queues a put without a queue id goes to, round-robin): a range read as
   start + step * j, anything else as a list or tuple; 0 or -1 (exception set) */
static int ids_load(topic_cur *c, PyObject *t) {
    PyObject *w = PyObject_GetAttr(t, s_write_ids);
    if (w == NULL) return -1;
    int r = -1;
    if (PyRange_Check(w)) {
        PyObject *a = PyObject_GetAttr(w, s_start), *b = PyObject_GetAttr(w, s_step);
        c->nids = PyObject_Size(w);
        if (a != NULL && b != NULL && c->nids >= 0 && as_i64(a, &c->id_start) == 0 && as_i64(b, &c->id_step) == 0)
            r = 0;
        Py_XDECREF(a);
        Py_XDECREF(b);
    } else {
        c->ids = PySequence_Fast(w, "write_ids must be a range, list or tuple of queue ids");
        if (c->ids != NULL) {
            c->nids = PySequence_Fast_GET_SIZE(c->ids);
            r = 0;
        }
    }
    Py_DECREF(w);
    return r;
}

int topic_load(topic_cur *c, PyObject *t) {
    if (topic_flush(c) < 0) return -1;
    topic_clear(c);
    PyObject *rr = PyObject_GetAttr(t, s_rr);
    if (rr == NULL) return -1;
    int bad = as_i64(rr, &c->rr);
    Py_DECREF(rr);
    if (bad < 0) return -1;
    PyObject *qc = PyObject_GetAttr(t, s_queue_count);
    if (qc == NULL) return -1;
    long long q;
    bad = as_i64(qc, &q);
    Py_DECREF(qc);
    if (bad < 0) return -1;
    if (q <= 0 || q > (1LL << 31)) {
        PyErr_SetString(PyExc_ValueError, "topic state: queue_count out of range");
        return -1;
    }
    c->qc = (Py_ssize_t)q;
    c->offsets = PyObject_GetAttr(t, s_next_offsets);
    c->queues = PyObject_GetAttr(t, s_queues);
    c->name = PyObject_GetAttr(t, s_name_bytes);
    if (c->offsets == NULL || c->queues == NULL || c->name == NULL || ids_load(c, t) < 0) return -1;
    if (!PyList_Check(c->offsets) || !PyList_Check(c->queues) || !PyBytes_Check(c->name) ||
        PyList_GET_SIZE(c->offsets) < c->qc || PyList_GET_SIZE(c->queues) < c->qc || c->qc <= 0 ||
        PyBytes_GET_SIZE(c->name) > 255) {
        PyErr_SetString(PyExc_TypeError, "topic state: next_offsets / queues / name_bytes of the wrong shape");
        return -1;
    }
    c->t = t;
    return 0;
}

/* units: {consume queue: [first queue offset, bytearray of units]}; appends one unit */
int add_unit(PyObject *units, PyObject *cq, long long qoff, const unsigned char *unit) {
    PyObject *u = PyDict_GetItemWithError(units, cq);
    if (u == NULL) {
        if (PyErr_Occurred()) return -1;
        PyObject *first = PyLong_FromLongLong(qoff);
        PyObject *ba = PyByteArray_FromStringAndSize((const char *)unit, UNIT_SIZE);
        PyObject *pair = (first && ba) ? PyList_New(2) : NULL;
        if (pair == NULL) {
            Py_XDECREF(first);
            Py_XDECREF(ba);
            return -1;
        }
        PyList_SET_ITEM(pair, 0, first);
        PyList_SET_ITEM(pair, 1, ba);
        int r = PyDict_SetItem(units, cq, pair);
        Py_DECREF(pair);
        return r;
    }
    PyObject *ba = PyList_GET_ITEM(u, 1);
    Py_ssize_t n = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, n + UNIT_SIZE) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(ba) + n, unit, UNIT_SIZE);
    return 0;
}

/* the queue a put without a queue id goes to: the next of the topic's write_ids, round-robin
   (the counter moves only when the record goes in); 0, or -1 (exception set) */
int next_queue(topic_cur *c, long long *qid) {
    if (c->nids <= 0) {
        PyErr_SetString(PyExc_ValueError, "the topic has no queue to write (empty write_ids)");
        return -1;
    }
    Py_ssize_t j = (Py_ssize_t)(((c->rr % c->nids) + c->nids) % c->nids);        /* 0 <= j < nids */
    if (c->ids == NULL) {
        if (c->id_start < -(1LL << 40) || c->id_start > (1LL << 40) || c->id_step < -(1LL << 20) ||
            c->id_step > (1LL << 20)) {
            PyErr_SetString(PyExc_ValueError, "write_ids: a range out of bounds");
            return -1;
        }
        *qid = c->id_start + c->id_step * j;
    } else if (as_i64(PySequence_Fast_GET_ITEM(c->ids, j), qid) < 0) {
        return -1;
    }
    if (*qid < 0 || *qid >= c->qc) {
        PyErr_SetString(PyExc_ValueError, "queue id outside the topic's queues");
        return -1;
    }
    return 0;
}

/* the 88-byte header at r, then the body after it */
void write_head(unsigned char *r, const header_t *h, const unsigned char *body) {
    be32(r, h->size);
    be32(r + 4, MAGIC_U32);
    be32(r + 8, h->body_crc);
    be32(r + 12, h->queue_id);
    be32(r + 16, h->flag);
    be64(r + 20, (uint64_t)h->queue_offset);
    be64(r + 28, (uint64_t)h->phys);
    be32(r + 36, h->sys_flag);
    be64(r + 40, (uint64_t)h->born_ts);
    memcpy(r + 48, h->born_host, 8);
    be64(r + 56, (uint64_t)h->store_ts);
    memcpy(r + 64, h->store_host, 8);
    be32(r + 72, h->reconsume);
    be64(r + 76, (uint64_t)h->prep_tx);
    be32(r + 84, h->body_len);
    memcpy(r + OFF_BODY, body, h->body_len);
}

/* the exception an item raised, taken out of the error indicator (the loop's caller says why) */
static PyObject *take_error(void) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    Py_XDECREF(et);
    Py_XDECREF(tb);
    return ev;
}

/* append(batch, start, buf, pos, limit, base, now_ms, store_host, units, index_items,
          res_phys, res_size, res_qid, res_qoff, res_uniq) -> (next, pos, error)

   Packs batch[start:] (commit_log.Prepared tuples) into ``buf`` from ``pos`` while a record
   ends at or before ``limit``; returns where it stopped: the index of the first item not packed
   (len(batch): all), the position after the last record packed, and None, or the exception that
   stopped it at that item (nothing of that item is written). Per item packed: its queue id
   (round-robin over the topic's write_ids when None) and queue offset taken from its TopicState,
   the record written and sealed with its record CRC, its unit added to ``units``, (index keys,
   physical offset) to ``index_items`` when it has keys, and at its message index i (item[0]):
   res_phys[i] (int64), res_size[i] (int32), res_qid[i] (int32), res_qoff[i] (int64) and
   res_uniq[i] (a list) set. */
PyObject *py_append(PyObject *self, PyObject *args) {
    PyObject *batch, *units, *index_items, *res_uniq;
    Py_ssize_t start, pos, limit;
    long long base, now_ms;
    Py_buffer buf, host, rphys, rsize, rqid, rqoff;
    if (!PyArg_ParseTuple(args, "O!nw*nnLLy*O!O!w*w*w*w*O!:append", &PyList_Type, &batch, &start, &buf, &pos,
                          &limit, &base, &now_ms, &host, &PyDict_Type, &units, &PyList_Type, &index_items,
                          &rphys, &rsize, &rqid, &rqoff, &PyList_Type, &res_uniq))
        return NULL;
    PyObject *error = NULL, *result = NULL;
    topic_cur cur = {0};
    Py_ssize_t nres = PyList_GET_SIZE(res_uniq);
    int64_t *o_phys = (int64_t *)rphys.buf, *o_qoff = (int64_t *)rqoff.buf;
    int32_t *o_size = (int32_t *)rsize.buf, *o_qid = (int32_t *)rqid.buf;
    unsigned char *b = (unsigned char *)buf.buf;
    Py_ssize_t k = start, nb = PyList_GET_SIZE(batch);
    if (host.len != 8 || rphys.len < nres * 8 || rqoff.len < nres * 8 || rsize.len < nres * 4 ||
        rqid.len < nres * 4 || limit > buf.len || pos < 0 || pos > limit || start < 0 || base < 0 ||
        base > INT64_MAX - buf.len) {
        PyErr_SetString(PyExc_ValueError, "append: buffers of the wrong size");
        goto done;
    }
    for (; k < nb && k < PyList_GET_SIZE(batch); k++) {
        PyObject *it = PyList_GET_ITEM(batch, k);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 16) {
            PyErr_SetString(PyExc_TypeError, "a prepared message must be a tuple of 16 fields");
            goto item_error;
        }
        PyObject **f = &PyTuple_GET_ITEM(it, 0);
        long long i;
        if (as_i64(f[0], &i) < 0) goto item_error;
        if (i < 0 || i >= nres || i >= PyList_GET_SIZE(res_uniq)) {
            PyErr_SetString(PyExc_IndexError, "message index outside the results");
            goto item_error;
        }
        PyObject *body = f[1], *t = f[2], *props = f[3], *bh = f[6];
        if (!PyBytes_Check(body) || !PyBytes_Check(props) || !PyBytes_Check(bh) || PyBytes_GET_SIZE(bh) != 8) {
            PyErr_SetString(PyExc_TypeError, "body, properties and born host must be bytes (8 for the host)");
            goto item_error;
        }
        if (t != cur.t && topic_load(&cur, t) < 0) goto item_error;
        Py_ssize_t bl = PyBytes_GET_SIZE(body), tl = PyBytes_GET_SIZE(cur.name), pl = PyBytes_GET_SIZE(props);
        Py_ssize_t n = FIXED_OVERHEAD + bl + tl + pl;
        if (pl < CRC_DIGITS_BACK || pl > 32767 || bl > INT32_MAX - 1024) {
            PyErr_SetString(PyExc_ValueError, "properties must end with the record-CRC tail and fit 32767 bytes");
            goto item_error;
        }
        if (n > limit - pos) break;                         /* the caller ends the segment here */
        long long born_ts, flag, sys_flag, reconsume, prep_tx, crc, th, tcrc = -1, qid;
        if (as_i64(f[5], &born_ts) < 0 || as_i32(f[7], &flag) < 0 || as_i32(f[8], &sys_flag) < 0 ||
            as_i32(f[9], &reconsume) < 0 || as_i64(f[10], &prep_tx) < 0 || as_i64(f[12], &th) < 0 ||
            (f[15] != Py_None && as_i64(f[15], &tcrc) < 0))
            goto item_error;
        const unsigned char *bp = (const unsigned char *)PyBytes_AS_STRING(body);
        if (f[11] == Py_None) {
            crc = crc32_of(0, bp, (size_t)bl) & 0x7FFFFFFF;
        } else if (as_i64(f[11], &crc) < 0) {
            goto item_error;
        }
        if (f[4] == Py_None) {            /* round-robin over the topic's write_ids */
            if (next_queue(&cur, &qid) < 0) goto item_error;
            cur.rr++;
        } else {
            if (as_i64(f[4], &qid) < 0) goto item_error;
            if (qid < 0 || qid >= cur.qc) {
                PyErr_SetString(PyExc_ValueError, "queue id outside the topic's queues");
                goto item_error;
            }
        }
        long long qoff;
        PyObject *cq = PyList_GetItem(cur.queues, qid), *at = PyList_GetItem(cur.offsets, qid);
        if (cq == NULL || at == NULL || as_i64(at, &qoff) < 0) goto item_error;
        if (qoff < 0 || qoff == INT64_MAX) {
            PyErr_SetString(PyExc_ValueError, "a queue offset out of range");
            goto item_error;
        }
        PyObject *next = PyLong_FromLongLong(qoff + 1);
        if (next == NULL) goto item_error;
        unsigned char unit[UNIT_SIZE];
        long long phys = base + pos;
        be64(unit, (uint64_t)phys);
        be32(unit + 8, (uint32_t)n);
        be64(unit + 12, (uint64_t)th);
        Py_ssize_t nidx = PyList_GET_SIZE(index_items);
        if (f[13] != Py_None) {            /* (index keys, physical offset): first, undone on a failure */
            PyObject *ph = PyLong_FromLongLong(phys);
            PyObject *pair = ph ? PyTuple_Pack(2, f[13], ph) : NULL;
            Py_XDECREF(ph);
            int bad = pair ? PyList_Append(index_items, pair) : -1;
            Py_XDECREF(pair);
            if (bad < 0) {
                Py_DECREF(next);
                goto item_error;
            }
        }
        Py_INCREF(cq);
        int bad = add_unit(units, cq, qoff, unit);
        Py_DECREF(cq);
        if (bad < 0) {
            PyList_SetSlice(index_items, nidx, PyList_GET_SIZE(index_items), NULL);
            Py_DECREF(next);
            goto item_error;
        }
        /* nothing can fail from here on: the record goes in */
        if (PyList_SetItem(cur.offsets, qid, next) < 0) goto item_error;      /* steals next */
        unsigned char *r = b + pos;
        header_t h = {(uint32_t)n, (uint32_t)crc, (uint32_t)qid, (uint32_t)flag, (uint32_t)sys_flag,
                      (uint32_t)reconsume, (uint32_t)bl, qoff, phys, born_ts, now_ms, prep_tx,
                      (const unsigned char *)PyBytes_AS_STRING(bh), (const unsigned char *)host.buf};
        write_head(r, &h, bp);
        unsigned char *q = r + OFF_BODY + bl;
        q[0] = (unsigned char)tl;
        memcpy(q + 1, PyBytes_AS_STRING(cur.name), (size_t)tl);
        q[1 + tl] = (unsigned char)(pl >> 8);
        q[2 + tl] = (unsigned char)pl;
        memcpy(q + 3 + tl, PyBytes_AS_STRING(props), (size_t)pl);
        if (f[15] == Py_None)            /* the tail's CRC: TOPICLEN up to the digits */
            tcrc = crc32_of(0, q, (size_t)(3 + tl + pl - CRC_DIGITS_BACK));
        digits10(r + n - CRC_DIGITS_BACK, crc32_of((uint32_t)tcrc, r, OFF_BODY));
        memcpy(o_phys + i, &phys, 8);
        int32_t n32 = (int32_t)n, q32 = (int32_t)qid;
        memcpy(o_size + i, &n32, 4);
        memcpy(o_qid + i, &q32, 4);
        memcpy(o_qoff + i, &qoff, 8);
        PyObject *uq = f[14];
        Py_INCREF(uq);
        PyList_SetItem(res_uniq, i, uq);
        pos += n;
        continue;
    item_error:
        error = take_error();
        break;
    }
    if (topic_flush(&cur) < 0) goto done;
    result = Py_BuildValue("nnO", k, pos, error ? error : Py_None);
done:
    topic_clear(&cur);
    Py_XDECREF(error);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&host);
    PyBuffer_Release(&rphys);
    PyBuffer_Release(&rsize);
    PyBuffer_Release(&rqid);
    PyBuffer_Release(&rqoff);
    return result;
}



/* ----------------------------------------------------------------------------- append_slices() */

#define SLICE_FIELDS 10         /* per message: offsets of id, tags, keys, properties, body; their lengths */
#define INDEX_ITEM 12           /* an index item of index_items: uint32 key hash, int64 physical offset (native) */

static const char UNIQ_PROP[] = "UNIQ_KEY\x01", CRC_TAIL[] = "__CRC32#\x01" "0000000000" "\x02";

/* appends one (hash, phys) index item to index_items; 0 or -1 */
static int add_index_item(PyObject *out, uint32_t hash, int64_t phys) {
    Py_ssize_t n = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, n + INDEX_ITEM) < 0) return -1;
    char *p = PyByteArray_AS_STRING(out) + n;
    memcpy(p, &hash, 4);
    memcpy(p + 4, &phys, 8);
    return 0;
}

/* the index items of one message: crc32(prefix + key) & 0x7FFFFFFF for each key (keys separated
   by single spaces), then for its unique key (the id), as dispatch.index_keys orders them */
int add_index_items(PyObject *out, uint32_t prefix_crc, const unsigned char *ks, Py_ssize_t lk,
                           const unsigned char *id, Py_ssize_t li, int64_t phys) {
    Py_ssize_t a = 0;
    while (a < lk) {
        const unsigned char *sp = memchr(ks + a, ' ', (size_t)(lk - a));
        Py_ssize_t e = sp ? sp - ks : lk;
        if (e > a && add_index_item(out, crc32_of(prefix_crc, ks + a, (size_t)(e - a)) & 0x7FFFFFFF, phys) < 0)
            return -1;
        a = e + 1;
    }
    return li > 0 ? add_index_item(out, crc32_of(prefix_crc, id, (size_t)li) & 0x7FFFFFFF, phys) : 0;
}

/* append_slices(data, fields, order, start, tags_hashes, buf, pos, limit, base, now_ms, store_host, t,
                 extra, units, index_items, index_prefix_crc, res_phys, res_size, res_qid, res_qoff,
                 born_ms, born_host, sys_flag)
       -> (next, pos, error)

   record_loop.append for messages given as slices of one buffer (writer.put_slices): message
   i = order[k] (int64) for k from ``start`` is the record of topic ``t`` (its TopicState; queue
   round-robin over its write_ids) with the body, born timestamp born_ms, born host born_host (8 bytes),
   sys flag sys_flag, flag, reconsume times and transaction offset 0, and the properties: its user properties,
   UNIQ_KEY = its id, ``extra`` (bytes), TAGS and KEYS when it has them, the record-CRC tail. Its
   fields are fields[10 i .. 10 i + 9] (uint32: offsets in ``data`` of id, tags, keys, properties,
   body, then their lengths); tags_hashes[i] (int64) goes into its unit. With index_prefix_crc >= 0
   (crc32 of b"<topic>#"), its index items (12 bytes: uint32 hash, int64 physical offset) are
   appended to ``index_items``. Returns as append does. */
PyObject *py_append_slices(PyObject *self, PyObject *args) {
    Py_buffer data, fields, order, ths, buf, host, extra, rphys, rsize, rqid, rqoff, bhost;
    Py_ssize_t start, pos, limit;
    long long base, now_ms, prefix_crc, born_ms;
    int sys_flag;
    PyObject *t, *units, *index_items;
    if (!PyArg_ParseTuple(args, "y*y*y*ny*w*nnLLy*Oy*O!O!Lw*w*w*w*Ly*i:append_slices", &data, &fields, &order,
                          &start, &ths, &buf, &pos, &limit, &base, &now_ms, &host, &t, &extra, &PyDict_Type, &units,
                          &PyByteArray_Type, &index_items, &prefix_crc, &rphys, &rsize, &rqid, &rqoff, &born_ms,
                          &bhost, &sys_flag))
        return NULL;
    PyObject *error = NULL, *result = NULL;
    topic_cur cur = {0};
    Py_ssize_t nmsg = fields.len / (4 * SLICE_FIELDS), norder = order.len / 8, k = start;
    const uint32_t *F = fields.buf;
    const int64_t *O = order.buf, *TH = ths.buf;
    const unsigned char *d = data.buf, *ex = extra.buf;
    int64_t *o_phys = (int64_t *)rphys.buf, *o_qoff = (int64_t *)rqoff.buf;
    int32_t *o_size = (int32_t *)rsize.buf, *o_qid = (int32_t *)rqid.buf;
    unsigned char *b = (unsigned char *)buf.buf;
    Py_ssize_t fixed_pl = (Py_ssize_t)(sizeof UNIQ_PROP - 1) + 1 + extra.len + (Py_ssize_t)(sizeof CRC_TAIL - 1);
    if (host.len != 8 || bhost.len != 8 || fields.len % (4 * SLICE_FIELDS) != 0 || order.len % 8 != 0 || ths.len != 8 * nmsg ||
        rphys.len < nmsg * 8 || rqoff.len < nmsg * 8 || rsize.len < nmsg * 4 || rqid.len < nmsg * 4 ||
        limit > buf.len || pos < 0 || pos > limit || start < 0 || base < 0 || base > INT64_MAX - buf.len ||
        extra.len > 32767 || prefix_crc > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "append_slices: buffers of the wrong size");
        goto done;
    }
    if (topic_load(&cur, t) < 0) goto done;
    Py_ssize_t tl = PyBytes_GET_SIZE(cur.name);
    for (; k < norder; k++) {
        int64_t i = ld_i64(O, k);
        if (i < 0 || i >= nmsg) {
            PyErr_SetString(PyExc_IndexError, "message index outside the fields");
            goto item_error;
        }
        uint32_t f[SLICE_FIELDS];
        memcpy(f, F + SLICE_FIELDS * i, sizeof f);
        for (int j = 0; j < 5; j++) {
            if ((Py_ssize_t)f[j] + (Py_ssize_t)f[5 + j] > data.len) {
                PyErr_SetString(PyExc_ValueError, "a field outside the data");
                goto item_error;
            }
        }
        Py_ssize_t li = f[5], lt = f[6], lk = f[7], lp = f[8], lb = f[9];
        Py_ssize_t pl = lp + li + fixed_pl + (lt ? 6 + lt : 0) + (lk ? 6 + lk : 0);
        if (pl > 32767 || lb > INT32_MAX - 1024 - pl) {
            PyErr_SetString(PyExc_ValueError, "properties must fit 32767 bytes");
            goto item_error;
        }
        Py_ssize_t n = FIXED_OVERHEAD + lb + tl + pl;
        if (n > limit - pos) break;                         /* the caller ends the segment here */
        long long qid, qoff;
        if (next_queue(&cur, &qid) < 0) goto item_error;
        PyObject *at = PyList_GetItem(cur.offsets, qid), *cq = PyList_GetItem(cur.queues, qid);
        if (at == NULL || cq == NULL || as_i64(at, &qoff) < 0) goto item_error;
        if (qoff < 0 || qoff == INT64_MAX) {
            PyErr_SetString(PyExc_ValueError, "a queue offset out of range");
            goto item_error;
        }
        PyObject *next = PyLong_FromLongLong(qoff + 1);
        if (next == NULL) goto item_error;
        const unsigned char *id = d + f[0], *tg = d + f[1], *ks = d + f[2], *ps = d + f[3], *bp = d + f[4];
        long long phys = base + pos;
        Py_ssize_t nidx = PyByteArray_GET_SIZE(index_items);
        if (prefix_crc >= 0 && add_index_items(index_items, (uint32_t)prefix_crc, ks, lk, id, li, phys) < 0) {
            Py_DECREF(next);
            goto item_error;
        }
        unsigned char unit[UNIT_SIZE];
        be64(unit, (uint64_t)phys);
        be32(unit + 8, (uint32_t)n);
        be64(unit + 12, (uint64_t)ld_i64(TH, i));
        Py_INCREF(cq);
        int bad = add_unit(units, cq, qoff, unit);
        Py_DECREF(cq);
        if (bad < 0) {
            PyByteArray_Resize(index_items, nidx);
            Py_DECREF(next);
            goto item_error;
        }
        /* nothing can fail from here on: the record goes in */
        if (PyList_SetItem(cur.offsets, qid, next) < 0) goto item_error;      /* steals next */
        cur.rr++;
        unsigned char *r = b + pos;
        header_t h = {(uint32_t)n, crc32_of(0, bp, (size_t)lb) & 0x7FFFFFFF, (uint32_t)qid, 0, (uint32_t)sys_flag, 0,
                      (uint32_t)lb, qoff, phys, born_ms, now_ms, 0, (const unsigned char *)bhost.buf,
                      (const unsigned char *)host.buf};
        write_head(r, &h, bp);
        unsigned char *q = r + OFF_BODY + lb, *p;
        q[0] = (unsigned char)tl;
        memcpy(q + 1, PyBytes_AS_STRING(cur.name), (size_t)tl);
        q[1 + tl] = (unsigned char)(pl >> 8);
        q[2 + tl] = (unsigned char)pl;
        p = q + 3 + tl;
        memcpy(p, ps, (size_t)lp); p += lp;
        memcpy(p, UNIQ_PROP, sizeof UNIQ_PROP - 1); p += sizeof UNIQ_PROP - 1;
        memcpy(p, id, (size_t)li); p += li;
        *p++ = 2;
        memcpy(p, ex, (size_t)extra.len); p += extra.len;
        if (lt) {
            memcpy(p, "TAGS\x01", 5); p += 5;
            memcpy(p, tg, (size_t)lt); p += lt;
            *p++ = 2;
        }
        if (lk) {
            memcpy(p, "KEYS\x01", 5); p += 5;
            memcpy(p, ks, (size_t)lk); p += lk;
            *p++ = 2;
        }
        memcpy(p, CRC_TAIL, sizeof CRC_TAIL - 1);
        uint32_t tcrc = crc32_of(0, q, (size_t)(3 + tl + pl - CRC_DIGITS_BACK));
        digits10(r + n - CRC_DIGITS_BACK, crc32_of(tcrc, r, OFF_BODY));
        memcpy(o_phys + i, &phys, 8);
        int32_t n32 = (int32_t)n, q32 = (int32_t)qid;
        memcpy(o_size + i, &n32, 4);
        memcpy(o_qid + i, &q32, 4);
        memcpy(o_qoff + i, &qoff, 8);
        pos += n;
        continue;
    item_error:
        error = take_error();
        break;
    }
    if (topic_flush(&cur) < 0) goto done;
    result = Py_BuildValue("nnO", k, pos, error ? error : Py_None);
done:
    topic_clear(&cur);
    Py_XDECREF(error);
    PyBuffer_Release(&data);
    PyBuffer_Release(&fields);
    PyBuffer_Release(&order);
    PyBuffer_Release(&ths);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&host);
    PyBuffer_Release(&extra);
    PyBuffer_Release(&rphys);
    PyBuffer_Release(&rsize);
    PyBuffer_Release(&rqid);
    PyBuffer_Release(&rqoff);
    PyBuffer_Release(&bhost);
    return result;
}

/* --------------------------------------------------------------------------------- index_put() */

/* entry ``count`` of an index file (buf: the file's mapping; the entries from ``at``): hash, physical
   offset, diff_s, and the entry the slot named before (``slot_was``: its 4 bytes, when it names one
   before this one, else 0). The slot itself is the caller's to write (index_put_slots: by pwrite) */
void accel_index_entry(unsigned char *b, Py_ssize_t at, Py_ssize_t count, uint32_t h, int64_t phys,
                       long long diff_s, const unsigned char *slot_was) {
    int64_t prev = (int32_t)rd32(slot_was);
    if (prev < 0 || prev >= count) prev = 0;
    unsigned char *e = b + at + count * 20;
    be32(e, h);
    be64(e + 4, (uint64_t)phys);
    be32(e + 12, (uint32_t)diff_s);
    be32(e + 16, (uint32_t)prev);
}

/* entry ``count`` of an index file (the slots from byte 40), then its slot names it */
static void put_entry(unsigned char *b, Py_ssize_t slots, Py_ssize_t at, Py_ssize_t count, uint32_t h, int64_t phys,
                      long long diff_s) {
    unsigned char *slot = b + 40 + (h % (uint32_t)slots) * 4;
    accel_index_entry(b, at, count, h, phys, diff_s, slot);
    be32(slot, (uint32_t)count);
}

/* whether entries count .. count + (end - start) - 1 of a file of ``len`` bytes with ``slots`` slots
   and its entries from ``at`` lie within it (each number checked alone first: no product or sum of
   a caller's numbers can overflow); ValueError naming ``who`` otherwise */
static int index_shape_ok(Py_ssize_t len, Py_ssize_t slots, Py_ssize_t at, Py_ssize_t count, Py_ssize_t start,
                          Py_ssize_t end, const char *who) {
    int ok = slots > 0 && slots <= (len - 40) / 4 && slots <= (Py_ssize_t)INT32_MAX && at >= 40 + slots * 4 &&
             at <= len && count >= 1 && count <= (len - at) / 20 && count <= (Py_ssize_t)INT32_MAX && start >= 0 &&
             (end <= start || (end - start <= (len - at) / 20 - count && end - start <= (Py_ssize_t)INT32_MAX - count));
    if (!ok) PyErr_Format(PyExc_ValueError, "%s: a file of the wrong shape (or entries past its end)", who);
    return ok;
}

/* index_put(buf, slots, entries_at, count, end, items, start, diff_s) -> (count, last offset)

   index_file.IndexFile.put_many's loop: items[start:end] ((key str, physical offset) pairs) go
   in as entries count, count + 1, ...: the key's hash crc32(utf-8) & 0x7FFFFFFF, its 20-byte
   entry (hash i32, offset i64, diff_s i32, previous entry i32: the slot's value when it names an
   entry before this one, else 0) at entries_at + count * 20, then the slot set to it. The caller
   checked that they fit. */
PyObject *py_index_put(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t slots, at, count, end, start;
    long long diff_s;
    PyObject *items;
    if (!PyArg_ParseTuple(args, "w*nnnO!nnL:index_put", &buf, &slots, &at, &count, &PyList_Type, &items, &start,
                          &end, &diff_s))
        return NULL;
    PyObject *result = NULL;
    unsigned char *b = (unsigned char *)buf.buf;
    long long phys = -1;
    if (end > PyList_GET_SIZE(items)) end = PyList_GET_SIZE(items);
    if (!index_shape_ok(buf.len, slots, at, count, start, end, "index_put")) goto done;
    for (Py_ssize_t k = start; k < end && k < PyList_GET_SIZE(items); k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_TypeError, "index items are (key, physical offset)");
            goto done;
        }
        long long ph;
        if (as_i64(PyTuple_GET_ITEM(it, 1), &ph) < 0) goto done;
        Py_ssize_t len;
        const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 0), &len);
        if (key == NULL) goto done;
        put_entry(b, slots, at, count++, crc32_of(0, (const unsigned char *)key, (size_t)len) & 0x7FFFFFFF, ph,
                  diff_s);
        phys = ph;
    }
    result = Py_BuildValue("nL", count, phys);
done:
    PyBuffer_Release(&buf);
    return result;
}


/* index_put_hashed(buf, slots, entries_at, count, items, start, end, diff_s) -> (count, last offset)

   index_put for items already hashed: ``items`` holds 12-byte items (uint32 key hash, int64
   physical offset, native: append_slices' index_items); items[start:end] go in as index_put puts
   them. The caller checked that they fit. */
PyObject *py_index_put_hashed(PyObject *self, PyObject *args) {
    Py_buffer buf, items;
    Py_ssize_t slots, at, count, end, start;
    long long diff_s;
    if (!PyArg_ParseTuple(args, "w*nnny*nnL:index_put_hashed", &buf, &slots, &at, &count, &items, &start, &end,
                          &diff_s))
        return NULL;
    PyObject *result = NULL;
    unsigned char *b = (unsigned char *)buf.buf;
    const unsigned char *it = (const unsigned char *)items.buf;
    int64_t phys = -1;
    if (end > items.len / INDEX_ITEM) end = items.len / INDEX_ITEM;
    if (!index_shape_ok(buf.len, slots, at, count, start, end, "index_put_hashed")) goto done;
    for (Py_ssize_t k = start; k < end; k++) {
        uint32_t h;
        memcpy(&h, it + INDEX_ITEM * k, 4);
        memcpy(&phys, it + INDEX_ITEM * k + 4, 8);
        put_entry(b, slots, at, count++, h & 0x7FFFFFFF, phys, diff_s);
    }
    result = Py_BuildValue("nL", count, (long long)phys);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&items);
    return result;
}


int accel_write_init(void) {
    s_rr = PyUnicode_InternFromString("rr");
    s_queue_count = PyUnicode_InternFromString("queue_count");
    s_next_offsets = PyUnicode_InternFromString("next_offsets");
    s_queues = PyUnicode_InternFromString("queues");
    s_name_bytes = PyUnicode_InternFromString("name_bytes");
    s_write_ids = PyUnicode_InternFromString("write_ids");
    s_start = PyUnicode_InternFromString("start");
    s_step = PyUnicode_InternFromString("step");
    return s_rr && s_queue_count && s_next_offsets && s_queues && s_name_bytes && s_write_ids && s_start && s_step
           ? 0 : -1;
}
