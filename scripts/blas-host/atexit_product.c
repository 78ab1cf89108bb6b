/* Products in atexit handlers, after the program's own products: one handler registered after
 * the first product (so it runs before the library's own handlers) and one before (so it runs
 * after them). Through the preloaded library they must be right and print nothing on stderr
 * (scripts/test-blas). Prints "main: 96", "atexit: 96" and "last atexit: 96". */
#include <stdio.h>
#include <stdlib.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *, size_t, size_t);

enum { N = 96 };
static double a[N * N], b[N * N], c[N * N];

static void product(const char *where) {
  int n = N;
  double one = 1, zero = 0;
  c[0] = -1;
  dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
  printf("%s: %g\n", where, c[0]);
  fflush(stdout);
}

static void at_exit(void) { product("atexit"); }

static void at_exit_last(void) { product("last atexit"); }

int main(void) {
  for (int i = 0; i < N * N; i++) a[i] = b[i] = 1;
  atexit(at_exit_last);
  product("main");
  atexit(at_exit);
  return 0;
}
