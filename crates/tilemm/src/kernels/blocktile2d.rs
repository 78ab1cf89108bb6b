//! 2D block tiling: a cube stages BM×BK of A and BK×BN of B in shared memory, and each unit
//! computes a TM×TN micro-tile of C from TM values of A and TN of B held in registers per k, so
//! that every shared-memory read feeds TN (or TM) fused multiply-adds (siboehm's kernel 5,
//! 69% of cuBLAS on an A6000 where the example's tiles reach 13%).

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{store_tile, Layouts, GemmArgs};
use super::common::stage::{stage_tiles, Tiles};
use super::{Expand, Launch, LaunchShape, Rung};
use crate::problem::Problem;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K. Cube (X, Y) computes the BM×BN block
/// at (Y·BM, X·BN); unit (x, y) its rows `y·TM ..` and columns `x·TN ..`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn blocktile2d_matmul<I: GemmInput, A: Float + CubeElement, O: Float>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: Blocktile2dConfig,
    #[comptime] layouts: Layouts,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm, bn, bk) = comptime!((config.bm, config.bn, config.bk));
    let (tm, tn) = comptime!((config.tm, config.tn));
    let mut tile_a = SharedMemory::<A>::new(comptime!((bm * bk) as usize));
    let mut tile_b = SharedMemory::<A>::new(comptime!((bk * bn) as usize));
    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    let (ty, tx) = (UNIT_POS_Y, UNIT_POS_X);

    let mut acc = Array::<A>::new(comptime!((tm * tn) as usize));
    #[unroll]
    for e in 0..tm * tn {
        acc[e as usize] = A::new(0.0);
    }
    let mut av = Array::<A>::new(comptime!(tm as usize));
    let mut bv = Array::<A>::new(comptime!(tn as usize));

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
            #[unroll]
            for i in 0..tm {
                av[i as usize] = tile_a[(k * bm + ty * tm + i) as usize];
            }
            #[unroll]
            for j in 0..tn {
                bv[j as usize] = tile_b[(k * bn + tx * tn + j) as usize];
            }
            #[unroll]
            for i in 0..tm {
                #[unroll]
                for j in 0..tn {
                    acc[(i * tn + j) as usize] += av[i as usize] * bv[j as usize];
                }
            }
        }
        // Nobody may overwrite the tiles while a neighbour still reads them.
        sync_cube();
    }

    let (row, col) = (row0 + ty * tm, col0 + tx * tn);
    store_tile::<A, O>(c, &vc, &dims, batch, row, col, &acc, alpha, beta, tm, tn);
}

/// The 2D block-tiling rung.
pub struct Blocktile2d;

/// The 2D block-tiling rung's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Blocktile2dConfig {
    /// Rows of C per cube.
    pub bm: u32,
    /// Columns of C per cube.
    pub bn: u32,
    /// Elements of K staged per trip.
    pub bk: u32,
    /// Rows of C per unit.
    pub tm: u32,
    /// Columns of C per unit.
    pub tn: u32,
}

impl Blocktile2dConfig {
    const KEYS: [&'static str; 5] = ["bm", "bn", "bk", "tm", "tn"];

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
        (self.bm / self.tm) * (self.bn / self.tn)
    }
}

impl Rung for Blocktile2d {
    const NAME: &'static str = "blocktile2d";
    const ABOUT: &'static str =
        "shared-memory tiles of A and B, a TM×TN micro-tile of C per unit in registers";
    type Config = Blocktile2dConfig;

    fn configs() -> Vec<Blocktile2dConfig> {
        [
            (32, 32, 8, 4, 4),
            (64, 64, 8, 4, 4),
            (64, 64, 8, 8, 8),
            (128, 64, 8, 8, 4),
            (128, 128, 8, 8, 8),
        ]
        .map(|(bm, bn, bk, tm, tn)| Blocktile2dConfig { bm, bn, bk, tm, tn })
        .to_vec()
    }

    fn default_config() -> Blocktile2dConfig {
        Blocktile2dConfig {
            bm: 64,
            bn: 64,
            bk: 8,
            tm: 4,
            tn: 4,
        }
    }

    fn parse(text: &str) -> Result<Blocktile2dConfig, String> {
        let v = super::parse_settings(text, &Blocktile2dConfig::KEYS)?;
        let config = Blocktile2dConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            tm: v[3],
            tn: v[4],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &Blocktile2dConfig) -> String {
        format!("bm={}:bn={}:bk={}:tm={}:tn={}", c.bm, c.bn, c.bk, c.tm, c.tn)
    }

    fn shape(c: &Blocktile2dConfig, problem: &Problem) -> LaunchShape {
        let staged = (c.bm * c.bk + c.bk * c.bn) as usize;
        super::block_tiled_shape(
            problem,
            [c.bn, c.bm],
            [c.bn / c.tn, c.bm / c.tm],
            staged * problem.precision.accumulate.size_bytes(),
            c.bk,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Blocktile2dConfig,
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
            blocktile2d_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.bn / config.tn, config.bm / config.tm),
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config, layouts,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Blocktile2dConfig,
        kernel: Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let t = kernel.typed::<I, A, O>();
        blocktile2d_matmul::expand::<I, A, O>(t.scope, t.a, t.b, t.c, t.args, *config, layouts);
        CubeDim::new_2d(config.bn / config.tn, config.bm / config.tm)
    }
}
