//! Reliability on a real device (lavapipe on machines without a GPU): random products of every
//! kind against the reference (proptest), IEEE propagation of NaN and Inf, a soak of 150 (and,
//! in scripts/test-exhaustive, 1000) products with the memory held before and after, and
//! threads sharing one device.

mod common;

use common::{gpu, rung_plans, runs};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::io::inputs;
use tilemm::verify::Reference;
use tilemm::{DType, GpuSession, HostData, MatrixDesc, Plan, Precision, Problem, Shape};

/// The soak measures the process's memory, so it runs alone: the other tests of this file
/// (which the harness runs on other threads) hold this for reading, the soak for writing.
static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    ALONE.read().unwrap_or_else(|e| e.into_inner())
}

/// The precisions the device computes.
fn precisions() -> Vec<Precision> {
    let types = gpu().info().types;
    let mut out = vec![
        Precision::F32,
        Precision::of(DType::BF16),
        Precision::new(DType::BF16, DType::F32).unwrap(),
    ];
    if types.f16 {
        out.push(Precision::of(DType::F16));
        out.push(Precision::new(DType::F16, DType::F32).unwrap());
    }
    if types.f64 {
        out.push(Precision::of(DType::F64));
    }
    out
}

/// The same device with 4 KiB bindings, so that products run in panels.
fn small_bindings() -> &'static GpuSession {
    static GPU: std::sync::OnceLock<GpuSession> = std::sync::OnceLock::new();
    GPU.get_or_init(|| common::with_bindings(4096))
}

/// A view of a `rows`×`cols` operand: stored transposed or not, rows padded by `pad`, starting
/// at `offset`, each batch entry `gap` elements past the last, or one matrix broadcast.
fn view(
    (rows, cols): (usize, usize),
    transposed: bool,
    (pad, offset, gap): (usize, usize, usize),
    broadcast: bool,
) -> MatrixDesc {
    let (r, c) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let stored = MatrixDesc {
        row_stride: c + pad,
        offset,
        batch_stride: r * (c + pad) + gap,
        ..MatrixDesc::row_major(r, c)
    };
    let desc = if transposed { stored.t() } else { stored };
    if broadcast {
        desc.broadcast()
    } else {
        desc
    }
}

#[derive(Debug, Clone)]
struct Case {
    sizes: (usize, usize, usize, usize),
    trans: (bool, bool),
    broadcast: (bool, bool),
    layout: [(usize, usize, usize); 3],
    c_col_major: bool,
    scalars: (f64, f64),
    precision: usize,
    plan: usize,
    panels: bool,
    seed: u64,
}

impl Case {
    fn problem(&self) -> Problem {
        let (m, k, n, batch) = self.sizes;
        let a = view((m, k), self.trans.0, self.layout[0], self.broadcast.0);
        let b = view((k, n), self.trans.1, self.layout[1], self.broadcast.1);
        let c = view((m, n), self.c_col_major, self.layout[2], false);
        let precisions = precisions();
        let precision = precisions[self.precision % precisions.len()];
        Problem::general((m, k, n, batch), a, b, c, self.scalars, precision).unwrap()
    }
}

fn cases() -> impl Strategy<Value = Case> {
    let sizes = (1usize..40, 1usize..70, 1usize..40, 1usize..4);
    let layout = (0usize..4, 0usize..6, 0usize..9);
    let scalars = (
        prop::sample::select(vec![1.0, -2.0, 0.5, 3.0]),
        prop::sample::select(vec![0.0, 1.0, -1.5]),
    );
    (
        sizes,
        any::<(bool, bool)>(),
        any::<(bool, bool)>(),
        [layout.clone(), layout.clone(), layout],
        any::<bool>(),
        scalars,
        0usize..8,
        0usize..64,
        prop::bool::weighted(0.2),
        any::<u64>(),
    )
        .prop_map(
            |(
                sizes,
                trans,
                broadcast,
                layout,
                c_col_major,
                scalars,
                precision,
                plan,
                panels,
                seed,
            )| {
                Case {
                    sizes,
                    trans,
                    broadcast,
                    layout,
                    c_col_major,
                    scalars,
                    precision,
                    plan,
                    panels,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any shape, strides, offsets, transposes, batch (with broadcast), α, β, precision, rung
    /// and configuration, in one buffer or in panels: within the bound against the reference.
    #[test]
    fn random_products_meet_the_bound(case in cases()) {
        let _shared = shared();
        let p = case.problem();
        // The rungs that run this precision here (f64 doubles the warp-tiled rung's shared
        // memory past what lavapipe and CUDA allow: refused, tested in tests/kernels.rs).
        let plans: Vec<_> = rung_plans().into_iter().filter(|plan| runs(plan, &p)).collect();
        let plan = plans[case.plan % plans.len()];
        let gpu = if case.panels { small_bindings() } else { gpu() };
        let ops = inputs::random_operands(&p, case.seed).unwrap();
        let run = gpu.gemm(&p, &plan, &ops.a, &ops.b, ops.c0.as_ref()).unwrap();
        let check = Reference::new(&p, &ops.a, &ops.b, ops.c0.as_ref())
            .unwrap()
            .random_inputs()
            .check_passes(&run.c, run.schedule.passes)
            .unwrap();
        prop_assert!(check.pass, "{plan} {p}: {check:?}");
    }
}

/// C for `a` and `b` (dense row-major f32, m×k and k×n) on the device.
fn product(plan: &Plan, (m, k, n): (usize, usize, usize), a: &[f32], b: &[f32]) -> Vec<f32> {
    let p = Problem::new(m, k, n).unwrap();
    let (a, b) = (HostData::F32(a.to_vec()), HostData::F32(b.to_vec()));
    let run = gpu().gemm(&p, plan, &a, &b, None).unwrap();
    run.c.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn nan_and_inf_reach_exactly_the_entries_they_touch() {
    let _shared = shared();
    let (m, k, n) = (37, 45, 29);
    let mut rng = StdRng::seed_from_u64(5);
    // Strictly positive entries: no term is 0, so 0·Inf never hides, and Inf + (−Inf) never
    // happens unless the test puts it there.
    let mut fill =
        |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(0.5..1.5)).collect() };
    let (a0, b0) = (fill(m * k), fill(k * n));
    for plan in rung_plans() {
        // A NaN in row 3 of A: row 3 of C is NaN, nothing else.
        let mut a = a0.clone();
        a[3 * k + 17] = f32::NAN;
        let c = product(&plan, (m, k, n), &a, &b0);
        for i in 0..m {
            for j in 0..n {
                let x = c[i * n + j];
                assert_eq!(x.is_nan(), i == 3, "{plan}: C[{i},{j}] = {x}");
                assert!(i == 3 || x.is_finite(), "{plan}: C[{i},{j}] = {x}");
            }
        }
        // +Inf in column 5 of B: column 5 of C is +Inf (all terms positive), nothing else.
        let mut b = b0.clone();
        b[11 * n + 5] = f32::INFINITY;
        let c = product(&plan, (m, k, n), &a0, &b);
        for i in 0..m {
            for j in 0..n {
                let x = c[i * n + j];
                if j == 5 {
                    assert_eq!(x, f32::INFINITY, "{plan}: C[{i},{j}]");
                } else {
                    assert!(x.is_finite(), "{plan}: C[{i},{j}] = {x}");
                }
            }
        }
        // +Inf and −Inf in one row of A meet in a sum: Inf − Inf is NaN, in that row only.
        let mut a = a0.clone();
        a[8 * k + 1] = f32::INFINITY;
        a[8 * k + 40] = f32::NEG_INFINITY;
        let c = product(&plan, (m, k, n), &a, &b0);
        for i in 0..m {
            for j in 0..n {
                let x = c[i * n + j];
                assert_eq!(x.is_nan(), i == 8, "{plan}: C[{i},{j}] = {x}");
            }
        }
    }
}

/// The process's resident memory, from /proc (Linux), in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_soak_of_150_mixed_products_leaves_memory_where_it_was() {
    soak(150);
}

/// The long soak: scripts/test-exhaustive runs it (CI does), `scripts/test` the short one.
#[test]
#[ignore = "exhaustive: scripts/test-exhaustive runs it"]
fn a_soak_of_1000_mixed_products_leaves_memory_where_it_was() {
    soak(1000);
}

/// `products` random products (shapes, transposes, batches, β, precisions, rungs) run twice:
/// once to compile every kernel variant they use and grow the pools, then again; the second
/// pass must leave device and host memory where the first left them.
fn soak(products: usize) {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    let mut rng = StdRng::seed_from_u64(9);
    let plans = rung_plans();
    let precisions = precisions();
    let one = |rng: &mut StdRng| {
        let shape = Shape {
            batch: rng.random_range(1..4),
            trans_a: rng.random(),
            trans_b: rng.random(),
            beta: [0.0, 1.0][rng.random_range(0..2)],
            precision: precisions[rng.random_range(0..precisions.len())],
            ..Shape::new(
                rng.random_range(1..48),
                rng.random_range(1..48),
                rng.random_range(1..48),
            )
        };
        let p = shape.problem().unwrap();
        let runnable: Vec<&Plan> = plans.iter().filter(|plan| runs(plan, &p)).collect();
        let plan = *runnable[rng.random_range(0..runnable.len())];
        let ops = inputs::random_operands(&p, rng.random()).unwrap();
        let run = gpu()
            .gemm(&p, &plan, &ops.a, &ops.b, ops.c0.as_ref())
            .unwrap();
        assert_eq!(run.c.len(), p.c_len());
    };
    // Warm-up: the same products once, so that every kernel variant they use (rung,
    // precision, layouts, vector widths) is compiled and cached, and the pools have grown to
    // their working size; the soak then repeats them, and any growth is a leak.
    let start = rng.clone();
    for _ in 0..products {
        one(&mut rng);
    }
    let (rss, device) = (resident_bytes(), gpu().memory().unwrap());
    let mut rng = start;
    for _ in 0..products {
        one(&mut rng);
    }
    let (rss_after, device_after) = (resident_bytes(), gpu().memory().unwrap());
    eprintln!(
        "soak of {products} products: resident {:.1} → {:.1} MiB; device in use {} → {} bytes, \
         reserved {} → {} bytes",
        rss as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
        device.in_use,
        device_after.in_use,
        device.reserved,
        device_after.reserved
    );
    // No buffer outlives its product; the pools do not grow once warm; the process holds no
    // more than allocator noise beyond where it was.
    assert!(
        device_after.in_use <= device.in_use + (1 << 20),
        "{device:?} → {device_after:?}"
    );
    assert!(
        device_after.reserved <= device.reserved + (8 << 20),
        "{device:?} → {device_after:?}"
    );
    assert!(
        rss_after <= rss + (64 << 20),
        "resident {rss} → {rss_after}"
    );
}

#[test]
fn threads_sharing_one_device_each_get_their_own_correct_results() {
    let _shared = shared();
    let plans = rung_plans();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let plans = &plans;
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + thread);
                for round in 0..20 {
                    let (m, k, n) = (
                        rng.random_range(1..60),
                        rng.random_range(1..60),
                        rng.random_range(1..60),
                    );
                    let p = Shape {
                        batch: 1 + (thread as usize % 2),
                        trans_a: thread % 2 == 1,
                        ..Shape::new(m, k, n)
                    }
                    .problem()
                    .unwrap();
                    // Integers: each thread's C must be exactly its own product.
                    let int = |len: usize, rng: &mut StdRng| {
                        HostData::from_f64(
                            DType::F32,
                            (0..len).map(|_| rng.random_range(-3i32..=3) as f64),
                        )
                    };
                    let (a, b) = (int(p.a_len(), &mut rng), int(p.b_len(), &mut rng));
                    let plan = plans[(thread as usize + round) % plans.len()];
                    let run = gpu().gemm(&p, &plan, &a, &b, None).unwrap();
                    let check = Reference::new(&p, &a, &b, None)
                        .unwrap()
                        .check(&run.c)
                        .unwrap();
                    assert!(
                        check.pass && check.all_exact(),
                        "thread {thread}, round {round}, {plan}: {check:?}"
                    );
                }
            });
        }
    });
}
