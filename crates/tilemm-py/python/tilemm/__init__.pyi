# Type stub of the tilemm package (PEP 561: the package ships py.typed).
import threading
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt

__version__: str

DeviceLike = Union[None, str, "Device"]
Budget = Union[Literal["none", "auto", "full"], float, int, str]

class TilemmError(Exception): ...
class ShapeError(TilemmError, ValueError): ...
class DTypeError(TilemmError, TypeError): ...
class ArgumentError(TilemmError, ValueError): ...
class UnavailableError(TilemmError, RuntimeError): ...
class OutOfMemoryError(TilemmError, MemoryError): ...
class MaskedArrayError(TilemmError, TypeError): ...
class FreedArrayError(TilemmError, ValueError): ...

DEVICE_VARIABLE: str

def devices() -> list[dict[str, Any]]: ...

class Device:
    backend: str | None
    index: int | None
    route: str
    def __init__(self, backend: str | None = None, index: int | None = None) -> None: ...

#: What the calling thread's last ``matmul`` did: ``route``, ``library_seconds``,
#: ``bytes_to_device``, ``bytes_from_device``.
last_call: threading.local

class DeviceArray:
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    ndim: int
    size: int
    itemsize: int
    nbytes: int
    strides: tuple[int, ...]
    @property
    def device(self) -> Device: ...
    @property
    def T(self) -> DeviceArray: ...
    def transpose(self, *axes: int) -> DeviceArray: ...
    def __getitem__(self, key: Any) -> DeviceArray: ...
    def __len__(self) -> int: ...
    def is_c_contiguous(self) -> bool: ...
    def is_f_contiguous(self) -> bool: ...
    def copy_to_host(self, ary: np.ndarray | None = None, stream: int = 0) -> np.ndarray: ...
    def free(self) -> None: ...
    def __matmul__(self, other: Any) -> DeviceArray: ...
    def __rmatmul__(self, other: Any) -> DeviceArray: ...
    def __imatmul__(self, other: Any) -> DeviceArray: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    def __dlpack__(
        self,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

def to_device(ary: Any, device: DeviceLike = None, copy: bool = True) -> DeviceArray: ...
def device_array(
    shape: int | tuple[int, ...],
    dtype: npt.DTypeLike = np.float64,
    strides: None = None,
    order: Literal["C", "F"] = "C",
    stream: int = 0,
    device: DeviceLike = None,
) -> DeviceArray: ...
def device_array_like(ary: Any, stream: int = 0, device: DeviceLike = None) -> DeviceArray: ...
def synchronize(device: DeviceLike = None) -> None: ...

def matmul(
    a: Any,
    b: Any,
    out: np.ndarray | DeviceArray | None = None,
    *,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    kernel: str = "auto",
    device: DeviceLike = None,
    dtype: npt.DTypeLike | None = None,
    axes: list[tuple[int, ...]] | None = None,
    casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"] = "same_kind",
    order: Literal["K", "A", "C", "F"] = "K",
    subok: bool = True,
) -> Any: ...

class register:
    arrays: tuple[np.ndarray, ...]
    registered: bool
    why_not: str | None
    bytes: int
    def __init__(self, *arrays: np.ndarray, device: DeviceLike = None) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> register: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

class RunReport:
    passed: bool
    def to_dict(self) -> dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any: ...

def run(
    m: int = 256,
    k: int | None = None,
    n: int | None = None,
    *,
    dtype: npt.DTypeLike | str = "float32",
    kernel: str = "auto",
    backend: str | None = None,
    seed: int = 0,
) -> RunReport: ...

def tune(
    m: int,
    k: int | None = None,
    n: int | None = None,
    *,
    dtype: npt.DTypeLike | str = "float32",
    device: DeviceLike = None,
    budget: Budget = "full",
) -> dict[str, Any]: ...
