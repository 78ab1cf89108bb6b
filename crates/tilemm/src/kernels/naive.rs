//! The example's `matmul`: one unit per element of C, operands read from global memory.
//!
//! Unlike the example, x runs along the columns of C, so neighbouring units of a warp read
//! neighbouring elements of B and write neighbouring elements of C (coalesced access), and the
//! accumulator has the element type (numba's `tmp = 0.` silently accumulated in f64).

use cubecl::prelude::*;

/// C[m×n] = A[m×k] · B[k×n], all row-major.
#[cube(launch_unchecked)]
pub fn naive_matmul<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<F>,
    m: u32,
    k: u32,
    n: u32,
) {
    let col = ABSOLUTE_POS_X;
    let row = ABSOLUTE_POS_Y;
    // The grid is rounded up to whole blocks; no barrier follows, so surplus units may skip.
    if row < m && col < n {
        let mut acc = F::new(0.0);
        for i in 0..k {
            acc += a[(row * k + i) as usize] * b[(i * n + col) as usize];
        }
        c[(row * n + col) as usize] = acc;
    }
}
