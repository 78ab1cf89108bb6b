#!/usr/bin/python3
"""Checks that Debian's numpy, with libtilemm_blas.so preloaded, sends `a @ b` through tilemm
with the right answer.

Run with Debian's python3 (its numpy calls cblas_sgemm/cblas_dgemm of libblas.so.3; pip's wheels
call a bundled OpenBLAS that a preload cannot reach): `blas_numpy_check.py LIB ROUTE`. It runs
the products in a child process with LD_PRELOAD=LIB, TILEMM_BLAS=ROUTE and a log, and checks:
- every product against numpy's einsum in float64 (einsum's own loops, no BLAS), within the
  K-aware bound 2·K·u·(|A|@|B|) of the precision computed; exact-integer data exactly;
- that the log has one line per product, each with its shape as the BLAS saw it (row-major
  numpy arrays reach it as the transposed column-major product) and the route ROUTE;
- four threads multiplying at once, each product exact, and the device opened once;
- a child forked after all that: its product exact, not a hang (killed after 60 s).
Exit 0 when all hold.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys
import numpy as np

rng = np.random.default_rng(20261125)
cases = []

def check(name, a, b, c, exact):
    ref = np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))
    err = np.abs(c.astype(np.float64) - ref)
    k = a.shape[1]
    u = np.finfo(c.dtype).eps / 2
    bound = 2 * k * u * np.einsum("ik,kj->ij", np.abs(a).astype(np.float64),
                                  np.abs(b).astype(np.float64))
    ok = bool((err == 0).all()) if exact else bool((err <= bound).all())
    cases.append({"name": name, "dtype": str(c.dtype), "max_error": float(err.max()),
                  "max_ratio": float((err / np.maximum(bound, 1e-300)).max()), "ok": ok,
                  "shape": [a.shape[0], k, b.shape[1]]})

for dtype in (np.float64, np.float32):
    a = rng.random((300, 200)).astype(dtype)
    b = rng.random((200, 100)).astype(dtype)
    check("random", a, b, a @ b, False)
    # A transposed view: numpy passes it as a transposed operand, not a copy.
    at = rng.random((150, 120)).astype(dtype)
    bt = rng.random((150, 90)).astype(dtype)
    check("transposed A", at.T, bt, at.T @ bt, False)
    ai = rng.integers(-8, 9, (130, 70)).astype(dtype)
    bi = rng.integers(-8, 9, (70, 90)).astype(dtype)
    check("exact integers", ai, bi, ai @ bi, True)

# Four threads at once (numpy releases the GIL around the BLAS call): each product right.
import threading
pairs = [(rng.integers(-8, 9, (96, 64 + 8 * t)).astype(np.float32),
          rng.integers(-8, 9, (64 + 8 * t, 80)).astype(np.float32)) for t in range(4)]
results = [None] * 4
def work(t):
    a, b = pairs[t]
    results[t] = [a @ b for _ in range(3)]
threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for t, (a, b) in enumerate(pairs):
    for c in results[t]:
        check(f"thread {t}", a, b, c, True)

# A child forked after the parent used the library (its threads, its device) must not hang: its
# products go to the BLAS underneath. Checked exactly, with a time limit.
import os, signal
# Large enough for the CPU path to use its thread pool.
a = rng.integers(-8, 9, (384, 384)).astype(np.float32)
b = rng.integers(-8, 9, (384, 384)).astype(np.float32)
check("before the fork", a, b, a @ b, True)
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read_end)
    ok = bool((a @ b == np.einsum("ik,kj->ij", a, b)).all())
    os.write(write_end, b"ok" if ok else b"wrong")
    os._exit(0)
os.close(write_end)
import time
deadline = time.monotonic() + 60
while os.waitpid(pid, os.WNOHANG)[0] == 0:
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        break
    time.sleep(0.05)
answer = os.read(read_end, 16) or b"hung for 60 s"
cases.append({"name": f"forked child ({answer.decode()})", "dtype": "float32",
              "max_error": 0.0, "max_ratio": 0.0, "ok": answer == b"ok", "shape": None})
json.dump(cases, sys.stdout)
"""


def main():
    lib, route = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        log = os.path.join(work, "calls.log")
        env = dict(os.environ, LD_PRELOAD=lib, TILEMM_BLAS=route, TILEMM_BLAS_LOG=log)
        child = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                               text=True, timeout=900)
        if child.returncode != 0 or child.stderr.strip():
            print(f"blas_numpy_check: the child failed ({child.returncode}):\n{child.stderr}")
            return 1
        cases = json.loads(child.stdout)
        with open(log) as f:
            log_lines = f.readlines()
        lines = [line for line in log_lines if re.match(r"cblas_[sd]gemm", line)]
        opened = [line for line in log_lines if "gpu = " in line]
    failed = 0
    # The device is opened once, by the first call that needs it (and by none on the CPU route).
    if len(opened) != (1 if route == "gpu" else 0):
        print(f"blas_numpy_check: the device was opened {len(opened)} times: {opened}")
        failed += 1
    # Threads log in the order they finish: their lines are matched by shape below.
    if len(lines) != len([c for c in cases if c["shape"] is not None]):
        print(f"blas_numpy_check: {len(cases)} products but {len(lines)} logged calls:")
        print("".join(lines))
        failed += 1
    for case in cases:
        if case["shape"] is None:
            # The forked child: not logged (its parent's log lock may have been held at the fork).
            print(f"{case['name']}: {'ok' if case['ok'] else 'WRONG'}")
            failed += 0 if case["ok"] else 1
            continue
        m, k, n = case["shape"]
        symbol = "cblas_dgemm" if case["dtype"] == "float64" else "cblas_sgemm"
        # Row-major C = A·B is the column-major Cᵀ = Bᵀ·Aᵀ: m and n swap.
        shape = f"m={n} n={m} k={k}"
        line = next((x for x in lines if x.startswith(symbol) and f" {shape} " in x), "")
        if line:
            lines.remove(line)
        logged = f"route={route} " in line and "failed" not in line
        print(f"{case['dtype']:8} {case['name']:15} {m}x{k}x{n}: max error "
              f"{case['max_error']:.3g} ({case['max_ratio']:.3f} of the bound) "
              f"{'ok' if case['ok'] else 'OUT OF BOUND'}; log: {line.strip()}")
        if not case["ok"] or not logged:
            if not logged:
                print(f"  the log line should be {symbol} with {shape} and route={route}")
            failed += 1
    print(f"blas_numpy_check: {len(cases) - failed} of {len(cases)} products right, through "
          f"route {route}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
