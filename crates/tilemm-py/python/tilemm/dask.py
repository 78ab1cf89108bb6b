"""``tilemm.dask.matmul``: Dask's own blocked product, with tilemm computing each block.

The graph is the one ``dask.array.matmul`` builds (a ``blockwise`` product per pair of blocks
along K, then a sum over K's blocks without concatenation), so it runs on any Dask scheduler:
threads, processes, or a ``distributed.Client`` connected to workers on other machines. Each
worker process opens its device once, lazily, at its first block. A worker is pinned to a
device by the environment variable ``TILEMM_DEVICE`` (``cuda:1``, say: one worker per GPU, as
dask-cuda pins with ``CUDA_VISIBLE_DEVICES``) or by ``device=``. An error on a worker comes back
as the same ``tilemm`` exception.

Blocks can stay on their worker's GPU between tasks, as dask-cuda keeps CuPy blocks there:
:func:`to_device` makes a dask array of :class:`tilemm.DeviceArray` blocks, ``matmul(...,
on_device=True)`` computes each output block on the device and leaves it there (summing the
products along K into it with ``beta=1``, so no block comes back to be added), and
:func:`to_host` brings the blocks back for ``compute()``. ``persist()`` keeps device blocks
on the workers; a block sent to another worker travels through host memory (pickled) and is
put on that worker's device.
"""

from __future__ import annotations

from functools import partial, reduce

import numpy as np

import tilemm

try:
    import dask.array as da
    from dask.base import tokenize
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "tilemm.dask needs Dask: pip install 'dask[array]' distributed"
    ) from e

__all__ = ["matmul", "to_device", "to_host"]


def _block(a, b, kernel, device):
    # The contraction axis comes back in the second-to-last place, as blockwise expects it.
    return tilemm.matmul(a, b, kernel=kernel, device=device)[..., np.newaxis, :]


def _chunk_sum(a, axis=None, dtype=None, keepdims=None):
    # The partial products of one output block: equal shapes, added element-wise (dask's own
    # reduction without concatenation, dask.array.routines._chunk_sum).
    out = reduce(partial(np.add, dtype=dtype), a) if isinstance(a, list) else a
    return out if keepdims else out.squeeze(axis[0])


def _to_device_block(x, device):
    return tilemm.to_device(x, device)


def _to_host_block(x):
    return x.copy_to_host() if isinstance(x, tilemm.DeviceArray) else x


def to_device(x, device=None):
    """A dask array whose blocks are :class:`tilemm.DeviceArray` on their worker's device
    (``device`` as for :func:`tilemm.to_device`, a name each worker opens). Lazy; its meta
    stays a numpy array of the dtype, since Dask inspects it on the client."""
    x = da.asarray(x)
    return x.map_blocks(
        _to_device_block,
        device=_device_name(device),
        dtype=x.dtype,
        meta=np.empty((0,) * x.ndim, dtype=x.dtype),
        name=f"tilemm-to-device-{tokenize(x, device)}",
    )


def to_host(x):
    """A dask array whose device blocks are brought back as numpy arrays (for ``compute()``)."""
    return x.map_blocks(
        _to_host_block,
        dtype=x.dtype,
        meta=np.empty((0,) * x.ndim, dtype=x.dtype),
        name=f"tilemm-to-host-{tokenize(x)}",
    )


def _device_name(device):
    if isinstance(device, tilemm.Device):
        device = device.backend if device.index is None else f"{device.backend}:{device.index}"
    if device is not None and not isinstance(device, str):
        raise tilemm.ArgumentError(
            f"device must be a name such as 'cuda:1' (each worker opens it), not {device!r}"
        )
    return device


def _on_device_sum(xs, ys, kernel, device):
    """One output block on the device: the products of the blocks along K summed into it."""
    if not isinstance(xs, list):
        xs, ys = [xs], [ys]
    up = [tilemm.to_device(x, device) for x in xs], [tilemm.to_device(y, device) for y in ys]
    pairs = list(zip(*up))
    out = tilemm.matmul(*pairs[0], kernel=kernel)
    for x, y in pairs[1:]:
        tilemm.matmul(x, y, out=out, beta=1.0, kernel=kernel)
    return out


def matmul(x, y, *, kernel="auto", device=None, on_device=False):
    """``dask.array.matmul(x, y)`` with tilemm computing each block: a dask array, lazy until
    computed. ``x`` and ``y`` are dask arrays (or anything ``dask.array.asarray`` takes);
    ``kernel`` and ``device`` are :func:`tilemm.matmul`'s, applied on the workers (``device``
    as a name, such as ``"cuda:1"``, so that each worker opens it; default: ``TILEMM_DEVICE``,
    else the fastest route). ``on_device=True``: the blocks (numpy or DeviceArray, see
    :func:`to_device`) are computed on the workers' GPU and the result's blocks stay there as
    DeviceArrays (floating-point types only); :func:`to_host` brings them back."""
    x = da.asarray(x)
    y = da.asarray(y)
    if x.ndim == 0 or y.ndim == 0:
        raise tilemm._signature_error(0 if x.ndim == 0 else 1, 0)
    device = _device_name(device)
    # The result's dtype as tilemm.matmul gives it, checked here rather than on a worker
    # (without opening a device on the client).
    result_dtype = tilemm._result_dtype(x, y)[0]
    x_vector, y_vector = x.ndim == 1, y.ndim == 1
    if x_vector:
        x = x[np.newaxis, :]
    if y_vector:
        y = y[:, np.newaxis]
    if x.shape[-1] != y.shape[-2]:
        raise tilemm._core_error("Input", 1, 0, y.shape[-2], x.shape[-1])
    if x.ndim < y.ndim:
        x = x[(y.ndim - x.ndim) * (np.newaxis,)]
    elif x.ndim > y.ndim:
        y = y[(x.ndim - y.ndim) * (np.newaxis,)]
    out_ind = tuple(range(x.ndim + 1))
    x_ind = tuple(range(x.ndim))
    y_ind = tuple(range(x.ndim - 2)) + (x_ind[-1], x.ndim)
    if on_device:
        if result_dtype.kind != "f" and result_dtype != tilemm._bf16():
            raise tilemm.DTypeError(
                f"on_device=True computes floating-point products on device arrays, not "
                f"{result_dtype}"
            )
        # K's index is left out of the output: each task gets the lists of blocks along K.
        out = da.blockwise(
            partial(_on_device_sum, kernel=kernel, device=device),
            x_ind[:-1] + (x.ndim,),
            x,
            x_ind,
            y,
            y_ind,
            dtype=result_dtype,
            concatenate=False,
            name=f"tilemm-matmul-on-device-{tokenize(x, y, kernel, device)}",
            meta=np.empty((0,) * x.ndim, dtype=result_dtype),
        )
        if x_vector:
            out = out.squeeze(-2)
        if y_vector:
            out = out.squeeze(-1)
        return out
    out = da.blockwise(
        partial(_block, kernel=kernel, device=device),
        out_ind,
        x,
        x_ind,
        y,
        y_ind,
        adjust_chunks={x_ind[-1]: 1},
        dtype=result_dtype,
        concatenate=False,
        name=f"tilemm-matmul-{tokenize(x, y, kernel, device)}",
        # Given, so that Dask does not call tilemm on the client to find it.
        meta=np.empty((0,) * len(out_ind), dtype=result_dtype),
    )
    if out.shape[-2] == 1:
        out = out.squeeze(-2)
    else:
        out = da.reduction(
            out,
            _chunk_sum,
            _chunk_sum,
            axis=-2,
            dtype=result_dtype,
            concatenate=False,
            name="tilemm-matmul-sum",
            meta=np.empty((0,) * (out.ndim - 1), dtype=result_dtype),
        )
    if x_vector:
        out = out.squeeze(-2)
    if y_vector:
        out = out.squeeze(-1)
    return out
