//! The kernels on a real Vulkan device (lavapipe on machines without a GPU).
//!
//! These tests need a wgpu adapter and fail, with the install hint, when there is none.

mod common;

use common::{every_plan, f32_plans, gpu, of_rung, rung_plans, runs};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::io::inputs;
use tilemm::runtime::backend::list_devices;
use tilemm::verify::Reference;
use tilemm::{
    DType, Error, GpuSession, HostData, Kernel, Plan, Precision, Problem, Shape, Unavailable,
};

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

/// The exact product of dense row-major integer matrices, in i64: independent of every float
/// code path.
fn exact_product(p: &Problem, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0i64; p.m() * p.n()];
    for i in 0..p.m() {
        for l in 0..p.k() {
            let x = a[i * p.k() + l] as i64;
            for j in 0..p.n() {
                c[i * p.n() + j] += x * b[l * p.n() + j] as i64;
            }
        }
    }
    c.into_iter().map(|v| v as f32).collect()
}

fn f32s(data: &HostData) -> &[f32] {
    data.as_slice::<f32>().expect("f32 data")
}

#[test]
fn every_rung_runs_here_and_what_does_not_is_refused_for_its_plane_width() {
    // The kernel tests cover `every_plan()`: f32_plans() less what the device refuses. Only a
    // plane width other than the device's, or more shared memory than it has, may be refused,
    // with its typed error, and every rung that computes f32 must keep a configuration that
    // runs.
    let info = gpu().info();
    let probe = Problem::new(1, 1, 1).unwrap();
    for plan in f32_plans() {
        match plan.check(&probe, info) {
            Ok(_) => {}
            Err(Error::KernelUnavailable {
                why: Unavailable::PlaneWidth { built, device },
                ..
            }) => {
                assert_eq!(Some(built), plan.config.plane_width(), "{plan}");
                assert_ne!(built, device, "{plan}");
            }
            // A configuration sized for a GPU's shared memory (the pipelined rung's 108 KiB).
            Err(Error::KernelUnavailable {
                why: Unavailable::Limit { what, needed, .. },
                ..
            }) if plan.shared_bytes(Precision::F32) > info.limits.max_shared_bytes => {
                assert_eq!(what, "bytes of shared memory", "{plan}");
                assert_eq!(needed, plan.shared_bytes(Precision::F32) as u64, "{plan}");
            }
            Err(e) => panic!("{plan} is refused on {}: {e}", info.name),
        }
    }
    // A rung laid out for given plane widths may have none the device's planes match (Mali's
    // 16, or widths that vary); every other rung must run here. Lavapipe's planes are its SIMD
    // width, 8 lanes of 32 bits at 256 bits: there the broadcast rung must run too, so that a
    // failure to detect them cannot leave it out of these tests.
    let runnable = every_plan();
    let lavapipe_256 = info.name.starts_with("llvmpipe") && info.name.contains("256 bits");
    if lavapipe_256 {
        assert_eq!(info.plane_size, 8, "{}", info.name);
    }
    for kernel in Kernel::ALL
        .iter()
        .filter(|k| k.default_config().computes(Precision::F32))
        .filter(|k| lavapipe_256 || k.default_config().plane_width().is_none())
    {
        assert!(
            runnable.iter().any(|p| p.kernel() == *kernel),
            "no configuration of {kernel} runs on {} (planes of {})",
            info.name,
            info.plane_size
        );
    }
}

per_rung!(
    integer_inputs_give_the_exact_product_on_each_rung,
    |kernel| { integer_inputs_give_the_exact_product(of_rung(kernel, rung_plans())) }
);

// Every configuration of every rung: scripts/test-exhaustive runs it (CI does).
per_rung!(
    #[ignore = "exhaustive: scripts/test-exhaustive runs it"]
    integer_inputs_give_the_exact_product_in_every_configuration,
    |kernel| integer_inputs_give_the_exact_product(of_rung(kernel, every_plan()))
);

fn integer_inputs_give_the_exact_product(plans: Vec<Plan>) {
    // |entries| ≤ 8 and K ≤ 300: every partial sum is an integer below 2²⁴, exact in f32, so any
    // summation order must reproduce the exact product bit for bit.
    let mut rng = StdRng::seed_from_u64(7);
    for plan in plans {
        for (m, k, n) in SHAPES {
            let p = Problem::new(m, k, n).unwrap();
            let a = integer_matrix(p.a_len(), &mut rng);
            let b = integer_matrix(p.b_len(), &mut rng);
            let expected = exact_product(&p, &a, &b);
            let (a, b) = (HostData::F32(a), HostData::F32(b));
            let run = gpu().gemm(&p, &plan, &a, &b, None).unwrap();
            let wrong = f32s(&run.c)
                .iter()
                .zip(&expected)
                .filter(|(x, y)| x != y)
                .count();
            assert_eq!(
                wrong,
                0,
                "{plan} on {m}×{k}×{n}: {wrong} of {} entries differ",
                p.c_len()
            );
        }
    }
}

per_rung!(
    k_beyond_the_drivers_loop_cap_gives_the_exact_product,
    k_beyond_the_loop_cap
);

fn k_beyond_the_loop_cap(kernel: Kernel) {
    // Debian 12's lavapipe stops a unit after 65535 loop iterations and returns the truncated
    // sum without an error; the naive kernel loops once per element of K, the tiled kernel once
    // per tile of TPB. With K past that cap for every kernel and tile size, entries in {-1, 0, 1}
    // keep every partial sum an integer below 2²⁴, so the product must be exact: one lost term
    // shows.
    const DRIVER_LOOP_CAP: usize = 65535;
    let mut rng = StdRng::seed_from_u64(11);
    // A 3×2 product is one cube computing its whole tile over every trip: the rung's
    // configuration with the least work a trip. (Its default and largest tiles took 40–150 s
    // each on lavapipe; the slabs are the planner's, and the K offsets the rung's code, the same
    // in each configuration.)
    if let Some(plan) = least_work_per_trip(of_rung(kernel, every_plan())) {
        let probe = Problem::new(1, 1, 1).unwrap();
        let per_trip = plan.config.shape(&probe).k_per_trip as usize;
        let k = (DRIVER_LOOP_CAP + 977) * per_trip + 3;
        let p = Problem::new(3, k, 2).unwrap();
        let launches = plan.check(&p, gpu().info()).unwrap();
        assert!(launches.k_slabs > 1, "{plan}: K={k}");
        let mut ternary = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| rng.random_range(-1i32..=1) as f32)
                .collect()
        };
        let a = ternary(p.a_len());
        let b = ternary(p.b_len());
        let expected = exact_product(&p, &a, &b);
        let run = gpu()
            .gemm(&p, &plan, &HostData::F32(a), &HostData::F32(b), None)
            .unwrap();
        assert_eq!(f32s(&run.c), expected, "{plan} with K = {k}");
    }
}

/// The plan of `plans` whose cube does the fewest multiply-adds per trip of its loop: its
/// tile's area (the fewer cubes a large C takes, the larger) times K per trip.
fn least_work_per_trip(plans: Vec<Plan>) -> Option<Plan> {
    let large = Problem::new(4096, 1, 4096).unwrap();
    plans.into_iter().min_by_key(|plan| {
        let shape = plan.config.shape(&large);
        let cubes = u64::from(shape.grid[0]) * u64::from(shape.grid[1]);
        (u64::from(shape.k_per_trip) << 32) / cubes
    })
}

#[test]
fn signed_random_inputs_meet_the_k_aware_bound() {
    for plan in rung_plans() {
        for (seed, (m, k, n)) in SHAPES.into_iter().chain([(300, 511, 257)]).enumerate() {
            let p = Problem::new(m, k, n).unwrap();
            let ops = inputs::random_operands(&p, seed as u64).unwrap();
            let run = gpu().gemm(&p, &plan, &ops.a, &ops.b, None).unwrap();
            // Held to the bound, and to what f32 accumulation gives random data: a kernel that
            // lost precision somewhere fails even where the worst-case bound would pass it.
            let check = Reference::new(&p, &ops.a, &ops.b, None)
                .unwrap()
                .random_inputs()
                .check(&run.c)
                .unwrap();
            assert!(check.pass, "{plan} on {m}×{k}×{n}: {check:?}");
            assert!(check.precision_limit_ulps.is_some(), "{check:?}");
        }
    }
}

/// Problems that exercise the contract: transposes, batches with broadcast, α/β, padded and
/// offset views, a column-major C, in every precision the device has.
fn contract_problems() -> Vec<(String, Problem)> {
    let mut out = Vec::new();
    let base = Shape::new(37, 29, 23);
    let mut precisions = vec![Precision::F32];
    let types = gpu().info().types;
    if types.f16 {
        precisions.push(Precision::of(DType::F16));
        precisions.push(Precision::new(DType::F16, DType::F32).unwrap());
    }
    precisions.push(Precision::of(DType::BF16));
    precisions.push(Precision::new(DType::BF16, DType::F32).unwrap());
    if types.f64 {
        precisions.push(Precision::of(DType::F64));
    }
    for precision in precisions {
        let shapes = [
            ("plain", Shape { ..base }),
            (
                "trans-a",
                Shape {
                    trans_a: true,
                    ..base
                },
            ),
            (
                "trans-b",
                Shape {
                    trans_b: true,
                    ..base
                },
            ),
            (
                "trans-a trans-b",
                Shape {
                    trans_a: true,
                    trans_b: true,
                    ..base
                },
            ),
            (
                "batch 5, B broadcast",
                Shape {
                    batch: 5,
                    broadcast_b: true,
                    ..base
                },
            ),
            (
                "batch 3, A broadcast",
                Shape {
                    batch: 3,
                    broadcast_a: true,
                    trans_a: true,
                    ..base
                },
            ),
            (
                "alpha -2 beta 3",
                Shape {
                    alpha: -2.0,
                    beta: 3.0,
                    ..base
                },
            ),
            (
                "alpha 0.5 beta 1, batch 2",
                Shape {
                    alpha: 0.5,
                    beta: 1.0,
                    batch: 2,
                    ..base
                },
            ),
        ];
        for (name, shape) in shapes {
            let p = Shape { precision, ..shape }.problem().unwrap();
            out.push((format!("{name}, {precision}"), p));
        }
        // Padded, offset views and a column-major C (computed as Cᵀ = BᵀAᵀ).
        let p = common::padded_views(precision);
        out.push((format!("padded views, column-major C, {precision}"), p));
        // Aligned padded views: 16-byte copies, the last of each row in part.
        for k_contiguous in [true, false] {
            let p = common::aligned_padded_views(precision, k_contiguous);
            let along = if k_contiguous { "K" } else { "M and N" };
            out.push((
                format!("aligned padded views, chunks along {along}, {precision}"),
                p,
            ));
        }
    }
    out
}

per_rung!(
    each_rung_honours_the_contract_within_the_bound_and_exactly_on_integers,
    contract_on_rung
);

fn contract_on_rung(kernel: Kernel) {
    let mut rng = StdRng::seed_from_u64(3);
    for plan in of_rung(kernel, rung_plans()) {
        for (name, p) in contract_problems()
            .into_iter()
            .filter(|(_, p)| runs(&plan, p))
        {
            // Random data against the bound.
            let ops = inputs::random_operands(&p, 1).unwrap();
            let run = gpu()
                .gemm(&p, &plan, &ops.a, &ops.b, ops.c0.as_ref())
                .unwrap_or_else(|e| panic!("{plan}, {name}: {e}"));
            let reference = Reference::new(&p, &ops.a, &ops.b, ops.c0.as_ref())
                .unwrap()
                .random_inputs();
            let check = reference.check(&run.c).unwrap();
            assert!(check.pass, "{plan}, {name}: {check:?}");
            // Small integers (exact in every type here, products and sums too): C must be the
            // exact result, so one misplaced element shows.
            let mut int = |len: usize, dtype: DType| {
                HostData::from_f64(dtype, (0..len).map(|_| rng.random_range(-2i32..=2) as f64))
            };
            let a = int(p.a_len(), p.precision().input);
            let b = int(p.b_len(), p.precision().input);
            let c0 = p.reads_c().then(|| int(p.c_len(), p.precision().output));
            let run = gpu().gemm(&p, &plan, &a, &b, c0.as_ref()).unwrap();
            let check = Reference::new(&p, &a, &b, c0.as_ref())
                .unwrap()
                .check(&run.c)
                .unwrap();
            let exact = p.alpha().fract() == 0.0;
            assert!(check.pass, "{plan}, {name}, integers: {check:?}");
            assert_eq!(check.all_exact(), exact, "{plan}, {name}: {check:?}");
        }
    }
}

/// The test device, opened again with bindings of 2 KiB.
fn small_bindings() -> GpuSession {
    common::with_bindings(2048)
}

#[test]
fn products_over_a_binding_run_in_panels_within_the_bound_and_exactly_on_integers() {
    // The same device with 2 KiB bindings: every contract problem needs panels (row and column
    // panels, chunks of the batch), and a long K needs slabs that continue C's sum (β = 1).
    let small = small_bindings();
    let mut problems = contract_problems();
    for (m, k, n, beta) in [(4, 700, 3, 0.0), (3, 900, 5, -1.5)] {
        let p = Shape {
            beta,
            trans_b: true,
            ..Shape::new(m, k, n)
        };
        problems.push((format!("long K {k}, beta {beta}"), p.problem().unwrap()));
    }
    let mut rng = StdRng::seed_from_u64(11);
    for plan in [
        Plan::default_for(Kernel::Naive),
        Plan::default_for(Kernel::Tiled),
    ] {
        for (name, p) in &problems {
            let schedule = small.schedule(p, &plan).unwrap();
            assert!(!schedule.panels.is_whole(), "{name}: {schedule:?}");
            let ops = inputs::random_operands(p, 2).unwrap();
            let run = small
                .gemm(p, &plan, &ops.a, &ops.b, ops.c0.as_ref())
                .unwrap_or_else(|e| panic!("{plan}, {name}: {e}"));
            assert_eq!(run.schedule, schedule);
            let reference = Reference::new(p, &ops.a, &ops.b, ops.c0.as_ref())
                .unwrap()
                .random_inputs();
            let check = reference.check_passes(&run.c, run.schedule.passes).unwrap();
            assert!(check.pass, "{plan}, {name}, panels: {check:?}");
            let mut int = |len: usize, dtype: DType| {
                HostData::from_f64(dtype, (0..len).map(|_| rng.random_range(-2i32..=2) as f64))
            };
            let a = int(p.a_len(), p.precision().input);
            let b = int(p.b_len(), p.precision().input);
            let c0 = p.reads_c().then(|| int(p.c_len(), p.precision().output));
            let run = small.gemm(p, &plan, &a, &b, c0.as_ref()).unwrap();
            let check = Reference::new(p, &a, &b, c0.as_ref())
                .unwrap()
                .check_passes(&run.c, run.schedule.passes)
                .unwrap();
            assert!(check.pass, "{plan}, {name}, integers: {check:?}");
            assert_eq!(
                check.all_exact(),
                p.alpha().fract() == 0.0 && p.beta().fract() == 0.0,
                "{plan}, {name}: {check:?}"
            );
        }
    }
}

per_rung!(
    beta_zero_never_reads_c_so_nan_in_it_does_not_leak_on_each_rung,
    |kernel| beta_zero_never_reads_c(of_rung(kernel, rung_plans()))
);

// Every configuration of every rung: scripts/test-exhaustive runs it (CI does).
per_rung!(
    #[ignore = "exhaustive: scripts/test-exhaustive runs it"]
    beta_zero_never_reads_c_so_nan_in_it_does_not_leak_in_every_configuration,
    |kernel| beta_zero_never_reads_c(of_rung(kernel, every_plan()))
);

fn beta_zero_never_reads_c(plans: Vec<Plan>) {
    let p = Problem::new(19, 7, 21).unwrap();
    let reads = Shape {
        beta: 1.0,
        ..Shape::new(19, 7, 21)
    }
    .problem()
    .unwrap();
    let ops = inputs::random_operands(&p, 4).unwrap();
    for plan in plans {
        let gpu = gpu();
        let a = gpu.upload(&ops.a).unwrap();
        let b = gpu.upload(&ops.b).unwrap();
        // C's buffer starts as NaN; with β = 0 the product must not read it.
        let nan = HostData::F32(vec![f32::NAN; p.c_len()]);
        let c = gpu.output(&reads, Some(&nan)).unwrap();
        gpu.enqueue(&p, &plan, &a, &b, &c).unwrap();
        let result = gpu.download(&c).unwrap();
        let check = Reference::new(&p, &ops.a, &ops.b, None)
            .unwrap()
            .check(&result)
            .unwrap();
        assert!(
            check.pass && check.nonfinite_entries == 0,
            "{plan}: {check:?}"
        );
    }
}

#[test]
fn resident_matrices_are_reused_across_launches() {
    // β = 1: each launch adds A·B to C once more, on the same device buffers.
    let p = Shape {
        beta: 1.0,
        ..Shape::new(8, 5, 6)
    }
    .problem()
    .unwrap();
    let ones = HostData::F32(vec![1.0; 40]);
    let zero = HostData::F32(vec![0.0; 48]);
    let plan = Plan::default_for(Kernel::Tiled);
    let gpu = gpu();
    let (a, b) = (gpu.upload(&ones).unwrap(), gpu.upload(&ones).unwrap());
    let c = gpu.output(&p, Some(&zero)).unwrap();
    for _ in 0..3 {
        gpu.enqueue(&p, &plan, &a, &b, &c).unwrap();
    }
    assert_eq!(gpu.download(&c).unwrap(), HostData::F32(vec![15.0; 48]));
}

#[test]
fn the_kernel_time_lies_inside_the_launch() {
    let p = Problem::new(64, 64, 64).unwrap();
    let ops = inputs::random_operands(&p, 1).unwrap();
    let plan = Plan::new("tiled:tpb=8".parse().unwrap());
    let run = gpu().gemm(&p, &plan, &ops.a, &ops.b, None).unwrap();
    // The device's timestamps bracket the kernel alone, which the host saw start and finish
    // within the launch: a kernel time longer than the launch would be a timing bug.
    assert!(run.kernel > std::time::Duration::ZERO);
    assert!(run.kernel <= run.launch, "{run:?}");
    assert!(run.upload > std::time::Duration::ZERO && run.download > std::time::Duration::ZERO);
}

#[test]
fn operands_of_the_wrong_length_or_type_are_refused() {
    let p = Problem::new(4, 4, 4).unwrap();
    let err = gpu()
        .gemm(
            &p,
            &Plan::default_for(Kernel::Naive),
            &HostData::F32(vec![0.0; 15]),
            &HostData::F32(vec![0.0; 16]),
            None,
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("A holds 15 elements but the problem needs 16"),
        "{err}"
    );
    // f64 data of the right length for an f32 product: never reinterpreted as f32.
    let err = gpu()
        .gemm(
            &p,
            &Plan::default_for(Kernel::Naive),
            &HostData::F64(vec![0.0; 16]),
            &HostData::F64(vec![0.0; 16]),
            None,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Precision(_)), "{err}");
}

#[test]
fn the_device_is_granted_the_adapters_limits_not_wgpus_defaults() {
    // What the open device was granted (wgpu validates launches against these), compared with
    // what the adapter offers: tilemm requests all of it. wgpu's defaults are 16 KiB of shared
    // memory and 256 invocations per workgroup; TPB=32 needs 1024.
    let granted = gpu().info();
    let offered = &list_devices(common::backend())[granted.index];
    assert_eq!(granted.limits, offered.limits, "{granted:?}");
    assert!(granted.limits.max_units_per_cube >= 1024, "{granted:?}");
    assert!(granted.limits.max_shared_bytes > 16384, "{granted:?}");
}

/// A 1×K by K×1 product of ±1s and 0s whose partial sums, cut at a slab boundary, are not in
/// C's type though the result is, and what it must give: 2049 ones (257 in bf16, one past the
/// type's exact integers) ending at the first of `boundaries` past them, then one 1, which is
/// 2050 (258); in f16 also 65536 ones ending at a boundary (65536 overflows f16), then 32768
/// minus ones, which is 32768. With β = 2 and C₀ = 16, 32 more. `boundary(at, tail)`: a
/// boundary `end` from `at`, and a K of at least `end + tail` whose product has it.
fn long_k_patterns(
    dtype: DType,
    boundary: impl Fn(usize, usize) -> (usize, usize),
) -> Vec<(String, Vec<f64>, f64)> {
    let exact = match dtype {
        DType::F16 => 2048,
        DType::BF16 => 256,
        other => unreachable!("{other} holds larger sums"),
    };
    let mut patterns = Vec::new();
    let (end, k) = boundary(exact + 1, 1);
    let mut a = vec![0.0; k];
    a[end - exact - 1..=end].fill(1.0);
    patterns.push((
        format!("{} ones across K = {end}", exact + 2),
        a,
        (exact + 2) as f64,
    ));
    if dtype == DType::F16 {
        let (end, k) = boundary(65536, 32768);
        let mut a = vec![0.0; k];
        a[end - 65536..end].fill(1.0);
        a[end..end + 32768].fill(-1.0);
        patterns.push((
            format!("65536 ones then 32768 minus ones, K = {}", a.len()),
            a,
            32768.0,
        ));
    }
    patterns
}

/// The f16 or bf16 product of `pattern` (1×K) and K ones, with β = 2 (C₀ = 16) when `beta`.
fn half_product(dtype: DType, k: usize, beta: bool) -> Problem {
    Shape {
        precision: Precision::of(dtype),
        beta: if beta { 2.0 } else { 0.0 },
        ..Shape::new(1, k, 1)
    }
    .problem()
    .unwrap()
}

#[test]
fn half_precision_sums_are_never_rounded_to_c_between_slabs_of_k() {
    // Drivers cut long loops short, so a long K runs in slabs (one launch each). Continuing the
    // sum through an f16 C rounded it every 32768 terms: 2050 came back as 2048, 32768 as inf.
    // The slabs are the session's, the same for every rung: here the rungs that are quick on
    // lavapipe at such a K (slabs of 32768 and 131072), every rung in scripts/test-exhaustive.
    let plans = [Kernel::Naive, Kernel::Register, Kernel::Broadcast].map(Plan::default_for);
    assert_eq!(long_k_products(&plans, true), 3 * (4 + 2));
}

/// Every rung's default configuration: scripts/test-exhaustive runs it (a K of a million
/// takes the larger tiles seconds each on lavapipe).
#[test]
#[ignore = "exhaustive: scripts/test-exhaustive runs it"]
fn half_precision_sums_are_never_rounded_to_c_between_slabs_of_k_on_any_rung() {
    let plans: Vec<Plan> = Kernel::ALL.iter().map(|k| Plan::default_for(*k)).collect();
    let ran = long_k_products(&plans, false);
    assert!(ran >= 3 * 7, "too few rungs ran f16 and bf16 here: {ran}");
}

/// The [`long_k_patterns`] on each of `plans` that runs f16 (and bf16) here, each with β = 0
/// and with β = 2 where `both_betas` (else β = 2 on the first pattern of f16 only); how many
/// products ran, each exact.
fn long_k_products(plans: &[Plan], both_betas: bool) -> usize {
    let info = gpu().info();
    let mut ran = 0;
    for dtype in [DType::F16, DType::BF16] {
        for plan in plans {
            let probe = half_product(dtype, 1 << 20, false);
            if !runs(plan, &probe) {
                eprintln!("{plan} does not run {dtype} here");
                continue;
            }
            let step = plan.k_per_launch(&probe) as usize;
            let started = std::time::Instant::now();
            let patterns = long_k_patterns(dtype, |at, tail| {
                let end = at.div_ceil(step) * step;
                (end, end + tail)
            });
            for (i, (name, pattern, want)) in patterns.iter().enumerate() {
                let betas: &[bool] = match (both_betas, dtype, i) {
                    (true, ..) => &[false, true],
                    (false, DType::F16, 0) => &[true],
                    _ => &[false],
                };
                for &beta in betas {
                    let p = half_product(dtype, pattern.len(), beta);
                    assert!(plan.check(&p, info).unwrap().k_slabs > 1, "{plan}, {name}");
                    let a = HostData::from_f64(dtype, pattern.iter().copied());
                    let b = HostData::from_f64(dtype, std::iter::repeat_n(1.0, pattern.len()));
                    let c0 = HostData::from_f64(dtype, std::iter::once(16.0));
                    let run = gpu().gemm(&p, plan, &a, &b, beta.then_some(&c0)).unwrap();
                    let want = if beta { want + 32.0 } else { *want };
                    assert_eq!(run.c.get(0), want, "{plan}, {dtype}, {name}, β: {beta}");
                    ran += 1;
                }
            }
            eprintln!(
                "{plan}, {dtype}: slabs of {step}, {:.1?}",
                started.elapsed()
            );
        }
    }
    ran
}

#[test]
fn half_precision_sums_are_never_rounded_to_c_between_panels_of_k() {
    // 2 KiB bindings: a 1×K f16 row of A takes panels of K, each continuing C's block.
    let small = small_bindings();
    let plan = Plan::default_for(Kernel::Naive);
    for dtype in [DType::F16, DType::BF16] {
        // Panels halve K: with K a power of two, the depth divides it (4096: 8 KiB of A, so
        // K is cut in any case).
        let boundary = |at: usize, tail: usize| {
            let k = (at + tail).next_power_of_two().max(4096);
            let p = half_product(dtype, k, true);
            let depth = small.schedule(&p, &plan).unwrap().panels.depth;
            assert!(k.is_multiple_of(depth), "K {k}, depth {depth}");
            (at.div_ceil(depth) * depth, k)
        };
        for (name, pattern, want) in long_k_patterns(dtype, boundary) {
            let p = half_product(dtype, pattern.len(), true);
            let schedule = small.schedule(&p, &plan).unwrap();
            assert!(schedule.panels.counts[1] > 1, "{name}: {schedule:?}");
            let a = HostData::from_f64(dtype, pattern.iter().copied());
            let b = HostData::from_f64(dtype, std::iter::repeat_n(1.0, pattern.len()));
            let c0 = HostData::from_f64(dtype, std::iter::once(16.0));
            let run = small.gemm(&p, &plan, &a, &b, Some(&c0)).unwrap();
            assert_eq!(run.c.get(0), want + 32.0, "{dtype}, {name}");
            assert_eq!(run.c.dtype(), dtype);
        }
    }
}
