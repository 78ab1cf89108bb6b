//! Where a call goes: the setting (`TILEMM_BLAS`), the routes this process has, the model's
//! choice, the fallback when the device fails, and the log (`TILEMM_BLAS_LOG`).

use std::cell::Cell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use tilemm::dispatch::router::{Explored, Router};
use tilemm::dispatch::{self, BlasRoute, DeviceSpec};
use tilemm::host::fenv::FloatEnvironment;
use tilemm::level3::{
    self, Definition, Level3, Multiply, OnRoute, Operand, Side, Triangular, Uplo,
};
use tilemm::{Backend, GemmRun, GpuSession};

use crate::call::{Call, Op, Routine, Scalar, Work};
use crate::log::{self as call_log, Log};
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
    mode: BlasRoute,
    log: Option<&'static Log>,
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
                    Ok(file) => Some(Log::open(file)),
                    Err(e) => {
                        let name = dispatch::BLAS_LOG_VARIABLE;
                        problems.push(format!("{name}={}: {e}; no log is written", path.display()));
                        None
                    }
                });
        for problem in &problems {
            let _ = writeln!(std::io::stderr(), "tilemm-blas: {problem}");
        }
        // A child forked from now on has none of this process's threads.
        call_log::watch_forks();
        Settings {
            mode: global.blas_route,
            log,
        }
    })
}

/// Whether this process is a child forked after this library started working in its parent:
/// tilemm's CPU threads (rayon's pool) and device stay with the parent, and a product sent to
/// them would wait forever, so a forked child's calls go to the BLAS underneath.
fn forked() -> bool {
    // Read after the settings, which start watching for forks.
    settings();
    call_log::forked()
}

/// Writes one line to the log, if there is one.
pub(crate) fn log(line: impl FnOnce() -> String) {
    if let Some(log) = settings().log {
        log.line(&line());
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
    /// Each routine's key in the model: GEMM's the precision (`f64`), the others' with their
    /// name (`f64 trsm`).
    keys: [&'static str; 9],
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
        let keys = Routine::ALL.map(|routine| match routine {
            Routine::Gemm => T::PRECISION,
            // Kept for the process's life, as the routes are.
            _ => String::leak(format!("{} {}", T::PRECISION, routine.name())),
        });
        Routes {
            routes,
            router,
            keys,
        }
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
        let chars: String = call
            .given_chars()
            .iter()
            .map(|&c| if c.is_ascii_graphic() { c as char } else { '?' })
            .collect();
        format!(
            "{}{layout} {chars} m={} n={} k={}",
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
    if forked() {
        // No log either: another thread of the parent may have held its lock at the fork.
        forward(call, work);
        written.set(true);
        return;
    }
    let clock = Clock::start();
    match work {
        Work::None => {
            log(|| format!("{} route=none (nothing to compute)", entry.line(call)));
            return;
        }
        Work::Scale => {
            scale(call);
            written.set(true);
            log(|| {
                format!(
                    "{} route=none (C = beta*C on the host) ms={:.3}",
                    entry.line(call),
                    clock.ms()
                )
            });
            return;
        }
        Work::Product => {}
    }
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
                clock.ms()
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
            let key = found.keys[call.routine.index()];
            let routed = found
                .router
                .route(key, call.fmas(), |i| time_on_copy(found.routes[i], call));
            for explored in &routed.explored {
                log(|| explored_line(entry, call, found.routes[explored.index], explored));
            }
            (found.routes[routed.index], Some(routed.index))
        }
    };
    let clock = Clock::start();
    let outcome = compute(route, call);
    let time = clock.ms();
    written.set(true);
    let fallen_back = match &outcome {
        // Its later timings are the route's speed.
        Ok(_) => {
            if let Some(i) = chosen {
                routes::<T>().router.ran(i);
            }
            None
        }
        Err(_) => {
            if let Some(i) = chosen {
                let found = routes::<T>();
                let key = found.keys[call.routine.index()];
                found.router.failed(i, key, call.fmas());
            }
            Some(fallback(call))
        }
    };
    // Made only where there is a log: formatting costs about what a small product does.
    log(|| {
        let mut line = entry.line(call);
        match (outcome, fallen_back) {
            (Ok(computed), _) => {
                let _ = write!(line, " route={} ms={time:.3}", route.name());
                let runs = computed.as_deref().unwrap_or_default();
                if call.routine != Routine::Gemm && computed.is_some() {
                    let _ = write!(line, " gemms={}", runs.len());
                }
                if let Some(plan) = runs.first().and_then(|r| r.plan.as_ref()) {
                    let _ = write!(line, " kernel={plan}");
                }
                let timed: usize = runs
                    .iter()
                    .filter_map(|r| r.tuning.as_ref())
                    .map(|t| t.timed.len())
                    .sum();
                if timed > 0 {
                    let plural = if timed == 1 { "" } else { "s" };
                    let _ = write!(
                        line,
                        " (tuning: {timed} candidate{plural} timed in {:.3} ms)",
                        ms(tuning(&computed))
                    );
                }
            }
            (Err(why), by) => {
                let _ = write!(
                    line,
                    " route={} failed ({why}); computed by {} ms={:.3}",
                    route.name(),
                    by.unwrap_or_default(),
                    clock.ms()
                );
            }
        }
        line
    });
}

/// The time since a call (or its product) began, read only where there is a log to write it
/// to.
struct Clock(Option<Instant>);

impl Clock {
    fn start() -> Clock {
        Clock(settings().log.is_some().then(Instant::now))
    }

    /// Milliseconds since the start (0 without a log).
    fn ms(&self) -> f64 {
        self.0.map_or(0.0, |start| ms(start.elapsed()))
    }
}

/// Times `route` on `call` with a copy of C, so that β·C reads the caller's values and the
/// caller's C is computed by the route chosen: the time with any tuning left out.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
unsafe fn time_on_copy<T: Scalar>(route: Route, call: &Call<T>) -> Result<Duration, String> {
    let mut copy = Saved::of(call).ok_or("no memory for a copy of C")?;
    let scratch = copy.scratch(call);
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

/// Computes `call` on `route`: tilemm's GEMM runs where tilemm computed it, or why it could
/// not (C is then untouched, or, for a routine of several GEMMs, to be computed again by the
/// fallback).
unsafe fn compute<T: Scalar>(route: Route, call: &Call<T>) -> Result<Option<Vec<GemmRun>>, String> {
    match route {
        Route::Blas => {
            let next = symbols::next::<T>().ok_or("there is no BLAS underneath")?;
            if !next.run(call) {
                return Err(format!(
                    "the BLAS underneath has no {}",
                    call.routine.name()
                ));
            }
            Ok(None)
        }
        Route::Cpu => on_tilemm(tilemm::Gemm::new().device(Backend::Cpu, None), call).map(Some),
        Route::Gpu => {
            let gpu = gpu().map_err(|why| format!("no GPU: {why}"))?;
            on_tilemm(tilemm::Gemm::new().on(gpu), call).map(Some)
        }
    }
}

/// The time runs spent tuning their kernels, not computing.
fn tuning(runs: &Option<Vec<GemmRun>>) -> Duration {
    runs.iter()
        .flatten()
        .filter_map(|r| r.tuning.as_ref())
        .map(|t| t.time)
        .sum()
}

/// `call` through tilemm's GEMM on `gemm`'s route: its runs.
///
/// A routine of several GEMMs that fails part way has written part of C; its caller computes
/// it again from a copy (see [`time_on_copy`]) or on the fallback, which for GEMM itself is
/// exact since C is written only at the end. For the others, C is restored first.
unsafe fn on_tilemm<T: Scalar>(
    gemm: tilemm::Gemm<'_>,
    call: &Call<T>,
) -> Result<Vec<GemmRun>, String> {
    // The host's floating-point flags as they were: tilemm's own work on this thread (the
    // tuner's checks compare against NaN) must not show up as, say, numpy's "invalid value
    // encountered in matmul".
    let _flags = FloatEnvironment::held();
    let saved = if call.routine == Routine::Gemm {
        None
    } else {
        Some(Saved::of(call).ok_or("no memory for a copy of C")?)
    };
    let mut on = OnRoute::new(gemm);
    // A panic inside (a driver's) must not unwind into the host program.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(&mut on, call)))
        .map_err(|payload| format!("panicked: {}", tilemm::panic_message(&*payload)))
        .and_then(|r| r.map_err(|e| tilemm::one_line(&e.to_string())));
    match result {
        Ok(()) => Ok(on.runs),
        Err(why) => {
            if let Some(saved) = saved {
                saved.restore(call);
            }
            Err(why)
        }
    }
}

/// A copy of a call's output (the m×n entries of C, not the rows between them), to put back
/// after a failure or to compute on while a route is timed.
struct Saved<T>(Vec<T>);

impl<T: Scalar> Saved<T> {
    /// The copy, column by column (`None` without the memory).
    unsafe fn of(call: &Call<T>) -> Option<Self> {
        let (m, n) = (call.m.max(0) as usize, call.n.max(0) as usize);
        let mut copy: Vec<T> = Vec::new();
        copy.try_reserve_exact(m * n).ok()?;
        for j in 0..n {
            let column = std::slice::from_raw_parts(call.c.add(j * call.ldc as usize), m);
            copy.extend_from_slice(column);
        }
        Some(Saved(copy))
    }

    /// A call that writes this copy (leading dimension m) instead of C.
    fn scratch(&mut self, call: &Call<T>) -> Call<T> {
        Call {
            c: self.0.as_mut_ptr(),
            ldc: call.m.max(1),
            ..*call
        }
    }

    unsafe fn restore(&self, call: &Call<T>) {
        let m = call.m.max(0) as usize;
        for (j, column) in self.0.chunks(m.max(1)).enumerate() {
            std::ptr::copy_nonoverlapping(
                column.as_ptr(),
                call.c.add(j * call.ldc as usize),
                column.len(),
            );
        }
    }
}

/// `call` by `multiply`: its matrices as strided views of the caller's memory.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS; `call` checked.
pub unsafe fn execute<T: Scalar>(
    multiply: &mut impl Multiply<T>,
    call: &Call<T>,
) -> tilemm::Result<()> {
    let (m, n, k) = (call.m as usize, call.n as usize, call.k as usize);
    let c = ArrayViewMut2::from_shape_ptr((m, n).strides((1, call.ldc as usize)), call.c);
    let (alpha, beta) = (call.alpha, call.beta);
    let side = if call.char(0) == b'L' {
        Side::Left
    } else {
        Side::Right
    };
    let uplo = |i: usize| {
        if call.char(i) == b'U' {
            Uplo::Upper
        } else {
            Uplo::Lower
        }
    };
    // op(X) (`rows`×`cols`) over column-major X (leading dimension `ld`) for character `i`.
    let operand = |x: *const T, i: usize, (rows, cols): (usize, usize), ld: i64| {
        let op = Op::from_char(call.chars[i]).unwrap_or(Op::N);
        let stored = |shape: (usize, usize)| {
            Operand::new(ArrayView2::from_shape_ptr(
                shape.strides((1, ld as usize)),
                x,
            ))
        };
        match op {
            Op::N => stored((rows, cols)),
            Op::T => stored((cols, rows)).t(),
            Op::C => stored((cols, rows)).h(),
        }
    };
    let square = |x: *const T, order: usize, ld: i64| {
        ArrayView2::from_shape_ptr((order, order).strides((1, ld as usize)), x)
    };
    let mut level3 = Level3::new(multiply);
    let hermitian = call.routine.hermitian();
    match call.routine {
        Routine::Gemm => level3.multiply.multiply(
            alpha,
            operand(call.a, 0, (m, k), call.lda),
            operand(call.b, 1, (k, n), call.ldb),
            beta,
            c,
        ),
        Routine::Symm | Routine::Hemm => {
            let order = if side == Side::Left { m } else { n };
            let b = ArrayView2::from_shape_ptr((m, n).strides((1, call.ldb as usize)), call.b);
            level3.symm(
                side,
                uplo(1),
                hermitian,
                alpha,
                square(call.a, order, call.lda),
                b,
                beta,
                c,
            )
        }
        Routine::Syrk | Routine::Herk => level3.rank_k(
            uplo(0),
            hermitian,
            alpha,
            operand(call.a, 1, (n, k), call.lda),
            beta,
            c,
        ),
        Routine::Syr2k | Routine::Her2k => level3.rank_2k(
            uplo(0),
            hermitian,
            alpha,
            operand(call.a, 1, (n, k), call.lda),
            operand(call.b, 1, (n, k), call.ldb),
            beta,
            c,
        ),
        Routine::Trmm | Routine::Trsm => {
            let order = if side == Side::Left { m } else { n };
            // op(A)'s triangle: A's, or the other one for a transpose.
            let transposed = call.char(2) != b'N';
            let t = Triangular {
                a: operand(call.a, 2, (order, order), call.lda),
                uplo: if transposed { uplo(1).flip() } else { uplo(1) },
                unit: call.char(3) == b'U',
            };
            if call.routine == Routine::Trmm {
                level3.trmm(side, t, alpha, c)
            } else {
                level3.trsm(side, t, alpha, c)
            }
        }
    }
}

/// Computes `call` when its route failed: the BLAS underneath, else tilemm's CPU path, else
/// the definition itself. Returns what computed it.
unsafe fn fallback<T: Scalar>(call: &Call<T>) -> &'static str {
    if symbols::next::<T>().is_some_and(|next| next.run(call)) {
        return "blas";
    }
    if on_tilemm(tilemm::Gemm::new().device(Backend::Cpu, None), call).is_ok() {
        return "cpu";
    }
    definition(call);
    "the definition (a loop)"
}

/// `call` by its definition, the last resort: loops, and for the routines other than GEMM
/// a block of scratch at most.
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn definition<T: Scalar>(call: &Call<T>) {
    if let Err(e) = execute(&mut Definition, call) {
        log(|| format!("tilemm-blas: the definition failed too ({e}): C is as it was"));
    }
}

/// The scaling a checked call asks for when it computes no product ([`Work::Scale`]): C = β·C
/// (GEMM and SYMM), on the triangle (the updates; a Hermitian diagonal's imaginary parts made
/// zero), or B = 0 (TRMM and TRSM), reading neither A nor B (either may be null). β = 0 writes
/// zeros without reading C (a NaN there does not survive).
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS; `call` checked, C not empty.
pub unsafe fn scale<T: Scalar>(call: &Call<T>) {
    let (m, n) = (call.m as usize, call.n as usize);
    let c = ArrayViewMut2::from_shape_ptr((m, n).strides((1, call.ldc as usize)), call.c);
    let upper = call.char(0) == b'U';
    match call.routine {
        Routine::Gemm | Routine::Symm | Routine::Hemm => {
            level3::scale(c, call.beta, false, |_, _| true)
        }
        Routine::Trmm | Routine::Trsm => level3::scale(c, T::zero(), false, |_, _| true),
        _ => level3::scale(c, call.beta, call.routine.hermitian(), |i, j| {
            (i <= j) == upper || i == j
        }),
    }
}

/// Computes a checked call (`work` from [`Call::check`]) without routing it: on the BLAS
/// underneath, else by the definition (a call made from inside this library, by a BLAS that
/// calls back into the symbol it was reached through; a call after a panic; a forked child's).
///
/// # Safety
/// `call`'s pointers must be valid for its shape, as for any BLAS.
pub unsafe fn forward<T: Scalar>(call: &Call<T>, work: Work) {
    if symbols::next::<T>().is_some_and(|next| next.run(call)) {
        return;
    }
    match work {
        Work::None => {}
        Work::Scale => scale(call),
        Work::Product => definition(call),
    }
}
