/* tidemq._accel: the send dedup window's table (broker/produce/dedup.py; the record layout and the
   list of functions: accel.h)

   A message is known by a keyed 128-bit hash of its topic and id: SipHash-2-4 with 128 bits of output
   (Aumasson & Bernstein's reference, outlen 16) of topic + b"\0" + id under a 16-byte key the broker
   draws at random when it starts (never stored, never sent): nobody outside can compute a key, so
   nobody can craft an id whose key is another message's (an unkeyed hash, Murmur3 before, let an
   attacker make a victim's next sends vanish as "duplicates"). As two native uint64 (h1, h2); (0, 0)
   stands for an empty slot, so a hash that comes out (0, 0) is taken as (1, 0). A match is still
   confirmed by the message itself (resends.py reads the stored record and compares topic and id).

   A table (one generation of the window) is two bytearrays of ``cap`` slots (cap a power of 2):
   keys (h1, h2: 16 bytes per slot) and values (16 bytes per slot: int64 queue offset, int64 commit-log
   offset of the first store). Open addressing, linear probing from h1 & (cap - 1); the window keeps a
   table at most half full, so a probe ends at an empty slot within a few steps. */

#include "accel.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                  \
    do {                                                                                          \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                 \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                    \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                    \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                 \
    } while (0)

static inline uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int j = 7; j >= 0; j--) v = (v << 8) | p[j];
    return v;
}

/* SipHash-2-4 of p[0:len] under key k (16 bytes), 128-bit output (out[0], out[1]: its two halves, as
   the reference's little-endian output bytes read as uint64) */
static void siphash128(const unsigned char *p, size_t len, const unsigned char *k, uint64_t out[2]) {
    uint64_t k0 = le64(k), k1 = le64(k + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    v1 ^= 0xee;
    const unsigned char *end = p + (len - (len % 8));
    for (; p != end; p += 8) {
        uint64_t m = le64(p);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = ((uint64_t)len) << 56;
    for (int j = (int)(len & 7) - 1; j >= 0; j--) b |= ((uint64_t)p[j]) << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xee;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[0] = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[1] = v0 ^ v1 ^ v2 ^ v3;
}

/* the window's key of (topic, id) into out[2]; 0, or -1 (MemoryError set) */
int accel_id_hash(const unsigned char key[DEDUP_KEY_BYTES], const unsigned char *topic, size_t tl,
                  const unsigned char *id, size_t il, uint64_t out[2]) {
    unsigned char small[512], *b = small;
    size_t n = tl + 1 + il;
    if (n > sizeof small) {
        b = PyMem_Malloc(n);
        if (b == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    memcpy(b, topic, tl);
    b[tl] = 0;
    memcpy(b + tl + 1, id, il);
    siphash128(b, n, key, out);
    if (b != small) PyMem_Free(b);
    if (out[0] == 0 && out[1] == 0) out[0] = 1;
    return 0;
}

/* id_hash(key, topic, id) -> 16 bytes: the window's key of (topic, id) under ``key`` (16 bytes) */
PyObject *py_id_hash(PyObject *self, PyObject *args) {
    Py_buffer k, t, i;
    if (!PyArg_ParseTuple(args, "y*y*y*:id_hash", &k, &t, &i)) return NULL;
    uint64_t h[2];
    int r = -1;
    if (k.len != DEDUP_KEY_BYTES)
        PyErr_SetString(PyExc_ValueError, "id_hash: the key is 16 bytes");
    else
        r = accel_id_hash(k.buf, t.buf, (size_t)t.len, i.buf, (size_t)i.len, h);
    PyBuffer_Release(&k);
    PyBuffer_Release(&t);
    PyBuffer_Release(&i);
    return r < 0 ? NULL : PyBytes_FromStringAndSize((const char *)h, 16);
}

/* the slot of key (h1, h2) in a table of cap slots: where it is, or the empty slot where it would go
   (cap: a full table, which the window never lets happen) */
static inline size_t probe(const void *keys, size_t cap, uint64_t h1, uint64_t h2, int *found) {
    size_t s = (size_t)h1 & (cap - 1);
    for (size_t steps = 0; steps < cap; steps++) {
        uint64_t k0 = ld_u64(keys, 2 * (Py_ssize_t)s), k1 = ld_u64(keys, 2 * (Py_ssize_t)s + 1);
        if (k0 == h1 && k1 == h2) {
            *found = 1;
            return s;
        }
        if (k0 == 0 && k1 == 0) {
            *found = 0;
            return s;
        }
        s = (s + 1) & (cap - 1);
    }
    *found = 0;
    return cap;
}

static int table_ok(Py_buffer *keys, Py_buffer *vals, size_t *cap) {
    size_t c = (size_t)vals->len / 16;
    if (c == 0 || (c & (c - 1)) != 0 || (size_t)keys->len != 16 * c || (size_t)vals->len != 16 * c) {
        PyErr_SetString(PyExc_ValueError, "a window table: keys of 16 bytes and values of 16 per slot, "
                                          "a power of 2 of slots");
        return 0;
    }
    *cap = c;
    return 1;
}

/* window_find(new_keys, new_vals, old_keys, old_vals, hashes) -> [(i, queue offset, log offset, generation)]

   Which of the keys in ``hashes`` (n x 16 bytes; (0, 0): none, skipped) either table holds: the
   newer first (generation 0), else the older one (1), with the values it holds. Usually []. */
PyObject *py_window_find(PyObject *self, PyObject *args) {
    Py_buffer nk, nv, ok, ov, hs;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*:window_find", &nk, &nv, &ok, &ov, &hs)) return NULL;
    PyObject *out = NULL;
    size_t ncap, ocap;
    if (!table_ok(&nk, &nv, &ncap) || !table_ok(&ok, &ov, &ocap)) goto done;
    if (hs.len % 16 != 0) {
        PyErr_SetString(PyExc_ValueError, "window_find: hashes of 16 bytes each");
        goto done;
    }
    out = PyList_New(0);
    if (out == NULL) goto done;
    Py_ssize_t n = hs.len / 16;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h1 = ld_u64(hs.buf, 2 * i), h2 = ld_u64(hs.buf, 2 * i + 1);
        if (h1 == 0 && h2 == 0) continue;
        int found, gen = 0;
        size_t s = probe(nk.buf, ncap, h1, h2, &found);
        const void *vals = nv.buf;
        if (!found) {
            gen = 1;
            s = probe(ok.buf, ocap, h1, h2, &found);
            vals = ov.buf;
        }
        if (!found) continue;          /* (found: s is a slot of that table) */
        PyObject *hit = Py_BuildValue("nLLi", i, (long long)ld_i64(vals, 2 * (Py_ssize_t)s),
                                      (long long)ld_i64(vals, 2 * (Py_ssize_t)s + 1), gen);
        if (hit == NULL || PyList_Append(out, hit) < 0) {
            Py_XDECREF(hit);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(hit);
    }
done:
    PyBuffer_Release(&nk);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&ok);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&hs);
    return out;
}

/* window_put(keys, vals, hashes, qoffs, physs, select, start, room) -> (next, added)

   Puts keys ``hashes[i]`` with values (``qoffs[i]``, ``physs[i]``: n int64 each) into the table, for
   i from ``start`` on where ``select`` (n bytes, or None: all) is not 0 and the key is not (0, 0); a
   key already there takes the new values. Stops after ``room`` new keys (the caller's generation is
   full) and returns the i to go on from (n: all) and how many new keys went in. */
PyObject *py_window_put(PyObject *self, PyObject *args) {
    Py_buffer keys, vals, hs, vs, ps;
    PyObject *select;
    Py_ssize_t start, room;
    if (!PyArg_ParseTuple(args, "w*w*y*y*y*Onn:window_put", &keys, &vals, &hs, &vs, &ps, &select, &start, &room))
        return NULL;
    PyObject *out = NULL;
    Py_buffer sel = {0};
    size_t cap;
    Py_ssize_t n = hs.len / 16, i = start, added = 0;
    if (!table_ok(&keys, &vals, &cap)) goto done;
    if (hs.len % 16 != 0 || vs.len != 8 * n || ps.len != 8 * n || start < 0 || room < 0) {
        PyErr_SetString(PyExc_ValueError, "window_put: hashes of 16 bytes and two values of 8 per message");
        goto done;
    }
    if (select != Py_None) {
        if (PyObject_GetBuffer(select, &sel, PyBUF_SIMPLE) < 0) goto done;
        if (sel.len != n) {
            PyErr_SetString(PyExc_ValueError, "window_put: one select byte per message");
            goto done;
        }
    }
    const unsigned char *sp = sel.buf;
    for (; i < n && added < room; i++) {
        uint64_t h1 = ld_u64(hs.buf, 2 * i), h2 = ld_u64(hs.buf, 2 * i + 1);
        if ((h1 == 0 && h2 == 0) || (sp != NULL && sp[i] == 0)) continue;
        int found;
        size_t s = probe(keys.buf, cap, h1, h2, &found);
        if (s >= cap) {
            PyErr_SetString(PyExc_ValueError, "window_put: the table is full");
            goto done;
        }
        if (!found) {
            st_u64(keys.buf, 2 * (Py_ssize_t)s, h1);
            st_u64(keys.buf, 2 * (Py_ssize_t)s + 1, h2);
            added++;
        }
        st_u64(vals.buf, 2 * (Py_ssize_t)s, (uint64_t)ld_i64(vs.buf, i));
        st_u64(vals.buf, 2 * (Py_ssize_t)s + 1, (uint64_t)ld_i64(ps.buf, i));
    }
    out = Py_BuildValue("nn", i, added);
done:
    if (sel.obj != NULL) PyBuffer_Release(&sel);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&vals);
    PyBuffer_Release(&hs);
    PyBuffer_Release(&vs);
    PyBuffer_Release(&ps);
    return out;
}
