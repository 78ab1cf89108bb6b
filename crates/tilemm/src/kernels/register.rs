//! Register blocking without shared memory: each unit computes a TM×TN tile of C from TM
//! entries of a column of A and TN entries of a row of B per step of K, so every value loaded
//! feeds TN (or TM) fused multiply-adds instead of one.
//!
//! No shared memory and no barriers: what CPU-like devices (lavapipe, where barriers are slow)
//! and some mobile GPUs prefer; on a discrete GPU the caches stand in for shared memory. Units
//! whose rows or columns run past C's edge read the last valid row or column instead (clamped,
//! so no load needs a branch) and store only what lies inside C.

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, fetch, outer_products, store_tile, GemmArgs};
use super::{Expand, Launch, Compiler, LaunchShape, Rung};
use crate::problem::{Precision, Problem};

/// Steps of K unrolled in the main loop; the remainder runs one step at a time. A multiple of
/// every line size, so that a row of A is read in whole vectors.
const UNROLL_K: u32 = 4;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K; unit (x, y) of cube (X, Y) computes
/// rows `(Y·dim_y + y)·TM ..` and columns `(X·dim_x + x)·TN ..` of C. A is read in vectors of
/// `line_a` along K, B in vectors of `line_b` along N (see `Args::line`).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn register_matmul<I: GemmInput, A: Float + CubeElement, O: Float, NA: Size, NB: Size>(
    a: &Array<Vector<I, NA>>,
    b: &Array<Vector<I, NB>>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: RegisterConfig,
    #[comptime] line_a: u32,
    #[comptime] line_b: u32,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (tm, tn) = comptime!((config.tm, config.tn));
    let row0 = (CUBE_POS_Y * CUBE_DIM_Y + UNIT_POS_Y) * tm;
    let col0 = (CUBE_POS_X * CUBE_DIM_X + UNIT_POS_X) * tn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    // No barrier follows: units wholly outside C may leave.
    if row0 < dims.m && col0 < dims.n {
        // Where each row of A and column of B starts at k_begin. Rows and columns past C's
        // edge are clamped to the last one (read, never stored); with vectors of B, to the
        // last whole vector (N is a multiple of the line).
        let mut a_rows = Array::<usize>::new(comptime!(tm as usize));
        let mut b_cols = Array::<usize>::new(comptime!(tn as usize));
        #[unroll]
        for i in 0..tm {
            let row = (row0 + i).min(dims.m - 1);
            a_rows[i as usize] = at(&va, batch, row, dims.k_begin);
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
        let mut av = Array::<A>::new(comptime!(tm as usize));
        // At most LOOP_TRIP_LIMIT iterations (k_per_trip = UNROLL_K): the host splits K.
        let whole = len / UNROLL_K;
        for s in 0..whole {
            let k0 = (s * UNROLL_K) as usize;
            #[unroll]
            for q in 0..UNROLL_K / line_a {
                // line_a values of K for each row at once (whole vectors inside the row).
                let mut quad = Array::<Vector<I, NA>>::new(comptime!(tm as usize));
                if comptime!(line_a > 1) {
                    #[unroll]
                    for i in 0..tm {
                        let ix = a_rows[i as usize] + k0 + (q * line_a) as usize;
                        quad[i as usize] = a[ix / comptime!(line_a as usize)];
                    }
                }
                #[unroll]
                for u in 0..line_a {
                    let kk = k0 + (q * line_a + u) as usize;
                    #[unroll]
                    for i in 0..tm {
                        if comptime!(line_a > 1) {
                            av[i as usize] = A::cast_from(quad[i as usize][u as usize]);
                        } else {
                            av[i as usize] = fetch::<I, A, NA>(
                                a,
                                a_rows[i as usize] + kk * a_step,
                                1u32,
                            );
                        }
                    }
                    outer_products::<I, A, NB>(b, &b_cols, kk * b_step, 0, &av, &mut acc, tm, tn, 1u32, line_b);
                }
            }
        }
        for kk in whole * UNROLL_K..len {
            let kk = kk as usize;
            #[unroll]
            for i in 0..tm {
                av[i as usize] =
                    fetch::<I, A, NA>(a, a_rows[i as usize] + kk * a_step, line_a);
            }
            outer_products::<I, A, NB>(b, &b_cols, kk * b_step, 0, &av, &mut acc, tm, tn, 1u32, line_b);
        }

        store_tile::<A, O>(c, &vc, &dims, batch, row0, col0, &acc, alpha, beta, tm, tn);
    }
}

/// The register-blocked rung: a TM×TN tile of C per unit, no shared memory.
pub struct Register;

/// The register-blocked rung's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RegisterConfig {
    /// Rows of C per unit.
    pub tm: u32,
    /// Columns of C per unit.
    pub tn: u32,
    /// Units per cube along each axis.
    pub side: u32,
}

impl RegisterConfig {
    const KEYS: [&'static str; 3] = ["tm", "tn", "side"];
}

impl Rung for Register {
    const NAME: &'static str = "register";
    const ABOUT: &'static str = "a TM×TN tile of C per unit held in registers, no shared memory";
    type Config = RegisterConfig;

    fn configs() -> Vec<RegisterConfig> {
        [(4, 4, 8), (8, 8, 8), (16, 8, 8), (4, 4, 16)]
            .map(|(tm, tn, side)| RegisterConfig { tm, tn, side })
            .to_vec()
    }

    fn default_config() -> RegisterConfig {
        RegisterConfig {
            tm: 4,
            tn: 4,
            side: 8,
        }
    }

    fn parse(text: &str) -> Result<RegisterConfig, String> {
        let v = super::parse_settings(text, &RegisterConfig::KEYS)?;
        let config = RegisterConfig {
            tm: v[0],
            tn: v[1],
            side: v[2],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(config: &RegisterConfig) -> String {
        format!("tm={}:tn={}:side={}", config.tm, config.tn, config.side)
    }

    /// Tiles of more than 16 accumulators are for CPU-like devices (lavapipe's best is 16×8):
    /// 8×8 already spills on gfx1100 in f32 and on sm_90 in f64 (the compile check).
    fn may_spill(config: &RegisterConfig, _precision: Precision, _compiler: Compiler) -> bool {
        config.tm * config.tn > 16
    }

    fn shape(config: &RegisterConfig, problem: &Problem) -> LaunchShape {
        let side = config.side;
        super::block_tiled_shape(
            problem,
            [config.tn * side, config.tm * side],
            [side, side],
            0,
            UNROLL_K,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &RegisterConfig,
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
            register_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.side, config.side),
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
        config: &RegisterConfig,
        kernel: Expand,
    ) -> CubeDim {
        let line = kernel.line;
        let mut kernel = kernel;
        kernel.register_size::<register_matmul::NA>(line as usize);
        kernel.register_size::<register_matmul::NB>(line as usize);
        let t = kernel.typed_with::<Vector<I, register_matmul::NA>, Vector<I, register_matmul::NB>, A, O>();
        register_matmul::expand::<I, A, O, register_matmul::NA, register_matmul::NB>(
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
        CubeDim::new_2d(config.side, config.side)
    }
}
