"""A scipy session over Debian's BLAS: Cholesky and LU solves, a triangular solve, a symmetric
eigensolver, complex products. Prints checksums."""
import numpy as np
import scipy.linalg as la

rng = np.random.default_rng(1)
n = 600
x = rng.standard_normal((n, n))
g = x.T @ x + np.eye(n)
b = rng.standard_normal((n, 4))
s1 = la.solve(g, b, assume_a="pos")           # dpotrf, dpotrs
s2 = la.lu_solve(la.lu_factor(x), b)          # dgetrf, dgetrs
s3 = la.solve_triangular(la.cholesky(g), b)   # dtrtrs
w = la.eigh(g, eigvals_only=True)             # dsytrd (dsyr2k)
z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
zz = z @ z.conj().T                           # zgemm
c = la.cho_factor(zz + n * np.eye(n))         # zpotrf (zherk, ztrsm)
for v in (s1.sum(), s2.sum(), s3.sum(), w.sum(), zz.sum().real, np.abs(c[0]).sum()):
    print(f"{v:.10e}")
