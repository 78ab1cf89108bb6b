"""tilemm's device arrays on a lent NVIDIA GPU (`scripts/gpu-check devarrays`, with the wheel of
`scripts/gpu-check --pack-python`), beside the machine's own numba, CuPy and PyTorch.

1. Interchange, exact on integer data (any difference fails, exit 1):
   - numba's `cuda.to_device` arrays, CuPy arrays and PyTorch CUDA tensors (transposed views
     included) into `tilemm.matmul` through the CUDA Array Interface; PyTorch's bfloat16
     tensors and JAX's arrays through DLPack;
   - tilemm's results out to them: `cuda.as_cuda_array`, `cupy.asarray` (the CUDA Array
     Interface), `cupy.from_dlpack` and `torch.from_dlpack` (DLPack, bfloat16 included),
     `torch.as_tensor`; each compared with the library's own product on the same data.
   - `tilemm.last_call` must report 0 bytes each way for products of device arrays.
2. Speed: a product of two N×N device arrays (median of 5, each ended by
   `tilemm.synchronize()`; and per product of 10 queued back to back, one wait, as a chain runs) against the same product from host memory (`tilemm.matmul` on numpy arrays), CuPy's
   `matmul` (cuBLAS) and torch's, in float32 and float64 (torch with TF32 off: every row is the
   precision named).

Usage: python3 scripts/gpu_device_arrays.py [SIZE...]   (default: 1024 2048 4096)
"""

import statistics
import sys
import time

import numpy as np

import tilemm

sizes = [int(s) for s in sys.argv[1:]] or [1024, 2048, 4096]
rng = np.random.default_rng(0)
failed = 0


def ints(shape, dtype=np.float32):
    return rng.integers(-4, 5, shape).astype(dtype)


def check(what, got, want):
    global failed
    got, want = np.asarray(got), np.asarray(want)
    same = got.shape == want.shape and np.array_equal(got.astype(np.float64), want.astype(np.float64))
    print(f"{'ok  ' if same else 'FAIL'} {what}: {got.dtype} {got.shape}")
    if not same:
        failed += 1


def no_bytes(what):
    global failed
    moved = (tilemm.last_call.bytes_to_device, tilemm.last_call.bytes_from_device)
    if moved != (0, 0):
        print(f"FAIL {what}: moved {moved} bytes (to, from) the device")
        failed += 1


a, b = ints((300, 517)), ints((517, 129))
want = a @ b
print(f"tilemm {tilemm.__version__}; device arrays on {tilemm.to_device(a).device}")

try:
    # numba-cuda built for older numpy still names np.row_stack (removed in numpy 2.5) when it
    # loads: the alias it expects, so that its device arrays can be tested here.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
        print("numpy has no row_stack: aliased to vstack for numba-cuda's import")
    from numba import cuda

    na, nb = cuda.to_device(a), cuda.to_device(b)
    got = tilemm.matmul(na, nb)
    check("numba device arrays in (CUDA Array Interface)", got.copy_to_host(), want)
    no_bytes("numba in")
    back = cuda.as_cuda_array(got)
    check("tilemm result out to numba (cuda.as_cuda_array)", back.copy_to_host(), want)
    nt = cuda.to_device(np.ascontiguousarray(b.T))
    check("numba transposed view in", tilemm.matmul(na, nt.T).copy_to_host(), want)
except ImportError as e:
    print(f"skip numba: {e}")

try:
    import cupy as cp

    ca, cb = cp.asarray(a), cp.asarray(b)
    got = tilemm.matmul(ca, cb)
    no_bytes("CuPy in")
    check("CuPy arrays in (CUDA Array Interface)", got.copy_to_host(), want)
    check("tilemm result out to CuPy (cupy.asarray)", cp.asnumpy(cp.asarray(got)), want)
    check("tilemm result out to CuPy (cupy.from_dlpack)", cp.asnumpy(cp.from_dlpack(got)), want)
    check("CuPy strided view in", tilemm.matmul(ca[::2], cb[:, 1::2]).copy_to_host(),
          a[::2] @ b[:, 1::2])
except ImportError as e:
    print(f"skip CuPy: {e}")

try:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda")
    got = tilemm.matmul(ta, tb)
    no_bytes("torch in")
    check("torch CUDA tensors in (CUDA Array Interface)", got.copy_to_host(), want)
    check("tilemm result out to torch (torch.from_dlpack)", torch.from_dlpack(got).cpu().numpy(),
          want)
    check("tilemm result out to torch (torch.as_tensor)",
          torch.as_tensor(got, device="cuda").cpu().numpy(), want)
    check("torch transposed view in", tilemm.matmul(tb.T, ta.T).copy_to_host(), want.T)
    # A tensor written on torch's stream, read by tilemm at once: the stream in the interface
    # orders it.
    tc = torch.zeros((300, 517), device="cuda")
    tc.add_(ta)
    check("torch tensor fresh from its stream", tilemm.matmul(tc, tb).copy_to_host(), want)
    # bfloat16 tensors have no CUDA Array Interface: they come in through DLPack.
    t16a, t16b = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
    got = tilemm.matmul(t16a, t16b)
    no_bytes("torch bfloat16 in")
    check("torch bfloat16 tensors in (DLPack), float32 out", got.copy_to_host(), want)
    try:
        import ml_dtypes

        bf = tilemm.to_device(a.astype(ml_dtypes.bfloat16))
        tbf = torch.from_dlpack(bf)
        check("bfloat16 out to torch (DLPack)", tbf.float().cpu().numpy(), a)
    except ImportError as e:
        print(f"skip bfloat16: {e}")
except ImportError as e:
    print(f"skip torch: {e}")

try:
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    ja, jb = jnp.asarray(a), jnp.asarray(b)
    if ja.devices().pop().platform != "gpu":
        print(f"skip JAX: its arrays are on {ja.devices()}")
    else:
        got = tilemm.matmul(ja, jb)
        no_bytes("JAX in")
        check("JAX arrays in (DLPack)", got.copy_to_host(), want)
        check("tilemm result out to JAX (jax.dlpack.from_dlpack)",
              np.asarray(jax.dlpack.from_dlpack(got)), want)
except ImportError as e:
    print(f"skip JAX: {e}")


def timed(call, sync):
    call()  # tunes and compiles on a class's first call
    sync()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        call()
        sync()
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


def queued(call, sync, count=10):
    """Per product, `count` products queued back to back and one wait (a chain's rate)."""
    call()
    sync()
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(count):
            call()
        sync()
        samples.append((time.perf_counter() - start) / count)
    return 1e3 * statistics.median(samples)


print(f"{'dtype':>8} {'N':>5} {'device ms':>10} {'queued ms':>10} {'host ms':>10} "
      f"{'cupy ms':>9} {'torch ms':>9} {'host/device':>12} {'queued/cupy':>12}")
for dtype in [np.float32, np.float64]:
    for n in sizes:
        ha = rng.standard_normal((n, n)).astype(dtype)
        hb = rng.standard_normal((n, n)).astype(dtype)
        da, db = tilemm.to_device(ha), tilemm.to_device(hb)
        out = tilemm.device_array((n, n), dtype)
        device = timed(lambda: tilemm.matmul(da, db, out=out), tilemm.synchronize)
        chain = queued(lambda: tilemm.matmul(da, db, out=out), tilemm.synchronize)
        host = timed(lambda: tilemm.matmul(ha, hb), lambda: None)
        cupy_ms = torch_ms = cupy_queued = float("nan")
        try:
            import cupy as cp

            ca, cb = cp.asarray(ha), cp.asarray(hb)
            cupy_ms = timed(lambda: ca @ cb, cp.cuda.Device().synchronize)
            cupy_queued = queued(lambda: ca @ cb, cp.cuda.Device().synchronize)
        except ImportError:
            pass
        try:
            import torch

            ta, tb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
            torch_ms = timed(lambda: ta @ tb, torch.cuda.synchronize)
        except ImportError:
            pass
        print(f"{np.dtype(dtype).name:>8} {n:>5} {device:>10.3f} {chain:>10.3f} {host:>10.3f} "
              f"{cupy_ms:>9.3f} {torch_ms:>9.3f} {host / device:>12.2f} "
              f"{chain / cupy_queued:>12.2f}")
sys.exit(1 if failed else 0)
