/* tidemq._accel: a follower's one pass over a frame of the leader's log (store/replica_scan.py,
   its Python twin py_replica_scan, holds the contract; accel.h the record layout) */

#include "accel.h"

#define BLANK_MAGIC_U32 0xCBD43194u
#define GROUPS_MAX 64            /* consume queues one frame feeds in C; more: the twin does the frame */
#define TOPICS_MAX 16

enum { SCAN_OK = 0, SCAN_CROSSES, SCAN_BLANK_NOT_END, SCAN_NOT_WHOLE, SCAN_DAMAGED, SCAN_OTHER_OFFSET,
       SCAN_TOPIC, SCAN_TWIN };

typedef struct {
    const unsigned char *name;   /* in the frame */
    Py_ssize_t len;
    PyObject *str;               /* the topic as str */
    int64_t dead_below;          /* records before this log offset belong to a deleted topic */
    uint32_t prefix_crc;         /* crc32(b"<topic>#") */
} topic_t;

typedef struct {
    int t;                       /* topics[t] */
    int32_t qid;
    int64_t first, next;         /* queue offsets: the first unit's, the next one's */
    unsigned char *units;
    Py_ssize_t n, cap;           /* bytes */
} group_t;

/* the value of the last property ``name`` (name\x01value, items ended by \x02) in the raw
   properties p[0:n] read as codec.seek_properties + prop_value do; 0 when there is none */
static int prop_find(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t nl,
                     const unsigned char **value, Py_ssize_t *vl) {
    if (n >= 20 && p[n - 1] == 2 && memcmp(p + n - 20, "__CRC32#\x01", 9) == 0) n -= 20;
    int found = 0;
    Py_ssize_t at = 0;
    for (Py_ssize_t a = 0; a + nl + 1 <= n; a++) {       /* each item starts at 0 or after a \x02 */
        if ((a == 0 || p[a - 1] == 2) && memcmp(p + a, name, (size_t)nl) == 0 && p[a + nl] == 1) {
            found = 1;
            at = a + nl + 1;
        }
    }
    if (!found) return 0;
    const unsigned char *e = memchr(p + at, 2, (size_t)(n - at));
    *value = p + at;
    *vl = (e == NULL ? p + n : e) - (p + at);
    return 1;
}

static int grow(group_t *g, Py_ssize_t more) {
    if (g->n + more <= g->cap) return 0;
    Py_ssize_t cap = g->cap ? g->cap * 2 : 64 * UNIT_SIZE;
    while (cap < g->n + more) cap *= 2;
    unsigned char *u = PyMem_Realloc(g->units, (size_t)cap);
    if (u == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    g->units = u;
    g->cap = cap;
    return 0;
}

static int index_item(PyObject *index, uint32_t prefix_crc, const unsigned char *k, Py_ssize_t kl, int64_t phys) {
    unsigned char item[12];
    uint32_t h = crc32_of(prefix_crc, k, (size_t)kl) & 0x7FFFFFFFu;
    memcpy(item, &h, 4);
    memcpy(item + 4, &phys, 8);
    Py_ssize_t n = PyByteArray_GET_SIZE(index);
    if (PyByteArray_Resize(index, n + 12) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(index) + n, item, 12);
    return 0;
}

/* replica_scan(data, offset, segment_size, deleted, want_index)
     -> (code, at, last_ts, ends_segment, groups, index): store/replica_scan.py_scan; SCAN_TWIN
   when this frame is one for the twin (a TAGS / KEYS / UNIQ_KEY value not UTF-8, too many topics or
   queues) */
PyObject *py_replica_scan(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long offset, seg;
    PyObject *deleted;
    int want_index;
    if (!PyArg_ParseTuple(args, "y*LLOp:replica_scan", &buf, &offset, &seg, &deleted, &want_index))
        return NULL;
    if (deleted != Py_None && !PyDict_CheckExact(deleted)) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_TypeError, "deleted must be a dict or None");
        return NULL;
    }
    if (offset < 0 || seg <= 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "offset must be >= 0 and segment_size > 0");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)buf.buf;
    const Py_ssize_t n = buf.len;
    topic_t topics[TOPICS_MAX];
    group_t groups[GROUPS_MAX];
    int nt = 0, ng = 0, last_g = -1, contiguous = deleted != Py_None;      /* None: the check alone */
    int code = SCAN_OK, ends = 0;
    Py_ssize_t pos = 0;
    int64_t last_ts = 0;
    PyObject *index = NULL, *out = NULL, *glist = NULL;
    if (want_index && contiguous && (index = PyByteArray_FromStringAndSize(NULL, 0)) == NULL) goto fail;

    const int64_t limit = seg - offset % seg;           /* room left in the segment */
    if ((int64_t)n > limit) {
        code = SCAN_CROSSES;
        goto done;
    }
    while (pos < n) {
        const unsigned char *p = b + pos;
        uint32_t magic = 0;
        int64_t size = 0;
        if (n - pos >= 8) {
            size = (int32_t)rd32(p);
            magic = rd32(p + 4);
        }
        if (magic == BLANK_MAGIC_U32) {
            if ((pos + size != n && pos + 8 != n) || size != limit - pos) code = SCAN_BLANK_NOT_END;
            else ends = 1;
            goto done;
        }
        if (magic != MAGIC_U32 || size > n - pos) {
            code = SCAN_NOT_WHOLE;
            goto done;
        }
        /* codec.check_record(verify_crc=False): the lengths add up */
        if (size < FIXED_OVERHEAD) {
            code = SCAN_DAMAGED;
            goto done;
        }
        int64_t blen = (int32_t)rd32(p + 84);
        if (blen < 0 || FIXED_OVERHEAD + blen > size) {
            code = SCAN_DAMAGED;
            goto done;
        }
        int64_t tlen = p[OFF_BODY + blen];
        int64_t pend = OFF_BODY + blen + 1 + tlen;
        if (pend + 2 > size) {
            code = SCAN_DAMAGED;
            goto done;
        }
        int64_t plen = (int16_t)((p[pend] << 8) | p[pend + 1]);
        if (plen < 0 || FIXED_OVERHEAD + blen + tlen + plen != size) {
            code = SCAN_DAMAGED;
            goto done;
        }
        int64_t phys = offset + pos;
        if ((int64_t)rd64(p + 28) != phys) {
            code = SCAN_OTHER_OFFSET;
            goto done;
        }
        const unsigned char *tn = p + OFF_BODY + blen + 1;
        for (int64_t k = 0; k < tlen; k++)
            if (tn[k] >= 0x80) {
                code = SCAN_TOPIC;
                goto done;
            }
        last_ts = (int64_t)rd64(p + 56);
        pos += size;
        if (code != SCAN_OK || !contiguous) continue;         /* the check goes on; the dispatch is decided */

        /* its topic: known in this frame, or looked up once */
        int t = -1;
        for (int k = 0; k < nt; k++)
            if (topics[k].len == tlen && memcmp(topics[k].name, tn, (size_t)tlen) == 0) {
                t = k;
                break;
            }
        if (t < 0) {
            if (nt == TOPICS_MAX) {
                code = SCAN_TWIN;
                continue;
            }
            PyObject *s = PyUnicode_DecodeASCII((const char *)tn, tlen, "strict");
            if (s == NULL) goto fail;
            int64_t dead = -1;
            PyObject *d = PyDict_GetItemWithError(deleted, s);
            if (d == NULL && PyErr_Occurred()) {
                Py_DECREF(s);
                goto fail;
            }
            if (d != NULL) {
                long long v;
                if (exact_i64(d, &v) < 0) {
                    Py_DECREF(s);
                    goto fail;
                }
                dead = v;
            }
            unsigned char hash_sep = '#';
            topics[nt].name = tn;
            topics[nt].len = tlen;
            topics[nt].str = s;
            topics[nt].dead_below = dead;
            topics[nt].prefix_crc = crc32_of(crc32_of(0, tn, (size_t)tlen), &hash_sep, 1);
            t = nt++;
        }
        if (phys < topics[t].dead_below) continue;            /* a deleted topic's record */

        const unsigned char *props = p + pend + 2;
        uint32_t tags_hash = 0;
        const unsigned char *kv = NULL, *uv = NULL;
        Py_ssize_t kl = 0, ul = 0;
        int has_keys = 0, has_uniq = 0;
        if (plen > 0) {
            const unsigned char *v;
            Py_ssize_t vl;
            if (prop_find(props, plen, "TAGS", 4, &v, &vl) && !accel_utf8_ok(v, vl, &tags_hash)) {
                code = SCAN_TWIN;
                continue;
            }
            if (want_index) {
                has_keys = prop_find(props, plen, "KEYS", 4, &kv, &kl);
                has_uniq = prop_find(props, plen, "UNIQ_KEY", 8, &uv, &ul);
                if ((has_keys && !accel_utf8_ok(kv, kl, NULL)) || (has_uniq && !accel_utf8_ok(uv, ul, NULL))) {
                    code = SCAN_TWIN;
                    continue;
                }
            }
        }
        int32_t qid = (int32_t)rd32(p + 12);
        int64_t qoff = (int64_t)rd64(p + 20);
        int g = -1;
        if (last_g >= 0 && groups[last_g].t == t && groups[last_g].qid == qid) g = last_g;
        else
            for (int k = 0; k < ng; k++)
                if (groups[k].t == t && groups[k].qid == qid) {
                    g = k;
                    break;
                }
        if (g < 0) {
            if (ng == GROUPS_MAX) {
                code = SCAN_TWIN;
                continue;
            }
            g = ng++;
            groups[g].t = t;
            groups[g].qid = qid;
            groups[g].first = groups[g].next = qoff;
            groups[g].units = NULL;
            groups[g].n = groups[g].cap = 0;
        } else if (qoff != groups[g].next) {
            contiguous = 0;                                    /* dispatched from the log instead */
            continue;
        }
        last_g = g;
        if (grow(&groups[g], UNIT_SIZE) < 0) goto fail;
        unsigned char *u = groups[g].units + groups[g].n;
        be64(u, (uint64_t)phys);
        be32(u + 8, (uint32_t)size);
        be64(u + 12, (uint64_t)(int64_t)(int32_t)tags_hash);
        groups[g].n += UNIT_SIZE;
        groups[g].next = qoff + 1;
        if (index != NULL) {
            uint32_t pc = topics[t].prefix_crc;
            if (has_keys)
                for (Py_ssize_t a = 0; a < kl;) {              /* the KEYS value split at single spaces */
                    const unsigned char *e = memchr(kv + a, ' ', (size_t)(kl - a));
                    Py_ssize_t z = e == NULL ? kl : e - kv;
                    if (z > a && index_item(index, pc, kv + a, z - a, phys) < 0) goto fail;
                    a = z + 1;
                }
            if (has_uniq && ul > 0 && index_item(index, pc, uv, ul, phys) < 0) goto fail;
        }
    }
done:
    if (code == SCAN_OK && contiguous) {           /* (never with deleted None) */
        if ((glist = PyList_New(ng)) == NULL) goto fail;
        for (int k = 0; k < ng; k++) {
            PyObject *units = PyByteArray_FromStringAndSize((const char *)groups[k].units, groups[k].n);
            PyObject *item = units == NULL ? NULL : Py_BuildValue("(OiLN)", topics[groups[k].t].str, groups[k].qid,
                                                                  (long long)groups[k].first, units);
            if (item == NULL) goto fail;
            PyList_SET_ITEM(glist, k, item);
        }
    } else {
        glist = Py_None;
        Py_INCREF(glist);
    }
    if (index == NULL || (code != SCAN_OK && code != SCAN_TWIN)) {
        Py_XDECREF(index);
        index = Py_None;
        Py_INCREF(index);
    }
    out = Py_BuildValue("(inLONN)", code, pos, (long long)last_ts, ends ? Py_True : Py_False, glist, index);
    glist = index = NULL;
fail:
    Py_XDECREF(glist);
    Py_XDECREF(index);
    for (int k = 0; k < nt; k++) Py_DECREF(topics[k].str);
    for (int k = 0; k < ng; k++) PyMem_Free(groups[k].units);
    PyBuffer_Release(&buf);
    return out;
}
