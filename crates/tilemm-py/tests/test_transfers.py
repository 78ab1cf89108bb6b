"""Products from host memory (issue #34): what a warm product costs in memory and page faults
per route, and registered memory (``tilemm.register``).

Memory is the rise of the process's peak resident size (``VmHWM``, reset by writing 5 to
``/proc/self/clear_refs``) over a warm product (the least of a few), measured in a fresh
interpreter so that no other test's memory is counted.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilemm

MEASURE = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    import tilemm

    device, n, use_out = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "out"
    times = int(sys.argv[4])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), np.float32)

    def product():
        return tilemm.matmul(a, b, out=out if use_out else None, device=device)

    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

    product()
    product()
    # The least over `times` warm products: each thread of the CPU's pool keeps the gemm crate's
    # packing buffer in its own malloc arena, and which thread takes a product is the
    # scheduler's choice, so a product may be the first on a thread (seen: 3612 faults,
    # +14 MiB, once, with both cores busy).
    rises, faults = [], []
    for _ in range(times):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before, minflt = peak(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c = product()
        rises.append(peak() - before)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt)
    rise, faults, faults_each = min(rises), min(faults), faults
    want = a.astype(np.float64) @ b.astype(np.float64)
    error = float(np.max(np.abs(c - want)))
    print(json.dumps({"rise": rise, "faults": faults, "each": [rises, faults_each],
                      "route": tilemm.last_call.route,
                      "error": error, "c_bytes": out.nbytes}))
    """
)


def measure(device, n, use_out, times=1):
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, device, str(n), "out" if use_out else "new", str(times)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # The product is right (f32 over K = n, against f64).
    assert result["error"] < 1e-3 * n, result
    return result


def test_a_warm_cpu_product_of_4096_squared_adds_at_most_a_quarter_of_c_beyond_c_itself():
    mib = 2**20
    new = measure("cpu", 4096, use_out=False, times=3)
    into = measure("cpu", 4096, use_out=True, times=3)
    c = new["c_bytes"]
    print(
        f"CPU 4096² f32: new C +{new['rise'] / mib:.1f} MiB ({new['rise'] / c:.2f}× C), "
        f"out= +{into['rise'] / mib:.1f} MiB ({into['rise'] / c:.2f}× C), "
        f"minor faults {new['faults']} and {into['faults']}"
    )
    assert "CPU" in new["route"], new["route"]
    assert new["rise"] <= 1.25 * c, new
    assert into["rise"] <= 0.25 * c, into
    # Writing into out= touches no new page: the operands are read where they lie and C is
    # written in place (a few pages of the gemm crate's packing buffers at most).
    assert into["faults"] <= 256, into


def test_a_warm_wgpu_product_of_2048_squared_adds_at_most_one_and_a_half_times_its_operands():
    mib = 2**20
    new = measure("wgpu", 2048, use_out=False)
    operands = 3 * new["c_bytes"]
    print(
        f"wgpu 2048² f32 on {new['route']}: +{new['rise'] / mib:.1f} MiB "
        f"({new['rise'] / operands:.2f}× A + B + C), minor faults {new['faults']}"
    )
    assert "wgpu" in new["route"], new["route"]
    assert new["rise"] <= 1.5 * operands, new


def test_registered_arrays_compute_as_before_and_say_whether_a_device_registered_them():
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (96, 80)).astype(np.float32)
    b = rng.integers(-4, 5, (80, 64)).astype(np.float32)
    c = np.empty((96, 64), np.float32)
    want = a @ b
    for device in ("cpu", "wgpu"):
        with tilemm.register(a, b, c, device=device) as pinned:
            tilemm.matmul(a, b, out=c, device=device)
            assert np.array_equal(c, want), device
        print(f"{device}: {pinned!r}")
        assert pinned.bytes == a.nbytes + b.nbytes + c.nbytes
        # Neither the CPU nor wgpu has host memory to register; a CUDA or HIP device does.
        assert not pinned.registered
        assert ("CPU" if device == "cpu" else "wgpu") in pinned.why_not
    # A strided view's bytes run from its lowest element to its highest.
    view = a[::-2, 1::3]
    with tilemm.register(view, device="cpu") as pinned:
        # Rows 95, 93, ..., 1 and columns 1, 4, ..., 79 of a 96×80 float32 array.
        assert pinned.bytes == ((95 * 80 + 79) - (1 * 80 + 1)) * 4 + 4
    with pytest.raises(TypeError):
        tilemm.register([1.0, 2.0])
