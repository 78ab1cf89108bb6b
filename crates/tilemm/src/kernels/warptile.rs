//! Warp tiling with double-buffered shared memory: the vectorized rung's shared tiles, with the
//! units of a cube grouped into warps that each own a WM×WN tile of the block (siboehm's
//! kernel 10: 94% of cuBLAS on an A6000, where vectorized loads reach 78%).
//!
//! - **Warp tiles.** A warp's WM×WN tile is cut into WMI×WNI sub-tiles; in each, the warp's
//!   lanes form a grid of TM×TN micro-tiles. A unit thus computes (WMI·TM)×(WNI·TN) entries
//!   from WMI·TM values of A and WNI·TN of B per step of K, and the lanes of a warp read one
//!   compact stretch of each shared tile (lanes of a row read the same A: a broadcast), which
//!   keeps shared-memory traffic per FMA low and bank conflicts out.
//! - **Double buffering.** Two stages of shared memory: while the cube computes on one, each
//!   unit's loads of the next tile from global memory are in flight into registers, stored to
//!   the other stage after the FMAs. One barrier per step of BK instead of two.
//!
//! The grouping into warps is a layout, not a requirement: the kernel computes the same
//! product on planes of any width (lavapipe's 8); it is fastest where the hardware's warps are
//! the configuration's `warp`.

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, store, Layouts, GemmArgs};
use super::vectorized::{fetch_tile, put_tile};
use super::{Expand, Launch, Compiler, LaunchShape, Rung};
use crate::problem::{Precision, Problem};

/// Elements per vector in the shared tiles.
const WIDTH: u32 = 4;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K. Cube (X, Y) computes the BM×BN block
/// at (Y·BM, X·BN); its warps, in row-major order, the WM×WN tiles of the block.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn warptile_matmul<I: GemmInput, A: Float + CubeElement, O: Float, N: Size>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: WarptileConfig,
    #[comptime] layouts: Layouts,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm, bn, bk, units) = comptime!((config.bm, config.bn, config.bk, config.units()));
    let (bm4, bn4) = comptime!((bm / WIDTH, bn / WIDTH));
    let (wm, wn, warp) = comptime!((config.wm, config.wn, config.warp));
    let (wmi, wni) = comptime!((config.wm_iter(), config.wn_iter));
    let (sub_m, sub_n) = comptime!((wm / config.wm_iter(), wn / config.wn_iter));
    let (tm, tn) = comptime!((config.tm, config.tn));
    let (rows, cols) = comptime!((config.wm_iter() * config.tm, config.wn_iter * config.tn));
    let (stage_a, stage_b) = comptime!((bm4 * bk, bk * bn4));

    let mut tile_a = SharedMemory::<Vector<A, N>>::new(comptime!((2 * stage_a) as usize));
    let mut tile_b = SharedMemory::<Vector<A, N>>::new(comptime!((2 * stage_b) as usize));
    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;

    // The unit's warp tile in the block, and its micro-tile in each of the warp's sub-tiles.
    let (warp_id, lane) = (UNIT_POS / warp, UNIT_POS % warp);
    let warps_n = comptime!(bn / wn);
    let lanes_n = comptime!(sub_n / tn);
    let row_in_block = (warp_id / warps_n) * wm + (lane / lanes_n) * tm;
    let col_in_block = (warp_id % warps_n) * wn + (lane % lanes_n) * tn;
    // In vectors of the shared tiles; every other offset in the main loop is a constant.
    let (row4, col4) = (row_in_block / WIDTH, col_in_block / WIDTH);

    let mut acc = Array::<A>::new(comptime!((rows * cols) as usize));
    #[unroll]
    for e in 0..rows * cols {
        acc[e as usize] = A::new(0.0);
    }
    let mut av = Array::<Vector<A, N>>::new(comptime!((rows / WIDTH) as usize));
    let mut bv = Array::<Vector<A, N>>::new(comptime!((cols / WIDTH) as usize));
    let mut fa = Array::<Vector<A, N>>::new(comptime!((stage_a / units) as usize));
    let mut fb = Array::<Vector<A, N>>::new(comptime!((stage_b / units) as usize));

    // Whether each operand is contiguous along its tile's long side (A's rows, B's columns).
    let (a_along, b_along) = comptime!((layouts.a_by_cols, !layouts.b_by_cols));
    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    if tiles > 0 {
        let k0 = dims.k_begin;
        fetch_tile::<I, A, N>(
            a, &va, &mut fa, batch, row0, dims.m, k0, &dims, bm, bk, units, a_along, true,
        );
        fetch_tile::<I, A, N>(
            b, &vb, &mut fb, batch, col0, dims.n, k0, &dims, bn, bk, units, b_along, false,
        );
        put_tile::<A, N>(&fa, &mut tile_a, 0, bm, bk, units, a_along);
        put_tile::<A, N>(&fb, &mut tile_b, 0, bn, bk, units, b_along);
    }
    sync_cube();

    // Every unit runs every trip (it takes part in the barriers); at most LOOP_TRIP_LIMIT of
    // them (k_per_trip = BK): the host splits K.
    for t in 0..tiles {
        let more = t + 1 < tiles;
        // The next tile's loads are issued before the FMAs on this one, so they overlap.
        if more {
            let k0 = dims.k_begin + (t + 1) * bk;
            fetch_tile::<I, A, N>(
                a, &va, &mut fa, batch, row0, dims.m, k0, &dims, bm, bk, units, a_along, true,
            );
            fetch_tile::<I, A, N>(
                b, &vb, &mut fb, batch, col0, dims.n, k0, &dims, bn, bk, units, b_along, false,
            );
        }
        let base_a = (t % 2) * stage_a + row4;
        let base_b = (t % 2) * stage_b + col4;
        #[unroll]
        for k in 0..bk {
            #[unroll]
            for i in 0..wmi {
                #[unroll]
                for v in 0..tm / WIDTH {
                    let at_k = comptime!(k * bm4 + i * sub_m / WIDTH + v);
                    av[(i * tm / WIDTH + v) as usize] = tile_a[(base_a + at_k) as usize];
                }
            }
            #[unroll]
            for j in 0..wni {
                #[unroll]
                for v in 0..tn / WIDTH {
                    let at_k = comptime!(k * bn4 + j * sub_n / WIDTH + v);
                    bv[(j * tn / WIDTH + v) as usize] = tile_b[(base_b + at_k) as usize];
                }
            }
            #[unroll]
            for i in 0..rows {
                let x = av[(i / WIDTH) as usize][(i % WIDTH) as usize];
                #[unroll]
                for j in 0..cols {
                    acc[(i * cols + j) as usize] +=
                        x * bv[(j / WIDTH) as usize][(j % WIDTH) as usize];
                }
            }
        }
        if more {
            // The other stage was last read before the previous barrier.
            let next = (t + 1) % 2;
            put_tile::<A, N>(&fa, &mut tile_a, next * stage_a, bm, bk, units, a_along);
            put_tile::<A, N>(&fb, &mut tile_b, next * stage_b, bn, bk, units, b_along);
        }
        sync_cube();
    }

    #[unroll]
    for i in 0..rows {
        let row = row0 + row_in_block + (i / tm) * sub_m + i % tm;
        #[unroll]
        for j in 0..cols {
            let col = col0 + col_in_block + (j / tn) * sub_n + j % tn;
            if row < dims.m && col < dims.n {
                let value = acc[(i * cols + j) as usize];
                store::<A, O>(c, at(&vc, batch, row, col), value, alpha, beta);
            }
        }
    }
}

/// The warp-tiled, double-buffered rung.
pub struct Warptile;

/// The warp-tiled rung's settings: the block tile, the warp tile, how many sub-tiles a warp
/// takes along N (`wni`; along M it is what makes a warp's lanes cover the tile), the unit's
/// micro-tile and the warp width the layout groups units by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct WarptileConfig {
    /// Rows of C per cube.
    pub bm: u32,
    /// Columns of C per cube.
    pub bn: u32,
    /// Elements of K staged per trip.
    pub bk: u32,
    /// Rows of C per warp.
    pub wm: u32,
    /// Columns of C per warp.
    pub wn: u32,
    /// Sub-tiles per warp along N.
    pub wn_iter: u32,
    /// Rows of a unit's micro-tile.
    pub tm: u32,
    /// Columns of a unit's micro-tile.
    pub tn: u32,
    /// Units per warp in the layout.
    pub warp: u32,
}

impl WarptileConfig {
    const KEYS: [&'static str; 9] = ["bm", "bn", "bk", "wm", "wn", "wni", "tm", "tn", "warp"];

    /// Units per cube.
    pub fn units(&self) -> u32 {
        (self.bm / self.wm) * (self.bn / self.wn) * self.warp
    }

    /// Sub-tiles per warp along M: what makes the warp's lanes cover its tile.
    pub fn wm_iter(&self) -> u32 {
        (self.wm * self.wn / (self.warp * self.tm * self.tn * self.wn_iter)).max(1)
    }

    /// Whether the tiles nest exactly and every unit stages whole vectors, the same number.
    fn divides(&self) -> bool {
        let units = self.units();
        let (sub_m, sub_n) = (self.wm / self.wm_iter(), self.wn / self.wn_iter);
        [self.tm, self.tn].iter().all(|x| x.is_multiple_of(WIDTH))
            && self.bm.is_multiple_of(self.wm)
            && self.bn.is_multiple_of(self.wn)
            && self.wm.is_multiple_of(self.wm_iter())
            && self.wn.is_multiple_of(self.wn_iter)
            && sub_m.is_multiple_of(self.tm)
            && sub_n.is_multiple_of(self.tn)
            && (sub_m / self.tm) * (sub_n / self.tn) == self.warp
            && (self.bm / WIDTH * self.bk).is_multiple_of(units)
            && (self.bn / WIDTH * self.bk).is_multiple_of(units)
    }

    /// Accumulators per unit.
    pub fn per_unit(&self) -> u32 {
        self.wm_iter() * self.tm * self.wn_iter * self.tn
    }
}

impl Rung for Warptile {
    const NAME: &'static str = "warptile";
    const ABOUT: &'static str =
        "vectorized tiles computed warp by warp, shared memory double-buffered";
    type Config = WarptileConfig;

    fn configs() -> Vec<WarptileConfig> {
        // Measured on an H100 at 8192³ (BENCHMARKS.md): 8 warps of 64×32 ran 36.6 TFLOPS,
        // siboehm's 4 warps of 64×64 33.8, 4 warps of 32×32 26.1 (for small products, where
        // the large tiles leave SMs idle). 64×64 warps in 2×2 sub-tiles (32.5) and a 128×64
        // block (28.6) were slower and are not registered.
        [
            (128, 128, 16, 64, 32, 2, 8, 4),
            (128, 128, 16, 64, 64, 4, 8, 4),
            (64, 64, 16, 32, 32, 2, 4, 4),
        ]
        .map(|(bm, bn, bk, wm, wn, wn_iter, tm, tn)| WarptileConfig {
            bm,
            bn,
            bk,
            wm,
            wn,
            wn_iter,
            tm,
            tn,
            warp: 32,
        })
        .into_iter()
        .filter(WarptileConfig::divides)
        .collect()
    }

    fn default_config() -> WarptileConfig {
        Self::configs()[0]
    }

    fn parse(text: &str) -> Result<WarptileConfig, String> {
        let v = super::parse_settings(text, &WarptileConfig::KEYS)?;
        let config = WarptileConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            wm: v[3],
            wn: v[4],
            wn_iter: v[5],
            tm: v[6],
            tn: v[7],
            warp: v[8],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &WarptileConfig) -> String {
        format!(
            "bm={}:bn={}:bk={}:wm={}:wn={}:wni={}:tm={}:tn={}:warp={}",
            c.bm, c.bn, c.bk, c.wm, c.wn, c.wn_iter, c.tm, c.tn, c.warp
        )
    }

    /// 64 or more f64 accumulators per unit need 128 registers for them alone (see the
    /// vectorized rung). AMD's compiler (clang 15) gives every configuration 128 VGPRs or
    /// more, even 32×32 warp tiles with 16 accumulators per unit, and spills on gfx1100 (and
    /// with 128 accumulators on CDNA too), where NVIDIA's needs 84 to 240 registers and spills
    /// nothing: a known defect of this rung on AMD, reported by the compile check rather than
    /// failing it.
    fn may_spill(c: &WarptileConfig, precision: Precision, compiler: Compiler) -> bool {
        compiler == Compiler::Amd
            || (c.per_unit() >= 64 && precision.accumulate == crate::problem::DType::F64)
    }

    fn shape(c: &WarptileConfig, problem: &Problem) -> LaunchShape {
        let staged = 2 * (c.bm * c.bk + c.bk * c.bn) as usize;
        super::block_tiled_shape(
            problem,
            [c.bn, c.bm],
            [c.units(), 1],
            staged * problem.precision.accumulate.size_bytes(),
            c.bk,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &WarptileConfig,
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
            warptile_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_1d(config.units()),
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
        config: &WarptileConfig,
        kernel: Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let mut kernel = kernel;
        kernel.register_size::<warptile_matmul::N>(WIDTH as usize);
        let t = kernel.typed::<I, A, O>();
        warptile_matmul::expand::<I, A, O, warptile_matmul::N>(
            t.scope,
            WIDTH as usize,
            t.a,
            t.b,
            t.c,
            t.args,
            *config,
            layouts,
        );
        CubeDim::new_1d(config.units())
    }
}
