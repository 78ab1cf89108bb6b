//! One GEMM call as the Fortran interface describes it (column-major, C = α·op(A)·op(B) + β·C),
//! its argument check with the reference BLAS's parameter numbers, and the CBLAS call turned
//! into it as the reference CBLAS does (row-major: the transposed product, A and B swapped).

use std::os::raw::c_int;

use ndarray::{ArrayView2, ArrayViewMut2};
pub use tilemm::complex::{Complex, ComplexPart};

/// An element type the library exports GEMM for: f32 and f64 (`sgemm`, `dgemm`), complex64
/// and complex128 (`cgemm`, `zgemm`).
pub trait Scalar: Copy + PartialEq + std::ops::Mul<Output = Self> + Send + Sync + 'static {
    /// Zero and one, for the reference's special cases.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The routine's name as the reference passes it to `xerbla_` (six characters).
    const XERBLA_NAME: &'static str;
    /// The Fortran symbol (`sgemm_`).
    const FORTRAN: &'static str;
    /// The CBLAS symbol (`cblas_sgemm`).
    const CBLAS: &'static str;
    /// The precision computed, as the routing model keys it.
    const PRECISION: &'static str;
    /// tilemm's type of its parts (the type itself for a real one).
    type Part: ComplexPart;
    /// What this process found for the type, once: the BLAS underneath, the routes.
    fn found() -> &'static crate::Found<Self>;
    /// The value as a complex f64, exactly.
    fn widen(self) -> Complex<f64>;
    /// `z` rounded to this type (a real type drops the imaginary part, zero where it is used).
    fn narrow(z: Complex<f64>) -> Self;
    /// C = α·op(A)·op(B) + β·C by `gemm` on views of the caller's memory (`conj`: which
    /// operand enters conjugated; a real type has no conjugate).
    fn write(
        gemm: tilemm::Gemm<'_>,
        views: (ArrayView2<Self>, ArrayView2<Self>, ArrayViewMut2<Self>),
        scalars: (Self, Self),
        conj: [bool; 2],
    ) -> tilemm::Result<tilemm::GemmRun>;
}

macro_rules! real {
    ($t:ty, $xerbla:literal, $fortran:literal, $cblas:literal, $precision:literal) => {
        impl Scalar for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const XERBLA_NAME: &'static str = $xerbla;
            const FORTRAN: &'static str = $fortran;
            const CBLAS: &'static str = $cblas;
            const PRECISION: &'static str = $precision;
            type Part = $t;
            fn found() -> &'static crate::Found<Self> {
                static FOUND: crate::Found<$t> = crate::Found::new();
                &FOUND
            }
            fn widen(self) -> Complex<f64> {
                Complex::new(self.into(), 0.0)
            }
            fn narrow(z: Complex<f64>) -> Self {
                z.re as $t
            }
            fn write(
                gemm: tilemm::Gemm<'_>,
                (a, b, c): (ArrayView2<Self>, ArrayView2<Self>, ArrayViewMut2<Self>),
                (alpha, beta): (Self, Self),
                _conj: [bool; 2],
            ) -> tilemm::Result<tilemm::GemmRun> {
                gemm.alpha(alpha.into()).beta(beta.into()).write(a, b, c)
            }
        }
    };
}

macro_rules! complex {
    ($part:ty, $xerbla:literal, $fortran:literal, $cblas:literal, $precision:literal) => {
        impl Scalar for Complex<$part> {
            const ZERO: Self = Complex::new(0.0, 0.0);
            const ONE: Self = Complex::new(1.0, 0.0);
            const XERBLA_NAME: &'static str = $xerbla;
            const FORTRAN: &'static str = $fortran;
            const CBLAS: &'static str = $cblas;
            const PRECISION: &'static str = $precision;
            type Part = $part;
            fn found() -> &'static crate::Found<Self> {
                static FOUND: crate::Found<Complex<$part>> = crate::Found::new();
                &FOUND
            }
            fn widen(self) -> Complex<f64> {
                Complex::new(self.re.into(), self.im.into())
            }
            fn narrow(z: Complex<f64>) -> Self {
                Complex::new(z.re as $part, z.im as $part)
            }
            fn write(
                gemm: tilemm::Gemm<'_>,
                (a, b, c): (ArrayView2<Self>, ArrayView2<Self>, ArrayViewMut2<Self>),
                (alpha, beta): (Self, Self),
                conj: [bool; 2],
            ) -> tilemm::Result<tilemm::GemmRun> {
                gemm.complex()
                    .conjugate(conj[0], conj[1])
                    .alpha(alpha.widen())
                    .beta(beta.widen())
                    .write(a, b, c)
            }
        }
    };
}

real!(f32, "SGEMM ", "sgemm_", "cblas_sgemm", "f32");
real!(f64, "DGEMM ", "dgemm_", "cblas_dgemm", "f64");
complex!(f32, "CGEMM ", "cgemm_", "cblas_cgemm", "c64");
complex!(f64, "ZGEMM ", "zgemm_", "cblas_zgemm", "c128");

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

/// A Fortran-interface GEMM call (integers held in 64 bits, whatever the caller's width): C (m×n, leading dimension ldc) = α·op(A)·op(B) + β·C, with
/// op(A) m×k and op(B) k×n, all column-major.
#[derive(Clone, Copy, Debug)]
pub struct Call<T> {
    /// The characters as given (checked by [`Call::check`]).
    pub trans: [u8; 2],
    /// M, N, K as given.
    pub m: i64,
    /// N.
    pub n: i64,
    /// K.
    pub k: i64,
    /// α.
    pub alpha: T,
    /// A and its leading dimension.
    pub a: *const T,
    /// lda.
    pub lda: i64,
    /// B.
    pub b: *const T,
    /// ldb.
    pub ldb: i64,
    /// β.
    pub beta: T,
    /// C.
    pub c: *mut T,
    /// ldc.
    pub ldc: i64,
}

/// What a checked call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Nothing: M or N is 0, or (α = 0 or K = 0) and β = 1.
    None,
    /// C = β·C only (α = 0 or K = 0), which the reference computes without reading A and B.
    Scale,
    /// The product.
    Product,
}

impl<T: Scalar> Call<T> {
    /// op(A) and op(B).
    pub fn ops(&self) -> [Op; 2] {
        self.trans.map(|c| Op::from_char(c).unwrap_or(Op::N))
    }

    /// The reference's argument check, in its order: `Err(n)` names the first parameter that
    /// is wrong by its number (TRANSA 1, TRANSB 2, M 3, N 4, K 5, LDA 8, LDB 10, LDC 13).
    pub fn check(&self) -> Result<Work, c_int> {
        let [ta, tb] = self.trans.map(Op::from_char);
        let (Some(ta), Some(tb)) = (ta, tb) else {
            return Err(if ta.is_none() { 1 } else { 2 });
        };
        let rows_a = if ta == Op::N { self.m } else { self.k };
        let rows_b = if tb == Op::N { self.k } else { self.n };
        let wrong = [
            (self.m < 0, 3),
            (self.n < 0, 4),
            (self.k < 0, 5),
            (self.lda < rows_a.max(1), 8),
            (self.ldb < rows_b.max(1), 10),
            (self.ldc < self.m.max(1), 13),
        ];
        if let Some(&(_, number)) = wrong.iter().find(|(bad, _)| *bad) {
            return Err(number);
        }
        let no_product = self.alpha == T::ZERO || self.k == 0;
        Ok(
            if self.m == 0 || self.n == 0 || (no_product && self.beta == T::ONE) {
                Work::None
            } else if no_product {
                Work::Scale
            } else {
                Work::Product
            },
        )
    }

    /// C = β·C, as the reference does it: β = 0 writes zeros without reading C (a NaN there
    /// does not survive).
    ///
    /// # Safety
    /// C must hold the m×n block the call describes, with leading dimension ldc.
    pub unsafe fn scale(&self) {
        for j in 0..self.n as usize {
            let column = self.c.add(j * self.ldc as usize);
            for i in 0..self.m as usize {
                let x = column.add(i);
                *x = if self.beta == T::ZERO {
                    T::ZERO
                } else {
                    self.beta * *x
                };
            }
        }
    }

    /// The number of multiply-adds, as a float (the model's measure of size).
    pub fn fmas(&self) -> f64 {
        self.m as f64 * self.n as f64 * self.k as f64
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
}

/// Why a CBLAS call was refused before it became a Fortran call: the parameter number the
/// reference CBLAS passes to `cblas_xerbla`, and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CblasRefusal {
    /// 1 (layout), 2 (TransA) or 3 (TransB; 2 in a row-major call, as the reference CBLAS
    /// 3.11 numbers it).
    pub number: c_int,
    /// "Illegal TransA setting, 7", say.
    pub message: String,
}

/// A CBLAS call as the reference CBLAS turns it into a Fortran call: column-major as it is;
/// row-major as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, that is M and N, A and B swapped. Returns
/// the call and whether it was row-major.
#[allow(clippy::too_many_arguments)]
// BlasInt is i64 itself in the 64-bit-integer build.
#[allow(clippy::useless_conversion)]
pub fn from_cblas<T: Scalar>(
    layout: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: BlasInt,
    n: BlasInt,
    k: BlasInt,
    alpha: T,
    a: *const T,
    lda: BlasInt,
    b: *const T,
    ldb: BlasInt,
    beta: T,
    c: *mut T,
    ldc: BlasInt,
) -> Result<(Call<T>, bool), CblasRefusal> {
    let row_major = match layout {
        cblas::COL_MAJOR => false,
        cblas::ROW_MAJOR => true,
        other => {
            return Err(CblasRefusal {
                number: 1,
                message: format!("Illegal layout setting, {other}"),
            })
        }
    };
    let char_of = |t: c_int, number: c_int, name: &str| match t {
        cblas::NO_TRANS => Ok(b'N'),
        cblas::TRANS => Ok(b'T'),
        cblas::CONJ_TRANS => Ok(b'C'),
        other => Err(CblasRefusal {
            number,
            message: format!("Illegal {name} setting, {other}"),
        }),
    };
    let ta = char_of(trans_a, 2, "TransA")?;
    // The reference's row-major branch reports a wrong TransB as parameter 2 (its quirk,
    // which programs that catch the error see).
    let tb = char_of(trans_b, if row_major { 2 } else { 3 }, "TransB")?;
    let [m, n, k, lda, ldb, ldc] = [m, n, k, lda, ldb, ldc].map(i64::from);
    let call = if row_major {
        Call {
            trans: [tb, ta],
            m: n,
            n: m,
            k,
            alpha,
            a: b,
            lda: ldb,
            b: a,
            ldb: lda,
            beta,
            c,
            ldc,
        }
    } else {
        Call {
            trans: [ta, tb],
            m,
            n,
            k,
            alpha,
            a,
            lda,
            b,
            ldb,
            beta,
            c,
            ldc,
        }
    };
    Ok((call, row_major))
}
