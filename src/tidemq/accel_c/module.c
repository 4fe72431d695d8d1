/* tidemq._accel: the module: its method table and init (the record layout and the list of functions: accel.h) */

#include "accel.h"

/* ------------------------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_VARARGS, "crc32(data, value=0): zlib's CRC-32"},
    {"use_crc", py_use_crc, METH_O, "use_crc(address): ISA-L's crc32_gzip_refl (0: the tables); True if taken"},
    {"append", py_append, METH_VARARGS, "pack prepared messages into a segment (commit_log.py)"},
    {"append_slices", py_append_slices, METH_VARARGS, "pack messages given as slices of a buffer (commit_log.py)"},
    {"put_one", py_put_one, METH_VARARGS, "the one-message put's common case, appended in one call (put_one.py)"},
    {"frame_slices", py_frame_slices, METH_VARARGS, "a SendRecords frame parsed into arrays (send_records.py)"},
    {"check_slices", py_check_slices, METH_VARARGS, "the record validator over slices of a buffer (validate.py)"},
    {"check_encoded", py_check_encoded, METH_VARARGS, "the record validator over encoded properties (validate.py)"},
    {"send_one", py_send_one, METH_VARARGS, "the common SendMessage request read from its bytes (wire.py)"},
    {"send_many", py_send_many, METH_VARARGS, "a SendMessage request of common messages read from its bytes"},
    {"answer_one_stored", py_answer_one_stored, METH_VARARGS, "the SendMessageResponse of one message stored "
                                                              "(send_message.py)"},
    {"answer_stored", py_answer_stored, METH_VARARGS, "the SendMessageResponse of a batch stored whole (send_message.py)"},
    {"id_hash", py_id_hash, METH_VARARGS, "the dedup window's keyed hash of (topic, id) (dedup.py)"},
    {"window_find", py_window_find, METH_VARARGS, "keys the dedup window's tables hold (dedup.py)"},
    {"window_put", py_window_put, METH_VARARGS, "keys put into a dedup window table (dedup.py)"},
    {"decode_run", py_decode_run, METH_VARARGS, "records back to back as StoredMessage objects (codec.py)"},
    {"index_put", py_index_put, METH_VARARGS, "index entries of many items (index_file.py)"},
    {"index_put_hashed", py_index_put_hashed, METH_VARARGS, "index entries of hashed items (index_file.py)"},
    {"index_put_slots", py_index_put_slots, METH_VARARGS, "index entries of hashed items, slots by pwrite (index_file.py)"},
    {"dispatch_merge", py_dispatch_merge, METH_VARARGS, "deferred dispatches' units and index items merged (dispatch.py)"},
    {"scan_run", py_scan_run, METH_VARARGS, "verify consecutive records (codec.scan_run)"},
    {"damaged", py_damaged, METH_VARARGS, "indexes of the records that fail their CRCs (integrity.py)"},
    {"frame_records", py_frame_records, METH_VARARGS, "records copied after room for a header, checked, the header "
                                                      "written (framing.py)"},
    {"replica_scan", py_replica_scan, METH_VARARGS, "a follower's frame checked, its units and index items built "
                                                    "(replica_scan.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq._accel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    accel_crc_init_tables();
    if (accel_write_init() < 0 || accel_put_one_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", ACCEL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
