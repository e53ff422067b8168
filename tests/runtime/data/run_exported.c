/* Run graph function FUNC of an unpacked exported library from C, through its plain C entry.
 *
 *   run_exported DIR FUNC OUT_NDIM OUT.bin IN0.bin D0,D1,... [IN1.bin D0,... ...]
 *
 * Loads DIR/kernels/library.so with dlopen, checks that a call before tc_load_weights(DIR)
 * fails with TC_ERR_WEIGHTS (when the model has weights), that a wrong extent, a missing
 * workspace and a wrong input count are refused, then runs FUNC on the float32 inputs read
 * from the raw files and writes its float32 output to OUT.bin; prints the output's shape.
 *
 * A library calling BLAS routines (tc_extern_names() not empty) must refuse to run with
 * TC_ERR_EXTERN until they are set. When the environment variable TC_BLAS_LIB is set, they
 * are then taken from the library it names, under the symbol prefix TC_BLAS_PREFIX (may be
 * empty), and set with tc_set_extern; otherwise the library finds them itself with
 * tc_load_blas(TC_BLAS_PATH), NULL when that variable is unset (the library then reads
 * TILECRAFT_BLAS_LIBRARY, or opens its default).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilecraft_model.h"

typedef int (*load_fn)(const char*);
typedef const char* (*text_fn)(void);
typedef const char* (*code_text_fn)(int);
typedef int64_t (*ws_fn)(const tc_tensor*, int);
typedef int (*shape_fn)(const tc_tensor*, int, int64_t*);
typedef int (*run_fn)(const tc_tensor*, int, tc_tensor*, int, void*);
typedef int (*set_extern_fn)(const char*, void*);
typedef const char* const* (*extern_names_fn)(void);
typedef int (*load_blas_fn)(const char*);

static void* need(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) { fprintf(stderr, "missing symbol %s\n", name); exit(2); }
  return f;
}

/* Check that unset routines refuse to run, then set them from TC_BLAS_LIB; how many. */
static int set_externs(void* lib, run_fn run, tc_tensor* in, int n_in, tc_tensor* out,
                       void* ws) {
  extern_names_fn names = (extern_names_fn)need(lib, "tc_extern_names");
  set_extern_fn set = (set_extern_fn)need(lib, "tc_set_extern");
  int count = 0;
  while (names()[count]) ++count;
  if (!count) return 0;
  if (run(in, n_in, out, 1, ws) != TC_ERR_EXTERN) { fprintf(stderr, "extern unset\n"); exit(4); }
  if (set("no_such_routine", 0) != TC_ERR_EXTERN) { fprintf(stderr, "extern name\n"); exit(4); }
  const char* path = getenv("TC_BLAS_LIB");
  const char* prefix = getenv("TC_BLAS_PREFIX");
  if (!path) {
    load_blas_fn load_blas = (load_blas_fn)need(lib, "tc_load_blas");
    text_fn extern_error = (text_fn)need(lib, "tc_extern_error");
    if (load_blas(getenv("TC_BLAS_PATH")) != TC_OK) {
      fprintf(stderr, "BLAS: tc_load_blas: %s\n", extern_error());
      exit(6);
    }
    return count;
  }
  void* blas = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!blas) { fprintf(stderr, "BLAS: %s\n", dlerror()); exit(6); }
  char symbol[256];
  for (int i = 0; i < count; ++i) {
    snprintf(symbol, sizeof symbol, "%s%s", prefix ? prefix : "", names()[i]);
    void* fn = dlsym(blas, symbol);
    if (!fn || set(names()[i], fn) != TC_OK) { fprintf(stderr, "no %s\n", symbol); exit(6); }
  }
  return count;
}

static float* read_floats(const char* path, int64_t n) {
  float* x = malloc((size_t)(n ? n : 1) * sizeof(float));
  FILE* f = fopen(path, "rb");
  if (!x || !f || fread(x, sizeof(float), (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  return x;
}

int main(int argc, char** argv) {
  if (argc < 5 || (argc - 5) % 2) { fprintf(stderr, "usage: see the source\n"); return 2; }
  const char* dir = argv[1];
  const char* func = argv[2];
  int out_ndim = atoi(argv[3]);
  int n_in = (argc - 5) / 2;
  char name[512];
  snprintf(name, sizeof name, "%s/kernels/library.so", dir);
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  load_fn load = (load_fn)need(lib, "tc_load_weights");
  text_fn weights_error = (text_fn)need(lib, "tc_weights_error");
  code_text_fn error_string = (code_text_fn)need(lib, "tc_error_string");
  snprintf(name, sizeof name, "tc_%s", func);
  run_fn run = (run_fn)need(lib, name);
  snprintf(name, sizeof name, "tc_%s_workspace_size", func);
  ws_fn ws_size = (ws_fn)need(lib, name);
  snprintf(name, sizeof name, "tc_%s_output_shape", func);
  shape_fn out_shape = (shape_fn)need(lib, name);

  tc_tensor in[8];
  int64_t shapes[8][8];
  for (int i = 0; i < n_in && i < 8; ++i) {
    int nd = 0;
    int64_t n = 1;
    for (char* p = argv[6 + 2 * i]; *p && nd < 8; ++nd) {
      shapes[i][nd] = strtoll(p, &p, 10);
      n *= shapes[i][nd];
      if (*p == ',') ++p;
    }
    in[i].data = read_floats(argv[5 + 2 * i], n);
    in[i].shape = shapes[i];
    in[i].ndim = nd;
    in[i].dtype = TC_DTYPE_FLOAT32;
  }
  int64_t ws_bytes = ws_size(in, n_in);
  if (ws_bytes < 0) { fprintf(stderr, "workspace: %s\n", error_string((int)ws_bytes)); return 3; }
  int64_t oshape[8];
  int rc = out_shape(in, n_in, oshape);
  if (rc) { fprintf(stderr, "output shape: %s\n", error_string(rc)); return 3; }
  int64_t n_out = 1;
  for (int d = 0; d < out_ndim; ++d) n_out *= oshape[d];
  float* y = calloc((size_t)(n_out ? n_out : 1), sizeof(float));
  void* ws = malloc((size_t)(ws_bytes ? ws_bytes : 1));
  tc_tensor out = {y, oshape, out_ndim, TC_DTYPE_FLOAT32};

  int before = run(in, n_in, &out, 1, ws);  /* no weights yet: TC_ERR_WEIGHTS, or runs */
  if (load(dir)) { fprintf(stderr, "weights: %s\n", weights_error()); return 3; }
  if (run(in, n_in + 1, &out, 1, ws) != TC_ERR_COUNT) { fprintf(stderr, "count\n"); return 4; }
  if (ws_bytes > 0 && run(in, n_in, &out, 1, NULL) != TC_ERR_NULL) {
    fprintf(stderr, "no workspace accepted\n");
    return 4;
  }
  int64_t saved = oshape[out_ndim - 1];
  oshape[out_ndim - 1] = saved + 1;
  if (run(in, n_in, &out, 1, ws) != TC_ERR_SHAPE) { fprintf(stderr, "shape\n"); return 4; }
  oshape[out_ndim - 1] = saved;
  in[0].dtype = TC_DTYPE_FLOAT64;
  if (run(in, n_in, &out, 1, ws) != TC_ERR_TYPE) { fprintf(stderr, "dtype\n"); return 4; }
  in[0].dtype = TC_DTYPE_FLOAT32;
  int externs = set_externs(lib, run, in, n_in, &out, ws);

  rc = run(in, n_in, &out, 1, ws);
  if (rc) { fprintf(stderr, "run: %s\n", error_string(rc)); return 5; }
  FILE* f = fopen(argv[4], "wb");
  if (!f || fwrite(y, sizeof(float), (size_t)n_out, f) != (size_t)n_out) return 2;
  fclose(f);
  printf("before_weights %d workspace %lld externs %d shape", before, (long long)ws_bytes,
         externs);
  for (int d = 0; d < out_ndim; ++d) printf(" %lld", (long long)oshape[d]);
  printf("\n");
  ((void (*)(void))need(lib, "tc_free_weights"))();
  return 0;
}
