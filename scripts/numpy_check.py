#!/usr/bin/env python3
"""Checks `tilemm run --a A.npy --b B.npy --out C.npy` against numpy's A @ B under the K-aware
bound |C - A@B| <= gamma_K * (|A| @ |B|), computed by numpy in float64.

Usage: scripts/numpy_check.py TILEMM_BINARY [M K N] (exit 0 when every entry is within it).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def main() -> int:
    binary = sys.argv[1]
    m, k, n = (int(x) for x in sys.argv[2:5]) if len(sys.argv) >= 5 else (300, 517, 129)
    rng = np.random.default_rng(2026)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.save(tmp / "A.npy", a)
        # B in Fortran order: tilemm must reorder it, not misread it.
        np.save(tmp / "B.npy", np.asfortranarray(b))
        subprocess.run(
            [binary, "run", "--a", tmp / "A.npy", "--b", tmp / "B.npy", "--out", tmp / "C.npy"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        c = np.load(tmp / "C.npy")
    assert c.dtype == np.float32 and c.shape == (m, n), (c.dtype, c.shape)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    magnitude = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    u = 2.0**-24
    gamma = k * u / (1 - k * u)
    err = np.abs(c.astype(np.float64) - exact)
    worst = float(np.max(err / (gamma * magnitude)))
    rtol_failures = int(np.sum(~np.isclose(c, exact, rtol=1e-5, atol=0)))
    print(
        f"numpy check {m}x{k}x{n}: max abs err {err.max():.3e}, worst err/bound {worst:.3e}, "
        f"entries a bare rtol=1e-5 would reject: {rtol_failures}"
    )
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
