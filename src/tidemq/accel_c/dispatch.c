/* tidemq._accel: the deferred dispatch's merge: dispatch_merge (the list of functions: accel.h) */

#include "accel.h"

#define HASHED_ITEM_SIZE 12      /* index_file.HASHED_ITEM: uint32 key hash, int64 physical offset, native */

/* Python's floor division of a store time in ms by 1000 (the index keeps seconds) */
static long long second_of(long long ms) {
    long long q = ms / 1000;
    return (ms % 1000 != 0 && ms < 0) ? q - 1 : q;
}

/* bytearray ``dst`` += the bytes of ``src`` (any buffer); 0 or -1 (exception set: a bytearray whose
   buffer is exported, ``src`` the same object, cannot be resized) */
static int extend(PyObject *dst, PyObject *src) {
    Py_buffer b;
    if (PyObject_GetBuffer(src, &b, PyBUF_SIMPLE) < 0) return -1;
    Py_ssize_t have = PyByteArray_GET_SIZE(dst);
    int r = -1;
    if (b.len > PY_SSIZE_T_MAX - have) {
        PyErr_NoMemory();
    } else if (PyByteArray_Resize(dst, have + b.len) == 0) {
        memcpy(PyByteArray_AS_STRING(dst) + have, b.buf, (size_t)b.len);
        r = 0;
    }
    PyBuffer_Release(&b);
    return r;
}

/* the index items (keys, physical offset) of ``items`` (a list) hashed onto bytearray ``run``: per key
   crc32(utf-8) & 0x7FFFFFFF and the offset (index_file.HASHED_ITEM, as append_slices collects them);
   0 or -1 (exception set) */
static int hash_pairs(PyObject *run, PyObject *items) {
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_TypeError, "index items are (keys, physical offset)");
            return -1;
        }
        Py_INCREF(it);
        long long phys;
        PyObject *keys = NULL;
        int r = -1;
        if (exact_i64(PyTuple_GET_ITEM(it, 1), &phys) < 0) goto next;
        keys = PyTuple_GET_ITEM(it, 0);
        if (!PyList_Check(keys) && !PyTuple_Check(keys)) {
            PyErr_SetString(PyExc_TypeError, "an index item's keys are a list or tuple");
            keys = NULL;
            goto next;
        }
        keys = PySequence_Fast(keys, "");
        if (keys == NULL) goto next;
        Py_ssize_t nk = PySequence_Fast_GET_SIZE(keys);
        Py_ssize_t have = PyByteArray_GET_SIZE(run);
        if (nk > (PY_SSIZE_T_MAX - have) / HASHED_ITEM_SIZE) {
            PyErr_NoMemory();
            goto next;
        }
        if (PyByteArray_Resize(run, have + nk * HASHED_ITEM_SIZE) < 0) goto next;
        for (Py_ssize_t j = 0; j < nk; j++) {
            Py_ssize_t len;
            const char *key = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(keys, j), &len);
            if (key == NULL) {
                PyByteArray_Resize(run, have);      /* (shrinking: cannot fail) nothing of this item kept */
                goto next;
            }
            uint32_t h = crc32_of(0, (const unsigned char *)key, (size_t)len) & 0x7FFFFFFF;
            unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(run) + have + j * HASHED_ITEM_SIZE;
            memcpy(p, &h, 4);
            memcpy(p + 4, &phys, 8);
        }
        r = 0;
    next:
        Py_XDECREF(keys);
        Py_DECREF(it);
        if (r < 0) return -1;
    }
    return 0;
}

/* one entry's units into ``units`` (consume queue -> [first queue offset, bytearray]): a queue seen first
   takes the entry's own pair (its bytes made a bytearray when they are not one), a queue seen before has
   the entry's units added to its bytearray; 0 or -1 (exception set) */
static int merge_units(PyObject *units, PyObject *u) {
    if (!PyDict_Check(u)) {
        PyErr_SetString(PyExc_TypeError, "an entry's units are a dict");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *cq, *g;
    while (PyDict_Next(u, &pos, &cq, &g)) {
        Py_INCREF(cq);
        Py_INCREF(g);
        int r = -1;
        if (!PyList_Check(g) || PyList_GET_SIZE(g) != 2) {
            PyErr_SetString(PyExc_TypeError, "a queue's units are [first queue offset, units]");
            goto next;
        }
        PyObject *have = PyDict_GetItemWithError(units, cq);       /* borrowed */
        if (have == NULL && PyErr_Occurred()) goto next;
        /* (the lookup ran the keys' __eq__, which may have changed g or the pair found: their shape again) */
        if (PyList_GET_SIZE(g) != 2 || (have != NULL && (!PyList_Check(have) || PyList_GET_SIZE(have) != 2))) {
            PyErr_SetString(PyExc_TypeError, "a queue's units are [first queue offset, units]");
            goto next;
        }
        if (have == NULL) {
            if (PyByteArray_CheckExact(PyList_GET_ITEM(g, 1))) {
                r = PyDict_SetItem(units, cq, g);
            } else {
                PyObject *first = PyList_GET_ITEM(g, 0), *src = PyList_GET_ITEM(g, 1);
                Py_INCREF(first);               /* (held: making the bytearray may run code that changes g) */
                Py_INCREF(src);
                PyObject *b = PyByteArray_FromObject(src);
                Py_DECREF(src);
                PyObject *pair = b != NULL ? PyList_New(2) : NULL;
                if (pair == NULL) {
                    Py_DECREF(first);
                } else {
                    PyList_SET_ITEM(pair, 0, first);
                    PyList_SET_ITEM(pair, 1, b);
                    b = NULL;
                    r = PyDict_SetItem(units, cq, pair);
                }
                Py_XDECREF(b);
                Py_XDECREF(pair);
            }
        } else {            /* (log order: this queue's units continue where the last entry's end) */
            Py_INCREF(have);
            PyObject *buf = PyList_GET_ITEM(have, 1);        /* a bytearray: taken or made so above */
            Py_INCREF(buf);
            if (PyByteArray_CheckExact(buf)) {
                PyObject *src = PyList_GET_ITEM(g, 1);
                Py_INCREF(src);
                r = extend(buf, src);
                Py_DECREF(src);
            } else {                                    /* (changed under it by a key's __eq__: refused) */
                PyErr_SetString(PyExc_TypeError, "a queue's units are no longer a bytearray");
            }
            Py_DECREF(buf);
            Py_DECREF(have);
        }
    next:
        Py_DECREF(cq);
        Py_DECREF(g);
        if (r < 0) return -1;
    }
    return 0;
}

/* dispatch_merge(entries, index) -> (units, runs)

   dispatch.py_dispatch_merge compiled (its docstring is the contract): ``entries`` the deferred
   dispatches (units dict, index items, store time ms, first physical offset, end offset), in log
   order; ``units`` each consume queue's units as one [first queue offset, bytearray]; ``runs`` the
   index items as [bytearray of hashed items, store time ms], one per second of store time (with
   ``index`` false: none). */
PyObject *py_dispatch_merge(PyObject *self, PyObject *args) {
    PyObject *entries;
    int index;
    if (!PyArg_ParseTuple(args, "O!p:dispatch_merge", &PyList_Type, &entries, &index)) return NULL;
    PyObject *units = PyDict_New(), *runs = PyList_New(0);
    PyObject *last = NULL;                 /* runs[-1] (borrowed: runs holds it) */
    long long last_s = 0;
    if (units == NULL || runs == NULL) goto fail;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(entries); k++) {
        PyObject *e = PyList_GET_ITEM(entries, k);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 5) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is (units, index items, store time ms, first, end)");
            goto fail;
        }
        Py_INCREF(e);
        int r = merge_units(units, PyTuple_GET_ITEM(e, 0));
        PyObject *items = PyTuple_GET_ITEM(e, 1);
        long long now_ms = 0;
        if (r == 0 && index && (r = exact_i64(PyTuple_GET_ITEM(e, 2), &now_ms)) == 0) {
            int hashed = PyByteArray_CheckExact(items);
            Py_ssize_t n = hashed ? PyByteArray_GET_SIZE(items) : PyList_Check(items) ? PyList_GET_SIZE(items) : -1;
            if (n < 0) {
                PyErr_SetString(PyExc_TypeError, "an entry's index items are a list or a bytearray");
                r = -1;
            } else if (n > 0) {
                PyObject *t = PyLong_FromLongLong(now_ms);
                if (t == NULL) {
                    r = -1;
                } else if (last != NULL && last_s == second_of(now_ms)) {
                    PyObject *buf = PyList_GET_ITEM(last, 0);
                    r = hashed ? extend(buf, items) : hash_pairs(buf, items);
                    if (r == 0) PyList_SetItem(last, 1, t);      /* (steals t) */
                    else Py_DECREF(t);
                } else {
                    PyObject *buf = hashed ? (Py_INCREF(items), items) : PyByteArray_FromStringAndSize(NULL, 0);
                    PyObject *run = buf != NULL ? PyList_New(2) : NULL;
                    if (run == NULL) {
                        Py_XDECREF(buf);
                        Py_DECREF(t);
                        r = -1;
                    } else {
                        PyList_SET_ITEM(run, 0, buf);
                        PyList_SET_ITEM(run, 1, t);
                        r = hashed ? 0 : hash_pairs(buf, items);
                        if (r == 0) r = PyList_Append(runs, run);
                        if (r == 0) {
                            last = run;
                            last_s = second_of(now_ms);
                        }
                        Py_DECREF(run);
                    }
                }
            }
        }
        Py_DECREF(e);
        if (r < 0) goto fail;
    }
    PyObject *out = PyTuple_Pack(2, units, runs);
    Py_DECREF(units);
    Py_DECREF(runs);
    return out;
fail:
    Py_XDECREF(units);
    Py_XDECREF(runs);
    return NULL;
}

/* ----------------------------------------------------------------------- index_put_slots() */
#include <errno.h>
#include <unistd.h>

/* index_put_slots(buf, fd, slots, entries_at, count, items, start, end, diff_s) -> (count, last offset, errno)

   index_put_hashed with each slot written by pwrite(2) to ``fd`` (the file mapped as ``buf``) instead of
   through the mapping: items[start:end] go in as entries count, count + 1, ...; an entry through the
   mapping, then its slot by pwrite. A pwrite that fails stops the run: the entries before it are in
   (count says how many), errno says why (0: all of them). The GIL is held throughout. */
PyObject *py_index_put_slots(PyObject *self, PyObject *args) {
    Py_buffer buf, items;
    int fd;
    Py_ssize_t slots, at, count, end, start;
    long long diff_s;
    if (!PyArg_ParseTuple(args, "w*innny*nnL:index_put_slots", &buf, &fd, &slots, &at, &count, &items, &start,
                          &end, &diff_s))
        return NULL;
    PyObject *result = NULL;
    unsigned char *b = (unsigned char *)buf.buf;
    const unsigned char *it = (const unsigned char *)items.buf;
    int64_t phys = -1, last = -1;
    int err = 0;
    if (end > items.len / HASHED_ITEM_SIZE) end = items.len / HASHED_ITEM_SIZE;
    if (!(slots > 0 && slots <= (buf.len - 40) / 4 && slots <= (Py_ssize_t)INT32_MAX && at >= 40 + slots * 4 &&
          at <= buf.len && count >= 1 && count <= (buf.len - at) / 20 && count <= (Py_ssize_t)INT32_MAX && start >= 0 &&
          (end <= start || (end - start <= (buf.len - at) / 20 - count &&
                            end - start <= (Py_ssize_t)INT32_MAX - count)))) {
        PyErr_SetString(PyExc_ValueError, "index_put_slots: a file of the wrong shape (or entries past its end)");
        goto done;
    }
    for (Py_ssize_t k = start; k < end; k++) {
        uint32_t h;
        memcpy(&h, it + HASHED_ITEM_SIZE * k, 4);
        memcpy(&phys, it + HASHED_ITEM_SIZE * k + 4, 8);
        h &= 0x7FFFFFFF;
        Py_ssize_t slot_at = 40 + (Py_ssize_t)(h % (uint32_t)slots) * 4;
        accel_index_entry(b, at, count, h, phys, diff_s, b + slot_at);
        unsigned char v[4], was[4];
        be32(v, (uint32_t)count);
        memcpy(was, b + slot_at, 4);
        size_t done = 0;
        while (done < 4) {
            ssize_t w = pwrite(fd, v + done, 4 - done, (off_t)(slot_at + (Py_ssize_t)done));
            if (w > 0) {
                done += (size_t)w;
            } else if (w == 0 || errno != EINTR) {
                err = w < 0 ? errno : EIO;
                break;
            }
        }
        if (err) {
            if (done > 0) memcpy(b + slot_at, was, 4);     /* a torn slot: its old value back (the mapping) */
            break;
        }
        count++;
        last = phys;
    }
    result = Py_BuildValue("nLi", count, (long long)last, err);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&items);
    return result;
}
