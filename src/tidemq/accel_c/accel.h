/* tidemq._accel: the per-record loops of the write and read paths, compiled.

   Optional: tidemq/accel.py selects these functions when this module is built (``pip install``
   builds it with the machine's C compiler; setup.py marks it optional) and TIDEMQ_ACCEL is not
   0, and the pure-Python versions otherwise. Both produce the same bytes and the same outcomes:
   tests/test_accel.py holds them to it (random batches, damaged input), and CI runs the suite
   both ways. Nothing here does I/O, allocates segments or decides policy: bytes in, bytes out.

   The commit-log record, big-endian (the RocketMQ v1 layout, tidemq/record/codec.py):

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
     crc32(data, value=0)                    zlib's CRC-32 (ISA-L's when tidemq.record.crc found it)
     use_crc(address)                        take ISA-L's crc32_gzip_refl at this address
     append(...)                             pack prepared messages into a segment (commit_log.py)
     append_slices(...)                      pack messages given as slices of one buffer (commit_log.py)
     put_one(...)                            the one-message put's common case: checked, packed into the
                                             segment, its dispatch entry built, in one call (put_one.py)
     scan_run(buf, pos, limit, positions)    verify consecutive records (codec.scan_run)
     damaged(buf, starts, sizes, expect)     which records fail their CRCs or are not the ones their
                                             consume-queue units stand for (integrity.py)
     index_put(...)                          the index entries of a batch (index_file.py)
     index_put_hashed(...)                   the same from items already hashed (append_slices')
     dispatch_merge(entries, index)          the deferred dispatches' units and index items merged (dispatch.py)
     frame_slices(raw, reserved, id_max, key)  a SendRecords frame parsed into arrays (send_records.py)
     check_slices(data, fields, skip, reserved)  the record validator over a batch of slices (validate.py)
     check_encoded(properties, reserved)     the record validator over encoded properties (validate.py)
     send_one(raw[, key])                    the common SendMessage request, read from its bytes (wire.py),
                                             with its dedup key when given the window's key (dedup.py)
     send_many(raw, key)                     a SendMessage request of common messages of one topic, as
                                             put_slices takes it, with its dedup keys (the same)
     answer_stored(status, raw, fields, offsets)  the SendMessageResponse of a batch stored whole (send_message.py)
     answer_one_stored(status, id, offset)   the SendMessageResponse of one message stored (send_message.py)
     id_hash(key, topic, id)                 the send dedup window's key of a message (dedup.py: SipHash)
     window_find(...), window_put(...)       the dedup window's tables (dedup.py)
     decode_run(cls, data, sizes)            records back to back as StoredMessage objects
     frame_records(buf, starts, sizes, room, head, expect)  a queue's records copied after room for a
                                             header, checked (CRCs; topic, queue, queue offset), and the
                                             header written into the room (framing.py)
     replica_scan(data, offset, segment_size, deleted, want_index)  a follower's frame checked and its
                                             consume-queue units and index items built (replica_scan.py)
   Each one's contract is in its Python twin's docstring; the argument lists are in the source
   files: crc.c (crc32, use_crc), write.c (append, append_slices, index_put, index_put_hashed), put_one.c (put_one),
   frame.c (frame_slices), validate.c (check_slices, check_encoded and the text rules the lanes share), send_one.c (send_one, send_many, answer_stored), dedup.c (id_hash, window_find, window_put), read.c (scan_run, damaged,
   decode_run, frame_records), replica.c (replica_scan), dispatch.c (dispatch_merge), module.c (the method table).

   Callers are trusted with nothing: every function checks its arguments' types and bounds (sizes,
   offsets and counts that a sum or a product could overflow included) before it touches memory, reads
   numbers out of caller buffers with ld_* (no alignment assumed), takes exact ints where a Python
   __index__ could run code in the middle of its loop, and copies what it needs before it releases
   the GIL (frame_records: nothing another thread can change is read after). CI builds the module with
   -fsanitize=address,undefined and runs these tests under it (.ci/sanitize). */


#ifndef TIDEMQ_ACCEL_H
#define TIDEMQ_ACCEL_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define ACCEL_VERSION 15

#define MAGIC_U32 0xDAA320A7u
#define OFF_BODY 88
#define FIXED_OVERHEAD 91
#define CRC_DIGITS_BACK 11
#define RECORD_MIN 111
#define TAIL_MIN 23
#define UNIT_SIZE 20

/* CRC-32 (crc.c): ISA-L's function when tidemq.record.crc found it (use_crc), else slice-by-8 tables */
typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, uint64_t);
extern crc_fn accel_isal_crc;
void accel_crc_init_tables(void);
uint32_t accel_crc_tables(uint32_t crc, const unsigned char *p, size_t n);

static inline uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n) {
    if (accel_isal_crc != NULL && n >= 64) return accel_isal_crc(crc, p, (uint64_t)n);
    return accel_crc_tables(crc, p, n);
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

/* native numbers k of a caller's buffer, wherever it is aligned */
static inline int64_t ld_i64(const void *p, Py_ssize_t k) {
    int64_t v;
    memcpy(&v, (const char *)p + 8 * k, 8);
    return v;
}
static inline uint64_t ld_u64(const void *p, Py_ssize_t k) {
    uint64_t v;
    memcpy(&v, (const char *)p + 8 * k, 8);
    return v;
}
static inline int32_t ld_i32(const void *p, Py_ssize_t k) {
    int32_t v;
    memcpy(&v, (const char *)p + 4 * k, 4);
    return v;
}
static inline uint32_t ld_u32(const void *p, Py_ssize_t k) {
    uint32_t v;
    memcpy(&v, (const char *)p + 4 * k, 4);
    return v;
}
static inline void st_u64(void *p, Py_ssize_t k, uint64_t v) { memcpy((char *)p + 8 * k, &v, 8); }

/* an exact int (no __index__ of a caller's object runs in the middle of a loop); 0 or -1 (TypeError) */
static inline int exact_i64(PyObject *o, long long *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "an int is needed, not %.80s", Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

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

/* the module's functions, one source file per part (module.c lists them) */
PyObject *py_crc32(PyObject *self, PyObject *args);              /* crc.c */
PyObject *py_use_crc(PyObject *self, PyObject *arg);
PyObject *py_append(PyObject *self, PyObject *args);             /* write.c */
PyObject *py_append_slices(PyObject *self, PyObject *args);
PyObject *py_index_put(PyObject *self, PyObject *args);
PyObject *py_index_put_hashed(PyObject *self, PyObject *args);
int accel_write_init(void);
/* write.c's helpers the one-message put shares (put_one.c): the topic being written, a record's header */
typedef struct {                 /* the write-path state of the topic being written (TopicState) */
    PyObject *t;                 /* borrowed from the batch item */
    PyObject *offsets;           /* list, new reference */
    PyObject *queues;            /* list, new reference */
    PyObject *name;              /* bytes, new reference */
    PyObject *ids;               /* write_ids as a list or tuple (PySequence_Fast), new reference; NULL: a range */
    long long id_start, id_step; /* write_ids as a range: start + step * j */
    Py_ssize_t nids;             /* how many write_ids */
    long long rr;
    Py_ssize_t qc;
} topic_cur;
typedef struct {              /* the header fields of a record (codec.py's layout) */
    uint32_t size, body_crc, queue_id, flag, sys_flag, reconsume, body_len;
    int64_t queue_offset, phys, born_ts, store_ts, prep_tx;
    const unsigned char *born_host, *store_host;      /* 8 bytes each */
} header_t;
void topic_clear(topic_cur *c);
int topic_flush(topic_cur *c);
int topic_load(topic_cur *c, PyObject *t);
int next_queue(topic_cur *c, long long *qid);
int add_unit(PyObject *units, PyObject *cq, long long qoff, const unsigned char *unit);
void write_head(unsigned char *r, const header_t *h, const unsigned char *body);
int add_index_items(PyObject *out, uint32_t prefix_crc, const unsigned char *ks, Py_ssize_t lk,
                    const unsigned char *id, Py_ssize_t li, int64_t phys);
PyObject *py_put_one(PyObject *self, PyObject *args);            /* put_one.c */
int accel_put_one_init(void);
PyObject *py_frame_slices(PyObject *self, PyObject *args);       /* frame.c */
PyObject *py_check_slices(PyObject *self, PyObject *args);       /* validate.c */
PyObject *py_check_encoded(PyObject *self, PyObject *args);
int accel_utf8_ok(const unsigned char *p, Py_ssize_t n, uint32_t *hash);
int accel_has_sep(const unsigned char *p, Py_ssize_t n);
int accel_text_ok(const unsigned char *p, Py_ssize_t n, uint32_t *hash);
int accel_check_keys(const unsigned char *p, Py_ssize_t n);
int accel_check_props(const unsigned char *p, Py_ssize_t n, PyObject *reserved, Py_ssize_t *name_at,
                      Py_ssize_t *name_len);
int accel_reserved_ok(PyObject *reserved, const char *who);
PyObject *py_send_one(PyObject *self, PyObject *args);           /* send_one.c */
PyObject *py_send_many(PyObject *self, PyObject *args);          /* send_one.c */
PyObject *py_answer_stored(PyObject *self, PyObject *args);
PyObject *py_answer_one_stored(PyObject *self, PyObject *args);
PyObject *py_id_hash(PyObject *self, PyObject *args);            /* dedup.c */
PyObject *py_window_find(PyObject *self, PyObject *args);
PyObject *py_window_put(PyObject *self, PyObject *args);
#define DEDUP_KEY_BYTES 16
int accel_id_hash(const unsigned char key[DEDUP_KEY_BYTES], const unsigned char *topic, size_t tl,
                  const unsigned char *id, size_t il, uint64_t out[2]);
PyObject *py_scan_run(PyObject *self, PyObject *args);           /* read.c */
PyObject *py_damaged(PyObject *self, PyObject *args);
PyObject *py_decode_run(PyObject *self, PyObject *args);
PyObject *py_frame_records(PyObject *self, PyObject *args);
PyObject *py_replica_scan(PyObject *self, PyObject *args);       /* replica.c */
void accel_index_entry(unsigned char *b, Py_ssize_t at, Py_ssize_t count, uint32_t h, int64_t phys,
                       long long diff_s, const unsigned char *slot_was);   /* write.c: an index entry */
PyObject *py_dispatch_merge(PyObject *self, PyObject *args);     /* dispatch.c */
PyObject *py_index_put_slots(PyObject *self, PyObject *args);

#endif
