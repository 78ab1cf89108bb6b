//! Where a call goes: the setting (`TILEMM_BLAS`), the routes this process has, the model's
//! choice, the fallback when the device fails, and the log (`TILEMM_BLAS_LOG`).

use std::cell::Cell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use tilemm::dispatch::{self, DeviceSpec};
use tilemm::{Backend, DeviceKind, GpuSession};

use crate::call::{Call, Op, Real, Work};
use crate::symbols;
use tilemm::dispatch::model::{Candidate, Choice, Model};

/// `TILEMM_BLAS`: which route calls take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The fastest by the model (the default).
    Auto,
    /// tilemm's kernels on the GPU (on a failure, the CPU for that call).
    Gpu,
    /// tilemm's CPU path.
    Cpu,
    /// The BLAS underneath, as if this library were not there.
    Off,
}

impl Mode {
    fn parse(text: &str) -> Result<Mode, String> {
        match text.trim() {
            "" | "auto" => Ok(Mode::Auto),
            "gpu" => Ok(Mode::Gpu),
            "cpu" => Ok(Mode::Cpu),
            "off" => Ok(Mode::Off),
            other => Err(format!(
                "TILEMM_BLAS={other:?} is not auto, gpu, cpu or off; every call goes to the BLAS \
                 underneath"
            )),
        }
    }
}

/// The routes a call can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// tilemm's kernels on the GPU session.
    Gpu,
    /// tilemm's CPU path.
    Cpu,
    /// The BLAS underneath.
    Blas,
}

impl Route {
    /// Whether this process has run the route before (and marks it run).
    fn warm(self) -> bool {
        use std::sync::atomic::{AtomicBool, Ordering};
        static RUN: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
        RUN[self as usize].swap(true, Ordering::Relaxed)
    }

    fn name(self) -> &'static str {
        match self {
            Route::Gpu => "gpu",
            Route::Cpu => "cpu",
            Route::Blas => "blas",
        }
    }
}

/// The BLAS's own settings, read once; the device and the tuning budget are every front
/// end's ([`dispatch::Settings::global`]).
struct Settings {
    /// The process that read them: a child forked from it has none of its threads.
    pid: u32,
    mode: Mode,
    log: Option<Mutex<File>>,
}

fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let mut problems = Vec::new();
        let mode =
            Mode::parse(&std::env::var("TILEMM_BLAS").unwrap_or_default()).unwrap_or_else(|e| {
                problems.push(e);
                Mode::Off
            });
        let log = std::env::var_os("TILEMM_BLAS_LOG")
            .filter(|p| !p.is_empty())
            .and_then(|path| match open_log(std::path::Path::new(&path)) {
                Ok(file) => Some(Mutex::new(file)),
                Err(e) => {
                    problems.push(format!(
                        "TILEMM_BLAS_LOG={}: {e}; no log is written",
                        path.to_string_lossy()
                    ));
                    None
                }
            });
        // The host program's stderr: one line for each setting that could not be used (the
        // defaults are used instead; a stderr that cannot take it costs the line, never the
        // program).
        problems.extend(
            dispatch::Settings::global()
                .unusable
                .iter()
                .map(|u| u.to_string()),
        );
        for problem in &problems {
            let _ = writeln!(std::io::stderr(), "tilemm-blas: {problem}");
        }
        Settings {
            pid: std::process::id(),
            mode,
            log,
        }
    })
}

/// Whether this process is a child forked after this library started working in its parent:
/// tilemm's CPU threads (rayon's pool) and device stay with the parent, and a product sent to
/// them would wait forever, so a forked child's calls go to the BLAS underneath.
fn forked() -> bool {
    settings().pid != std::process::id()
}

/// The log, appended to: a regular file (created if absent), a FIFO with a reader, or a
/// terminal or other character device (`/dev/stderr`); opened without blocking, so that a FIFO
/// with no reader is an error and not a hang.
fn open_log(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => std::io::Error::other("a FIFO with no reader"),
            _ => e,
        })?;
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::other("a directory"));
    }
    // Opened, the log may block like any file: a line to a pipe that is full waits for its
    // reader rather than being lost.
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Writes one line to the log, if there is one.
pub(crate) fn log(line: impl FnOnce() -> String) {
    if let Some(file) = &settings().log {
        let mut line = line();
        line.push('\n');
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        // A log that cannot take a line (a full disk) costs the line, never the call.
        let _ = file.write_all(line.as_bytes());
    }
}

/// The GPU session, opened by the first call that needs it, or why there is none.
fn gpu() -> Result<&'static GpuSession, &'static str> {
    static GPU: OnceLock<Result<&'static GpuSession, String>> = OnceLock::new();
    let opened = GPU.get_or_init(|| {
        // Opening a driver raises floating-point flags of its own (lavapipe's LLVM does).
        let _flags = FloatEnvironment::saved();
        // The process's session for the device, shared with the front door and Python (a
        // panic in a driver is a failure there, never the host program's unwinding).
        let session = dispatch::sessions::session_for(dispatch::Settings::global().device)
            .unwrap_or_else(|e| Err(tilemm::one_line(&e.to_string())));
        let described = match &session {
            Ok(gpu) => format!("gpu = {}", named(gpu)),
            Err(why) => format!("gpu = none: {why}"),
        };
        log(|| format!("tilemm-blas {}: {described}", std::process::id()));
        session
    });
    opened.as_ref().map_err(String::as_str).copied()
}

/// The session's backend, device and driver.
fn named(gpu: &GpuSession) -> String {
    format!(
        "{} {} ({})",
        gpu.backend(),
        gpu.info().name,
        gpu.info().driver
    )
}

/// What identifies a route in the model.
fn identity<T: Real>(route: Route) -> String {
    match route {
        Route::Gpu => match gpu() {
            Ok(gpu) => dispatch::route::gpu_id(gpu),
            Err(_) => "gpu none".into(),
        },
        Route::Cpu => dispatch::route::cpu_id(),
        // With the settings that decide its threads: a run with one thread must not speak for
        // runs with all of them.
        Route::Blas => {
            let threads: Vec<String> = [
                "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS",
                "GOTO_NUM_THREADS",
            ]
            .iter()
            .filter_map(|v| Some(format!("{v}={}", std::env::var(v).ok()?)))
            .collect();
            format!(
                "blas {}, {} cores{}{}",
                symbols::next::<T>().map_or("none", |n| n.library.as_str()),
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                if threads.is_empty() { "" } else { ", " },
                threads.join(", ")
            )
        }
    }
}

/// The routes `auto` chooses among for one element type, and what the model calls them.
pub struct Routes {
    routes: Vec<Route>,
    candidates: Vec<Candidate<'static>>,
}

/// The routes `auto` chooses among for `T`, found once: the BLAS underneath (where there is
/// one), tilemm's CPU path, and the GPU when there is one that is not a CPU emulation (lavapipe
/// is slower than the CPU path; naming it with `TILEMM_DEVICE` makes it a candidate).
fn candidates<T: Real>() -> &'static Routes {
    T::found().routes.get_or_init(|| {
        let routes = available::<T>();
        let candidates = routes
            .iter()
            .map(|&route| Candidate {
                // Kept for the process's life, as the routes are.
                id: String::leak(identity::<T>(route)),
                // The GPU's launch and transfers cost most at small sizes.
                steady: route != Route::Gpu,
            })
            .collect();
        Routes { routes, candidates }
    })
}

fn available<T: Real>() -> Vec<Route> {
    let mut routes = Vec::new();
    if symbols::next::<T>().is_some() {
        routes.push(Route::Blas);
    }
    routes.push(Route::Cpu);
    let device = dispatch::Settings::global().device;
    let worth_opening = match device {
        DeviceSpec::Cpu => false,
        DeviceSpec::Gpu { .. } => true,
        // Only a GPU that is not a CPU emulation, looked for without opening one: an open
        // lavapipe keeps threads that slow the CPU routes by a tenth (OpenBLAS's 1024³, here).
        DeviceSpec::Auto => Backend::GPU.into_iter().filter(|b| b.is_built()).any(|b| {
            tilemm::runtime::backend::list_devices(b)
                .iter()
                .any(|d| d.kind != DeviceKind::Cpu)
        }),
    };
    let computes = |gpu: &GpuSession| {
        let precision = tilemm::Precision::new(T::DTYPE, T::DTYPE);
        precision.is_ok_and(|p| gpu.info().types.check(p, &gpu.info().name).is_ok())
    };
    if worth_opening && gpu().is_ok_and(computes) {
        routes.push(Route::Gpu);
    } else if !worth_opening && device == DeviceSpec::Auto {
        log(|| {
            format!(
                "tilemm-blas {}: gpu = none opened: no GPU but CPU emulations, slower than the \
                 CPU routes (TILEMM_DEVICE=wgpu makes lavapipe a candidate)",
                std::process::id()
            )
        });
    }
    routes
}

/// The process's route model (the dispatch layer's), its loading notes logged once.
fn model() -> &'static Mutex<Model> {
    static LOGGED: OnceLock<()> = OnceLock::new();
    let (model, notes) = dispatch::route::model();
    LOGGED.get_or_init(|| {
        for note in notes {
            log(|| format!("tilemm-blas: {note}"));
        }
    });
    model
}

/// How a call is described in the log: the entry point, then the Fortran-form call.
pub struct Entry {
    /// `sgemm_`, `cblas_dgemm`.
    pub symbol: &'static str,
    /// For CBLAS calls, whether it was row-major.
    pub row_major: Option<bool>,
}

impl Entry {
    fn line<T: Real>(&self, call: &Call<T>) -> String {
        let layout = match self.row_major {
            Some(true) => "(row-major)",
            Some(false) => "(col-major)",
            None => "",
        };
        // As given: a refused call's may be any byte.
        let [ta, tb] = call
            .trans
            .map(|c| if c.is_ascii_graphic() { c as char } else { '?' });
        format!(
            "{}{layout} {ta}{tb} m={} n={} k={}",
            self.symbol, call.m, call.n, call.k
        )
    }
}

/// Logs a call refused as wrong in parameter `number`.
pub fn log_refusal<T: Real>(entry: &Entry, call: &Call<T>, number: std::os::raw::c_int) {
    log(|| {
        format!(
            "{} refused: parameter {number} is wrong (reported through xerbla_)",
            entry.line(call)
        )
    });
}

/// Runs a checked call (`work` from [`Call::check`]) on the route the setting and the model
/// choose, falling back to the CPU if the device fails, and logs it.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn run<T: Real>(entry: &Entry, call: &Call<T>, work: Work, written: &Cell<bool>) {
    let start = Instant::now();
    if forked() {
        // No log either: another thread of the parent may have held its lock at the fork.
        forward(call, work);
        written.set(true);
        return;
    }
    match work {
        Work::None => {
            log(|| format!("{} route=none (nothing to compute)", entry.line(call)));
            return;
        }
        Work::Scale => {
            call.scale();
            written.set(true);
            log(|| {
                format!(
                    "{} route=none (C = beta*C on the host) ms={:.3}",
                    entry.line(call),
                    ms(start.elapsed())
                )
            });
            return;
        }
        Work::Product => {}
    }
    let precision = T::PRECISION;
    // tilemm refuses a non-finite α or β (a Problem holds finite scalars); the reference BLAS
    // computes with them, so such a call is the BLAS underneath's (else the definition's).
    if !(call.alpha.to_f64().is_finite() && call.beta.to_f64().is_finite()) {
        let by = fallback(call);
        written.set(true);
        log(|| {
            format!(
                "{} route={by} (alpha or beta not finite) ms={:.3}",
                entry.line(call),
                ms(start.elapsed())
            )
        });
        return;
    }
    let route = match settings().mode {
        Mode::Gpu => Route::Gpu,
        Mode::Cpu => Route::Cpu,
        Mode::Off => Route::Blas,
        Mode::Auto => auto_route(entry, call),
    };
    let start = Instant::now();
    let outcome = compute(route, call);
    let time = start.elapsed();
    written.set(true);
    // The line is made only where there is a log: a small product costs microseconds.
    let logging = settings().log.is_some();
    let mut line = if logging {
        entry.line(call)
    } else {
        String::new()
    };
    match outcome {
        Ok(computed) => {
            // Its later timings are the route's speed (see `measure`).
            route.warm();
            let _ = write!(line, " route={} ms={:.3}", route.name(), ms(time));
            if let Some(kernel) = &computed.kernel {
                let _ = write!(line, " kernel={kernel}");
            }
            if computed.timed > 0 {
                let plural = if computed.timed == 1 { "" } else { "s" };
                let _ = write!(
                    line,
                    " (tuning: {} candidate{plural} timed in {:.3} ms)",
                    computed.timed,
                    ms(computed.tuning)
                );
            }
        }
        Err(why) => {
            if settings().mode == Mode::Auto {
                let id = identity_of::<T>(route);
                let mut model = model().lock().unwrap_or_else(|e| e.into_inner());
                model.failed(id, precision, call.fmas());
            }
            let fallback = fallback(call);
            written.set(true);
            let _ = write!(
                line,
                " route={} failed ({why}); computed by {} ms={:.3}",
                route.name(),
                fallback,
                ms(start.elapsed())
            );
        }
    }
    log(|| line);
}

/// This process's routes under `auto`, by class (precision, size bucket): fixed by a class's
/// first call and never changed, so that identical calls get identical bits.
static FIXED: Mutex<Vec<((&'static str, i32), Route)>> = Mutex::new(Vec::new());

/// The most routes one call times on copies of C before its class's route is fixed.
const MAX_MEASURES: usize = 12;

/// `call`'s route under `auto`: its class's, fixed when the class's first call came. That call
/// first times the routes that could win (each twice, as the model asks) on copies of C, so
/// that the caller's C is computed by the route chosen; later, every
/// [`RECHECK`](tilemm::dispatch::model::RECHECK)th call of the class times another route again on a copy,
/// for the model (and later processes), never for the caller's result.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
unsafe fn auto_route<T: Real>(entry: &Entry, call: &Call<T>) -> Route {
    let found = candidates::<T>();
    let (precision, fmas) = (T::PRECISION, call.fmas());
    let class = (precision, tilemm::dispatch::model::bucket(fmas));
    let known = {
        let fixed = FIXED.lock().unwrap_or_else(|e| e.into_inner());
        fixed.iter().find(|(c, _)| *c == class).map(|(_, r)| *r)
    };
    for _ in 0..MAX_MEASURES {
        let choice = model().lock().unwrap_or_else(|e| e.into_inner()).choose(
            &found.candidates,
            precision,
            fmas,
        );
        match (choice, known) {
            (Choice::Fastest(_), Some(route)) => return route,
            (Choice::Fastest(i), None) => return fix(class, found.routes[i]),
            (Choice::Explore(i), _) => {
                measure(entry, found.routes[i], call);
                if let Some(route) = known {
                    return route;
                }
            }
        }
    }
    // The measurements did not settle (routes that keep failing): the first candidate, the
    // BLAS underneath where there is one.
    known.unwrap_or_else(|| fix(class, found.routes[0]))
}

/// Fixes `class`'s route for the process (the first to fix it wins: another thread's).
fn fix(class: (&'static str, i32), route: Route) -> Route {
    let mut fixed = FIXED.lock().unwrap_or_else(|e| e.into_inner());
    match fixed.iter().find(|(c, _)| *c == class) {
        Some((_, earlier)) => *earlier,
        None => {
            fixed.push((class, route));
            route
        }
    }
}

/// Times `route` on `call` with a copy of C for the model, and logs it; a route that fails is
/// dropped in the class (for the process), as when it computes a caller's C.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
unsafe fn measure<T: Real>(entry: &Entry, route: Route, call: &Call<T>) {
    let (precision, fmas) = (T::PRECISION, call.fmas());
    let id = identity_of::<T>(route);
    // C's span: ldc·(n − 1) + m elements, copied so that β·C reads the caller's values.
    let len = (call.ldc.max(1) as usize) * (call.n.max(1) as usize - 1) + call.m.max(0) as usize;
    let mut copy: Vec<T> = Vec::new();
    if copy.try_reserve_exact(len).is_err() {
        model()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failed(id, precision, fmas);
        log(|| {
            format!(
                "{} route={} not measured: no memory for a copy of C",
                entry.line(call),
                route.name()
            )
        });
        return;
    }
    copy.extend_from_slice(std::slice::from_raw_parts(call.c, len));
    let scratch = Call {
        c: copy.as_mut_ptr(),
        ..*call
    };
    let warm = route.warm();
    let start = Instant::now();
    let outcome = compute(route, &scratch);
    let time = start.elapsed();
    let mut line = if settings().log.is_some() {
        entry.line(call)
    } else {
        String::new()
    };
    match outcome {
        Ok(computed) => {
            let _ = write!(
                line,
                " route={} ms={:.3} (measuring, on a copy of C)",
                route.name(),
                ms(time)
            );
            // A route's first timing in the process (a thread pool started, kernels loaded)
            // says nothing of its speed; the tuner's time is not the product's.
            if warm {
                let mut notes = Vec::new();
                model().lock().unwrap_or_else(|e| e.into_inner()).record(
                    id,
                    precision,
                    fmas,
                    time.saturating_sub(computed.tuning),
                    &mut notes,
                );
                for note in notes {
                    let _ = write!(line, "; {note}");
                }
            }
        }
        Err(why) => {
            model()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .failed(id, precision, fmas);
            let _ = write!(
                line,
                " route={} failed while measuring ({why})",
                route.name()
            );
        }
    }
    log(|| line);
}

/// `route`'s identity in the model, as `auto` found it (only `auto` records in the model).
fn identity_of<T: Real>(route: Route) -> &'static str {
    let found = candidates::<T>();
    let i = found.routes.iter().position(|&r| r == route);
    i.map_or("", |i| found.candidates[i].id)
}

fn ms(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

/// How a route computed a call.
struct Computed {
    /// Time spent tuning the GPU's kernel, not computing the product.
    tuning: Duration,
    /// On the GPU, the kernel.
    kernel: Option<String>,
    /// How many candidate kernels the tuner timed in this call.
    timed: usize,
}

/// Computes `call` on `route`, or says why it could not (C is then untouched).
unsafe fn compute<T: Real>(route: Route, call: &Call<T>) -> Result<Computed, String> {
    let plain = Computed {
        tuning: Duration::ZERO,
        kernel: None,
        timed: 0,
    };
    match route {
        Route::Blas => match symbols::next::<T>() {
            Some(next) => {
                next.gemm(call);
                Ok(plain)
            }
            None => Err("there is no BLAS underneath".into()),
        },
        Route::Cpu => {
            on_tilemm(tilemm::Gemm::new().device(Backend::Cpu, None), call).map(|_| plain)
        }
        Route::Gpu => {
            let gpu = gpu().map_err(|why| format!("no GPU: {why}"))?;
            let run = on_tilemm(tilemm::Gemm::new().on(gpu), call)?;
            Ok(Computed {
                tuning: run.tuning.as_ref().map_or(Duration::ZERO, |t| t.time),
                kernel: run.plan.map(|p| p.to_string()),
                timed: run.tuning.as_ref().map_or(0, |t| t.timed.len()),
            })
        }
    }
}

/// `call` through tilemm's front door: A, B and C as strided views of the caller's memory.
unsafe fn on_tilemm<T: Real>(
    gemm: tilemm::Gemm<'_>,
    call: &Call<T>,
) -> Result<tilemm::GemmRun, String> {
    let (m, n, k) = (call.m as usize, call.n as usize, call.k as usize);
    let [ta, tb] = call.ops();
    let a = operand(call.a, ta, (m, k), call.lda as usize);
    let b = operand(call.b, tb, (k, n), call.ldb as usize);
    let c = ArrayViewMut2::from_shape_ptr((m, n).strides((1, call.ldc as usize)), call.c);
    // The host's floating-point flags as they were: tilemm's own work on this thread (the
    // tuner's checks compare against NaN) must not show up as, say, numpy's "invalid value
    // encountered in matmul".
    let _flags = FloatEnvironment::saved();
    // A panic inside (a driver's) must not unwind into the host program; C is written only
    // at the end, so a failure leaves it as it was.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gemm.alpha(call.alpha.to_f64())
            .beta(call.beta.to_f64())
            .write(a, b, c)
    }))
    .map_err(|payload| format!("panicked: {}", tilemm::panic_message(&*payload)))?
    .map_err(|e| tilemm::one_line(&e.to_string()))
}

/// The thread's floating-point environment (exception flags, traps, rounding), held in
/// non-stop mode and restored when dropped.
struct FloatEnvironment(Box<[u64; 8]>);

extern "C" {
    // C99 <fenv.h>, in glibc's libm; `fenv_t` is 32 bytes on x86-64, and 64 are given.
    fn feholdexcept(env: *mut [u64; 8]) -> std::os::raw::c_int;
    fn fesetenv(env: *const [u64; 8]) -> std::os::raw::c_int;
}

impl FloatEnvironment {
    fn saved() -> Self {
        let mut env = Box::new([0u64; 8]);
        // Saved, then no flags and no traps: a host that traps FE_INVALID (gfortran's
        // -ffpe-trap) must not be stopped by tilemm's own comparisons with NaN.
        // SAFETY: a buffer larger than fenv_t, suitably aligned.
        unsafe { feholdexcept(&mut *env) };
        FloatEnvironment(env)
    }
}

impl Drop for FloatEnvironment {
    fn drop(&mut self) {
        // SAFETY: an environment fegetenv filled.
        unsafe { fesetenv(&*self.0) };
    }
}

/// op(X) (`rows`×`cols`) over column-major X with leading dimension `ld`.
unsafe fn operand<'a, T>(
    x: *const T,
    op: Op,
    (rows, cols): (usize, usize),
    ld: usize,
) -> ArrayView2<'a, T> {
    match op {
        Op::N => ArrayView2::from_shape_ptr((rows, cols).strides((1, ld)), x),
        Op::T => ArrayView2::from_shape_ptr((rows, cols).strides((ld, 1)), x),
    }
}

/// Computes `call` when its route failed: the BLAS underneath, else tilemm's CPU path, else
/// the definition itself. Returns what computed it.
unsafe fn fallback<T: Real>(call: &Call<T>) -> &'static str {
    if let Some(next) = symbols::next::<T>() {
        next.gemm(call);
        return "blas";
    }
    if on_tilemm(tilemm::Gemm::new().device(Backend::Cpu, None), call).is_ok() {
        return "cpu";
    }
    definition(call);
    "the definition (a loop)"
}

/// C = α·op(A)·op(B) + β·C by its definition, the last resort (it needs no memory).
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn definition<T: Real>(call: &Call<T>) {
    let [ta, tb] = call.ops();
    let at = |i: usize, l: usize| match ta {
        Op::N => *call.a.add(i + l * call.lda as usize),
        Op::T => *call.a.add(l + i * call.lda as usize),
    };
    let bt = |l: usize, j: usize| match tb {
        Op::N => *call.b.add(l + j * call.ldb as usize),
        Op::T => *call.b.add(j + l * call.ldb as usize),
    };
    for j in 0..call.n as usize {
        for i in 0..call.m as usize {
            let mut sum = 0.0;
            for l in 0..call.k as usize {
                sum += at(i, l).to_f64() * bt(l, j).to_f64();
            }
            let x = call.c.add(i + j * call.ldc as usize);
            let scaled = if call.beta == T::ZERO {
                0.0
            } else {
                call.beta.to_f64() * (*x).to_f64()
            };
            *x = T::from_f64(call.alpha.to_f64() * sum + scaled);
        }
    }
}

/// Computes a checked call (`work` from [`Call::check`]) without routing it: on the BLAS
/// underneath, else by the definition (a call made from inside this library, by a BLAS that
/// calls back into the symbol it was reached through; a call after a panic; a forked child's).
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn forward<T: Real>(call: &Call<T>, work: Work) {
    match (symbols::next::<T>(), work) {
        (Some(next), _) => next.gemm(call),
        (None, Work::None) => {}
        (None, Work::Scale) => call.scale(),
        (None, Work::Product) => definition(call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C = α·op(A)·op(B) + β·C with op(A) 3×4 stored transposed (lda 5), op(B) 4×2 as it is
    /// (ldb 6), C 3×2 (ldc 4): its padding must stay as it was.
    fn call(a: &[f64], b: &[f64], c: &mut [f64], alpha: f64, beta: f64) -> Call<f64> {
        Call {
            trans: *b"TN",
            m: 3,
            n: 2,
            k: 4,
            alpha,
            a: a.as_ptr(),
            lda: 5,
            b: b.as_ptr(),
            ldb: 6,
            beta,
            c: c.as_mut_ptr(),
            ldc: 4,
        }
    }

    #[test]
    fn the_last_resort_computes_the_definition_and_keeps_the_special_cases() {
        // A is 4×3 as stored (op(A) = Aᵀ), B 4×2; exact integers.
        let a: Vec<f64> = (0..15).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..12).map(|i| (i % 5) as f64 - 2.0).collect();
        let mut c: Vec<f64> = (0..8).map(|i| i as f64).collect();
        let c0 = c.clone();
        let expected = |i: usize, j: usize, alpha: f64, beta: f64, c0: f64| {
            let sum: f64 = (0..4).map(|l| a[l + i * 5] * b[l + j * 6]).sum();
            alpha * sum + beta * c0
        };
        assert!(
            symbols::next::<f64>().is_none(),
            "no BLAS underneath in the test binary"
        );
        let product = call(&a, &b, &mut c, 2.0, -1.0);
        assert_eq!(product.check(), Ok(Work::Product));
        // SAFETY: the buffers hold what the call describes.
        unsafe { forward(&product, Work::Product) };
        for j in 0..2 {
            for i in 0..3 {
                assert_eq!(c[i + j * 4], expected(i, j, 2.0, -1.0, c0[i + j * 4]));
            }
            assert_eq!(c[3 + j * 4], c0[3 + j * 4], "padding");
        }
        // α = 0, β = 0: zeros, a NaN in C not kept and A not read (a NaN there neither).
        let mut nan_a = a.clone();
        nan_a[0] = f64::NAN;
        c[0] = f64::NAN;
        let scale = call(&nan_a, &b, &mut c, 0.0, 0.0);
        assert_eq!(scale.check(), Ok(Work::Scale));
        unsafe { forward(&scale, Work::Scale) };
        assert_eq!([c[0], c[1], c[2], c[4], c[5], c[6]], [0.0; 6]);
        assert_eq!(c[3], c0[3], "padding");
    }
}
