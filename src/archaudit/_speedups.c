/* archaudit's compiled speedups, each the C twin of a Python reference that stays in the
 * package and gives the same answers (tests/read/test_speedups.py):
 *
 * - cubin_tables: codefacts._tables, the kernels, .nv.compat section and toolkit note of a cubin;
 * - find: bytes.find, the container search, without the GIL.
 *
 * Why cubin_tables: a wheel holds tens of thousands of cubins (torch's libtorch_cuda.so alone 700,000
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
#include <stdlib.h> /* qsort, bsearch: the limited API's Python.h does not include it */
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

static Py_ssize_t search(const unsigned char *s, size_t n, const unsigned char *needle, size_t k);

/* bytes.find(needle): the first offset, or -1. A cubin's section name table holds every
   kernel's mangled name three times or more (.text., .nv.info., .nv.constant0.): tens of KiB. */
static Py_ssize_t find(span s, const char *needle, size_t len) {
    return search(s.p, s.n, (const unsigned char *)needle, len);
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

/* The constant banks' kernel names (the names after ".nv.constant0." of every section so
 * named), sorted, listed only when a function without the entry flag asks for them. */
typedef struct {
    span *names;
    size_t count;
    int listed; /* 0: not yet listed; 1: listed; -1: no memory */
} bank_list;

static int span_order(const void *a, const void *b) {
    const span *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int list_banks(const sections *t, span names, bank_list *banks) {
    banks->listed = 1;
    banks->count = 0;
    banks->names = PyMem_Malloc((t->count ? t->count : 1) * sizeof(span));
    if (banks->names == NULL) {
        banks->listed = -1;
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < t->count; i++) {
        uint32_t o = sec_name(t, i);
        if (!starts(names, o, BANK, BANK_LEN))
            continue;
        size_t from = (size_t)o + BANK_LEN;
        span bank = {names.p + from, string_end(names, from) - from};
        banks->names[banks->count++] = bank;
    }
    qsort(banks->names, banks->count, sizeof(span), span_order);
    return 0;
}

static int symbols(const sections *t, span names, uint32_t index, PyObject *kernels, bank_list *banks) {
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
            if (!banks->listed && list_banks(t, names, banks) < 0)
                return -1;
            if (!banks->count)
                continue;
            size_t from = (size_t)text + 6;
            span text_name = {names.p + from, string_end(names, from) - from};
            if (bsearch(&text_name, banks->names, banks->count, sizeof(span), span_order) == NULL)
                continue;
            /* strs.startswith(text_name + b"\0", name) */
            size_t len = text_name.n;
            if (!(name <= strs.n && len + 1 <= strs.n - name && memcmp(strs.p + name, text_name.p, len) == 0 &&
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

static PyObject *cubin_tables(PyObject *module, PyObject *args) {
    Py_buffer view;
    unsigned long long shoff;
    unsigned long shnum, shstrndx;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*Kkk", &view, &shoff, &shnum, &shstrndx))
        return NULL;
    PyObject *result = NULL, *kernels = NULL, *compat = NULL, *note = NULL;
    bank_list banks = {NULL, 0, 0};
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
    PyMem_Free(banks.names);
    Py_XDECREF(kernels);
    Py_XDECREF(compat);
    Py_XDECREF(note);
    PyBuffer_Release(&view);
    return result;
}

/* ---- find: bytes.find for the container search ----
 *
 * glibc's memmem shifts by at most the needle's length less one, so a 4-byte magic ("CCOB")
 * is searched at 1-2 bytes a step. Here two bytes of the needle, chosen to be rare in machine
 * code, are compared with 16 positions at a time (SSE2, which every x86-64 has: the
 * "generic SIMD" substring search), and only positions where both match are compared whole.
 * Elsewhere a scalar loop over memchr does the same. The GIL is released while searching; the
 * buffer stays exported (a bytearray cannot be resized) until the search is done. */
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

static int common_byte(unsigned char b) {
    /* frequent in x86-64 and aarch64 code and data: zeros, all-ones, int3 padding, REX.W,
       mov opcodes, 0x0F escapes, small integers */
    return b == 0x00 || b == 0xFF || b == 0xCC || b == 0x48 || b == 0x89 || b == 0x8B || b == 0x0F || b <= 0x10;
}

/* The two positions compared first: the first and last bytes of the needle that are not
 * common, else its first and last bytes. */
static void pick(const unsigned char *needle, size_t k, size_t *p1, size_t *p2) {
    size_t a = 0, b = k - 1;
    while (a < k && common_byte(needle[a]))
        a++;
    while (b > a && common_byte(needle[b]))
        b--;
    if (a >= b) {
        a = 0;
        b = k - 1;
    }
    *p1 = a;
    *p2 = b;
}

static unsigned lowest_bit(unsigned mask) {
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctz(mask);
#else
    unsigned bit = 0;
    while (!(mask & (1u << bit)))
        bit++;
    return bit;
#endif
}

/* The first offset of needle (k >= 2 bytes) in s[0:n], or -1. */
static Py_ssize_t search(const unsigned char *s, size_t n, const unsigned char *needle, size_t k) {
    if (k > n)
        return -1;
    size_t p1, p2, i = 0, last = n - k; /* candidate starts: 0..last */
    pick(needle, k, &p1, &p2);
#ifdef HAVE_SSE2
    const __m128i c1 = _mm_set1_epi8((char)needle[p1]), c2 = _mm_set1_epi8((char)needle[p2]);
    for (; i + 15 <= last; i += 16) {
        __m128i x1 = _mm_loadu_si128((const __m128i *)(s + i + p1));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(s + i + p2));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(x1, c1), _mm_cmpeq_epi8(x2, c2)));
        while (mask) {
            unsigned bit = lowest_bit(mask);
            if (memcmp(s + i + bit, needle, k) == 0)
                return (Py_ssize_t)(i + bit);
            mask &= mask - 1;
        }
    }
#endif
    while (i <= last) {
        const unsigned char *hit = memchr(s + i + p1, needle[p1], last - i + 1);
        if (hit == NULL)
            return -1;
        i = (size_t)(hit - s) - p1;
        if (s[i + p2] == needle[p2] && memcmp(s + i, needle, k) == 0)
            return (Py_ssize_t)i;
        i++;
    }
    return -1;
}

static PyObject *find_bytes(PyObject *module, PyObject *args) {
    Py_buffer data, needle;
    Py_ssize_t start, stop, found;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*nn", &data, &needle, &start, &stop))
        return NULL;
    if (start < 0 || stop > data.len) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&needle);
        PyErr_SetString(PyExc_ValueError, "find: need 0 <= start and stop <= len(data)");
        return NULL;
    }
    const unsigned char *s = data.buf, *pat = needle.buf;
    size_t k = (size_t)needle.len;
    if (stop < start || (size_t)(stop - start) < k)
        found = k == 0 && start <= stop ? start : -1;
    else if (k == 0)
        found = start;
    else if (k == 1) {
        const unsigned char *hit = memchr(s + start, pat[0], (size_t)(stop - start));
        found = hit ? (Py_ssize_t)(hit - s) : -1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        found = search(s + start, (size_t)(stop - start), pat, k);
        Py_END_ALLOW_THREADS
        if (found >= 0)
            found += start;
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&needle);
    return PyLong_FromSsize_t(found);
}


static PyMethodDef methods[] = {
    {"find", find_bytes, METH_VARARGS,
     "find(data, needle, start, stop) -> int\n\n"
     "data.find(needle, start, stop) for 0 <= start, stop <= len(data), without the GIL."},
    {"cubin_tables", cubin_tables, METH_VARARGS,
     "cubin_tables(data, shoff, shnum, shstrndx) -> (kernels, compat, note) | None\n\n"
     "codefacts._tables in C: the cubin's kernel names (as found, unsorted), its .nv.compat and\n"
     ".note.nv.tkinfo sections (None when absent), or None where the Python reader must judge."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "archaudit._speedups", "Compiled twins of codefacts._tables and bytes.find.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
