/* The preload's log as a program sees it (scripts/test-blas), with TILEMM_BLAS_LOG a file:
 * - the first product's line reaches the file while the program runs (it waits 10 s at most);
 * - a child forked after that, whose product goes to the BLAS underneath and which ends
 *   through exit() (its atexit handlers run), logs nothing and writes none of its parent's
 *   waiting lines again;
 * - the parent's last product's line reaches the file at exit.
 * Prints "running: 1 line", "child: 96", "parent: 96"; the log must then hold 3 lines. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *, size_t, size_t);

enum { N = 96 };
static double a[N * N], b[N * N], c[N * N];

static double product(void) {
  int n = N;
  double one = 1, zero = 0;
  c[0] = -1;
  dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
  return c[0];
}

static int lines(const char *path) {
  FILE *f = fopen(path, "r");
  int count = 0, ch;
  if (!f) return -1;
  while ((ch = fgetc(f)) != EOF) count += ch == '\n';
  fclose(f);
  return count;
}

int main(void) {
  const char *log = getenv("TILEMM_BLAS_LOG");
  if (!log) return 2;
  for (int i = 0; i < N * N; i++) a[i] = b[i] = 1;
  product();
  int seen = 0;
  for (int wait = 0; wait < 1000 && (seen = lines(log)) < 1; wait++) usleep(10000);
  printf("running: %d line%s\n", seen, seen == 1 ? "" : "s");
  product();
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    printf("child: %g\n", product());
    exit(0);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 3;
  printf("parent: %g\n", product());
  return 0;
}
