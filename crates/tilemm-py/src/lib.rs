//! tilemm for Python: the extension module `tilemm._tilemm`. The package `tilemm`
//! (`python/tilemm`) gives it numpy's `matmul` semantics (broadcasting, 1-D operands, dtype
//! promotion, `out=`); this module computes one batched product C = α·A·B + β·C on 3-D arrays
//! of any strides with the library's front door ([`tilemm::Gemm`]), the GIL released while the
//! device works.

use numpy::{
    dtype, PyArray3, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyType;
use tilemm::{Backend, Error, ErrorKind, Gemm, KernelChoice};

/// The exception class of the package `tilemm` that stands for `error` (the classes live in
/// the public module, so that an exception raised on a Dask worker unpickles to the same class).
fn class_of(error: &Error) -> &'static str {
    // Every kind, no wildcard: a kind added to the library must be given a class here.
    match error.kind() {
        ErrorKind::Shape => "ShapeError",
        ErrorKind::DType => "DTypeError",
        ErrorKind::Argument => "ArgumentError",
        ErrorKind::Unavailable => "UnavailableError",
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        // Python's own interrupt (KeyboardInterrupt) is raised by the signal check that
        // stopped the product; this is the product's side of it.
        ErrorKind::Interrupted => "TilemmError",
    }
}

/// `message` as an exception of the package's class `class`.
fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let found = py
        .import("tilemm")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match found {
        Ok(class) => PyErr::from_type(class, message),
        Err(e) => e,
    }
}

fn to_py(py: Python<'_>, error: Error) -> PyErr {
    raise(py, class_of(&error), tilemm::one_line(&error.to_string()))
}

/// A Python argument parsed as the CLI parses it (kernel, backend, dtype), refused as an
/// `ArgumentError` that names it.
fn parsed<T: std::str::FromStr<Err = String>>(
    py: Python<'_>,
    name: &str,
    text: &str,
) -> PyResult<T> {
    text.parse()
        .map_err(|e| raise(py, "ArgumentError", format!("{name}={text:?}: {e}")))
}

/// The front door as the caller configured it.
fn configured(
    py: Python<'_>,
    alpha: f64,
    beta: f64,
    kernel: &str,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<Gemm<'static>> {
    let gemm = Gemm::new()
        .kernel(parsed(py, "kernel", kernel)?)
        .alpha(alpha)
        .beta(beta);
    match backend {
        None => Ok(gemm),
        Some(name) => Ok(gemm.device(parsed(py, "device", name)?, index)),
    }
}

/// C = α·A·B + β·C into `out`, for 3-D arrays of input type `I` and output type `O`.
fn write<I, O>(
    py: Python<'_>,
    gemm: Gemm<'static>,
    [a, b, out]: [&Bound<'_, PyAny>; 3],
) -> PyResult<Done>
where
    I: tilemm::Element + numpy::Element,
    O: tilemm::Element + numpy::Element,
{
    let a = a.cast::<PyArray3<I>>()?.readonly();
    let b = b.cast::<PyArray3<I>>()?.readonly();
    let mut out = out.cast::<PyArray3<O>>()?.readwrite();
    let (a, b, c) = (a.as_array(), b.as_array(), out.as_array_mut());
    let work = [a.dim().1, a.dim().2, b.dim().2]
        .iter()
        .fold(a.dim().0.max(b.dim().0), |x, &y| x.saturating_mul(y));
    finish(py, work, move |stop: &(dyn Fn() -> bool + Sync)| {
        gemm.write_batched_until(a, b, c, stop)
    })
}

/// C = α·A·B + β·C into `out` for 3-D complex arrays of parts `T` (complex64: f32,
/// complex128: f64), α and β real.
fn write_complex<T>(
    py: Python<'_>,
    gemm: Gemm<'static>,
    (alpha, beta): (tilemm::Complex<f64>, tilemm::Complex<f64>),
    [a, b, out]: [&Bound<'_, PyAny>; 3],
) -> PyResult<Done>
where
    T: tilemm::complex::ComplexPart,
    tilemm::Complex<T>: numpy::Element,
{
    let a = a.cast::<PyArray3<tilemm::Complex<T>>>()?.readonly();
    let b = b.cast::<PyArray3<tilemm::Complex<T>>>()?.readonly();
    let mut out = out.cast::<PyArray3<tilemm::Complex<T>>>()?.readwrite();
    let (a, b, c) = (a.as_array(), b.as_array(), out.as_array_mut());
    // Four real products of the complex one's size.
    let work = [a.dim().1, a.dim().2, b.dim().2, 4]
        .iter()
        .fold(a.dim().0.max(b.dim().0), |x, &y| x.saturating_mul(y));
    let gemm = gemm.complex().alpha(alpha).beta(beta);
    finish(py, work, move |stop: &(dyn Fn() -> bool + Sync)| {
        gemm.write_batched_until(a, b, c, stop)
    })
}

/// What a product did: its route, the library's time for it (seconds), and the bytes it copied
/// to the device and back.
type Done = (String, f64, u64, u64);

/// Runs `product` (with the GIL released; where it is `work` multiply-adds or more, on a
/// thread of its own that ^C can stop) and returns its route and time.
fn finish<'a, P>(py: Python<'_>, work: usize, product: P) -> PyResult<Done>
where
    P: FnOnce(&(dyn Fn() -> bool + Sync)) -> tilemm::Result<tilemm::GemmRun> + Send + 'a,
{
    let run = if work < INTERRUPTIBLE_WORK {
        py.detach(|| product(&|| false))
    } else {
        match py.detach(|| interruptible(product)) {
            (_, Some(signal)) => return Err(signal),
            (run, None) => run,
        }
    };
    let run = run.map_err(|e| to_py(py, e))?;
    Ok((
        run.route.to_string(),
        run.time.as_secs_f64(),
        run.moved.to_device,
        run.moved.from_device,
    ))
}

/// Products of at least this many multiply-adds (512³) run where ^C can stop them: smaller
/// ones end within tens of milliseconds, and a thread of their own costs tens of microseconds.
const INTERRUPTIBLE_WORK: usize = 1 << 27;

/// The product on a thread of its own while this thread, the caller's, checks Python's signal
/// handlers every 50 ms (^C raises `KeyboardInterrupt` there, in the main thread); a signal's
/// exception stops the product at its next piece ([`Gemm::write_batched_until`]) and is
/// returned once the product's thread has let go of the arrays.
fn interruptible<'a, P>(product: P) -> (tilemm::Result<tilemm::GemmRun>, Option<PyErr>)
where
    P: FnOnce(&(dyn Fn() -> bool + Sync)) -> tilemm::Result<tilemm::GemmRun> + Send + 'a,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let caller = std::thread::current();
    // The product (holding C) is handed to its thread, or taken back here if no thread can
    // start.
    let product = std::sync::Mutex::new(Some(product));
    let take = || product.lock().unwrap_or_else(|e| e.into_inner()).take();
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new().spawn_scoped(s, || {
            let product = take().expect("the product, handed once");
            let run = product(&|| stop.load(Ordering::Relaxed));
            // Said before the thread ends, so that the caller wakes at once.
            done.store(true, Ordering::Release);
            caller.unpark();
            run
        });
        let worker = match worker {
            Ok(worker) => worker,
            // No thread to be had (a process limit): the product runs here, to its end.
            Err(_) => {
                let product = take().expect("the product, not handed");
                return (product(&|| false), None);
            }
        };
        let mut signal = None;
        // (A panic ends the thread without saying so: is_finished covers it.)
        let running = || !done.load(Ordering::Acquire) && !worker.is_finished();
        while running() {
            std::thread::park_timeout(std::time::Duration::from_millis(50));
            if signal.is_none() && running() {
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    stop.store(true, Ordering::Relaxed);
                    signal = Some(e);
                }
            }
        }
        let run = worker.join().unwrap_or_else(|panic| {
            Err(tilemm::Error::Device {
                device: "the CPU".into(),
                reason: tilemm::panic_message(&*panic),
            })
        });
        (run, signal)
    })
}

/// C = α·A·B + β·C for 3-D arrays (a batch along axis 0; a batch of 1 serves every entry) into
/// `out`. A and B share one type (f16, bf16, f32, f64); `out` has theirs, or f32 for f16 and
/// bf16. Returns the route the product took and the library's time for the call (staging,
/// tuning, the product), in seconds.
#[pyfunction]
#[pyo3(signature = (a, b, out, alpha, beta, kernel, backend, index))]
#[allow(clippy::too_many_arguments)]
fn gemm<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    alpha: (f64, f64),
    beta: (f64, f64),
    kernel: &str,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<Done> {
    // (real, imaginary): the package passes real scalars (imaginary 0) to a real product.
    let gemm = configured(py, alpha.0, beta.0, kernel, backend, index)?;
    let (alpha, beta) = (
        tilemm::Complex::new(alpha.0, alpha.1),
        tilemm::Complex::new(beta.0, beta.1),
    );
    let arrays = [a, b, out];
    let c64 = dtype::<tilemm::Complex<f32>>(py);
    let c128 = dtype::<tilemm::Complex<f64>>(py);
    let descr = |x: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyArrayDescr>> {
        Ok(x.cast::<PyUntypedArray>()?.dtype())
    };
    let (input, output) = (descr(a)?, descr(out)?);
    let f16 = dtype::<half::f16>(py);
    let f32 = dtype::<f32>(py);
    let f64 = dtype::<f64>(py);
    let is = |d: &Bound<'py, PyArrayDescr>, t: &Bound<'py, PyArrayDescr>| d.is_equiv_to(t);
    if is(&input, &f16) && is(&output, &f16) {
        write::<half::f16, half::f16>(py, gemm, arrays)
    } else if is(&input, &f16) && is(&output, &f32) {
        write::<half::f16, f32>(py, gemm, arrays)
    } else if is(&input, &f32) && is(&output, &f32) {
        write::<f32, f32>(py, gemm, arrays)
    } else if is(&input, &f64) && is(&output, &f64) {
        write::<f64, f64>(py, gemm, arrays)
    } else if is(&input, &c64) && is(&output, &c64) {
        write_complex::<f32>(py, gemm, (alpha, beta), arrays)
    } else if is(&input, &c128) && is(&output, &c128) {
        write_complex::<f64>(py, gemm, (alpha, beta), arrays)
    } else if [&f16, &f32, &f64, &c64, &c128]
        .iter()
        .all(|t| !is(&input, t))
    {
        // bfloat16 (ml_dtypes', which the package imports before it sends one).
        let bf16 = dtype::<half::bf16>(py);
        if is(&input, &bf16) && is(&output, &bf16) {
            write::<half::bf16, half::bf16>(py, gemm, arrays)
        } else if is(&input, &bf16) && is(&output, &f32) {
            write::<half::bf16, f32>(py, gemm, arrays)
        } else {
            Err(unsupported(py, &input, &output))
        }
    } else {
        Err(unsupported(py, &input, &output))
    }
}

fn unsupported(
    py: Python<'_>,
    input: &Bound<'_, PyArrayDescr>,
    output: &Bound<'_, PyArrayDescr>,
) -> PyErr {
    raise(
        py,
        "DTypeError",
        format!("tilemm computes no product of {input} inputs into {output}"),
    )
}

/// A device as every front end names it (`auto`, `cpu`, `cuda`, `wgpu:1`): its backend
/// (`None` for auto) and index.
#[pyfunction]
fn device_spec(py: Python<'_>, text: &str) -> PyResult<(Option<String>, Option<usize>)> {
    let spec: tilemm::DeviceSpec = parsed(py, "device", text)?;
    let (backend, index) = spec.parts();
    Ok((backend.map(|b| b.to_string()), index))
}

/// The route products take with this device setting, opening the device if this process has
/// not yet (it is opened once and shared by every thread).
#[pyfunction]
#[pyo3(signature = (backend, index))]
fn route(py: Python<'_>, backend: Option<&str>, index: Option<usize>) -> PyResult<String> {
    let gemm = configured(py, 1.0, 0.0, "auto", backend, index)?;
    py.detach(|| gemm.route())
        .map(|r| r.to_string())
        .map_err(|e| to_py(py, e))
}

/// Host memory registered with a device (`tilemm.register`'s guard): released by `release`
/// (the context manager's exit) or when collected.
#[pyclass(name = "Registration", module = "tilemm._tilemm")]
struct Registration {
    guard: std::sync::Mutex<Option<tilemm::Registration>>,
    #[pyo3(get)]
    registered: bool,
    #[pyo3(get)]
    why_not: Option<String>,
    #[pyo3(get)]
    bytes: u64,
}

#[pymethods]
impl Registration {
    /// Unregisters the memory (again: nothing).
    fn release(&self) {
        self.guard.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Registers the host memory spans `(address, bytes)` with the device of this setting (the
/// arrays' byte bounds, which the package computes and keeps alive while registered).
#[pyfunction]
#[pyo3(signature = (spans, backend, index))]
fn register(
    py: Python<'_>,
    spans: Vec<(usize, usize)>,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<Registration> {
    let gemm = configured(py, 1.0, 0.0, "auto", backend, index)?;
    let guard = py
        .detach(|| {
            // SAFETY: each span is the byte range of a numpy array the caller holds (and
            // keeps for the registration's life); the bytes are not read here, only handed
            // to the driver.
            let arrays: Vec<&[u8]> = spans
                .iter()
                .map(|&(at, len)| unsafe { std::slice::from_raw_parts(at as *const u8, len) })
                .collect();
            gemm.register(&arrays)
        })
        .map_err(|e| to_py(py, e))?;
    Ok(Registration {
        registered: guard.is_registered(),
        why_not: guard.why_not().map(str::to_owned),
        bytes: guard.bytes(),
        guard: std::sync::Mutex::new(Some(guard)),
    })
}

/// The GPU devices of every backend built, as JSON (a list of `tilemm devices --json`'s
/// device entries, each with its backend).
#[pyfunction]
fn devices_json(py: Python<'_>) -> PyResult<String> {
    let found: Vec<serde_json::Value> = py.detach(|| {
        Backend::GPU
            .into_iter()
            .filter(|b| b.is_built())
            .flat_map(|b| {
                tilemm::runtime::backend::list_devices(b)
                    .into_iter()
                    .map(move |d| serde_json::json!({ "backend": b, "device": d }))
            })
            .collect()
    });
    serde_json::to_string(&found).map_err(|e| raise(py, "TilemmError", e.to_string()))
}

/// C = A·B, M×K×N, row-major, in `dtype` (as `tilemm run -m M -k K -n N` makes it).
fn plain_problem(
    m: usize,
    k: usize,
    n: usize,
    dtype: tilemm::DType,
) -> tilemm::Result<tilemm::Problem> {
    tilemm::Shape {
        precision: tilemm::Precision::of(dtype),
        ..tilemm::Shape::new(m, k, n)
    }
    .problem()
}

/// Tunes the shape class of an M×K×N product in `dtype` on a device (as `tilemm tune` does,
/// into the same cache) within `budget`, and returns the tuner's report as JSON. The device is
/// the process's session, shared with `matmul`; a class this process has already computed
/// keeps its kernel for the process (its bits do not change), later processes take the new
/// choice.
#[pyfunction]
#[pyo3(signature = (m, k, n, dtype, backend, index, budget))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    m: usize,
    k: usize,
    n: usize,
    dtype: &str,
    backend: Option<&str>,
    index: Option<usize>,
    budget: &str,
) -> PyResult<String> {
    let dtype: tilemm::DType = parsed(py, "dtype", dtype)?;
    let budget: tilemm::tune::TuneBudget = parsed(py, "budget", budget)?;
    let spec = match backend {
        Some(name) => {
            let backend = parsed::<Backend>(py, "device", name)?;
            tilemm::DeviceSpec::of(backend, index)
                .map_err(|e| raise(py, "ArgumentError", format!("device={name:?}: {e}")))?
        }
        None => {
            tilemm::Settings::global()
                .usable()
                .map_err(|e| to_py(py, e))?
                .device
        }
    };
    if spec == tilemm::DeviceSpec::Cpu {
        return Err(raise(
            py,
            "ArgumentError",
            "tune needs a GPU device: the CPU path has nothing to tune".into(),
        ));
    }
    let session = tilemm::dispatch::sessions::session_for(spec)
        .map_err(|e| to_py(py, e))?
        .map_err(|why| {
            raise(
                py,
                "UnavailableError",
                format!("no GPU device to tune: {why}"),
            )
        })?;
    let report = py
        .detach(|| {
            let problem = plain_problem(m, k, n, dtype)?;
            let options = tilemm::tune::TuneOptions {
                budget,
                ..tilemm::tune::TuneOptions::default()
            };
            tilemm::tune::choose(session, &problem, &options)
        })
        .map_err(|e| to_py(py, e))?;
    serde_json::to_string(&report).map_err(|e| raise(py, "TilemmError", e.to_string()))
}

/// The example's experiment, as `tilemm run -m M -k K -n N` runs it on random inputs: the 1st
/// GPU run (JIT compilation included) with its parts, the 2nd, the CPU, and the check against
/// the f64 reference. Returns the report as JSON (`tilemm run --json`) and as text.
#[pyfunction]
#[pyo3(signature = (m, k, n, dtype, kernel, backend, index, seed))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    m: usize,
    k: usize,
    n: usize,
    dtype: &str,
    kernel: &str,
    backend: Option<&str>,
    index: Option<usize>,
    seed: u64,
) -> PyResult<(String, String)> {
    use tilemm_lab::inputs::{self, Source};
    use tilemm_lab::measure::run::{RunOptions, Runner};
    let dtype: tilemm::DType = parsed(py, "dtype", dtype)?;
    let kernel: KernelChoice = parsed(py, "kernel", kernel)?;
    let (backend, index) = match backend {
        Some(name) => (Some(parsed::<Backend>(py, "backend", name)?), index),
        // As `tilemm run`: TILEMM_DEVICE, else the best device.
        None => tilemm::Settings::global()
            .usable()
            .map_err(|e| to_py(py, e))?
            .device
            .parts(),
    };
    let options = RunOptions {
        backend,
        device: index,
        kernel,
        tune: tilemm::tune::TuneOptions {
            budget: tilemm::Settings::global().tune_budget,
            ..tilemm::tune::TuneOptions::default()
        },
    };
    let report = py
        .detach(|| {
            let problem = plain_problem(m, k, n, dtype)?;
            let runner = Runner::new(&problem, &options)?;
            let operands = inputs::random_operands(&problem, seed)?;
            runner.run(&operands, Source::Random { seed })
        })
        .map_err(|e| to_py(py, e))?
        .report;
    let json =
        serde_json::to_string(&report).map_err(|e| raise(py, "TilemmError", e.to_string()))?;
    Ok((json, report.to_string()))
}

/// A device array of one of the types device arrays hold.
enum Typed {
    F16(tilemm::DeviceArray<'static, half::f16>),
    BF16(tilemm::DeviceArray<'static, half::bf16>),
    F32(tilemm::DeviceArray<'static, f32>),
    F64(tilemm::DeviceArray<'static, f64>),
}

macro_rules! with_typed {
    ($typed:expr, $x:ident => $body:expr) => {
        match $typed {
            Typed::F16($x) => $body,
            Typed::BF16($x) => $body,
            Typed::F32($x) => $body,
            Typed::F64($x) => $body,
        }
    };
}

impl Typed {
    fn session(&self) -> &'static tilemm::GpuSession {
        with_typed!(self, x => x.session())
    }
}

/// A device buffer (`tilemm.DeviceArray`'s memory; the package keeps each view's shape, strides
/// and offset): freed by `free` or when no view holds it.
#[pyclass(name = "DeviceBuffer", module = "tilemm._tilemm", frozen)]
struct DeviceBuffer {
    inner: std::sync::RwLock<Option<Typed>>,
    /// numpy's name of its dtype.
    #[pyo3(get)]
    dtype: &'static str,
    /// Elements it holds.
    #[pyo3(get)]
    len: usize,
    /// Its device: backend, index, name.
    #[pyo3(get)]
    backend: String,
    #[pyo3(get)]
    index: usize,
    #[pyo3(get)]
    device: String,
}

impl DeviceBuffer {
    fn new(typed: Typed) -> Self {
        let gpu = typed.session();
        let (dtype, len) = match &typed {
            Typed::F16(x) => ("float16", x.buffer_len()),
            Typed::BF16(x) => ("bfloat16", x.buffer_len()),
            Typed::F32(x) => ("float32", x.buffer_len()),
            Typed::F64(x) => ("float64", x.buffer_len()),
        };
        DeviceBuffer {
            inner: std::sync::RwLock::new(Some(typed)),
            dtype,
            len,
            backend: gpu.backend().to_string(),
            index: gpu.info().index,
            device: gpu.info().name.clone(),
        }
    }

    /// The buffer, or the error a freed one raises.
    fn typed(&self, py: Python<'_>) -> PyResult<std::sync::RwLockReadGuard<'_, Option<Typed>>> {
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            return Err(raise(
                py,
                "FreedArrayError",
                "this device array was freed (DeviceArray.free): it has no memory left to use"
                    .into(),
            ));
        }
        Ok(guard)
    }
}

#[pymethods]
impl DeviceBuffer {
    /// Gives the memory back now (every view of it then refuses to be used).
    fn free(&self) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Whether it was freed.
    #[getter]
    fn freed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Elements `start..stop` back on the host, as a new 1-D numpy array (waits for the
    /// products that write them).
    fn read<'py>(&self, py: Python<'py>, start: usize, stop: usize) -> PyResult<Bound<'py, PyAny>> {
        let guard = self.typed(py)?;
        let typed = guard.as_ref().expect("checked");
        fn span<'py, T: tilemm::Element + numpy::Element>(
            py: Python<'py>,
            x: &tilemm::DeviceArray<'static, T>,
            start: usize,
            stop: usize,
        ) -> PyResult<Bound<'py, PyAny>> {
            let desc = tilemm::MatrixDesc::row_major(1, stop.saturating_sub(start));
            let view = x
                .view(
                    1,
                    tilemm::MatrixDesc {
                        offset: start,
                        ..desc
                    },
                )
                .map_err(|e| to_py(py, e))?;
            let data = py.detach(|| view.to_host()).map_err(|e| to_py(py, e))?;
            let flat = data.into_shape_with_order(stop - start).expect("one row");
            Ok(numpy::PyArray1::from_owned_array(py, flat).into_any())
        }
        with_typed!(typed, x => span(py, x, start, stop))
    }

    /// The device address of its first element (CUDA, HIP), once queued products finished.
    fn pointer(&self, py: Python<'_>) -> PyResult<u64> {
        let guard = self.typed(py)?;
        let typed = guard.as_ref().expect("checked");
        py.detach(|| with_typed!(typed, x => x.device_pointer()))
            .map_err(|e| to_py(py, e))
    }

    /// Whether `other` lives on the same device.
    fn same_device(&self, other: &DeviceBuffer) -> bool {
        (&self.backend, self.index) == (&other.backend, other.index)
    }

    /// A DLPack capsule ("dltensor", DLManagedTensor) of the view at `offset` (elements) with
    /// `shape` and `strides` (elements), keeping `owner` (the DeviceArray) alive until the
    /// consumer lets go.
    fn dlpack<'py>(
        &self,
        py: Python<'py>,
        owner: Py<PyAny>,
        offset: usize,
        shape: Vec<i64>,
        strides: Vec<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let device_type = match self.backend.as_str() {
            "cuda" => dlpack::CUDA,
            "hip" => dlpack::ROCM,
            other => {
                return Err(PyErr::new::<pyo3::exceptions::PyBufferError, _>(format!(
                    "DLPack exports CUDA and HIP device arrays; this one lives on {other}"
                )))
            }
        };
        let base = self.pointer(py)?;
        let size = match self.dtype {
            "float16" | "bfloat16" => 2,
            "float32" => 4,
            _ => 8,
        };
        let code = match self.dtype {
            "bfloat16" => dlpack::BFLOAT,
            _ => dlpack::FLOAT,
        };
        dlpack::capsule(
            py,
            dlpack::Export {
                data: base + (offset * size) as u64,
                device: (device_type, self.index as i32),
                dtype: (code, (size * 8) as u8),
                shape,
                strides,
                owner,
            },
        )
    }
}

/// DLPack's C structures (v0.8, the unversioned `dltensor` capsule every consumer reads).
mod dlpack {
    use pyo3::ffi;
    use pyo3::prelude::*;
    use std::ffi::{c_void, CStr};

    pub const CUDA: i32 = 2;
    pub const ROCM: i32 = 10;
    pub const FLOAT: u8 = 2;
    pub const BFLOAT: u8 = 4;

    #[repr(C)]
    struct DLDevice {
        device_type: i32,
        device_id: i32,
    }

    #[repr(C)]
    struct DLDataType {
        code: u8,
        bits: u8,
        lanes: u16,
    }

    #[repr(C)]
    struct DLTensor {
        data: *mut c_void,
        device: DLDevice,
        ndim: i32,
        dtype: DLDataType,
        shape: *mut i64,
        strides: *mut i64,
        byte_offset: u64,
    }

    #[repr(C)]
    struct DLManagedTensor {
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
    }

    /// What a capsule hands over.
    pub struct Export {
        pub data: u64,
        pub device: (i32, i32),
        pub dtype: (u8, u8),
        pub shape: Vec<i64>,
        pub strides: Vec<i64>,
        /// Kept, not read: the array stays alive while the consumer holds its memory.
        #[allow(dead_code)]
        pub owner: Py<PyAny>,
    }

    const NAME: &CStr = c"dltensor";

    /// Frees the tensor and lets go of its owner (called by the consumer when done, or by the
    /// capsule's destructor if nobody consumed it).
    unsafe extern "C" fn deleter(tensor: *mut DLManagedTensor) {
        if tensor.is_null() {
            return;
        }
        // SAFETY: made by `capsule` below from these boxes, deleted once.
        let tensor = unsafe { Box::from_raw(tensor) };
        let export = unsafe { Box::from_raw(tensor.manager_ctx as *mut Export) };
        Python::attach(|_| drop(export));
    }

    unsafe extern "C" fn destructor(capsule: *mut ffi::PyObject) {
        // A consumed capsule is renamed "used_dltensor": its consumer calls the deleter.
        // SAFETY: `capsule` is the capsule being destroyed.
        unsafe {
            if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
                let tensor = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr());
                deleter(tensor as *mut DLManagedTensor);
            }
        }
    }

    /// What another library's `dltensor` capsule describes.
    pub struct Imported {
        /// Address of element 0 (byte offset included).
        pub data: u64,
        /// (device type, device id).
        pub device: (i32, i32),
        /// (type code, bits, lanes).
        pub dtype: (u8, u8, u16),
        pub shape: Vec<i64>,
        /// In elements; `None`: C order.
        pub strides: Option<Vec<i64>>,
    }

    /// Reads an unconsumed `dltensor` capsule; [`consume`] then takes it over.
    pub fn read(capsule: &Bound<'_, PyAny>) -> PyResult<Imported> {
        // SAFETY: the capsule is checked for its name before its pointer is read; a valid
        // `dltensor` capsule holds a DLManagedTensor its producer keeps alive until the
        // deleter is called.
        unsafe {
            let ptr = capsule.as_ptr();
            if ffi::PyCapsule_IsValid(ptr, NAME.as_ptr()) != 1 {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "not an unconsumed DLPack capsule (\"dltensor\")",
                ));
            }
            let tensor = ffi::PyCapsule_GetPointer(ptr, NAME.as_ptr()) as *const DLManagedTensor;
            let t = &(*tensor).dl_tensor;
            let ndim = t.ndim.max(0) as usize;
            let shape = if ndim == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(t.shape, ndim).to_vec()
            };
            let strides = (!t.strides.is_null() && ndim > 0)
                .then(|| std::slice::from_raw_parts(t.strides, ndim).to_vec());
            Ok(Imported {
                data: t.data as u64 + t.byte_offset,
                device: (t.device.device_type, t.device.device_id),
                dtype: (t.dtype.code, t.dtype.bits, t.dtype.lanes),
                shape,
                strides,
            })
        }
    }

    /// Marks the capsule consumed ("used_dltensor") and hands the tensor back to its producer.
    pub fn consume(capsule: &Bound<'_, PyAny>) {
        // SAFETY: called once, after `read` found the capsule valid and its memory was copied.
        unsafe {
            let ptr = capsule.as_ptr();
            if ffi::PyCapsule_IsValid(ptr, NAME.as_ptr()) != 1 {
                return;
            }
            let tensor = ffi::PyCapsule_GetPointer(ptr, NAME.as_ptr()) as *mut DLManagedTensor;
            if ffi::PyCapsule_SetName(ptr, c"used_dltensor".as_ptr()) != 0 {
                ffi::PyErr_Clear();
                return;
            }
            if let Some(delete) = (*tensor).deleter {
                delete(tensor);
            }
        }
    }

    pub fn capsule(py: Python<'_>, export: Export) -> PyResult<Bound<'_, PyAny>> {
        let mut export = Box::new(export);
        let tensor = Box::new(DLManagedTensor {
            dl_tensor: DLTensor {
                data: export.data as *mut c_void,
                device: DLDevice {
                    device_type: export.device.0,
                    device_id: export.device.1,
                },
                ndim: export.shape.len() as i32,
                dtype: DLDataType {
                    code: export.dtype.0,
                    bits: export.dtype.1,
                    lanes: 1,
                },
                shape: export.shape.as_mut_ptr(),
                strides: export.strides.as_mut_ptr(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        });
        let tensor = Box::into_raw(tensor);
        // SAFETY: `tensor` was just made; its shape and strides live in `export`, which the
        // tensor owns from here (moving the box does not move the vectors' buffers).
        unsafe {
            (*tensor).manager_ctx = Box::into_raw(export) as *mut c_void;
            let capsule =
                ffi::PyCapsule_New(tensor as *mut c_void, NAME.as_ptr(), Some(destructor));
            if capsule.is_null() {
                deleter(tensor);
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, capsule))
        }
    }
}

/// A 3-D view of a device buffer, as the package describes it: (buffer, offset, (batch, rows,
/// columns), (batch, row, column) strides), in elements.
type ViewArgs<'py> = (
    Bound<'py, DeviceBuffer>,
    usize,
    (usize, usize, usize),
    (usize, usize, usize),
);

fn viewed<T: tilemm::Element>(
    py: Python<'_>,
    whole: &tilemm::DeviceArray<'static, T>,
    (_, offset, (batch, rows, cols), (sb, sr, sc)): &ViewArgs<'_>,
) -> PyResult<tilemm::DeviceArray<'static, T>> {
    let desc = tilemm::MatrixDesc {
        rows: *rows,
        cols: *cols,
        row_stride: *sr,
        col_stride: *sc,
        offset: *offset,
        batch_stride: *sb,
    };
    whole.view(*batch, desc).map_err(|e| to_py(py, e))
}

/// C = α·A·B + β·C on device arrays (3-D views of device buffers), enqueued on their device.
/// Returns the route and the library's time for the call.
#[pyfunction]
#[pyo3(signature = (a, b, c, alpha, beta, kernel))]
fn device_gemm(
    py: Python<'_>,
    a: ViewArgs<'_>,
    b: ViewArgs<'_>,
    c: ViewArgs<'_>,
    alpha: f64,
    beta: f64,
    kernel: &str,
) -> PyResult<Done> {
    let gemm = configured(py, alpha, beta, kernel, None, None)?;
    let (ga, gb, gc) = (
        a.0.get().typed(py)?,
        b.0.get().typed(py)?,
        c.0.get().typed(py)?,
    );
    let (ta, tb, tc) = (
        ga.as_ref().expect("checked"),
        gb.as_ref().expect("checked"),
        gc.as_ref().expect("checked"),
    );
    macro_rules! go {
        ($x:ident, $y:ident, $z:ident) => {{
            let (x, y, z) = (
                viewed(py, $x, &a)?,
                viewed(py, $y, &b)?,
                viewed(py, $z, &c)?,
            );
            py.detach(|| gemm.write_device(&x, &y, &z))
        }};
    }
    let run = match (ta, tb, tc) {
        (Typed::F16(x), Typed::F16(y), Typed::F16(z)) => go!(x, y, z),
        (Typed::F16(x), Typed::F16(y), Typed::F32(z)) => go!(x, y, z),
        (Typed::BF16(x), Typed::BF16(y), Typed::BF16(z)) => go!(x, y, z),
        (Typed::BF16(x), Typed::BF16(y), Typed::F32(z)) => go!(x, y, z),
        (Typed::F32(x), Typed::F32(y), Typed::F32(z)) => go!(x, y, z),
        (Typed::F64(x), Typed::F64(y), Typed::F64(z)) => go!(x, y, z),
        _ => {
            return Err(raise(
                py,
                "DTypeError",
                format!(
                    "tilemm computes no product of {} and {} device arrays into {}: device \
                     arrays are not cast (cast on the host, then to_device)",
                    a.0.get().dtype,
                    b.0.get().dtype,
                    c.0.get().dtype
                ),
            ))
        }
    };
    let run = run.map_err(|e| to_py(py, e))?;
    Ok((
        run.route.to_string(),
        run.time.as_secs_f64(),
        run.moved.to_device,
        run.moved.from_device,
    ))
}

/// The front door for device arrays on the device named (`None`: `TILEMM_DEVICE`, else the
/// best GPU, CPU emulations included).
fn device_gemm_for(
    py: Python<'_>,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<Gemm<'static>> {
    configured(py, 1.0, 0.0, "auto", backend, index)
}

/// A contiguous numpy array's elements (in memory order) copied to a new device buffer.
#[pyfunction]
#[pyo3(signature = (array, backend, index))]
fn to_device(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<DeviceBuffer> {
    let gemm = device_gemm_for(py, backend, index)?;
    fn up<T: tilemm::Element + numpy::Element>(
        py: Python<'_>,
        gemm: Gemm<'static>,
        array: &Bound<'_, PyAny>,
    ) -> PyResult<tilemm::DeviceArray<'static, T>> {
        let array = array.cast::<numpy::PyArray1<T>>()?.readonly();
        let view = array.as_array();
        let view = view
            .insert_axis(ndarray::Axis(0))
            .insert_axis(ndarray::Axis(0));
        py.detach(|| gemm.to_device(view)).map_err(|e| to_py(py, e))
    }
    let descr = array.cast::<PyUntypedArray>()?.dtype();
    let typed = if descr.is_equiv_to(&dtype::<half::f16>(py)) {
        Typed::F16(up(py, gemm, array)?)
    } else if descr.is_equiv_to(&dtype::<f32>(py)) {
        Typed::F32(up(py, gemm, array)?)
    } else if descr.is_equiv_to(&dtype::<f64>(py)) {
        Typed::F64(up(py, gemm, array)?)
    } else if descr.is_equiv_to(&dtype::<half::bf16>(py)) {
        Typed::BF16(up(py, gemm, array)?)
    } else {
        return Err(no_device_dtype(py, &descr.to_string()));
    };
    Ok(DeviceBuffer::new(typed))
}

fn no_device_dtype(py: Python<'_>, dtype: &str) -> PyErr {
    raise(
        py,
        "DTypeError",
        format!(
            "device arrays hold float16, bfloat16, float32 and float64, not {dtype} (integer, \
             bool and complex products run on host arrays)"
        ),
    )
}

/// A new device buffer of the dtype numpy names `$dtype`, made (with the GIL released) by
/// `$make`, in which `$t` is that dtype's element type; or the error of a dtype device arrays
/// do not hold.
macro_rules! buffer_of {
    ($py:expr, $dtype:expr, $t:ident => $make:expr) => {{
        let typed = $py.detach(|| -> tilemm::Result<Option<Typed>> {
            Ok(Some(match $dtype {
                "float16" => {
                    type $t = half::f16;
                    Typed::F16($make?)
                }
                "bfloat16" => {
                    type $t = half::bf16;
                    Typed::BF16($make?)
                }
                "float32" => {
                    type $t = f32;
                    Typed::F32($make?)
                }
                "float64" => {
                    type $t = f64;
                    Typed::F64($make?)
                }
                _ => return Ok(None),
            }))
        });
        match typed.map_err(|e| to_py($py, e))? {
            Some(typed) => Ok(DeviceBuffer::new(typed)),
            None => Err(no_device_dtype($py, $dtype)),
        }
    }};
}

/// A new uninitialised device buffer of `len` elements of `dtype` (numpy's name).
#[pyfunction]
#[pyo3(signature = (dtype, len, backend, index))]
fn device_empty(
    py: Python<'_>,
    dtype: &str,
    len: usize,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<DeviceBuffer> {
    let gemm = device_gemm_for(py, backend, index)?;
    buffer_of!(py, dtype, T => gemm.device_empty::<T>((1, 1, len)))
}

/// A new device buffer of `len` elements of `dtype` copied from another library's device memory
/// at `address` (ready once `stream` has finished), on the device named.
#[pyfunction]
#[pyo3(signature = (address, dtype, len, stream, backend, index))]
fn from_device_pointer(
    py: Python<'_>,
    address: u64,
    dtype: &str,
    len: usize,
    stream: Option<u64>,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<DeviceBuffer> {
    let gemm = device_gemm_for(py, backend, index)?;
    let gpu = py
        .detach(|| gemm.device_session())
        .map_err(|e| to_py(py, e))?;
    // SAFETY: the package passes the address and element count another library's array
    // interface gave for memory on this device, which that array keeps alive meanwhile.
    buffer_of!(py, dtype, T => unsafe {
        tilemm::DeviceArray::<T>::from_device_pointer(gpu, address, len, stream)
    })
}

/// A new device buffer copied from another library's DLPack capsule (CUDA or HIP memory, made
/// ready by its producer for the legacy default stream), on the device named; the capsule is
/// consumed. Returns the buffer with the view's shape and strides (elements).
#[pyfunction]
#[pyo3(signature = (capsule, backend, index))]
fn from_dlpack(
    py: Python<'_>,
    capsule: &Bound<'_, PyAny>,
    backend: Option<&str>,
    index: Option<usize>,
) -> PyResult<(DeviceBuffer, Vec<usize>, Vec<usize>)> {
    let t = dlpack::read(capsule)?;
    let argument = |m: String| raise(py, "ArgumentError", m);
    if t.device.0 != dlpack::CUDA && t.device.0 != dlpack::ROCM {
        return Err(argument(format!(
            "a DLPack array on device type {} is not GPU memory tilemm can copy (CUDA 2, ROCm \
             10); host arrays go through numpy",
            t.device.0
        )));
    }
    let dtype = match t.dtype {
        (dlpack::FLOAT, 16, 1) => "float16",
        (dlpack::FLOAT, 32, 1) => "float32",
        (dlpack::FLOAT, 64, 1) => "float64",
        (dlpack::BFLOAT, 16, 1) => "bfloat16",
        (code, bits, lanes) => {
            return Err(no_device_dtype(
                py,
                &format!("DLPack type code {code}, {bits} bits, {lanes} lanes"),
            ))
        }
    };
    let shape: Vec<usize> = t.shape.iter().map(|&n| n.max(0) as usize).collect();
    let strides: Vec<usize> = match &t.strides {
        Some(strides) if strides.iter().any(|&s| s < 0) => {
            return Err(argument(format!(
                "a DLPack array with strides {strides:?} (negative) is not taken: copy it to a \
                 contiguous one first"
            )))
        }
        Some(strides) => strides.iter().map(|&s| s as usize).collect(),
        None => {
            let mut strides = vec![0; shape.len()];
            let mut step = 1;
            for (s, n) in strides.iter_mut().zip(&shape).rev() {
                *s = step;
                step *= n;
            }
            strides
        }
    };
    let span = if shape.contains(&0) {
        0
    } else {
        1 + shape
            .iter()
            .zip(&strides)
            .map(|(n, s)| (n - 1) * s)
            .sum::<usize>()
    };
    let buffer = from_device_pointer(py, t.data, dtype, span.max(1), None, backend, index)?;
    dlpack::consume(capsule);
    Ok((buffer, shape, strides))
}

/// Waits until the device named has finished every product queued on it.
#[pyfunction]
#[pyo3(signature = (backend, index))]
fn synchronize(py: Python<'_>, backend: Option<&str>, index: Option<usize>) -> PyResult<()> {
    let gemm = device_gemm_for(py, backend, index)?;
    py.detach(|| gemm.device_session()?.sync())
        .map_err(|e| to_py(py, e))
}

#[pymodule]
fn _tilemm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_class::<DeviceBuffer>()?;
    m.add_function(wrap_pyfunction!(to_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_empty, m)?)?;
    m.add_function(wrap_pyfunction!(from_device_pointer, m)?)?;
    m.add_function(wrap_pyfunction!(device_gemm, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(gemm, m)?)?;
    m.add_function(wrap_pyfunction!(route, m)?)?;
    m.add_function(wrap_pyfunction!(register, m)?)?;
    m.add_class::<Registration>()?;
    m.add_function(wrap_pyfunction!(devices_json, m)?)?;
    m.add_function(wrap_pyfunction!(device_spec, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    Ok(())
}
