//! Register blocking with A's rows shared across a plane: the units of a plane compute TM×TN
//! tiles of the same TM rows of C side by side, so instead of each unit loading those rows of A
//! itself, each loads TM/P of them (P units per plane) and plane shuffles hand every value to
//! all. B is loaded as in [`super::register`]: each unit its own columns.
//!
//! A plane shuffle moves a register between lanes without memory. Where loads are costly per
//! unit, as on lavapipe (which loads from storage buffers one SIMD lane at a time), that cuts A's
//! loads by P; on a GPU it is the register-cache technique (loads once per warp instead of per
//! thread, through the shuffle unit). No shared memory and no barriers. The main loop takes
//! four steps of K at a time, each accumulator its four products in a row (see
//! [`super::common::args::outer_products()`]).
//!
//! The plane width P is part of the configuration (the launch and the shuffles' lanes depend
//! on it), and [`crate::plan::check::runnable`] refuses a device whose planes are not exactly P
//! wide. Rows and columns are taken from the plane's position and the unit's lane in it, never
//! from an assumed order of units in a cube. Every unit of a plane runs the main loop (a
//! shuffle needs all): columns past C's edge are clamped for loading and never stored; a plane
//! wholly below C's last row leaves as one.

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, fetch, outer_products, store_tile, GemmArgs};
use super::{Expand, Launch, Compiler, LaunchShape, Rung};
use crate::problem::{DType, Precision, Problem};

/// Steps of K unrolled in the main loop; the remainder runs one step at a time. A multiple of
/// every line size, so that a row of A is read in whole vectors.
const UNROLL_K: u32 = 4;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K. Plane p of cube (X, Y) computes rows
/// `(Y·planes + p)·TM ..` of C; its lane l, columns `(X·P + l)·TN ..`. Lane l loads rows
/// `l, l + P, ..` of the plane's TM, and row i reaches every lane from lane `i mod P`. A is read
/// in vectors of `line_a` along K, B in vectors of `line_b` along N (see `Args::line`).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn broadcast_matmul<I: GemmInput, A: Float + CubeElement, O: Float, NA: Size, NB: Size>(
    a: &Array<Vector<I, NA>>,
    b: &Array<Vector<I, NB>>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: BroadcastConfig,
    #[comptime] line_a: u32,
    #[comptime] line_b: u32,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (tm, tn, plane) = comptime!((config.tm, config.tn, config.plane));
    // Rows of the plane's TM each lane loads (lanes past TM load a clamped row, unused).
    let own = comptime!(tm.div_ceil(plane));
    let lane = UNIT_POS_PLANE;
    let row0 = (CUBE_POS_Y * comptime!(config.planes) + PLANE_POS) * tm;
    let col0 = (CUBE_POS_X * plane + lane) * tn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    // The same for every lane of the plane, so the plane leaves whole: the shuffles below
    // need all its lanes.
    if row0 < dims.m {
        // Where the rows this lane loads and its columns of B start at k_begin. Rows and
        // columns past C's edge are clamped to the last one (read, never stored); with vectors
        // of B, to the last whole vector (N is a multiple of the line).
        let mut a_rows = Array::<usize>::new(comptime!(own as usize));
        let mut b_cols = Array::<usize>::new(comptime!(tn as usize));
        #[unroll]
        for r in 0..own {
            let row = (row0 + r * plane + lane).min(dims.m - 1);
            a_rows[r as usize] = at(&va, batch, row, dims.k_begin);
        }
        #[unroll]
        for v in 0..tn / line_b {
            let col = (col0 + v * line_b).min(dims.n - line_b);
            b_cols[(v * line_b) as usize] = at(&vb, batch, dims.k_begin, col);
        }
        let mut acc = Array::<A>::new(comptime!((tm * tn) as usize));
        #[unroll]
        for e in 0..tm * tn {
            acc[e as usize] = A::new(0.0);
        }

        let (a_step, b_step) = (va.col_stride as usize, vb.row_stride as usize);
        let len = dims.k_end - dims.k_begin;
        // A's values for UNROLL_K steps of K (step u's TM from u·TM): the tile's accumulators
        // then take UNROLL_K products each in a row (see `outer_products`).
        let mut av = Array::<A>::new(comptime!((UNROLL_K * tm) as usize));
        // At most LOOP_TRIP_LIMIT iterations (k_per_trip = UNROLL_K): the host splits K.
        let whole = len / UNROLL_K;
        for s in 0..whole {
            let k0 = (s * UNROLL_K) as usize;
            if comptime!(line_a > 1) {
                #[unroll]
                for q in 0..UNROLL_K / line_a {
                    // This lane's rows, line_a values of K each (whole vectors inside a row),
                    // then each value of the plane's rows from the lane that loaded it (scalar
                    // shuffles: lavapipe ran them faster than shuffles of whole vectors).
                    let mut mine = Array::<Vector<I, NA>>::new(comptime!(own as usize));
                    #[unroll]
                    for r in 0..own {
                        let ix = a_rows[r as usize] + k0 + (q * line_a) as usize;
                        mine[r as usize] = a[ix / comptime!(line_a as usize)];
                    }
                    #[unroll]
                    for u in 0..line_a {
                        #[unroll]
                        for i in 0..tm {
                            let mine_u = A::cast_from(mine[(i / plane) as usize][u as usize]);
                            av[((q * line_a + u) * tm + i) as usize] = share::<A>(mine_u, i % plane);
                        }
                    }
                }
            } else {
                #[unroll]
                for u in 0..UNROLL_K {
                    let ka = (k0 + u as usize) * a_step;
                    load_rows::<I, A, NA>(a, &a_rows, ka, &mut av, u * tm, config, line_a);
                }
            }
            outer_products::<I, A, NB>(b, &b_cols, k0 * b_step, b_step, &av, &mut acc, tm, tn, UNROLL_K, line_b);
        }
        for kk in whole * UNROLL_K..len {
            let kk = kk as usize;
            load_rows::<I, A, NA>(a, &a_rows, kk * a_step, &mut av, 0u32, config, line_a);
            outer_products::<I, A, NB>(b, &b_cols, kk * b_step, 0, &av, &mut acc, tm, tn, 1u32, line_b);
        }

        store_tile::<A, O>(c, &vc, &dims, batch, row0, col0, &acc, alpha, beta, tm, tn);
    }
}

/// The plane's TM values of A at one k (`ka` past the rows' offsets) into `av` from `at` on:
/// each lane loads its rows one element at a time (from A's vectors of `line_a`), then shuffles
/// share them.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_rows<I: GemmInput, A: Float, NA: Size>(
    a: &Array<Vector<I, NA>>,
    a_rows: &Array<usize>,
    ka: usize,
    av: &mut Array<A>,
    #[comptime] at: u32,
    #[comptime] config: BroadcastConfig,
    #[comptime] line_a: u32,
) {
    let (tm, plane) = comptime!((config.tm, config.plane));
    let own = comptime!(tm.div_ceil(plane));
    let mut mine = Array::<A>::new(comptime!(own as usize));
    #[unroll]
    for r in 0..own {
        mine[r as usize] = fetch::<I, A, NA>(a, a_rows[r as usize] + ka, line_a);
    }
    #[unroll]
    for i in 0..tm {
        av[(at + i) as usize] = share::<A>(mine[(i / plane) as usize], i % plane);
    }
}

/// Lane `lane`'s `value`, on every lane of the plane. Values narrower than 32 bits travel as
/// f32 (exactly): HIP has no 16-bit shuffle.
///
/// A shuffle with the same lane everywhere, not a broadcast: on CUDA and HIP both are the same
/// `shfl`, but SPIR-V's broadcast reaches Mesa 22's lavapipe as a "read invocation" that scans
/// the lanes for the first active one (an 8-step loop per value), where its shuffle is one
/// `vpermd` (naga, too, writes WGSL's `subgroupBroadcast` as a shuffle).
#[cube]
fn share<A: Float>(value: A, #[comptime] lane: u32) -> A {
    if comptime!(A::size().unwrap_or(4) < 4) {
        A::cast_from(plane_shuffle(f32::cast_from(value), lane))
    } else {
        plane_shuffle(value, lane)
    }
}

/// The plane-broadcast rung: a TM×TN tile of C per unit, A's rows loaded once per plane.
pub struct Broadcast;

/// The plane-broadcast rung's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct BroadcastConfig {
    /// Rows of C per unit (shared by its plane).
    pub tm: u32,
    /// Columns of C per unit.
    pub tn: u32,
    /// Planes per cube, stacked along the rows of C.
    pub planes: u32,
    /// Units per plane the kernel is laid out for: the device's plane width.
    pub plane: u32,
}

impl BroadcastConfig {
    const KEYS: [&'static str; 4] = ["tm", "tn", "planes", "plane"];
}

impl Rung for Broadcast {
    const NAME: &'static str = "broadcast";
    const ABOUT: &'static str =
        "register tiles whose rows of A are loaded once per plane and shared by plane shuffles";
    type Config = BroadcastConfig;

    fn configs() -> Vec<BroadcastConfig> {
        // Planes of 8 (lavapipe's SIMD width): tiles of 192 outputs cut B's loads per FMA
        // furthest while the JIT still compiles them in seconds. At 1024³ 24×8 ran 42 GFLOPS
        // against 37 for 16×8 on Mesa 22.3.6 and 77 against 74 on Mesa 26; 16×12 won at 256³
        // (BENCHMARKS.md). 32×8 was slower on both, and 64×8 overflows a stack inside Mesa
        // 22.3's shader compiler.
        // Planes of 32 (NVIDIA, RDNA wave32) and 64 (CDNA): GPU-sized tiles.
        [
            (16, 8, 8, 8),
            (24, 8, 4, 8),
            (16, 12, 8, 8),
            (8, 4, 4, 32),
            (16, 4, 4, 32),
            (8, 4, 2, 64),
        ]
        .map(|(tm, tn, planes, plane)| BroadcastConfig {
            tm,
            tn,
            planes,
            plane,
        })
        .to_vec()
    }

    fn default_config() -> BroadcastConfig {
        BroadcastConfig {
            tm: 16,
            tn: 8,
            planes: 8,
            plane: 8,
        }
    }

    fn parse(text: &str) -> Result<BroadcastConfig, String> {
        let v = super::parse_settings(text, &BroadcastConfig::KEYS)?;
        let config = BroadcastConfig {
            tm: v[0],
            tn: v[1],
            planes: v[2],
            plane: v[3],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &BroadcastConfig) -> String {
        format!(
            "tm={}:tn={}:planes={}:plane={}",
            c.tm, c.tn, c.planes, c.plane
        )
    }

    /// The planes-of-8 tiles hold 128 or more accumulators: sized for CPU-like devices, whose
    /// stack is cheap. 64 accumulators of f64 take 128 registers.
    fn may_spill(config: &BroadcastConfig, precision: Precision, _compiler: Compiler) -> bool {
        config.tm * config.tn >= 128
            || (precision.accumulate == DType::F64 && config.tm * config.tn >= 64)
    }

    fn plane_width(config: &BroadcastConfig) -> Option<u32> {
        Some(config.plane)
    }

    fn shape(config: &BroadcastConfig, problem: &Problem) -> LaunchShape {
        super::block_tiled_shape(
            problem,
            [config.tn * config.plane, config.tm * config.planes],
            [config.plane * config.planes, 1],
            0,
            UNROLL_K,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &BroadcastConfig,
        launch: Launch<'_, R>,
    ) {
        let Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        let (line_a, line_b) = args.unit_lines::<I>(config.tn);
        // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid covers C
        // once, every access is clamped to C's last row or column, vectors lie inside rows
        // (`Args::line`), and `Plan::check` has checked the plane width of a configuration laid
        // out for one.
        unsafe {
            broadcast_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_1d(config.plane * config.planes),
                line_a as usize,
                line_b as usize,
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config,
                line_a,
                line_b,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &BroadcastConfig,
        kernel: Expand,
    ) -> CubeDim {
        let line = kernel.line;
        let mut kernel = kernel;
        kernel.register_size::<broadcast_matmul::NA>(line as usize);
        kernel.register_size::<broadcast_matmul::NB>(line as usize);
        let t = kernel.typed_with::<Vector<I, broadcast_matmul::NA>, Vector<I, broadcast_matmul::NB>, A, O>();
        broadcast_matmul::expand::<I, A, O, broadcast_matmul::NA, broadcast_matmul::NB>(
            t.scope,
            line as usize,
            line as usize,
            t.a,
            t.b,
            t.c,
            t.args,
            *config,
            line,
            line,
        );
        CubeDim::new_1d(config.plane * config.planes)
    }
}
