/* A 64-bit-integer program (built against libblas64): DGEMM with M = 2^31 and N = 0 is a valid
 * call that does nothing, and M = -1 is refused as parameter 3 through its xerbla_, which takes
 * an 8-byte integer (scripts/test-blas, with libtilemm_blas64.so preloaded). Prints
 * "M = 2^31, N = 0: nothing to do" then "xerbla DGEMM 3". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void xerbla_(const char *name, const int64_t *info, size_t len) {
  printf("xerbla %.5s %lld\n", name, (long long)*info);
  fflush(stdout);
}

void dgemm_(const char *, const char *, const int64_t *, const int64_t *, const int64_t *,
            const double *, const double *, const int64_t *, const double *, const int64_t *,
            const double *, double *, const int64_t *, size_t, size_t);

int main(void) {
  int64_t m = (int64_t)1 << 31, n = 0, k = 0, one_ld = 1;
  double one = 1, zero = 0, a[1] = {0}, c[1] = {0};
  dgemm_("N", "N", &m, &n, &k, &one, a, &m, a, &one_ld, &zero, c, &m, 1, 1);
  printf("M = 2^31, N = 0: nothing to do\n");
  int64_t bad = -1, two = 2;
  dgemm_("N", "N", &bad, &two, &two, &one, a, &two, a, &two, &zero, c, &two, 1, 1);
  return 0;
}
