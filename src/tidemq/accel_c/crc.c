/* tidemq._accel: CRC-32 (the record layout and the list of functions: accel.h) */

#include "accel.h"           /* (Python.h defines _GNU_SOURCE: dladdr) */
#include <dlfcn.h>

/* ---------------------------------------------------------------------------------------- CRC */

static uint32_t crc_table[8][256];
crc_fn accel_isal_crc = NULL;

void accel_crc_init_tables(void) {
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
uint32_t accel_crc_tables(uint32_t crc, const unsigned char *p, size_t n) {
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

/* -------------------------------------------------------------------------------- crc32() */

PyObject *py_crc32(PyObject *self, PyObject *args) {
    Py_buffer b;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k:crc32", &b, &value)) return NULL;
    uint32_t c = crc32_of((uint32_t)value, (const unsigned char *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

PyObject *py_use_crc(PyObject *self, PyObject *arg) {
    /* address of ISA-L's crc32_gzip_refl(init, buf, len) (tidemq/accel.py finds it in the isal
       package's module); 0 goes back to the tables. Only the address of a loaded library's exported
       crc32_gzip_refl is called (dladdr says which symbol it is: any other address is refused, never
       jumped to), and its answers are checked against the tables before use. */
    unsigned long long addr = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    if (addr == 0) {
        accel_isal_crc = NULL;
        Py_RETURN_FALSE;
    }
    Dl_info info;
    if (dladdr((void *)(uintptr_t)addr, &info) == 0 || info.dli_saddr != (void *)(uintptr_t)addr ||
        info.dli_sname == NULL || strcmp(info.dli_sname, "crc32_gzip_refl") != 0) {
        PyErr_SetString(PyExc_ValueError, "use_crc: not the address of a loaded crc32_gzip_refl");
        return NULL;
    }
    crc_fn f = (crc_fn)(uintptr_t)addr;
    unsigned char probe[300];
    for (int k = 0; k < 300; k++) probe[k] = (unsigned char)(k * 131 + 7);
    for (int n = 0; n <= 300; n += 37) {
        if (f(0x12345678u, probe, (uint64_t)n) != accel_crc_tables(0x12345678u, probe, (size_t)n)) Py_RETURN_FALSE;
    }
    accel_isal_crc = f;
    Py_RETURN_TRUE;
}
