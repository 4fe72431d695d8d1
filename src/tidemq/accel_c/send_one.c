/* tidemq._accel: the common SendMessage request read straight from its bytes (the record layout and
   the list of functions: accel.h; the rule it follows: broker/wire.py encoded_one)

   send_one(raw[, key]) -> (topic, (body, properties), message id, born ms, born host, sys flag) or None
   (with ``key``, 16 bytes: the same with a seventh item, the dedup window's key of (topic, id) under
   it, id_hash's bytes: dedup.py):
   the entry as MessageStore.put_encoded takes it (which reads the tags hash, id and keys from the
   properties itself: store/validate.py). ``raw`` is an apache.rocketmq.v2.SendMessageRequest as the official clients send one
   message: exactly one Message, whose fields are among

       Message           1 topic: Resource {1 resource_namespace, 2 name}   3 system_properties   4 body
       SystemProperties  1 tag   3 message_id   5 body_encoding   6 message_type
                         7 born_timestamp: Timestamp {1 seconds, 2 nanos}   8 born_host

   each at most once, with its own wire type, every string strict UTF-8, every varint at most 10
   bytes, every length within its message. The answer is then exactly what encoded_one gives for
   the protobuf-decoded request (tests/test_accel.py holds the two to it, damaged bytes included),
   and None wherever encoded_one gives None. Anything else (another field, a repeated one, a
   second message, bytes protobuf would refuse, a born host that is not plain-ASCII ipv4, a born
   time this arithmetic would not hold) is None too: the caller decodes the request with protobuf
   and takes the general path, which answers it as before. None is always a safe answer. */

#define PY_SSIZE_T_CLEAN                /* the "#" formats of Py_BuildValue */
#include "accel.h"

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} span_t;

/* a varint at p[*k] (at most 10 bytes, nothing past 64 bits); 0 when there is none */
static int varint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *k, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (*k >= n) return 0;
        unsigned char c = p[(*k)++];
        if (i == 9 && c > 1) return 0;
        v |= (uint64_t)(c & 0x7F) << (7 * i);
        if (!(c & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* A message being read: its bytes, the position, the field numbers met so far */
typedef struct {
    const unsigned char *p;
    Py_ssize_t n, k;
    uint32_t seen;
} reader_t;

typedef struct {
    uint32_t num;
    int wire;              /* 0: a varint (value in v), 2: length-delimited (bytes in s) */
    span_t s;
    uint64_t v;
} field_t;

/* The next field into *f: 1; 0 at the end; -1 when it is not one this reader takes (bytes that
   are not a field, another wire type, a number past 31, a number met before): the caller
   answers None. */
static int next_field(reader_t *r, field_t *f) {
    uint64_t key, len;
    if (r->k >= r->n) return 0;
    if (!varint(r->p, r->n, &r->k, &key) || key > 0xFFFFFFFFu) return -1;
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    if (f->num == 0 || f->num > 31 || (r->seen & (1u << f->num))) return -1;
    r->seen |= 1u << f->num;
    if (f->wire == 0) return varint(r->p, r->n, &r->k, &f->v) ? 1 : -1;
    if (f->wire != 2 || !varint(r->p, r->n, &r->k, &len) || len > (uint64_t)(r->n - r->k)) return -1;
    f->s.p = r->p + r->k;
    f->s.n = (Py_ssize_t)len;
    r->k += (Py_ssize_t)len;
    return 1;
}

typedef struct {
    span_t topic, body, tag, id, host;
    int has_tag, has_born;
    int64_t seconds;
    int64_t nanos;
    int64_t type, encoding;
} one_t;

/* Each reader: 1 when every field of ``m`` was one it takes (the values into *o), else 0. */
static int read_resource(span_t m, one_t *o) {
    reader_t r = {m.p, m.n, 0, 0};
    field_t f;
    int w;
    while ((w = next_field(&r, &f)) > 0) {
        if (f.wire != 2 || f.num > 2 || !accel_utf8_ok(f.s.p, f.s.n, NULL)) return 0;
        if (f.num == 2) o->topic = f.s;                /* 1: resource_namespace, checked, not kept */
    }
    return w == 0;
}

static int read_timestamp(span_t m, one_t *o) {
    reader_t r = {m.p, m.n, 0, 0};
    field_t f;
    int w;
    o->has_born = 1;
    while ((w = next_field(&r, &f)) > 0) {
        if (f.wire != 0 || f.num > 2) return 0;
        if (f.num == 1) o->seconds = (int64_t)f.v;
        else o->nanos = (int32_t)(uint32_t)f.v;         /* int32, as protobuf reads it */
    }
    return w == 0;
}

static int read_system(span_t m, one_t *o) {
    reader_t r = {m.p, m.n, 0, 0};
    field_t f;
    int w;
    while ((w = next_field(&r, &f)) > 0) {
        if (f.wire == 2 && (f.num == 1 || f.num == 3 || f.num == 8)) {
            if (!accel_utf8_ok(f.s.p, f.s.n, NULL)) return 0;
            if (f.num == 1) {
                o->tag = f.s;
                o->has_tag = 1;
            } else if (f.num == 3) {
                o->id = f.s;
            } else {
                o->host = f.s;
            }
        } else if (f.wire == 0 && (f.num == 5 || f.num == 6)) {
            int64_t e = (int32_t)(uint32_t)f.v;           /* an enum: int32 */
            if (f.num == 5) o->encoding = e;
            else o->type = e;
        } else if (f.wire == 2 && f.num == 7) {
            if (!read_timestamp(f.s, o)) return 0;
        } else {
            return 0;
        }
    }
    return w == 0;
}

static int read_message(span_t m, one_t *o) {
    reader_t r = {m.p, m.n, 0, 0};
    field_t f;
    int w;
    while ((w = next_field(&r, &f)) > 0) {
        if (f.wire != 2 || (f.num != 1 && f.num != 3 && f.num != 4)) return 0;
        if (f.num == 1 && !read_resource(f.s, o)) return 0;
        if (f.num == 3 && !read_system(f.s, o)) return 0;
        if (f.num == 4) o->body = f.s;
    }
    return w == 0;
}

static inline int has_sep(span_t s) { return accel_has_sep(s.p, s.n); }

/* wire.is_ipv4 for ASCII: four dot-separated runs of digits, each < 256 (leading zeros allowed) */
static int plain_ipv4(span_t s) {
    int parts = 0;
    Py_ssize_t k = 0;
    while (parts < 4) {
        Py_ssize_t digits = 0;
        uint32_t value = 0;
        while (k < s.n && s.p[k] >= '0' && s.p[k] <= '9') {
            if (value < 1000) value = value * 10 + (uint32_t)(s.p[k] - '0');
            k++;
            digits++;
        }
        if (digits == 0 || value >= 256) return 0;
        parts++;
        if (parts < 4) {
            if (k >= s.n || s.p[k] != '.') return 0;
            k++;
        }
    }
    return k == s.n;
}

static const char HEAD_ID[] = "UNIQ_KEY\x01";                     /* wire._ONE_HEAD: UNIQ_KEY, __MSGTYPE */
static const char HEAD_TYPE[] = "\x02__MSGTYPE\x01NORMAL\x02";
static const char TAGS_NAME[] = "TAGS\x01";
#define BORN_SECONDS_MAX 4000000000000000LL                          /* x 1000 stays an int64 */

/* encoded_one's rule for a message read into *o: 1 when it is the common message */
static int common(const one_t *o) {
    return (o->type == 0 || o->type == 1) && o->id.n > 0 && o->body.n > 0 && !has_sep(o->id) &&
           !(o->has_tag && o->tag.n > 0 && has_sep(o->tag)) && (o->host.n == 0 || plain_ipv4(o->host)) &&
           (!o->has_born || (o->seconds > -BORN_SECONDS_MAX && o->seconds < BORN_SECONDS_MAX));
}

/* The record properties of a common message (wire._ONE_HEAD, then TAGS): new bytes, NULL on error */
static PyObject *properties(const one_t *o) {
    int tagged = o->has_tag && o->tag.n > 0;
    Py_ssize_t plen = (Py_ssize_t)(sizeof HEAD_ID - 1) + o->id.n + (Py_ssize_t)(sizeof HEAD_TYPE - 1) +
                      (tagged ? (Py_ssize_t)(sizeof TAGS_NAME - 1) + o->tag.n + 1 : 0);
    PyObject *props = PyBytes_FromStringAndSize(NULL, plen);
    if (props == NULL) return NULL;
    char *q = PyBytes_AS_STRING(props);
    memcpy(q, HEAD_ID, sizeof HEAD_ID - 1);
    q += sizeof HEAD_ID - 1;
    memcpy(q, o->id.p, (size_t)o->id.n);
    q += o->id.n;
    memcpy(q, HEAD_TYPE, sizeof HEAD_TYPE - 1);
    q += sizeof HEAD_TYPE - 1;
    if (tagged) {
        memcpy(q, TAGS_NAME, sizeof TAGS_NAME - 1);
        q += sizeof TAGS_NAME - 1;
        memcpy(q, o->tag.p, (size_t)o->tag.n);
        q += o->tag.n;
        *q = 2;
    }
    return props;
}

/* A message's born time in ms (Python's floor division of the nanos), when it has one */
static int64_t born_ms_of(const one_t *o) {
    int64_t q_ms = o->nanos / 1000000;
    if (o->nanos % 1000000 != 0 && o->nanos < 0) q_ms -= 1;
    return o->seconds * 1000 + q_ms;
}

/* The born host "<host>:0" (plain ASCII: plain_ipv4), or None; NULL on error */
static PyObject *host_of(const one_t *o) {
    if (o->host.n == 0) Py_RETURN_NONE;
    PyObject *host = PyUnicode_New(o->host.n + 2, 127);
    if (host != NULL) {
        Py_UCS1 *h = PyUnicode_1BYTE_DATA(host);
        memcpy(h, o->host.p, (size_t)o->host.n);
        h[o->host.n] = ':';
        h[o->host.n + 1] = '0';
    }
    return host;
}

PyObject *py_send_one(PyObject *self, PyObject *args) {
    Py_buffer buf, key = {0};
    if (!PyArg_ParseTuple(args, "y*|y*:send_one", &buf, &key)) return NULL;
    if (key.buf != NULL && key.len != DEDUP_KEY_BYTES) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "send_one: the key is 16 bytes");
        return NULL;
    }
    reader_t r = {(const unsigned char *)buf.buf, buf.len, 0, 0};
    one_t o;
    memset(&o, 0, sizeof o);
    field_t f;
    span_t msg = {NULL, 0};
    int w = 0, ok = 1;
    while (ok && (w = next_field(&r, &f)) > 0) {        /* one field: messages (a second is refused) */
        if (f.wire != 2 || f.num != 1) ok = 0;
        else msg = f.s;
    }
    ok = ok && w == 0 && msg.p != NULL && read_message(msg, &o) && common(&o);
    if (!ok) {
        PyBuffer_Release(&buf);
        if (key.buf != NULL) PyBuffer_Release(&key);
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    PyObject *props = properties(&o);
    PyObject *born = o.has_born ? PyLong_FromLongLong(born_ms_of(&o)) : (Py_INCREF(Py_None), Py_None);
    PyObject *host = host_of(&o);
    uint64_t h[2];
    int hashed = key.buf == NULL ||
                 accel_id_hash(key.buf, o.topic.p != NULL ? o.topic.p : (const unsigned char *)"", (size_t)o.topic.n,
                               o.id.p, (size_t)o.id.n, h) == 0;
    if (props != NULL && born != NULL && host != NULL && hashed) {
        const char *topic = o.topic.p != NULL ? (const char *)o.topic.p : "";
        if (key.buf == NULL)
            out = Py_BuildValue("(s#(y#N)s#NNi)", topic, o.topic.n, (const char *)o.body.p, o.body.n, props,
                                (const char *)o.id.p, o.id.n, born, host, o.encoding == 2 ? 1 : 0);
        else                                /* with the dedup key of (topic, id): id_hash's bytes */
            out = Py_BuildValue("(s#(y#N)s#NNiy#)", topic, o.topic.n, (const char *)o.body.p, o.body.n, props,
                                (const char *)o.id.p, o.id.n, born, host, o.encoding == 2 ? 1 : 0,
                                (const char *)h, (Py_ssize_t)16);
        props = born = host = NULL;         /* Py_BuildValue's N took them (or released them) */
    }
    Py_XDECREF(props);
    Py_XDECREF(born);
    Py_XDECREF(host);
    PyBuffer_Release(&buf);
    if (key.buf != NULL) PyBuffer_Release(&key);
    return out;
}

static int same_span(span_t a, span_t b) {
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, (size_t)a.n) == 0);
}

/* send_many(raw, key) -> (topic, fields, keys, body bytes, born ms, born host, sys flag) or None: a
   SendMessageRequest of one or more messages, each the common message send_one reads (encoded_one's
   rule), all of one topic and with the same born time (or none), born host and sys flag (what
   MessageStore.put_slices takes for all its messages: tidemq.client's Producer(raw=False) sets none
   of them), as put_slices takes them: ``fields`` (a bytearray, 10 native uint32 per message: the
   offsets in ``raw`` of its id, tag, keys, properties and body, then their lengths; no keys, no
   properties: a common message has neither, and put_slices with the extra properties
   ``__MSGTYPE=NORMAL`` writes the record properties encoded_one gives, byte for byte), ``keys`` the
   dedup window's key of (topic, id) of each under ``key`` (16 bytes each, dedup.py), the bodies'
   bytes in all. Anything else is None: the caller decodes the request with protobuf. No Python
   object per message. */
#define SLICE_FIELDS 10

PyObject *py_send_many(PyObject *self, PyObject *args) {
    Py_buffer buf, key;
    if (!PyArg_ParseTuple(args, "y*y*:send_many", &buf, &key)) return NULL;
    reader_t r = {(const unsigned char *)buf.buf, buf.len, 0, 0};
    field_t f;
    one_t first, o;
    memset(&first, 0, sizeof first);
    int64_t first_born = 0;
    Py_ssize_t n = 0, cap = 16;
    long long nbytes = 0;
    int w;
    PyObject *fields = NULL, *keys = NULL, *out = NULL;
    if (key.len != DEDUP_KEY_BYTES) {
        PyErr_SetString(PyExc_ValueError, "send_many: the key is 16 bytes");
        goto done;
    }
    if (buf.len > (Py_ssize_t)UINT32_MAX) goto none;      /* offsets are uint32: protobuf's path takes it */
    fields = PyByteArray_FromStringAndSize(NULL, cap * SLICE_FIELDS * 4);
    keys = PyBytes_FromStringAndSize(NULL, cap * DEDUP_KEY_BYTES);
    if (fields == NULL || keys == NULL) goto done;
    const unsigned char *base = (const unsigned char *)buf.buf;
    for (;;) {
        r.seen = 0;                                   /* messages: a repeated field */
        w = next_field(&r, &f);
        if (w == 0) break;
        if (w < 0 || f.wire != 2 || f.num != 1) goto none;
        memset(&o, 0, sizeof o);
        if (!read_message(f.s, &o) || !common(&o)) goto none;
        int64_t born = o.has_born ? born_ms_of(&o) : 0;
        if (n == 0) {
            first = o;
            first_born = born;
        } else if (!same_span(o.topic, first.topic) || o.has_born != first.has_born || born != first_born ||
                   !same_span(o.host, first.host) || (o.encoding == 2) != (first.encoding == 2)) {
            goto none;
        }
        if (n == cap) {
            cap *= 2;
            if (PyByteArray_Resize(fields, cap * SLICE_FIELDS * 4) < 0 ||
                _PyBytes_Resize(&keys, cap * DEDUP_KEY_BYTES) < 0)
                goto done;
        }
        int tagged = o.has_tag && o.tag.n > 0;
        uint32_t fl[SLICE_FIELDS] = {(uint32_t)(o.id.p - base), tagged ? (uint32_t)(o.tag.p - base) : 0, 0, 0,
                                     (uint32_t)(o.body.p - base), (uint32_t)o.id.n, tagged ? (uint32_t)o.tag.n : 0,
                                     0, 0, (uint32_t)o.body.n};
        memcpy(PyByteArray_AS_STRING(fields) + n * SLICE_FIELDS * 4, fl, sizeof fl);
        uint64_t h[2];
        if (accel_id_hash(key.buf, o.topic.p != NULL ? o.topic.p : (const unsigned char *)"", (size_t)o.topic.n,
                          o.id.p, (size_t)o.id.n, h) < 0)
            goto done;
        memcpy(PyBytes_AS_STRING(keys) + n * DEDUP_KEY_BYTES, h, DEDUP_KEY_BYTES);
        nbytes += o.body.n;
        n++;
    }
    if (n == 0) goto none;
    if (PyByteArray_Resize(fields, n * SLICE_FIELDS * 4) < 0 || _PyBytes_Resize(&keys, n * DEDUP_KEY_BYTES) < 0)
        goto done;
    {
        PyObject *born = first.has_born ? PyLong_FromLongLong(first_born) : (Py_INCREF(Py_None), Py_None);
        PyObject *host = host_of(&first);
        if (born != NULL && host != NULL) {
            out = Py_BuildValue("(s#OOLNNi)", first.topic.p != NULL ? (const char *)first.topic.p : "",
                                first.topic.n, fields, keys, nbytes, born, host, first.encoding == 2 ? 1 : 0);
        } else {
            Py_XDECREF(born);
            Py_XDECREF(host);
        }
    }
    goto done;
none:
    out = Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(fields);
    Py_XDECREF(keys);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&key);
    return out;
}

/* a varint at q (v < 2**64): its length */
static Py_ssize_t put_varint(unsigned char *q, uint64_t v) {
    Py_ssize_t k = 0;
    while (v >= 0x80) {
        q[k++] = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    q[k++] = (unsigned char)v;
    return k;
}

static Py_ssize_t varint_len(uint64_t v) {
    Py_ssize_t k = 1;
    while (v >= 0x80) {
        v >>= 7;
        k++;
    }
    return k;
}

/* answer_stored(status, raw, fields, offsets) -> bytes: the serialized SendMessageResponse of a batch
   stored whole (send_message.answer_many's first case; its Python twin py_answer_stored): ``status``
   the encoded answer status (field 1 with its key and length: every entry's too), then one entry
   per message: the status, its id (``raw``'s slice ``fields`` names, 10 native uint32 per message,
   as send_many gives them; left out when empty), its queue offset (``offsets``: a list of ints;
   left out when <= 0). */
PyObject *py_answer_stored(PyObject *self, PyObject *args) {
    Py_buffer st, raw, fields;
    PyObject *offsets, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O!:answer_stored", &st, &raw, &fields, &PyList_Type, &offsets)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    const unsigned char *F = (const unsigned char *)fields.buf;
    if (fields.len != n * SLICE_FIELDS * 4) {
        PyErr_SetString(PyExc_ValueError, "answer_stored: 10 uint32 of fields per offset");
        goto done;
    }
    Py_ssize_t total = st.len;
    for (Py_ssize_t i = 0; i < n; i++) {            /* sizes first: every number checked before a byte is written */
        uint32_t a = ld_u32(F, SLICE_FIELDS * i), li = ld_u32(F, SLICE_FIELDS * i + 5);
        long long off;
        if ((uint64_t)a + li > (uint64_t)raw.len) {
            PyErr_SetString(PyExc_ValueError, "answer_stored: an id outside the request");
            goto done;
        }
        if (exact_i64(PyList_GET_ITEM(offsets, i), &off) < 0) goto done;
        Py_ssize_t entry = st.len + (li ? 1 + varint_len(li) + li : 0) + (off > 0 ? 1 + varint_len((uint64_t)off) : 0);
        if (total > PY_SSIZE_T_MAX / 2 - entry - 16) {
            PyErr_SetString(PyExc_OverflowError, "answer_stored: too large");
            goto done;
        }
        total += 1 + varint_len((uint64_t)entry) + entry;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) goto done;
    unsigned char *q = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(q, st.buf, (size_t)st.len);
    q += st.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t a = ld_u32(F, SLICE_FIELDS * i), li = ld_u32(F, SLICE_FIELDS * i + 5);
        long long off = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));     /* exact ints, checked above */
        Py_ssize_t entry = st.len + (li ? 1 + varint_len(li) + li : 0) + (off > 0 ? 1 + varint_len((uint64_t)off) : 0);
        *q++ = 0x12;
        q += put_varint(q, (uint64_t)entry);
        memcpy(q, st.buf, (size_t)st.len);
        q += st.len;
        if (li) {
            *q++ = 0x12;
            q += put_varint(q, li);
            memcpy(q, (const unsigned char *)raw.buf + a, li);
            q += li;
        }
        if (off > 0) {
            *q++ = 0x20;
            q += put_varint(q, (uint64_t)off);
        }
    }
done:
    PyBuffer_Release(&st);
    PyBuffer_Release(&raw);
    PyBuffer_Release(&fields);
    return out;
}

/* answer_one_stored(status, message_id, offset) -> bytes: the serialized SendMessageResponse of one
   message stored (send_message.answer_stored_one, its Python twin): ``status`` the encoded OK status
   (field 1 with its key and length, the answer's and the entry's), then the entry: the status, the
   id (UTF-8, surrogates passed; left out when empty), the queue offset (left out when 0; >= 0). */
PyObject *py_answer_one_stored(PyObject *self, PyObject *args) {
    Py_buffer st;
    PyObject *mid;
    long long off;
    if (!PyArg_ParseTuple(args, "y*UL:answer_one_stored", &st, &mid, &off)) return NULL;
    PyObject *out = NULL, *raw = NULL;
    if (off < 0) {
        PyErr_SetString(PyExc_ValueError, "answer_one_stored: a queue offset >= 0");
        goto done;
    }
    raw = PyUnicode_AsEncodedString(mid, "utf-8", "surrogatepass");
    if (raw == NULL) goto done;
    Py_ssize_t li = PyBytes_GET_SIZE(raw);
    if (li > PY_SSIZE_T_MAX / 4 || st.len > PY_SSIZE_T_MAX / 4) {
        PyErr_SetString(PyExc_OverflowError, "answer_one_stored: too large");
        goto done;
    }
    Py_ssize_t entry = st.len + (li ? 1 + varint_len((uint64_t)li) + li : 0) +
                       (off > 0 ? 1 + varint_len((uint64_t)off) : 0);
    out = PyBytes_FromStringAndSize(NULL, st.len + 1 + varint_len((uint64_t)entry) + entry);
    if (out == NULL) goto done;
    unsigned char *q = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(q, st.buf, (size_t)st.len);
    q += st.len;
    *q++ = 0x12;
    q += put_varint(q, (uint64_t)entry);
    memcpy(q, st.buf, (size_t)st.len);
    q += st.len;
    if (li) {
        *q++ = 0x12;
        q += put_varint(q, (uint64_t)li);
        memcpy(q, PyBytes_AS_STRING(raw), (size_t)li);
        q += li;
    }
    if (off > 0) {
        *q++ = 0x20;
        q += put_varint(q, (uint64_t)off);
    }
done:
    Py_XDECREF(raw);
    PyBuffer_Release(&st);
    return out;
}
