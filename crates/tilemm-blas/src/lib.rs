//! `libtilemm_blas.so`: a drop-in BLAS for GEMM. Put in front of a program's BLAS with
//! `LD_PRELOAD`, it takes the program's `sgemm_`, `dgemm_`, `cgemm_`, `zgemm_` and their CBLAS
//! forms (`cblas_sgemm` …) and sends each to the fastest of tilemm's kernels on the GPU (transfers included),
//! tilemm's CPU path, or the BLAS underneath (the next definition of the symbol), by a model of
//! speeds measured on this machine (`model`). Every other BLAS routine stays the
//! program's BLAS's.
//!
//! - `TILEMM_BLAS=auto|gpu|cpu|off` forces a route (`auto`, the default, measures);
//! - `TILEMM_BLAS_LOG=FILE` appends one line per call: the shape, the route and the time;
//! - `TILEMM_DEVICE=wgpu|cuda:1|…` names the GPU (a CPU emulation such as lavapipe is a
//!   candidate of `auto` only when named).
//!
//! Arguments are checked as the reference BLAS checks them, and refused through the `xerbla_`
//! the program sees (its own, else its BLAS's) with the reference's parameter numbers; CBLAS
//! calls become Fortran calls as the reference CBLAS makes them. A failure on the device path
//! (no device, out of memory) computes that call on the CPU, with a line in the log; no panic
//! unwinds into the host program. The exports are `"C-unwind"`: a host's `xerbla_` that
//! throws (a C++ exception) reaches the caller's `catch`, as through the reference BLAS.

pub mod call;
pub mod route;
pub mod symbols;

use std::cell::Cell;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

use std::sync::OnceLock;

use call::{BlasInt, Call, Complex, Scalar};
use route::Entry;

/// What a process finds once per element type (see [`Scalar::found`]).
pub struct Found<T> {
    next: OnceLock<Option<symbols::Next<T>>>,
    routes: OnceLock<route::Routes>,
}

impl<T> Found<T> {
    const fn new() -> Self {
        Found {
            next: OnceLock::new(),
            routes: OnceLock::new(),
        }
    }
}

thread_local! {
    /// Whether this thread is inside one of this library's entry points: a BLAS underneath
    /// that calls back into the symbol it was reached through is forwarded, not routed again.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// One call, checked, then routed: a wrong argument is reported through `xerbla_` as the last
/// thing the entry point does, outside the guard below (a host's `xerbla_` may not return: R's
/// longjmps). A call that re-enters this library from the BLAS underneath is computed there,
/// not routed again; a panic stops at this boundary (unwinding into the host would abort it)
/// and, if C was not yet written, the call is computed on the BLAS underneath.
///
/// # Safety
/// The BLAS contract: `call`'s pointers are valid for its shape.
unsafe fn enter<T: Scalar>(entry: &Entry, call: &Call<T>) {
    quiet_panics();
    let work = match call.check() {
        Ok(work) => work,
        Err(number) => {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                route::log_refusal(entry, call, number)
            }));
            symbols::xerbla(T::XERBLA_NAME, number);
            return;
        }
    };
    if INSIDE.with(|inside| inside.replace(true)) {
        route::forward(call, work);
        return;
    }
    let written = Cell::new(false);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        route::run(entry, call, work, &written)
    }));
    INSIDE.with(|inside| inside.set(false));
    if result.is_err() && !written.get() {
        route::forward(call, work);
    }
}

/// Panics inside this library (a driver torn down by the host's exit while an `atexit`
/// handler still multiplies, say) are caught at the entry points and the call is computed on
/// the BLAS underneath; their messages go to the log, never to the host program's stderr.
/// The hook is this library's own (its Rust runtime is not the host's).
fn quiet_panics() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            route::log(|| format!("tilemm-blas: caught a panic (the call falls back): {info}"))
        }))
    });
}

/// Defines the Fortran entry point for one element type: every argument by reference, then
/// the hidden lengths of the two character arguments. Integers are read at this library's
/// width: 4 bytes (from a 64-bit-integer program in front of libblas64, that is their low half,
/// the value itself on x86-64 up to 2³¹ − 1), 8 in libtilemm_blas64.so.
macro_rules! fortran_gemm {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        // BlasInt is i64 itself in the 64-bit-integer build.
        #[allow(clippy::useless_conversion)]
        pub unsafe extern "C-unwind" fn $name(
            trans_a: *const c_char,
            trans_b: *const c_char,
            m: *const BlasInt,
            n: *const BlasInt,
            k: *const BlasInt,
            alpha: *const $t,
            a: *const $t,
            lda: *const BlasInt,
            b: *const $t,
            ldb: *const BlasInt,
            beta: *const $t,
            c: *mut $t,
            ldc: *const BlasInt,
            _trans_a_len: usize,
            _trans_b_len: usize,
        ) {
            let call = Call {
                trans: [*trans_a as u8, *trans_b as u8],
                m: i64::from(*m),
                n: i64::from(*n),
                k: i64::from(*k),
                alpha: *alpha,
                a,
                lda: i64::from(*lda),
                b,
                ldb: i64::from(*ldb),
                beta: *beta,
                c,
                ldc: i64::from(*ldc),
            };
            let entry = Entry {
                symbol: <$t as Scalar>::FORTRAN,
                row_major: None,
            };
            enter(&entry, &call);
        }
    };
}

/// Defines the CBLAS entry point for one element type as the reference CBLAS declares it (real
/// types: α and β by value, the matrices typed; complex ones: all by `void` pointers), with its
/// checks and conversion ([`call::from_cblas`]), then the Fortran one's.
macro_rules! cblas_gemm {
    ($(#[$doc:meta])* $name:ident, $t:ty, $scalar:ty, $matrix:ty, $matrix_mut:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $name(
            layout: c_int,
            trans_a: c_int,
            trans_b: c_int,
            m: BlasInt,
            n: BlasInt,
            k: BlasInt,
            alpha: $scalar,
            a: $matrix,
            lda: BlasInt,
            b: $matrix,
            ldb: BlasInt,
            beta: $scalar,
            c: $matrix_mut,
            ldc: BlasInt,
        ) {
            let (alpha, beta) = (<$t>::from_arg(alpha), <$t>::from_arg(beta));
            let (a, b, c) = (a.cast::<$t>(), b.cast::<$t>(), c.cast::<$t>());
            let converted = call::from_cblas(
                layout, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
            );
            cblas(layout, converted);
        }
    };
}

/// A CBLAS scalar argument: a real one by value, a complex one through a pointer.
trait FromArg<A> {
    /// The value.
    ///
    /// # Safety
    /// A pointer must point at a value of the type.
    unsafe fn from_arg(arg: A) -> Self;
}

impl<T: Scalar> FromArg<T> for T {
    unsafe fn from_arg(arg: T) -> T {
        arg
    }
}

impl<T: Scalar> FromArg<*const c_void> for T {
    unsafe fn from_arg(arg: *const c_void) -> T {
        *arg.cast::<T>()
    }
}

/// A converted CBLAS call, entered, or its refusal reported through `cblas_xerbla`.
///
/// # Safety
/// The CBLAS contract.
unsafe fn cblas<T: Scalar>(layout: c_int, converted: Result<(Call<T>, bool), call::CblasRefusal>) {
    // As the reference CBLAS: its globals say a C caller, in which layout, while the call runs.
    symbols::set_cblas_globals(layout == call::cblas::ROW_MAJOR, true);
    match converted {
        Err(refusal) => {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                route::log(|| {
                    format!(
                        "{} refused: parameter {} is wrong ({}; reported through cblas_xerbla)",
                        T::CBLAS,
                        refusal.number,
                        refusal.message
                    )
                })
            }));
            symbols::cblas_xerbla(T::CBLAS, refusal.number, &refusal.message);
        }
        // Wrong arguments past these are numbered as the Fortran call's, as the reference's
        // are; a CBLAS-aware xerbla_ renumbers them from the globals.
        Ok((call, row_major)) => {
            let entry = Entry {
                symbol: T::CBLAS,
                row_major: Some(row_major),
            };
            enter(&entry, &call);
        }
    }
    symbols::set_cblas_globals(false, false);
}

fortran_gemm!(
    /// Fortran SGEMM: C = α·op(A)·op(B) + β·C, column-major.
    sgemm_,
    f32
);
fortran_gemm!(
    /// Fortran DGEMM, as [`sgemm_`] in f64.
    dgemm_,
    f64
);
cblas_gemm!(
    /// `cblas_sgemm`: row- or column-major.
    cblas_sgemm,
    f32,
    f32,
    *const f32,
    *mut f32
);
cblas_gemm!(
    /// `cblas_dgemm`, as [`cblas_sgemm`] in f64.
    cblas_dgemm,
    f64,
    f64,
    *const f64,
    *mut f64
);
fortran_gemm!(
    /// Fortran CGEMM: complex64, op `C` the conjugate transpose.
    cgemm_,
    Complex<f32>
);
fortran_gemm!(
    /// Fortran ZGEMM, as [`cgemm_`] in complex128.
    zgemm_,
    Complex<f64>
);
cblas_gemm!(
    /// `cblas_cgemm`: row- or column-major, `CblasConjTrans` the conjugate transpose.
    cblas_cgemm,
    Complex<f32>,
    *const c_void,
    *const c_void,
    *mut c_void
);
cblas_gemm!(
    /// `cblas_zgemm`, as [`cblas_cgemm`] in complex128.
    cblas_zgemm,
    Complex<f64>,
    *const c_void,
    *const c_void,
    *mut c_void
);
