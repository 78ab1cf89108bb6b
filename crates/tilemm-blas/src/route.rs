//! Where a call goes: the setting (`TILEMM_BLAS`), the routes this process has, the model's
//! choice, the fallback when the device fails, and the log (`TILEMM_BLAS_LOG`).

use std::cell::Cell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use tilemm::dispatch::router::{Explored, Router};
use tilemm::dispatch::{self, BlasRoute, DeviceSpec};
use tilemm::host::fenv::FloatEnvironment;
use tilemm::{Backend, GemmRun, GpuSession};

use crate::call::{Call, Op, Scalar, Work};
use crate::symbols;

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
    fn name(self) -> &'static str {
        match self {
            Route::Gpu => "gpu",
            Route::Cpu => "cpu",
            Route::Blas => "blas",
        }
    }
}

/// What the BLAS keeps of the settings ([`dispatch::Settings::global`]), read once.
struct Settings {
    /// The process that read them: a child forked from it has none of its threads.
    pid: u32,
    mode: BlasRoute,
    log: Option<Mutex<File>>,
}

fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let global = dispatch::Settings::global();
        // The host program's stderr: one line for each setting that could not be used (the
        // defaults are used instead; a stderr that cannot take it costs the line, never the
        // program).
        let mut problems: Vec<String> = global.unusable.iter().map(|u| u.to_string()).collect();
        let log =
            global
                .blas_log
                .as_ref()
                .and_then(|path| match tilemm::io::files::open_append(path) {
                    Ok(file) => Some(Mutex::new(file)),
                    Err(e) => {
                        let name = dispatch::BLAS_LOG_VARIABLE;
                        problems.push(format!("{name}={}: {e}; no log is written", path.display()));
                        None
                    }
                });
        for problem in &problems {
            let _ = writeln!(std::io::stderr(), "tilemm-blas: {problem}");
        }
        Settings {
            pid: std::process::id(),
            mode: global.blas_route,
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

/// The GPU session (the process's, shared with the front door and Python), opened by the
/// first call that needs it, or why there is none; logged once. `auto` skips a device that
/// is only a CPU emulation.
fn gpu() -> Result<&'static GpuSession, &'static str> {
    static GPU: OnceLock<Result<&'static GpuSession, String>> = OnceLock::new();
    let opened = GPU.get_or_init(|| {
        // Opening a driver raises floating-point flags of its own (lavapipe's LLVM does).
        let _flags = FloatEnvironment::held();
        let session = match dispatch::Settings::global().device {
            DeviceSpec::Auto if settings().mode == BlasRoute::Auto => dispatch::route::auto_gpu(),
            device => dispatch::sessions::session_for(device),
        };
        let session = session.unwrap_or_else(|e| Err(tilemm::one_line(&e.to_string())));
        let described = match &session {
            Ok(gpu) => format!("gpu = {}", &dispatch::route::gpu_id(gpu)[4..]),
            Err(why) => format!("gpu = none: {why}"),
        };
        log(|| format!("tilemm-blas {}: {described}", std::process::id()));
        session
    });
    opened.as_ref().map_err(String::as_str).copied()
}

/// What identifies a route in the model.
fn identity<T: Scalar>(route: Route) -> String {
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

/// The routes `auto` chooses among for one element type, and their router.
pub struct Routes {
    routes: Vec<Route>,
    router: Router,
}

/// The routes `auto` chooses among for `T`, found once: the BLAS underneath (where there is
/// one), tilemm's CPU path, and the GPU where there is one that computes `T`.
fn routes<T: Scalar>() -> &'static Routes {
    T::found().routes.get_or_init(|| {
        let mut routes = Vec::new();
        if symbols::next::<T>().is_some() {
            routes.push(Route::Blas);
        }
        routes.push(Route::Cpu);
        let computes = |gpu: &GpuSession| {
            let part = <T::Part as tilemm::Element>::DTYPE;
            let precision = tilemm::Precision::new(part, part);
            precision.is_ok_and(|p| gpu.info().types.check(p, &gpu.info().name).is_ok())
        };
        if gpu().is_ok_and(computes) {
            routes.push(Route::Gpu);
        }
        static LOGGED: std::sync::Once = std::sync::Once::new();
        LOGGED.call_once(|| {
            for note in &dispatch::route::model().1 {
                log(|| format!("tilemm-blas: {note}"));
            }
        });
        // The GPU's launch and transfers cost most at small sizes: its speed is not steady.
        let router = Router::new(routes.iter().map(|&r| (identity::<T>(r), r != Route::Gpu)));
        Routes { routes, router }
    })
}

/// How a call is described in the log: the entry point, then the Fortran-form call.
pub struct Entry {
    /// `sgemm_`, `cblas_dgemm`.
    pub symbol: &'static str,
    /// For CBLAS calls, whether it was row-major.
    pub row_major: Option<bool>,
}

impl Entry {
    fn line<T: Scalar>(&self, call: &Call<T>) -> String {
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
pub fn log_refusal<T: Scalar>(entry: &Entry, call: &Call<T>, number: std::os::raw::c_int) {
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
pub unsafe fn run<T: Scalar>(entry: &Entry, call: &Call<T>, work: Work, written: &Cell<bool>) {
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
    let finite = |z: tilemm::Complex<f64>| z.re.is_finite() && z.im.is_finite();
    if !(finite(call.alpha.widen()) && finite(call.beta.widen())) {
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
    // Under `auto`, the route's index among the routes the model chooses from.
    let (route, chosen) = match settings().mode {
        BlasRoute::Gpu => (Route::Gpu, None),
        BlasRoute::Cpu => (Route::Cpu, None),
        BlasRoute::Off => (Route::Blas, None),
        BlasRoute::Auto => {
            let found = routes::<T>();
            let routed = found.router.route(precision, call.fmas(), |i| {
                time_on_copy(found.routes[i], call)
            });
            for explored in &routed.explored {
                log(|| explored_line(entry, call, found.routes[explored.index], explored));
            }
            (found.routes[routed.index], Some(routed.index))
        }
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
            // Its later timings are the route's speed.
            if let Some(i) = chosen {
                routes::<T>().router.ran(i);
            }
            let _ = write!(line, " route={} ms={:.3}", route.name(), ms(time));
            if let Some(plan) = computed.as_ref().and_then(|r| r.plan.as_ref()) {
                let _ = write!(line, " kernel={plan}");
            }
            let timed = computed.as_ref().and_then(|r| r.tuning.as_ref());
            if let Some(timed) = timed.map(|t| t.timed.len()).filter(|&n| n > 0) {
                let plural = if timed == 1 { "" } else { "s" };
                let _ = write!(
                    line,
                    " (tuning: {timed} candidate{plural} timed in {:.3} ms)",
                    ms(tuning(&computed))
                );
            }
        }
        Err(why) => {
            if let Some(i) = chosen {
                routes::<T>().router.failed(i, precision, call.fmas());
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

/// Times `route` on `call` with a copy of C, so that β·C reads the caller's values and the
/// caller's C is computed by the route chosen: the time with any tuning left out.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
unsafe fn time_on_copy<T: Scalar>(route: Route, call: &Call<T>) -> Result<Duration, String> {
    // C's span: ldc·(n − 1) + m elements.
    let len = (call.ldc.max(1) as usize) * (call.n.max(1) as usize - 1) + call.m.max(0) as usize;
    let mut copy: Vec<T> = Vec::new();
    copy.try_reserve_exact(len)
        .map_err(|_| "no memory for a copy of C".to_string())?;
    copy.extend_from_slice(std::slice::from_raw_parts(call.c, len));
    let scratch = Call {
        c: copy.as_mut_ptr(),
        ..*call
    };
    let start = Instant::now();
    let computed = compute(route, &scratch)?;
    Ok(start.elapsed().saturating_sub(tuning(&computed)))
}

/// The log's line for a route timed on a copy of C.
fn explored_line<T: Scalar>(
    entry: &Entry,
    call: &Call<T>,
    route: Route,
    explored: &Explored,
) -> String {
    let mut line = entry.line(call);
    let _ = match &explored.outcome {
        Ok(time) => write!(
            line,
            " route={} ms={:.3} (measuring, on a copy of C)",
            route.name(),
            ms(*time)
        ),
        Err(why) => write!(
            line,
            " route={} failed while measuring ({why})",
            route.name()
        ),
    };
    for note in &explored.notes {
        let _ = write!(line, "; {note}");
    }
    line
}

fn ms(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

/// Computes `call` on `route`: tilemm's run where tilemm computed it, or why it could not (C
/// is then untouched).
unsafe fn compute<T: Scalar>(route: Route, call: &Call<T>) -> Result<Option<GemmRun>, String> {
    match route {
        Route::Blas => {
            let next = symbols::next::<T>().ok_or("there is no BLAS underneath")?;
            next.gemm(call);
            Ok(None)
        }
        Route::Cpu => on_tilemm(tilemm::Gemm::new().device(Backend::Cpu, None), call).map(Some),
        Route::Gpu => {
            let gpu = gpu().map_err(|why| format!("no GPU: {why}"))?;
            on_tilemm(tilemm::Gemm::new().on(gpu), call).map(Some)
        }
    }
}

/// The time a run spent tuning its kernel, not computing the product.
fn tuning(run: &Option<GemmRun>) -> Duration {
    run.as_ref()
        .and_then(|r| r.tuning.as_ref())
        .map_or(Duration::ZERO, |t| t.time)
}

/// `call` through tilemm's front door: A, B and C as strided views of the caller's memory.
unsafe fn on_tilemm<T: Scalar>(
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
    let _flags = FloatEnvironment::held();
    // A panic inside (a driver's) must not unwind into the host program; C is written only
    // at the end, so a failure leaves it as it was.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        T::write(
            gemm,
            (a, b, c),
            (call.alpha, call.beta),
            [ta, tb].map(|op| op == Op::C),
        )
    }))
    .map_err(|payload| format!("panicked: {}", tilemm::panic_message(&*payload)))?
    .map_err(|e| tilemm::one_line(&e.to_string()))
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
        Op::T | Op::C => ArrayView2::from_shape_ptr((rows, cols).strides((ld, 1)), x),
    }
}

/// Computes `call` when its route failed: the BLAS underneath, else tilemm's CPU path, else
/// the definition itself. Returns what computed it.
unsafe fn fallback<T: Scalar>(call: &Call<T>) -> &'static str {
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
pub unsafe fn definition<T: Scalar>(call: &Call<T>) {
    let [ta, tb] = call.ops();
    // op(X)'s element (i, j) of column-major X, conjugated for `C`.
    let element = |x: *const T, ld: i64, op: Op, i: usize, j: usize| {
        let ld = ld as usize;
        let z = match op {
            Op::N => *x.add(i + j * ld),
            Op::T | Op::C => *x.add(j + i * ld),
        }
        .widen();
        if op == Op::C {
            z.conj()
        } else {
            z
        }
    };
    let (alpha, beta) = (call.alpha.widen(), call.beta.widen());
    for j in 0..call.n as usize {
        for i in 0..call.m as usize {
            let mut sum = tilemm::Complex::new(0.0, 0.0);
            for l in 0..call.k as usize {
                sum += element(call.a, call.lda, ta, i, l) * element(call.b, call.ldb, tb, l, j);
            }
            let x = call.c.add(i + j * call.ldc as usize);
            let scaled = if call.beta == T::ZERO {
                tilemm::Complex::new(0.0, 0.0)
            } else {
                beta * (*x).widen()
            };
            *x = T::narrow(alpha * sum + scaled);
        }
    }
}

/// Computes a checked call (`work` from [`Call::check`]) without routing it: on the BLAS
/// underneath, else by the definition (a call made from inside this library, by a BLAS that
/// calls back into the symbol it was reached through; a call after a panic; a forked child's).
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn forward<T: Scalar>(call: &Call<T>, work: Work) {
    match (symbols::next::<T>(), work) {
        (Some(next), _) => next.gemm(call),
        (None, Work::None) => {}
        (None, Work::Scale) => call.scale(),
        (None, Work::Product) => definition(call),
    }
}
