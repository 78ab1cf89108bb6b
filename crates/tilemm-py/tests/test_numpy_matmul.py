"""numpy's own matmul tests, from the installed numpy (numpy/_core/tests/test_multiarray.py's
TestMatmul, which runs the shared MatmulCommon cases and matmul's own), with ``matmul =
tilemm.matmul``: they know cases we did not think of.

The documented refusals are left out of their dtype loops and checked here instead: longdouble
and clongdouble (numpy's extended precision, which no GPU computes) and object arrays (Python
objects, not numbers in memory) raise ``tilemm.DTypeError``."""

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
