//! Staging tiles of A and B in shared memory, shared by the rungs that block on it.
//!
//! All units of a cube copy a BM×BK tile of A and a BK×BN tile of B together, each a fixed
//! share of elements, consecutive units taking consecutive elements along the operand's
//! contiguous axis (a compile-time choice, [`super::args::Layouts`]) so that a warp's loads
//! coalesce whether the operand is row- or column-major. Elements past an edge of the matrix or
//! of the K slab are stored as zeros, so the product needs no guard.

use super::args::GemmInput;
use cubecl::prelude::*;

use super::args::{at, load, Dims, Layouts, View};

/// A's BM×BK tile at (`row0`, `k0`), stored transposed (`tile[k·BM + r]`) so that a unit reads
/// its rows of one k as consecutive elements. `units` copy it, unit `UNIT_POS` taking elements
/// `UNIT_POS + i·units`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn stage_a<I: GemmInput, A: Float>(
    a: &Array<I>,
    va: &View,
    tile: &mut SharedMemory<A>,
    batch: u32,
    row0: u32,
    k0: u32,
    m: u32,
    k_end: u32,
    #[comptime] bm: u32,
    #[comptime] bk: u32,
    #[comptime] units: u32,
    #[comptime] by_cols: bool,
) {
    #[unroll]
    for i in 0..comptime!(bm * bk / units) {
        let e = i * units + UNIT_POS;
        let (r, k) = if comptime!(by_cols) {
            (e % bm, e / bm)
        } else {
            (e / bk, e % bk)
        };
        let mut value = A::new(0.0);
        if row0 + r < m && k0 + k < k_end {
            value = load::<I, A>(a, at(va, batch, row0 + r, k0 + k));
        }
        tile[(k * bm + r) as usize] = value;
    }
}

/// B's BK×BN tile at (`k0`, `col0`), stored row by row (`tile[k·BN + c]`).
#[cube]
#[allow(clippy::too_many_arguments)]
fn stage_b<I: GemmInput, A: Float>(
    b: &Array<I>,
    vb: &View,
    tile: &mut SharedMemory<A>,
    batch: u32,
    k0: u32,
    col0: u32,
    n: u32,
    k_end: u32,
    #[comptime] bk: u32,
    #[comptime] bn: u32,
    #[comptime] units: u32,
    #[comptime] by_cols: bool,
) {
    #[unroll]
    for i in 0..comptime!(bk * bn / units) {
        let e = i * units + UNIT_POS;
        let (k, c) = if comptime!(by_cols) {
            (e % bk, e / bk)
        } else {
            (e / bn, e % bn)
        };
        let mut value = A::new(0.0);
        if k0 + k < k_end && col0 + c < n {
            value = load::<I, A>(b, at(vb, batch, k0 + k, col0 + c));
        }
        tile[(k * bn + c) as usize] = value;
    }
}

/// A cube's block tile: BM×BN of C, BK of K per trip, staged by `units` units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiles {
    /// Rows of C per cube.
    pub bm: u32,
    /// Columns of C per cube.
    pub bn: u32,
    /// Elements of K per trip.
    pub bk: u32,
    /// Units per cube.
    pub units: u32,
}

/// Stages the trip at `k0`: A's BM×BK tile at (`row0`, `k0`) into `tile_a` (transposed:
/// `tile_a[k·BM + r]`, so a unit reads its rows of one k as consecutive elements) and B's BK×BN tile at (`k0`, `col0`) into `tile_b`, then waits for the whole
/// cube, so that every unit may read any element of either.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn stage_tiles<I: GemmInput, A: Float>(
    a: &Array<I>,
    b: &Array<I>,
    va: &View,
    vb: &View,
    tile_a: &mut SharedMemory<A>,
    tile_b: &mut SharedMemory<A>,
    dims: &Dims,
    batch: u32,
    row0: u32,
    col0: u32,
    k0: u32,
    #[comptime] tiles: Tiles,
    #[comptime] layouts: Layouts,
) {
    let (bm, bn, bk, units) = comptime!((tiles.bm, tiles.bn, tiles.bk, tiles.units));
    stage_a::<I, A>(
        a,
        va,
        tile_a,
        batch,
        row0,
        k0,
        dims.m,
        dims.k_end,
        bm,
        bk,
        units,
        layouts.a_by_cols,
    );
    stage_b::<I, A>(
        b,
        vb,
        tile_b,
        batch,
        k0,
        col0,
        dims.n,
        dims.k_end,
        bk,
        bn,
        units,
        layouts.b_by_cols,
    );
    sync_cube();
}
