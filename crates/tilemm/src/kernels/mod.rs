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

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use crate::plan::SUPPORTED_TPB;

    #[test]
    fn every_unit_writes_its_entry_of_c_and_nothing_past_it() {
        let session = crate::backend::wgpu::open(None).unwrap_or_else(|e| {
            panic!("this test runs the kernels on a wgpu device and found none: {e}")
        });
        let client = session.client();
        // Grids overhang C in both directions for every TPB.
        let p = Problem::new(17, 5, 33).unwrap();
        let a: Vec<f32> = (0..p.a_len()).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..p.b_len()).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut expected = vec![0.0f32; p.c_len()];
        for i in 0..p.m {
            for j in 0..p.n {
                expected[i * p.n + j] = (0..p.k).map(|l| a[i * p.k + l] * b[l * p.n + j]).sum();
            }
        }
        // C's buffer is followed by a guard several times its size, and all of it starts as a
        // NaN with a payload no product has: an entry no unit wrote keeps it, and a store past
        // C (a unit outside C that was not stopped, a wrong row stride) changes the guard.
        let sentinel = f32::from_bits(0x7fc0_dead);
        let guarded = p.c_len() * 5 + 4096;
        for kernel in Kernel::ALL {
            for tpb in SUPPORTED_TPB {
                let plan = Plan::new(kernel, tpb).unwrap();
                let a_h = client.create_from_slice(f32::as_bytes(&a));
                let b_h = client.create_from_slice(f32::as_bytes(&b));
                let c_h = client.create_from_slice(f32::as_bytes(&vec![sentinel; guarded]));
                launch(client, &plan, &p, &a_h, &b_h, &c_h);
                let bytes = client.read_one(c_h).unwrap();
                let c = f32::from_bytes(&bytes);
                assert_eq!(&c[..p.c_len()], &expected[..], "{plan}");
                let touched = c[p.c_len()..]
                    .iter()
                    .filter(|x| x.to_bits() != sentinel.to_bits())
                    .count();
                assert_eq!(touched, 0, "{plan} wrote {touched} entries past C");
            }
        }
    }
}
