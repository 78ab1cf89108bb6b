//! Complex products: C = α·op(A)·op(B) + β·C for [`Complex<f32>`] (complex64) and
//! [`Complex<f64>`] (complex128), op(X) being X or its conjugate (a transpose is the view's own,
//! `a.t()`), with complex α and β: the front door's routes and kernels, four real products on
//! strided views of the interleaved data.
//!
//! **The 4M method.** With op(A) = Aᵣ + i·sₐ·Aᵢ (sₐ = −1 for the conjugate), and so for B,
//!
//! ```text
//! Re(op(A)·op(B)) = Aᵣ·Bᵣ − sₐ·s_b·Aᵢ·Bᵢ        Im(op(A)·op(B)) = s_b·Aᵣ·Bᵢ + sₐ·Aᵢ·Bᵣ
//! ```
//!
//! Each part is two real products into the same real view of C (the second adding to the
//! first with β = 1), read and written where they lie: the real and imaginary parts of an
//! interleaved array are views with twice its strides (`split_complex`). With real α and β
//! they are applied by those products, and C is written in place; with a complex α or β the
//! product goes to two real scratch matrices and C = α·P + β·C is formed once per element (in
//! f64). β = 0 does not read C, and α = 0 does not read A or B, as in the reference BLAS.
//!
//! Why not 3M (Gauss's trick, three real products of sums): it saves a quarter of the
//! multiplies but needs copies of Aᵣ + Aᵢ and Bᵣ + Bᵢ, and its imaginary part's error is bounded
//! only normwise, by |Aᵣ|+|Aᵢ| times |Bᵣ|+|Bᵢ| rather than by the parts it sums (Higham, *Stability
//! of a method for multiplying complex matrices with three real matrix multiplications*, 1992):
//! a small imaginary part next to a large real one loses its relative accuracy. 4M's error is
//! that of a real product of 2K terms per part, which the real bound covers, and its integer
//! products are exact where every partial sum fits the type.
//!
//! ```
//! use ndarray::Array2;
//! use tilemm::{Complex, Gemm};
//!
//! // C = (1+2i)·Aᴴ·B, Aᴴ a view of A (48×64) conjugated.
//! let z = Array2::from_shape_fn((48, 64), |(i, j)| Complex::new(i as f64, j as f64));
//! let w = Array2::from_shape_fn((48, 30), |(i, j)| Complex::new(1.0, (i + j) as f64));
//! let alpha = Complex::new(1.0, 2.0);
//! let c = Gemm::new().complex().conjugate(true, false).alpha(alpha).product(z.t(), w.view())?;
//! let want: Complex<f64> = (0..48).map(|l| z[[l, 3]].conj() * w[[l, 5]]).sum::<Complex<f64>>() * alpha;
//! assert_eq!(c[[3, 5]], want);
//! # Ok::<(), tilemm::Error>(())
//! ```

use ndarray::{Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, Zip};
pub use num_complex::Complex;

use crate::array::{Gemm, GemmRun};
use crate::error::Result;
use crate::types::element::Element;

/// A real type whose complex numbers tilemm multiplies: f32 (complex64) and f64 (complex128).
pub trait ComplexPart: Element + num_traits::Float + crate::host::Zeroable {}
impl ComplexPart for f32 {}
impl ComplexPart for f64 {}

/// C = α·op(A)·op(B) + β·C for complex operands, on the route and kernel of a [`Gemm`]
/// (whose own α and β are not used).
#[derive(Clone, Copy)]
pub struct ComplexGemm<'s> {
    real: Gemm<'s>,
    alpha: Complex<f64>,
    beta: Complex<f64>,
    conj: [bool; 2],
}

impl<'s> Gemm<'s> {
    /// Complex products on this route and kernel: α = 1, β = 0, no conjugate.
    pub fn complex(self) -> ComplexGemm<'s> {
        ComplexGemm {
            real: self,
            alpha: Complex::new(1.0, 0.0),
            beta: Complex::new(0.0, 0.0),
            conj: [false; 2],
        }
    }
}

/// C = A·B for complex matrices on the fastest route (see [`crate::matmul`]).
pub fn matmul<T: ComplexPart>(
    a: ArrayView2<Complex<T>>,
    b: ArrayView2<Complex<T>>,
) -> Result<ndarray::Array2<Complex<T>>> {
    Gemm::new().complex().product(a, b)
}

impl ComplexGemm<'_> {
    /// α, the product's scale.
    pub fn alpha(self, alpha: Complex<f64>) -> Self {
        ComplexGemm { alpha, ..self }
    }

    /// β, C's scale; β = 0 does not read C.
    pub fn beta(self, beta: Complex<f64>) -> Self {
        ComplexGemm { beta, ..self }
    }

    /// Whether A (and B) enter conjugated: with a transposed view, Aᴴ (BLAS's `C`).
    pub fn conjugate(self, a: bool, b: bool) -> Self {
        ComplexGemm {
            conj: [a, b],
            ..self
        }
    }

    /// α·op(A)·op(B) as a new row-major array.
    pub fn product<T: ComplexPart>(
        &self,
        a: ArrayView2<Complex<T>>,
        b: ArrayView2<Complex<T>>,
    ) -> Result<ndarray::Array2<Complex<T>>> {
        let mut c = Array3::from_elem(
            (1, a.nrows(), b.ncols()),
            Complex::new(T::zero(), T::zero()),
        );
        ComplexGemm {
            beta: Complex::new(0.0, 0.0),
            ..*self
        }
        .write_batched(a.insert_axis(Axis(0)), b.insert_axis(Axis(0)), c.view_mut())?;
        Ok(c.index_axis_move(Axis(0), 0))
    }

    /// C = α·op(A)·op(B) + β·C into `c`.
    pub fn write<T: ComplexPart>(
        &self,
        a: ArrayView2<Complex<T>>,
        b: ArrayView2<Complex<T>>,
        c: ArrayViewMut2<Complex<T>>,
    ) -> Result<GemmRun> {
        self.write_batched(
            a.insert_axis(Axis(0)),
            b.insert_axis(Axis(0)),
            c.insert_axis(Axis(0)),
        )
    }

    /// [`write`](ComplexGemm::write) for each entry of a batch (axis 0; a batch of 1 in A or
    /// B serves every entry).
    pub fn write_batched<T: ComplexPart>(
        &self,
        a: ArrayView3<Complex<T>>,
        b: ArrayView3<Complex<T>>,
        c: ArrayViewMut3<Complex<T>>,
    ) -> Result<GemmRun> {
        self.write_batched_until(a, b, c, &|| false)
    }

    /// [`write_batched`](ComplexGemm::write_batched), stopped as
    /// [`Gemm::write_batched_until`] is (between the real products too).
    ///
    /// The run returned is the first real product's (its route, kernel and schedule), with
    /// `time` the whole call's and `kernel` the four products' together.
    pub fn write_batched_until<T: ComplexPart>(
        &self,
        a: ArrayView3<Complex<T>>,
        b: ArrayView3<Complex<T>>,
        c: ArrayViewMut3<Complex<T>>,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<GemmRun> {
        let start = std::time::Instant::now();
        let [sa, sb] = self.conj.map(|conj| if conj { -1.0 } else { 1.0 });
        let (alpha, beta) = (self.alpha, self.beta);
        let (a, b) = (a.split_complex(), b.split_complex());
        if alpha == Complex::new(0.0, 0.0) {
            // C = β·C, A and B unread (the shapes checked all the same).
            check_shapes(a.re.dim(), b.re.dim(), c.dim())?;
            scale(c, beta);
            return Ok(empty_run(start));
        }
        // The four real products into `re` and `im`, scaled by the real `scale` and adding to
        // them with the real `add` (β).
        let four = |mut re: ArrayViewMut3<T>, mut im: ArrayViewMut3<T>, scale: f64, add: f64| {
            let mut runs = Vec::with_capacity(4);
            for (by, beta, x, y, imaginary) in [
                (scale, add, &a.re, &b.re, false),
                (-scale * sa * sb, 1.0, &a.im, &b.im, false),
                (scale * sb, add, &a.re, &b.im, true),
                (scale * sa, 1.0, &a.im, &b.re, true),
            ] {
                let out = if imaginary {
                    im.view_mut()
                } else {
                    re.view_mut()
                };
                let gemm = self.real.alpha(by).beta(beta);
                runs.push(gemm.write_batched_until(x.view(), y.view(), out, stop)?);
            }
            Ok::<_, crate::Error>(runs)
        };
        let mut runs = if alpha.im == 0.0 && beta.im == 0.0 {
            // Real scalars: the products write C's parts in place.
            let c = c.split_complex();
            four(c.re, c.im, alpha.re, beta.re)?
        } else {
            // A complex scalar: P = op(A)·op(B) in scratch, then C = α·P + β·C.
            let dim = c.dim();
            let scratch = |what| {
                let len = dim.0.saturating_mul(dim.1).saturating_mul(dim.2);
                let data = crate::host::zeros::<T>(len, what)?;
                Ok::<_, crate::Error>(Array3::from_shape_vec(dim, data).expect("the length"))
            };
            let mut p_re = scratch("the real part of op(A)·op(B)")?;
            let mut p_im = scratch("the imaginary part of op(A)·op(B)")?;
            let runs = four(p_re.view_mut(), p_im.view_mut(), 1.0, 0.0)?;
            let read_c = beta != Complex::new(0.0, 0.0);
            Zip::from(c)
                .and(&p_re)
                .and(&p_im)
                .par_for_each(|c, &pr, &pi| {
                    let p = Complex::new(pr.to_f64(), pi.to_f64());
                    let mut x = alpha * p;
                    if read_c {
                        x += beta * Complex::new(c.re.to_f64(), c.im.to_f64());
                    }
                    *c = Complex::new(T::from_f64(x.re), T::from_f64(x.im));
                });
            runs
        };
        let mut first = runs.swap_remove(0);
        let kernels: Option<std::time::Duration> = std::iter::once(first.kernel)
            .chain(runs.iter().map(|r| r.kernel))
            .sum();
        first.kernel = kernels;
        first.time = start.elapsed();
        Ok(first)
    }
}

/// The error the real products give for these shapes, if any.
fn check_shapes(
    (a_batch, m, k): (usize, usize, usize),
    (b_batch, k_b, n): (usize, usize, usize),
    (batch, c_m, c_n): (usize, usize, usize),
) -> Result<()> {
    let batches = [a_batch, b_batch].iter().all(|&x| x == batch || x == 1);
    if !batches || m != c_m || n != c_n || k != k_b {
        return Err(crate::Error::InvalidView(format!(
            "A is {m}×{k}, B is {k_b}×{n} and C is {c_m}×{c_n} (batches {a_batch}, {b_batch} \
             and {batch}): A must be m×k, B k×n, C m×n, each batch C's or 1"
        )));
    }
    Ok(())
}

/// C = β·C, β = 0 writing zeros without reading C.
fn scale<T: ComplexPart>(c: ArrayViewMut3<Complex<T>>, beta: Complex<f64>) {
    let zero = beta == Complex::new(0.0, 0.0);
    Zip::from(c).par_for_each(|c| {
        let x = if zero {
            Complex::new(0.0, 0.0)
        } else {
            beta * Complex::new(c.re.to_f64(), c.im.to_f64())
        };
        *c = Complex::new(T::from_f64(x.re), T::from_f64(x.im));
    });
}

/// The run of a call that computed no product (α = 0).
fn empty_run(start: std::time::Instant) -> GemmRun {
    GemmRun {
        route: crate::array::Route::Cpu {
            why: "α = 0: C = β·C on the host, A and B unread".into(),
        },
        plan: None,
        tuning: None,
        schedule: None,
        kernel: None,
        time: start.elapsed(),
    }
}
