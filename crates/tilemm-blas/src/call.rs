//! One Level-3 call as the Fortran interface describes it (column-major), its argument check
//! with the reference BLAS's parameter numbers, and the CBLAS call turned into it as the
//! reference CBLAS does (row-major: the same routine on the transposes).

use std::os::raw::c_int;

pub use tilemm::complex::{Complex, ComplexPart};

/// An element type the library exports Level 3 for: f32 and f64 (`sgemm` … `strsm`), complex64
/// and complex128 (`cgemm` … `ztrsm`, with `hemm`, `herk` and `her2k`).
pub trait Scalar: tilemm::level3::Scalar {
    /// The routines' first letter: `s`, `d`, `c` or `z`.
    const LETTER: u8;
    /// Whether the type is complex.
    const COMPLEX: bool;
    /// The precision computed, as the routing model keys GEMM (other routines add their name).
    const PRECISION: &'static str;
    /// tilemm's type of its parts (the type itself for a real one).
    type Part: ComplexPart;
    /// What this process found for the type, once: the BLAS underneath, the routes.
    fn found() -> &'static crate::Found<Self>;
    /// `z` rounded to this type (a real type drops the imaginary part, zero where it is used).
    fn narrow(z: Complex<f64>) -> Self;
}

macro_rules! scalar {
    ($t:ty, $part:ty, $letter:literal, $complex:literal, $precision:literal) => {
        impl Scalar for $t {
            const LETTER: u8 = $letter;
            const COMPLEX: bool = $complex;
            const PRECISION: &'static str = $precision;
            type Part = $part;
            fn found() -> &'static crate::Found<Self> {
                static FOUND: crate::Found<$t> = crate::Found::new();
                &FOUND
            }
            fn narrow(z: Complex<f64>) -> Self {
                <$t as Narrow>::from_c128(z)
            }
        }
    };
}

/// Rounding from complex128, per type.
trait Narrow {
    fn from_c128(z: Complex<f64>) -> Self;
}
impl Narrow for f32 {
    fn from_c128(z: Complex<f64>) -> Self {
        z.re as f32
    }
}
impl Narrow for f64 {
    fn from_c128(z: Complex<f64>) -> Self {
        z.re
    }
}
impl Narrow for Complex<f32> {
    fn from_c128(z: Complex<f64>) -> Self {
        Complex::new(z.re as f32, z.im as f32)
    }
}
impl Narrow for Complex<f64> {
    fn from_c128(z: Complex<f64>) -> Self {
        z
    }
}

scalar!(f32, f32, b's', false, "f32");
scalar!(f64, f64, b'd', false, "f64");
scalar!(Complex<f32>, f32, b'c', true, "c64");
scalar!(Complex<f64>, f64, b'z', true, "c128");

/// The Level-3 routines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Routine {
    /// C = α·op(A)·op(B) + β·C.
    Gemm,
    /// C = α·A·B + β·C (or α·B·A + β·C), A symmetric.
    Symm,
    /// As `Symm`, A Hermitian.
    Hemm,
    /// C = α·op(A)·op(A)ᵀ + β·C on a triangle.
    Syrk,
    /// C = α·op(A)·op(A)ᴴ + β·C on a triangle, α and β real.
    Herk,
    /// C = α·op(A)·op(B)ᵀ + α·op(B)·op(A)ᵀ + β·C on a triangle.
    Syr2k,
    /// C = α·op(A)·op(B)ᴴ + ᾱ·op(B)·op(A)ᴴ + β·C on a triangle, β real.
    Her2k,
    /// B = α·op(A)·B (or α·B·op(A)), A triangular.
    Trmm,
    /// Solves op(A)·X = α·B (or X·op(A) = α·B) for X over B, A triangular.
    Trsm,
}

impl Routine {
    /// Every routine, in the order of [`Routine::index`].
    pub const ALL: [Routine; 9] = [
        Routine::Gemm,
        Routine::Symm,
        Routine::Hemm,
        Routine::Syrk,
        Routine::Herk,
        Routine::Syr2k,
        Routine::Her2k,
        Routine::Trmm,
        Routine::Trsm,
    ];

    /// The name without its type letter: `gemm`, `syr2k`.
    pub fn name(self) -> &'static str {
        [
            "gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm",
        ][self.index()]
    }

    /// Its place in [`Routine::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name as the reference passes it to `xerbla_`: `DSYRK `, six characters.
    pub fn xerbla_name(self, letter: u8) -> String {
        let name = format!("{}{}", letter as char, self.name()).to_ascii_uppercase();
        format!("{name:<6}")
    }

    /// Whether the routine's matrix is Hermitian (`hemm`, `herk`, `her2k`).
    pub fn hermitian(self) -> bool {
        matches!(self, Routine::Hemm | Routine::Herk | Routine::Her2k)
    }

    /// The kinds of its character arguments, in order (the CBLAS enumerations').
    fn kinds(self) -> &'static [Kind] {
        use Kind::*;
        match self {
            Routine::Gemm => &[TransA, TransB],
            Routine::Symm | Routine::Hemm => &[Side, Uplo],
            Routine::Trmm | Routine::Trsm => &[Side, Uplo, Trans, Diag],
            _ => &[Uplo, Trans],
        }
    }
}

/// What a character argument says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    TransA,
    TransB,
    Trans,
    Side,
    Uplo,
    Diag,
}

/// op(X): X, its transpose, or its conjugate transpose (the transpose for reals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// X.
    N,
    /// Xᵀ.
    T,
    /// Xᴴ.
    C,
}

impl Op {
    /// The Fortran character (either case), or `None` for any other.
    pub fn from_char(c: u8) -> Option<Op> {
        match c.to_ascii_uppercase() {
            b'N' => Some(Op::N),
            b'T' => Some(Op::T),
            b'C' => Some(Op::C),
            _ => None,
        }
    }
}

/// The BLAS's integer: 4 bytes, or 8 in the 64-bit-integer library (`libtilemm_blas64.so`,
/// the `ilp64` feature), as `libblas64` and the programs built for it pass them.
#[cfg(not(feature = "ilp64"))]
pub type BlasInt = c_int;
/// The BLAS's integer: 8 bytes in this 64-bit-integer build.
#[cfg(feature = "ilp64")]
pub type BlasInt = i64;

/// A Fortran-interface Level-3 call (integers held in 64 bits, whatever the caller's width),
/// column-major. The matrix written is always `c`, m×n with leading dimension `ldc`: C for
/// GEMM, SYMM and the updates (n×n there, `m` = `n`), B for TRMM and TRSM.
#[derive(Clone, Copy, Debug)]
pub struct Call<T> {
    /// Which routine.
    pub routine: Routine,
    /// The character arguments as given, in the routine's order (checked by
    /// [`Call::check`]): GEMM's TRANSA and TRANSB; SYMM's SIDE and UPLO; the updates' UPLO and
    /// TRANS; TRMM's and TRSM's SIDE, UPLO, TRANSA and DIAG. Unused ones are `N`.
    pub chars: [u8; 4],
    /// M as given (N for the updates).
    pub m: i64,
    /// N.
    pub n: i64,
    /// K as given (GEMM and the updates; 0 for the others).
    pub k: i64,
    /// α.
    pub alpha: T,
    /// A and its leading dimension.
    pub a: *const T,
    /// lda.
    pub lda: i64,
    /// B (GEMM, SYMM, rank 2k; null for the others).
    pub b: *const T,
    /// ldb.
    pub ldb: i64,
    /// β (zero where the routine has none).
    pub beta: T,
    /// The matrix written.
    pub c: *mut T,
    /// Its leading dimension.
    pub ldc: i64,
}

/// What a checked call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Nothing: an empty result, or (α = 0 or K = 0) and β = 1.
    None,
    /// Scaling only (α = 0, or K = 0 in GEMM and the updates), which the reference computes
    /// without reading A or B.
    Scale,
    /// The product.
    Product,
}

impl<T: Scalar> Call<T> {
    /// An empty call of `routine` (every field set by the entry point).
    pub fn new(routine: Routine) -> Self {
        Call {
            routine,
            chars: [b'N'; 4],
            m: 0,
            n: 0,
            k: 0,
            alpha: T::zero(),
            a: std::ptr::null(),
            lda: 0,
            b: std::ptr::null(),
            ldb: 0,
            beta: T::zero(),
            c: std::ptr::null_mut(),
            ldc: 0,
        }
    }

    /// Character argument `i`, upper case.
    pub fn char(&self, i: usize) -> u8 {
        self.chars[i].to_ascii_uppercase()
    }

    /// The character arguments the routine has, as given.
    pub fn given_chars(&self) -> &[u8] {
        &self.chars[..self.routine.kinds().len()]
    }

    /// The reference's argument check, in its order: `Err(n)` names the first parameter that
    /// is wrong by its number (GEMM: TRANSA 1, TRANSB 2, M 3, N 4, K 5, LDA 8, LDB 10, LDC
    /// 13; the others as their reference routines number them).
    pub fn check(&self) -> Result<Work, c_int> {
        let (m, n, k) = (self.m, self.n, self.k);
        let is = |i: usize, set: &[u8]| set.contains(&self.char(i));
        let max1 = |x: i64| x.max(1);
        // The first wrong parameter of the checks, in the reference's order (on the stack:
        // every call of the host program passes here).
        let first = |checks: &[(bool, c_int)]| checks.iter().find(|(bad, _)| *bad).map(|c| c.1);
        // The transposes a routine takes: the complex syrk and syr2k have no conjugate, herk
        // and her2k no plain transpose.
        let trans: &[u8] = match self.routine {
            Routine::Syrk | Routine::Syr2k if T::COMPLEX => b"NT",
            Routine::Herk | Routine::Her2k => b"NC",
            _ => b"NTC",
        };
        let (wrong, empty, no_product) = match self.routine {
            Routine::Gemm => {
                let rows_a = if self.char(0) == b'N' { m } else { k };
                let rows_b = if self.char(1) == b'N' { k } else { n };
                (
                    first(&[
                        (!is(0, trans), 1),
                        (!is(1, trans), 2),
                        (m < 0, 3),
                        (n < 0, 4),
                        (k < 0, 5),
                        (self.lda < max1(rows_a), 8),
                        (self.ldb < max1(rows_b), 10),
                        (self.ldc < max1(m), 13),
                    ]),
                    m == 0 || n == 0,
                    self.alpha == T::zero() || k == 0,
                )
            }
            Routine::Symm | Routine::Hemm => {
                let rows_a = if self.char(0) == b'L' { m } else { n };
                (
                    first(&[
                        (!is(0, b"LR"), 1),
                        (!is(1, b"UL"), 2),
                        (m < 0, 3),
                        (n < 0, 4),
                        (self.lda < max1(rows_a), 7),
                        (self.ldb < max1(m), 9),
                        (self.ldc < max1(m), 12),
                    ]),
                    m == 0 || n == 0,
                    self.alpha == T::zero(),
                )
            }
            Routine::Syrk | Routine::Herk | Routine::Syr2k | Routine::Her2k => {
                let rows_a = if self.char(1) == b'N' { n } else { k };
                let two = matches!(self.routine, Routine::Syr2k | Routine::Her2k);
                (
                    first(&[
                        (!is(0, b"UL"), 1),
                        (!is(1, trans), 2),
                        (n < 0, 3),
                        (k < 0, 4),
                        (self.lda < max1(rows_a), 7),
                        (two && self.ldb < max1(rows_a), 9),
                        (self.ldc < max1(n), if two { 12 } else { 10 }),
                    ]),
                    n == 0,
                    self.alpha == T::zero() || k == 0,
                )
            }
            Routine::Trmm | Routine::Trsm => {
                let rows_a = if self.char(0) == b'L' { m } else { n };
                (
                    first(&[
                        (!is(0, b"LR"), 1),
                        (!is(1, b"UL"), 2),
                        (!is(2, b"NTC"), 3),
                        (!is(3, b"UN"), 4),
                        (m < 0, 5),
                        (n < 0, 6),
                        (self.lda < max1(rows_a), 9),
                        (self.ldc < max1(m), 11),
                    ]),
                    m == 0 || n == 0,
                    self.alpha == T::zero(),
                )
            }
        };
        if let Some(number) = wrong {
            return Err(number);
        }
        // TRMM and TRSM have no β: α = 0 writes zeros.
        let keeps_c =
            !matches!(self.routine, Routine::Trmm | Routine::Trsm) && self.beta == T::one();
        Ok(if empty || (no_product && keeps_c) {
            Work::None
        } else if no_product {
            Work::Scale
        } else {
            Work::Product
        })
    }

    /// The number of multiply-adds, as a float (the model's measure of size).
    pub fn fmas(&self) -> f64 {
        let [m, n, k] = [self.m, self.n, self.k].map(|x| x as f64);
        let left = self.char(0) == b'L';
        match self.routine {
            Routine::Gemm => m * n * k,
            Routine::Symm | Routine::Hemm => m * n * if left { m } else { n },
            Routine::Syrk | Routine::Herk => n * (n + 1.0) / 2.0 * k,
            Routine::Syr2k | Routine::Her2k => n * (n + 1.0) * k,
            Routine::Trmm | Routine::Trsm => {
                if left {
                    m * (m + 1.0) / 2.0 * n
                } else {
                    n * (n + 1.0) / 2.0 * m
                }
            }
        }
    }

    /// A CBLAS call, held in this call with its enumeration arguments (`enums`, in the
    /// routine's order) still to read, as the reference CBLAS makes it a Fortran call:
    /// column-major as it is; row-major as the column-major call on the transposes (sides and
    /// triangles swapped, M and N, GEMM's A and B; the updates' transposes turned, her2k's α
    /// conjugated). Returns the call and whether it was row-major.
    pub fn from_cblas(
        mut self,
        layout: c_int,
        enums: &[c_int],
    ) -> Result<(Call<T>, bool), CblasRefusal> {
        let row_major = match layout {
            cblas::COL_MAJOR => false,
            cblas::ROW_MAJOR => true,
            other => return Err(CblasRefusal::new(1, "layout", other)),
        };
        for (i, (&kind, &value)) in self.routine.kinds().iter().zip(enums).enumerate() {
            use cblas::*;
            let char = match (kind, value) {
                (Kind::TransA | Kind::TransB | Kind::Trans, NO_TRANS) => b'N',
                (Kind::TransA | Kind::TransB | Kind::Trans, TRANS) => b'T',
                (Kind::TransA | Kind::TransB | Kind::Trans, CONJ_TRANS) => b'C',
                (Kind::Side, LEFT) => b'L',
                (Kind::Side, RIGHT) => b'R',
                (Kind::Uplo, UPPER) => b'U',
                (Kind::Uplo, LOWER) => b'L',
                (Kind::Diag, UNIT) => b'U',
                (Kind::Diag, NON_UNIT) => b'N',
                _ => {
                    // The reference's row-major GEMM reports a wrong TransB as parameter 2
                    // (its quirk, which programs that catch the error see).
                    let number = if kind == Kind::TransB && row_major {
                        2
                    } else {
                        i + 2
                    };
                    return Err(CblasRefusal::new(number as c_int, kind.name(), value));
                }
            };
            self.chars[i] = char;
        }
        if !row_major {
            return Ok((self, false));
        }
        let flip = |c: u8, x: u8, y: u8| if c == x { y } else { x };
        let mut call = self;
        match self.routine {
            Routine::Gemm => {
                call.chars = [self.chars[1], self.chars[0], b'N', b'N'];
                (call.m, call.n) = (self.n, self.m);
                (call.a, call.lda, call.b, call.ldb) = (self.b, self.ldb, self.a, self.lda);
            }
            Routine::Symm | Routine::Hemm | Routine::Trmm | Routine::Trsm => {
                call.chars[0] = flip(self.chars[0], b'L', b'R');
                call.chars[1] = flip(self.chars[1], b'U', b'L');
                (call.m, call.n) = (self.n, self.m);
            }
            _ => {
                call.chars[0] = flip(self.chars[0], b'U', b'L');
                let hermitian = self.routine.hermitian();
                call.chars[1] = match (self.chars[1], hermitian, T::COMPLEX) {
                    (b'N', false, _) => b'T',
                    (b'T', false, _) | (b'C', false, false) => b'N',
                    (b'N', true, _) => b'C',
                    (b'C', true, _) => b'N',
                    (_, _, _) => {
                        return Err(CblasRefusal::new(3, "Trans", enums[1]));
                    }
                };
                if self.routine == Routine::Her2k {
                    call.alpha = self.alpha.conj();
                }
            }
        }
        Ok((call, true))
    }
}

impl Kind {
    /// Its name in the reference CBLAS's messages.
    fn name(self) -> &'static str {
        match self {
            Kind::TransA => "TransA",
            Kind::TransB => "TransB",
            Kind::Trans => "Trans",
            Kind::Side => "Side",
            Kind::Uplo => "Uplo",
            Kind::Diag => "Diag",
        }
    }
}

/// The CBLAS enumerations' values.
pub mod cblas {
    use std::os::raw::c_int;
    /// `CblasRowMajor`.
    pub const ROW_MAJOR: c_int = 101;
    /// `CblasColMajor`.
    pub const COL_MAJOR: c_int = 102;
    /// `CblasNoTrans`.
    pub const NO_TRANS: c_int = 111;
    /// `CblasTrans`.
    pub const TRANS: c_int = 112;
    /// `CblasConjTrans`.
    pub const CONJ_TRANS: c_int = 113;
    /// `CblasUpper`.
    pub const UPPER: c_int = 121;
    /// `CblasLower`.
    pub const LOWER: c_int = 122;
    /// `CblasNonUnit`.
    pub const NON_UNIT: c_int = 131;
    /// `CblasUnit`.
    pub const UNIT: c_int = 132;
    /// `CblasLeft`.
    pub const LEFT: c_int = 141;
    /// `CblasRight`.
    pub const RIGHT: c_int = 142;
}

/// Why a CBLAS call was refused before it became a Fortran call: the parameter number the
/// reference CBLAS passes to `cblas_xerbla`, and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CblasRefusal {
    /// 1 (layout), then the enumeration arguments from 2, as the reference CBLAS 3.11
    /// numbers them.
    pub number: c_int,
    /// "Illegal TransA setting, 7", say.
    pub message: String,
}

impl CblasRefusal {
    fn new(number: c_int, what: &str, value: c_int) -> Self {
        CblasRefusal {
            number,
            message: format!("Illegal {what} setting, {value}"),
        }
    }
}
