//! Split-K's second half: the partials that the slices of K left (one M×N matrix of the
//! accumulator's type per slice and batch entry) added, in slice order, into C with α and β.
//!
//! A rung that splits K ([`crate::kernels::Rung::k_splits`]) is launched over a partial problem:
//! the same A and B, C replaced by the partials, α = 1, β = 0, the output in the
//! accumulator's type. Each entry of C is then rounded once, by [`reduce_partials()`]: the sum of the
//! slices' sums is a sum of the same K products in another order, so the verifier's bound and
//! precision limit hold as for one pass.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::args::{at, View, ViewLaunch};
use crate::problem::{DType, MatrixDesc, Precision, Problem};

/// Units per cube side of the reduction.
const SIDE: u32 = 16;

/// C = α·Σₛ Pₛ + β·C for the batch entries from `batch_begin` (one per z of the grid, `entries`
/// of them); the partial Pₛ of entry e is the row-major M×N matrix at
/// (s·entries + e + partials_begin)·M·N of `partials`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn reduce_partials<A: Float + CubeElement, O: Float>(
    partials: &Array<A>,
    c: &mut Array<O>,
    vc: View,
    m: u32,
    n: u32,
    batch_begin: u32,
    partials_begin: u32,
    alpha: A,
    beta: A,
    #[comptime] splits: u32,
) {
    let col = ABSOLUTE_POS_X;
    let row = ABSOLUTE_POS_Y;
    let entry = CUBE_POS_Z;
    if row < m && col < n {
        let plane = m * n;
        let within = row * n + col;
        let mut sum = A::new(0.0);
        for s in 0..splits {
            sum +=
                partials[((s * CUBE_COUNT_Z + entry + partials_begin) * plane + within) as usize];
        }
        let index = at(&vc, batch_begin + entry, row, col);
        let mut value = alpha * sum;
        // β = 0 never reads C (it may hold NaN).
        if beta != A::new(0.0) {
            value += beta * A::cast_from(c[index]);
        }
        c[index] = O::cast_from(value);
    }
}

/// The problem the slices of a split launch compute: `canonical`'s A and B over `entries`
/// batch entries, with C the partials (row-major, `splits · entries` matrices of the
/// accumulator's type), α = 1 and β = 0.
pub(crate) fn partial_problem(canonical: &Problem, splits: u32, entries: u32) -> Problem {
    let acc = canonical.precision.accumulate;
    Problem {
        c: MatrixDesc::row_major(canonical.m, canonical.n),
        batch: (splits * entries) as usize,
        alpha: 1.0,
        beta: 0.0,
        precision: Precision {
            input: canonical.precision.input,
            accumulate: acc,
            output: acc,
        },
        ..*canonical
    }
}

/// Elements of the partials of a split launch over `entries` batch entries.
pub(crate) fn partials_len(canonical: &Problem, splits: u32, entries: u32) -> usize {
    canonical.m * canonical.n * (splits * entries) as usize
}

/// Enqueues [`reduce_partials`] over `entries` batch entries from `batch_begin` of
/// `canonical`'s C (`c`, `c_words` elements of its stored type: f32 for bf16 where the
/// device has no bf16, `packed`), with `beta`; the first entry's partials are at
/// `partials_begin` in the partials.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce<R: Runtime>(
    client: &ComputeClient<R>,
    canonical: &Problem,
    partials: &Handle,
    c: (&Handle, usize),
    splits: u32,
    entries: u32,
    (batch_begin, partials_begin): (u32, u32),
    beta: f64,
    packed: bool,
) {
    let (m, n) = (canonical.m as u32, canonical.n as u32);
    let count = CubeCount::Static(n.div_ceil(SIDE), m.div_ceil(SIDE), entries);
    let dim = CubeDim::new_2d(SIDE, SIDE);
    let d = &canonical.c;
    let len = partials_len(canonical, splits, entries + partials_begin);
    macro_rules! go {
        ($a:ty, $o:ty) => {
            // SAFETY: the partials hold `len` elements of the accumulator's type (the split
            // launch wrote them all), C holds its view's span, and every access is guarded by
            // M and N.
            unsafe {
                reduce_partials::launch_unchecked::<$a, $o, R>(
                    client,
                    count,
                    dim,
                    ArrayArg::from_raw_parts(partials.clone(), len),
                    ArrayArg::from_raw_parts(c.0.clone(), c.1),
                    ViewLaunch::new(
                        d.offset as u32,
                        d.row_stride as u32,
                        d.col_stride as u32,
                        d.batch_stride as u32,
                    ),
                    m,
                    n,
                    batch_begin,
                    partials_begin,
                    super::args::scalar::<$a>(canonical.alpha),
                    super::args::scalar::<$a>(beta),
                    splits,
                )
            }
        };
    }
    let stored = crate::kernels::stored_output(canonical.precision, packed);
    match (canonical.precision.accumulate, stored) {
        (DType::F64, _) => go!(f64, f64),
        (_, DType::F16) => go!(f32, half::f16),
        (_, DType::BF16) => go!(f32, half::bf16),
        _ => go!(f32, f32),
    }
}
