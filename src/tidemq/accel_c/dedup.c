/* tidemq._accel: the send dedup window's table (broker/produce/dedup.py; the record layout and the
   list of functions: accel.h)

   A message is known by a 128-bit hash of its topic and id: MurmurHash3_x64_128 (seed 0) of
   topic + b"\0" + id, as two native uint64 (h1, h2); (0, 0) stands for an empty slot, so a hash
   that comes out (0, 0) is taken as (1, 0). At 128 bits two different (topic, id) pairs share a
   hash with a probability of ~1e-38 per lookup: a resend is recognised by its hash alone.

   A table (one generation of the window) is two bytearrays of ``cap`` slots (cap a power of 2):
   keys (h1, h2: 16 bytes per slot) and values (int64: the first store's queue offset). Open
   addressing, linear probing from h1 & (cap - 1); the window keeps a table at most half full, so a
   probe ends at an empty slot within a few steps. */

#include "accel.h"

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static inline uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int j = 7; j >= 0; j--) v = (v << 8) | p[j];
    return v;
}

/* MurmurHash3_x64_128 of p[0:len], seed 0 */
static void murmur3_128(const unsigned char *p, size_t len, uint64_t out[2]) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2 = 0, k1, k2;
    size_t nblocks = len / 16;
    for (size_t i = 0; i < nblocks; i++) {
        k1 = le64(p + 16 * i);
        k2 = le64(p + 16 * i + 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    const unsigned char *t = p + 16 * nblocks;
    size_t rest = len & 15;
    k1 = k2 = 0;
    for (size_t j = rest; j > 8; j--) k2 ^= (uint64_t)t[j - 1] << (8 * (j - 9));
    if (rest > 8) {
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
    }
    for (size_t j = rest < 8 ? rest : 8; j > 0; j--) k1 ^= (uint64_t)t[j - 1] << (8 * (j - 1));
    if (rest > 0) {
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    out[0] = h1;
    out[1] = h2;
}

/* the window's key of (topic, id) into out[2]; 0, or -1 (MemoryError set) */
int accel_id_hash(const unsigned char *topic, size_t tl, const unsigned char *id, size_t il, uint64_t out[2]) {
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
    murmur3_128(b, n, out);
    if (b != small) PyMem_Free(b);
    if (out[0] == 0 && out[1] == 0) out[0] = 1;
    return 0;
}

/* id_hash(topic, id) -> 16 bytes: the window's key of (topic, id) (two native uint64) */
PyObject *py_id_hash(PyObject *self, PyObject *args) {
    Py_buffer t, i;
    if (!PyArg_ParseTuple(args, "y*y*:id_hash", &t, &i)) return NULL;
    uint64_t h[2];
    int r = accel_id_hash(t.buf, (size_t)t.len, i.buf, (size_t)i.len, h);
    PyBuffer_Release(&t);
    PyBuffer_Release(&i);
    return r < 0 ? NULL : PyBytes_FromStringAndSize((const char *)h, 16);
}

/* the slot of key (h1, h2) in a table of cap slots: where it is, or the empty slot where it would go
   (cap: a full table, which the window never lets happen) */
static inline size_t probe(const uint64_t *keys, size_t cap, uint64_t h1, uint64_t h2, int *found) {
    size_t s = (size_t)h1 & (cap - 1);
    for (size_t steps = 0; steps < cap; steps++) {
        const uint64_t *k = keys + 2 * s;
        if (k[0] == h1 && k[1] == h2) {
            *found = 1;
            return s;
        }
        if (k[0] == 0 && k[1] == 0) {
            *found = 0;
            return s;
        }
        s = (s + 1) & (cap - 1);
    }
    *found = 0;
    return cap;
}

static int table_ok(Py_buffer *keys, Py_buffer *vals, size_t *cap) {
    size_t c = (size_t)vals->len / 8;
    if (c == 0 || (c & (c - 1)) != 0 || (size_t)keys->len != 16 * c) {
        PyErr_SetString(PyExc_ValueError, "a window table: keys of 16 bytes and values of 8 per slot, "
                                          "a power of 2 of slots");
        return 0;
    }
    *cap = c;
    return 1;
}

/* window_find(new_keys, new_vals, old_keys, old_vals, hashes) -> [(i, value, generation), ...]

   Which of the keys in ``hashes`` (n x 16 bytes; (0, 0): none, skipped) either table holds: the
   newer first (generation 0), else the older one (1), with the value it holds. Usually []. */
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
    const uint64_t *h = hs.buf;
    Py_ssize_t n = hs.len / 16;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h1 = h[2 * i], h2 = h[2 * i + 1];
        if (h1 == 0 && h2 == 0) continue;
        int found, gen = 0;
        size_t s = probe(nk.buf, ncap, h1, h2, &found);
        const int64_t *vals = nv.buf;
        if (!found) {
            gen = 1;
            s = probe(ok.buf, ocap, h1, h2, &found);
            vals = ov.buf;
        }
        if (!found) continue;          /* (found: s is a slot of that table) */
        PyObject *hit = Py_BuildValue("nLi", i, (long long)vals[s], gen);
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

/* window_put(keys, vals, hashes, values, select, start, room) -> (next, added)

   Puts keys ``hashes[i]`` with ``values[i]`` (n int64) into the table, for i from ``start`` on
   where ``select`` (n bytes, or None: all) is not 0 and the key is not (0, 0); a key already there
   takes the new value. Stops after ``room`` new keys (the caller's generation is full) and returns
   the i to go on from (n: all) and how many new keys went in. */
PyObject *py_window_put(PyObject *self, PyObject *args) {
    Py_buffer keys, vals, hs, vs;
    PyObject *select;
    Py_ssize_t start, room;
    if (!PyArg_ParseTuple(args, "w*w*y*y*Onn:window_put", &keys, &vals, &hs, &vs, &select, &start, &room))
        return NULL;
    PyObject *out = NULL;
    Py_buffer sel = {0};
    size_t cap;
    Py_ssize_t n = hs.len / 16, i = start, added = 0;
    if (!table_ok(&keys, &vals, &cap)) goto done;
    if (hs.len % 16 != 0 || vs.len != 8 * n || start < 0) {
        PyErr_SetString(PyExc_ValueError, "window_put: hashes of 16 bytes and values of 8 per message");
        goto done;
    }
    if (select != Py_None) {
        if (PyObject_GetBuffer(select, &sel, PyBUF_SIMPLE) < 0) goto done;
        if (sel.len != n) {
            PyErr_SetString(PyExc_ValueError, "window_put: one select byte per message");
            goto done;
        }
    }
    const uint64_t *h = hs.buf;
    const int64_t *v = vs.buf;
    uint64_t *k = keys.buf;
    int64_t *tv = vals.buf;
    const unsigned char *sp = sel.buf;
    for (; i < n && added < room; i++) {
        uint64_t h1 = h[2 * i], h2 = h[2 * i + 1];
        if ((h1 == 0 && h2 == 0) || (sp != NULL && sp[i] == 0)) continue;
        int found;
        size_t s = probe(k, cap, h1, h2, &found);
        if (s >= cap) {
            PyErr_SetString(PyExc_ValueError, "window_put: the table is full");
            goto done;
        }
        if (!found) {
            k[2 * s] = h1;
            k[2 * s + 1] = h2;
            added++;
        }
        tv[s] = v[i];
    }
    out = Py_BuildValue("nn", i, added);
done:
    if (sel.obj != NULL) PyBuffer_Release(&sel);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&vals);
    PyBuffer_Release(&hs);
    PyBuffer_Release(&vs);
    return out;
}
