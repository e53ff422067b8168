/* Run graph function FUNC of an unpacked exported library that returns a tuple, from C.
 *
 *   run_exported_tuple DIR FUNC NDIMS OUT.bin IN0.bin D0,D1,... [IN1.bin D0,... ...]
 *
 * NDIMS lists the rank of each result (2,2,2: three results of rank 2). Loads
 * DIR/kernels/library.so, loads the weights, checks that a call with one output too few is
 * refused (TC_ERR_COUNT) and that a wrong extent of the last output is refused
 * (TC_ERR_SHAPE), runs FUNC on the float32 inputs, and writes every float32 result to OUT.bin,
 * one after the other; prints each result's shape ("shape 3 8 | 3 8").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilecraft_model.h"

typedef int (*load_fn)(const char*);
typedef const char* (*code_text_fn)(int);
typedef int64_t (*ws_fn)(const tc_tensor*, int);
typedef int (*shape_fn)(const tc_tensor*, int, int64_t*);
typedef int (*run_fn)(const tc_tensor*, int, tc_tensor*, int, void*);

static void* need(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) { fprintf(stderr, "missing symbol %s\n", name); exit(2); }
  return f;
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
  int ndim[8], n_res = 0;
  for (char* p = argv[3]; *p && n_res < 8; ++n_res) {
    ndim[n_res] = (int)strtol(p, &p, 10);
    if (*p == ',') ++p;
  }
  int n_in = (argc - 5) / 2;
  char name[512];
  snprintf(name, sizeof name, "%s/kernels/library.so", dir);
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  load_fn load = (load_fn)need(lib, "tc_load_weights");
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
  if (load(dir)) { fprintf(stderr, "weights\n"); return 3; }
  int64_t ws_bytes = ws_size(in, n_in);
  if (ws_bytes < 0) { fprintf(stderr, "workspace: %s\n", error_string((int)ws_bytes)); return 3; }
  int64_t oshape[64];  /* every result's extents, one result after the other */
  int rc = out_shape(in, n_in, oshape);
  if (rc) { fprintf(stderr, "output shape: %s\n", error_string(rc)); return 3; }
  tc_tensor out[8];
  int64_t total = 0, first = 0, count[8];
  for (int k = 0; k < n_res; ++k) {
    count[k] = 1;
    for (int d = 0; d < ndim[k]; ++d) count[k] *= oshape[first + d];
    out[k].shape = &oshape[first];
    out[k].ndim = ndim[k];
    out[k].dtype = TC_DTYPE_FLOAT32;
    first += ndim[k];
    total += count[k];
  }
  float* y = calloc((size_t)(total ? total : 1), sizeof(float));
  for (int k = 0, at = 0; k < n_res; at += (int)count[k], ++k) out[k].data = y + at;
  void* ws = malloc((size_t)(ws_bytes ? ws_bytes : 1));

  if (run(in, n_in, out, n_res - 1, ws) != TC_ERR_COUNT) { fprintf(stderr, "count\n"); return 4; }
  int64_t last = first - 1, saved = oshape[last];
  oshape[last] = saved + 1;
  if (run(in, n_in, out, n_res, ws) != TC_ERR_SHAPE) { fprintf(stderr, "shape\n"); return 4; }
  oshape[last] = saved;

  rc = run(in, n_in, out, n_res, ws);
  if (rc) { fprintf(stderr, "run: %s\n", error_string(rc)); return 5; }
  FILE* f = fopen(argv[4], "wb");
  if (!f || fwrite(y, sizeof(float), (size_t)total, f) != (size_t)total) return 2;
  fclose(f);
  printf("shape");
  for (int k = 0, at = 0; k < n_res; at += ndim[k], ++k) {
    if (k) printf(" |");
    for (int d = 0; d < ndim[k]; ++d) printf(" %lld", (long long)oshape[at + d]);
  }
  printf("\n");
  ((void (*)(void))need(lib, "tc_free_weights"))();
  return 0;
}
