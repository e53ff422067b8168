"""C helpers shared by the native graph entries (see :mod:`tilecraft.codegen.graph_c`).

``tcg_buffer`` mirrors CPython's ``Py_buffer`` and ``tcg_method_def`` its ``PyMethodDef`` (both
in the stable ABI); ``tcg_api`` is the function table built by
:func:`tilecraft.runtime.executor.native.api_table` (same order), installed once per loaded
library by ``tcg__init``. The entries reach Python only through it, so the library links
nothing from the interpreter.
"""

PRELUDE = r"""
/* ---- tilecraft native graph executor (tilecraft.codegen.graph_c) ---- */
#include <time.h>
typedef struct tcg_object tcg_object;
typedef struct {
  void* buf; tcg_object* obj; ptrdiff_t len; ptrdiff_t itemsize; int readonly; int ndim;
  char* format; ptrdiff_t* shape; ptrdiff_t* strides; ptrdiff_t* suboffsets; void* internal;
} tcg_buffer;  /* Py_buffer */
typedef struct {
  int (*get_buffer)(tcg_object*, tcg_buffer*, int);
  void (*release_buffer)(tcg_buffer*);
  void (*err_clear)(void);
  tcg_object* (*tuple_get_item)(tcg_object*, ptrdiff_t);
  void* (*long_as_void_ptr)(tcg_object*);
  tcg_object* (*tuple_new)(ptrdiff_t);
  int (*tuple_set_item)(tcg_object*, ptrdiff_t, tcg_object*);
  tcg_object* (*long_from_long_long)(long long);
  tcg_object* (*call_object)(tcg_object*, tcg_object*);
  void (*incref)(tcg_object*);
  void (*decref)(tcg_object*);
  void* (*save_thread)(void);
  void (*restore_thread)(void*);
  tcg_object* none;
  tcg_object* empty;
} tcg_api;
typedef struct {
  const char* name; void* meth; int flags; const char* doc;
} tcg_method_def;  /* PyMethodDef */
#define TCG_RECORDS_RO 0x1c /* PyBUF_STRIDES | PyBUF_FORMAT */
#define TCG_WRITABLE 0x1
#define TCG_METH_FASTCALL 0x80

static const tcg_api* tcg__api;
TC_EXPORT void tcg__init(const tcg_api* api) { tcg__api = api; }
/* the context block of an entry: its ``self`` is the tuple (address of the block, owner) */
static int64_t* tcg__ctx(tcg_object* self) {
  return (int64_t*)tcg__api->long_as_void_ptr(tcg__api->tuple_get_item(self, 0));
}

static int tcg__contiguous(const tcg_buffer* b) {
  ptrdiff_t expect = b->itemsize;
  for (int d = 0; d < b->ndim; ++d) if (b->shape[d] == 0) return 1;
  for (int d = b->ndim - 1; d >= 0; --d) {
    if (b->shape[d] != 1 && b->strides[d] != expect) return 0;
    expect *= b->shape[d];
  }
  return 1;
}
static int tcg__format(const char* got, const char* const* accepted) {
  for (; *accepted; ++accepted) if (got && strcmp(got, *accepted) == 0) return 1;
  return 0;
}
static int64_t tcg__add(int64_t a, int64_t b, int* err) {
  int64_t r; if (__builtin_add_overflow(a, b, &r)) *err = 1; return r;
}
static int64_t tcg__sub(int64_t a, int64_t b, int* err) {
  int64_t r; if (__builtin_sub_overflow(a, b, &r)) *err = 1; return r;
}
static int64_t tcg__mul(int64_t a, int64_t b, int* err) {
  int64_t r; if (__builtin_mul_overflow(a, b, &r)) *err = 1; return r;
}
static int64_t tcg__floordiv(int64_t a, int64_t b, int* err) {
  if (b == 0 || (a == INT64_MIN && b == -1)) { *err = 1; return 0; }
  int64_t q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) --q; return q;
}
static int64_t tcg__floormod(int64_t a, int64_t b, int* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return 0;
  int64_t r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r;
}
static int64_t tcg__min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t tcg__max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t tcg__now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
}
/* return None after a declined call: ``*slot`` says why; ``busy`` is released */
static tcg_object* tcg__decline(int64_t* slot, int64_t status, int64_t* busy) {
  *slot = status;
  if (busy) __atomic_store_n(busy, 0, __ATOMIC_RELEASE);
  tcg__api->incref(tcg__api->none);
  return tcg__api->none;
}
/* numpy.empty(shape, dtype) and its data pointer; NULL with a Python error set on failure */
static tcg_object* tcg__result(const tcg_api* api, const int64_t* shape, int ndim,
                              tcg_object* dtype, void** data) {
  tcg_object* dims = api->tuple_new(ndim);
  if (!dims) return 0;
  for (int d = 0; d < ndim; ++d) {
    tcg_object* v = api->long_from_long_long(shape[d]);
    if (!v) { api->decref(dims); return 0; }
    api->tuple_set_item(dims, d, v);
  }
  tcg_object* call = api->tuple_new(2);
  if (!call) { api->decref(dims); return 0; }
  api->tuple_set_item(call, 0, dims);
  api->incref(dtype);
  api->tuple_set_item(call, 1, dtype);
  tcg_object* out = api->call_object(api->empty, call);
  api->decref(call);
  if (!out) return 0;
  tcg_buffer b;
  if (api->get_buffer(out, &b, TCG_WRITABLE)) { api->decref(out); return 0; }
  *data = b.buf;
  api->release_buffer(&b);
  return out;
}
"""
