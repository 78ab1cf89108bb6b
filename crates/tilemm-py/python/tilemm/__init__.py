"""tilemm: numpy's ``matmul`` on the GPUs of every vendor.

``tilemm.matmul(a, b)`` computes what ``numpy.matmul(a, b)`` computes (broadcast batches,
1-D operands, dtype promotion, ``out=``) with tilemm's kernels on the fastest route this
machine has: a GPU through CUDA, HIP or wgpu (Vulkan, Metal, DX12), or the CPU path where the
only adapter is a CPU emulation such as lavapipe. ``alpha`` and ``beta`` make it a GEMM,
``out = alpha * a @ b + beta * out``.
"""

from __future__ import annotations

import json
import math
import threading

import numpy as np

from . import _tilemm

__version__ = _tilemm.__version__

__all__ = [
    "matmul",
    "to_device",
    "device_array",
    "device_array_like",
    "DeviceArray",
    "synchronize",
    "register",
    "run",
    "tune",
    "RunReport",
    "devices",
    "Device",
    "TilemmError",
    "ShapeError",
    "DTypeError",
    "ArgumentError",
    "UnavailableError",
    "MaskedArrayError",
    "FreedArrayError",
    "OutOfMemoryError",
    "__version__",
]


class TilemmError(Exception):
    """Every error tilemm raises."""


class ShapeError(TilemmError, ValueError):
    """Operands whose shapes numpy's matmul refuses (a ``ValueError``, as numpy raises)."""


class DTypeError(TilemmError, TypeError):
    """Operands or an ``out=`` of a dtype tilemm does not compute (a ``TypeError``)."""


class ArgumentError(TilemmError, ValueError):
    """An argument tilemm cannot use: a kernel, a device, alpha or beta (a ``ValueError``)."""


class UnavailableError(TilemmError, RuntimeError):
    """No device or kernel can run the request here (a ``RuntimeError``)."""


class OutOfMemoryError(TilemmError, MemoryError):
    """The host memory a product needs could not be allocated within this process's limits
    (a ``MemoryError``); the interpreter goes on."""


class FreedArrayError(TilemmError, ValueError):
    """A device array used after :meth:`DeviceArray.free` gave its memory back (a
    ``ValueError``)."""


class MaskedArrayError(TilemmError, TypeError):
    """A masked array as an operand or ``out=``: refused, since computing on its data would
    use the masked values (a ``TypeError``)."""


# numpy's own float types, and ml_dtypes' bfloat16 where it is installed.
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
# Complex products: four real ones each (tilemm::complex, the 4M method).
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))
# numpy's own floating and complex types (what the checks of each call look in).
_NUMPYS = _FLOATS + _COMPLEX


def _bf16():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def devices():
    """The GPU devices of every backend this build has: a list of dicts (backend, index,
    name, kind, driver, limits, types), as ``tilemm devices --json`` lists them."""
    return [
        dict(entry["device"], backend=entry["backend"])
        for entry in json.loads(_tilemm.devices_json())
    ]


class Device:
    """A device to compute on: ``Device()`` the fastest route, ``Device("cpu")`` the CPU
    path, ``Device("wgpu")`` (or ``"cuda"``, ``"hip"``) a backend's best device,
    ``Device("wgpu", 1)`` or ``Device("wgpu:1")`` its device 1.

    The device is opened once per process, when the first ``Device`` names it, and shared by
    every thread; a ``Device`` is a name for it and may be passed anywhere ``device=`` is.
    """

    __slots__ = ("backend", "index", "route")

    def __init__(self, backend=None, index=None):
        if isinstance(backend, str) and index is None:
            # Read as every front end reads it (``auto``, ``cpu``, ``cuda``, ``wgpu:1``).
            backend, index = _tilemm.device_spec(backend)
        elif backend is not None and not isinstance(backend, str):
            raise ArgumentError(f"device backend must be a string, not {type(backend).__name__}")
        elif isinstance(backend, str) and ":" in backend:
            raise ArgumentError(f"device {backend!r} already names an index")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ArgumentError(f"device index must be a non-negative int, not {index!r}")
        if backend is None and index is not None:
            raise ArgumentError("a device index needs a backend (cuda, hip, wgpu)")
        self.backend = backend
        self.index = index
        #: Where products on this device run, in words.
        self.route = _tilemm.route(backend, index)

    def __repr__(self):
        name = self.backend or "auto"
        if self.index is not None:
            name += f":{self.index}"
        return f"tilemm.Device({name!r}: {self.route})"

    def __reduce__(self):
        # A worker that unpickles it opens its own device.
        return (Device, (self.backend, self.index))


_DEVICES = {}
_DEVICES_LOCK = threading.Lock()


#: The environment variable that names the device when ``device=`` is not given (``cuda:1``,
#: say): how a Dask worker is pinned to one GPU. tilemm reads it once per process, as the CLI
#: and the BLAS do.
DEVICE_VARIABLE = "TILEMM_DEVICE"


def _device(device):
    if isinstance(device, Device):
        return device
    if device is None or isinstance(device, str):
        # Read without the lock (a dict's get is atomic): the lock only orders first opens.
        opened = _DEVICES.get(device)
        if opened is not None:
            return opened
        with _DEVICES_LOCK:
            if device not in _DEVICES:
                _DEVICES[device] = Device(device)
            return _DEVICES[device]
    raise ArgumentError(
        f"device must be None, a string such as 'wgpu' or 'cuda:0', or a tilemm.Device, "
        f"not {type(device).__name__}"
    )


def _signature_error(operand, has):
    return ShapeError(
        f"matmul: Input operand {operand} does not have enough dimensions (has {has}, gufunc "
        "core with signature (n?,k),(k,m?)->(n?,m?) requires 1)"
    )


def _core_error(which, operand, dim, size, expected):
    return ShapeError(
        f"matmul: {which} operand {operand} has a mismatch in its core dimension {dim}, with "
        f"gufunc signature (n?,k),(k,m?)->(n?,m?) (size {size} is different from {expected})"
    )


def _result_dtype(a, b):
    """The dtype numpy's matmul returns for `a` and `b`, and the dtype tilemm's kernels read
    them in, or a DTypeError."""
    # Byte order is storage, not type: a '>f4' operand is read as float32.
    a_dtype, b_dtype = (x.dtype.newbyteorder("=") for x in (a, b))
    if a_dtype == b_dtype and a_dtype in _NUMPYS:
        # numpy's own types, alike: the type itself.
        return a_dtype, a_dtype
    bf16 = _bf16()
    if a_dtype.kind in "iub" and b_dtype.kind in "iub":
        # Integers and bool: numpy's type (computed exactly, see _exact_integer_product).
        result = np.result_type(a_dtype, b_dtype)
        return result, result
    for x in (a, b):
        native = x.dtype.newbyteorder("=")
        if native.kind in "iub":
            continue
        if native not in _NUMPYS and native != bf16:
            raise DTypeError(
                f"tilemm computes bool, integers, float16, bfloat16 (ml_dtypes), float32, "
                f"float64, complex64 and complex128; not {x.dtype}"
            )
    if a_dtype.kind == "c" or b_dtype.kind == "c":
        if bf16 in (a_dtype, b_dtype):
            raise DTypeError(f"matmul: no common dtype of {a.dtype} and {b.dtype}")
        # As numpy: the complex type that holds both (a real operand's imaginary part is 0).
        result = np.result_type(a_dtype, b_dtype)
        return result, result
    if bf16 is not None and a_dtype == bf16 and b_dtype == bf16:
        # As numpy does with ml_dtypes: bfloat16 products come back as float32.
        return np.dtype(np.float32), bf16
    if bf16 is not None and {a_dtype, b_dtype} == {bf16, np.dtype(np.float16)}:
        # numpy has no common type of the two (DTypePromotionError); ml_dtypes' matmul gives
        # float32, which holds both exactly.
        return np.dtype(np.float32), np.dtype(np.float32)
    try:
        result = np.result_type(a_dtype, b_dtype)
    except TypeError as e:
        raise DTypeError(f"matmul: no common dtype of {a.dtype} and {b.dtype}: {e}") from None
    if bf16 is not None and result == bf16:
        result = np.dtype(np.float32)
    return result, result


def _scalar(name, value):
    """`value` as a complex number (a complex product takes complex scalars; the caller checks
    that a real one gets real ones)."""
    try:
        value = complex(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{name} must be a number, not {value!r}") from None
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        raise ArgumentError(f"{name} must be finite, not {value}")
    return value


def _merged(x, batch):
    """`x` (batch dimensions `batch`, then the matrix) as a 3-D view: its batch dimensions
    merged into one where its strides allow, or None."""
    if len(batch) == 1:
        # Already so (the caller passes it full).
        return x
    core = x.shape[-2:]
    # A dimension of size 1 is never stepped along: its stride says nothing, so it is left out.
    steps = [(size, stride) for size, stride in zip(batch, x.strides) if size != 1]
    for (_, outer), (size, inner) in zip(steps, steps[1:]):
        if outer != inner * size:
            return None
    # So numpy's reshape makes a view (a tenth of as_strided's time); a copy would leave C
    # unwritten, so one is refused all the same.
    merged = x.reshape((math.prod(batch),) + core)
    return merged if np.may_share_memory(merged, x) else None


#: Per thread, what the last call of :func:`matmul` did: ``route`` (where it ran),
#: ``library_seconds`` (the Rust library's time for it, summed over its products), so that a
#: benchmark can tell the binding's own cost (scripts/bench-python), and ``bytes_to_device``
#: and ``bytes_from_device`` (what it copied between the host and a device: 0 and 0 for a
#: product of device arrays).
last_call = threading.local()


def _reset_last_call():
    last_call.route, last_call.library_seconds = None, 0.0
    last_call.bytes_to_device = last_call.bytes_from_device = 0


def _count(to_device=0, from_device=0):
    """Adds bytes moved between the host and a device to :data:`last_call`'s counts."""
    last_call.bytes_to_device = getattr(last_call, "bytes_to_device", 0) + to_device
    last_call.bytes_from_device = getattr(last_call, "bytes_from_device", 0) + from_device


def _done(route, seconds, to_device, from_device):
    last_call.route = route
    last_call.library_seconds = getattr(last_call, "library_seconds", 0.0) + seconds
    _count(to_device, from_device)


def _gemm3(a, b, c, alpha, beta, kernel, device):
    _done(*_tilemm.gemm(
        a, b, c, (alpha.real, alpha.imag), (beta.real, beta.imag), kernel, device.backend,
        device.index,
    ))


def _batched(a, b, c, batch, alpha, beta, kernel, device):
    """C = alpha·A·B + beta·C over the broadcast batch `batch` (A and B padded to its length,
    each batch dimension full or 1; C full)."""
    nb = len(batch)
    if nb == 0:
        # Matrices: each a batch of one.
        _gemm3(*(x.reshape((1,) + x.shape) for x in (a, b, c)), alpha, beta, kernel, device)
        return

    def full(x):
        return x.shape[:nb] == batch

    def single(x):
        return all(s == 1 for s in x.shape[:nb])

    views = []
    for x in (a, b, c):
        if single(x):
            views.append(x.reshape((1,) + x.shape[nb:]))
        elif full(x):
            views.append(_merged(x, batch))
        else:
            views.append(None)
    if all(v is not None for v in views):
        _gemm3(*views, alpha, beta, kernel, device)
        return
    # Some operand broadcasts along only part of the batch: one product per index of the
    # leading batch dimensions, over the last.
    for index in np.ndindex(*batch[:-1]):
        pick = lambda x: x[tuple(i if x.shape[d] != 1 else 0 for d, i in enumerate(index))]
        _batched(pick(a), pick(b), c[index], batch[-1:], alpha, beta, kernel, device)


def _returned(result, out):
    # As numpy: a product of two vectors is a scalar unless out= was given.
    return result[()] if out is None and result.ndim == 0 else result


#: numpy's casting rules, in its order.
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _fortran(order, a, b):
    """Whether a new result of `order` (numpy's: K, A, C or F) is laid out in Fortran order:
    F, or A with both inputs F-contiguous (K keeps C, as numpy's matmul gives it)."""
    return order == "F" or (order == "A" and a.flags.f_contiguous and b.flags.f_contiguous)


def _broadcasts_to(shape, target):
    """Whether `shape` broadcasts to `target` (numpy's rule)."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _into(result, out, casting="same_kind", core=2):
    """`result` (its last `core` dimensions the product's own) as matmul returns it, written
    into `out` where it was given (under numpy's casting rule `casting`)."""
    if out is None:
        return _returned(result, None)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
    # Loop dimensions of out= that the result's broadcast to take it broadcast, as numpy's;
    # the core dimensions are the result's own.
    loops = result.ndim - core
    if out.ndim < core or out.shape[out.ndim - core:] != result.shape[loops:] or not (
        _broadcasts_to(result.shape[:loops], out.shape[:out.ndim - core])
    ):
        raise ShapeError(
            f"matmul: non-broadcastable output operand: out has shape {out.shape}, the result "
            f"{result.shape}"
        )
    if not np.can_cast(result.dtype, out.dtype, casting):
        raise DTypeError(
            f"Cannot cast ufunc 'matmul' output from {result.dtype!r} to {out.dtype!r} "
            f"with casting rule {casting!r}"
        )
    if not out.flags.writeable:
        raise ArgumentError("out is read-only")
    out[...] = result
    return out


def _exact_integer_product(a, b, result_dtype, kernel, device):
    """numpy's integer or bool matmul, computed exactly by tilemm's floating-point products.

    bool: or of ands, the count of true pairs (exact in float32 up to K = 2**24) above zero.
    Integers wrap modulo 2**bits as numpy's do. Where every partial sum fits in float64's 53 bits
    (|A|max·|B|max·K < 2**52) one float64 product gives the exact sum, cast back with
    wrapping; else the operands are split into base-2**w digits (w with K·2**(2w) < 2**52) and
    the digit products, each exact, are added with wrapping shifts in uint64 (two's complement
    makes that right for signed types too): C mod 2**bits = Σ (Aᵢ·Bⱼ)·2**(w(i+j)).
    """
    mm = lambda x, y: matmul(x, y, kernel=kernel, device=device)  # noqa: E731
    k = a.shape[-1] if a.ndim else 1
    # Each elementwise step on the operands without their broadcast axes (a broadcast_to view
    # is cast once, not copied whole), broadcast again for the product, which reads it in
    # place.
    shape_a, shape_b = a.shape, b.shape
    a, b = _compact(a), _compact(b)
    spread = lambda x, y: (np.broadcast_to(x, shape_a), np.broadcast_to(y, shape_b))  # noqa: E731
    if result_dtype == np.bool_:
        real = np.float32 if k < 2**24 else np.float64
        return mm(*spread(a.astype(real), b.astype(real))) > 0
    a, b = a.astype(result_dtype), b.astype(result_dtype)
    if a.size == 0 or b.size == 0 or k == 0:
        return mm(*spread(a.astype(np.float64), b.astype(np.float64))).astype(result_dtype)
    # Magnitudes as float64 (rounded up by at most a unit in the last place: the margin below
    # is a factor 2).
    biggest = lambda x: float(np.max(np.abs(x.astype(np.float64))))  # noqa: E731
    if biggest(a) * biggest(b) * k < 2.0**52:
        exact = mm(*spread(a.astype(np.float64), b.astype(np.float64)))
        wide = np.uint64 if result_dtype.kind == "u" else np.int64
        return np.asarray(exact).astype(wide).astype(result_dtype)
    bits = 8 * result_dtype.itemsize
    w = max(1, (52 - math.ceil(math.log2(k + 1))) // 2)
    digits = math.ceil(bits / w)
    mask = np.uint64((1 << w) - 1)
    au, bu = a.astype(np.uint64), b.astype(np.uint64)
    digit = lambda x, i: ((x >> np.uint64(w * i)) & mask).astype(np.float64)  # noqa: E731
    total = None
    with np.errstate(over="ignore"):
        for i in range(digits):
            di = digit(au, i)
            for j in range(digits - i):
                part = mm(*spread(di, digit(bu, j)))
                part = np.asarray(part).astype(np.uint64) << np.uint64(w * (i + j))
                total = part if total is None else total + part
    return total.astype(result_dtype)


def _compact(x):
    """`x` without the broadcast axes (stride 0, more than one long) spelled out: each taken
    at length 1, so that ``np.broadcast_to(_compact(x), x.shape)`` is `x`."""
    if 0 not in x.strides or x.size == 0:
        return x
    return x[tuple(slice(0, 1) if stride == 0 and size > 1 else slice(None)
                   for size, stride in zip(x.shape, x.strides))]


def _with_axes(a, b, out, axes, call):
    """numpy's ``axes=``: the core axes of A, B and the result, moved to the end for `call`
    (which computes with them last) and the result's moved back (a view of ``out`` where it
    was given, so that it is written in place)."""
    a, b = np.asarray(a), np.asarray(b)
    if not isinstance(axes, (list, tuple)) or len(axes) != 3:
        raise ArgumentError(
            f"axes must be a list of three tuples (A's, B's and the result's core axes), not "
            f"{axes!r}"
        )
    cores = [min(a.ndim, 2), min(b.ndim, 2)]
    cores.append(cores[0] + cores[1] - 2)
    picked = []
    for name, ax, core in zip(("A", "B", "the result"), axes, cores):
        ax = (ax,) if isinstance(ax, (int, np.integer)) else tuple(ax)
        if len(ax) != core or not all(isinstance(i, (int, np.integer)) for i in ax):
            raise ArgumentError(
                f"axes: {name} has {core} core axis(es), so its entry must be {core} integer(s), "
                f"not {ax!r}"
            )
        picked.append(ax)
    last = lambda n: tuple(range(-n, 0))  # noqa: E731
    try:
        a = np.moveaxis(a, picked[0], last(cores[0]))
        b = np.moveaxis(b, picked[1], last(cores[1]))
        if out is not None:
            out = np.moveaxis(out, picked[2], last(cores[2]))
    except ValueError as e:  # numpy's AxisError included
        raise ArgumentError(f"axes: {e}") from None
    result = call(a, b, out)
    if cores[2] == 0 or not isinstance(result, np.ndarray):
        return result
    return np.moveaxis(result, last(cores[2]), picked[2])


#: The dtypes of the plain product (`_plain_product`), in the machine's byte order.
_PLAIN = (np.dtype(np.float32), np.dtype(np.float64))


def _plain_product(a, b, alpha, beta, kernel, device):
    """The commonest calls: two matrices, or stacks of them (equal batch shapes, or one
    operand a matrix, as in ``x @ w``), of the same native float32 or float64, none empty,
    `alpha` 1 and `beta` 0, no `out`, `dtype` or `axes`, computed as the general path computes
    them (a new C, the same `_batched` call): that path's checks cost tens of microseconds of
    Python a call, more than a small product. Else None, and the general path takes the
    call."""
    if not (
        alpha == 1.0
        and beta == 0.0
        and a.ndim >= 2
        and b.ndim >= 2
        and a.dtype == b.dtype
        and a.dtype in _PLAIN
    ):
        return None
    m, k = a.shape[-2:]
    k_b, n = b.shape[-2:]
    if k != k_b or m == 0 or n == 0 or k == 0:
        return None
    batch = ()
    if a.ndim > 2 or b.ndim > 2:
        batch, other = (a.shape[:-2], b.shape[:-2]) if a.ndim >= b.ndim else (
            b.shape[:-2], a.shape[:-2])
        # Batches broadcast along some dimensions only, and empty ones, take the general path.
        if (other and other != batch) or 0 in batch:
            return None
        nb = len(batch)
        a = a.reshape((1,) * (nb + 2 - a.ndim) + a.shape)
        b = b.reshape((1,) * (nb + 2 - b.ndim) + b.shape)
    _reset_last_call()
    c = np.empty(batch + (m, n), dtype=a.dtype)
    _batched(a, b, c, batch, alpha, beta, kernel, _device(device))
    return c


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, kernel="auto", device=None, dtype=None,
           axes=None, casting="same_kind", order="K", subok=True):
    """``numpy.matmul(a, b, out=out)`` computed by tilemm, scaled as a GEMM:
    ``out = alpha * a @ b + beta * out`` (``alpha`` and ``beta`` complex for a complex product).

    ``a`` and ``b`` are array-likes of bool, integers (exact, wrapping as numpy's), float16,
    bfloat16 (ml_dtypes), float32, float64, complex64 or complex128 with
    numpy's matmul shapes: batch dimensions broadcast, 1-D operands are promoted and the added
    axis removed, dtypes promote as numpy promotes them. Views are read in place, any strides
    included. ``out`` (an ndarray of the result's shape, of a dtype the result casts to with
    ``same_kind``) is written in place, also when it overlaps ``a`` or ``b``; ``beta`` ≠ 0
    needs it. ``kernel`` is ``"auto"`` (the tuner's verified choice) or a rung such as
    ``"tiled"`` or ``"warptile:bm=64"``; ``device`` is ``None`` (the device the environment
    variable ``TILEMM_DEVICE`` names, else the fastest route), a backend name (``"cpu"``,
    ``"wgpu"``, ``"cuda:1"``) or a :class:`Device`. ``dtype``, ``axes``, ``casting``,
    ``order`` and ``subok`` are numpy's: the inputs cast to ``dtype`` and the product computed
    in it; the core axes of A, B and the result; the rule every cast of an input or of the
    result into ``out`` follows; the new result's memory order (``"C"``, ``"F"``, ``"A"``: F
    where both inputs are, or ``"K"``: C); whether a subclass input's type wraps the result.
    The GIL is released while the device works.
    """
    if (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and out is None
        and dtype is None
        and axes is None
        and casting == "same_kind"
        and order == "K"
        and type(alpha) is float
        and type(beta) is float
        and type(kernel) is str
    ):
        plain = _plain_product(a, b, alpha, beta, kernel, device)
        if plain is not None:
            return plain
    if isinstance(out, tuple):
        # As numpy's ufuncs: out=(array,) names the one output.
        if len(out) != 1:
            raise ArgumentError(
                f"matmul has one output, so out= must be an array or a 1-tuple; got a tuple "
                f"of {len(out)}"
            )
        (out,) = out
    if casting not in _CASTINGS:
        raise ArgumentError(f"casting must be one of {', '.join(_CASTINGS)}, not {casting!r}")
    if order is None:
        order = "K"
    if not isinstance(order, str) or order.upper() not in ("K", "A", "C", "F"):
        raise ArgumentError(f"order must be 'K', 'A', 'C' or 'F', not {order!r}")
    order = order.upper()
    if any(_on_device(x) for x in (a, b, out)):
        if (casting, order) != ("same_kind", "K"):
            raise ArgumentError(
                "casting= and order= are not supported with device arrays (their layout and "
                "types are the device's)"
            )
        return _device_matmul(a, b, out, alpha, beta, kernel, device, dtype, axes)
    for name, x in (("a", a), ("b", b), ("out", out)):
        if x is not None and type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise MaskedArrayError(
                f"tilemm.matmul does not take masked arrays ({name} is one): it would compute "
                "with the masked values; pass x.filled(0) to leave them out, or use np.ma.dot"
            )
    subclassed = [
        x for x in (a, b, out) if type(x) is not np.ndarray and isinstance(x, np.ndarray)
    ]
    if subclassed:
        return _subclassed_matmul(a, b, out, subok, alpha=alpha, beta=beta, kernel=kernel,
                                  device=device, dtype=dtype, axes=axes, casting=casting,
                                  order=order)
    a = np.asarray(a)
    b = np.asarray(b)
    for operand, x in enumerate((a, b)):
        if x.ndim == 0:
            raise _signature_error(operand, 0)
    if axes is not None:
        return _with_axes(
            a, b, out, axes,
            lambda a, b, out: matmul(
                a, b, out, alpha=alpha, beta=beta, kernel=kernel, device=device, dtype=dtype,
                casting=casting, order=order,
            ),
        )
    if dtype is not None:
        # numpy's dtype=: the inputs cast to it (same_kind), the product computed and returned
        # in it.
        try:
            dtype = np.dtype(dtype)
        except TypeError as e:
            raise DTypeError(f"dtype: {e}") from None
        for i, x in enumerate((a, b)):
            if not np.can_cast(x.dtype, dtype, casting):
                raise DTypeError(
                    f"Cannot cast ufunc 'matmul' input {i} from {x.dtype!r} to {dtype!r} with "
                    f"casting rule {casting!r}"
                )
        a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    alpha = _scalar("alpha", alpha)
    beta = _scalar("beta", beta)
    if not isinstance(kernel, str):
        raise ArgumentError(f"kernel must be a string such as 'auto' or 'tiled', not {kernel!r}")
    _reset_last_call()
    result_dtype, input_dtype = _result_dtype(a, b)
    if casting in ("no", "equiv"):
        # numpy's loop runs in the promoted type: an input of another one is cast to it.
        for i, x in enumerate((a, b)):
            if not np.can_cast(x.dtype, result_dtype, casting):
                raise DTypeError(
                    f"Cannot cast ufunc 'matmul' input {i} from {x.dtype!r} to "
                    f"{result_dtype!r} with casting rule {casting!r}"
                )
    if result_dtype.kind != "c":
        for name, value in (("alpha", alpha), ("beta", beta)):
            if value.imag != 0:
                raise ArgumentError(
                    f"{name} = {value} is complex, but the product is {result_dtype}: "
                    "complex scalars scale complex products"
                )
        alpha, beta = alpha.real, beta.real
    if result_dtype.kind in "iub":
        if alpha != 1.0 or beta != 0.0:
            raise ArgumentError(
                f"alpha and beta scale floating-point products; a {result_dtype} product is "
                "numpy's matmul (alpha=1, beta=0)"
            )
        product = _exact_integer_product(a, b, result_dtype, kernel, device)
        if out is None and _fortran(order, a, b):
            product = np.asfortranarray(product)
        return _into(product, out, casting, 2 - (a.ndim == 1) - (b.ndim == 1))
    # The kernels read and write the machine's byte order.
    result_dtype, input_dtype = (d.newbyteorder("=") for d in (result_dtype, input_dtype))
    device = _device(device)

    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    a2 = a[np.newaxis, :] if a_vector else a
    b2 = b[:, np.newaxis] if b_vector else b
    if a2.shape[-1] != b2.shape[-2]:
        raise _core_error("Input", 1, 0, b2.shape[-2], a2.shape[-1])
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    batch = a2.shape[:-2]
    if b2.shape[:-2] != batch:
        try:
            batch = np.broadcast_shapes(batch, b2.shape[:-2])
        except ValueError as e:
            raise ShapeError(str(e)) from None
    # numpy's out= may have loop dimensions the inputs' batch broadcasts to (more of them, or
    # longer where the inputs' are 1): the inputs broadcast to them too.
    core = 2 - a_vector - b_vector
    if isinstance(out, np.ndarray) and out.ndim >= core:
        loops = out.shape[:out.ndim - core]
        if loops != batch and _broadcasts_to(batch, loops):
            batch = loops
    full_shape = batch + (m, n)
    shape = full_shape
    if a_vector:
        shape = shape[:-2] + shape[-1:]
    if b_vector:
        shape = shape[:-1]

    if out is None:
        if beta != 0.0:
            raise ArgumentError("beta ≠ 0 scales out=, which was not given")
        result = np.empty(shape, dtype=result_dtype, order="F" if _fortran(order, a, b) else "C")
    else:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
        if out.shape != shape:
            if out.ndim != len(shape):
                raise ShapeError(
                    f"matmul: out has {out.ndim} dimensions, the result {len(shape)} ({shape})"
                )
            raise ShapeError(
                f"matmul: non-broadcastable output operand: out has shape {out.shape}, the "
                f"result {shape}"
            )
        if not np.can_cast(result_dtype, out.dtype, casting):
            raise DTypeError(
                f"Cannot cast ufunc 'matmul' output from {result_dtype!r} to {out.dtype!r} "
                f"with casting rule {casting!r}"
            )
        if not out.flags.writeable:
            raise ArgumentError("out is read-only")
        result = out

    # Empty products: numpy's zeros (K = 0) and empty arrays (M, N or a batch of 0).
    if result.size == 0:
        return _returned(result, out)
    if k == 0:
        result[...] = beta * result if beta != 0.0 else 0
        return _returned(result, out)

    # Where tilemm writes: `result` itself where it has the dtype the kernels write and does
    # not overlap an input; else a buffer of that dtype, copied into `result` at the end.
    direct = (
        result.dtype == result_dtype
        and not np.may_share_memory(result, a)
        and not np.may_share_memory(result, b)
    )
    if direct:
        c = result
    elif beta != 0.0:
        c = result.astype(result_dtype)
    else:
        c = np.empty(shape, dtype=result_dtype)
    # Inserting the removed unit axes back is a view, never a copy.
    c_full = c.reshape(full_shape)
    a_in = a2 if a2.dtype == input_dtype else a2.astype(input_dtype)
    b_in = b2 if b2.dtype == input_dtype else b2.astype(input_dtype)
    nb = len(batch)
    a_in = a_in.reshape((1,) * (nb + 2 - a_in.ndim) + a_in.shape)
    b_in = b_in.reshape((1,) * (nb + 2 - b_in.ndim) + b_in.shape)
    _batched(a_in, b_in, c_full, batch, alpha, beta, kernel, device)
    if c is not result:
        result[...] = c
    return _returned(result, out)


def _subclassed_matmul(a, b, out, subok, **options):
    """numpy's matmul where an operand or ``out`` is an ndarray subclass (``np.matrix``, say):
    computed on their data (``out`` written through a plain view of it, and returned); a new
    result wrapped as numpy wraps it, by the ``__array_wrap__`` of the input of the highest
    ``__array_priority__`` (the first on a tie; a 0-d result too), unless ``subok`` is false.
    A subclass with an ``__array_ufunc__`` of its own (units, say) computes matmul its own way,
    whatever ``subok`` says, which tilemm cannot: refused, rather than returned without what it
    carries."""
    for x in (a, b, out):
        if isinstance(x, np.ndarray) and type(x).__array_ufunc__ is not np.ndarray.__array_ufunc__:
            raise DTypeError(
                f"tilemm.matmul does not take {type(x).__module__}.{type(x).__name__}: it "
                "defines its own __array_ufunc__, whose matmul tilemm cannot compute; pass "
                "np.asarray(x) to multiply its values"
            )
    plain_out = out.view(np.ndarray) if isinstance(out, np.ndarray) else out
    result = matmul(np.asarray(a), np.asarray(b), plain_out, **options)
    if out is not None:
        return out
    inputs = [x for x in (a, b) if type(x) is not np.ndarray and isinstance(x, np.ndarray)]
    if not subok or not inputs:
        return result
    wrapper = max(inputs, key=lambda x: getattr(x, "__array_priority__", 0.0))
    return wrapper.__array_wrap__(np.asarray(result))


class register:
    """``with tilemm.register(a, b, c):`` registers numpy arrays with the device products run
    on, as the seed's ``roc.register(A, B, C)`` and numba's ``cuda.pinned`` do: the driver
    page-locks them and maps them for its DMA engines, so products on them upload and
    download at the link's speed rather than through the driver's staging copies. CUDA and HIP
    register (``cuMemHostRegister``, ``hipHostRegister``); on wgpu and the CPU route nothing
    is registered, and ``why_not`` says why. The arrays are unregistered when the ``with``
    block ends (or by ``close()``), and kept alive until then. ``device`` is as for
    :func:`matmul`.
    """

    def __init__(self, *arrays, device=None):
        for x in arrays:
            if not isinstance(x, np.ndarray):
                raise TypeError(
                    f"tilemm.register takes numpy arrays (their memory is registered), not "
                    f"{type(x).__name__}"
                )
        self.arrays = arrays
        device = _device(device)
        spans = [_byte_span(x) for x in arrays if x.size]
        self._guard = _tilemm.register(spans, device.backend, device.index)
        #: Whether the arrays are registered with a device.
        self.registered = self._guard.registered
        #: Why nothing was registered (wgpu, the CPU route), or None.
        self.why_not = self._guard.why_not
        #: The bytes covered.
        self.bytes = self._guard.bytes

    def close(self):
        """Unregisters the arrays (again: nothing)."""
        self._guard.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "registered" if self.registered else f"not registered: {self.why_not}"
        return f"tilemm.register({len(self.arrays)} arrays, {self.bytes} bytes, {state})"


def _byte_span(x):
    """(address, bytes) from the lowest to the highest byte of `x`'s elements."""
    start = x.__array_interface__["data"][0]
    low = start + sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s < 0)
    high = start + sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0) + x.itemsize
    return (low, high - low)


class _Fields:
    """A JSON object's fields as attributes."""

    def __init__(self, fields):
        for key, value in fields.items():
            setattr(self, key, _fields(value))

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"({inner})"


def _fields(value):
    if isinstance(value, dict):
        return _Fields(value)
    if isinstance(value, list):
        return [_fields(v) for v in value]
    return value


class RunReport(_Fields):
    """What ``tilemm run`` reports, as attributes: ``problem``, ``device``, ``kernel``,
    ``first_run`` (the 1st GPU run and its parts: tuning, JIT compilation, upload, launch,
    download), ``second_run``, ``cpu``, ``verification`` (error, bound, verdict),
    ``host_memory``, ``notes`` and ``passed``; times in milliseconds, as ``tilemm run --json``
    gives them. Its ``repr`` is the report ``tilemm run`` prints."""

    def __init__(self, fields, text):
        super().__init__(fields)
        #: Whether every checked C met the bound.
        self.passed = bool(fields["pass"])
        self._text = text
        self._json = fields

    def to_dict(self):
        """The report as ``tilemm run --json`` writes it."""
        return json.loads(json.dumps(self._json))

    def __repr__(self):
        return self._text

    __str__ = __repr__


_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16"}


def _dtype_name(dtype):
    if isinstance(dtype, str) and dtype in ("f16", "bf16", "f32", "f64", "tf32"):
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in _DTYPES:
        raise DTypeError(f"tilemm runs float16, bfloat16, float32, float64 and tf32; not {dtype!r}")
    return _DTYPES[name]


def run(m=256, k=None, n=None, *, dtype="float32", kernel="auto", backend=None, seed=0):
    """The numba example's experiment, as ``tilemm run`` runs it: C = A·B on random inputs
    (``k`` and ``n`` default to ``m``), the 1st GPU run (JIT compilation included) with its
    parts, the 2nd, the CPU, and the check against an f64 reference under the K-aware bound.
    ``backend`` is ``None`` (the best device), ``"cpu"``, or a backend (``"wgpu"``,
    ``"cuda:1"``). Returns a :class:`RunReport`; a product that fails the bound is reported
    (``passed`` false), not raised."""
    k = m if k is None else k
    n = m if n is None else n
    for name, value in (("m", m), ("k", k), ("n", n)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ShapeError(f"{name} must be a positive int, not {value!r}")
    index = None
    if isinstance(backend, str):
        backend, index = _tilemm.device_spec(backend)
    fields, text = _tilemm.run(
        int(m), int(k), int(n), _dtype_name(dtype), kernel, backend, index, int(seed)
    )
    return RunReport(json.loads(fields), text)


def tune(m, k=None, n=None, *, dtype="float32", device=None, budget="full"):
    """Tunes the shape class of an ``m``×``k``×``n`` product (``k`` and ``n`` default to
    ``m``) on a GPU device, as ``tilemm tune`` does, into the same cache, and returns the
    tuner's report (a dict: the choice, what was timed, whether it was verified and saved).

    No ``matmul`` waits on a search: a class never seen gets a quick first-call kernel. This is
    how to search ahead of time. ``budget`` is ``"full"`` (every candidate the model keeps),
    ``"auto"``, ``"none"`` or seconds; ``device`` as for ``matmul`` (``None``: the environment's
    ``TILEMM_DEVICE``, else the best GPU). A class this process has already computed keeps its
    kernel for the process, so that its results do not change; later processes take the new
    choice."""
    k = m if k is None else k
    n = m if n is None else n
    for name, value in (("m", m), ("k", k), ("n", n)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ShapeError(f"{name} must be a positive int, not {value!r}")
    backend = index = None
    if isinstance(device, Device):
        backend, index = device.backend, device.index
    elif isinstance(device, str):
        backend, index = _tilemm.device_spec(device)
    elif device is not None:
        raise ArgumentError(f"device must be None, a string or a tilemm.Device, not {type(device).__name__}")
    return json.loads(
        _tilemm.tune(int(m), int(k), int(n), _dtype_name(dtype), backend, index, str(budget))
    )


def __getattr__(name):
    # `tilemm.dask` without importing it first (it imports Dask, which plain use does not need).
    if name == "dask":
        import importlib

        return importlib.import_module("tilemm.dask")
    raise AttributeError(f"module 'tilemm' has no attribute {name!r}")


from ._device_arrays import (  # noqa: E402 - the device arrays use the helpers above
    DeviceArray,
    _device_matmul,
    _on_device,
    device_array,
    device_array_like,
    synchronize,
    to_device,
)
