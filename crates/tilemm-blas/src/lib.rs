//! `libtilemm_blas.so`: a drop-in BLAS for Level 3. Put in front of a program's BLAS with
//! `LD_PRELOAD`, it takes the program's GEMM, SYMM, HEMM, SYRK, HERK, SYR2K, HER2K, TRMM and TRSM
//! in s, d, c and z (`dgemm_`, `ztrsm_` …) and their CBLAS forms (`cblas_dgemm` …), and sends
//! each to the fastest of tilemm's kernels on the GPU (transfers included), tilemm's CPU path,
//! or the BLAS underneath (the next definition of the symbol), by a model of speeds measured
//! on this machine (`model`). The routines other than GEMM are tilemm's blocked algorithms
//! over its GEMM (`tilemm::level3`). Levels 1 and 2 stay the program's BLAS's.
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
pub mod log;
pub mod route;
pub mod symbols;

use std::cell::Cell;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

use std::sync::OnceLock;

use call::{BlasInt, Call, Complex, Routine, Scalar};
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
            symbols::xerbla(&call.routine.xerbla_name(T::LETTER), number);
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
            // On one line: the message follows its location on a line of its own.
            route::log(|| {
                let info = info.to_string().replace('\n', " ");
                format!("tilemm-blas: caught a panic (the call falls back): {info}")
            })
        }))
    });
}

/// A CBLAS scalar argument: a real one by value, a complex one through a pointer; and the
/// real α and β of `herk` (and β of `her2k`) given to a complex routine.
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

impl FromArg<f32> for Complex<f32> {
    unsafe fn from_arg(arg: f32) -> Self {
        Complex::new(arg, 0.0)
    }
}

impl FromArg<f64> for Complex<f64> {
    unsafe fn from_arg(arg: f64) -> Self {
        Complex::new(arg, 0.0)
    }
}

/// A converted CBLAS call, entered, or its refusal reported through `cblas_xerbla`.
///
/// # Safety
/// The CBLAS contract.
unsafe fn cblas<T: Scalar>(symbol: &'static str, layout: c_int, call: Call<T>, enums: &[c_int]) {
    // As the reference CBLAS: its globals say a C caller, in which layout, while the call runs.
    symbols::set_cblas_globals(layout == call::cblas::ROW_MAJOR, true);
    match call.from_cblas(layout, enums) {
        Err(refusal) => {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                route::log(|| {
                    format!(
                        "{symbol} refused: parameter {} is wrong ({}; reported through cblas_xerbla)",
                        refusal.number, refusal.message
                    )
                })
            }));
            symbols::cblas_xerbla(symbol, refusal.number, &refusal.message);
        }
        // Wrong arguments past these are numbered as the Fortran call's, as the reference's
        // are; a CBLAS-aware xerbla_ renumbers them from the globals.
        Ok((call, row_major)) => {
            let entry = Entry {
                symbol,
                row_major: Some(row_major),
            };
            enter(&entry, &call);
        }
    }
    symbols::set_cblas_globals(false, false);
}

/// A Fortran entry point's call, entered.
///
/// # Safety
/// The BLAS contract.
unsafe fn fortran<T: Scalar>(symbol: &'static str, call: Call<T>) {
    let entry = Entry {
        symbol,
        row_major: None,
    };
    enter(&entry, &call);
}

/// The integer arguments read at this library's width: 4 bytes (from a 64-bit-integer program
/// in front of libblas64, that is their low half, the value itself on x86-64 up to 2³¹ − 1), 8
/// in libtilemm_blas64.so.
// BlasInt is i64 itself in the 64-bit-integer build.
#[allow(clippy::useless_conversion)]
fn int(x: BlasInt) -> i64 {
    i64::from(x)
}

/// Defines one routine's Fortran entry point (every argument by reference, then the hidden
/// lengths of the character arguments) and its CBLAS one (the layout first, the characters
/// as enumerations, integers and real scalars by value, complex scalars and matrices by
/// pointer), from the routine's family, the element type and the scalars' types: α's and
/// β's in Fortran (the type, or its real part for herk's), then in CBLAS.
macro_rules! level3 {
    (gemm $f:ident, $c:ident, $t:ty, $s:ty, $m:ty, $mm:ty) => {
        #[doc = concat!("Fortran ", stringify!($f), ": C = α·op(A)·op(B) + β·C.")]
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $f(
            ta: *const c_char, tb: *const c_char, m: *const BlasInt, n: *const BlasInt,
            k: *const BlasInt, alpha: *const $t, a: *const $t, lda: *const BlasInt,
            b: *const $t, ldb: *const BlasInt, beta: *const $t, c: *mut $t,
            ldc: *const BlasInt, _: usize, _: usize,
        ) {
            fortran(stringify!($f), Call {
                chars: [*ta as u8, *tb as u8, b'N', b'N'],
                m: int(*m), n: int(*n), k: int(*k), alpha: *alpha, a, lda: int(*lda), b,
                ldb: int(*ldb), beta: *beta, c, ldc: int(*ldc),
                ..Call::new(Routine::Gemm)
            });
        }
        #[doc = concat!("`", stringify!($c), "`: row- or column-major.")]
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $c(
            layout: c_int, ta: c_int, tb: c_int, m: BlasInt, n: BlasInt, k: BlasInt, alpha: $s,
            a: $m, lda: BlasInt, b: $m, ldb: BlasInt, beta: $s, c: $mm, ldc: BlasInt,
        ) {
            cblas(stringify!($c), layout, Call {
                m: int(m), n: int(n), k: int(k), alpha: <$t>::from_arg(alpha), a: a.cast(),
                lda: int(lda), b: b.cast(), ldb: int(ldb), beta: <$t>::from_arg(beta),
                c: c.cast(), ldc: int(ldc),
                ..Call::new(Routine::Gemm)
            }, &[ta, tb]);
        }
    };
    (symm $routine:ident $f:ident, $c:ident, $t:ty, $s:ty, $m:ty, $mm:ty) => {
        #[doc = concat!("Fortran ", stringify!($f), ": C = α·A·B + β·C or α·B·A + β·C.")]
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $f(
            side: *const c_char, uplo: *const c_char, m: *const BlasInt, n: *const BlasInt,
            alpha: *const $t, a: *const $t, lda: *const BlasInt, b: *const $t,
            ldb: *const BlasInt, beta: *const $t, c: *mut $t, ldc: *const BlasInt, _: usize,
            _: usize,
        ) {
            fortran(stringify!($f), Call {
                chars: [*side as u8, *uplo as u8, b'N', b'N'],
                m: int(*m), n: int(*n), alpha: *alpha, a, lda: int(*lda), b, ldb: int(*ldb),
                beta: *beta, c, ldc: int(*ldc),
                ..Call::new(Routine::$routine)
            });
        }
        #[doc = concat!("`", stringify!($c), "`: row- or column-major.")]
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $c(
            layout: c_int, side: c_int, uplo: c_int, m: BlasInt, n: BlasInt, alpha: $s, a: $m,
            lda: BlasInt, b: $m, ldb: BlasInt, beta: $s, c: $mm, ldc: BlasInt,
        ) {
            cblas(stringify!($c), layout, Call {
                m: int(m), n: int(n), alpha: <$t>::from_arg(alpha), a: a.cast(),
                lda: int(lda), b: b.cast(), ldb: int(ldb), beta: <$t>::from_arg(beta),
                c: c.cast(), ldc: int(ldc),
                ..Call::new(Routine::$routine)
            }, &[side, uplo]);
        }
    };
    (rank_k $routine:ident $f:ident, $c:ident, $t:ty, $fs:ty, $s:ty, $m:ty, $mm:ty) => {
        #[doc = concat!("Fortran ", stringify!($f), ": a rank-k update of C's triangle.")]
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $f(
            uplo: *const c_char, trans: *const c_char, n: *const BlasInt, k: *const BlasInt,
            alpha: *const $fs, a: *const $t, lda: *const BlasInt, beta: *const $fs,
            c: *mut $t, ldc: *const BlasInt, _: usize, _: usize,
        ) {
            fortran(stringify!($f), Call {
                chars: [*uplo as u8, *trans as u8, b'N', b'N'],
                m: int(*n), n: int(*n), k: int(*k), alpha: <$t>::from_arg(*alpha), a,
                lda: int(*lda), beta: <$t>::from_arg(*beta), c, ldc: int(*ldc),
                ..Call::new(Routine::$routine)
            });
        }
        #[doc = concat!("`", stringify!($c), "`: row- or column-major.")]
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $c(
            layout: c_int, uplo: c_int, trans: c_int, n: BlasInt, k: BlasInt, alpha: $s, a: $m,
            lda: BlasInt, beta: $s, c: $mm, ldc: BlasInt,
        ) {
            cblas(stringify!($c), layout, Call {
                m: int(n), n: int(n), k: int(k), alpha: <$t>::from_arg(alpha), a: a.cast(),
                lda: int(lda), beta: <$t>::from_arg(beta), c: c.cast(), ldc: int(ldc),
                ..Call::new(Routine::$routine)
            }, &[uplo, trans]);
        }
    };
    (rank_2k $routine:ident $f:ident, $c:ident, $t:ty, $fb:ty, $s:ty, $sb:ty, $m:ty, $mm:ty) => {
        #[doc = concat!("Fortran ", stringify!($f), ": a rank-2k update of C's triangle.")]
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $f(
            uplo: *const c_char, trans: *const c_char, n: *const BlasInt, k: *const BlasInt,
            alpha: *const $t, a: *const $t, lda: *const BlasInt, b: *const $t,
            ldb: *const BlasInt, beta: *const $fb, c: *mut $t, ldc: *const BlasInt, _: usize,
            _: usize,
        ) {
            fortran(stringify!($f), Call {
                chars: [*uplo as u8, *trans as u8, b'N', b'N'],
                m: int(*n), n: int(*n), k: int(*k), alpha: *alpha, a, lda: int(*lda), b,
                ldb: int(*ldb), beta: <$t>::from_arg(*beta), c, ldc: int(*ldc),
                ..Call::new(Routine::$routine)
            });
        }
        #[doc = concat!("`", stringify!($c), "`: row- or column-major.")]
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $c(
            layout: c_int, uplo: c_int, trans: c_int, n: BlasInt, k: BlasInt, alpha: $s, a: $m,
            lda: BlasInt, b: $m, ldb: BlasInt, beta: $sb, c: $mm, ldc: BlasInt,
        ) {
            cblas(stringify!($c), layout, Call {
                m: int(n), n: int(n), k: int(k), alpha: <$t>::from_arg(alpha), a: a.cast(),
                lda: int(lda), b: b.cast(), ldb: int(ldb), beta: <$t>::from_arg(beta),
                c: c.cast(), ldc: int(ldc),
                ..Call::new(Routine::$routine)
            }, &[uplo, trans]);
        }
    };
    (triangular $routine:ident $f:ident, $c:ident, $t:ty, $s:ty, $m:ty, $mm:ty) => {
        #[doc = concat!("Fortran ", stringify!($f), ": B = α·op(A)·B, α·B·op(A), or the solve, A triangular.")]
        ///
        /// # Safety
        /// The Fortran BLAS's contract: valid pointers for the shapes and leading dimensions.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $f(
            side: *const c_char, uplo: *const c_char, transa: *const c_char,
            diag: *const c_char, m: *const BlasInt, n: *const BlasInt, alpha: *const $t,
            a: *const $t, lda: *const BlasInt, b: *mut $t, ldb: *const BlasInt, _: usize,
            _: usize, _: usize, _: usize,
        ) {
            fortran(stringify!($f), Call {
                chars: [*side as u8, *uplo as u8, *transa as u8, *diag as u8],
                m: int(*m), n: int(*n), alpha: *alpha, a, lda: int(*lda), c: b,
                ldc: int(*ldb),
                ..Call::new(Routine::$routine)
            });
        }
        #[doc = concat!("`", stringify!($c), "`: row- or column-major.")]
        ///
        /// # Safety
        /// The CBLAS contract: valid pointers for the shapes and leading dimensions given.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C-unwind" fn $c(
            layout: c_int, side: c_int, uplo: c_int, transa: c_int, diag: c_int, m: BlasInt,
            n: BlasInt, alpha: $s, a: $m, lda: BlasInt, b: $mm, ldb: BlasInt,
        ) {
            cblas(stringify!($c), layout, Call {
                m: int(m), n: int(n), alpha: <$t>::from_arg(alpha), a: a.cast(),
                lda: int(lda), c: b.cast(), ldc: int(ldb),
                ..Call::new(Routine::$routine)
            }, &[side, uplo, transa, diag]);
        }
    };
}

/// The routines of one element type: `$t`, its real part, the CBLAS scalar and matrix types.
macro_rules! real_routines {
    ($t:ty: $gemm:ident $cgemm:ident, $symm:ident $csymm:ident, $syrk:ident $csyrk:ident,
     $syr2k:ident $csyr2k:ident, $trmm:ident $ctrmm:ident, $trsm:ident $ctrsm:ident) => {
        level3!(gemm $gemm, $cgemm, $t, $t, *const $t, *mut $t);
        level3!(symm Symm $symm, $csymm, $t, $t, *const $t, *mut $t);
        level3!(rank_k Syrk $syrk, $csyrk, $t, $t, $t, *const $t, *mut $t);
        level3!(rank_2k Syr2k $syr2k, $csyr2k, $t, $t, $t, $t, *const $t, *mut $t);
        level3!(triangular Trmm $trmm, $ctrmm, $t, $t, *const $t, *mut $t);
        level3!(triangular Trsm $trsm, $ctrsm, $t, $t, *const $t, *mut $t);
    };
}

macro_rules! complex_routines {
    ($t:ty, $part:ty: $gemm:ident $cgemm:ident, $symm:ident $csymm:ident,
     $hemm:ident $chemm:ident, $syrk:ident $csyrk:ident, $herk:ident $cherk:ident,
     $syr2k:ident $csyr2k:ident, $her2k:ident $cher2k:ident, $trmm:ident $ctrmm:ident,
     $trsm:ident $ctrsm:ident) => {
        level3!(gemm $gemm, $cgemm, $t, *const c_void, *const c_void, *mut c_void);
        level3!(symm Symm $symm, $csymm, $t, *const c_void, *const c_void, *mut c_void);
        level3!(symm Hemm $hemm, $chemm, $t, *const c_void, *const c_void, *mut c_void);
        level3!(rank_k Syrk $syrk, $csyrk, $t, $t, *const c_void, *const c_void, *mut c_void);
        level3!(rank_k Herk $herk, $cherk, $t, $part, $part, *const c_void, *mut c_void);
        level3!(rank_2k Syr2k $syr2k, $csyr2k, $t, $t, *const c_void, *const c_void,
            *const c_void, *mut c_void);
        level3!(rank_2k Her2k $her2k, $cher2k, $t, $part, *const c_void, $part, *const c_void,
            *mut c_void);
        level3!(triangular Trmm $trmm, $ctrmm, $t, *const c_void, *const c_void, *mut c_void);
        level3!(triangular Trsm $trsm, $ctrsm, $t, *const c_void, *const c_void, *mut c_void);
    };
}

real_routines!(f32: sgemm_ cblas_sgemm, ssymm_ cblas_ssymm, ssyrk_ cblas_ssyrk,
    ssyr2k_ cblas_ssyr2k, strmm_ cblas_strmm, strsm_ cblas_strsm);
real_routines!(f64: dgemm_ cblas_dgemm, dsymm_ cblas_dsymm, dsyrk_ cblas_dsyrk,
    dsyr2k_ cblas_dsyr2k, dtrmm_ cblas_dtrmm, dtrsm_ cblas_dtrsm);
complex_routines!(Complex<f32>, f32: cgemm_ cblas_cgemm, csymm_ cblas_csymm,
    chemm_ cblas_chemm, csyrk_ cblas_csyrk, cherk_ cblas_cherk, csyr2k_ cblas_csyr2k,
    cher2k_ cblas_cher2k, ctrmm_ cblas_ctrmm, ctrsm_ cblas_ctrsm);
complex_routines!(Complex<f64>, f64: zgemm_ cblas_zgemm, zsymm_ cblas_zsymm,
    zhemm_ cblas_zhemm, zsyrk_ cblas_zsyrk, zherk_ cblas_zherk, zsyr2k_ cblas_zsyr2k,
    zher2k_ cblas_zher2k, ztrmm_ cblas_ztrmm, ztrsm_ cblas_ztrsm);
