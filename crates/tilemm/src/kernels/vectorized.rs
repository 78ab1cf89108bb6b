//! Vectorized shared memory: blocktile2d's tiles and TM×TN register micro-tile, with the tiles
//! held as vectors of 4 in shared memory (A transposed), so that a unit reads its TM values of
//! A and TN of B for one k in TM/4 + TN/4 wide loads (`LDS.128`) instead of TM + TN scalar ones
//! (siboehm's kernel 6: 78% of cuBLAS on an A6000, where 2D block tiling reaches 69%). The
//! main loop is then mostly FMAs, which the compile check's `loop FMA` column shows.

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, load, store_tile, Dims, Layouts, View, GemmArgs};
use super::{Expand, Launch, Compiler, LaunchShape, Rung};
use crate::problem::{Precision, Problem};

/// Elements per vector in the shared tiles.
const WIDTH: u32 = 4;

/// Fetches this unit's share of an operand's tile into `regs`, for [`put_tile`], as vectors of
/// 4 elements along the tile's long side (A's BM rows, B's BN columns) at one k: vector
/// `k·LEN/4 + p/4` of the tile holds elements `p..p+4` at k, so A's tile is stored transposed.
/// `a_side`: the operand is A (its long side is the view's rows) or B (its columns). The tile
/// starts at `start` along the long side (`limit` long: M or N) and at `k0` along K, inside the
/// slab (`k0 < k_end`) and inside C. `contiguous`: the operand is stored contiguous along the
/// long side (a column-major A, a row-major B); then consecutive units take consecutive
/// vectors, else consecutive k, so that a warp's loads run along memory either way. Elements
/// past an edge are zeros, by selection, not a branch around a load. Split from the store so
/// that a double-buffered rung can compute while the loads are in flight.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn fetch_tile<I: GemmInput, A: Float, N: Size>(
    buffer: &Array<I>,
    view: &View,
    regs: &mut Array<Vector<A, N>>,
    batch: u32,
    start: u32,
    limit: u32,
    k0: u32,
    dims: &Dims,
    #[comptime] len: u32,
    #[comptime] bk: u32,
    #[comptime] units: u32,
    #[comptime] contiguous: bool,
    #[comptime] a_side: bool,
) {
    let len4 = comptime!(len / WIDTH);
    #[unroll]
    for i in 0..comptime!(len4 * bk / units) {
        let v = i * units + UNIT_POS;
        let (p4, k) = if comptime!(contiguous) {
            (v % len4, v / len4)
        } else {
            (v / bk, v % bk)
        };
        let mut vector = Vector::<A, N>::empty();
        #[unroll]
        for e in 0..WIDTH {
            let p = start + p4 * WIDTH + e;
            // Past an edge the load reads the last element instead and the value is replaced
            // by zero.
            let (pc, kc) = (p.min(limit - 1), (k0 + k).min(dims.k_end - 1));
            let index = if comptime!(a_side) {
                at(view, batch, pc, kc)
            } else {
                at(view, batch, kc, pc)
            };
            let value = load::<I, A>(buffer, index);
            let inside = k0 + k < dims.k_end && p < limit;
            vector[e as usize] = select(inside, value, A::new(0.0));
        }
        regs[i as usize] = vector;
    }
}

/// Stores what [`fetch_tile`] fetched (with the same `len`, `bk`, `units` and `contiguous`)
/// into the tile that starts at vector `offset` of `tile`.
#[cube]
pub(super) fn put_tile<A: Float, N: Size>(
    regs: &Array<Vector<A, N>>,
    tile: &mut SharedMemory<Vector<A, N>>,
    offset: u32,
    #[comptime] len: u32,
    #[comptime] bk: u32,
    #[comptime] units: u32,
    #[comptime] contiguous: bool,
) {
    let len4 = comptime!(len / WIDTH);
    #[unroll]
    for i in 0..comptime!(len4 * bk / units) {
        let v = i * units + UNIT_POS;
        let (p4, k) = if comptime!(contiguous) {
            (v % len4, v / len4)
        } else {
            (v / bk, v % bk)
        };
        tile[(offset + k * len4 + p4) as usize] = regs[i as usize];
    }
}

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K. Cube (X, Y) computes the BM×BN block
/// at (Y·BM, X·BN); unit (x, y) its rows `y·TM ..` and columns `x·TN ..`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn vectorized_matmul<I: GemmInput, A: Float + CubeElement, O: Float, N: Size>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: VectorizedConfig,
    #[comptime] layouts: Layouts,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm4, bn4, bk) = comptime!((config.bm / WIDTH, config.bn / WIDTH, config.bk));
    let (tm, tn) = comptime!((config.tm, config.tn));
    let (tm4, tn4) = comptime!((tm / WIDTH, tn / WIDTH));
    let mut tile_a = SharedMemory::<Vector<A, N>>::new(comptime!((bm4 * bk) as usize));
    let mut tile_b = SharedMemory::<Vector<A, N>>::new(comptime!((bk * bn4) as usize));
    let (bm, bn) = comptime!((config.bm, config.bn));
    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    let (ty, tx) = (UNIT_POS_Y, UNIT_POS_X);

    let mut acc = Array::<A>::new(comptime!((tm * tn) as usize));
    #[unroll]
    for e in 0..tm * tn {
        acc[e as usize] = A::new(0.0);
    }
    let mut av = Array::<Vector<A, N>>::new(comptime!(tm4 as usize));
    let mut bv = Array::<Vector<A, N>>::new(comptime!(tn4 as usize));
    let units = comptime!(config.units());
    let mut fa = Array::<Vector<A, N>>::new(comptime!((bm4 * bk / units) as usize));
    let mut fb = Array::<Vector<A, N>>::new(comptime!((bk * bn4 / units) as usize));

    // Every unit runs every trip (it takes part in the barriers); at most LOOP_TRIP_LIMIT of
    // them (k_per_trip = BK): the host splits K.
    // Whether each operand is contiguous along its tile's long side (A's rows, B's columns).
    let (a_along, b_along) = comptime!((layouts.a_by_cols, !layouts.b_by_cols));
    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    for t in 0..tiles {
        let k0 = dims.k_begin + t * bk;
        fetch_tile::<I, A, N>(
            a, &va, &mut fa, batch, row0, dims.m, k0, &dims, bm, bk, units, a_along, true,
        );
        put_tile::<A, N>(&fa, &mut tile_a, 0, bm, bk, units, a_along);
        fetch_tile::<I, A, N>(
            b, &vb, &mut fb, batch, col0, dims.n, k0, &dims, bn, bk, units, b_along, false,
        );
        put_tile::<A, N>(&fb, &mut tile_b, 0, bn, bk, units, b_along);
        sync_cube();

        #[unroll]
        for k in 0..bk {
            #[unroll]
            for i in 0..tm4 {
                av[i as usize] = tile_a[(k * bm4 + ty * tm4 + i) as usize];
            }
            #[unroll]
            for j in 0..tn4 {
                bv[j as usize] = tile_b[(k * bn4 + tx * tn4 + j) as usize];
            }
            #[unroll]
            for i in 0..tm {
                let x = av[(i / WIDTH) as usize][(i % WIDTH) as usize];
                #[unroll]
                for j in 0..tn {
                    acc[(i * tn + j) as usize] += x * bv[(j / WIDTH) as usize][(j % WIDTH) as usize];
                }
            }
        }
        // Nobody may overwrite the tiles while a neighbour still reads them.
        sync_cube();
    }

    let (row, col) = (row0 + ty * tm, col0 + tx * tn);
    store_tile::<A, O>(c, &vc, &dims, batch, row, col, &acc, alpha, beta, tm, tn);
}

/// The vectorized shared-memory rung.
pub struct Vectorized;

/// The vectorized shared-memory rung's settings (blocktile2d's, with TM, TN, BM and BN
/// multiples of 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct VectorizedConfig {
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

impl VectorizedConfig {
    const KEYS: [&'static str; 5] = ["bm", "bn", "bk", "tm", "tn"];

    /// Units per cube.
    pub fn units(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Whether every unit stages whole vectors, the same number each.
    fn divides(&self) -> bool {
        let units = self.units();
        [self.bm, self.bn, self.tm, self.tn]
            .iter()
            .all(|x| x.is_multiple_of(WIDTH))
            && (self.bm / WIDTH * self.bk).is_multiple_of(units)
            && (self.bn / WIDTH * self.bk).is_multiple_of(units)
    }
}

impl Rung for Vectorized {
    const NAME: &'static str = "vectorized";
    const ABOUT: &'static str =
        "blocktile2d with its shared tiles held and read as vectors of 4 (A transposed)";
    type Config = VectorizedConfig;

    fn configs() -> Vec<VectorizedConfig> {
        [
            (64, 64, 16, 4, 4),
            (64, 64, 8, 8, 8),
            (128, 64, 16, 8, 4),
            (128, 128, 8, 8, 8),
            (128, 128, 16, 8, 8),
        ]
        .map(|(bm, bn, bk, tm, tn)| VectorizedConfig { bm, bn, bk, tm, tn })
        .into_iter()
        .filter(VectorizedConfig::divides)
        .collect()
    }

    fn default_config() -> VectorizedConfig {
        VectorizedConfig {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
        }
    }

    fn parse(text: &str) -> Result<VectorizedConfig, String> {
        let v = super::parse_settings(text, &VectorizedConfig::KEYS)?;
        let config = VectorizedConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            tm: v[3],
            tn: v[4],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &VectorizedConfig) -> String {
        format!("bm={}:bn={}:bk={}:tm={}:tn={}", c.bm, c.bn, c.bk, c.tm, c.tn)
    }

    /// An 8×8 micro-tile of f64 accumulators needs 128 registers for them alone: allowed to
    /// spill in f64 (the check cannot tell targets apart here). RDNA 3 does (a 256-unit block
    /// leaves it 128 VGPRs); NVIDIA and CDNA do not, as the compile check shows.
    fn may_spill(c: &VectorizedConfig, precision: Precision, _compiler: Compiler) -> bool {
        c.tm * c.tn >= 64 && precision.accumulate == crate::problem::DType::F64
    }

    fn shape(c: &VectorizedConfig, problem: &Problem) -> LaunchShape {
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
        config: &VectorizedConfig,
        launch: Launch<'_, R>,
    ) {
        let Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid covers C
        // once, and every access is guarded by m, n and the slab's end.
        unsafe {
            vectorized_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.bn / config.tn, config.bm / config.tm),
                WIDTH as usize,
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config,
                args.layouts(),
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &VectorizedConfig,
        kernel: Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let mut kernel = kernel;
        kernel.register_size::<vectorized_matmul::N>(WIDTH as usize);
        let t = kernel.typed::<I, A, O>();
        vectorized_matmul::expand::<I, A, O, vectorized_matmul::N>(
            t.scope,
            WIDTH as usize,
            t.a,
            t.b,
            t.c,
            t.args,
            *config,
            layouts,
        );
        CubeDim::new_2d(config.bn / config.tn, config.bm / config.tm)
    }
}
