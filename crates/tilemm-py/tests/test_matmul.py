"""tilemm.matmul against numpy.matmul: shapes, strides, broadcasts, dtypes, out=, alpha/beta,
errors, threads. Every case runs on the default route and again on the wgpu device (lavapipe
where there is no GPU), so that the kernels themselves run and not only the CPU path."""

import json
import math
import pickle
import threading

import numpy as np
import pytest

import tilemm

try:
    import ml_dtypes
except ImportError:  # bf16 cases then fail with an install hint
    ml_dtypes = None

# The default route, and the wgpu device named. On the wgpu device a fixed kernel keeps the
# grid's JIT compilation short; `auto` (the tuner) runs there in its own tests below.
ROUTES = [
    pytest.param((None, "auto"), id="default"),
    pytest.param(("wgpu", "tiled"), id="wgpu"),
]

UNIT = {np.float16: 2.0**-11, np.float32: 2.0**-24, np.float64: 2.0**-53}


def integers(shape, dtype, rng, high=8):
    """Small integers: every product and sum is exact in the dtype's accumulator, so tilemm
    must give numpy's result to the last bit."""
    return rng.integers(-high, high + 1, size=shape).astype(dtype)


def check_close(got, a, b, accumulate=np.float32):
    """`got` is within the K-aware bound of the f64 product: K·u of the accumulator times
    |A|·|B|, plus the rounding of the result to its dtype."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = np.matmul(a64, b64)
    k = a64.shape[-1]
    u = UNIT[accumulate]
    bound = 2 * k * u / (1 - k * u) * np.matmul(np.abs(a64), np.abs(b64))
    bound = bound + UNIT.get(got.dtype.type, 2.0**-8) * np.abs(ref)
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert (err <= bound + 1e-300).all(), f"worst err/bound {np.max(err / (bound + 1e-300))}"


@pytest.fixture(params=ROUTES)
def route(request):
    device, kernel = request.param
    if device is not None:
        try:
            tilemm.Device(device)
        except tilemm.UnavailableError as e:
            pytest.fail(
                f"no {device} device ({e}): install Mesa's Vulkan drivers (scripts/setup), "
                "which give lavapipe where there is no GPU"
            )
    return dict(device=device, kernel=kernel)


SHAPES = [(1, 1, 1), (1, 7, 1), (3, 5, 2), (17, 13, 19), (64, 48, 30), (31, 1, 37), (2, 97, 3)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_integer_products_are_exact(route, m, k, n, dtype):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = integers((m, k), dtype, rng), integers((k, n), dtype, rng)
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == dtype and got.shape == (m, n)
    np.testing.assert_array_equal(got, np.matmul(a, b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_random_products_meet_the_bound(route, dtype):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 129)).astype(dtype)
    b = rng.standard_normal((129, 23)).astype(dtype)
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == np.matmul(a, b).dtype
    check_close(got, a, b, np.float64 if dtype == np.float64 else np.float32)


def test_bfloat16_comes_back_as_float32_as_numpy_gives_it(route):
    if ml_dtypes is None:
        pytest.fail("bfloat16 needs ml_dtypes: pip install ml_dtypes")
    rng = np.random.default_rng(3)
    a = integers((9, 33), ml_dtypes.bfloat16, rng)
    b = integers((33, 5), ml_dtypes.bfloat16, rng)
    want = np.matmul(a, b)
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def strided_views(rng, dtype):
    """(name, A view, B view): transposes, Fortran order, steps, negative strides, offsets."""
    base_a = integers((40, 50), dtype, rng)
    base_b = integers((50, 60), dtype, rng)
    yield "C order", base_a[:20, :30], base_b[:30, :25]
    yield "transposes", base_a[:30, :20].T, base_b[:25, :30].T
    yield "Fortran", np.asfortranarray(base_a[:20, :30]), np.asfortranarray(base_b[:30, :25])
    yield "steps", base_a[::2, 1::3], base_b[:17, ::2]
    yield "negative", base_a[::-1, ::-2][:20, :25], base_b[::-1, :][:25, 3:40]
    yield "offset", base_a[5:25, 7:37], base_b[11:41, 13:14]


@pytest.mark.parametrize("case", range(6))
def test_any_strides_are_read_as_numpy_reads_them(route, case):
    rng = np.random.default_rng(11 + case)
    name, a, b = list(strided_views(rng, np.float32))[case]
    np.testing.assert_array_equal(tilemm.matmul(a, b, **route), np.matmul(a, b), err_msg=name)


BROADCASTS = [
    ((5, 1, 2, 3), (4, 3, 7)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (1, 3, 4, 2)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((4,), (4,)),
    ((2, 5, 3), (3,)),
    ((3,), (6, 3, 2)),
]


@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_batches_broadcast_and_vectors_are_promoted_as_numpy_does(route, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = integers(sa, np.float64, rng), integers(sb, np.float64, rng)
    want = np.matmul(a, b)
    got = tilemm.matmul(a, b, **route)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_batch_dimensions_of_one_with_any_stride_are_merged_rightly(route):
    rng = np.random.default_rng(37)
    # A slice keeps the stride of a dimension of size 1 from its base, which is not the one a
    # merge of the batch dimensions around it would need.
    a = integers((2, 1, 5, 3, 4), np.float64, rng)[:, :, :3]
    b = integers((4, 2), np.float64, rng)
    np.testing.assert_array_equal(tilemm.matmul(a, b, **route), np.matmul(a, b))
    out = np.zeros((2, 1, 5, 3, 2))[:, :, 1:4]
    tilemm.matmul(a, b, out=out, **route)
    np.testing.assert_array_equal(out, np.matmul(a, b))
    # Batch dimensions in swapped order merge into none: A, B and out each entry by entry.
    a = integers((2, 3, 4, 5), np.float64, rng).transpose(1, 0, 2, 3)
    b = integers((2, 3, 5, 6), np.float64, rng).transpose(1, 0, 2, 3)
    out = np.zeros((2, 3, 4, 6)).transpose(1, 0, 2, 3)
    assert tilemm.matmul(a, b, out=out, **route) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))
    np.testing.assert_array_equal(tilemm.matmul(a, b, **route), np.matmul(a, b))


def test_a_batch_broadcast_along_part_of_its_dimensions(route):
    rng = np.random.default_rng(5)
    # A's (2, 1) batch against B's (3,): no single batch stride covers it.
    a = integers((2, 1, 4, 3), np.float32, rng)
    b = integers((3, 3, 5), np.float32, rng)[::-1]
    np.testing.assert_array_equal(tilemm.matmul(a, b, **route), np.matmul(a, b))


@pytest.mark.parametrize(
    "da,db", [(np.float16, np.float32), (np.float32, np.float64), (np.float16, np.float64)]
)
def test_dtypes_promote_as_numpy_promotes_them(route, da, db):
    rng = np.random.default_rng(9)
    a, b = integers((6, 7), da, rng), integers((7, 8), db, rng)
    want = np.matmul(a, b)
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def gaussian_integers(rng, shape, dtype):
    """Complex numbers with integer parts in [-3, 3]: their products are exact."""
    return (rng.integers(-3, 4, shape) + 1j * rng.integers(-3, 4, shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_products_are_numpys_exactly_on_gaussian_integers(route, dtype):
    rng = np.random.default_rng(21)
    gauss = lambda shape: gaussian_integers(rng, shape, dtype)  # noqa: E731
    # Broadcast batches, a transposed and a strided operand, a vector.
    a, b = gauss((2, 1, 9, 11)), gauss((3, 11, 7))
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == dtype and got.shape == (2, 3, 9, 7)
    np.testing.assert_array_equal(got, np.matmul(a, b))
    at = gauss((11, 9)).T
    bs = gauss((11, 14))[:, ::2]
    np.testing.assert_array_equal(tilemm.matmul(at, bs, **route), np.matmul(at, bs))
    v = gauss(11)
    np.testing.assert_array_equal(tilemm.matmul(at, v, **route), np.matmul(at, v))
    # out= in place, α and β real as for every dtype.
    out = gauss((9, 7))
    want = 2.0 * np.matmul(a[0, 0], b[1]) - out
    tilemm.matmul(a[0, 0], b[1], out=out, alpha=2.0, beta=-1.0, **route)
    np.testing.assert_array_equal(out, want)
    # A real operand promotes as numpy promotes it.
    r = rng.integers(-3, 4, (11, 7)).astype(np.float64)
    mixed = tilemm.matmul(a[0, 0], r, **route)
    assert mixed.dtype == np.matmul(a[0, 0], r).dtype
    np.testing.assert_array_equal(mixed, np.matmul(a[0, 0], r))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_alpha_and_beta_scale_a_complex_product_exactly(route, dtype):
    rng = np.random.default_rng(23)
    gauss = lambda shape: gaussian_integers(rng, shape, dtype)  # noqa: E731
    a, b, c = gauss((2, 9, 11)), gauss((11, 7)), gauss((2, 9, 7))
    alpha, beta = 2 - 1j, 1j
    want = alpha * np.matmul(a, b) + beta * c
    tilemm.matmul(a, b, out=c, alpha=alpha, beta=beta, **route)
    np.testing.assert_array_equal(c, want)
    # Without out=, a complex alpha alone.
    np.testing.assert_array_equal(tilemm.matmul(a, b, alpha=1j, **route), 1j * np.matmul(a, b))


def test_a_complex_scalar_for_a_real_product_is_refused():
    a = np.ones((3, 3))
    with pytest.raises(tilemm.ArgumentError, match="alpha = .*complex.*float64"):
        tilemm.matmul(a, a, alpha=1j)
    with pytest.raises(tilemm.ArgumentError, match="beta = .*complex"):
        tilemm.matmul(a, a, out=np.ones((3, 3)), beta=2 + 1j)
    # A complex value with no imaginary part is a real one.
    np.testing.assert_array_equal(tilemm.matmul(a, a, alpha=2 + 0j), 2 * (a @ a))


def test_complex_products_meet_the_bound_on_random_data(route):
    rng = np.random.default_rng(22)
    for dtype, real in [(np.complex64, np.float32), (np.complex128, np.float64)]:
        a = (rng.standard_normal((33, 70)) + 1j * rng.standard_normal((33, 70))).astype(dtype)
        b = (rng.standard_normal((70, 21)) + 1j * rng.standard_normal((70, 21))).astype(dtype)
        got = tilemm.matmul(a, b, **route)
        ref = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
        # 4M: each part is a real product of 2K terms (a re·re and an im·im product summed).
        u = np.finfo(real).eps / 2
        n = 2 * a.shape[1]
        mag = np.matmul(np.abs(a.real), np.abs(b.real)) + np.matmul(np.abs(a.imag), np.abs(b.imag))
        bound_re = (n * u / (1 - n * u)) * mag + u * np.abs(ref.real)
        mag = np.matmul(np.abs(a.real), np.abs(b.imag)) + np.matmul(np.abs(a.imag), np.abs(b.real))
        bound_im = (n * u / (1 - n * u)) * mag + u * np.abs(ref.imag)
        assert (np.abs(got.real - ref.real) <= bound_re).all(), dtype
        assert (np.abs(got.imag - ref.imag) <= bound_im).all(), dtype


INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_products_are_numpys_exactly_wrapping_included(route, dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    info = np.iinfo(dtype)
    # Small values (one float64 product), then the whole range (overflowing: digit products).
    for low, high in [(-5, 6), (info.min, info.max)]:
        low, high = max(low, info.min), min(high, info.max)
        a = rng.integers(low, high, (2, 7, 33), dtype=dtype, endpoint=True)
        b = rng.integers(low, high, (33, 5), dtype=dtype, endpoint=True)
        with np.errstate(over="ignore"):
            want = np.matmul(a, b)
        got = tilemm.matmul(a, b, **route)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    # A vector, and out= of the same kind.
    v = rng.integers(0, 4, 33, dtype=dtype)
    np.testing.assert_array_equal(tilemm.matmul(a[0], v, **route), np.matmul(a[0], v))
    out = np.empty((7, 5), np.int64 if info.min < 0 else np.uint64)
    tilemm.matmul(a[0], b, out=out, **route)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, np.matmul(a[0], b, out=np.empty_like(out)))


def test_bool_products_are_or_of_ands_and_mixed_types_promote(route):
    rng = np.random.default_rng(5)
    a, b = rng.random((9, 40)) < 0.1, rng.random((40, 6)) < 0.1
    got = tilemm.matmul(a, b, **route)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.matmul(a, b))
    # bool with int8: int8; int16 with uint16: int32; int32 with float32: float64.
    for x, y in [(a, rng.integers(-3, 4, (40, 6), dtype=np.int8)),
                 (rng.integers(-3, 4, (9, 40), dtype=np.int16), rng.integers(0, 4, (40, 6), dtype=np.uint16)),
                 (rng.integers(-3, 4, (9, 40), dtype=np.int32), rng.standard_normal((40, 6)).astype(np.float32))]:
        want = np.matmul(x, y)
        got = tilemm.matmul(x, y, **route)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # Two vectors: a scalar, as numpy gives it.
    for y in (np.zeros(3, bool), np.ones(3, bool)):
        got = tilemm.matmul(np.ones(3, bool), y)
        assert type(got) is np.bool_ and got == np.matmul(np.ones(3, bool), y)


def test_broadcast_integer_and_bool_operands_are_cast_once_not_copied_whole():
    # np.broadcast_to views of a few values over long K: the exact paths cast the values, not
    # the views spelled out (a bool product over K = 2³¹ once asked for 32 GiB), and the
    # product reads the broadcast in place.
    import tracemalloc

    k = 2**22
    rng = np.random.default_rng(8)
    row = rng.integers(-3, 4, (3, 1), dtype=np.int16)
    cases = [
        (np.broadcast_to(True, (2, k)), np.broadcast_to(rng.random((k, 1)) < 0.5, (k, 2))),
        (np.broadcast_to(row, (3, k)), np.broadcast_to(np.int16(-2), (k, 4))),
        # Values whose sums overflow: the digit products.
        (np.broadcast_to(np.int64(2**40 + 3), (2, k)), np.broadcast_to(np.int64(3**25), (k, 3))),
    ]
    for a, b in cases:
        with np.errstate(over="ignore"):
            want = np.matmul(a.copy(), b.copy())
        tracemalloc.start()
        got = tilemm.matmul(a, b, device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        # Either operand spelled out would be 24 MiB or more; the first case's column of B,
        # which is not a broadcast, is 16 MiB in float32.
        bound = (40 if b.strides[0] else 4) << 20
        assert peak < bound, (a.dtype, peak)


def _casting_and_order_cases():
    rng = np.random.default_rng(41)
    a = rng.integers(-3, 4, (3, 4)).astype(np.float64)
    b = rng.integers(-3, 4, (4, 5)).astype(np.float64)
    a3 = rng.integers(-3, 4, (2, 3, 4)).astype(np.float64)
    af, bf, a32 = np.asfortranarray(a), np.asfortranarray(b), a.astype(np.float32)
    ints = a.astype(np.int64), b.astype(np.int64)
    return {
        "order C": ((a, b), {"order": "C"}),
        "order F": ((a, b), {"order": "F"}),
        "order F, a stack": ((a3, b), {"order": "F"}),
        "order F, integers": ((a.astype(np.int32), b.astype(np.int32)), {"order": "F"}),
        "order A, both Fortran": ((af, bf), {"order": "A"}),
        "order A, one Fortran": ((af, b), {"order": "A"}),
        "order K, both Fortran": ((af, bf), {"order": "K"}),
        # A column is F-contiguous and C-contiguous at once: numpy's A counts it Fortran.
        "order A, Fortran and a column": ((af, b[:, :1].copy()), {"order": "A"}),
        "order a, lower case": ((af, bf), {"order": "a"}),
        "order None": ((af, bf), {"order": None}),
        "casting no, one type": ((a, b), {"casting": "no"}),
        "casting no, float32 promoted": ((a32, b), {"casting": "no"}),
        "casting equiv, float32 promoted": ((a32, b), {"casting": "equiv"}),
        "casting safe, float32 promoted": ((a32, b), {"casting": "safe"}),
        "dtype int32, unsafe": ((a, b), {"dtype": np.int32, "casting": "unsafe"}),
        "out int32, unsafe": ((a, b), {"out": (3, 5, np.int32), "casting": "unsafe"}),
        "out float32, safe": ((a, b), {"out": (3, 5, np.float32), "casting": "safe"}),
        "integers out int8, unsafe": (ints, {"out": (3, 5, np.int8), "casting": "unsafe"}),
        "integers out float32, safe": (ints, {"out": (3, 5, np.float32), "casting": "safe"}),
        # np.matrix made in the test, where its deprecation warning is filtered.
        "subok False": ((a, b), {"subok": False, "matrix": True}),
        "casting unknown": ((a, b), {"casting": "weird"}),
        "order unknown": ((a, b), {"order": "Z"}),
    }


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("case", list(_casting_and_order_cases()))
def test_casting_order_and_subok_are_numpys(route, case):
    (a, b), options = _casting_and_order_cases()[case]
    if options.pop("matrix", False):
        a, b = np.matrix(a), np.matrix(b)

    def call(module):
        kwargs = dict(options)
        if "out" in kwargs:
            m, n, dtype = kwargs["out"]
            kwargs["out"] = np.zeros((m, n), dtype)
        return module.matmul(a, b, **kwargs, **(route if module is tilemm else {}))

    try:
        want = call(np)
    except (TypeError, ValueError) as e:
        # numpy's refusal, as tilemm's class of the same numpy base.
        with pytest.raises(TypeError if isinstance(e, TypeError) else ValueError) as got:
            call(tilemm)
        assert isinstance(got.value, tilemm.TilemmError)
        return
    got = call(tilemm)
    assert type(got) is type(want) and got.dtype == want.dtype and got.strides == want.strides
    np.testing.assert_array_equal(got, want)


def test_dtype_and_axes_are_numpys(route):
    rng = np.random.default_rng(31)
    a = rng.integers(-4, 5, (2, 3, 4)).astype(np.float64)
    b = rng.integers(-4, 5, (4, 5)).astype(np.float64)
    # dtype=: computed and returned in it; a cast numpy refuses is refused.
    got = tilemm.matmul(a, b, dtype=np.float32, **route)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.matmul(a, b, dtype=np.float32))
    with pytest.raises(tilemm.DTypeError, match="same_kind"):
        tilemm.matmul(a, b, dtype=np.int32, **route)
    # axes=: the core axes anywhere, the result's too, out= through them.
    spec = [(2, 1), (-2, -1), (-1, -2)]
    got = tilemm.matmul(np.transpose(a, (0, 2, 1)), b, axes=spec, **route)
    want = np.matmul(np.transpose(a, (0, 2, 1)), b, axes=spec)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    out = np.zeros(want.shape)
    assert tilemm.matmul(np.transpose(a, (0, 2, 1)), b, out=out, axes=spec, **route) is not None
    np.testing.assert_array_equal(out, want)
    # A vector operand has one core axis, and so has the result.
    x = np.transpose(a, (1, 0, 2))  # (3, 2, 4)
    v = rng.integers(-4, 5, 4).astype(np.float64)
    spec = [(0, 2), (0,), (0,)]
    got = tilemm.matmul(x, v, axes=spec, **route)
    want = np.matmul(x, v, axes=spec)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    with pytest.raises(tilemm.ArgumentError, match="axes"):
        tilemm.matmul(a, b, axes=[(0, 1), (0, 1)], **route)
    with pytest.raises(tilemm.ArgumentError, match="axes"):
        tilemm.matmul(a, b, axes=[(0, 7), (0, 1), (0, 1)], **route)


def test_out_is_written_in_place_non_contiguous_included(route):
    rng = np.random.default_rng(13)
    a, b = integers((10, 12), np.float32, rng), integers((12, 9), np.float32, rng)
    big = np.full((30, 30), 7.0, np.float32)
    out = big[::3, 2:20:2]
    returned = tilemm.matmul(a, b, out=out, **route)
    assert returned is out
    np.testing.assert_array_equal(big[::3, 2:20:2], np.matmul(a, b))
    # Untouched elsewhere.
    assert (big[1::3] == 7).all() and (big[::3, 20:] == 7).all()
    # An f64 product into an f32 out casts as numpy casts ('same_kind').
    out32 = np.empty((10, 9), np.float32)
    tilemm.matmul(a.astype(np.float64), b, out=out32, **route)
    np.testing.assert_array_equal(out32, np.matmul(a, b))


def test_out_aliasing_an_input_gives_numpys_result(route):
    rng = np.random.default_rng(17)
    a = integers((12, 12), np.float64, rng)
    b = integers((12, 12), np.float64, rng)
    want = np.matmul(a, b)
    tilemm.matmul(a, b, out=a, **route)
    np.testing.assert_array_equal(a, want)
    c = integers((12, 12), np.float64, rng)
    want = 2 * np.matmul(c, c.T) + 0.5 * c
    tilemm.matmul(c, c.T, out=c, alpha=2.0, beta=0.5, **route)
    np.testing.assert_array_equal(c, want)


def test_alpha_and_beta_follow_the_gemm_contract(route):
    rng = np.random.default_rng(19)
    a, b = integers((8, 6), np.float64, rng), integers((6, 5), np.float64, rng)
    c = integers((8, 5), np.float64, rng)
    want = 0.5 * np.matmul(a, b) - 2.0 * c
    tilemm.matmul(a, b, out=c, alpha=0.5, beta=-2.0, **route)
    np.testing.assert_array_equal(c, want)
    # beta = 0 does not read out: NaN there does not reach the result.
    nan = np.full((8, 5), np.nan)
    tilemm.matmul(a, b, out=nan, beta=0.0, **route)
    np.testing.assert_array_equal(nan, np.matmul(a, b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex64, np.int32, np.bool_])
@pytest.mark.parametrize(
    "sa,sb,so",
    [((3, 4), (4, 6), (2, 3, 6)), ((2, 3, 4), (4, 6), (5, 2, 3, 6)), ((4,), (4, 6), (2, 6)),
     ((4,), (4,), (3,)), ((2, 1, 2, 3), (3, 4), (2, 5, 2, 4)), ((1, 4, 3), (3, 5), (2, 3, 4, 5))],
)
def test_out_with_loop_dimensions_in_front_takes_the_result_broadcast(route, dtype, sa, sb, so):
    # numpy's ufunc rule: out= may add loop dimensions, or have longer ones where the inputs'
    # are 1, over which the inputs broadcast.
    rng = np.random.default_rng(len(so))
    a = integers(sa, np.float64, rng).astype(dtype)
    b = integers(sb, np.float64, rng).astype(dtype)
    want, out = np.zeros(so, dtype), np.zeros(so, dtype)
    np.matmul(a, b, out=want)
    assert tilemm.matmul(a, b, out=out, **route) is out
    np.testing.assert_array_equal(out, want)


class OwnUfuncs(np.ndarray):
    """A subclass that computes ufuncs its own way (as units libraries do)."""

    def __array_ufunc__(self, *args, **kwargs):
        return NotImplemented


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrices_come_back_as_numpy_returns_them(route):
    m, n = np.matrix(np.arange(6.0).reshape(2, 3)), np.matrix(np.ones((3, 2)))
    for x, y in ((m, n), (m, np.ones((3, 2))), (np.ones((2, 2)), m)):
        got, want = tilemm.matmul(x, y, **route), np.matmul(x, y)
        assert type(got) is type(want) is np.matrix
        np.testing.assert_array_equal(got, want)
    out = np.zeros((2, 2))
    assert tilemm.matmul(m, n, out=out, **route) is out
    # A matrix as out= is written and returned.
    out = np.matrix(np.zeros((2, 2)))
    assert tilemm.matmul(m, n, out=out, **route) is out
    np.testing.assert_array_equal(out, np.matmul(m, n))


class Plain(np.ndarray):
    """A subclass with numpy's own ufuncs."""


def test_a_subclass_wraps_a_scalar_result_too_and_own_ufuncs_are_refused_anyway(route):
    v = np.arange(3.0).view(Plain)
    got, want = tilemm.matmul(v, v, **route), np.matmul(v, v)
    assert type(got) is type(want) is Plain and got.shape == () and got == want
    # An __array_ufunc__ of its own is the subclass's matmul whatever subok says, and as out=.
    own = np.ones((2, 2)).view(OwnUfuncs)
    for call in (lambda: tilemm.matmul(own, np.ones((2, 2)), subok=False, **route),
                 lambda: tilemm.matmul(np.ones((2, 2)), np.ones((2, 2)), out=own, **route)):
        with pytest.raises(tilemm.DTypeError, match="__array_ufunc__"):
            call()


def test_empty_products_are_numpys(route):
    z = tilemm.matmul(np.ones((3, 0)), np.ones((0, 4)), **route)
    np.testing.assert_array_equal(z, np.zeros((3, 4)))
    assert tilemm.matmul(np.ones((0, 3)), np.ones((3, 4)), **route).shape == (0, 4)
    assert tilemm.matmul(np.ones((3, 2)), np.ones((2, 0)), **route).shape == (3, 0)
    assert tilemm.matmul(np.ones((0, 3, 2)), np.ones((2, 5)), **route).shape == (0, 3, 5)
    out = np.full((3, 4), 2.0)
    tilemm.matmul(np.ones((3, 0)), np.ones((0, 4)), out=out, beta=3.0, **route)
    np.testing.assert_array_equal(out, np.full((3, 4), 6.0))


def test_the_acceptance_examples():
    assert tilemm.matmul(np.ones((5, 1, 2, 3)), np.ones((4, 3, 7))).shape == (5, 4, 2, 7)
    assert tilemm.matmul(np.ones(3), np.ones((3, 4))).shape == (4,)
    with pytest.raises(ValueError) as e:
        tilemm.matmul(np.ones((2, 3)), np.ones((4, 5)))
    assert isinstance(e.value, tilemm.ShapeError)
    rng = np.random.default_rng(0)
    a = rng.random((300, 200)).astype(np.float32)
    b = rng.random((200, 100)).astype(np.float32)
    check_close(tilemm.matmul(a, b), a, b)


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((4, 5))), tilemm.ShapeError, "core dimension"),
        (lambda: tilemm.matmul(np.ones(3), 2.0), tilemm.ShapeError, "not have enough dimensions"),
        (lambda: tilemm.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 4))), tilemm.ShapeError, "broadcast"),
        (lambda: tilemm.matmul(np.ones((2, 3), object), np.ones((3, 2))), tilemm.DTypeError, "object"),
        (lambda: tilemm.matmul(np.ones((2, 3), np.longdouble), np.ones((3, 2))), tilemm.DTypeError, "float128"),
        (lambda: tilemm.matmul(np.ones((2, 3), int), np.ones((3, 2), int), alpha=2.0), tilemm.ArgumentError, "alpha"),
        (lambda: tilemm.matmul(np.ones((2, 3), np.clongdouble), np.ones((3, 2))), tilemm.DTypeError, "complex"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), out=np.ones((2, 3))), tilemm.ShapeError, "shape"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), out=np.ones((2, 2), np.int32)), tilemm.DTypeError, "same_kind"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), beta=1.0), tilemm.ArgumentError, "out="),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), alpha=float("nan")), tilemm.ArgumentError, "finite"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), alpha=10**400), tilemm.ArgumentError, "alpha"),
        (lambda: tilemm.matmul(np.ones((2, 2)).view(OwnUfuncs), np.ones((2, 2))), tilemm.DTypeError, "__array_ufunc__"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), out=np.ones((2, 1, 2))), tilemm.ShapeError, "shape"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), kernel="nope"), tilemm.ArgumentError, "nope"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), device="tpu"), tilemm.ArgumentError, "tpu"),
        # Named as every front end names devices (tilemm.DeviceSpec): the CPU has no index.
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), device="cpu:1"), tilemm.ArgumentError, "CPU has no device index"),
        (lambda: tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)), device="wgpu:99"), tilemm.UnavailableError, "#99"),
    ],
)
def test_errors_are_numpys_classes_and_tilemms(call, error, words):
    with pytest.raises(error) as e:
        call()
    assert words in str(e.value)
    assert isinstance(e.value, tilemm.TilemmError)
    # Pickled (as a Dask worker sends it) it comes back as the same class.
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is type(e.value) and str(back) == str(e.value)


def test_numpy_classes_are_the_bases():
    assert issubclass(tilemm.ShapeError, ValueError)
    assert issubclass(tilemm.DTypeError, TypeError)
    assert issubclass(tilemm.UnavailableError, RuntimeError)
    assert isinstance(tilemm.__version__, str) and tilemm.__version__


def test_four_threads_at_once(route):
    rng = np.random.default_rng(23)
    pairs = [(integers((33, 21), np.float32, rng), integers((21, 17), np.float32, rng)) for _ in range(4)]
    results = [None] * 4
    errors = []

    def work(i):
        try:
            for _ in range(3):
                results[i] = tilemm.matmul(*pairs[i], **route)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (a, b), got in zip(pairs, results):
        np.testing.assert_array_equal(got, np.matmul(a, b))


def test_devices_and_device():
    found = tilemm.devices()
    assert any(d["backend"] == "wgpu" for d in found), found
    d = tilemm.Device("wgpu:0")
    assert "wgpu" in d.route and repr(d).startswith("tilemm.Device('wgpu:0'")
    assert "CPU" in tilemm.Device("cpu").route
    assert pickle.loads(pickle.dumps(d)).route == d.route


def test_auto_runs_on_the_wgpu_device():
    # The tuner's choice, verified by it, on lavapipe's kernels.
    rng = np.random.default_rng(29)
    a, b = integers((64, 64), np.float32, rng), integers((64, 64), np.float32, rng)
    np.testing.assert_array_equal(tilemm.matmul(a, b, device="wgpu"), np.matmul(a, b))


def test_run_reports_the_example_as_tilemm_run_does():
    report = tilemm.run(64, 48, 32, backend="wgpu", kernel="tiled")
    assert report.passed
    assert report.problem.m == 64 and report.problem.k == 48 and report.problem.n == 32
    assert report.first_run is not None and report.second_run is not None
    text = repr(report)
    for line in ("1st GPU", "2nd GPU", "CPU", "bound", "result      PASS"):
        assert line in text, text
    assert report.to_dict()["pass"] is True
    cpu = tilemm.run(16, backend="cpu")
    assert cpu.passed and cpu.first_run is None
    with pytest.raises(tilemm.ShapeError):
        tilemm.run(0)
    with pytest.raises(tilemm.DTypeError):
        tilemm.run(8, dtype="int32")


def test_python_dash_m_tilemm_runs_the_example():
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "tilemm", "-m", "32", "--backend", "cpu", "--json"],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["pass"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "tilemm", "--kernel", "nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("tilemm: error:"), bad.stderr


def test_the_last_call_says_which_route_it_took():
    a = np.ones((4, 5), np.float32)
    tilemm.matmul(a, a.T, device="wgpu", kernel="naive")
    assert "wgpu" in tilemm.last_call.route and tilemm.last_call.library_seconds > 0
    tilemm.matmul(a, a.T, device="cpu")
    assert tilemm.last_call.route.startswith("the CPU")


class GeneralPath(Exception):
    pass


def test_a_plain_product_skips_the_general_paths_checks_with_its_result(monkeypatch):
    """Two native float32 or float64 matrices with the defaults take `_plain_product`: the
    general path's bits, route and timing, without its checks (tens of microseconds of
    Python); anything else takes the general path."""
    rng = np.random.default_rng(3)

    def general_path(*args):
        raise GeneralPath

    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((37, 29)).astype(dtype)
        b = rng.standard_normal((29, 41)).astype(dtype)
        general = tilemm.matmul(a, b, alpha=1)  # an int: the general path
        general_route = tilemm.last_call.route
        with monkeypatch.context() as patched:
            patched.setattr(tilemm, "_result_dtype", general_path)
            tilemm.last_call.route = None
            plain = tilemm.matmul(a, b)
            assert plain.dtype == dtype and plain.shape == (37, 41) and plain.flags.c_contiguous
            np.testing.assert_array_equal(plain, general)
            assert tilemm.last_call.route == general_route
            assert tilemm.last_call.library_seconds > 0
            # Strided views and stacks (equal batches, or one operand a matrix) are plain
            # too; byte-swapped, mixed, vector, partly broadcast and empty
            # operands are not.
            strided = tilemm.matmul(a[::2], b[:, ::3])
            stack_a = np.stack([a, 2 * a, -a])[:, ::2]
            stack_b = np.stack([b, b[::-1], 3 * b])
            stacks = [
                tilemm.matmul(stack_a, b),
                tilemm.matmul(a, stack_b.reshape(1, 3, 29, 41)),
                tilemm.matmul(stack_a, stack_b),
            ]
            for x, y in [
                (a.astype(a.dtype.newbyteorder()), b),
                (a, b.astype(np.float16)),
                (a[0], b),
                (a, b[:, 0]),
                (stack_a[:, np.newaxis], stack_b[np.newaxis]),
                (stack_a[:1], stack_b),
                (stack_a[:0], b),
                (a[:, :0], b[:0]),
            ]:
                with pytest.raises(GeneralPath):
                    tilemm.matmul(x, y)
        accumulate = np.float32 if dtype == np.float32 else np.float64
        check_close(plain, a, b, accumulate)
        check_close(strided, a[::2], b[:, ::3], accumulate)
        # Each stack as the general path computes it, bit for bit, and the right shape.
        for got, (x, y) in zip(stacks, [
            (stack_a, b), (a, stack_b.reshape(1, 3, 29, 41)), (stack_a, stack_b)
        ]):
            assert got.shape == np.matmul(x, y).shape and got.dtype == dtype
            np.testing.assert_array_equal(got, tilemm.matmul(x, y, alpha=1))
            check_close(got, x, y, accumulate)


def test_two_vectors_give_a_scalar_as_numpy_does(route):
    a, b = np.arange(5.0), np.arange(5.0)[::-1].copy()
    got = tilemm.matmul(a, b, **route)
    assert type(got) is type(np.matmul(a, b)) and got == np.matmul(a, b)
    assert tilemm.matmul(np.ones(0), np.ones(0), **route) == 0.0
    out = np.zeros(())
    assert tilemm.matmul(a, b, out=out, **route) is out and out == np.matmul(a, b)


def test_the_gil_is_released_while_the_product_runs():
    # A product of ~130 ms on the CPU path in another thread: with the GIL released, this
    # thread keeps running Python meanwhile, in the steps of the interpreter's switch interval
    # (5 ms); held, it would stop for the whole product.
    import time

    rng = np.random.default_rng(31)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 2048), dtype=np.float32)
    start = time.perf_counter()
    tilemm.matmul(a, b, device="cpu")
    product = time.perf_counter() - start
    done = threading.Event()
    worker = threading.Thread(target=lambda: (tilemm.matmul(a, b, device="cpu"), done.set()))
    longest, last = 0.0, time.perf_counter()
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    assert longest < product / 2, (
        f"this thread stopped for {longest * 1e3:.1f} ms of a {product * 1e3:.1f} ms product"
    )


def test_tilemm_device_in_the_environment_pins_the_device():
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, tilemm; tilemm.matmul(np.ones((2, 3)), np.ones((3, 2)));"
        "print(tilemm.last_call.route)"
    )
    for device, words in (("wgpu", "through wgpu"), ("cpu", "the CPU")):
        env = dict(os.environ, TILEMM_DEVICE=device)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert words in out.stdout, (device, out.stdout)
    env = dict(os.environ, TILEMM_DEVICE="tpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "ArgumentError" in out.stderr and "tpu" in out.stderr, out.stderr


def test_tune_searches_on_request_into_the_cache_a_later_process_reads(tmp_path):
    # Its own process: the cache directory is read once per process, as every setting is.
    import os
    import subprocess
    import sys

    code = (
        "import json, tilemm;"
        "r = tilemm.tune(40, 24, 72, device='wgpu', budget='none');"
        "print(json.dumps([r['cache'], r['verified'], r['saved'], len(r['timed']), r['budget']]))"
    )
    env = dict(os.environ, TILEMM_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == ["miss", True, True, 1, "none"], first.stdout
    assert (tmp_path / "tuning.json").is_file()
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)[:4] == ["hit", True, False, 0], second.stdout
    with pytest.raises(tilemm.ArgumentError, match="nothing to tune"):
        tilemm.tune(8, device="cpu")
    with pytest.raises(tilemm.ArgumentError, match="budget"):
        tilemm.tune(8, device="wgpu", budget="soon")


def test_the_package_is_typed_and_its_stub_names_every_export():
    import ast
    import pathlib

    package = pathlib.Path(tilemm.__file__).parent
    assert (package / "py.typed").is_file(), "the installed package has no py.typed"
    stub = ast.parse((package / "__init__.pyi").read_text())
    named = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            named.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            named.add(node.target.id)
        elif isinstance(node, ast.Assign):
            named.update(t.id for t in node.targets)
    missing = set(tilemm.__all__) - named
    assert not missing, f"the stub lacks {sorted(missing)}"
