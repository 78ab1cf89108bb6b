//! The example's `matmul`: one unit per element of C, operands read from global memory.
//!
//! Unlike the example, x runs along the columns of C, so neighbouring units of a warp read
//! neighbouring elements of B and write neighbouring elements of C (coalesced access), and the
//! accumulator has the element type (numba's `tmp = 0.` silently accumulated in f64).

use cubecl::prelude::*;

/// C[m×n] (+)= A[m×k] · B[k×n] over the slab `k_begin..k_end` of K, all row-major.
///
/// With `accumulate` ≠ 0 the sum continues from the value in C (the earlier slabs' sum), so
/// splitting K changes no rounding; with 0, C is only written, never read.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn naive_matmul<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<F>,
    m: u32,
    k: u32,
    n: u32,
    k_begin: u32,
    k_end: u32,
    accumulate: u32,
) {
    let col = ABSOLUTE_POS_X;
    let row = ABSOLUTE_POS_Y;
    // The grid is rounded up to whole blocks; no barrier follows, so surplus units may skip.
    if row < m && col < n {
        let out = (row * n + col) as usize;
        let mut acc = F::new(0.0);
        if accumulate != 0 {
            acc = c[out];
        }
        // At most LOOP_TRIP_LIMIT iterations: the host splits K (Plan::k_slabs).
        let a_row = row * k + k_begin;
        let b_col = k_begin * n + col;
        for i in 0..k_end - k_begin {
            acc += a[(a_row + i) as usize] * b[(b_col + i * n) as usize];
        }
        c[out] = acc;
    }
}
