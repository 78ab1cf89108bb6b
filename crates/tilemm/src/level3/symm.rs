//! `symm` and `hemm`: C = α·A·B + β·C (or α·B·A + β·C) with A symmetric or Hermitian, one
//! triangle of it stored. Per block of A's rows, those rows of the full matrix are mirrored
//! into scratch, and the block's share of C is one GEMM.

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};

use super::{scale, scratch, Level3, Multiply, Operand, Scalar, Side, Uplo};
use crate::error::Result;

impl<M> Level3<M> {
    /// C = α·A·B + β·C (`Side::Left`, A m×m) or α·B·A + β·C (`Side::Right`, A n×n), A
    /// symmetric (`hermitian` false) or Hermitian, read from its `uplo` triangle only (a
    /// Hermitian diagonal's imaginary parts are not read). α = 0 reads neither A nor B;
    /// β = 0 does not read C.
    #[allow(clippy::too_many_arguments)]
    pub fn symm<T: Scalar>(
        &mut self,
        side: Side,
        uplo: Uplo,
        hermitian: bool,
        alpha: T,
        a: ArrayView2<T>,
        b: ArrayView2<T>,
        beta: T,
        mut c: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let (m, n) = c.dim();
        if m == 0 || n == 0 {
            return Ok(());
        }
        if alpha == T::zero() {
            scale(c, beta, false, |_, _| true);
            return Ok(());
        }
        let order = if side == Side::Left { m } else { n };
        for block in self.blocks(order) {
            // The full matrix's rows of the block.
            let rows = mirrored(a, uplo, hermitian, block.clone())?;
            match side {
                // C[I, :] = α·A[I, :]·B + β·C[I, :].
                Side::Left => self.multiply.multiply(
                    alpha,
                    Operand::new(rows.view()),
                    Operand::new(b),
                    beta,
                    c.slice_mut(s![block, ..]),
                )?,
                // C[:, J] = α·B·A[:, J] + β·C[:, J], A[:, J] being A[J, :]ᵀ (ᴴ for a
                // Hermitian A).
                Side::Right => self.multiply.multiply(
                    alpha,
                    Operand::new(b),
                    Operand {
                        view: rows.t(),
                        conj: hermitian,
                    },
                    beta,
                    c.slice_mut(s![.., block]),
                )?,
            }
        }
        Ok(())
    }
}

/// Rows `rows` of the full symmetric (Hermitian) matrix whose `uplo` triangle `a` holds.
fn mirrored<T: Scalar>(
    a: ArrayView2<T>,
    uplo: Uplo,
    hermitian: bool,
    rows: std::ops::Range<usize>,
) -> Result<Array2<T>> {
    let n = a.ncols();
    let mut full = scratch(rows.len(), n, "rows of a symmetric matrix")?;
    for ((r, j), x) in full.indexed_iter_mut() {
        let i = rows.start + r;
        *x = if i == j && hermitian {
            a[[i, i]].real()
        } else if uplo.holds(i, j) {
            a[[i, j]]
        } else if hermitian {
            a[[j, i]].conj()
        } else {
            a[[j, i]]
        };
    }
    Ok(full)
}
