#!/usr/bin/python3
"""Times Fortran Level-3 routines (?gemm_, ?symm_, ?syrk_, ?syr2k_, ?trmm_, ?trsm_, and for
complex ?hemm_, ?herk_, ?her2k_) as a program linked to libblas.so.3 calls them (through the
global symbol scope, so that a preloaded libtilemm_blas.so takes them), for scripts/bench-blas.

Usage: bench_blas.py WARMUP SIZE... (environment: the BLAS setup to time; BENCH_BLAS_DTYPES, the
dtypes in order, default "float64 float32", complex128 and complex64 too; BENCH_BLAS_ROUTINES,
default "gemm"). For each routine, dtype and N, on N×N column-major operands (SIDE L, UPLO U,
TRANS N, DIAG N; α = 1, β = 0): C = A·B, C = A·B with A symmetric (Hermitian), the upper
triangle of C = A·Aᵀ (A·Aᴴ) or A·Bᵀ + B·Aᵀ, B = T·B and T·X = B (T upper triangular with N on its
diagonal, B fresh for each call). WARMUP untimed calls (a preloaded library measures its routes
in them), then timed calls until 1 s or 5 calls (at least 1). Prints one JSON line per call:
routine, dtype, n, median and min milliseconds, calls timed. Up to 256 each result is checked
against numpy's einsum (its own loops, no BLAS) under 4·N·u times the product of magnitudes
(for trsm: the residual T·X − B under 4·N·u·|T|·|X|).
"""
import ctypes
import json
import os
import sys
import time

import numpy as np

# numpy loads its BLAS outside the global scope: load it into it, after any preload.
ctypes.CDLL("libblas.so.3", mode=ctypes.RTLD_GLOBAL)
GLOBAL = ctypes.CDLL(None)


LETTERS = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


def routine(name, dtype):
    """The call of `name` in `dtype` on N×N operands (a, b, c), and its reference: what the
    written matrix must hold, from the operands as they were, in f64 or complex128."""
    fn = getattr(GLOBAL, LETTERS[dtype.name] + name + "_")
    # herk's α and β are real; every other scalar is the routine's own type.
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    one = np.ones(1, real if name == "herk" else dtype)
    zero = np.zeros(1, real if name in ("herk", "her2k") else dtype)
    ch = {c: ctypes.c_char_p(c.encode()) for c in "NLUT"}
    ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    size = ctypes.c_size_t(1)

    def call(a, b, c):
        n = ctypes.byref(ctypes.c_int(a.shape[0]))
        if name == "gemm":
            fn(ch["N"], ch["N"], n, n, n, ptr(one), ptr(a), n, ptr(b), n, ptr(zero), ptr(c), n, size, size)
        elif name in ("symm", "hemm"):
            fn(ch["L"], ch["U"], n, n, ptr(one), ptr(a), n, ptr(b), n, ptr(zero), ptr(c), n, size, size)
        elif name in ("syrk", "herk"):
            fn(ch["U"], ch["N"], n, n, ptr(one), ptr(a), n, ptr(zero), ptr(c), n, size, size)
        elif name in ("syr2k", "her2k"):
            fn(ch["U"], ch["N"], n, n, ptr(one), ptr(a), n, ptr(b), n, ptr(zero), ptr(c), n, size, size)
        else:  # trmm, trsm: B (here c) written in place
            fn(ch["L"], ch["U"], ch["N"], ch["N"], n, n, ptr(one), ptr(a), n, ptr(c), n, size, size, size, size)

    def reference(a, b, c0):
        wide = np.complex128 if dtype.kind == "c" else np.float64
        a, b = a.astype(wide), b.astype(wide)
        mm = lambda x, y: np.einsum("ik,kj->ij", x, y)  # noqa: E731
        h = (lambda x: x.conj().T) if name.startswith("he") else (lambda x: x.T)
        if name in ("symm", "hemm"):
            upper = np.triu(a, 1)
            full = upper + h(upper) + np.diag(a.diagonal().real if name == "hemm" else a.diagonal())
            return mm(full, b), (full, b)
        if name in ("syrk", "herk"):
            return np.triu(mm(a, h(a))), (a, h(a))
        if name in ("syr2k", "her2k"):
            return np.triu(mm(a, h(b)) + mm(b, h(a))), None
        if name in ("trmm", "trsm"):
            return mm(np.triu(a), c0.astype(wide)), (np.triu(a), c0)
        return mm(a, b), (a, b)

    return call, reference


def random(rng, n, dtype):
    x = rng.random((n, n))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.random((n, n))
    return np.asfortranarray(x, dtype=dtype)


def check(name, dtype, n, a, b, c0, c):
    """Exits if `c` (the written matrix) is out of its bound."""
    call, reference = routine(name, dtype)
    want, factors = reference(a, b, c0)
    wide = np.complex128 if dtype.kind == "c" else np.float64
    mag = lambda x: (np.abs(x.real) + np.abs(x.imag)).astype(np.float64)  # noqa: E731
    got = c.astype(wide)
    if name == "trsm":
        # T·X must give B: the residual under the backward error of substitution.
        t = np.triu(a.astype(wide))
        want, got = c0.astype(wide), np.einsum("ik,kj->ij", t, got)
        bound = 4 * n * np.finfo(dtype).eps / 2 * np.einsum("ik,kj->ij", mag(t), mag(c))
    elif factors is None:
        ma, mb = mag(a), mag(b)
        bound = 4 * n * np.finfo(dtype).eps / 2 * (np.einsum("ik,jk->ij", ma, mb) + np.einsum("ik,jk->ij", mb, ma))
    else:
        bound = 4 * n * np.finfo(dtype).eps / 2 * np.einsum("ik,kj->ij", mag(factors[0]), mag(factors[1]))
    if name in ("syrk", "herk", "syr2k", "her2k"):
        got, want, bound = np.triu(got), np.triu(want), np.triu(bound)
    if not (np.abs(got - want) <= bound).all():
        sys.exit(f"bench_blas: {name} {dtype.name} {n} is out of bound")


def main():
    warmup = int(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]]
    rng = np.random.default_rng(1)
    dtypes = os.environ.get("BENCH_BLAS_DTYPES", "float64 float32").split()
    names = os.environ.get("BENCH_BLAS_ROUTINES", "gemm").split()
    for name in names:
        for dtype in map(np.dtype, dtypes):
            if name.startswith("he") and dtype.kind != "c":
                continue
            call, _ = routine(name, dtype)
            for n in sizes:
                a, b = random(rng, n, dtype), random(rng, n, dtype)
                if name in ("trmm", "trsm"):
                    # Well conditioned: N on the diagonal.
                    a[np.diag_indices(n)] += n
                c0 = random(rng, n, dtype) if name in ("trmm", "trsm") else np.zeros((n, n), dtype, order="F")
                c = c0.copy(order="F")
                for _ in range(warmup):
                    c[...] = c0
                    call(a, b, c)
                times = []
                while not times or (len(times) < 5 and sum(times) < 1.0):
                    c[...] = c0
                    start = time.perf_counter()
                    call(a, b, c)
                    times.append(time.perf_counter() - start)
                if n <= 256:
                    check(name, dtype, n, a, b, c0, c)
                times.sort()
                print(json.dumps({"routine": name, "dtype": dtype.name, "n": n,
                                  "median_ms": 1e3 * times[len(times) // 2],
                                  "min_ms": 1e3 * times[0], "calls": len(times)}), flush=True)


if __name__ == "__main__":
    main()
