"""numpy's own matmul tests, from the installed numpy (numpy/_core/tests/test_multiarray.py's
TestMatmul, which runs the shared MatmulCommon cases and matmul's own), with ``matmul =
tilemm.matmul``: they know cases we did not think of. TestMethods' matmul tests and
``test_matmul_axes``, which call ``np.matmul`` by name, run with their module's ``np`` a numpy
whose ``matmul`` is tilemm's; TestMatmulInplace's cases (``a @= b``, numpy's operator, which
nothing can redirect) run as ``tilemm.matmul(a, b, out=a)`` over numpy's own dtype pairs and
shapes.

The documented refusals are left out of their dtype loops and checked here instead: longdouble
and clongdouble (numpy's extended precision, which no GPU computes) and object arrays (Python
objects, not numbers in memory) raise ``tilemm.DTypeError``."""

import types

import numpy as np
import pytest

import tilemm

numpy_tests = pytest.importorskip(
    "numpy._core.tests.test_multiarray",
    reason="numpy's test files are not installed (pip's numpy ships them)",
)

REFUSED = "gGO"


class TestTilemmMatmul(numpy_tests.TestMatmul):
    matmul = staticmethod(tilemm.matmul)
    types = "".join(t for t in numpy_tests.MatmulCommon.types if t not in REFUSED)

    def test_matmul_object(self):
        self.refused_objects()

    def test_matmul_object_type_scalar(self):
        self.refused_objects()

    @staticmethod
    def refused_objects():
        for code in REFUSED:
            with pytest.raises(tilemm.DTypeError):
                tilemm.matmul(np.ones((2, 2), dtype=code), np.ones((2, 2), dtype=code))


def test_every_numpy_type_but_the_refused_ones_is_run():
    assert set(TestTilemmMatmul.types) == set("?bhilqBHILQefdFD")


class _NumpyWithTilemmMatmul(types.ModuleType):
    """numpy, with ``matmul`` tilemm's: numpy's tests that call ``np.matmul`` by name run
    through tilemm when their module's ``np`` is this."""

    matmul = staticmethod(tilemm.matmul)

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def np_is_tilemm(monkeypatch):
    monkeypatch.setattr(numpy_tests, "np", _NumpyWithTilemmMatmul("numpy"))


@pytest.mark.parametrize(
    "name",
    ["test_matmul_out", "test_dot_matmul_out", "test_dot_matmul_inner_array_casting_fails"],
)
def test_numpys_methods_tests_of_matmul(np_is_tilemm, name):
    """TestMethods' matmul tests: ``out=`` overlapping an operand (and reversed), an ``out``
    of another class than the operands, an ``__array__`` that raises."""
    getattr(numpy_tests.TestMethods(), name)()


def test_numpys_axes_test(np_is_tilemm):
    numpy_tests.test_matmul_axes()


def test_the_tests_above_call_tilemm(np_is_tilemm):
    assert numpy_tests.np.matmul is tilemm.matmul
    assert numpy_tests.np.ones is np.ones


INPLACE = numpy_tests.TestMatmulInplace
INPLACE_DTYPES = {
    name: pair
    for name, pair in INPLACE.DTYPES.items()
    if not any(d.char in REFUSED for d in pair)
}


@pytest.mark.parametrize("dtype1,dtype2", INPLACE_DTYPES.values(), ids=INPLACE_DTYPES)
def test_numpys_inplace_dtypes(dtype1, dtype2):
    """TestMatmulInplace.test_basic with ``a @= b`` as what it means,
    ``matmul(a, b, out=a)``, through tilemm (numpy's operator itself cannot be redirected)."""
    a = np.arange(10).reshape(5, 2).astype(dtype1)
    b = np.ones((2, 2), dtype=dtype2)
    ref = a @ b
    got = tilemm.matmul(a, b, out=a)
    assert got is a
    assert a.dtype == dtype1 and a.shape == (5, 2)
    if dtype1.kind in "fc":
        np.testing.assert_allclose(a, ref)
    else:
        np.testing.assert_array_equal(a, ref)


@pytest.mark.parametrize("a_shape,b_shape", INPLACE.SHAPES.values(), ids=INPLACE.SHAPES)
def test_numpys_inplace_shapes(a_shape, b_shape):
    """TestMatmulInplace.test_shapes likewise, for ``np.matmul(a, b, out=a)`` (which ``a @= b``
    is, but for its refusing a product of another shape than A's): where numpy's matmul refuses
    to write the product into A, a ValueError; where it writes it, broadcast along loop
    dimensions A adds in front (a vector into a matrix's rows, say), the same values."""
    a = np.arange(np.prod(a_shape)).reshape(a_shape).astype(np.float64)
    b = np.arange(np.prod(b_shape)).reshape(b_shape)
    ref = a @ b
    if ref.shape != a_shape:
        want = a.copy()
        try:
            np.matmul(a.copy(), b, out=want)
        except ValueError:
            with pytest.raises(ValueError):
                tilemm.matmul(a, b, out=a)
            return
        assert tilemm.matmul(a, b, out=a) is a
        np.testing.assert_array_equal(a, want)
        return
    got = tilemm.matmul(a, b, out=a)
    assert got is a
    assert a.dtype.type == np.float64 and a.shape == a_shape
    np.testing.assert_allclose(a, ref)
