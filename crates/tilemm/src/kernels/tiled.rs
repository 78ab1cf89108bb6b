//! The example's `fast_matmul`: TPB×TPB tiles of A and B staged in shared memory.
//!
//! Fixed against the example: every unit stays until the last barrier (units outside C load
//! zeros instead of returning, which is undefined behaviour before a barrier), the K loop runs
//! ceil(K/TPB) times instead of `gridDim.x` times, and only the store is guarded, so any M, K, N
//! work.

use cubecl::prelude::*;

/// C[m×n] = A[m×k] · B[k×n], all row-major, launched with TPB×TPB units per cube.
#[cube(launch_unchecked)]
pub fn tiled_matmul<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<F>,
    m: u32,
    k: u32,
    n: u32,
    #[comptime] tpb: u32,
) {
    let mut tile_a = SharedMemory::<F>::new(comptime!((tpb * tpb) as usize));
    let mut tile_b = SharedMemory::<F>::new(comptime!((tpb * tpb) as usize));

    let tx = UNIT_POS_X;
    let ty = UNIT_POS_Y;
    let col = CUBE_POS_X * tpb + tx;
    let row = CUBE_POS_Y * tpb + ty;
    let slot = (ty * tpb + tx) as usize;

    let mut acc = F::new(0.0);
    let tiles = k.div_ceil(tpb);
    for t in 0..tiles {
        // Unit (tx, ty) fetches A[row, t·TPB + tx] and B[t·TPB + ty, col], or 0 past an edge.
        let a_col = t * tpb + tx;
        let b_row = t * tpb + ty;
        let mut a_val = F::new(0.0);
        if row < m && a_col < k {
            a_val = a[(row * k + a_col) as usize];
        }
        let mut b_val = F::new(0.0);
        if b_row < k && col < n {
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

    if row < m && col < n {
        c[(row * n + col) as usize] = acc;
    }
}
