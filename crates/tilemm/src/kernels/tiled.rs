//! The example's `fast_matmul`: TPB×TPB tiles of A and B staged in shared memory.
//!
//! Fixed against the example: every unit stays until the last barrier (units outside C load
//! zeros instead of returning, which is undefined behaviour before a barrier), the K loop runs
//! ceil(K/TPB) times instead of `gridDim.x` times, and only the store is guarded, so any M, K, N
//! work. Each tile is fetched along the operand's contiguous axis (a compile-time choice), so
//! that neighbouring units read neighbouring elements whether A or B is stored row- or
//! column-major.

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, load, store, GemmArgs};
use super::{Expand, Launch, LaunchShape, Rung, SquareBlock};
use crate::problem::Problem;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, launched with TPB×TPB units per cube.
/// `a_by_cols` / `b_by_cols`: the operand is column-major, so unit x walks its rows.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn tiled_matmul<I: GemmInput, A: Float + CubeElement, O: Float>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] tpb: u32,
    #[comptime] a_by_cols: bool,
    #[comptime] b_by_cols: bool,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let mut tile_a = SharedMemory::<A>::new(comptime!((tpb * tpb) as usize));
    let mut tile_b = SharedMemory::<A>::new(comptime!((tpb * tpb) as usize));

    let tx = UNIT_POS_X;
    let ty = UNIT_POS_Y;
    let row0 = CUBE_POS_Y * tpb;
    let col0 = CUBE_POS_X * tpb;
    let batch = CUBE_POS_Z + dims.batch_begin;
    // Which element of each tile this unit fetches: (row, column) within the tile.
    let (ar, ac) = if comptime!(a_by_cols) { (tx, ty) } else { (ty, tx) };
    let (br, bc) = if comptime!(b_by_cols) { (tx, ty) } else { (ty, tx) };

    let mut acc = A::new(0.0);
    // At most LOOP_TRIP_LIMIT tiles: the host splits K (Plan::k_slabs).
    let tiles = (dims.k_end - dims.k_begin).div_ceil(tpb);
    for t in 0..tiles {
        let k0 = dims.k_begin + t * tpb;
        // A[row0 + ar, k0 + ac] and B[k0 + br, col0 + bc], or 0 past an edge of the matrix or
        // of the slab.
        let mut a_val = A::new(0.0);
        if row0 + ar < dims.m && k0 + ac < dims.k_end {
            a_val = load::<I, A>(a, at(&va, batch, row0 + ar, k0 + ac));
        }
        let mut b_val = A::new(0.0);
        if k0 + br < dims.k_end && col0 + bc < dims.n {
            b_val = load::<I, A>(b, at(&vb, batch, k0 + br, col0 + bc));
        }
        tile_a[(ar * tpb + ac) as usize] = a_val;
        tile_b[(br * tpb + bc) as usize] = b_val;
        sync_cube();

        #[unroll]
        for j in 0..tpb {
            acc += tile_a[(ty * tpb + j) as usize] * tile_b[(j * tpb + tx) as usize];
        }
        // Nobody may overwrite the tiles while a neighbour still reads them.
        sync_cube();
    }

    let (row, col) = (row0 + ty, col0 + tx);
    if row < dims.m && col < dims.n {
        store::<A, O>(c, at(&vc, batch, row, col), acc, alpha, beta);
    }
}

/// The tiled rung: TPB×TPB tiles of A and B in shared memory, one unit per entry of C.
pub struct Tiled;

/// The tiled rung's one setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TiledConfig {
    /// Units per block along each axis, and the tiles' side.
    pub tpb: u32,
}

impl Rung for Tiled {
    const NAME: &'static str = "tiled";
    const ABOUT: &'static str = "TPB×TPB tiles of A and B staged in shared memory";
    type Config = TiledConfig;

    fn configs() -> Vec<TiledConfig> {
        SquareBlock::SIDES.map(|tpb| TiledConfig { tpb }).to_vec()
    }

    fn default_config() -> TiledConfig {
        TiledConfig {
            tpb: SquareBlock::DEFAULT,
        }
    }

    fn parse(text: &str) -> Result<TiledConfig, String> {
        SquareBlock::parse(text).map(|tpb| TiledConfig { tpb })
    }

    fn show(config: &TiledConfig) -> String {
        format!("tpb={}", config.tpb)
    }

    fn shape(config: &TiledConfig, problem: &Problem) -> LaunchShape {
        let tile = (config.tpb * config.tpb) as usize;
        let shared = 2 * tile * problem.precision.accumulate.size_bytes();
        SquareBlock(config.tpb).shape(problem, shared, config.tpb)
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &TiledConfig,
        launch: Launch<'_, R>,
    ) {
        let Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        let layouts = args.layouts();
        // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid covers C
        // once, and every access is guarded by m, n and the slab's end.
        unsafe {
            tiled_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.tpb, config.tpb),
                a,
                b,
                c,
                args.gemm::<A, R>(),
                config.tpb, layouts.a_by_cols, layouts.b_by_cols,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &TiledConfig,
        kernel: Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let t = kernel.typed::<I, A, O>();
        tiled_matmul::expand::<I, A, O>(t.scope, t.a, t.b, t.c, t.args, config.tpb, layouts.a_by_cols, layouts.b_by_cols);
        CubeDim::new_2d(config.tpb, config.tpb)
    }
}
