/* gcc 12.2 at -O3 miscompiles this kernel (issue 10, 6d); -fno-tree-loop-distribute-patterns
 * fixes it. Reduced from the C tilecraft generated for a symbolic batch matmul scheduled with
 * fuse, split, rfactor and decompose_reduction.
 *
 * t holds 8 rows of n*128 floats. For each (i, j), the row elements t[k][i*128 + j] are zeroed,
 * then a[j/8*16 + k] is added to each. At -O3 the inner loops are unrolled, the zeroing becomes
 * eight memset calls (loop distribution into patterns) and the additions are distributed into
 * eight loops: the result has every row but one still holding the initial garbage. Correct
 * output: every element of t equals 1. The program prints the number of wrong elements and
 * exits with status 1 when there are any.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void kernel(const float* restrict a, float* restrict t, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 128; ++j) {
      for (int k = 0; k < 8; ++k) t[i * 128 + k * n * 128 + j] = 0.0f;
      for (int k = 0; k < 8; ++k) t[i * 128 + k * n * 128 + j] += a[j / 8 * 16 + k];
    }
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  float* a = malloc(sizeof(float) * 256);
  float* t = malloc(sizeof(float) * 8 * (size_t)n * 128);
  if (a == NULL || t == NULL) return 2;
  for (int i = 0; i < 256; ++i) a[i] = 1.0f;
  for (int i = 0; i < 8 * n * 128; ++i) t[i] = 1000.0f;
  kernel(a, t, n);
  int bad = 0;
  for (int i = 0; i < 8 * n * 128; ++i) bad += t[i] != 1.0f;
  printf("%d wrong\n", bad);
  free(a);
  free(t);
  return bad != 0;
}
