//! The example's `matmul`: one unit per element of C, operands read from global memory.
//!
//! Unlike the example, x runs along the columns of C, so neighbouring units of a warp write
//! neighbouring elements of a row-major C, and the accumulator is the precision's (numba's
//! `tmp = 0.` silently accumulated in f64).

use super::common::args::GemmInput;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, load, store, GemmArgs};
use super::{Expand, Launch, LaunchShape, Rung, SquareBlock};
use crate::problem::Problem;

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, one unit per entry, batch entry
/// `CUBE_POS_Z + batch_begin`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn naive_matmul<I: GemmInput, A: Float + CubeElement, O: Float>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let col = ABSOLUTE_POS_X;
    let row = ABSOLUTE_POS_Y;
    let batch = CUBE_POS_Z + dims.batch_begin;
    // The grid is rounded up to whole blocks; no barrier follows, so surplus units may skip.
    if row < dims.m && col < dims.n {
        let mut acc = A::new(0.0);
        // Offsets hoisted out of the loop: CubeCL's WGSL re-reads scalars every iteration.
        let a_row = at(&va, batch, row, dims.k_begin);
        let b_col = at(&vb, batch, dims.k_begin, col);
        let (a_step, b_step) = (va.col_stride as usize, vb.row_stride as usize);
        // At most LOOP_TRIP_LIMIT iterations: the host splits K (Plan::k_slabs).
        for i in 0..dims.k_end - dims.k_begin {
            let l = i as usize;
            let x = load::<I, A>(a, a_row + l * a_step);
            let y = load::<I, A>(b, b_col + l * b_step);
            acc += x * y;
        }
        store::<A, O>(c, at(&vc, batch, row, col), acc, alpha, beta);
    }
}

/// The naive rung: a TPB×TPB block of units, one per entry of C.
pub struct Naive;

/// The naive rung's one setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct NaiveConfig {
    /// Units per block along each axis.
    pub tpb: u32,
}

impl Rung for Naive {
    const NAME: &'static str = "naive";
    const ABOUT: &'static str = "one unit per entry of C, operands read from global memory";
    type Config = NaiveConfig;

    fn configs() -> Vec<NaiveConfig> {
        SquareBlock::SIDES.map(|tpb| NaiveConfig { tpb }).to_vec()
    }

    fn default_config() -> NaiveConfig {
        NaiveConfig {
            tpb: SquareBlock::DEFAULT,
        }
    }

    fn parse(text: &str) -> Result<NaiveConfig, String> {
        SquareBlock::parse(text).map(|tpb| NaiveConfig { tpb })
    }

    fn show(config: &NaiveConfig) -> String {
        format!("tpb={}", config.tpb)
    }

    fn shape(config: &NaiveConfig, problem: &Problem) -> LaunchShape {
        SquareBlock(config.tpb).shape(problem, 0, 1)
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &NaiveConfig,
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
            naive_matmul::launch_unchecked::<I, A, O, R>(
                client,
                count,
                CubeDim::new_2d(config.tpb, config.tpb),
                a,
                b,
                c,
                args.gemm::<A, R>(),
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &NaiveConfig,
        kernel: Expand,
    ) -> CubeDim {
        let t = kernel.typed::<I, A, O>();
        naive_matmul::expand::<I, A, O>(t.scope, t.a, t.b, t.c, t.args);
        CubeDim::new_2d(config.tpb, config.tpb)
    }
}
