//! The matrix-unit rung on the test device. Where the device registers matrix units of f16
//! inputs (lavapipe from Mesa 26, which CI runs this file on as well), every configuration it
//! can run must give exact products on integers and stay within the bound over edge shapes and
//! the contract (the first over all of it, the others over its edges, vectors and a
//! column-major C; each over all of it in the exhaustive test); where it registers none (Debian
//! 12's lavapipe 22.3.6), every configuration must be refused with the typed error before
//! launch, and `auto` must not pick the rung.
//!
//! With `TILEMM_EXPECT_MATRIX_UNITS` set (CI's Mesa 26 step), a device without matrix units
//! fails the test instead of taking the refusal branch.

mod common;

use std::time::Duration;

use common::gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::io::inputs;
use tilemm::tune::{self, TuneOptions};
use tilemm::verify::Reference;
use tilemm::Unavailable;
use tilemm::{DType, Error, HostData, Kernel, Plan, Precision, Problem, Shape};

fn tensorcore_plans() -> Vec<Plan> {
    Kernel::Tensorcore
        .configs()
        .into_iter()
        .map(Plan::new)
        .collect()
}

fn f16_in(output: DType) -> Precision {
    Precision::new(DType::F16, output).unwrap()
}

/// Edge shapes, transposes, a broadcast batch, α/β and padded views with a column-major C, in
/// f16 with f16 and f32 outputs.
fn problems() -> Vec<(String, Problem)> {
    let mut out = Vec::new();
    for output in [DType::F32, DType::F16] {
        let precision = f16_in(output);
        for (m, k, n) in [
            (1, 1, 1),
            (33, 1, 17),
            (97, 131, 53),
            (64, 64, 64),
            (8, 300, 5),
        ] {
            let shape = Shape {
                precision,
                ..Shape::new(m, k, n)
            };
            out.push((format!("{m}×{k}×{n} {precision}"), shape.problem().unwrap()));
        }
        if output == DType::F32 {
            // Operands read in vectors (offsets, strides and the contiguous extent multiples
            // of 8), with edges in M and N: both row-major, then both column-major.
            for (m, k, n, trans) in [(40, 48, 24, false), (24, 48, 40, true)] {
                let shape = Shape {
                    precision,
                    trans_a: trans,
                    trans_b: trans,
                    ..Shape::new(m, k, n)
                };
                let name = format!("{m}×{k}×{n} in vectors, transposed {trans}, {precision}");
                out.push((name, shape.problem().unwrap()));
            }
        }
        let base = Shape {
            precision,
            ..Shape::new(37, 29, 23)
        };
        for (name, shape) in [
            (
                "trans-a trans-b",
                Shape {
                    trans_a: true,
                    trans_b: true,
                    ..base
                },
            ),
            (
                "batch 3, B broadcast",
                Shape {
                    batch: 3,
                    broadcast_b: true,
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
        ] {
            out.push((format!("{name} {precision}"), shape.problem().unwrap()));
        }
        let p = common::padded_views(precision);
        out.push((format!("padded views, column-major C {precision}"), p));
    }
    out
}

/// The 8×8×8 f16 problem a configuration is checked on before it is run.
fn f16_probe() -> Problem {
    Shape {
        precision: f16_in(DType::F32),
        ..Shape::new(8, 8, 8)
    }
    .problem()
    .unwrap()
}

/// The problems (by the start of their names) that the configurations after the first take:
/// edges in M, N and K, operands in vectors, a column-major C in f16.
const AFTER_THE_FIRST: [&str; 3] = [
    "97×131×53 f16 inputs, f32 accumulation, f32 output",
    "40×48×24 in vectors, transposed false",
    "padded views, column-major C f16 inputs, f32 accumulation, f16 output",
];

/// Exact on small integers, within the K-aware bound on random data.
fn check_problems(plan: &Plan, problems: Vec<(String, Problem)>, rng: &mut StdRng) {
    for (name, p) in problems {
        // Small integers: exact in f16, products and sums exact in f32, the results exact in
        // f16 too (|c| ≤ 2·2·300 + 3·2 < 2048).
        let mut int = |len: usize, dtype: DType| {
            HostData::from_f64(dtype, (0..len).map(|_| rng.random_range(-2i32..=2) as f64))
        };
        let a = int(p.a_len(), p.precision().input);
        let b = int(p.b_len(), p.precision().input);
        let c0 = p.reads_c().then(|| int(p.c_len(), p.precision().output));
        let run = gpu()
            .gemm(&p, plan, &a, &b, c0.as_ref())
            .unwrap_or_else(|e| panic!("{plan}, {name}: {e}"));
        let check = Reference::new(&p, &a, &b, c0.as_ref())
            .unwrap()
            .check_passes(&run.c, run.schedule.passes)
            .unwrap();
        assert!(check.pass && check.all_exact(), "{plan}, {name}: {check:?}");

        // Random data against the K-aware bound.
        let ops = inputs::random_operands(&p, 9).unwrap();
        let run = gpu()
            .gemm(&p, plan, &ops.a, &ops.b, ops.c0.as_ref())
            .unwrap();
        let check = Reference::new(&p, &ops.a, &ops.b, ops.c0.as_ref())
            .unwrap()
            .random_inputs()
            .check_passes(&run.c, run.schedule.passes)
            .unwrap();
        assert!(check.pass, "{plan}, {name}, random: {check:?}");
    }
}

#[test]
fn the_other_configurations_take_problems_that_exist() {
    let names: Vec<String> = problems().into_iter().map(|(name, _)| name).collect();
    for b in AFTER_THE_FIRST {
        assert_eq!(
            names.iter().filter(|n| n.starts_with(b)).count(),
            1,
            "{b} in {names:?}"
        );
    }
}

#[test]
#[ignore = "every configuration over every problem (about 120 kernel variants on lavapipe 26): \
            scripts/test-mesa26 --run-ignored all"]
fn every_configuration_over_every_problem_where_the_device_has_matrix_units() {
    let probe = f16_probe();
    let runnable: Vec<Plan> = tensorcore_plans()
        .into_iter()
        .filter(|plan| plan.check(&probe, gpu().info()).is_ok())
        .collect();
    assert!(
        !runnable.is_empty(),
        "{} registers no matrix units of f16 inputs: run this on lavapipe from Mesa 26 \
         (scripts/test-mesa26 --run-ignored all)",
        gpu().info().name
    );
    let mut rng = StdRng::seed_from_u64(13);
    for plan in &runnable {
        check_problems(plan, problems(), &mut rng);
    }
}

#[test]
fn tensorcore_is_exact_and_within_the_bound_where_the_device_has_matrix_units_else_refused() {
    let info = gpu().info();
    let probe = f16_probe();
    let (runnable, refused): (Vec<Plan>, Vec<Plan>) = tensorcore_plans()
        .into_iter()
        .partition(|plan| plan.check(&probe, info).is_ok());
    for plan in &refused {
        let err = plan.check(&probe, info).unwrap_err();
        assert!(
            matches!(
                err,
                Error::KernelUnavailable {
                    why: Unavailable::MatrixUnit { .. } | Unavailable::PlaneWidth { .. },
                    ..
                }
            ),
            "{plan}: {err}"
        );
    }
    // No rung of matrix units computes f32 inputs: refused as such on every device.
    let f32_probe = Problem::new(8, 8, 8).unwrap();
    for plan in tensorcore_plans() {
        let err = plan.check(&f32_probe, info).unwrap_err();
        assert!(
            matches!(
                err,
                Error::KernelUnavailable {
                    why: Unavailable::Precision(_),
                    ..
                }
            ),
            "{plan}: {err}"
        );
    }

    eprintln!(
        "branch: {} {}",
        info.name,
        if runnable.is_empty() {
            "registers no matrix units of f16 inputs: the refusal branch ran".to_string()
        } else {
            format!(
                "registers matrix units of f16 inputs: the contract branch ran ({} \
                 configurations)",
                runnable.len()
            )
        }
    );
    if runnable.is_empty() {
        assert!(
            std::env::var_os("TILEMM_EXPECT_MATRIX_UNITS").is_none(),
            "{} registers no matrix units of f16 inputs ({:?}); this run expects them: use \
             lavapipe from Mesa 26 (scripts/setup's ensure_mesa26)",
            info.name,
            info.matrix_units
        );
        // auto routes around the rung: its candidates are what the device can run.
        let dir = tempfile::tempdir().unwrap();
        let options = TuneOptions {
            budget: tilemm::tune::TuneBudget::Time(Duration::from_secs(1)),
            cache: Some(dir.path().join("tuning.json")),
            retune: false,
            on_tuning: None,
        };
        let report = tune::choose(gpu(), &probe, &options).unwrap();
        assert!(report.verified, "{report}");
        assert_ne!(report.chosen.kernel(), Kernel::Tensorcore, "{report}");
        assert!(
            report
                .timed
                .iter()
                .all(|t| t.plan.kernel() != Kernel::Tensorcore),
            "{report}"
        );
        return;
    }

    let mut rng = StdRng::seed_from_u64(5);
    // K past one launch's loop-trip bound: the second slab continues C's sum (β = 1 on the
    // device). Entries in {-1, 0, 1} keep every partial sum an integer below 2²⁴ in f32.
    // One launch covers LOOP_TRIP_LIMIT fragments of K: 8 deep on lavapipe, 16 on CUDA.
    let plan = &runnable[0];
    let k = plan.k_per_launch(&probe) as usize + 333;
    let long = Shape {
        precision: f16_in(DType::F32),
        ..Shape::new(3, k, 2)
    }
    .problem()
    .unwrap();
    assert!(plan.check(&long, info).unwrap().k_slabs > 1, "{plan}");
    let mut ternary = |len: usize| {
        HostData::from_f64(
            DType::F16,
            (0..len).map(|_| rng.random_range(-1i32..=1) as f64),
        )
    };
    let (a, b) = (ternary(long.a_len()), ternary(long.b_len()));
    let run = gpu().gemm(&long, plan, &a, &b, None).unwrap();
    let check = Reference::new(&long, &a, &b, None)
        .unwrap()
        .check_passes(&run.c, run.schedule.passes)
        .unwrap();
    assert!(
        check.pass && check.all_exact(),
        "{plan}, K = {k}: {check:?}"
    );

    // Every problem on the first configuration (one plane of 2×2 fragments); the others (the
    // same staging, other tilings) on the edges, vectors and a column-major C. Each problem is
    // a kernel variant compiled on lavapipe, the last configuration's (2×2 planes of 4×4
    // fragments) the longest: 169 s of the test's 355 s when it took every problem. The whole
    // product of the two is the exhaustive test above.
    for (i, plan) in runnable.iter().enumerate() {
        let problems = problems();
        let problems = if i == 0 {
            problems
        } else {
            problems
                .into_iter()
                .filter(|(name, _)| AFTER_THE_FIRST.iter().any(|b| name.starts_with(b)))
                .collect()
        };
        let (count, started) = (problems.len(), std::time::Instant::now());
        check_problems(plan, problems, &mut rng);
        eprintln!("{plan}: {count} problems in {:.1?}", started.elapsed());
    }

    // HIP's staging (A by rows, B by columns whatever their layouts: vectors stored across
    // the tile), which only HIP takes by itself, on this device: exact on integers in every
    // layout, with edges, in the first configuration (one plane) and the last (2×2 planes of
    // 4×4 fragments; edges in M, N and K only).
    let started = std::time::Instant::now();
    tilemm::kernels::stage_along_k_everywhere(true);
    // The last configuration with edges only (its variants compile longest).
    let shapes = [(40, 48, 24), (37, 29, 23)];
    for (plan, shapes) in [
        (&runnable[0], &shapes[..]),
        (&runnable[runnable.len() - 1], &shapes[1..]),
    ] {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            for &(m, k, n) in shapes {
                let p = Shape {
                    precision: f16_in(DType::F32),
                    trans_a,
                    trans_b,
                    ..Shape::new(m, k, n)
                }
                .problem()
                .unwrap();
                let mut int = |len: usize| {
                    HostData::from_f64(
                        DType::F16,
                        (0..len).map(|_| rng.random_range(-2i32..=2) as f64),
                    )
                };
                let (a, b) = (int(p.a_len()), int(p.b_len()));
                let name = format!("{m}×{k}×{n}, trans {trans_a}/{trans_b}, staged along K");
                let run = gpu()
                    .gemm(&p, plan, &a, &b, None)
                    .unwrap_or_else(|e| panic!("{plan}, {name}: {e}"));
                let check = Reference::new(&p, &a, &b, None)
                    .unwrap()
                    .check_passes(&run.c, run.schedule.passes)
                    .unwrap();
                assert!(check.pass && check.all_exact(), "{plan}, {name}: {check:?}");
            }
        }
    }
    tilemm::kernels::stage_along_k_everywhere(false);
    eprintln!("staged along K: {:.1?}", started.elapsed());
}
