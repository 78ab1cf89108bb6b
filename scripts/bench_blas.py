#!/usr/bin/python3
"""Times Fortran sgemm_/dgemm_/cgemm_/zgemm_ as a program linked to libblas.so.3 calls them
(through the global symbol scope, so that a preloaded libtilemm_blas.so takes them), for
scripts/bench-blas.

Usage: bench_blas.py WARMUP SIZE... (environment: the BLAS setup to time; BENCH_BLAS_DTYPES, the
dtypes in order, default "float64 float32"; complex128 and complex64 time zgemm_ and cgemm_).
For each dtype and each N, C = A·B with N×N column-major operands: WARMUP untimed calls (a preloaded library
measures its routes in them), then timed calls until 1 s or 5 calls (at least 1). Prints one
JSON line per product: dtype, n, median and min milliseconds, calls timed. Products up to 256
are checked against numpy's einsum (its own loops, no BLAS) under 2·K·u·(|A|·|B|).
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


ROUTINES = {"float64": "dgemm_", "float32": "sgemm_", "complex128": "zgemm_", "complex64": "cgemm_"}


def gemm(dtype):
    fn = getattr(GLOBAL, ROUTINES[np.dtype(dtype).name])
    # α and β by reference, in the routine's own type (a complex one is two reals).
    one, zero = np.ones(1, dtype), np.zeros(1, dtype)
    trans = ctypes.c_char_p(b"N")

    def call(a, b, c):
        n = ctypes.c_int(a.shape[0])
        ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        fn(trans, trans, ctypes.byref(n), ctypes.byref(n), ctypes.byref(n), ptr(one),
           ptr(a), ctypes.byref(n), ptr(b), ctypes.byref(n), ptr(zero), ptr(c),
           ctypes.byref(n), ctypes.c_size_t(1), ctypes.c_size_t(1))

    return call


def random(rng, n, dtype):
    x = rng.random((n, n))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.random((n, n))
    return np.asfortranarray(x, dtype=dtype)


def main():
    warmup = int(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]]
    rng = np.random.default_rng(1)
    dtypes = os.environ.get("BENCH_BLAS_DTYPES", "float64 float32").split()
    for dtype in map(np.dtype, dtypes):
        call = gemm(dtype)
        for n in sizes:
            a, b = random(rng, n, dtype), random(rng, n, dtype)
            c = np.zeros((n, n), dtype=dtype, order="F")
            for _ in range(warmup):
                call(a, b, c)
            times = []
            while not times or (len(times) < 5 and sum(times) < 1.0):
                start = time.perf_counter()
                call(a, b, c)
                times.append(time.perf_counter() - start)
            if n <= 256:
                wide = np.complex128 if dtype.kind == "c" else np.float64
                ref = np.einsum("ik,kj->ij", a.astype(wide), b.astype(wide))
                # Complex: each part a real product of 2K terms (4M), |re|+|im| bounding both.
                mag = lambda x: (np.abs(x.real) + np.abs(x.imag)).astype(np.float64)  # noqa: E731
                bound = 4 * n * np.finfo(dtype).eps / 2 * np.einsum("ik,kj->ij", mag(a), mag(b))
                if not (np.abs(c - ref) <= bound).all():
                    sys.exit(f"bench_blas: {np.dtype(dtype).name} {n}³ is out of bound")
            times.sort()
            print(json.dumps({"dtype": np.dtype(dtype).name, "n": n,
                              "median_ms": 1e3 * times[len(times) // 2],
                              "min_ms": 1e3 * times[0], "calls": len(times)}), flush=True)


if __name__ == "__main__":
    main()
