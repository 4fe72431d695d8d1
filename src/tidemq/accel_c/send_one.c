/* tidemq._accel: the common SendMessage request read straight from its bytes (the record layout and
   the list of functions: accel.h; the rule it follows: broker/wire.py encoded_one)

   send_one(raw) -> (topic, (body, properties, tags hash, message id, None), born ms, born host, sys flag)
   or None. ``raw`` is an apache.rocketmq.v2.SendMessageRequest as the official clients send one
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

/* The next field of p[0:n] from *k: 1 for a varint (its value in *v), 2 for a length-delimited
   field (its bytes in *s), *num its number; 0: the end; -1: not a field this reader takes (*num
   unset: the caller answers None). */
static int next_field(const unsigned char *p, Py_ssize_t n, Py_ssize_t *k, uint32_t *num, span_t *s, uint64_t *v) {
    uint64_t key, len;
    if (*k >= n) return 0;
    if (!varint(p, n, k, &key) || key > 0xFFFFFFFFu) return -1;
    *num = (uint32_t)(key >> 3);
    switch (key & 7) {
    case 0:
        if (*num == 0 || !varint(p, n, k, v)) return -1;
        return 1;
    case 2:
        if (*num == 0 || !varint(p, n, k, &len) || len > (uint64_t)(n - *k)) return -1;
        s->p = p + *k;
        s->n = (Py_ssize_t)len;
        *k += (Py_ssize_t)len;
        return 2;
    default:
        return -1;
    }
}

typedef struct {
    span_t topic, body, tag, id, host;
    int has_topic_name, has_tag, has_born;
    int64_t seconds;
    int64_t nanos;
    int64_t type, encoding;
} one_t;

/* once: a field seen a second time is not taken */
#define ONCE(bit) do { if (seen & (1u << (bit))) return 0; seen |= 1u << (bit); } while (0)

static int read_resource(span_t r, one_t *o) {
    Py_ssize_t k = 0;
    uint32_t num, seen = 0;
    span_t s;
    uint64_t v;
    int w;
    while ((w = next_field(r.p, r.n, &k, &num, &s, &v)) != 0) {
        if (w != 2 || (num != 1 && num != 2)) return 0;
        ONCE(num);
        if (!accel_utf8_ok(s.p, s.n, NULL)) return 0;
        if (num == 2) {
            o->topic = s;
            o->has_topic_name = 1;
        }
    }
    return 1;
}

static int read_timestamp(span_t r, one_t *o) {
    Py_ssize_t k = 0;
    uint32_t num, seen = 0;
    span_t s;
    uint64_t v;
    int w;
    o->has_born = 1;
    while ((w = next_field(r.p, r.n, &k, &num, &s, &v)) != 0) {
        if (w != 1 || (num != 1 && num != 2)) return 0;
        ONCE(num);
        if (num == 1) o->seconds = (int64_t)v;
        else o->nanos = (int32_t)(uint32_t)v;          /* int32, as protobuf reads it */
    }
    return 1;
}

static int read_system(span_t r, one_t *o) {
    Py_ssize_t k = 0;
    uint32_t num, seen = 0;
    span_t s;
    uint64_t v;
    int w;
    while ((w = next_field(r.p, r.n, &k, &num, &s, &v)) != 0) {
        if (w < 0 || num > 31) return 0;
        ONCE(num);
        if (w == 2 && (num == 1 || num == 3 || num == 8)) {
            if (!accel_utf8_ok(s.p, s.n, NULL)) return 0;
            if (num == 1) {
                o->tag = s;
                o->has_tag = 1;
            } else if (num == 3) {
                o->id = s;
            } else {
                o->host = s;
            }
        } else if (w == 1 && (num == 5 || num == 6)) {
            int64_t e = (int32_t)(uint32_t)v;             /* an enum: int32 */
            if (num == 5) o->encoding = e;
            else o->type = e;
        } else if (w == 2 && num == 7) {
            if (!read_timestamp(s, o)) return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

static int read_message(span_t r, one_t *o) {
    Py_ssize_t k = 0;
    uint32_t num, seen = 0;
    span_t s;
    uint64_t v;
    int w;
    while ((w = next_field(r.p, r.n, &k, &num, &s, &v)) != 0) {
        if (w != 2 || (num != 1 && num != 3 && num != 4)) return 0;
        ONCE(num);
        if (num == 1 && !read_resource(s, o)) return 0;
        if (num == 3 && !read_system(s, o)) return 0;
        if (num == 4) o->body = s;
    }
    return 1;
}

static inline int has_sep(span_t s) {
    return memchr(s.p, 1, (size_t)s.n) != NULL || memchr(s.p, 2, (size_t)s.n) != NULL;
}

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

PyObject *py_send_one(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*:send_one", &buf)) return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len, k = 0;
    one_t o;
    memset(&o, 0, sizeof o);
    uint32_t num;
    span_t msg = {NULL, 0}, s;
    uint64_t v;
    int w, messages = 0, ok = 1;
    while (ok && (w = next_field(p, n, &k, &num, &s, &v)) != 0) {
        if (w != 2 || num != 1 || ++messages > 1) ok = 0;
        else msg = s;
    }
    ok = ok && messages == 1 && read_message(msg, &o);
    /* encoded_one's rule */
    ok = ok && (o.type == 0 || o.type == 1) && o.id.n > 0 && o.body.n > 0 && !has_sep(o.id);
    ok = ok && !(o.has_tag && o.tag.n > 0 && has_sep(o.tag));
    ok = ok && (o.host.n == 0 || plain_ipv4(o.host));
    ok = ok && (!o.has_born || (o.seconds > -BORN_SECONDS_MAX && o.seconds < BORN_SECONDS_MAX));
    if (!ok) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    uint32_t th = 0;
    int tagged = o.has_tag && o.tag.n > 0;
    if (tagged) accel_utf8_ok(o.tag.p, o.tag.n, &th);
    Py_ssize_t plen = (Py_ssize_t)(sizeof HEAD_ID - 1) + o.id.n + (Py_ssize_t)(sizeof HEAD_TYPE - 1) +
                      (tagged ? (Py_ssize_t)(sizeof TAGS_NAME - 1) + o.tag.n + 1 : 0);
    PyObject *props = PyBytes_FromStringAndSize(NULL, plen);
    PyObject *out = NULL;
    if (props != NULL) {
        char *q = PyBytes_AS_STRING(props);
        memcpy(q, HEAD_ID, sizeof HEAD_ID - 1);
        q += sizeof HEAD_ID - 1;
        memcpy(q, o.id.p, (size_t)o.id.n);
        q += o.id.n;
        memcpy(q, HEAD_TYPE, sizeof HEAD_TYPE - 1);
        q += sizeof HEAD_TYPE - 1;
        if (tagged) {
            memcpy(q, TAGS_NAME, sizeof TAGS_NAME - 1);
            q += sizeof TAGS_NAME - 1;
            memcpy(q, o.tag.p, (size_t)o.tag.n);
            q += o.tag.n;
            *q = 2;
        }
        PyObject *born = Py_None, *host = Py_None;
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
        if (o.has_born) {
            int64_t q_ms = o.nanos / 1000000;
            if (o.nanos % 1000000 != 0 && o.nanos < 0) q_ms -= 1;       /* Python's floor division */
            Py_DECREF(born);
            born = PyLong_FromLongLong(o.seconds * 1000 + q_ms);
        }
        if (o.host.n > 0) {            /* plain ASCII (plain_ipv4): "<host>:0" */
            Py_DECREF(host);
            host = PyUnicode_New(o.host.n + 2, 127);
            if (host != NULL) {
                Py_UCS1 *h = PyUnicode_1BYTE_DATA(host);
                memcpy(h, o.host.p, (size_t)o.host.n);
                h[o.host.n] = ':';
                h[o.host.n + 1] = '0';
            }
        }
        int32_t signed_th = (int32_t)th;
        if (born != NULL && host != NULL)
            out = Py_BuildValue("(s#(y#NLs#O)NNi)", o.topic.p != NULL ? (const char *)o.topic.p : "", o.topic.n,
                                (const char *)o.body.p, o.body.n, props, (long long)signed_th,
                                (const char *)o.id.p, o.id.n, Py_None, born, host, o.encoding == 2 ? 1 : 0);
        else {
            Py_DECREF(props);
            Py_XDECREF(born);
            Py_XDECREF(host);
        }
        props = NULL;          /* Py_BuildValue's N took it (or it is released above) */
    }
    PyBuffer_Release(&buf);
    return out;
}
