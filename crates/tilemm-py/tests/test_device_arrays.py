"""Device arrays: tilemm.to_device, device_array, DeviceArray and copy_to_host, as numba's
example uses them, on the default device array device (TILEMM_DEVICE, else the best GPU:
lavapipe's wgpu device on machines without one). Integer-valued data: every result is exact,
and products of device arrays move 0 bytes between the host and the device."""

import pickle

import numpy as np
import pytest

import tilemm


def ints(shape, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.integers(-4, 5, size=shape).astype(dtype)


def test_the_device_is_a_gpu():
    d = tilemm.to_device(np.ones((2, 2), np.float32))
    print("device arrays on", d.device)
    assert d._buffer.backend in ("wgpu", "cuda", "hip"), d


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_device_arrays_stay_there_and_a_chain_comes_back_exact(dtype):
    a, b, w = ints((70, 45), 1, dtype), ints((45, 33), 2, dtype), ints((33, 20), 3, dtype)
    da, db, dw = tilemm.to_device(a), tilemm.to_device(b), tilemm.to_device(w)
    dc = tilemm.matmul(da, db)
    assert isinstance(dc, tilemm.DeviceArray) and dc.dtype == dtype and dc.shape == (70, 33)
    assert (tilemm.last_call.bytes_to_device, tilemm.last_call.bytes_from_device) == (0, 0)
    dd = tilemm.matmul(dc, dw)
    assert (tilemm.last_call.bytes_to_device, tilemm.last_call.bytes_from_device) == (0, 0)
    assert "through" in tilemm.last_call.route
    host = dd.copy_to_host()
    assert isinstance(host, np.ndarray) and host.dtype == dtype
    np.testing.assert_array_equal(host, a @ b @ w)


def test_out_is_a_device_array_and_the_seed_flow_runs():
    # numba's example: A and B to the device, C allocated there, the product, C back.
    a, b = ints((64, 48), 4), ints((48, 40), 5)
    d_a, d_b = tilemm.to_device(a), tilemm.to_device(b)
    d_c = tilemm.device_array((64, 40), np.float32)
    assert tilemm.matmul(d_a, d_b, out=d_c) is d_c
    assert (tilemm.last_call.bytes_to_device, tilemm.last_call.bytes_from_device) == (0, 0)
    tilemm.synchronize()  # what a timing ends with; copy_to_host waits by itself
    c = d_c.copy_to_host()
    np.testing.assert_array_equal(c, a @ b)
    with pytest.raises(tilemm.UnavailableError, match="device arrays live on a GPU"):
        tilemm.synchronize("cpu")
    # alpha and beta on a device out=, and the @ operators.
    tilemm.matmul(d_a, d_b, out=d_c, alpha=2.0, beta=-1.0)
    np.testing.assert_array_equal(d_c.copy_to_host(), 2 * (a @ b) - c)
    np.testing.assert_array_equal((d_a @ d_b).copy_to_host(), a @ b)
    f = tilemm.device_array_like(np.asfortranarray(c))
    assert f.strides == (4, 64 * 4)
    tilemm.matmul(d_a, d_b, out=f)
    into = np.empty((64, 40), np.float32, order="F")
    assert f.copy_to_host(into) is into
    np.testing.assert_array_equal(into, a @ b)


def test_views_transposes_slices_batches_and_vectors_follow_numpy():
    a, b = ints((2, 1, 12, 9), 6), ints((3, 9, 7), 7)
    da, db = tilemm.to_device(a), tilemm.to_device(b)
    cases = [
        (da, db, a, b),
        (db[2].T, da[1, 0].T, b[2].T, a[1, 0].T),
        (da[..., 1::2, :], db[:, :, ::3], a[..., 1::2, :], b[:, :, ::3]),
        (da[0, 0, 3], db, a[0, 0, 3], b),  # a vector times a batch
        (da[1, 0], db[0, :, 2], a[1, 0], b[0, :, 2]),  # matrix times vector
        (db[0, :, 2], db[1, :, 4], b[0, :, 2], b[1, :, 4]),  # vector · vector: 0-d
        (da[:, :, None, 0, :4], db[None, 1, :4, :], a[:, :, None, 0, :4], b[None, 1, :4, :]),
    ]
    for x, y, hx, hy in cases:
        got = tilemm.matmul(x, y)
        assert got.shape == np.matmul(hx, hy).shape
        np.testing.assert_array_equal(got.copy_to_host(), np.matmul(hx, hy))
    assert da.T.shape == (9, 12, 1, 2) and da.strides == tuple(s for s in a.strides)


def test_an_out_overlapping_an_operand_sees_the_operand_before_it_is_written():
    a, b = ints((48, 48), 8), ints((48, 48), 9)
    da, db = tilemm.to_device(a), tilemm.to_device(b)
    tilemm.matmul(da, db, out=da)
    np.testing.assert_array_equal(da.copy_to_host(), a @ b)
    da = tilemm.to_device(a)
    da @= db
    np.testing.assert_array_equal(da.copy_to_host(), a @ b)


def test_a_host_operand_is_uploaded_and_counted():
    a, b = ints((30, 20), 10), ints((20, 10), 11)
    da = tilemm.to_device(a)
    dc = tilemm.matmul(da, b)
    assert isinstance(dc, tilemm.DeviceArray)
    assert tilemm.last_call.bytes_to_device == b.nbytes
    assert tilemm.last_call.bytes_from_device == 0
    out = np.zeros((30, 10), np.float64)  # cast from float32, as numpy's same_kind allows
    assert tilemm.matmul(da, tilemm.to_device(b), out=out) is out
    assert tilemm.last_call.bytes_from_device == 30 * 10 * 4
    np.testing.assert_array_equal(out, a @ b)
    # A host product through a GPU counts what it moved too; the CPU route moves nothing.
    tilemm.matmul(a, b, device=str(da.device.backend))
    assert tilemm.last_call.bytes_to_device >= a.nbytes + b.nbytes
    assert tilemm.last_call.bytes_from_device == 30 * 10 * 4
    tilemm.matmul(a, b, device="cpu")
    assert (tilemm.last_call.bytes_to_device, tilemm.last_call.bytes_from_device) == (0, 0)


def test_k_zero_and_empty_products():
    z = tilemm.matmul(tilemm.to_device(np.ones((3, 0), np.float32)), np.ones((0, 4), np.float32))
    np.testing.assert_array_equal(z.copy_to_host(), np.zeros((3, 4), np.float32))
    e = tilemm.matmul(tilemm.to_device(np.ones((0, 5), np.float32)), np.ones((5, 4), np.float32))
    assert e.shape == (0, 4) and e.copy_to_host().shape == (0, 4)


def test_pickled_device_arrays_come_back_on_a_device():
    a = ints((5, 6), 12)
    back = pickle.loads(pickle.dumps(tilemm.to_device(a)[1:, ::2]))
    assert isinstance(back, tilemm.DeviceArray)
    np.testing.assert_array_equal(back.copy_to_host(), a[1:, ::2])


def test_refusals_are_tilemm_errors():
    a = tilemm.to_device(ints((4, 3), 13))
    with pytest.raises(tilemm.DTypeError, match="device arrays hold"):
        tilemm.to_device(np.ones((2, 2), np.int64))
    with pytest.raises(tilemm.DTypeError, match="not cast"):
        tilemm.matmul(a, tilemm.to_device(np.ones((3, 2), np.float64)))
    with pytest.raises(tilemm.ShapeError, match="mismatch in its core dimension"):
        tilemm.matmul(a, a)
    for option in ({"order": "F"}, {"casting": "unsafe"}):
        with pytest.raises(tilemm.ArgumentError, match="not supported with device arrays"):
            tilemm.matmul(a, a.T, **option)
    with pytest.raises(tilemm.ArgumentError, match="positive step"):
        a[::-1]
    with pytest.raises(tilemm.ArgumentError, match="but the device arrays are on"):
        tilemm.matmul(a, a.T, device="cuda:7")
    with pytest.raises(tilemm.UnavailableError, match="device arrays live on a GPU"):
        tilemm.to_device(np.ones(2, np.float32), device="cpu")
    with pytest.raises(TypeError, match="copy_to_host"):
        np.asarray(a)
    with pytest.raises(tilemm.ShapeError):
        a.copy_to_host(np.empty((3, 4), np.float32))
    # numpy's same_kind rule, as for matmul's out=: floats never land in integers or bools.
    for kind in (np.int32, np.bool_):
        with pytest.raises(tilemm.DTypeError, match="same_kind"):
            a.copy_to_host(np.empty((4, 3), kind))
    wide = np.empty((4, 3), np.float64)
    assert a.copy_to_host(wide) is wide
    np.testing.assert_array_equal(wide, ints((4, 3), 13))
    b = a.T  # a view of the same buffer
    a.free()
    with pytest.raises(tilemm.FreedArrayError):
        tilemm.matmul(b, b.T)
    with pytest.raises(tilemm.FreedArrayError):
        b.copy_to_host()
    for error in (tilemm.DTypeError, tilemm.ArgumentError, tilemm.FreedArrayError):
        assert issubclass(error, tilemm.TilemmError)


def test_interchange_protocols_say_where_they_work():
    d = tilemm.to_device(ints((4, 3), 14))
    backend = d._buffer.backend
    print("interchange on", backend)
    if backend == "cuda":
        cai = d.T.__cuda_array_interface__
        assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["strides"] == (4, 12)
        assert d.__dlpack_device__() == (2, d._buffer.index)
        assert type(d.__dlpack__()).__name__ == "PyCapsule"
    else:
        # The CUDA Array Interface is CUDA's; DLPack exports CUDA and HIP memory.
        assert not hasattr(d, "__cuda_array_interface__")
        assert d.__dlpack_device__()[0] == 7
        with pytest.raises(BufferError, match="CUDA and HIP"):
            d.__dlpack__()


class _ClaimsCuda:
    """A DLPack producer that says CUDA but hands over host memory (numpy's capsule)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()


def test_dlpack_producers_of_gpu_memory_are_taken_and_others_refused():
    # A capsule whose tensor is not on a GPU is refused before any copy, and freed.
    with pytest.raises(tilemm.ArgumentError, match="device type 1"):
        tilemm.to_device(_ClaimsCuda(np.ones((2, 2), np.float32)))
    # Host DLPack producers (numpy's arrays themselves) go through numpy: an upload.
    a = ints((3, 4), 19)
    np.testing.assert_array_equal(tilemm.to_device(a).copy_to_host(), a)


def test_dask_blocks_stay_on_the_device_between_products():
    da = pytest.importorskip("dask.array")
    import dask
    import tilemm.dask

    x, y, w = ints((60, 50), 15), ints((50, 40), 16), ints((40, 30), 17)
    dx = tilemm.dask.to_device(da.from_array(x, chunks=(30, 20)))
    dy = da.from_array(y, chunks=(20, 20))  # host blocks, uploaded by their task
    dw = tilemm.dask.to_device(da.from_array(w, chunks=(20, 15)))
    xy = tilemm.dask.matmul(dx, dy, on_device=True)
    chain = tilemm.dask.matmul(xy, dw, on_device=True)
    with dask.config.set(scheduler="sync"):
        kept = chain.persist()
        blocks = [v for k, v in dict(kept.dask).items() if k[0] == kept.name]
        assert blocks and all(isinstance(b, tilemm.DeviceArray) for b in blocks)
        np.testing.assert_array_equal(tilemm.dask.to_host(kept).compute(), x @ y @ w)
    # The threads scheduler too, with vectors.
    v = ints((40,), 18)
    got = tilemm.dask.to_host(tilemm.dask.matmul(xy, da.from_array(v, chunks=20), on_device=True))
    np.testing.assert_array_equal(got.compute(scheduler="threads"), x @ y @ v)
