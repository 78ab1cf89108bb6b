/* The same DGEMM and SGEMM call 300 times in one process, each into a fresh copy of C: every
 * result must have the bits of the first, whatever the routing measured meanwhile
 * (scripts/test-blas). Prints "identical: 300 dgemm, 300 sgemm" or the first call that differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *, size_t, size_t);
void sgemm_(const char *, const char *, const int *, const int *, const int *, const float *,
            const float *, const int *, const float *, const int *, const float *, float *,
            const int *, size_t, size_t);

enum { M = 70, N = 90, K = 600, CALLS = 300 };

int main(void) {
  static double a[M * K], b[K * N], c0[M * N], c[M * N], first[M * N];
  static float as[M * K], bs[K * N], cs0[M * N], cs[M * N], firsts[M * N];
  unsigned seed = 7;
  for (int i = 0; i < M * K; i++) as[i] = (float)(a[i] = (double)(seed = seed * 1103515245u + 12345u) / 4294967296.0 - 0.5);
  for (int i = 0; i < K * N; i++) bs[i] = (float)(b[i] = (double)(seed = seed * 1103515245u + 12345u) / 4294967296.0 - 0.5);
  for (int i = 0; i < M * N; i++) cs0[i] = (float)(c0[i] = (double)(seed = seed * 1103515245u + 12345u) / 4294967296.0);
  int m = M, n = N, k = K;
  double alpha = 0.7, beta = 1.3;
  float alphas = 0.7f, betas = 1.3f;
  for (int call = 0; call < CALLS; call++) {
    memcpy(c, c0, sizeof c);
    dgemm_("N", "N", &m, &n, &k, &alpha, a, &m, b, &k, &beta, c, &m, 1, 1);
    memcpy(cs, cs0, sizeof cs);
    sgemm_("N", "N", &m, &n, &k, &alphas, as, &m, bs, &k, &betas, cs, &m, 1, 1);
    if (call == 0) {
      memcpy(first, c, sizeof c);
      memcpy(firsts, cs, sizeof cs);
    } else if (memcmp(first, c, sizeof c) || memcmp(firsts, cs, sizeof cs)) {
      printf("call %d differs from the first\n", call + 1);
      return 1;
    }
  }
  printf("identical: %d dgemm, %d sgemm\n", CALLS, CALLS);
  return 0;
}
