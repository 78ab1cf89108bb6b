// A C++ program whose xerbla_ throws, as C++ codes over LAPACK do: the exception thrown for
// DGEMM's wrong M must reach this catch through the preloaded library, as it does through the
// reference BLAS (scripts/test-blas). Prints "caught: xerbla DGEMM 3".
#include <cstdio>
#include <stdexcept>
#include <string>

extern "C" void xerbla_(const char *name, const int *info, std::size_t len) {
  throw std::runtime_error("xerbla " + std::string(name, len).substr(0, 5) + " " +
                           std::to_string(*info));
}

extern "C" void dgemm_(const char *, const char *, const int *, const int *, const int *,
                       const double *, const double *, const int *, const double *, const int *,
                       const double *, double *, const int *, std::size_t, std::size_t);

int main() {
  int m = -1, n = 2, k = 2, ld = 2;
  double one = 1, zero = 0, a[4] = {0}, c[4] = {0};
  try {
    dgemm_("N", "N", &m, &n, &k, &one, a, &ld, a, &ld, &zero, c, &ld, 1, 1);
  } catch (const std::exception &e) {
    std::printf("caught: %s\n", e.what());
    return 0;
  }
  std::puts("no exception reached the caller");
  return 1;
}
