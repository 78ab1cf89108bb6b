//! The symbols found at run time: the BLAS underneath (the next definition of `sgemm_`, after
//! this library), and the error handlers and CBLAS globals the program or its BLAS defines.
//! This library defines no `xerbla_`: a test program's own must be the one called.

use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;

use crate::call::{Call, Real};

/// The Fortran GEMM's signature: every argument by reference, the two hidden lengths of the
/// character arguments last.
pub type FortranGemm<T> = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const c_int,
    *const c_int,
    *const c_int,
    *const T,
    *const T,
    *const c_int,
    *const T,
    *const c_int,
    *const T,
    *mut T,
    *const c_int,
    usize,
    usize,
);

/// The BLAS underneath: its GEMM and the file it is in.
pub struct Next<T> {
    gemm: FortranGemm<T>,
    /// The shared object that defines it (the model keys its speeds by it).
    pub library: String,
}

impl<T: Real> Next<T> {
    /// Runs `call` on the BLAS underneath.
    ///
    /// # Safety
    /// `call`'s pointers must be valid for its shape, as for any BLAS.
    pub unsafe fn gemm(&self, call: &Call<T>) {
        let [ta, tb] = call.trans.map(|c| c as c_char);
        (self.gemm)(
            &ta,
            &tb,
            &call.m,
            &call.n,
            &call.k,
            &call.alpha,
            call.a,
            &call.lda,
            call.b,
            &call.ldb,
            &call.beta,
            call.c,
            &call.ldc,
            1,
            1,
        );
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

/// The next `sgemm_` (`dgemm_`) after this library, once per process; else that of a
/// `libblas.so.3` already loaded outside the global scope (Python loads numpy's extension, and
/// with it its BLAS, that way). `None` when this library is the only BLAS.
pub fn next<T: Real>() -> Option<&'static Next<T>> {
    fn found<T: Real>() -> Option<Next<T>> {
        let address = lookup(libc::RTLD_NEXT, T::FORTRAN).or_else(|| {
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
            lookup(handle, T::FORTRAN).filter(|&a| library_of(a) != own_library())
        })?;
        Some(Next {
            // SAFETY: the symbol is a Fortran GEMM of this signature, by the BLAS's ABI.
            gemm: unsafe { std::mem::transmute::<*mut c_void, FortranGemm<T>>(address) },
            library: library_of(address),
        })
    }
    static SINGLE: OnceLock<Option<Next<f32>>> = OnceLock::new();
    static DOUBLE: OnceLock<Option<Next<f64>>> = OnceLock::new();
    let any: &dyn std::any::Any = if T::FORTRAN == f32::FORTRAN {
        SINGLE.get_or_init(found::<f32>)
    } else {
        DOUBLE.get_or_init(found::<f64>)
    };
    any.downcast_ref::<Option<Next<T>>>()?.as_ref()
}

/// The file this library was loaded from.
fn own_library() -> String {
    library_of(own_library as *mut c_void)
}

type Xerbla = unsafe extern "C" fn(*const c_char, *const c_int, usize);
type CblasXerbla = unsafe extern "C" fn(c_int, *const c_char, *const c_char, ...);

/// Reports parameter `number` of `routine` (`"SGEMM "`) as wrong through the first `xerbla_`
/// the program can see (its own, else its BLAS's), as the reference GEMM does; with none, the
/// reference's message on stderr.
pub fn xerbla(routine: &str, number: c_int) {
    match lookup(libc::RTLD_DEFAULT, "xerbla_") {
        Some(address) => {
            // SAFETY: xerbla_ is Fortran's XERBLA(SRNAME, INFO): a name, an integer by
            // reference and the name's hidden length.
            let handler = unsafe { std::mem::transmute::<*mut c_void, Xerbla>(address) };
            unsafe { handler(routine.as_ptr().cast(), &number, routine.len()) };
        }
        None => eprintln!(
            " ** On entry to {} parameter number {number} had an illegal value",
            routine.trim_end()
        ),
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
            // SAFETY: cblas_xerbla(int info, const char *rout, const char *form, ...).
            let handler = unsafe { std::mem::transmute::<*mut c_void, CblasXerbla>(address) };
            unsafe { handler(number, name.as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
        }
        None => eprintln!("Parameter {number} to routine {routine} was incorrect\n{message}"),
    }
}

/// The reference CBLAS's globals `RowMajorStrg` and `CBLAS_CallFromC`, set around a call as it
/// sets them: a CBLAS-aware `xerbla_` (a test program's) reads them to renumber a row-major
/// call's parameters. Absent where no reference CBLAS is loaded.
pub fn set_cblas_globals(row_major: bool, from_c: bool) {
    for (name, value) in [("RowMajorStrg", row_major), ("CBLAS_CallFromC", from_c)] {
        if let Some(address) = lookup(libc::RTLD_DEFAULT, name) {
            // SAFETY: both are C `int` globals of the reference CBLAS.
            unsafe { *(address as *mut c_int) = value as c_int };
        }
    }
}
