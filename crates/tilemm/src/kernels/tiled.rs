//! The example's `fast_matmul`: TPB×TPB tiles of A and B staged in shared memory.
//!
//! Fixed against the example: every unit stays until the last barrier (units outside C load
//! zeros instead of returning, which is undefined behaviour before a barrier), the K loop runs
//! ceil(K/TPB) times instead of `gridDim.x` times, and only the store is guarded, so any M, K, N
//! work.

use cubecl::prelude::*;

/// C[m×n] (+)= A[m×k] · B[k×n] over the slab `k_begin..k_end` of K, all row-major, launched
/// with TPB×TPB units per cube.
///
/// With `accumulate` ≠ 0 the sum continues from the value in C (the earlier slabs' sum); with 0,
/// C is only written, never read.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn tiled_matmul<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<F>,
    m: u32,
    k: u32,
    n: u32,
    k_begin: u32,
    k_end: u32,
    accumulate: u32,
    #[comptime] tpb: u32,
) {
    let mut tile_a = SharedMemory::<F>::new(comptime!((tpb * tpb) as usize));
    let mut tile_b = SharedMemory::<F>::new(comptime!((tpb * tpb) as usize));

    let tx = UNIT_POS_X;
    let ty = UNIT_POS_Y;
    let col = CUBE_POS_X * tpb + tx;
    let row = CUBE_POS_Y * tpb + ty;
    let slot = (ty * tpb + tx) as usize;

    let inside = row < m && col < n;
    let out = (row * n + col) as usize;
    let mut acc = F::new(0.0);
    if inside && accumulate != 0 {
        acc = c[out];
    }
    // At most LOOP_TRIP_LIMIT tiles: the host splits K (Plan::k_slabs).
    let tiles = (k_end - k_begin).div_ceil(tpb);
    for t in 0..tiles {
        // Unit (tx, ty) fetches A[row, k₀ + t·TPB + tx] and B[k₀ + t·TPB + ty, col], or 0 past
        // an edge of the matrix or of the slab.
        let a_col = k_begin + t * tpb + tx;
        let b_row = k_begin + t * tpb + ty;
        let mut a_val = F::new(0.0);
        if row < m && a_col < k_end {
            a_val = a[(row * k + a_col) as usize];
        }
        let mut b_val = F::new(0.0);
        if b_row < k_end && col < n {
            b_val = b[(b_row * n + col) as usize];
        }
        tile_a[slot] = a_val;
        tile_b[slot] = b_val;
        sync_cube();

        #[unroll]
        for j in 0..tpb {
            acc += tile_a[(ty * tpb + j) as usize] * tile_b[(j * tpb + tx) as usize];
        }
        // Nobody may overwrite the tiles while a neighbour still reads them.
        sync_cube();
    }

    if inside {
        c[out] = acc;
    }
}
