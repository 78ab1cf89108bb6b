//! The kernels on a real Vulkan device (lavapipe on machines without a GPU).
//!
//! These tests need a wgpu adapter and fail, with the install hint, when there is none.

use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::backend::list_devices;
use tilemm::plan::SUPPORTED_TPB;
use tilemm::verify::Reference;
use tilemm::{inputs, Backend, GpuSession, Kernel, Plan, Problem};

fn gpu() -> &'static GpuSession {
    static GPU: OnceLock<GpuSession> = OnceLock::new();
    GPU.get_or_init(|| {
        GpuSession::open(Backend::Wgpu, None).unwrap_or_else(|e| {
            panic!("these tests run the kernels on a wgpu device and found none: {e}")
        })
    })
}

/// Shapes that catch edge-tile bugs: degenerate, K=1, primes, non-multiples of every TPB, tall
/// and skinny, short and wide, exact multiples.
const SHAPES: [(usize, usize, usize); 11] = [
    (1, 1, 1),
    (1, 300, 1),
    (33, 1, 17),
    (97, 131, 53),
    (100, 37, 250),
    (513, 7, 3),
    (3, 7, 513),
    (1000, 2, 9),
    (64, 64, 64),
    (40, 96, 24),
    (127, 129, 65),
];

fn integer_matrix(len: usize, rng: &mut StdRng) -> Vec<f32> {
    (0..len)
        .map(|_| rng.random_range(-8i32..=8) as f32)
        .collect()
}

/// The exact product of integer matrices, in i64: independent of every float code path.
fn exact_product(p: &Problem, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0i64; p.m * p.n];
    for i in 0..p.m {
        for l in 0..p.k {
            let x = a[i * p.k + l] as i64;
            for j in 0..p.n {
                c[i * p.n + j] += x * b[l * p.n + j] as i64;
            }
        }
    }
    c.into_iter().map(|v| v as f32).collect()
}

#[test]
fn integer_inputs_give_the_exact_product() {
    // |entries| ≤ 8 and K ≤ 300: every partial sum is an integer below 2²⁴, exact in f32, so any
    // summation order must reproduce the exact product bit for bit.
    let mut rng = StdRng::seed_from_u64(7);
    for kernel in Kernel::ALL {
        for tpb in SUPPORTED_TPB {
            let plan = Plan::new(kernel, tpb).unwrap();
            for (m, k, n) in SHAPES {
                let p = Problem::new(m, k, n).unwrap();
                let a = integer_matrix(p.a_len(), &mut rng);
                let b = integer_matrix(p.b_len(), &mut rng);
                let run = gpu().matmul(&p, &plan, &a, &b).unwrap();
                let expected = exact_product(&p, &a, &b);
                let wrong = run.c.iter().zip(&expected).filter(|(x, y)| x != y).count();
                assert_eq!(
                    wrong,
                    0,
                    "{plan} on {m}×{k}×{n}: {wrong} of {} entries differ",
                    p.c_len()
                );
            }
        }
    }
}

#[test]
fn k_beyond_the_drivers_loop_cap_gives_the_exact_product() {
    // Debian 12's lavapipe stops a unit after 65535 loop iterations and returns the truncated
    // sum without an error; the naive kernel loops once per element of K, the tiled kernel once
    // per tile of TPB. With K past that cap for every kernel and tile size, entries in {-1, 0, 1}
    // keep every partial sum an integer below 2²⁴, so the product must be exact: one lost term
    // shows.
    const DRIVER_LOOP_CAP: usize = 65535;
    let mut rng = StdRng::seed_from_u64(11);
    for kernel in Kernel::ALL {
        for tpb in SUPPORTED_TPB {
            let plan = Plan::new(kernel, tpb).unwrap();
            let k = (DRIVER_LOOP_CAP + 977) * plan.k_per_trip() as usize + 3;
            let p = Problem::new(3, k, 2).unwrap();
            assert!(plan.launch_shape(&p).unwrap().launches > 1, "{plan}: K={k}");
            let mut ternary = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|_| rng.random_range(-1i32..=1) as f32)
                    .collect()
            };
            let a = ternary(p.a_len());
            let b = ternary(p.b_len());
            let run = gpu().matmul(&p, &plan, &a, &b).unwrap();
            assert_eq!(run.c, exact_product(&p, &a, &b), "{plan} with K = {k}");
        }
    }
}

#[test]
fn signed_random_inputs_meet_the_k_aware_bound() {
    for kernel in Kernel::ALL {
        for tpb in SUPPORTED_TPB {
            let plan = Plan::new(kernel, tpb).unwrap();
            for (seed, (m, k, n)) in SHAPES.into_iter().chain([(300, 511, 257)]).enumerate() {
                let p = Problem::new(m, k, n).unwrap();
                let (a, b) = inputs::random_operands(&p, seed as u64).unwrap();
                let run = gpu().matmul(&p, &plan, &a, &b).unwrap();
                let check = Reference::new(&p, &a, &b).unwrap().check(&run.c).unwrap();
                assert!(check.pass, "{plan} on {m}×{k}×{n}: {check:?}");
                // A correct f32 kernel is far inside the worst-case bound; an error near it means
                // precision was lost somewhere.
                let ulps = check.err_in_ulps.unwrap();
                assert!(
                    ulps <= check.ulps_warning_level,
                    "{plan} on {m}×{k}×{n}: error of {ulps} u·(|A|·|B|) exceeds 2√K"
                );
            }
        }
    }
}

#[test]
fn the_kernel_time_lies_inside_the_launch() {
    let p = Problem::new(64, 64, 64).unwrap();
    let (a, b) = inputs::random_operands(&p, 1).unwrap();
    let run = gpu()
        .matmul(&p, &Plan::new(Kernel::Tiled, 8).unwrap(), &a, &b)
        .unwrap();
    // The device's timestamps bracket the kernel alone, which the host saw start and finish
    // within the launch: a kernel time longer than the launch would be a timing bug.
    assert!(run.kernel > std::time::Duration::ZERO);
    assert!(run.kernel <= run.launch, "{run:?}");
    assert!(run.upload > std::time::Duration::ZERO && run.download > std::time::Duration::ZERO);
}

#[test]
fn operands_of_the_wrong_length_are_refused() {
    let p = Problem::new(4, 4, 4).unwrap();
    let err = gpu()
        .matmul(
            &p,
            &Plan::new(Kernel::Naive, 8).unwrap(),
            &[0.0; 15],
            &[0.0; 16],
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("A holds 15 elements but the problem needs 16"),
        "{err}"
    );
}

#[test]
fn the_device_is_granted_the_adapters_limits_not_wgpus_defaults() {
    // What the open device was granted (wgpu validates launches against these), compared with
    // what the adapter offers: tilemm requests all of it. wgpu's defaults are 16 KiB of shared
    // memory and 256 invocations per workgroup; TPB=32 needs 1024.
    let granted = gpu().info();
    let offered = &list_devices(Backend::Wgpu)[granted.index];
    assert_eq!(granted.limits, offered.limits, "{granted:?}");
    assert!(granted.limits.max_units_per_cube >= 1024, "{granted:?}");
    assert!(granted.limits.max_shared_bytes > 16384, "{granted:?}");
}
