"""tilemm.dask.matmul on a LocalCluster of two worker processes on 127.0.0.1: Dask's blocked
product with tilemm computing each block, both workers taking part, a worker's error arriving
as the same tilemm exception; and on Dask's local schedulers."""

import os

import numpy as np
import pytest

import tilemm

import dask
import dask.array as da
from distributed import Client, LocalCluster, get_task_stream

import tilemm.dask  # noqa: F401 (also reachable as tilemm.dask without it)


@pytest.fixture(scope="module")
def client():
    # distributed writes its workers' settings into this process's environment and leaves them
    # (MALLOC_TRIM_THRESHOLD_=65536, OMP_NUM_THREADS=1, ...): restored after, so that the
    # programs later tests start see the environment they were given, not the cluster's.
    environ = dict(os.environ)
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
    )
    with Client(cluster) as client:
        yield client
    cluster.close()
    os.environ.clear()
    os.environ.update(environ)


def integers(shape, dtype, seed):
    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(dtype)


def test_blocks_are_computed_by_tilemm_on_both_workers(client):
    a = integers((150, 130), np.float32, 1)
    b = integers((130, 90), np.float32, 2)
    x = da.from_array(a, chunks=(40, 50))  # ragged blocks along every axis
    y = da.from_array(b, chunks=(50, 35))
    with get_task_stream(client) as stream:
        got = tilemm.dask.matmul(x, y).compute()
    np.testing.assert_array_equal(got, a @ b)
    workers = {
        task["worker"]
        for task in stream.data
        if str(task["key"]).find("tilemm-matmul-") >= 0
    }
    assert len(workers) == 2, f"blocks ran on {workers}"


def test_device_blocks_stay_on_each_workers_device_and_travel_through_the_host(client):
    a = integers((150, 130), np.float32, 11)
    b = integers((130, 90), np.float32, 12)
    w = integers((90, 60), np.float32, 13)
    x = tilemm.dask.to_device(da.from_array(a, chunks=(40, 50)))
    y = tilemm.dask.to_device(da.from_array(b, chunks=(50, 35)))
    xy = tilemm.dask.matmul(x, y, on_device=True).persist()
    # Each persisted block is a DeviceArray on its worker's device (lambdas travel by value).
    kinds = xy.map_blocks(
        lambda block: np.array([[isinstance(block, tilemm.DeviceArray)]]),
        chunks=(1, 1),
        dtype=bool,
    ).compute()
    assert kinds.size == 4 * 3 and kinds.all(), kinds
    # The next product takes blocks from both workers: those that move are pickled through host
    # memory onto the other worker's device.
    chain = tilemm.dask.matmul(xy, da.from_array(w, chunks=(35, 30)), on_device=True)
    with get_task_stream(client) as stream:
        got = tilemm.dask.to_host(chain).compute()
    np.testing.assert_array_equal(got, a @ b @ w)
    workers = {t["worker"] for t in stream.data if "tilemm-matmul-on-device" in str(t["key"])}
    assert len(workers) == 2, f"device blocks ran on {workers}"


def test_batches_vectors_and_dtypes_follow_numpy(client):
    a = integers((3, 20, 12), np.float64, 3)
    b = integers((12, 7), np.float32, 4)
    got = tilemm.dask.matmul(da.from_array(a, chunks=(2, 9, 5)), da.from_array(b, chunks=(5, 4)))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.compute(), a @ b)
    v = integers((12,), np.float64, 5)
    got = tilemm.dask.matmul(da.from_array(a, chunks=(1, 20, 6)), da.from_array(v, chunks=6))
    np.testing.assert_array_equal(got.compute(), a @ v)


def test_complex_blocks_are_numpys(client):
    rng = np.random.default_rng(8)
    a = (rng.integers(-4, 5, (30, 26)) + 1j * rng.integers(-4, 5, (30, 26))).astype(np.complex64)
    b = (rng.integers(-4, 5, (26, 18)) + 1j * rng.integers(-4, 5, (26, 18))).astype(np.complex128)
    got = tilemm.dask.matmul(da.from_array(a, chunks=(11, 9)), da.from_array(b, chunks=(9, 7)))
    assert got.dtype == np.complex128
    np.testing.assert_array_equal(got.compute(), a @ b)


def test_integer_blocks_are_numpys_exactly(client):
    rng = np.random.default_rng(9)
    a = rng.integers(-2**31, 2**31, (20, 17), dtype=np.int64)
    b = rng.integers(-2**31, 2**31, (17, 9), dtype=np.int64)
    got = tilemm.dask.matmul(da.from_array(a, chunks=(7, 6)), da.from_array(b, chunks=(6, 4)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.compute(), a @ b)


def test_a_workers_error_arrives_as_the_same_exception(client):
    x = da.ones((20, 20), chunks=10)
    # wgpu has no device 99: the workers open the device, and fail there.
    with pytest.raises(tilemm.UnavailableError) as e:
        tilemm.dask.matmul(x, x, device="wgpu:99").compute()
    assert "#99" in str(e.value)
    with pytest.raises(tilemm.ShapeError):
        tilemm.dask.matmul(da.ones((3, 4)), da.ones((5, 6)))
    with pytest.raises(tilemm.DTypeError):
        tilemm.dask.matmul(da.ones((3, 4), dtype=np.longdouble), da.ones((4, 6)))


@pytest.mark.parametrize("scheduler", ["threads", "processes", "synchronous"])
def test_every_local_scheduler(scheduler):
    a = integers((33, 40), np.float32, 6)
    b = integers((40, 21), np.float32, 7)
    got = tilemm.dask.matmul(da.from_array(a, chunks=16), da.from_array(b, chunks=16))
    np.testing.assert_array_equal(got.compute(scheduler=scheduler), a @ b)


def test_tilemm_dask_is_reachable_from_the_package():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import tilemm; print(tilemm.dask.matmul.__module__)"],
        capture_output=True, text=True,
    )
    assert out.stdout.strip() == "tilemm.dask", out.stderr
