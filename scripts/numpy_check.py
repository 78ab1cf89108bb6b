#!/usr/bin/env python3
"""Checks `tilemm run --a A.npy --b B.npy [--c C0.npy] --out C.npy` against numpy under the
K-aware bound |C - ref| <= gamma_{K+2}(u_acc)·M + u_out·(1 + gamma)·M, M = |alpha|·|A|@|B| +
|beta|·|C0|, with ref = alpha·A@B + beta·C0 computed by numpy in float64 (itself within
gamma_{K+2}(2^-53)·M, added to the bound).

Cases: float32 with B in Fortran order; float16 with A and C0 in Fortran order, alpha and beta
(C comes back in C0's order); float64.

Usage: scripts/numpy_check.py TILEMM_BINARY [M K N] (exit 0 when every entry of every case is
within its bound).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def case(binary, tmp, name, dtype, shape, fortran, alpha, beta):
    m, k, n = shape
    rng = np.random.default_rng(2026)
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    c0 = rng.uniform(-1, 1, (m, n)).astype(dtype)
    order = lambda x, which: np.asfortranarray(x) if which in fortran else np.ascontiguousarray(x)
    np.save(tmp / "A.npy", order(a, "a"))
    np.save(tmp / "B.npy", order(b, "b"))
    np.save(tmp / "C0.npy", order(c0, "c"))
    args = [binary, "run", "--a", tmp / "A.npy", "--b", tmp / "B.npy", "--out", tmp / "C.npy"]
    if beta != 0:
        args += ["--c", tmp / "C0.npy", "--alpha", str(alpha), "--beta", str(beta)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    c = np.load(tmp / "C.npy")
    assert c.dtype == dtype and c.shape == (m, n), (name, c.dtype, c.shape)
    if "c" in fortran and beta != 0:
        assert c.flags.f_contiguous, f"{name}: C should keep C0's Fortran order"
    w = lambda x: x.astype(np.float64)
    ref = alpha * (w(a) @ w(b)) + beta * w(c0)
    mag = abs(alpha) * (np.abs(w(a)) @ np.abs(w(b))) + abs(beta) * np.abs(w(c0))
    u_acc = 2.0**-53 if dtype == np.float64 else 2.0**-24
    u_out = {np.float16: 2.0**-11, np.float32: 0.0, np.float64: 0.0}[dtype]
    g = gamma(k + 2, u_acc)
    bound = (g + u_out * (1 + g) + gamma(k + 2, 2.0**-53)) * mag
    err = np.abs(w(c) - ref)
    worst = float(np.max(err / bound))
    print(f"numpy check {name} {m}x{k}x{n}: max abs err {err.max():.3e}, worst err/bound {worst:.3e}")
    return worst <= 1.0


def main() -> int:
    binary = sys.argv[1]
    shape = tuple(int(x) for x in sys.argv[2:5]) if len(sys.argv) >= 5 else (300, 517, 129)
    cases = [
        ("float32, B Fortran", np.float32, shape, {"b"}, 1.0, 0.0),
        ("float16, A and C0 Fortran, alpha 0.5 beta 2", np.float16, shape, {"a", "c"}, 0.5, 2.0),
        ("float64", np.float64, shape, set(), 1.0, 0.0),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        results = [case(binary, Path(tmp), *c) for c in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
