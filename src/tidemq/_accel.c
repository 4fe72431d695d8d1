/* tidemq._accel: the per-record loops of the write and read paths, compiled.

   Optional: tidemq/accel.py selects these functions when this module is built (``pip install``
   builds it with the machine's C compiler; setup.py marks it optional) and TIDEMQ_ACCEL is not
   0, and the pure-Python versions otherwise. Both produce the same bytes and the same outcomes:
   tests/test_accel.py holds them to it (random batches, damaged input), and CI runs the suite
   both ways. Nothing here does I/O, allocates segments or decides policy: bytes in, bytes out.

   The commit-log record, big-endian (the RocketMQ v1 layout, tidemq/store/codec.py):

       off  size  field
         0   4    TOTALSIZE                  whole record
         4   4    MAGIC                      0xDAA320A7 (BLANK: 0xCBD43194)
         8   4    BODYCRC                    crc32(body) & 0x7FFFFFFF
        12   4    QUEUEID
        16   4    FLAG
        20   8    QUEUEOFFSET
        28   8    PHYSICALOFFSET             commit-log offset of this record
        36   4    SYSFLAG
        40   8    BORNTIMESTAMP
        48   8    BORNHOST
        56   8    STORETIMESTAMP
        64   8    STOREHOST
        72   4    RECONSUMETIMES
        76   8    PREPAREDTRANSACTIONOFFSET
        84   4    BODYLEN
        88   n    BODY
      88+n   1    TOPICLEN (u8)
             t    TOPIC
             2    PROPERTIESLEN (i16)
             p    PROPERTIES, ending with "__CRC32#\x01" + 10 decimal digits + "\x02"

   The digits are the record CRC: crc32(header[0:88], crc32(tail)), tail = TOPICLEN up to the
   digits (the last byte, the "\x02" after them, is outside every CRC and checked as written).
   A consume-queue unit is 20 bytes: commit-log offset i64 | size i32 | tags hash i64.

   Functions:
     crc32(data, value=0)                    zlib's CRC-32 (ISA-L's when tidemq.crc found it)
     use_crc(address)                        take ISA-L's crc32_gzip_refl at this address
     append(...)                             pack prepared messages into a segment (commit_log.py)
     scan_run(buf, pos, limit, positions)    verify consecutive records (codec.scan_run)
     damaged(buf, starts, sizes)             which records fail their CRCs (integrity.py)
     index_put(...)                          the index entries of a batch (index_file.py)
     send_frame(raw, reserved, id_max)       a SendRecords frame, checked, as store columns
     prepare_columns(...)                    those columns as prepared messages (writer.py)
     decode_run(cls, data, sizes)            records back to back as StoredMessage objects
   Each one's contract is in its Python twin's docstring; the argument lists are below. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define ACCEL_VERSION 1

#define MAGIC_U32 0xDAA320A7u
#define OFF_BODY 88
#define FIXED_OVERHEAD 91
#define CRC_DIGITS_BACK 11
#define RECORD_MIN 111
#define TAIL_MIN 23
#define UNIT_SIZE 20

/* ---------------------------------------------------------------------------------------- CRC */

static uint32_t crc_table[8][256];
typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, uint64_t);
static crc_fn isal_crc = NULL;

static void crc_init_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int k = 1; k < 8; k++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[k][n] = c;
        }
    }
}

/* slice-by-8 (little-endian machines read 8 bytes at a time; others byte by byte) */
static uint32_t crc_tables(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
              crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
#endif
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static inline uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n) {
    if (isal_crc != NULL && n >= 64) return isal_crc(crc, p, (uint64_t)n);
    return crc_tables(crc, p, n);
}

/* ------------------------------------------------------------------------------- byte helpers */

static inline void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static inline void be64(unsigned char *p, uint64_t v) {
    be32(p, (uint32_t)(v >> 32));
    be32(p + 4, (uint32_t)v);
}
static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t rd64(const unsigned char *p) { return ((uint64_t)rd32(p) << 32) | rd32(p + 4); }

/* the 10 decimal digits of a CRC (b"%010d" % crc) */
static inline void digits10(unsigned char *p, uint32_t v) {
    for (int k = 9; k >= 0; k--) {
        p[k] = (unsigned char)('0' + v % 10);
        v /= 10;
    }
}
/* the value of 10 digits, or -1 when one is not a digit */
static inline int64_t read_digits10(const unsigned char *p) {
    int64_t v = 0;
    for (int k = 0; k < 10; k++) {
        if (p[k] < '0' || p[k] > '9') return -1;
        v = v * 10 + (p[k] - '0');
    }
    return v;
}

/* -------------------------------------------------------------------------------- crc32() */

static PyObject *py_crc32(PyObject *self, PyObject *args) {
    Py_buffer b;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k:crc32", &b, &value)) return NULL;
    uint32_t c = crc32_of((uint32_t)value, (const unsigned char *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *py_use_crc(PyObject *self, PyObject *arg) {
    /* address of ISA-L's crc32_gzip_refl(init, buf, len) (tidemq/accel.py finds it in the isal
       package's module); 0 goes back to the tables. Checked against the tables before use. */
    unsigned long long addr = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    if (addr == 0) {
        isal_crc = NULL;
        Py_RETURN_FALSE;
    }
    crc_fn f = (crc_fn)(uintptr_t)addr;
    unsigned char probe[300];
    for (int k = 0; k < 300; k++) probe[k] = (unsigned char)(k * 131 + 7);
    for (int n = 0; n <= 300; n += 37) {
        if (f(0x12345678u, probe, (uint64_t)n) != crc_tables(0x12345678u, probe, (size_t)n)) Py_RETURN_FALSE;
    }
    isal_crc = f;
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------------------------ append() */

static PyObject *s_rr, *s_queue_count, *s_next_offsets, *s_queues, *s_name_bytes;

typedef struct {                 /* the write-path state of the topic being written (TopicState) */
    PyObject *t;                 /* borrowed from the batch item */
    PyObject *offsets;           /* list, new reference */
    PyObject *queues;            /* list, new reference */
    PyObject *name;              /* bytes, new reference */
    long long rr;
    Py_ssize_t qc;
} topic_cur;

static void topic_clear(topic_cur *c) {
    Py_CLEAR(c->offsets);
    Py_CLEAR(c->queues);
    Py_CLEAR(c->name);
    c->t = NULL;
}

/* write back the round-robin counter; 0 or -1 (exception set) */
static int topic_flush(topic_cur *c) {
    if (c->t == NULL) return 0;
    PyObject *v = PyLong_FromLongLong(c->rr);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(c->t, s_rr, v);
    Py_DECREF(v);
    return r;
}

static int topic_load(topic_cur *c, PyObject *t) {
    if (topic_flush(c) < 0) return -1;
    topic_clear(c);
    PyObject *rr = PyObject_GetAttr(t, s_rr);
    if (rr == NULL) return -1;
    c->rr = PyLong_AsLongLong(rr);
    Py_DECREF(rr);
    if (c->rr == -1 && PyErr_Occurred()) return -1;
    PyObject *qc = PyObject_GetAttr(t, s_queue_count);
    if (qc == NULL) return -1;
    c->qc = PyLong_AsSsize_t(qc);
    Py_DECREF(qc);
    if (c->qc == -1 && PyErr_Occurred()) return -1;
    c->offsets = PyObject_GetAttr(t, s_next_offsets);
    c->queues = PyObject_GetAttr(t, s_queues);
    c->name = PyObject_GetAttr(t, s_name_bytes);
    if (c->offsets == NULL || c->queues == NULL || c->name == NULL) return -1;
    if (!PyList_Check(c->offsets) || !PyList_Check(c->queues) || !PyBytes_Check(c->name) ||
        PyList_GET_SIZE(c->offsets) < c->qc || PyList_GET_SIZE(c->queues) < c->qc || c->qc <= 0 ||
        PyBytes_GET_SIZE(c->name) > 255) {
        PyErr_SetString(PyExc_TypeError, "topic state: next_offsets / queues / name_bytes of the wrong shape");
        return -1;
    }
    c->t = t;
    return 0;
}

static int as_i64(PyObject *o, long long *out) {
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}
static int as_i32(PyObject *o, long long *out) {
    if (as_i64(o, out) < 0) return -1;
    if (*out < INT32_MIN || *out > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a 32-bit field out of range");
        return -1;
    }
    return 0;
}

/* units: {consume queue: [first queue offset, bytearray of units]}; appends one unit */
static int add_unit(PyObject *units, PyObject *cq, long long qoff, const unsigned char *unit) {
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

/* append(batch, start, buf, pos, limit, base, now_ms, store_host, units, index_items,
          res_phys, res_size, res_qid, res_qoff, res_uniq) -> (next, pos, error)

   Packs batch[start:] (commit_log.Prepared tuples) into ``buf`` from ``pos`` while a record
   ends at or before ``limit``; returns where it stopped: the index of the first item not packed
   (len(batch): all), the position after the last record packed, and None, or the exception that
   stopped it at that item (nothing of that item is written). Per item packed: its queue id
   (round-robin over the topic's queues when None) and queue offset taken from its TopicState,
   the record written and sealed with its record CRC, its unit added to ``units``, (index keys,
   physical offset) to ``index_items`` when it has keys, and at its message index i (item[0]):
   res_phys[i] (int64), res_size[i] (int32), res_qid[i] (int32), res_qoff[i] (int64) and
   res_uniq[i] (a list) set. */
static PyObject *py_append(PyObject *self, PyObject *args) {
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
        rqid.len < nres * 4 || limit > buf.len || pos < 0 || pos > limit) {
        PyErr_SetString(PyExc_ValueError, "append: buffers of the wrong size");
        goto done;
    }
    for (; k < nb; k++) {
        PyObject *it = PyList_GET_ITEM(batch, k);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 16) {
            PyErr_SetString(PyExc_TypeError, "a prepared message must be a tuple of 16 fields");
            goto item_error;
        }
        PyObject **f = &PyTuple_GET_ITEM(it, 0);
        Py_ssize_t i = PyLong_AsSsize_t(f[0]);
        if (i == -1 && PyErr_Occurred()) goto item_error;
        if (i < 0 || i >= nres) {
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
        if (pos + n > limit) break;                         /* the caller ends the segment here */
        long long born_ts, flag, sys_flag, reconsume, prep_tx, crc, th, tcrc = -1, qid;
        if (as_i64(f[5], &born_ts) < 0 || as_i32(f[7], &flag) < 0 || as_i32(f[8], &sys_flag) < 0 ||
            as_i32(f[9], &reconsume) < 0 || as_i64(f[10], &prep_tx) < 0 || as_i64(f[12], &th) < 0 ||
            (f[15] != Py_None && as_i64(f[15], &tcrc) < 0))
            goto item_error;
        const unsigned char *bp = (const unsigned char *)PyBytes_AS_STRING(body);
        if (pl < CRC_DIGITS_BACK || pl > 32767 || bl > INT32_MAX - 1024) {
            PyErr_SetString(PyExc_ValueError, "properties must end with the record-CRC tail and fit 32767 bytes");
            goto item_error;
        }
        if (f[11] == Py_None) {
            crc = crc32_of(0, bp, (size_t)bl) & 0x7FFFFFFF;
        } else if (as_i64(f[11], &crc) < 0) {
            goto item_error;
        }
        if (f[4] == Py_None) {
            qid = cur.rr % cur.qc;
            cur.rr++;
        } else {
            qid = PyLong_AsLongLong(f[4]);
            if (qid == -1 && PyErr_Occurred()) goto item_error;
            if (qid < 0 || qid >= cur.qc) {
                PyErr_SetString(PyExc_ValueError, "queue id outside the topic's queues");
                goto item_error;
            }
        }
        long long qoff;
        if (as_i64(PyList_GET_ITEM(cur.offsets, qid), &qoff) < 0) goto item_error;
        PyObject *next = PyLong_FromLongLong(qoff + 1);
        if (next == NULL) goto item_error;
        PyObject *cq = PyList_GET_ITEM(cur.queues, qid);
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
        PyList_SetItem(cur.offsets, qid, next);              /* steals next */
        unsigned char *r = b + pos;
        be32(r, (uint32_t)n);
        be32(r + 4, MAGIC_U32);
        be32(r + 8, (uint32_t)crc);
        be32(r + 12, (uint32_t)qid);
        be32(r + 16, (uint32_t)flag);
        be64(r + 20, (uint64_t)qoff);
        be64(r + 28, (uint64_t)phys);
        be32(r + 36, (uint32_t)sys_flag);
        be64(r + 40, (uint64_t)born_ts);
        memcpy(r + 48, PyBytes_AS_STRING(bh), 8);
        be64(r + 56, (uint64_t)now_ms);
        memcpy(r + 64, host.buf, 8);
        be32(r + 72, (uint32_t)reconsume);
        be64(r + 76, (uint64_t)prep_tx);
        be32(r + 84, (uint32_t)bl);
        memcpy(r + OFF_BODY, bp, (size_t)bl);
        unsigned char *q = r + OFF_BODY + bl;
        q[0] = (unsigned char)tl;
        memcpy(q + 1, PyBytes_AS_STRING(cur.name), (size_t)tl);
        q[1 + tl] = (unsigned char)(pl >> 8);
        q[2 + tl] = (unsigned char)pl;
        memcpy(q + 3 + tl, PyBytes_AS_STRING(props), (size_t)pl);
        if (f[15] == Py_None)            /* the tail's CRC: TOPICLEN up to the digits */
            tcrc = crc32_of(0, q, (size_t)(3 + tl + pl - CRC_DIGITS_BACK));
        digits10(r + n - CRC_DIGITS_BACK, crc32_of((uint32_t)tcrc, r, OFF_BODY));
        o_phys[i] = phys;
        o_size[i] = (int32_t)n;
        o_qid[i] = (int32_t)qid;
        o_qoff[i] = qoff;
        PyObject *uq = f[14];
        Py_INCREF(uq);
        PyList_SetItem(res_uniq, i, uq);
        pos += n;
        continue;
    item_error: {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyErr_NormalizeException(&et, &ev, &tb);
            Py_XDECREF(et);
            Py_XDECREF(tb);
            error = ev;
            break;
        }
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
static PyObject *py_send_frame(PyObject *self, PyObject *args) {
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

/* --------------------------------------------------------------------------- prepare_columns() */

/* prepare_columns(t, bodies, properties, tags_hashes, uniq_keys, keys, skip, now_ms, born_host,
                   max_body, max_props, room, index_prefix) -> (prepared, doubtful)

   writer.prepare_columns: one commit_log.Prepared per message i not in ``skip`` (a set or dict of
   indexes, or None): (i, body, t, properties, None, now_ms, born_host, 0, 0, 0, 0, None,
   tags_hash, index keys, uniq_key, None) (the body and tail CRCs are the append's), index keys
   [prefix + key for each key] + [prefix + uniq_key] (None without keys and uniq key, or
   without a prefix: no index); ``doubtful``: the indexes whose body is not bytes, over max_body,
   whose properties are over max_props or which do not fit ``room`` (body + properties): the
   caller's validators say why. */
static PyObject *py_prepare_columns(PyObject *self, PyObject *args) {
    PyObject *t, *bodies, *props, *ths, *uniqs, *keys, *skip, *host, *prefix;
    long long now;
    Py_ssize_t max_body, max_props, room;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!OLO!nnnO:prepare_columns", &t, &PyList_Type, &bodies, &PyList_Type,
                          &props, &PyList_Type, &ths, &PyList_Type, &uniqs, &PyList_Type, &keys, &skip, &now,
                          &PyBytes_Type, &host, &max_body, &max_props, &room, &prefix))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(bodies);
    if (PyList_GET_SIZE(props) != n || PyList_GET_SIZE(ths) != n || PyList_GET_SIZE(uniqs) != n ||
        PyList_GET_SIZE(keys) != n || (prefix != Py_None && !PyUnicode_Check(prefix))) {
        PyErr_SetString(PyExc_ValueError, "prepare_columns: columns of different lengths");
        return NULL;
    }
    PyObject *out = PyList_New(0), *doubtful = PyList_New(0), *nowo = PyLong_FromLongLong(now);
    PyObject *zero = PyLong_FromLong(0), *result = NULL;
    if (!out || !doubtful || !nowo || !zero) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *io = PyLong_FromSsize_t(i);
        if (io == NULL) goto done;
        if (skip != Py_None) {
            int r = PySequence_Contains(skip, io);
            if (r != 0) {
                Py_DECREF(io);
                if (r < 0) goto done;
                continue;
            }
        }
        PyObject *body = PyList_GET_ITEM(bodies, i), *pb = PyList_GET_ITEM(props, i);
        if (!PyBytes_Check(body) || !PyBytes_Check(pb) || PyBytes_GET_SIZE(body) > max_body ||
            PyBytes_GET_SIZE(pb) > max_props || PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(pb) > room) {
            int r = PyList_Append(doubtful, io);
            Py_DECREF(io);
            if (r < 0) goto done;
            continue;
        }
        PyObject *uq = PyList_GET_ITEM(uniqs, i), *ks = PyList_GET_ITEM(keys, i), *ik = Py_None;
        Py_INCREF(ik);
        if (prefix != Py_None && (uq != Py_None || (ks != Py_None && PyList_GET_SIZE(ks)))) {
            Py_DECREF(ik);
            ik = PyList_New(0);
            if (ik == NULL) {
                Py_DECREF(io);
                goto done;
            }
            Py_ssize_t nk = ks != Py_None ? PyList_GET_SIZE(ks) : 0;
            for (Py_ssize_t j = 0; j <= nk; j++) {
                PyObject *k = j < nk ? PyList_GET_ITEM(ks, j) : uq;
                if (k == Py_None || !PyUnicode_Check(k) || PyUnicode_GET_LENGTH(k) == 0) continue;
                PyObject *full = PyUnicode_Concat(prefix, k);
                int r = full ? PyList_Append(ik, full) : -1;
                Py_XDECREF(full);
                if (r < 0) {
                    Py_DECREF(ik);
                    Py_DECREF(io);
                    goto done;
                }
            }
        }
        PyObject *item = PyTuple_New(16);
        if (item == NULL) {
            Py_DECREF(ik);
            Py_DECREF(io);
            goto done;
        }
        PyObject *vals[16] = {io, body, t, pb, Py_None, nowo, host, zero, zero, zero, zero, Py_None,
                              PyList_GET_ITEM(ths, i), ik, uq, Py_None};
        for (int j = 0; j < 16; j++) {
            if (j != 0 && j != 13) Py_INCREF(vals[j]);     /* io and ik: their references move in */
            PyTuple_SET_ITEM(item, j, vals[j]);
        }
        int r = PyList_Append(out, item);
        Py_DECREF(item);
        if (r < 0) goto done;
    }
    result = PyTuple_Pack(2, out, doubtful);
done:
    Py_XDECREF(out);
    Py_XDECREF(doubtful);
    Py_XDECREF(nowo);
    Py_XDECREF(zero);
    return result;
}

/* --------------------------------------------------------------------------------- index_put() */

/* index_put(buf, slots, entries_at, count, end, items, start, diff_s) -> (count, last offset)

   index_file.IndexFile.put_many's loop: items[start:end] ((key str, physical offset) pairs) go
   in as entries count, count + 1, ...: the key's hash crc32(utf-8) & 0x7FFFFFFF, its 20-byte
   entry (hash i32, offset i64, diff_s i32, previous entry i32: the slot's value when it names an
   entry before this one, else 0) at entries_at + count * 20, then the slot set to it. The caller
   checked that they fit. */
static PyObject *py_index_put(PyObject *self, PyObject *args) {
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
    if (slots <= 0 || at < 40 + slots * 4 || count < 1 || start < 0 || (end - start + count) * 20 + at > buf.len) {
        PyErr_SetString(PyExc_ValueError, "index_put: a file of the wrong shape");
        goto done;
    }
    for (Py_ssize_t k = start; k < end; k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_TypeError, "index items are (key, physical offset)");
            goto done;
        }
        long long ph = PyLong_AsLongLong(PyTuple_GET_ITEM(it, 1));
        if (ph == -1 && PyErr_Occurred()) goto done;
        Py_ssize_t len;
        const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 0), &len);
        if (key == NULL) goto done;
        uint32_t h = crc32_of(0, (const unsigned char *)key, (size_t)len) & 0x7FFFFFFF;
        unsigned char *slot = b + 40 + (h % (uint32_t)slots) * 4;
        int64_t prev = (int32_t)rd32(slot);
        if (prev < 0 || prev >= count) prev = 0;
        unsigned char *e = b + at + count * 20;
        be32(e, h);
        be64(e + 4, (uint64_t)ph);
        be32(e + 12, (uint32_t)diff_s);
        be32(e + 16, (uint32_t)prev);
        be32(slot, (uint32_t)count);
        count++;
        phys = ph;
    }
    result = Py_BuildValue("nL", count, phys);
done:
    PyBuffer_Release(&buf);
    return result;
}

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

/* scan_run(buf, pos, limit, positions=None) -> (pos, records, body bytes): codec.scan_run */
static PyObject *py_scan_run(PyObject *self, PyObject *args) {
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
    while (pos >= 0 && pos + FIXED_OVERHEAD <= limit) {
        const unsigned char *p = b + pos;
        int64_t size = (int32_t)rd32(p);
        if (rd32(p + 4) != MAGIC_U32 || size < RECORD_MIN || pos + size > limit) break;
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

/* damaged(buf, starts, sizes) -> list of indexes: integrity.damaged_records (starts, sizes:
   int64 buffers of the same length; every record within buf) */
static PyObject *py_damaged(PyObject *self, PyObject *args) {
    Py_buffer buf, st, sz;
    if (!PyArg_ParseTuple(args, "y*y*y*:damaged", &buf, &st, &sz)) return NULL;
    PyObject *out = NULL;
    if (st.len != sz.len || st.len % 8) {
        PyErr_SetString(PyExc_ValueError, "damaged: starts and sizes must be int64 arrays of one length");
        goto done;
    }
    out = PyList_New(0);
    if (out == NULL) goto done;
    const int64_t *s = (const int64_t *)st.buf, *z = (const int64_t *)sz.buf;
    const unsigned char *b = (const unsigned char *)buf.buf;
    for (Py_ssize_t k = 0; k < st.len / 8; k++) {
        int ok = s[k] >= 0 && z[k] >= RECORD_MIN && s[k] + z[k] <= buf.len && record_intact(b + s[k], z[k]);
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
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
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

static PyObject *py_decode_run(PyObject *self, PyObject *args) {
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
    const int32_t *sz = (const int32_t *)sizes.buf;
    Py_ssize_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t size = sz[k];
        const unsigned char *p = b + pos;
        if (size < OFF_BODY || pos + size > data.len) {
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

/* ------------------------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_VARARGS, "crc32(data, value=0): zlib's CRC-32"},
    {"use_crc", py_use_crc, METH_O, "use_crc(address): ISA-L's crc32_gzip_refl (0: the tables); True if taken"},
    {"append", py_append, METH_VARARGS, "pack prepared messages into a segment (commit_log.py)"},
    {"send_frame", py_send_frame, METH_VARARGS, "a SendRecords frame, checked (protocol/send_frame.py)"},
    {"prepare_columns", py_prepare_columns, METH_VARARGS, "columns as prepared messages (writer.py)"},
    {"decode_run", py_decode_run, METH_VARARGS, "records back to back as StoredMessage objects (codec.py)"},
    {"index_put", py_index_put, METH_VARARGS, "index entries of many items (index_file.py)"},
    {"scan_run", py_scan_run, METH_VARARGS, "verify consecutive records (codec.scan_run)"},
    {"damaged", py_damaged, METH_VARARGS, "indexes of the records that fail their CRCs (integrity.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq._accel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    crc_init_tables();
    s_rr = PyUnicode_InternFromString("rr");
    s_queue_count = PyUnicode_InternFromString("queue_count");
    s_next_offsets = PyUnicode_InternFromString("next_offsets");
    s_queues = PyUnicode_InternFromString("queues");
    s_name_bytes = PyUnicode_InternFromString("name_bytes");
    if (!s_rr || !s_queue_count || !s_next_offsets || !s_queues || !s_name_bytes) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", ACCEL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
