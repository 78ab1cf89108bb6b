"""``tilemm.dask.matmul``: Dask's own blocked product, with tilemm computing each block.

The graph is the one ``dask.array.matmul`` builds (a ``blockwise`` product per pair of blocks
along K, then a sum over K's blocks without concatenation), so it runs on any Dask scheduler:
threads, processes, or a ``distributed.Client`` connected to workers on other machines. Each
worker process opens its device once, lazily, at its first block. A worker is pinned to a
device by the environment variable ``TILEMM_DEVICE`` (``cuda:1``, say: one worker per GPU, as
dask-cuda pins with ``CUDA_VISIBLE_DEVICES``) or by ``device=``. An error on a worker comes back
as the same ``tilemm`` exception.
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

__all__ = ["matmul"]


def _block(a, b, kernel, device):
    # The contraction axis comes back in the second-to-last place, as blockwise expects it.
    return tilemm.matmul(a, b, kernel=kernel, device=device)[..., np.newaxis, :]


def _chunk_sum(a, axis=None, dtype=None, keepdims=None):
    # The partial products of one output block: equal shapes, added element-wise (dask's own
    # reduction without concatenation, dask.array.routines._chunk_sum).
    out = reduce(partial(np.add, dtype=dtype), a) if isinstance(a, list) else a
    return out if keepdims else out.squeeze(axis[0])


def matmul(x, y, *, kernel="auto", device=None):
    """``dask.array.matmul(x, y)`` with tilemm computing each block: a dask array, lazy until
    computed. ``x`` and ``y`` are dask arrays (or anything ``dask.array.asarray`` takes);
    ``kernel`` and ``device`` are :func:`tilemm.matmul`'s, applied on the workers (``device``
    as a name, such as ``"cuda:1"``, so that each worker opens it; default: ``TILEMM_DEVICE``,
    else the fastest route)."""
    x = da.asarray(x)
    y = da.asarray(y)
    if x.ndim == 0 or y.ndim == 0:
        raise tilemm._signature_error(0 if x.ndim == 0 else 1, 0)
    if isinstance(device, tilemm.Device):
        device = device.backend if device.index is None else f"{device.backend}:{device.index}"
    if device is not None and not isinstance(device, str):
        raise tilemm.ArgumentError(
            f"device must be a name such as 'cuda:1' (each worker opens it), not {device!r}"
        )
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
