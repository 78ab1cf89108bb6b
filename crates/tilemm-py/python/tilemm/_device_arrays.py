"""Device arrays: operands that stay on a GPU between products, as numba's example keeps them
(``cuda.to_device``, ``cuda.device_array``, ``copy_to_host``), and the CUDA Array Interface
and DLPack for numba's, CuPy's and PyTorch's arrays.

A :class:`DeviceArray` is a view (shape, strides, offset) of a device buffer; views share the
buffer, which lives while any of them does (or until :meth:`DeviceArray.free`). Its metadata
lives here; the buffer, and every product on it, in the Rust library
(``tilemm::DeviceArray``).
"""

from __future__ import annotations

import math
import operator

import numpy as np

import tilemm

from . import _tilemm

# DLPack's device types.
_DLPACK_DEVICES = {"cuda": 2, "hip": 10, "wgpu": 7}


def _device_names(device):
    """(backend, index) for ``device=``: None (``TILEMM_DEVICE``, else the best GPU), a name
    such as ``"wgpu"`` or ``"cuda:1"``, or a :class:`tilemm.Device`."""
    if device is None:
        return None, None
    if isinstance(device, tilemm.Device):
        return device.backend, device.index
    if isinstance(device, str):
        return _tilemm.device_spec(device)
    raise tilemm.ArgumentError(
        f"device must be None, a string such as 'wgpu' or 'cuda:0', or a tilemm.Device, not "
        f"{type(device).__name__}"
    )


def _device_dtype(dtype):
    dtype = np.dtype(dtype)
    bf16 = tilemm._bf16()
    if dtype.newbyteorder("=") not in tilemm._FLOATS and dtype != bf16:
        raise tilemm.DTypeError(
            f"device arrays hold float16, bfloat16, float32 and float64, not {dtype} (integer, "
            "bool and complex products run on host arrays)"
        )
    return dtype.newbyteorder("=")


def _span(shape, strides):
    """Elements from a view's first to one past its last (0 when it is empty)."""
    if math.prod(shape) == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


class DeviceArray:
    """An array on a GPU (numba's ``DeviceNDArray``): made by :func:`to_device` or
    :func:`device_array`, computed on by :func:`tilemm.matmul` without copies to or from the
    host, and brought back by :meth:`copy_to_host`.

    ``shape``, ``dtype``, ``strides`` (bytes), ``ndim``, ``size``, ``nbytes`` and ``device``
    are numpy's and numba's; ``.T``, ``transpose`` and basic slicing (integers, slices with a
    positive step, ``...``, ``None``) give views of the same memory. Writes through
    ``matmul(..., out=)`` are seen by every view of the buffer. Products are enqueued and
    return at once; ``copy_to_host`` waits for them. On CUDA it exposes
    ``__cuda_array_interface__`` (version 3) and ``__dlpack__``, so numba, CuPy and PyTorch
    read it in place."""

    __slots__ = ("_buffer", "_offset", "_shape", "_strides", "_dtype", "__weakref__")
    __module__ = "tilemm"

    def __init__(self, buffer, offset, shape, strides, dtype):
        # Made by to_device, device_array and views; strides and offset in elements.
        self._buffer = buffer
        self._offset = int(offset)
        self._shape = tuple(int(n) for n in shape)
        self._strides = tuple(int(s) for s in strides)
        self._dtype = np.dtype(dtype)

    # numpy's attributes
    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        return math.prod(self._shape)

    @property
    def itemsize(self):
        return self._dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def strides(self):
        """Bytes from one element to the next along each axis, as numpy gives them."""
        return tuple(s * self.itemsize for s in self._strides)

    @property
    def device(self):
        """The :class:`tilemm.Device` it lives on."""
        return tilemm.Device(self._buffer.backend, self._buffer.index)

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d device array")
        return self._shape[0]

    def __repr__(self):
        state = "freed" if self._buffer.freed else self._buffer.device
        return (
            f"tilemm.DeviceArray(shape={self._shape}, dtype={self._dtype}, "
            f"{self._buffer.backend}:{self._buffer.index} {state})"
        )

    def __array__(self, dtype=None, copy=None):
        # Without this, numpy would make an object array of it, silently.
        raise TypeError(
            "a tilemm.DeviceArray lives on a GPU: bring it back with .copy_to_host() (numpy "
            "does not copy it implicitly)"
        )

    def _check(self):
        if self._buffer.freed:
            raise tilemm.FreedArrayError(
                "this device array was freed (DeviceArray.free): it has no memory left to use"
            )
        return self

    def _view(self, offset, shape, strides):
        return DeviceArray(self._buffer, offset, shape, strides, self._dtype)

    # Views
    @property
    def T(self):
        return self.transpose()

    def transpose(self, *axes):
        """The axes permuted (reversed by default), as numpy's ``transpose``: a view."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        axes = tuple(operator.index(a) % self.ndim if self.ndim else a for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise tilemm.ArgumentError(f"transpose: {axes} is not a permutation of the axes")
        return self._view(
            self._offset,
            [self._shape[a] for a in axes],
            [self._strides[a] for a in axes],
        )

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        if used > self.ndim:
            raise IndexError(
                f"too many indices for a device array: it is {self.ndim}-dimensional, but "
                f"{used} were indexed"
            )
        if Ellipsis in key:
            at = key.index(Ellipsis)
            key = key[:at] + (slice(None),) * (self.ndim - used) + key[at + 1 :]
        else:
            key = key + (slice(None),) * (self.ndim - used)
        offset, shape, strides, axis = self._offset, [], [], 0
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self._shape[axis], self._strides[axis]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step < 0:
                    raise tilemm.ArgumentError(
                        "device arrays take slices with a positive step (a reversed view "
                        "would need negative strides)"
                    )
                count = len(range(start, stop, step))
                offset += start * s if count else 0
                shape.append(count)
                strides.append(s * step)
            else:
                try:
                    i = operator.index(k)
                except TypeError:
                    raise IndexError(
                        f"device arrays take integers, slices, ... and None as indices, not "
                        f"{type(k).__name__}"
                    ) from None
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                offset += (i % n) * s
            axis += 1
        return self._view(offset, shape, strides)

    def is_c_contiguous(self):
        expected = 1
        for n, s in reversed(list(zip(self._shape, self._strides))):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def is_f_contiguous(self):
        expected = 1
        for n, s in zip(self._shape, self._strides):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    # Back to the host
    def copy_to_host(self, ary=None, stream=0):
        """The array on the host: a new numpy array (C order), or written into ``ary`` (a
        numpy array of its shape, of a dtype the array casts to with ``same_kind``) and
        returned, as numba's ``copy_to_host``. Waits for the
        products that write it; only the span of its elements is copied. ``stream`` is
        numba's, accepted and unused (tilemm's products are ordered on its own stream)."""
        self._check()
        if ary is not None:
            if not isinstance(ary, np.ndarray):
                raise TypeError(f"copy_to_host: ary must be a numpy array, not {type(ary).__name__}")
            if ary.shape != self._shape:
                raise tilemm.ShapeError(
                    f"copy_to_host: ary has shape {ary.shape}, the device array {self._shape}"
                )
            if not ary.flags.writeable:
                raise tilemm.ArgumentError("copy_to_host: ary is read-only")
            # numpy's rule for outputs: a float array never lands in integers or bools.
            if not np.can_cast(self._dtype, ary.dtype, "same_kind"):
                raise tilemm.DTypeError(
                    f"copy_to_host: cannot cast the device array's {self._dtype} into ary's "
                    f"{ary.dtype} with casting rule 'same_kind'"
                )
        span = _span(self._shape, self._strides)
        if span == 0:
            host = np.empty(self._shape, dtype=self._dtype)
        else:
            flat = self._buffer.read(self._offset, self._offset + span)
            if flat.dtype != self._dtype:
                flat = flat.view(self._dtype)
            host = np.lib.stride_tricks.as_strided(flat, self._shape, self.strides, writeable=False)
        if ary is None:
            return np.array(host, order="C")
        ary[...] = host
        return ary

    def free(self):
        """Gives the device memory back now, for this view and every other of its buffer
        (later use raises :class:`tilemm.FreedArrayError`). Memory is given back anyway when
        no view holds it."""
        self._buffer.free()

    # Operators
    def __matmul__(self, other):
        return tilemm.matmul(self, other)

    def __rmatmul__(self, other):
        return tilemm.matmul(other, self)

    def __imatmul__(self, other):
        return tilemm.matmul(self, other, out=self)

    def __reduce__(self):
        # Pickled through the host (a Dask worker that receives one puts it on its own device).
        return (_rebuild, (self.copy_to_host(),))

    # Interchange
    @property
    def __cuda_array_interface__(self):
        """The CUDA Array Interface (version 3) for numba, CuPy and PyTorch: the data is
        ready when this is read (tilemm's queued products have finished), so ``stream`` is
        None."""
        if self._buffer.backend != "cuda":
            raise AttributeError(
                f"__cuda_array_interface__: this device array lives on {self._buffer.backend}, "
                "not CUDA"
            )
        if self._dtype == tilemm._bf16():
            raise AttributeError(
                "__cuda_array_interface__ has no bfloat16 type: use DLPack (__dlpack__)"
            )
        self._check()
        pointer = self._buffer.pointer() + self._offset * self.itemsize if self.size else 0
        return {
            "shape": self._shape,
            "strides": None if self.is_c_contiguous() else self.strides,
            "typestr": self._dtype.str,
            "data": (pointer, False),
            "version": 3,
            "stream": None,
        }

    def __dlpack_device__(self):
        return (_DLPACK_DEVICES.get(self._buffer.backend, 7), self._buffer.index)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this view (CUDA and HIP), for ``torch.from_dlpack``,
        ``cupy.from_dlpack`` and every consumer of the protocol. The data is ready when this
        returns, for any stream."""
        if copy:
            raise BufferError("tilemm exports device arrays without a copy (copy=True asked)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the device array is on {self.__dlpack_device__()}, not {dl_device}")
        self._check()
        return self._buffer.dlpack(self, self._offset, list(self._shape), list(self._strides))


def synchronize(device=None):
    """Waits until every product queued on the device has finished (numba's
    ``cuda.synchronize``): what a timing of products on device arrays ends with.
    ``copy_to_host`` waits by itself."""
    _tilemm.synchronize(*_device_names(device))


def _rebuild(host):
    return to_device(host)


def _interface(x):
    """Whether `x` exposes the CUDA Array Interface with a type it names: PyTorch gives its
    bfloat16 tensors the typestr ``|V2`` (2 bytes of anything), so those are read through
    DLPack, which names the type."""
    try:
        cai = x.__cuda_array_interface__
        return isinstance(cai, dict) and np.dtype(cai["typestr"]).kind != "V"
    except Exception:  # noqa: BLE001 - a CPU tensor raises its own error type
        return False


def _dlpack_gpu(x):
    """Whether `x` is a DLPack producer of CUDA or ROCm memory."""
    try:
        return hasattr(x, "__dlpack__") and x.__dlpack_device__()[0] in (2, 10)
    except Exception:  # noqa: BLE001
        return False


def _foreign(x):
    """Whether `x` is another library's GPU array: the CUDA Array Interface (numba, CuPy,
    PyTorch), else DLPack on a CUDA or ROCm device (JAX, PyTorch's bfloat16 tensors)."""
    if x is None or isinstance(x, (DeviceArray, np.ndarray)):
        return False
    return _interface(x) or _dlpack_gpu(x)


def _on_device(x):
    return isinstance(x, DeviceArray) or _foreign(x)


def _from_interface(x, backend, index):
    """Another library's CUDA array as a DeviceArray, by one copy on the device."""
    cai = x.__cuda_array_interface__
    if cai.get("mask") is not None:
        raise tilemm.ArgumentError("device arrays with a mask are not taken")
    dtype = np.dtype(cai["typestr"])
    if dtype.byteorder == ">":
        raise tilemm.DTypeError(f"a big-endian device array ({cai['typestr']}) is not taken")
    dtype = _device_dtype(dtype)
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    if any(s < 0 or s % dtype.itemsize for s in strides):
        raise tilemm.ArgumentError(
            f"a device array with strides {tuple(strides)} (negative, or not whole elements) "
            "is not taken: copy it to a contiguous one first"
        )
    elements = tuple(s // dtype.itemsize for s in strides)
    span = _span(shape, elements)
    stream = cai.get("stream") if cai.get("version", 0) >= 3 else None
    address = cai["data"][0]
    # (None: TILEMM_DEVICE, else the best GPU: CUDA where there is one.)
    if backend not in (None, "cuda"):
        raise tilemm.ArgumentError(
            f"{type(x).__name__} is a CUDA array: it can be used on a CUDA device, not {backend}"
        )
    buffer = _tilemm.from_device_pointer(address, dtype.name, max(span, 1), stream, backend, index)
    return DeviceArray(buffer, 0, shape, elements, dtype)


def _from_dlpack(x, backend, index):
    """Another library's DLPack GPU array as a DeviceArray, by one copy on the device. The
    producer is asked to make the data ready for the legacy default stream (1, CUDA's; None
    for ROCm), on which the copy runs."""
    if backend not in (None, "cuda", "hip"):
        raise tilemm.ArgumentError(
            f"{type(x).__name__} is a GPU array: it can be used on a CUDA or HIP device, not "
            f"{backend}"
        )
    stream = 1 if x.__dlpack_device__()[0] == 2 else None
    try:
        capsule = x.__dlpack__(stream=stream)
    except TypeError:  # a producer of the older protocol, without stream=
        capsule = x.__dlpack__()
    buffer, shape, strides = _tilemm.from_dlpack(capsule, backend, index)
    if buffer.dtype == "bfloat16" and tilemm._bf16() is None:
        buffer.free()
        raise tilemm.DTypeError("a bfloat16 array needs ml_dtypes (pip install ml_dtypes)")
    dtype = tilemm._bf16() if buffer.dtype == "bfloat16" else np.dtype(buffer.dtype)
    return DeviceArray(buffer, 0, shape, strides, dtype)


def to_device(ary, device=None, copy=True):
    """``ary`` on a GPU, as numba's ``cuda.to_device``: a :class:`DeviceArray` in the same
    memory order (C or Fortran; other views are copied to C order first). ``device`` is
    None (the device ``TILEMM_DEVICE`` names, else the best GPU, CPU emulations such as
    lavapipe included), a name (``"wgpu"``, ``"cuda:1"``) or a :class:`tilemm.Device`.
    A DeviceArray comes back as it is; another library's GPU array (numba, CuPy, PyTorch: the
    CUDA Array Interface; JAX and others: DLPack) is copied once on the device. Device arrays hold float16,
    bfloat16 (ml_dtypes), float32 and float64."""
    return _to_device(ary, *_device_names(device), counted=False)


def _to_device(ary, backend, index, counted):
    """:func:`to_device` on the device named by `backend` and `index`; `counted`: the bytes
    uploaded go to ``last_call``'s count (an upload inside matmul)."""
    if isinstance(ary, DeviceArray):
        ary._check()
        if backend is None or (backend, index) in (
            (ary._buffer.backend, ary._buffer.index),
            (ary._buffer.backend, None),
        ):
            return ary
        return _to_device(ary.copy_to_host(), backend, index, counted)
    if _interface(ary):
        return _from_interface(ary, backend, index)
    if _dlpack_gpu(ary):
        return _from_dlpack(ary, backend, index)
    if isinstance(ary, np.ma.MaskedArray):
        raise tilemm.MaskedArrayError("to_device does not take masked arrays: pass x.filled(0)")
    x = np.asarray(ary)
    dtype = _device_dtype(x.dtype)
    x = x.astype(dtype, copy=False)
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = np.ascontiguousarray(x)
    order = "C" if x.flags.c_contiguous else "F"
    flat = x.ravel(order=order)
    buffer = _tilemm.to_device(flat, backend, index)
    if counted:
        tilemm._count(to_device=flat.nbytes)
    strides = [s // x.itemsize for s in x.strides] if x.size else [0] * x.ndim
    return DeviceArray(buffer, 0, x.shape, strides, dtype)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0, device=None):
    """A new uninitialised :class:`DeviceArray`, as numba's ``cuda.device_array`` (``order``
    ``"C"`` or ``"F"``; ``strides`` and ``stream`` are numba's, accepted when None and 0):
    write it with ``matmul(..., out=)`` before reading it."""
    if strides is not None:
        raise tilemm.ArgumentError("device_array: strides= is not supported; use order=")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise tilemm.ShapeError(f"device_array: shape must be non-negative ints, not {shape}")
    if order not in ("C", "F"):
        raise tilemm.ArgumentError(f"device_array: order must be 'C' or 'F', not {order!r}")
    return _device_array(shape, dtype, order, *_device_names(device))


def _device_array(shape, dtype, order, backend, index):
    dtype = _device_dtype(dtype)
    buffer = _tilemm.device_empty(dtype.name, math.prod(shape), backend, index)
    strides, step = [0] * len(shape), 1
    axes = range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))
    for axis in axes:
        strides[axis] = step
        step *= shape[axis]
    return DeviceArray(buffer, 0, shape, strides, dtype)


def device_array_like(ary, stream=0, device=None):
    """A new uninitialised :class:`DeviceArray` of ``ary``'s shape and dtype, in its order
    where it is Fortran-contiguous (numba's ``device_array_like``)."""
    f = getattr(ary, "flags", None) is not None and ary.flags.f_contiguous and ary.ndim > 1
    if isinstance(ary, DeviceArray):
        f = ary.is_f_contiguous() and not ary.is_c_contiguous()
        if device is None:
            device = tilemm.Device(ary._buffer.backend, ary._buffer.index)
    return device_array(ary.shape, ary.dtype, order="F" if f else "C", device=device)


def _merged(x, batch):
    """`x` (batch dimensions `batch`, then the matrix) as a 3-D view: its batch dimensions
    merged into one where its strides allow, or None."""
    steps = [(n, s) for n, s in zip(batch, x._strides) if n != 1]
    for (_, outer), (n, inner) in zip(steps, steps[1:]):
        if outer != inner * n:
            return None
    return x._view(
        x._offset,
        (math.prod(batch),) + x._shape[-2:],
        (steps[-1][1] if steps else 0,) + x._strides[-2:],
    )


def _leading(x, nb):
    """`x` with its `nb` batch dimensions, each of size 1, dropped, as a batch of 1."""
    return x._view(x._offset, (1,) + x._shape[nb:], (0,) + x._strides[nb:])


def _gemm3(a, b, c, alpha, beta, kernel):
    def args(x):
        return (x._check()._buffer, x._offset, x._shape, x._strides)

    tilemm._done(*_tilemm.device_gemm(args(a), args(b), args(c), alpha, beta, kernel))


def _batched(a, b, c, batch, alpha, beta, kernel):
    """C = alpha·A·B + beta·C over the broadcast batch `batch`, on device views (as
    tilemm._batched on host arrays)."""
    nb = len(batch)
    views = []
    for x in (a, b, c):
        if all(n == 1 for n in x._shape[:nb]):
            views.append(_leading(x, nb))
        elif x._shape[:nb] == batch:
            views.append(_merged(x, batch))
        else:
            views.append(None)
    if all(v is not None for v in views):
        _gemm3(*views, alpha, beta, kernel)
        return
    for index in np.ndindex(*batch[:-1]):
        def pick(x):
            return x[tuple(i if x._shape[d] != 1 else 0 for d, i in enumerate(index))]

        _batched(pick(a), pick(b), c[index], batch[-1:], alpha, beta, kernel)


def _padded(x, ndim):
    """`x` with unit axes in front, to `ndim` dimensions."""
    extra = ndim - x.ndim
    return x._view(x._offset, (1,) * extra + x._shape, (0,) * extra + x._strides)


def _device_matmul(a, b, out, alpha, beta, kernel, device, dtype, axes):
    """tilemm.matmul where an operand or ``out`` is a device array: computed on its device,
    host operands uploaded there first (counted in ``last_call.bytes_to_device``); the result
    a DeviceArray, or copied into a numpy ``out`` (counted in ``bytes_from_device``)."""
    tilemm._reset_last_call()
    if isinstance(out, tuple):
        if len(out) != 1:
            raise tilemm.ArgumentError("matmul has one output, so out= must be an array or a 1-tuple")
        (out,) = out
    if axes is not None:
        raise tilemm.ArgumentError(
            "axes= is not supported with device arrays: transpose the operands (.transpose)"
        )
    if not isinstance(kernel, str):
        raise tilemm.ArgumentError(f"kernel must be a string such as 'auto' or 'tiled', not {kernel!r}")
    alpha, beta = tilemm._scalar("alpha", alpha), tilemm._scalar("beta", beta)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if value.imag != 0:
            raise tilemm.ArgumentError(
                f"{name} = {value} is complex: device arrays hold real floating-point types"
            )
    alpha, beta = alpha.real, beta.real
    # The device: the device arrays', which must agree with each other and with device=.
    backend, index = _device_names(device)
    placed = [x._check() for x in (a, b, out) if isinstance(x, DeviceArray)]
    if placed:
        home = placed[0]._buffer
        for x in placed[1:]:
            if not home.same_device(x._buffer):
                raise tilemm.ArgumentError(
                    f"matmul: operands on different devices ({home.backend}:{home.index} and "
                    f"{x._buffer.backend}:{x._buffer.index}): move one with copy_to_host and "
                    "to_device"
                )
        if backend is not None and (backend, index) not in (
            (home.backend, home.index),
            (home.backend, None),
        ):
            raise tilemm.ArgumentError(
                f"matmul: device={device!r}, but the device arrays are on "
                f"{home.backend}:{home.index}"
            )
        backend, index = home.backend, home.index
    host_out = out if isinstance(out, np.ndarray) else None
    if out is not None and not isinstance(out, (DeviceArray, np.ndarray)):
        raise tilemm.ArgumentError(
            f"out= with device operands must be a tilemm.DeviceArray or a numpy array, not "
            f"{type(out).__name__} (wrap another library's array with tilemm.to_device, or "
            "read the result through its __cuda_array_interface__)"
        )
    if dtype is not None:
        dtype = np.dtype(dtype)
    operands = []
    for x in (a, b):
        if not isinstance(x, DeviceArray):
            if not _foreign(x):
                x = np.asarray(x)
                if x.ndim == 0:
                    raise tilemm._signature_error(len(operands), 0)
                if dtype is not None:
                    x = x.astype(dtype, casting="same_kind")
            x = _to_device(x, backend, index, counted=True)
            if backend is None:
                backend, index = x._buffer.backend, x._buffer.index
        operands.append(x)
    a, b = operands
    for operand, x in enumerate((a, b)):
        if x.ndim == 0:
            raise tilemm._signature_error(operand, 0)
    if a.dtype != b.dtype:
        raise tilemm.DTypeError(
            f"matmul on device arrays of {a.dtype} and {b.dtype}: device arrays are not cast "
            "(cast on the host, then to_device)"
        )
    if dtype is not None and dtype != a.dtype:
        raise tilemm.DTypeError(
            f"matmul: dtype={dtype}, but the device arrays hold {a.dtype} (they are not cast)"
        )
    result_dtype = tilemm._result_dtype(a, b)[0]
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b2 = b[:, np.newaxis] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise tilemm._core_error("Input", 1, 0, b2.shape[-2], a2.shape[-1])
    m, n = a2.shape[-2], b2.shape[-1]
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError as e:
        raise tilemm.ShapeError(str(e)) from None
    full_shape = batch + (m, n)
    shape = full_shape
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    if out is not None and out.shape != shape:
        raise tilemm.ShapeError(
            f"matmul: non-broadcastable output operand: out has shape {out.shape}, the result "
            f"{shape}"
        )
    if isinstance(out, DeviceArray):
        if out.dtype != result_dtype and not (
            out.dtype == np.float32 and a.dtype.itemsize == 2
        ):
            raise tilemm.DTypeError(
                f"matmul: out is a {out.dtype} device array, the result {result_dtype} (device "
                "arrays are not cast; f16 and bf16 products may be written into float32)"
            )
        c = out
    else:
        if beta != 0.0 and host_out is None:
            raise tilemm.ArgumentError("beta ≠ 0 scales out=, which was not given")
        if host_out is not None:
            if not np.can_cast(result_dtype, host_out.dtype, "same_kind"):
                raise tilemm.DTypeError(
                    f"Cannot cast ufunc 'matmul' output from {result_dtype!r} to "
                    f"{host_out.dtype!r} with casting rule 'same_kind'"
                )
            if not host_out.flags.writeable:
                raise tilemm.ArgumentError("out is read-only")
        if host_out is not None and beta != 0.0:
            c = _to_device(host_out.astype(result_dtype), backend, index, counted=True)
        else:
            c = _device_array(shape, result_dtype, "C", backend, index)
    if c.size:
        # Inserting the removed unit axes back is a view.
        c_full = c
        if a.ndim == 1:
            c_full = c_full[..., np.newaxis, :] if b.ndim != 1 else c_full[..., np.newaxis]
        if b.ndim == 1:
            c_full = c_full[..., np.newaxis]
        nb = len(batch)
        _batched(_padded(a2, nb + 2), _padded(b2, nb + 2), c_full, batch, alpha, beta, kernel)
    if host_out is not None:
        if host_out.dtype == c.dtype:
            c.copy_to_host(host_out)
        else:
            host_out[...] = c.copy_to_host()
        tilemm._count(from_device=c.nbytes)
        return host_out
    return c
