"""tilemm's Python package on a lent GPU (`scripts/gpu-check python`, with the wheel of
`scripts/gpu-check --pack-python`): needs only numpy beside the wheel, so it runs on a machine
that reaches no package index.

1. Exactness: `tilemm.matmul` on the device against numpy for float32, float64, complex64,
   complex128, int32, int64 and bool, on integer data whose every partial sum each type holds
   (a transposed view, a strided view, broadcasting batches and `out=` among them), each with
   the route `tilemm.last_call` reports. Any difference fails (exit 1).
2. Speed: `tilemm.matmul` from host memory against `numpy.matmul`, median of 3 after a warm-up
   call (which tunes and compiles), float32, float64 and complex128.

Usage: python3 scripts/gpu_python.py [DEVICE] [SIZE...]   (default: cuda 1024 2048 4096)
"""

import statistics
import sys
import time

import numpy as np

import tilemm

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
sizes = [int(s) for s in sys.argv[2:]] or [1024, 2048, 4096]
dev = tilemm.Device(device)
print(f"tilemm {tilemm.__version__}, numpy {np.__version__}; device {device}: {dev.route}")
rng = np.random.default_rng(0)
failed = 0


def integers(shape, dtype):
    """Small integers (Gaussian integers for complex types; 0/1 for bool)."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    x = rng.integers(-4, 5, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-4, 5, shape)
    return x.astype(dtype)


def check(what, got, want):
    global failed
    route = tilemm.last_call.route
    same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    print(f"{'ok  ' if same else 'FAIL'} {what}: {got.dtype} {got.shape} on {route}")
    if not same:
        failed += 1


for dtype in [np.float32, np.float64, np.complex64, np.complex128, np.int32, np.int64, np.bool_]:
    name = np.dtype(dtype).name
    a, b = integers((300, 517), dtype), integers((517, 129), dtype)
    check(f"{name} 300×517×129", tilemm.matmul(a, b, device=dev), np.matmul(a, b))
    at = integers((517, 300), dtype)
    check(f"{name} Aᵀ", tilemm.matmul(at.T, b, device=dev), np.matmul(at.T, b))
    big = integers((600, 1034), dtype)
    check(f"{name} strided A", tilemm.matmul(big[::2, ::2], b, device=dev),
          np.matmul(big[::2, ::2], b))
    x, y = integers((4, 1, 33, 40), dtype), integers((3, 40, 21), dtype)
    check(f"{name} broadcast batches", tilemm.matmul(x, y, device=dev), np.matmul(x, y))
    out = np.empty((300, 129), dtype)
    got = tilemm.matmul(a, b, out=out, device=dev)
    check(f"{name} out=", out if got is out else got[:0], np.matmul(a, b))


def timed(call):
    call()  # tunes and compiles on a class's first call
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


try:
    import threadpoolctl

    for pool in threadpoolctl.threadpool_info():
        if pool.get("internal_api") == "openblas":
            print(f"numpy's OpenBLAS {pool.get('version')}: kernel {pool.get('architecture')}, "
                  f"{pool.get('num_threads')} threads")
except ImportError:
    print("numpy's BLAS: threadpoolctl is not installed here to name its kernel")
print(f"{'dtype':>10} {'N':>5} {'numpy ms':>10} {'tilemm ms':>10} {'numpy/tilemm':>13}  route")
for dtype in [np.float32, np.float64, np.complex128]:
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        if np.dtype(dtype).kind == "c":
            a += 1j * rng.standard_normal((n, n))
            b += 1j * rng.standard_normal((n, n))
        ours = timed(lambda: tilemm.matmul(a, b, device=dev))
        route = tilemm.last_call.route
        theirs = timed(lambda: np.matmul(a, b))
        print(f"{np.dtype(dtype).name:>10} {n:>5} {theirs:>10.3f} {ours:>10.3f} "
              f"{theirs / ours:>13.2f}  {route}")
sys.exit(1 if failed else 0)
