#!/usr/bin/python3
"""Times Fortran sgemm_/dgemm_ as a program linked to libblas.so.3 calls them (through the
global symbol scope, so that a preloaded libtilemm_blas.so takes them), for scripts/bench-blas.

Usage: bench_blas.py WARMUP SIZE... (environment: the BLAS setup to time). For f64 then f32 and
each N, C = A·B with N×N column-major operands: WARMUP untimed calls (a preloaded library
measures its routes in them), then timed calls until 1 s or 5 calls (at least 1). Prints one
JSON line per product: dtype, n, median and min milliseconds, calls timed. Products up to 256
are checked against numpy's einsum (its own loops, no BLAS) under 2·K·u·(|A|·|B|).
"""
import ctypes
import json
import sys
import time

import numpy as np

# numpy loads its BLAS outside the global scope: load it into it, after any preload.
ctypes.CDLL("libblas.so.3", mode=ctypes.RTLD_GLOBAL)
GLOBAL = ctypes.CDLL(None)


def gemm(dtype):
    fn = GLOBAL.dgemm_ if dtype == np.float64 else GLOBAL.sgemm_
    scalar = ctypes.c_double if dtype == np.float64 else ctypes.c_float
    one, zero = scalar(1.0), scalar(0.0)
    trans = ctypes.c_char_p(b"N")

    def call(a, b, c):
        n = ctypes.c_int(a.shape[0])
        ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        fn(trans, trans, ctypes.byref(n), ctypes.byref(n), ctypes.byref(n), ctypes.byref(one),
           ptr(a), ctypes.byref(n), ptr(b), ctypes.byref(n), ctypes.byref(zero), ptr(c),
           ctypes.byref(n), ctypes.c_size_t(1), ctypes.c_size_t(1))

    return call


def main():
    warmup = int(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]]
    rng = np.random.default_rng(1)
    for dtype in (np.float64, np.float32):
        call = gemm(dtype)
        for n in sizes:
            a = np.asfortranarray(rng.random((n, n)), dtype=dtype)
            b = np.asfortranarray(rng.random((n, n)), dtype=dtype)
            c = np.zeros((n, n), dtype=dtype, order="F")
            for _ in range(warmup):
                call(a, b, c)
            times = []
            while not times or (len(times) < 5 and sum(times) < 1.0):
                start = time.perf_counter()
                call(a, b, c)
                times.append(time.perf_counter() - start)
            if n <= 256:
                ref = np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))
                bound = 2 * n * np.finfo(dtype).eps / 2 * np.einsum(
                    "ik,kj->ij", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
                if not (np.abs(c - ref) <= bound).all():
                    sys.exit(f"bench_blas: {np.dtype(dtype).name} {n}³ is out of bound")
            times.sort()
            print(json.dumps({"dtype": np.dtype(dtype).name, "n": n,
                              "median_ms": 1e3 * times[len(times) // 2],
                              "min_ms": 1e3 * times[0], "calls": len(times)}), flush=True)


if __name__ == "__main__":
    main()
