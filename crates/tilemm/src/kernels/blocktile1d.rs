//! 1D block tiling: a cube stages BM×BK of A and BK×BN of B in shared memory, and each unit
//! computes a column of TM entries of C, reusing each value of B it reads TM times (siboehm's
//! kernel 4: 2.8× the example's shared-memory tiles on an A6000).

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, store, Layouts, GemmArgs};
use super::common::stage::{stage_tiles, Tiles};
use super::{Expand, Launch, LaunchShape, Rung};
use crate::problem::Problem;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K. Cube (X, Y) computes the BM×BN block
/// at (Y·BM, X·BN); unit (x, y) rows `y·TM .. y·TM + TM` of its column x.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn blocktile1d_matmul<I: GemmInput, A: Float + CubeElement, O: Float>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: Blocktile1dConfig,
    #[comptime] layouts: Layouts,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm, bn, bk, tm) = comptime!((config.bm, config.bn, config.bk, config.tm));
    let mut tile_a = SharedMemory::<A>::new(comptime!((bm * bk) as usize));
    let mut tile_b = SharedMemory::<A>::new(comptime!((bk * bn) as usize));
    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    let (ty, tx) = (UNIT_POS_Y, UNIT_POS_X);

    let mut acc = Array::<A>::new(comptime!(tm as usize));
    #[unroll]
    for i in 0..tm {
        acc[i as usize] = A::new(0.0);
    }

    // Every unit runs every trip (it takes part in the barriers); at most LOOP_TRIP_LIMIT of
    // them (k_per_trip = BK): the host splits K.
    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    for t in 0..tiles {
        let k0 = dims.k_begin + t * bk;
        stage_tiles::<I, A>(
            a,
            b,
            &va,
            &vb,
            &mut tile_a,
            &mut tile_b,
            &dims,
            batch,
            row0,
            col0,
            k0,
            comptime!(config.tiles()),
            layouts,
        );

        #[unroll]
        for k in 0..bk {
            let bv = tile_b[(k * bn + tx) as usize];
            #[unroll]
            for i in 0..tm {
                acc[i as usize] += tile_a[(k * bm + ty * tm + i) as usize] * bv;
            }
        }
        // Nobody may overwrite the tiles while a neighbour still reads them.
        sync_cube();
    }

    #[unroll]
    for i in 0..tm {
        let (row, col) = (row0 + ty * tm + i, col0 + tx);
        if row < dims.m && col < dims.n {
            store::<A, O>(c, at(&vc, batch, row, col), acc[i as usize], alpha, beta);
        }
    }
}

/// The 1D block-tiling rung.
pub struct Blocktile1d;

/// The 1D block-tiling rung's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Blocktile1dConfig {
    /// Rows of C per cube.
    pub bm: u32,
    /// Columns of C per cube (one per unit along x).
    pub bn: u32,
    /// Elements of K staged per trip.
    pub bk: u32,
    /// Rows of C per unit.
    pub tm: u32,
}

impl Blocktile1dConfig {
    const KEYS: [&'static str; 4] = ["bm", "bn", "bk", "tm"];

    /// The block tile, as staging takes it.
    pub fn tiles(&self) -> Tiles {
        Tiles {
            bm: self.bm,
            bn: self.bn,
            bk: self.bk,
            units: self.units(),
        }
    }

    /// Units per cube.
    pub fn units(&self) -> u32 {
        self.bn * (self.bm / self.tm)
    }
}

impl Rung for Blocktile1d {
    const NAME: &'static str = "blocktile1d";
    const ABOUT: &'static str = "shared-memory tiles of A and B, a column of TM entries of C per unit";
    type Config = Blocktile1dConfig;

    fn configs() -> Vec<Blocktile1dConfig> {
        [(32, 32, 8, 4), (64, 32, 8, 8), (64, 64, 8, 8)]
            .map(|(bm, bn, bk, tm)| Blocktile1dConfig { bm, bn, bk, tm })
            .to_vec()
    }

    fn default_config() -> Blocktile1dConfig {
        Blocktile1dConfig {
            bm: 64,
            bn: 64,
            bk: 8,
            tm: 8,
        }
    }

    fn parse(text: &str) -> Result<Blocktile1dConfig, String> {
        let v = super::parse_settings(text, &Blocktile1dConfig::KEYS)?;
        let config = Blocktile1dConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            tm: v[3],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &Blocktile1dConfig) -> String {
        format!("bm={}:bn={}:bk={}:tm={}", c.bm, c.bn, c.bk, c.tm)
    }

    fn shape(c: &Blocktile1dConfig, problem: &Problem) -> LaunchShape {
        let staged = (c.bm * c.bk + c.bk * c.bn) as usize;
        super::block_tiled_shape(
            problem,
            [c.bn, c.bm],
            [c.bn, c.bm / c.tm],
            staged * problem.precision.accumulate.size_bytes(),
            c.bk,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Blocktile1dConfig,
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
            blocktile1d_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.bn, config.bm / config.tm),
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config, layouts,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Blocktile1dConfig,
        kernel: Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let t = kernel.typed::<I, A, O>();
        blocktile1d_matmul::expand::<I, A, O>(t.scope, t.a, t.b, t.c, t.args, *config, layouts);
        CubeDim::new_2d(config.bn, config.bm / config.tm)
    }
}
