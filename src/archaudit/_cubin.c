/* The cubin tables (fatbin._tables) read in C: the kernels, the .nv.compat section and the
 * toolkit note of one CUDA cubin.
 *
 * Why: a wheel holds tens of thousands of cubins (torch's libtorch_cuda.so alone 700,000
 * sections and as many symbols), and visiting each function symbol in Python is the largest
 * part of a check's own work. The Python reader in fatbin.py stays the reference: this one
 * gives the same answer or none at all. It returns None for anything the Python reader
 * would refuse (a symbol table linking a missing string table, a section name table that is
 * not one), so the Python reader runs on exactly those inputs and raises its own finding.
 *
 * Every read is checked against the buffer's length; offsets and sizes from the file are
 * 64-bit and clamped as Python's slices clamp them. No pointer into the buffer outlives the
 * call, and nothing is written to it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SHDR_SIZE 64
#define SYM_SIZE 24
#define SHT_SYMTAB 2
#define SHT_STRTAB 3
#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10
#define NAME_LIMIT 4096 /* elf.cstring's limit */

typedef struct {
    const unsigned char *p;
    size_t n;
} span;

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

/* data[off:off + size], clamped to the buffer as a Python slice is. */
static span cut(span data, uint64_t off, uint64_t size) {
    span s;
    if (off >= data.n) {
        s.p = data.p;
        s.n = 0;
        return s;
    }
    s.p = data.p + off;
    s.n = size < data.n - off ? (size_t)size : data.n - (size_t)off;
    return s;
}

/* bytes.startswith(prefix, at) */
static int starts(span s, uint64_t at, const char *prefix, size_t len) {
    return at <= s.n && len <= s.n - at && memcmp(s.p + at, prefix, len) == 0;
}

/* bytes.find(needle): the first offset, or -1 (the name table is small: a plain search). */
static Py_ssize_t find(span s, const char *needle, size_t len) {
    if (len > s.n)
        return -1;
    for (size_t i = 0; i + len <= s.n; i++)
        if (s.p[i] == (unsigned char)needle[0] && memcmp(s.p + i, needle, len) == 0)
            return (Py_ssize_t)i;
    return -1;
}

/* The end of the NUL-terminated string at `at` (the name table ends with a NUL). */
static size_t string_end(span s, size_t at) {
    const unsigned char *z = memchr(s.p + at, 0, s.n - at);
    return z ? (size_t)(z - s.p) : s.n;
}

typedef struct {
    span table; /* the section header table */
    uint32_t count;
    span data;
} sections;

static uint32_t sec_name(const sections *t, uint32_t i) { return rd32(t->table.p + (size_t)i * SHDR_SIZE); }
static uint32_t sec_type(const sections *t, uint32_t i) { return rd32(t->table.p + (size_t)i * SHDR_SIZE + 4); }
static uint32_t sec_link(const sections *t, uint32_t i) { return rd32(t->table.p + (size_t)i * SHDR_SIZE + 40); }

static span sec_bytes(const sections *t, uint32_t i) {
    const unsigned char *h = t->table.p + (size_t)i * SHDR_SIZE;
    return cut(t->data, rd64(h + 24), rd64(h + 32));
}

/* elf.cstring(strs, off): "" past the end, else up to the NUL within NAME_LIMIT bytes. */
static PyObject *name_at(span strs, uint32_t off) {
    if (off >= strs.n)
        return PyUnicode_FromStringAndSize("", 0);
    size_t room = strs.n - off < NAME_LIMIT ? strs.n - off : NAME_LIMIT;
    const unsigned char *z = memchr(strs.p + off, 0, room);
    size_t len = z ? (size_t)(z - (strs.p + off)) : room;
    return PyUnicode_DecodeUTF8((const char *)strs.p + off, (Py_ssize_t)len, "replace");
}

/* The section the name table names `name` (fatbin's named()): the first section whose name
 * offset is that of the name's first occurrence; None when there is none. */
static PyObject *named(const sections *t, span names, const char *name) {
    char needle[64];
    size_t len = strlen(name);
    needle[0] = 0;
    memcpy(needle + 1, name, len);
    needle[len + 1] = 0;
    Py_ssize_t at = find(names, needle, len + 2);
    if (at >= 0)
        for (uint32_t i = 0; i < t->count; i++)
            if (sec_name(t, i) == (uint64_t)at + 1) {
                span s = sec_bytes(t, i);
                return PyBytes_FromStringAndSize((const char *)s.p, (Py_ssize_t)s.n);
            }
    Py_RETURN_NONE;
}

static const char BANK[] = ".nv.constant0.";
#define BANK_LEN (sizeof(BANK) - 1)

/* Whether `text_name` is one of the constant banks' kernel names (the banks: the names after
 * ".nv.constant0." of every section so named). Asked only for a function without the entry
 * flag, which nvcc never writes, so a plain search is enough. */
static int has_bank(const sections *t, span names, const unsigned char *text_name, size_t len) {
    for (uint32_t i = 0; i < t->count; i++) {
        uint32_t o = sec_name(t, i);
        if (!starts(names, o, BANK, BANK_LEN))
            continue;
        size_t from = (size_t)o + BANK_LEN, end = string_end(names, from);
        if (end - from == len && memcmp(names.p + from, text_name, len) == 0)
            return 1;
    }
    return 0;
}

static int any_bank(const sections *t, span names) {
    for (uint32_t i = 0; i < t->count; i++)
        if (starts(names, sec_name(t, i), BANK, BANK_LEN))
            return 1;
    return 0;
}

static int symbols(const sections *t, span names, uint32_t index, PyObject *kernels, int *banks) {
    span strs = sec_bytes(t, sec_link(t, index)), raw = sec_bytes(t, index);
    size_t count = raw.n / SYM_SIZE;
    for (size_t j = 0; j < count; j++) {
        const unsigned char *sym = raw.p + j * SYM_SIZE;
        if ((sym[4] & 0xF) != STT_FUNC)
            continue;
        uint16_t shndx = rd16(sym + 6);
        if (shndx == 0 || shndx >= t->count)
            continue;
        uint32_t text = sec_name(t, shndx);
        if (!starts(names, text, ".text.", 6))
            continue;
        uint32_t name = rd32(sym);
        if (!(sym[5] & STO_CUDA_ENTRY)) {
            /* a kernel whose entry flag was cleared: named by its own constant bank */
            if (*banks < 0)
                *banks = any_bank(t, names);
            if (!*banks)
                continue;
            size_t from = (size_t)text + 6, len = string_end(names, from) - from;
            if (!has_bank(t, names, names.p + from, len))
                continue;
            /* strs.startswith(text_name + b"\0", name) */
            if (!(name <= strs.n && len + 1 <= strs.n - name && memcmp(strs.p + name, names.p + from, len) == 0 &&
                  strs.p[name + len] == 0))
                continue;
        }
        PyObject *s = name_at(strs, name);
        if (s == NULL)
            return -1;
        int failed = PyList_Append(kernels, s);
        Py_DECREF(s);
        if (failed)
            return -1;
    }
    return 0;
}

static PyObject *tables(PyObject *module, PyObject *args) {
    Py_buffer view;
    unsigned long long shoff;
    unsigned long shnum, shstrndx;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*Kkk", &view, &shoff, &shnum, &shstrndx))
        return NULL;
    PyObject *result = NULL, *kernels = NULL, *compat = NULL, *note = NULL;
    sections t;
    t.data.p = view.buf;
    t.data.n = (size_t)view.len;
    t.count = (uint32_t)shnum;
    /* elf.parse_header checked these; checked again, as this code trusts them */
    if (shnum == 0 || shnum > 0xFFFF || shstrndx >= shnum || shoff > t.data.n ||
        (uint64_t)shnum * SHDR_SIZE > t.data.n - shoff)
        goto refuse;
    t.table.p = t.data.p + shoff;
    t.table.n = (size_t)shnum * SHDR_SIZE;
    span names = sec_bytes(&t, (uint32_t)shstrndx);
    if (shstrndx == 0 || sec_type(&t, (uint32_t)shstrndx) != SHT_STRTAB || names.n == 0 || names.p[0] != 0 ||
        names.p[names.n - 1] != 0)
        goto refuse;
    for (uint32_t i = 0; i < t.count; i++)
        if (sec_type(&t, i) == SHT_SYMTAB && sec_link(&t, i) >= t.count)
            goto refuse;
    kernels = PyList_New(0);
    if (kernels == NULL)
        goto done;
    int banks = -1;
    for (uint32_t i = 0; i < t.count; i++)
        if (sec_type(&t, i) == SHT_SYMTAB && symbols(&t, names, i, kernels, &banks) < 0)
            goto done;
    compat = named(&t, names, ".nv.compat");
    if (compat == NULL)
        goto done;
    note = named(&t, names, ".note.nv.tkinfo");
    if (note == NULL)
        goto done;
    result = PyTuple_Pack(3, kernels, compat, note);
    goto done;
refuse:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(kernels);
    Py_XDECREF(compat);
    Py_XDECREF(note);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"tables", tables, METH_VARARGS,
     "tables(data, shoff, shnum, shstrndx) -> (kernels, compat, note) | None\n\n"
     "fatbin._tables in C: the cubin's kernel names (as found, unsorted), its .nv.compat and\n"
     ".note.nv.tkinfo sections (None when absent), or None where the Python reader must judge."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "archaudit._cubin", "The cubin tables read in C (see fatbin._tables).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cubin(void) { return PyModule_Create(&module); }
