"""tilemm inside a Python process as other people's code uses it: inputs numpy takes that
tilemm once mishandled (masked arrays, foreign byte order, mixed half types, out= as a tuple),
half-precision sums longer than a slab of K, and a product's silence on stderr."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tilemm
from test_matmul import ROUTES, integers, ml_dtypes


@pytest.fixture(params=ROUTES)
def route(request):
    device, kernel = request.param
    return dict(device=device, kernel=kernel)


@pytest.mark.parametrize("which", ["a", "b", "out"])
def test_masked_arrays_are_refused_not_computed_with_their_masked_values(which):
    a = np.arange(6.0).reshape(2, 3)
    b = np.ones((3, 2))
    out = np.empty((2, 2))
    args = dict(a=a, b=b, out=out)
    args[which] = np.ma.masked_array(args[which], mask=np.eye(*args[which].shape, dtype=bool))
    with pytest.raises(tilemm.MaskedArrayError) as e:
        tilemm.matmul(args["a"], args["b"], out=args["out"])
    assert isinstance(e.value, TypeError) and isinstance(e.value, tilemm.TilemmError)
    assert "masked" in str(e.value) and which in str(e.value)


@pytest.mark.parametrize("order", [">", "<"])
def test_either_byte_order_is_read(route, order):
    rng = np.random.default_rng(5)
    a = integers((7, 9), np.float32, rng).astype(order + "f4")
    b = integers((9, 4), np.float64, rng).astype(order + "f8")
    got = tilemm.matmul(a, b, **route)
    want = np.matmul(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # And into a foreign-order out=.
    out = np.empty((7, 4), dtype=">f8")
    tilemm.matmul(a, b, out=out, **route)
    np.testing.assert_array_equal(out, want)


def test_bfloat16_times_float16_is_float32_as_ml_dtypes_gives_it(route):
    if ml_dtypes is None:
        pytest.fail("bfloat16 needs ml_dtypes: pip install ml_dtypes")
    rng = np.random.default_rng(6)
    a = integers((5, 33), ml_dtypes.bfloat16, rng)
    b = integers((33, 3), np.float16, rng)
    for x, y in ((a, b), (b.T, a.T)):
        got = tilemm.matmul(x, y, **route)
        want = np.matmul(x.astype(np.float32), y.astype(np.float32))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_out_may_be_a_one_tuple_as_numpy_takes_it(route):
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    out = np.zeros((3, 2), np.float32)
    assert tilemm.matmul(a, b, out=(out,), **route) is out
    np.testing.assert_array_equal(out, np.matmul(a, b, out=(np.empty_like(out),)))
    with pytest.raises(tilemm.ArgumentError, match="1-tuple"):
        tilemm.matmul(a, b, out=(out, out))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_sums_longer_than_a_slab_of_k_are_exact(route, dtype):
    # Slabs of 32768 once continued the sum through C in its own type: 2050 came back 2048,
    # and 32768 (after a partial sum of 65536) inf.
    dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    a = np.zeros((1, 32769), dtype)
    a[0, 32768 - 2049 :] = 1
    b = np.ones((32769, 1), dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(tilemm.matmul(a, b, **route), np.float32), want)
    if dtype == np.float16:
        a = np.ones((1, 98304), dtype)
        a[0, 65536:] = -1
        b = np.ones((98304, 1), dtype)
        assert tilemm.matmul(a, b, **route)[0, 0] == 32768


def test_a_product_prints_nothing_on_stderr_without_xdg_runtime_dir():
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = (
        "import os, tilemm, numpy as np\n"
        "assert 'XDG_RUNTIME_DIR' not in os.environ\n"
        "c = tilemm.matmul(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32), device='wgpu')\n"
        "assert (c == 8).all()\n"
        "tilemm.matmul(np.ones((8, 8)), np.ones((8, 8)))\n"
        "assert 'XDG_RUNTIME_DIR' not in os.environ, 'the environment changed'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


def _child_product(device, queue):
    """In a forked child: a product on `device`, or the exception's class and words."""
    try:
        a = np.arange(200 * 150, dtype=np.float64).reshape(200, 150) % 7
        b = np.arange(150 * 120, dtype=np.float64).reshape(150, 120) % 5
        c = tilemm.matmul(a, b, device=device)
        queue.put(("ok", bool((c == a @ b).all())))
    except Exception as e:  # sent back to the parent as words
        queue.put((type(e).__name__, str(e)))


@pytest.mark.parametrize("device", ["cpu", None, "wgpu"])
def test_a_child_forked_after_the_parents_products_computes_or_refuses_never_hangs(device):
    import multiprocessing

    # The parent uses the CPU path's threads (a product past gemm's threading threshold) and
    # the wgpu device, then forks.
    big = np.ones((384, 384))
    tilemm.matmul(big, big, device="cpu")
    tilemm.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32), device="wgpu")
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_child_product, args=(device, queue))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail(f"the forked child hung on device={device!r}")
    kind, detail = queue.get(timeout=5)
    if device == "wgpu":
        # The device the parent opened cannot serve a child: a clear error, not a hang.
        assert kind == "UnavailableError", (kind, detail)
        assert "forked" in detail and "spawn" in detail, detail
    else:
        assert (kind, detail) == ("ok", True), detail


def _verdict_of_a_forked_child(product, hung):
    """Forks; the child runs `product` (true when its result is right) and reports through a
    pipe. Its verdict (b"ok", b"wrong" or the exception's repr), or a failure after 60 s."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one product, its verdict through the pipe, and out
        try:
            os.write(write, b"ok" if product() else b"wrong")
        except BaseException as e:
            os.write(write, repr(e).encode()[:200])
        finally:
            os._exit(0)
    os.close(write)
    import select

    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail(hung)
    verdict = os.read(read, 200)
    os.waitpid(pid, 0)
    return verdict


def test_os_fork_child_computes_a_complex_product_after_the_parents():
    # Complex products pack their parts in passes large enough to run on the CPU path's
    # threads: a child forked after the parent's must get threads of its own.
    z = np.ones((384, 384)) * (1 + 1j)
    tilemm.matmul(z, z, device="cpu")
    verdict = _verdict_of_a_forked_child(
        lambda: (tilemm.matmul(z, z, device="cpu") == 384 * 2j).all(),
        "the os.fork child hung on a complex product",
    )
    assert verdict == b"ok", verdict


def test_os_fork_child_computes_on_the_cpu_route():
    big = np.ones((384, 384))
    tilemm.matmul(big, big)
    verdict = _verdict_of_a_forked_child(
        lambda: (tilemm.matmul(big, big) == 384).all(), "the os.fork child hung"
    )
    assert verdict == b"ok", verdict


def _in_a_child(code, limit_bytes=None):
    """`code` in a fresh interpreter (under an address-space limit): its exit code, output."""
    prelude = ""
    if limit_bytes is not None:
        prelude = (
            "import resource\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n"
        )
    done = subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def test_a_broadcast_operand_of_two_to_the_33_elements_is_read_in_place_or_raises_memory_error():
    # 2³² and 2³³ elements of zero-stride operands (32 and 64 GiB if copied) under 16 GiB of
    # address space: the CPU route reads them where they lie and computes; a GPU must copy
    # an operand without a unit stride, and that copy raises MemoryError, never an abort.
    code = (
        "import numpy as np, tilemm\n"
        "a = np.broadcast_to(np.float64(1), (4096, 2**20))\n"
        "b = np.broadcast_to(np.float64(1), (2**20, 2))\n"
        "c = tilemm.matmul(a, b, device='cpu')\n"
        "print('computed', c.shape, bool((c == 2**20).all()))\n"
        "a = np.broadcast_to(np.float64(1), (1, 2**33))\n"
        "b = np.broadcast_to(np.float64(1), (2**33, 1))\n"
        "try:\n"
        "    c = tilemm.matmul(a, b, device='wgpu')\n"
        "    print('copied', c)\n"
        "except MemoryError as e:\n"
        "    assert isinstance(e, tilemm.TilemmError), type(e)\n"
        "    print('MemoryError', e)\n"
        "print('alive')\n"
    )
    status, output = _in_a_child(code, 16 << 30)
    assert status == 0 and "alive" in output, output
    assert "computed (4096, 2) True" in output, output
    assert "MemoryError" in output, output


def test_a_product_under_an_address_space_limit_raises_memory_error():
    # 4096² f64 operands (128 MiB each) under an address-space limit 64 MiB above what the
    # process maps once they exist: numpy holds them, and the CPU route computes in place; a
    # reversed A must be copied (negative strides), and that copy does not fit.
    code = (
        "import resource, numpy as np, tilemm\n"
        "a = np.ones((4096, 4096)); b = np.ones((4096, 4096)); out = np.empty((4096, 4096))\n"
        "tilemm.matmul(np.ones((256, 256)), np.ones((256, 256)))\n"
        "size = sum(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize'))\n"
        "limit = (size << 10) + (64 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "tilemm.matmul(a, b, out=out, device='cpu')\n"
        "print('in place', bool((out == 4096).all()))\n"
        "try:\n"
        "    tilemm.matmul(a[::-1], b, out=out, device='cpu')\n"
        "    print('computed')\n"
        "except MemoryError as e:\n"
        "    assert isinstance(e, tilemm.OutOfMemoryError), type(e)\n"
        "    print('MemoryError', e)\n"
        "# The interpreter goes on, and so does tilemm.\n"
        "assert (tilemm.matmul(np.ones((8, 8)), np.ones((8, 8))) == 8).all()\n"
        "print('alive')\n"
    )
    status, output = _in_a_child(code)
    assert status == 0 and "alive" in output, output
    assert "in place True" in output, output
    assert "MemoryError" in output, output


def test_sigint_during_a_long_product_raises_keyboard_interrupt_at_once():
    # A product of about 2 s on this machine's CPU route (sized from a timed 512³ one), SIGINT
    # 0.2 s in: KeyboardInterrupt within a second, and the next product right.
    code = r"""
import os, signal, threading, time
# A shell that starts the suite in the background (`cmd &`, no job control) leaves SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler: this test wants ^C's.
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np, tilemm
small = np.ones((512, 512))
tilemm.matmul(small, small)
unit = 1e9
for _ in range(3):
    start = time.perf_counter(); tilemm.matmul(small, small); unit = min(unit, time.perf_counter() - start)
n = int(512 * max(1.0, (2.0 / max(unit, 1e-4)) ** (1 / 3)))
a = np.random.default_rng(1).random((n, n)); b = np.random.default_rng(2).random((n, n))
expected = unit * (n / 512) ** 3
threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
start = time.perf_counter()
try:
    tilemm.matmul(a, b)
    print("finished", time.perf_counter() - start, expected)
except KeyboardInterrupt:
    print("interrupted", time.perf_counter() - start, expected)
c = tilemm.matmul(a[:300], b[:, :200])
print("next", bool(np.allclose(c, a[:300] @ b[:, :200], rtol=1e-12, atol=1e-9)))
"""
    status, output = _in_a_child(code)
    assert status == 0, output
    words = output.split()
    assert words[0] == "interrupted", output
    after, expected = float(words[1]), float(words[2])
    assert after < 1.0, f"KeyboardInterrupt came {after:.2f} s in (the product: {expected:.2f} s)"
    assert expected > 1.0, f"the product was too short to test: {expected:.2f} s"
    assert words[-2:] == ["next", "True"], output


@pytest.mark.parametrize("device", [None, "cpu", "wgpu"])
def test_a_given_product_always_gives_the_same_bits_in_a_process(device):
    # On wgpu with the tuner (kernel="auto"), the first call's choice is the class's for the
    # process: later calls do not switch kernels as tuning goes on.
    rng = np.random.default_rng(11)
    a = rng.standard_normal((130, 700)).astype(np.float32)
    b = rng.standard_normal((700, 90)).astype(np.float32)
    first = tilemm.matmul(a, b, device=device, kernel="auto")
    for _ in range(4):
        again = tilemm.matmul(a, b, device=device, kernel="auto")
        assert again.tobytes() == first.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_on_the_cpu_route_an_entry_does_not_depend_on_the_shape_around_it(dtype):
    # C[i, j] from row i of A, column j of B and K alone: the same bits inside products of
    # other shapes, at other offsets, and through a transposed view.
    rng = np.random.default_rng(12)
    a = rng.standard_normal((150, 1300)).astype(dtype)
    b = rng.standard_normal((1300, 120)).astype(dtype)
    whole = tilemm.matmul(a, b, device="cpu")
    for rows, cols in [(slice(0, 1), slice(0, 1)), (slice(7, 9), slice(3, 120)),
                       (slice(0, 150), slice(5, 6)), (slice(20, 83), slice(40, 101))]:
        part = tilemm.matmul(a[rows], b[:, cols], device="cpu")
        assert part.tobytes() == np.ascontiguousarray(whole[rows, cols]).tobytes(), (rows, cols)
        flipped = tilemm.matmul(np.asfortranarray(a[rows]), b[:, cols], device="cpu")
        assert flipped.tobytes() == part.tobytes(), (rows, cols)
