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

DEVICE_VARIABLE: str

def devices() -> list[dict[str, Any]]: ...

class Device:
    backend: str | None
    index: int | None
    route: str
    def __init__(self, backend: str | None = None, index: int | None = None) -> None: ...

#: What the calling thread's last ``matmul`` did: ``route``, ``library_seconds``.
last_call: threading.local

def matmul(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    out: np.ndarray | None = None,
    *,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    kernel: str = "auto",
    device: DeviceLike = None,
    dtype: npt.DTypeLike | None = None,
    axes: list[tuple[int, ...]] | None = None,
) -> np.ndarray: ...

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
