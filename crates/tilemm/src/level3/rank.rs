//! Rank-k and rank-2k updates of one triangle of C (`syrk`, `herk`, `syr2k`, `her2k`). Per
//! block of C's columns: the part of the column inside the triangle and off the diagonal block
//! is one GEMM (two for rank 2k) in place; the diagonal block is computed whole into scratch
//! and only its triangle is kept, so the other triangle of C is never written.

use ndarray::{s, ArrayViewMut2};

use super::{scale, scratch, Level3, Multiply, Operand, Scalar, Uplo};
use crate::error::Result;

impl<M> Level3<M> {
    /// C = α·A·Aᵀ + β·C (`hermitian`: α·A·Aᴴ + β·C, α and β real, the diagonal's imaginary
    /// parts made zero) on C's `uplo` triangle, A n×k (for BLAS's `trans`, pass `a.t()` or
    /// `a.h()`). α = 0 or k = 0 leaves β·C, and with β = 1 nothing.
    pub fn rank_k<T: Scalar>(
        &mut self,
        uplo: Uplo,
        hermitian: bool,
        alpha: T,
        a: Operand<T>,
        beta: T,
        c: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let other = if hermitian { a.h() } else { a.t() };
        self.update(uplo, hermitian, &[(alpha, a, other)], beta, c)
    }

    /// C = α·A·Bᵀ + α·B·Aᵀ + β·C (`hermitian`: α·A·Bᴴ + ᾱ·B·Aᴴ + β·C, β real, the diagonal's
    /// imaginary parts made zero) on C's `uplo` triangle, A and B n×k.
    #[allow(clippy::too_many_arguments)]
    pub fn rank_2k<'a, T: Scalar>(
        &mut self,
        uplo: Uplo,
        hermitian: bool,
        alpha: T,
        a: Operand<'a, T>,
        b: Operand<'a, T>,
        beta: T,
        c: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let terms = if hermitian {
            [(alpha, a, b.h()), (alpha.conj(), b, a.h())]
        } else {
            [(alpha, a, b.t()), (alpha, b, a.t())]
        };
        self.update(uplo, hermitian, &terms, beta, c)
    }

    /// C = Σ s·x·y + β·C on C's `uplo` triangle, for the terms (s, x n×k, y k×n).
    fn update<T: Scalar>(
        &mut self,
        uplo: Uplo,
        hermitian: bool,
        terms: &[(T, Operand<T>, Operand<T>)],
        beta: T,
        mut c: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let n = c.nrows();
        let k = terms[0].1.view.ncols();
        let no_product = terms[0].0 == T::zero() || k == 0;
        if n == 0 || (no_product && beta == T::one()) {
            return Ok(());
        }
        if no_product {
            scale(c, beta, hermitian, |i, j| uplo.holds(i, j));
            return Ok(());
        }
        // The first term scales C by β; the others add to it.
        let beta_of = |t: usize, beta: T| if t == 0 { beta } else { T::one() };
        for block in self.blocks(n) {
            let off = match uplo {
                Uplo::Upper => 0..block.start,
                Uplo::Lower => block.end..n,
            };
            if !off.is_empty() {
                for (t, &(s, x, y)) in terms.iter().enumerate() {
                    self.multiply.multiply(
                        s,
                        x.block(off.clone(), 0..k),
                        y.block(0..k, block.clone()),
                        beta_of(t, beta),
                        c.slice_mut(s![off.clone(), block.clone()]),
                    )?;
                }
            }
            let mut d = scratch(block.len(), block.len(), "a diagonal block of C")?;
            for (t, &(s, x, y)) in terms.iter().enumerate() {
                self.multiply.multiply(
                    s,
                    x.block(block.clone(), 0..k),
                    y.block(0..k, block.clone()),
                    beta_of(t, T::zero()),
                    d.view_mut(),
                )?;
            }
            let mut diagonal = c.slice_mut(s![block.clone(), block.clone()]);
            for ((i, j), x) in diagonal.indexed_iter_mut() {
                if !uplo.holds(i, j) {
                    continue;
                }
                // A Hermitian diagonal's imaginary parts need not be set (the reference's
                // words): read its real part only.
                let c = if hermitian && i == j { x.real() } else { *x };
                let mut y = d[[i, j]];
                if beta != T::zero() {
                    y += beta * c;
                }
                if hermitian && i == j {
                    y = y.real();
                }
                *x = y;
            }
        }
        Ok(())
    }
}
