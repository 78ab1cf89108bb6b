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
) -> PyResult<(String, f64)>
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
) -> PyResult<(String, f64)>
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

/// Runs `product` (with the GIL released; where it is `work` multiply-adds or more, on a
/// thread of its own that ^C can stop) and returns its route and time.
fn finish<'a, P>(py: Python<'_>, work: usize, product: P) -> PyResult<(String, f64)>
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
    Ok((run.route.to_string(), run.time.as_secs_f64()))
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
) -> PyResult<(String, f64)> {
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

#[pymodule]
fn _tilemm(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
