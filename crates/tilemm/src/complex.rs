//! Complex products: C = α·op(A)·op(B) + β·C for [`Complex<f32>`] (complex64) and
//! [`Complex<f64>`] (complex128), op(X) being X or its conjugate (a transpose is the view's own,
//! `a.t()`), with complex α and β: the front door's routes and kernels, the 4M method's four
//! real products computed as one real product of the packed parts.
//!
//! **The 4M method.** With op(A) = Aᵣ + i·sₐ·Aᵢ (sₐ = −1 for the conjugate), and so for B,
//!
//! ```text
//! Re(op(A)·op(B)) = Aᵣ·Bᵣ − sₐ·s_b·Aᵢ·Bᵢ        Im(op(A)·op(B)) = s_b·Aᵣ·Bᵢ + sₐ·Aᵢ·Bᵣ
//! ```
//!
//! Both parts come from **one real product** of the operands' parts laid side by side:
//!
//! ```text
//! [Re | Im] = [Aᵣ  Aᵢ] · ⎡ Bᵣ           s_b·Bᵢ ⎤      (m×2k times 2k×2n)
//!                        ⎣ −sₐ·s_b·Bᵢ   sₐ·Bᵣ  ⎦
//! ```
//!
//! The two packed operands are contiguous host copies (A's bytes once, B's twice), so a GPU
//! route uploads each once and runs one kernel, where four products on the interleaved data's
//! stride-2 views would each stage their parts and make their own round trip (on an H100, a
//! 2048² zgemm took 330 ms that way against 17 ms for a dgemm of the same size: BENCHMARKS.md).
//! C = α·P + β·C is then formed once per element in f64, in place in C's view; β = 0 does
//! not read C, and α = 0 does not read A or B, as in the reference BLAS. Its flops are 4M's,
//! and each part is a real dot product of 2K terms, the same sums 4M forms.
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

use ndarray::{s, Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, Zip};
pub use num_complex::Complex;

use crate::array::{Gemm, GemmRun};
use crate::error::Result;
use crate::types::element::Element;

/// `zip.for_each(f)`, on the CPU path's thread pool where the pass is large enough to gain from
/// it (that pool, not rayon's global one: a child forked after the parent's products gets a pool
/// of its own, where the global pool's threads are gone and a job sent there would wait
/// forever). LAPACK's tests make millions of tiny complex products, and a parallel pass costs
/// thread wake-ups that a few hundred elements do not repay. Evaluates to a `Result`.
macro_rules! each {
    ($zip:expr, $f:expr) => {{
        let zip = $zip;
        if zip.size() >= PARALLEL_ELEMENTS {
            crate::host::cpu::on_pool(|| zip.par_for_each($f))
        } else {
            zip.for_each($f);
            Ok(())
        }
    }};
}

/// The smallest elementwise pass `each!` runs on several threads.
const PARALLEL_ELEMENTS: usize = 1 << 15;

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
    /// [`Gemm::write_batched_until`] is.
    ///
    /// The run returned is the packed real product's (its route, kernel and schedule), with
    /// `time` the whole call's, packing and C's update included.
    pub fn write_batched_until<T: ComplexPart>(
        &self,
        a: ArrayView3<Complex<T>>,
        b: ArrayView3<Complex<T>>,
        c: ArrayViewMut3<Complex<T>>,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<GemmRun> {
        let start = std::time::Instant::now();
        let (alpha, beta) = (self.alpha, self.beta);
        let (a, b) = (a.split_complex(), b.split_complex());
        check_shapes(a.re.dim(), b.re.dim(), c.dim())?;
        if alpha == Complex::new(0.0, 0.0) {
            // C = β·C, A and B unread.
            scale(c, beta)?;
            return Ok(empty_run(start));
        }
        let n = c.dim().2;
        let a2 = pack_a(&a.re, &a.im)?;
        let b2 = pack_b(&b.re, &b.im, self.conj)?;
        let mut p = {
            let (batch, m, _) = c.dim();
            let len = batch.saturating_mul(m).saturating_mul(2 * n);
            let data = crate::host::zeros::<T>(len, "op(A)·op(B), its parts side by side")?;
            Array3::from_shape_vec((batch, m, 2 * n), data).expect("the length")
        };
        let mut run = self.real.alpha(1.0).beta(0.0).write_batched_until(
            a2.view(),
            b2.view(),
            p.view_mut(),
            stop,
        )?;
        // C = α·P + β·C, once per element in f64; real scalars scale each part on its own (a
        // complex product by α + 0i would turn an infinite part's 0·∞ into NaN in the other).
        let real = alpha.im == 0.0 && beta.im == 0.0;
        let read_c = beta != Complex::new(0.0, 0.0);
        let update = Zip::from(c)
            .and(p.slice(s![.., .., ..n]))
            .and(p.slice(s![.., .., n..]));
        each!(update, |c, &pr, &pi| {
            let p = Complex::new(pr.to_f64(), pi.to_f64());
            let c0 = Complex::new(c.re.to_f64(), c.im.to_f64());
            let x = match (real, read_c) {
                (true, false) => p * alpha.re,
                (true, true) => p * alpha.re + c0 * beta.re,
                (false, false) => alpha * p,
                (false, true) => alpha * p + beta * c0,
            };
            *c = Complex::new(T::from_f64(x.re), T::from_f64(x.im));
        })?;
        run.time = start.elapsed();
        Ok(run)
    }
}

/// [Aᵣ | Aᵢ] per batch entry: m×2k, contiguous.
fn pack_a<T: ComplexPart>(re: &ArrayView3<T>, im: &ArrayView3<T>) -> Result<Array3<T>> {
    let (batch, m, k) = re.dim();
    let len = batch.saturating_mul(m).saturating_mul(2 * k);
    let data = crate::host::zeros::<T>(len, "A's parts side by side")?;
    let mut a2 = Array3::from_shape_vec((batch, m, 2 * k), data).expect("the length");
    let (left, right) = a2.view_mut().split_at(Axis(2), k);
    crate::host::copy_into(left, re.view())?;
    crate::host::copy_into(right, im.view())?;
    Ok(a2)
}

/// [[Bᵣ, s_b·Bᵢ], [−sₐ·s_b·Bᵢ, sₐ·Bᵣ]] per batch entry: 2k×2n, contiguous, so that
/// [Aᵣ | Aᵢ] times it is [Re | Im] of op(A)·op(B) (the signs are exact).
fn pack_b<T: ComplexPart>(
    re: &ArrayView3<T>,
    im: &ArrayView3<T>,
    conj: [bool; 2],
) -> Result<Array3<T>> {
    let [sa, sb] = conj.map(|conj| if conj { -T::one() } else { T::one() });
    let (batch, k, n) = re.dim();
    let len = batch.saturating_mul(2 * k).saturating_mul(2 * n);
    let data = crate::host::zeros::<T>(len, "B's parts in four blocks")?;
    let mut b2 = Array3::from_shape_vec((batch, 2 * k, 2 * n), data).expect("the length");
    let (top, bottom) = b2.view_mut().split_at(Axis(1), k);
    let (top_left, mut top_right) = top.split_at(Axis(2), n);
    let (mut bottom_left, mut bottom_right) = bottom.split_at(Axis(2), n);
    crate::host::copy_into(top_left, re.view())?;
    let signed = [
        (&mut top_right, im.view(), sb),
        (&mut bottom_left, im.view(), -(sa * sb)),
        (&mut bottom_right, re.view(), sa),
    ];
    for (out, part, sign) in signed {
        each!(Zip::from(out).and(part), |o, &x| *o = sign * x)?;
    }
    Ok(b2)
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
fn scale<T: ComplexPart>(c: ArrayViewMut3<Complex<T>>, beta: Complex<f64>) -> Result<()> {
    let zero = beta == Complex::new(0.0, 0.0);
    each!(Zip::from(c), |c| {
        let x = if zero {
            Complex::new(0.0, 0.0)
        } else {
            beta * Complex::new(c.re.to_f64(), c.im.to_f64())
        };
        *c = Complex::new(T::from_f64(x.re), T::from_f64(x.im));
    })
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
        moved: Default::default(),
    }
}
