//! The kernels, one file per technique, and the one function that launches whichever a plan
//! names.

pub mod naive;
pub mod tiled;

use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::plan::{Kernel, Plan};
use crate::problem::Problem;

/// Enqueues C = A·B on `client` with the kernel and configuration of `plan`: one launch per slab
/// of K ([`Plan::k_slabs`]), so that no unit's loop runs past [`crate::plan::LOOP_TRIP_LIMIT`].
///
/// The caller has checked `plan` against the device's limits (`Plan::check`) and the handles
/// hold `problem`'s operands, row-major f32, so the unchecked launch cannot index out of bounds.
pub(crate) fn launch<R: Runtime>(
    client: &ComputeClient<R>,
    plan: &Plan,
    problem: &Problem,
    a: &Handle,
    b: &Handle,
    c: &Handle,
) {
    let shape = plan
        .launch_shape(problem)
        .expect("plan was checked before launch");
    let [gx, gy, gz] = shape.grid;
    let dim = CubeDim::new_2d(plan.tpb, plan.tpb);
    // Indices are 32-bit in the kernels; Plan::check bounds every matrix below u32::MAX elements.
    let (m, k, n) = (problem.m as u32, problem.k as u32, problem.n as u32);
    for slab in plan.k_slabs(problem) {
        let (begin, end, accumulate) = (slab.begin, slab.end, u32::from(slab.accumulate));
        let count = CubeCount::Static(gx, gy, gz);
        // SAFETY: the grid covers C exactly once, every read and write is guarded by m, n and
        // the slab's end ≤ k, and the buffers hold a_len, b_len and c_len elements.
        unsafe {
            let a = ArrayArg::from_raw_parts(a.clone(), problem.a_len());
            let b = ArrayArg::from_raw_parts(b.clone(), problem.b_len());
            let c = ArrayArg::from_raw_parts(c.clone(), problem.c_len());
            match plan.kernel {
                Kernel::Naive => naive::naive_matmul::launch_unchecked::<f32, R>(
                    client, count, dim, a, b, c, m, k, n, begin, end, accumulate,
                ),
                Kernel::Tiled => tiled::tiled_matmul::launch_unchecked::<f32, R>(
                    client, count, dim, a, b, c, m, k, n, begin, end, accumulate, plan.tpb,
                ),
            }
        }
    }
}
