//! The symbols found at run time: the BLAS underneath (the next definitions of its routines,
//! after this library), and the error handlers and CBLAS globals the program or its BLAS defines.
//! This library defines no `xerbla_`: a test program's own must be the one called.

use std::ffi::{c_void, CStr, CString};
use std::io::Write as _;
use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;

use std::marker::PhantomData;

use crate::call::{Call, Routine, Scalar};

/// The BLAS underneath: where its routines are looked up, and the file it is in.
pub struct Next<T> {
    /// `RTLD_NEXT`, or the handle of a `libblas.so.3` loaded outside the global scope.
    handle: usize,
    /// Each routine's address, looked up at its first call ([`Routine::index`]).
    routines: [OnceLock<Option<usize>>; 9],
    /// The shared object that defines its GEMM (the model keys its speeds by it).
    pub library: String,
    /// Whether it takes 64-bit integers (so does the program in front of it).
    pub ilp64: bool,
    element: PhantomData<T>,
}

impl<T: Scalar> Next<T> {
    /// The address of `routine`'s Fortran symbol (`dsyrk_`) underneath, if any.
    fn address(&self, routine: Routine) -> Option<*mut c_void> {
        let found = self.routines[routine.index()].get_or_init(|| {
            let name = format!("{}{}_", T::LETTER as char, routine.name());
            lookup(self.handle as *mut c_void, &name)
                .filter(|&a| library_of(a) != own_library())
                .map(|a| a as usize)
        });
        found.map(|a| a as *mut c_void)
    }

    /// Runs `call` on the BLAS underneath; false where it has no such routine.
    ///
    /// # Safety
    /// `call`'s pointers must be valid for its shape, as for any BLAS.
    pub unsafe fn run(&self, call: &Call<T>) -> bool {
        let Some(address) = self.address(call.routine) else {
            return false;
        };
        if self.ilp64 {
            call_with(address, call, |v| v);
        } else {
            // A call checked in a 32-bit library holds 32-bit values.
            call_with(address, call, |v| v as c_int);
        }
        true
    }
}

/// `call` through the Fortran routine at `address`, its integers as `int` makes them: every
/// argument by reference, the hidden lengths of the character arguments last (herk's real α
/// and β, her2k's β, are the real parts at the start of the complex values held).
unsafe fn call_with<T, I>(address: *mut c_void, call: &Call<T>, int: impl Fn(i64) -> I) {
    type P = *const c_void;
    type Two = unsafe extern "C" fn(P, P, P, P, P, P, P, P, P, P, usize, usize);
    type Symm = unsafe extern "C" fn(P, P, P, P, P, P, P, P, P, P, P, P, usize, usize);
    type Gemm = unsafe extern "C" fn(P, P, P, P, P, P, P, P, P, P, P, P, P, usize, usize);
    type Tri = unsafe extern "C" fn(P, P, P, P, P, P, P, P, P, P, P, usize, usize, usize, usize);
    let chars = call.chars.map(|c| c as c_char);
    let [ch0, ch1, ch2, ch3] = [0, 1, 2, 3].map(|i| (&chars[i] as *const c_char).cast::<c_void>());
    let [m, n, k, lda, ldb, ldc] = [call.m, call.n, call.k, call.lda, call.ldb, call.ldc].map(int);
    let p = |x: &I| (x as *const I).cast::<c_void>();
    let alpha = (&call.alpha as *const T).cast::<c_void>();
    let beta = (&call.beta as *const T).cast::<c_void>();
    let (a, b, c) = (
        call.a.cast::<c_void>(),
        call.b.cast::<c_void>(),
        call.c.cast_const().cast::<c_void>(),
    );
    match call.routine {
        Routine::Gemm => std::mem::transmute::<*mut c_void, Gemm>(address)(
            ch0,
            ch1,
            p(&m),
            p(&n),
            p(&k),
            alpha,
            a,
            p(&lda),
            b,
            p(&ldb),
            beta,
            c,
            p(&ldc),
            1,
            1,
        ),
        Routine::Syrk | Routine::Herk => std::mem::transmute::<*mut c_void, Two>(address)(
            ch0,
            ch1,
            p(&n),
            p(&k),
            alpha,
            a,
            p(&lda),
            beta,
            c,
            p(&ldc),
            1,
            1,
        ),
        // SYMM's (M, N) where SYR2K has (N, K): the same signature.
        Routine::Symm | Routine::Hemm | Routine::Syr2k | Routine::Her2k => {
            let (x, y) = if matches!(call.routine, Routine::Symm | Routine::Hemm) {
                (&m, &n)
            } else {
                (&n, &k)
            };
            std::mem::transmute::<*mut c_void, Symm>(address)(
                ch0,
                ch1,
                p(x),
                p(y),
                alpha,
                a,
                p(&lda),
                b,
                p(&ldb),
                beta,
                c,
                p(&ldc),
                1,
                1,
            )
        }
        Routine::Trmm | Routine::Trsm => std::mem::transmute::<*mut c_void, Tri>(address)(
            ch0,
            ch1,
            ch2,
            ch3,
            p(&m),
            p(&n),
            alpha,
            a,
            p(&lda),
            c,
            p(&ldc),
            1,
            1,
            1,
            1,
        ),
    }
}

fn lookup(handle: *mut c_void, name: &str) -> Option<*mut c_void> {
    let name = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name and one of dlsym's pseudo-handles.
    let found = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

/// The object file that defines `address`.
fn library_of(address: *mut c_void) -> String {
    // SAFETY: dladdr only reads the loader's tables; `info` is written on success.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(address, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        let name = name.to_string_lossy().into_owned();
        // The real file, so that a symlink switched by update-alternatives keys a new model.
        return std::fs::canonicalize(&name)
            .map(|p| p.display().to_string())
            .unwrap_or(name);
    }
    "an unnamed object".into()
}

/// The BLAS after this library, found by its GEMM once per process: the next definition of
/// `sgemm_` (`dgemm_` …), else that of a `libblas.so.3` already loaded outside the global scope
/// (Python loads numpy's extension, and with it its BLAS, that way). `None` when this library is
/// the only BLAS.
pub fn next<T: Scalar>() -> Option<&'static Next<T>> {
    fn found<T: Scalar>() -> Option<Next<T>> {
        let gemm = format!("{}gemm_", T::LETTER as char);
        let (handle, address) = match lookup(libc::RTLD_NEXT, &gemm) {
            Some(address) => (libc::RTLD_NEXT, address),
            None => {
                // SAFETY: RTLD_NOLOAD opens nothing new: a handle to the loaded library, if any.
                let handle = unsafe {
                    libc::dlopen(
                        c"libblas.so.3".as_ptr(),
                        libc::RTLD_LAZY | libc::RTLD_NOLOAD,
                    )
                };
                if handle.is_null() {
                    return None;
                }
                // This library, if it was loaded under that name, is not a BLAS underneath.
                let address = lookup(handle, &gemm).filter(|&a| library_of(a) != own_library())?;
                (handle, address)
            }
        };
        let library = library_of(address);
        let name = library.rsplit('/').next().unwrap_or(&library);
        let routines = std::array::from_fn(|i| {
            let lock = OnceLock::new();
            if i == Routine::Gemm.index() {
                let _ = lock.set(Some(address as usize));
            }
            lock
        });
        Some(Next {
            handle: handle as usize,
            routines,
            // libtilemm_blas64.so is put in front of a 64-bit-integer BLAS only.
            ilp64: cfg!(feature = "ilp64") || name.contains("blas64") || name.contains("ilp64"),
            library,
            element: PhantomData,
        })
    }
    T::found().next.get_or_init(found::<T>).as_ref()
}

/// The file this library was loaded from.
fn own_library() -> String {
    library_of(own_library as *mut c_void)
}

/// Whether the BLAS underneath, and so the program, uses 64-bit integers.
fn ilp64() -> bool {
    cfg!(feature = "ilp64")
        || next::<f64>().is_some_and(|n| n.ilp64)
        || next::<f32>().is_some_and(|n| n.ilp64)
}

// "C-unwind": a host's handler may unwind (a C++ exception) through these frames.
type Xerbla = unsafe extern "C-unwind" fn(*const c_char, *const c_void, usize);
type CblasXerbla = unsafe extern "C-unwind" fn(i64, *const c_char, *const c_char, ...);

/// Reports parameter `number` of `routine` (`"SGEMM "`) as wrong through the first `xerbla_`
/// the program can see (its own, else its BLAS's), as the reference GEMM does; with none, the
/// reference's message on stderr.
pub fn xerbla(routine: &str, number: c_int) {
    match lookup(libc::RTLD_DEFAULT, "xerbla_") {
        Some(address) => {
            // SAFETY: xerbla_ is Fortran's XERBLA(SRNAME, INFO): a name, an integer (of the
            // program's width) by reference and the name's hidden length.
            let handler = unsafe { std::mem::transmute::<*mut c_void, Xerbla>(address) };
            let (info32, info64) = (number, i64::from(number));
            let info: *const c_void = if ilp64() {
                (&info64 as *const i64).cast()
            } else {
                (&info32 as *const c_int).cast()
            };
            unsafe { handler(routine.as_ptr().cast(), info, routine.len()) };
        }
        None => {
            let _ = writeln!(
                std::io::stderr(),
                " ** On entry to {} parameter number {number} had an illegal value",
                routine.trim_end()
            );
        }
    }
}

/// Reports a CBLAS refusal through `cblas_xerbla` as the reference CBLAS does (its message
/// is a printf format: passed as an argument, never as the format).
pub fn cblas_xerbla(routine: &str, number: c_int, message: &str) {
    let (Ok(name), Ok(text)) = (CString::new(routine), CString::new(format!("{message}\n"))) else {
        return;
    };
    match lookup(libc::RTLD_DEFAULT, "cblas_xerbla") {
        Some(address) => {
            // SAFETY: cblas_xerbla(CBLAS_INT info, const char *rout, const char *form, ...):
            // an int, or a 64-bit one, passed in a 64-bit register either way.
            let handler = unsafe { std::mem::transmute::<*mut c_void, CblasXerbla>(address) };
            unsafe {
                handler(
                    i64::from(number),
                    name.as_ptr(),
                    c"%s".as_ptr(),
                    text.as_ptr(),
                )
            };
        }
        None => {
            let _ = writeln!(
                std::io::stderr(),
                "Parameter {number} to routine {routine} was incorrect\n{message}"
            );
        }
    }
}

/// The reference CBLAS's globals `RowMajorStrg` and `CBLAS_CallFromC`, set around a call as it
/// sets them: a CBLAS-aware `xerbla_` (a test program's) reads them to renumber a row-major
/// call's parameters. Absent where no reference CBLAS is loaded.
pub fn set_cblas_globals(row_major: bool, from_c: bool) {
    // Looked up once: a small product must not pay two dlsym calls.
    struct Globals([Option<usize>; 2]);
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    let globals = GLOBALS.get_or_init(|| {
        Globals(
            ["RowMajorStrg", "CBLAS_CallFromC"]
                .map(|name| lookup(libc::RTLD_DEFAULT, name).map(|a| a as usize)),
        )
    });
    for (address, value) in globals.0.iter().zip([row_major, from_c]) {
        if let Some(address) = *address {
            // SAFETY: both are C `int` globals of the reference CBLAS, written as it writes
            // them (unsynchronised, as there).
            unsafe { *(address as *mut c_int) = value as c_int };
        }
    }
}
