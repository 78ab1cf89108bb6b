//! Triangular products and solves (`trmm`, `trsm`), blocked by rows of B so that the work
//! off the diagonal blocks is GEMMs. A right-side call is the left-side one on transposes:
//! B·op(A) = (op(A)ᵀ·Bᵀ)ᵀ.

use ndarray::{s, ArrayViewMut2, Axis};

use super::{scratch, split, Level3, Multiply, Operand, Scalar, Side, Triangular, Uplo};
use crate::error::Result;

/// trsm's largest block: its diagonal blocks are solved on the host, at block·m·n/2
/// multiply-adds in all.
const SOLVE_BLOCK: usize = 128;

impl<'a, T: Scalar> Triangular<'a, T> {
    /// The transpose: op(A)ᵀ, its triangle the other one.
    fn transposed(self) -> Triangular<'a, T> {
        Triangular {
            a: self.a.t(),
            uplo: self.uplo.flip(),
            unit: self.unit,
        }
    }
}

impl<M> Level3<M> {
    /// B = α·op(A)·B (`Side::Left`) or α·B·op(A) (`Side::Right`), op(A) the triangular
    /// matrix `t`. α = 0 writes zeros, reading neither.
    pub fn trmm<T: Scalar>(
        &mut self,
        side: Side,
        t: Triangular<T>,
        alpha: T,
        b: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let (t, mut b) = on_the_left(side, t, b);
        if done(alpha, b.view_mut()) {
            return Ok(());
        }
        self.trmm_left(t, alpha, b)
    }

    /// Solves op(A)·X = α·B (`Side::Left`) or X·op(A) = α·B (`Side::Right`) for X, written
    /// over B, op(A) the triangular matrix `t`. α = 0 writes zeros, reading neither. A zero
    /// on a non-unit diagonal gives infinities or NaN, as in the reference.
    pub fn trsm<T: Scalar>(
        &mut self,
        side: Side,
        t: Triangular<T>,
        alpha: T,
        b: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let (t, mut b) = on_the_left(side, t, b);
        if done(alpha, b.view_mut()) {
            return Ok(());
        }
        self.trsm_left(t, alpha, b)
    }

    /// B = α·T·B (α ≠ 0, B not empty). Per block of rows, T's dense diagonal block and the
    /// rest of its rows (the triangle's side) times B into scratch; an upper T's blocks go top
    /// to bottom, a lower one's bottom to top, so each reads only rows of B not yet written.
    fn trmm_left<T: Scalar>(
        &mut self,
        t: Triangular<T>,
        alpha: T,
        mut b: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let (m, n) = b.dim();
        let mut blocks = self.blocks(m);
        if t.uplo == Uplo::Lower {
            blocks.reverse();
        }
        for rows in blocks {
            let diagonal = t.dense(rows.clone())?;
            let mut s = scratch(rows.len(), n, "rows of a triangular product")?;
            self.multiply.multiply(
                alpha,
                Operand::new(diagonal.view()),
                Operand::new(b.slice(s![rows.clone(), ..])),
                T::zero(),
                s.view_mut(),
            )?;
            let rest = match t.uplo {
                Uplo::Upper => rows.end..m,
                Uplo::Lower => 0..rows.start,
            };
            if !rest.is_empty() {
                self.multiply.multiply(
                    alpha,
                    t.a.block(rows.clone(), rest.clone()),
                    Operand::new(b.slice(s![rest, ..])),
                    T::one(),
                    s.view_mut(),
                )?;
            }
            b.slice_mut(s![rows, ..]).assign(&s);
        }
        Ok(())
    }

    /// T·X = α·B (α ≠ 0, B not empty), blocked substitution: an upper T's blocks from the
    /// bottom up, a lower one's from the top down; each block's rows become
    /// α·B − T(block, solved)·X(solved) by one GEMM, then are solved against the diagonal
    /// block on the host.
    fn trsm_left<T: Scalar>(
        &mut self,
        t: Triangular<T>,
        alpha: T,
        mut b: ArrayViewMut2<T>,
    ) -> Result<()>
    where
        M: Multiply<T>,
    {
        let m = b.nrows();
        // At least two blocks where there are two rows, so that part of the work is a GEMM.
        let size = self.block.unwrap_or(m.div_ceil(2).min(SOLVE_BLOCK));
        let mut blocks = split(m, size);
        if t.uplo == Uplo::Upper {
            blocks.reverse();
        }
        for rows in blocks {
            // The rows solved already, and the block's right side, as two views of B.
            let (done, at) = match t.uplo {
                Uplo::Upper => (rows.end..m, rows.end),
                Uplo::Lower => (0..rows.start, rows.start),
            };
            let (head, tail) = b.view_mut().split_at(Axis(0), at);
            let (solved, mut rhs) = match t.uplo {
                Uplo::Upper => (tail, head.slice_move(s![rows.start.., ..])),
                Uplo::Lower => (head, tail.slice_move(s![..rows.len(), ..])),
            };
            if done.is_empty() {
                if alpha != T::one() {
                    rhs.map_inplace(|x| *x *= alpha);
                }
            } else {
                self.multiply.multiply(
                    -T::one(),
                    t.a.block(rows.clone(), done),
                    Operand::new(solved.view()),
                    alpha,
                    rhs.view_mut(),
                )?;
            }
            substitute(&t, rows.start, rhs)?;
        }
        Ok(())
    }
}

/// The call on the left: B·op(A) = (op(A)ᵀ·Bᵀ)ᵀ.
fn on_the_left<'a, 'b, T: Scalar>(
    side: Side,
    t: Triangular<'a, T>,
    b: ArrayViewMut2<'b, T>,
) -> (Triangular<'a, T>, ArrayViewMut2<'b, T>) {
    match side {
        Side::Left => (t, b),
        Side::Right => (t.transposed(), b.reversed_axes()),
    }
}

/// Whether there is nothing to compute: an empty B, or α = 0 (B is then zeros, A unread).
fn done<T: Scalar>(alpha: T, mut b: ArrayViewMut2<T>) -> bool {
    if b.is_empty() {
        return true;
    }
    if alpha == T::zero() {
        b.fill(T::zero());
        return true;
    }
    false
}

/// Solves D·X = R in place of R, D the diagonal block of `t` from row and column `start`
/// (as large as R's rows), column by column in the reference's order: each unknown divided by
/// its diagonal, then taken from the rows not yet solved (a loop over a contiguous column of D).
fn substitute<T: Scalar>(t: &Triangular<T>, start: usize, mut r: ArrayViewMut2<T>) -> Result<()> {
    let len = r.nrows();
    // D in column-major order: column i of D is d[i·len..(i + 1)·len].
    let d = t.dense(start..start + len)?.reversed_axes();
    let d = d.as_standard_layout();
    let d = d.as_slice().expect("a standard layout");
    let mut x = crate::host::with_capacity(len, "a column of a triangular solve")?;
    for mut column in r.columns_mut() {
        x.clear();
        x.extend(column.iter().copied());
        let mut solve = |i: usize, rest: std::ops::Range<usize>| {
            // As the reference: a zero unknown is left as it is (0/0 on a singular diagonal
            // stays 0) and takes nothing from the others.
            if x[i] == T::zero() {
                return;
            }
            if !t.unit {
                x[i] = x[i].divide(d[i * len + i]);
            }
            let xi = x[i];
            for (y, &a) in x[rest.clone()]
                .iter_mut()
                .zip(&d[i * len + rest.start..i * len + rest.end])
            {
                *y -= xi * a;
            }
        };
        match t.uplo {
            Uplo::Upper => (0..len).rev().for_each(|i| solve(i, 0..i)),
            Uplo::Lower => (0..len).for_each(|i| solve(i, i + 1..len)),
        }
        column.iter_mut().zip(&x).for_each(|(c, &v)| *c = v);
    }
    Ok(())
}
