//! The rest of BLAS Level 3 built on tilemm's GEMM: symmetric and Hermitian products (`symm`,
//! `hemm`), rank-k and rank-2k updates of a triangle (`syrk`, `herk`, `syr2k`, `her2k`), and
//! triangular products and solves (`trmm`, `trsm`), for f32, f64, complex64 and complex128.
//!
//! Each routine is blocked so that its work is GEMMs on the route of a [`Gemm`], as MAGMA and
//! cuBLASXt build them:
//! - `symm`/`hemm`: a block of the full matrix's rows, mirrored from the stored triangle, times
//!   B, per block of C's rows (or columns);
//! - rank-k and rank-2k updates: per block of C's columns, one GEMM on the part of the column
//!   inside the triangle, and one into scratch for the diagonal block, whose triangle is kept;
//! - `trmm`: per block of rows, the dense diagonal block and the rest of the row as two GEMMs
//!   into scratch, ordered so that each reads only rows not yet written;
//! - `trsm`: blocked substitution, each block's right side updated by one GEMM with the rows
//!   already solved, then solved against its diagonal block on the host (substitution, as the
//!   reference does; inverting the diagonal blocks instead would cost accuracy on
//!   ill-conditioned triangles, which LAPACK's own tests have).
//!
//! What multiplies is a [`Multiply`]: tilemm's GEMM on a route ([`OnRoute`]), or the definition
//! ([`Definition`], a loop that needs no memory and no device: the last resort and the tests'
//! reference).
//!
//! ```
//! use ndarray::Array2;
//! use tilemm::level3::{Level3, OnRoute, Operand, Uplo};
//! use tilemm::Gemm;
//!
//! // The upper triangle of C = A·Aᵀ (C is 40×40), A 40×30, on the CPU route.
//! let a = Array2::from_shape_fn((40, 30), |(i, j)| ((i * 7 + j) % 5) as f64);
//! let mut c = Array2::<f64>::zeros((40, 40));
//! let gemm = Gemm::new().device(tilemm::Backend::Cpu, None);
//! let mut level3 = Level3::new(OnRoute::new(gemm));
//! level3.rank_k(Uplo::Upper, false, 1.0, Operand::new(a.view()), 0.0, c.view_mut())?;
//! let full = a.dot(&a.t());
//! assert_eq!(c[[3, 17]], full[[3, 17]]);
//! assert_eq!(c[[17, 3]], 0.0); // the lower triangle is not written
//! # Ok::<(), tilemm::Error>(())
//! ```

mod rank;
mod symm;
mod triangular;

use std::fmt::Debug;
use std::ops::{Neg, Range};

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};

use crate::array::{Gemm, GemmRun};
use crate::complex::Complex;
use crate::error::Result;

/// An element type of the Level-3 routines: f32, f64, complex64 and complex128.
pub trait Scalar:
    Copy + PartialEq + Debug + Send + Sync + 'static + num_traits::NumAssign + Neg<Output = Self>
{
    /// The complex conjugate (the value itself for a real type).
    fn conj(self) -> Self;
    /// The real part, as this type (a Hermitian matrix's diagonal).
    fn real(self) -> Self;
    /// The value as a complex f64, exactly.
    fn widen(self) -> Complex<f64>;
    /// `self / d`, for a complex type by Smith's scaled division (the textbook formula's
    /// |d|² overflows for entries past about 1e154, which LAPACK's scaled test matrices have;
    /// Fortran's complex division scales too).
    fn divide(self, d: Self) -> Self;
    /// C = α·a·b + β·C by `gemm`, each operand conjugated where it says so; β = 0 does not
    /// read C.
    fn gemm(
        gemm: Gemm<'_>,
        alpha: Self,
        a: Operand<Self>,
        b: Operand<Self>,
        beta: Self,
        c: ArrayViewMut2<Self>,
    ) -> Result<GemmRun>;
}

macro_rules! real {
    ($t:ty) => {
        impl Scalar for $t {
            fn conj(self) -> Self {
                self
            }
            fn real(self) -> Self {
                self
            }
            fn widen(self) -> Complex<f64> {
                Complex::new(self.into(), 0.0)
            }
            fn divide(self, d: Self) -> Self {
                self / d
            }
            fn gemm(
                gemm: Gemm<'_>,
                alpha: Self,
                a: Operand<Self>,
                b: Operand<Self>,
                beta: Self,
                c: ArrayViewMut2<Self>,
            ) -> Result<GemmRun> {
                gemm.alpha(alpha.into())
                    .beta(beta.into())
                    .write(a.view, b.view, c)
            }
        }
    };
}

macro_rules! complex {
    ($t:ty) => {
        impl Scalar for Complex<$t> {
            fn conj(self) -> Self {
                Complex::conj(&self)
            }
            fn real(self) -> Self {
                Complex::new(self.re, 0.0)
            }
            fn widen(self) -> Complex<f64> {
                Complex::new(self.re.into(), self.im.into())
            }
            fn divide(self, d: Self) -> Self {
                let (a, b, c, d) = (self.re, self.im, d.re, d.im);
                if c.abs() >= d.abs() {
                    let r = d / c;
                    let den = c + d * r;
                    Complex::new((a + b * r) / den, (b - a * r) / den)
                } else {
                    let r = c / d;
                    let den = c * r + d;
                    Complex::new((a * r + b) / den, (b * r - a) / den)
                }
            }
            fn gemm(
                gemm: Gemm<'_>,
                alpha: Self,
                a: Operand<Self>,
                b: Operand<Self>,
                beta: Self,
                c: ArrayViewMut2<Self>,
            ) -> Result<GemmRun> {
                gemm.complex()
                    .conjugate(a.conj, b.conj)
                    .alpha(alpha.widen())
                    .beta(beta.widen())
                    .write(a.view, b.view, c)
            }
        }
    };
}

real!(f32);
real!(f64);
complex!(f32);
complex!(f64);

/// A matrix as a product reads it: a view (transposed or not, any strides), conjugated or not.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a, T> {
    /// The elements.
    pub view: ArrayView2<'a, T>,
    /// Whether they enter conjugated.
    pub conj: bool,
}

impl<'a, T: Scalar> Operand<'a, T> {
    /// The view as it is.
    pub fn new(view: ArrayView2<'a, T>) -> Self {
        Operand { view, conj: false }
    }

    /// The transpose.
    pub fn t(self) -> Self {
        Operand {
            view: self.view.reversed_axes(),
            conj: self.conj,
        }
    }

    /// The conjugate transpose.
    pub fn h(self) -> Self {
        Operand {
            view: self.view.reversed_axes(),
            conj: !self.conj,
        }
    }

    /// The block of `rows` and `cols`.
    pub fn block(self, rows: Range<usize>, cols: Range<usize>) -> Self {
        Operand {
            view: self.view.slice_move(s![rows, cols]),
            conj: self.conj,
        }
    }

    /// Element (i, j), conjugated where the operand is.
    pub fn at(&self, i: usize, j: usize) -> T {
        let x = self.view[[i, j]];
        if self.conj {
            x.conj()
        } else {
            x
        }
    }
}

/// Which side of B a matrix multiplies: A·B or B·A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A·B.
    Left,
    /// B·A.
    Right,
}

/// Which triangle of a matrix is stored, or is not zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uplo {
    /// On and above the diagonal.
    Upper,
    /// On and below it.
    Lower,
}

impl Uplo {
    /// The other triangle (that of the transpose).
    pub fn flip(self) -> Uplo {
        match self {
            Uplo::Upper => Uplo::Lower,
            Uplo::Lower => Uplo::Upper,
        }
    }

    /// Whether (i, j) lies in this triangle.
    pub fn holds(self, i: usize, j: usize) -> bool {
        match self {
            Uplo::Upper => i <= j,
            Uplo::Lower => i >= j,
        }
    }
}

/// A triangular matrix as `trmm` and `trsm` read it: op(A), whose triangle is `uplo` (that of
/// op(A), not of A's storage), with a unit diagonal that is not read, or not.
#[derive(Clone, Copy, Debug)]
pub struct Triangular<'a, T> {
    /// op(A): A, Aᵀ or Aᴴ as an operand.
    pub a: Operand<'a, T>,
    /// op(A)'s triangle.
    pub uplo: Uplo,
    /// Whether the diagonal is taken as ones, unread.
    pub unit: bool,
}

impl<T: Scalar> Triangular<'_, T> {
    /// Element (i, j) of the triangular matrix: zero outside the triangle, one on a unit
    /// diagonal.
    fn at(&self, i: usize, j: usize) -> T {
        if i == j && self.unit {
            T::one()
        } else if self.uplo.holds(i, j) {
            self.a.at(i, j)
        } else {
            T::zero()
        }
    }

    /// The diagonal block of `range`, dense (conjugated already).
    fn dense(&self, range: Range<usize>) -> Result<Array2<T>> {
        let mut d = scratch(range.len(), range.len(), "a triangle's diagonal block")?;
        for ((i, j), x) in d.indexed_iter_mut() {
            *x = self.at(range.start + i, range.start + j);
        }
        Ok(d)
    }
}

/// What the routines multiply with: C = α·a·b + β·C, β = 0 not reading C.
pub trait Multiply<T: Scalar> {
    /// One product.
    fn multiply(
        &mut self,
        alpha: T,
        a: Operand<T>,
        b: Operand<T>,
        beta: T,
        c: ArrayViewMut2<T>,
    ) -> Result<()>;
}

impl<T: Scalar, M: Multiply<T> + ?Sized> Multiply<T> for &mut M {
    fn multiply(
        &mut self,
        alpha: T,
        a: Operand<T>,
        b: Operand<T>,
        beta: T,
        c: ArrayViewMut2<T>,
    ) -> Result<()> {
        (**self).multiply(alpha, a, b, beta, c)
    }
}

/// tilemm's GEMM on a route, with the runs it made.
pub struct OnRoute<'s> {
    gemm: Gemm<'s>,
    /// Each GEMM's run, in order.
    pub runs: Vec<GemmRun>,
}

impl<'s> OnRoute<'s> {
    /// Products by `gemm` (its own α and β are not used).
    pub fn new(gemm: Gemm<'s>) -> Self {
        OnRoute {
            gemm,
            runs: Vec::new(),
        }
    }
}

impl<T: Scalar> Multiply<T> for OnRoute<'_> {
    fn multiply(
        &mut self,
        alpha: T,
        a: Operand<T>,
        b: Operand<T>,
        beta: T,
        c: ArrayViewMut2<T>,
    ) -> Result<()> {
        self.runs.push(T::gemm(self.gemm, alpha, a, b, beta, c)?);
        Ok(())
    }
}

/// The product by its definition, a loop in the element type: no memory, no device.
pub struct Definition;

impl<T: Scalar> Multiply<T> for Definition {
    fn multiply(
        &mut self,
        alpha: T,
        a: Operand<T>,
        b: Operand<T>,
        beta: T,
        mut c: ArrayViewMut2<T>,
    ) -> Result<()> {
        let k = a.view.ncols();
        for ((i, j), x) in c.indexed_iter_mut() {
            let mut sum = T::zero();
            for l in 0..k {
                sum += a.at(i, l) * b.at(l, j);
            }
            *x = alpha * sum
                + if beta == T::zero() {
                    T::zero()
                } else {
                    beta * *x
                };
        }
        Ok(())
    }
}

/// The Level-3 routines over a [`Multiply`].
pub struct Level3<M> {
    /// What multiplies.
    pub multiply: M,
    block: Option<usize>,
}

impl<M> Level3<M> {
    /// The routines over `multiply`, with block sizes chosen by size.
    pub fn new(multiply: M) -> Self {
        Level3 {
            multiply,
            block: None,
        }
    }

    /// A fixed block size (at least 1) instead (the tests make small matrices take many
    /// blocks).
    pub fn block(self, block: usize) -> Self {
        Level3 {
            block: Some(block.max(1)),
            ..self
        }
    }

    /// The blocks of 0..n: for the GEMM-bound routines one block up to 256, else eight or
    /// more of at least 256 (the diagonal blocks' share of the work stays small).
    fn blocks(&self, n: usize) -> Vec<Range<usize>> {
        let size = self.block.unwrap_or(n.div_ceil(8).max(256));
        split(n, size)
    }
}

/// 0..n in consecutive ranges of `size` (the last one shorter).
fn split(n: usize, size: usize) -> Vec<Range<usize>> {
    (0..n)
        .step_by(size.max(1))
        .map(|start| start..(start + size).min(n))
        .collect()
}

/// A zeroed rows×cols matrix, or an error naming `what` when the allocation fails.
fn scratch<T: Scalar>(rows: usize, cols: usize, what: &str) -> Result<Array2<T>> {
    let len = rows.saturating_mul(cols);
    let mut data = crate::host::with_capacity(len, what)?;
    data.resize(len, T::zero());
    Ok(Array2::from_shape_vec((rows, cols), data).expect("rows·cols elements"))
}

/// C = β·C over the entries `keep` selects (β = 0 writing zeros without reading C), with the
/// diagonal's imaginary parts neither read nor kept where `hermitian` (β real there).
pub fn scale<T: Scalar>(
    mut c: ArrayViewMut2<T>,
    beta: T,
    hermitian: bool,
    keep: impl Fn(usize, usize) -> bool,
) {
    for ((i, j), x) in c.indexed_iter_mut() {
        if !keep(i, j) {
            continue;
        }
        let diagonal = hermitian && i == j;
        *x = if beta == T::zero() {
            T::zero()
        } else if diagonal {
            beta * x.real()
        } else {
            beta * *x
        };
    }
}
