//! The mma rung (NVIDIA `mma.sync` from `ldmatrix` fragments on a `cp.async` pipeline) on the
//! test device.
//!
//! Its CUDA configurations need an NVIDIA GPU from sm_80 on: there (`TILEMM_TEST_BACKEND=cuda`,
//! `scripts/gpu-check`) each must pass the contract; elsewhere (lavapipe) each must be refused
//! with the typed error before launch. Their index arithmetic runs everywhere through
//! the rung's emulation, which keeps the kernel's staging (the fast path's copy plans and the
//! bounded path's pieces), the swizzled layout, every lane's `ldmatrix` address, the
//! pipeline's stage order and the epilogue, and carries out `ldmatrix`, `mma.sync` and
//! `cp.async` as the PTX ISA defines them, through shared memory. Here it must give exact
//! products on integers, and stay within the bound and the precision limit on random data,
//! over edge shapes, whole interior blocks, transposes (`ldmatrix.trans`), batches, α/β and
//! padded, unaligned views; and in tf32 (`mma.m16n8k8`, its inputs truncated as the units
//! truncate them), with `ldmatrix` where K is contiguous and 32-bit loads where it is not. On
//! lavapipe before Mesa 26 the emulation is compiled for minutes: there it runs only with
//! `TILEMM_EXPECT_MATRIX_UNITS` set, as in CI's Mesa 26 step.

mod common;

use common::gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::io::inputs;
use tilemm::kernels::mma::MmaConfig;
use tilemm::verify::Reference;
use tilemm::Unavailable;
use tilemm::{Config, DType, Error, HostData, Kernel, Plan, Precision, Problem, Shape};

/// An emulated configuration, small enough for lavapipe's 32 KiB of shared memory with the
/// emulation's scratch (the one-warp one with the registered configurations' 64×64 warp tile,
/// those of two warps with 32×32).
fn emulated(bm: u32, bn: u32, bk: u32, wm: u32, wn: u32, stages: u32, split: u32) -> Plan {
    plan(MmaConfig {
        bm,
        bn,
        bk,
        wm,
        wn,
        stages,
        split,
        wk: 1,
        emulate: true,
    })
}

/// An emulated configuration of one warp per group and `wk` groups of warps along K, each its
/// share of the steps of every K tile, in 2 stages.
fn sliced(bm: u32, bn: u32, bk: u32, wk: u32) -> Plan {
    plan(MmaConfig {
        bm,
        bn,
        bk,
        wm: 1,
        wn: 1,
        stages: 2,
        split: 1,
        wk,
        emulate: true,
    })
}

fn plan(config: MmaConfig) -> Plan {
    assert!(config.valid(), "{config:?}");
    Plan::new(Config::Mma(config))
}

fn f16_in(output: DType) -> Precision {
    Precision::new(DType::F16, output).unwrap()
}

fn shape(m: usize, k: usize, n: usize) -> Shape {
    Shape {
        precision: f16_in(DType::F32),
        ..Shape::new(m, k, n)
    }
}

/// The contract, with as few kernel variants as cover it (each is a JIT compile on lavapipe):
/// whole interior blocks beside edge blocks (the fast path's copy plans and the bounded path)
/// with a broadcast batch and α/β, C in 16-byte vectors (the staged epilogue; emulated, 4
/// elements); unaligned edges (element-wise staging, C in the fragments' pairs: N even, not a
/// multiple of 4); A and B stored the other way (`ldmatrix.trans` swaps; for tf32, 32-bit
/// loads), C in the input type; padded views with a column-major C (C by elements). `input`:
/// f16, or tf32 (f32 data, C in f32, tf32's only output).
fn contract_in(input: DType) -> Vec<(String, Problem)> {
    let precision = |output| Precision::new(input, output).unwrap();
    let out = if input == DType::TF32 {
        DType::F32
    } else {
        input
    };
    let shape = |m, k, n| Shape {
        precision: precision(DType::F32),
        ..Shape::new(m, k, n)
    };
    let own_out = |s: Shape| Shape {
        precision: precision(out),
        ..s
    };
    [
        (
            "130×64×136, batch 2 with A broadcast, α −2, β 3",
            Shape {
                batch: 2,
                broadcast_a: true,
                alpha: -2.0,
                beta: 3.0,
                ..shape(130, 64, 136)
            },
        ),
        ("97×131×54", shape(97, 131, 54)),
        // K of 10 tiles of 32 (5 of 64): whole groups of stages on the fast path, then the
        // rest (the same kernel variant as the first, so no compile more on lavapipe).
        ("130×320×136", shape(130, 320, 136)),
        (
            "trans-a 70×48×72",
            Shape {
                trans_a: true,
                ..shape(70, 48, 72)
            },
        ),
        // C in the input type: on a GPU, 16-byte vectors of 8 (f16, bf16) inside and at the
        // edges of 128×128 blocks, β·C read as them.
        (
            "trans-b 140×48×136, α −2, β 3, C in the input type",
            own_out(Shape {
                trans_b: true,
                alpha: -2.0,
                beta: 3.0,
                ..shape(140, 48, 136)
            }),
        ),
    ]
    .into_iter()
    .map(|(name, s)| (format!("{input} {name}"), s.problem().unwrap()))
    .chain([(
        format!("{input} padded views, column-major C"),
        common::padded_views(precision(DType::F32)),
    )])
    // N even but not a multiple of 4, with whole blocks beside the edges: C in the fragments'
    // pairs inside C (β = 0, and β·C read), where the problems above take the pairs only at
    // the edges.
    .chain(
        [
            ("130×64×70, C in pairs", shape(130, 64, 70)),
            (
                "130×64×70, C in pairs, α −2, β 3",
                Shape {
                    alpha: -2.0,
                    beta: 3.0,
                    ..shape(130, 64, 70)
                },
            ),
        ]
        .into_iter()
        .map(|(name, s)| (format!("{input} {name}"), s.problem().unwrap())),
    )
    .collect()
}

/// The contract in f16.
fn contract() -> Vec<(String, Problem)> {
    contract_in(DType::F16)
}

/// Integers exact, random data within the bound and the precision limit.
fn check(plan: &Plan, name: &str, p: &Problem, rng: &mut StdRng) {
    plan.check(p, gpu().info())
        .unwrap_or_else(|e| panic!("{plan} on {name}: {e}"));
    // Small integers: every product and partial sum exact, so C must be the product.
    let mut int = |len: usize, dtype: DType| {
        HostData::from_f64(dtype, (0..len).map(|_| rng.random_range(-3i32..=3) as f64))
    };
    let a = int(p.a_len(), p.precision().input);
    let b = int(p.b_len(), p.precision().input);
    let c0 = p.reads_c().then(|| int(p.c_len(), p.precision().output));
    let run = gpu()
        .gemm(p, plan, &a, &b, c0.as_ref())
        .unwrap_or_else(|e| panic!("{plan} on {name}: {e}"));
    let check = Reference::new(p, &a, &b, c0.as_ref())
        .unwrap()
        .check_passes(&run.c, run.schedule.passes)
        .unwrap();
    // Exact wherever C's type holds every partial sum (|entries| ≤ 3): bf16 holds the integers
    // to 256 only, so a long K in bf16 is held to the bound, entry by entry, instead.
    let largest = 9.0 * p.k() as f64 * p.alpha().abs() + 3.0 * p.beta().abs();
    let exact = largest <= p.precision().output.exact_integer_limit();
    assert!(
        check.pass && (check.all_exact() || !exact),
        "{plan} on {name}: {check:?}"
    );
    // Random data: the bound, and what f32 accumulation gives random inputs.
    let ops = inputs::random_operands(p, 5).unwrap();
    let run = gpu()
        .gemm(p, plan, &ops.a, &ops.b, ops.c0.as_ref())
        .unwrap();
    let check = Reference::new(p, &ops.a, &ops.b, ops.c0.as_ref())
        .unwrap()
        .random_inputs()
        .check_passes(&run.c, run.schedule.passes)
        .unwrap();
    assert!(check.pass, "{plan} on {name}, random: {check:?}");
}

/// Shard `i` of `n`: every n-th of `items` from the i-th.
fn every_nth<T>(items: Vec<T>, i: usize, n: usize) -> Vec<T> {
    items.into_iter().skip(i).step_by(n).collect()
}

#[test]
fn the_shards_of_a_gpu_contract_check_each_configuration_once() {
    let configs = Kernel::Mma.configs();
    for n in 1..=configs.len() + 1 {
        let mut all: Vec<Config> = (0..n)
            .flat_map(|i| every_nth(configs.clone(), i, n))
            .collect();
        assert_eq!(all.len(), configs.len(), "{n} shards");
        all.sort_by_key(ToString::to_string);
        all.dedup();
        assert_eq!(all.len(), configs.len(), "{n} shards");
    }
}

/// `TILEMM_TEST_SHARD`'s i/n, where set.
fn shard_of() -> Option<(usize, usize)> {
    let text = std::env::var_os("TILEMM_TEST_SHARD")?;
    let text = text.to_string_lossy();
    let parsed = text
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
    match parsed {
        Some((i, n)) if i < n => Some((i, n)),
        _ => panic!("TILEMM_TEST_SHARD={text}: expected i/n with i < n, as 0/4"),
    }
}

/// The share of a GPU contract's configurations this process checks: `TILEMM_TEST_SHARD=i/n`
/// takes every n-th from the i-th (scripts/gpu-check runs n processes side by side, so that
/// NVRTC compiles on n cores: about 20 s a kernel on the H100's host); all when unset.
fn shard<T: std::fmt::Display>(configs: Vec<T>) -> Vec<T> {
    let Some((i, n)) = shard_of() else {
        return configs;
    };
    let mine = every_nth(configs, i, n);
    let names: Vec<String> = mine.iter().map(ToString::to_string).collect();
    println!(
        "branch taken: shard {i}/{n} (TILEMM_TEST_SHARD): {}",
        names.join(", ")
    );
    mine
}

/// The 16-bit configurations of `whole` (the default block's, 128×128 in 3 stages, BK 32 and
/// 64: the whole contract) or of the rest (the problems their schedules change), each on an
/// NVIDIA GPU from sm_80 on (TILEMM_TEST_BACKEND=cuda, scripts/gpu-check), else refused with
/// the typed error. Two tests, so that a GPU check can run each in a step of its own
/// (`GPU_MMA_FILTER`): each problem is a JIT compile of 4–9 s here, about 20 s on the H100's
/// host, 30 of them in all.
fn contract_on_mma_sync(whole: bool) {
    let info = gpu().info();
    let configs: Vec<Config> = Kernel::Mma
        .configs()
        .into_iter()
        .filter(|config| match config {
            Config::Mma(c) => {
                let default_block = c.split == 1 && (c.bm, c.bn, c.stages) == (128, 128, 3);
                c.valid_for(2) && default_block == whole
            }
            _ => false,
        })
        .collect();
    assert!(!configs.is_empty());
    let which = if whole {
        "the whole contract"
    } else {
        "the other configurations' schedules"
    };
    if info.copy_async && !info.register_mma.is_empty() {
        println!("branch taken: mma.sync on {}: {which}", info.name);
        let configs = shard(configs);
        let mut rng = StdRng::seed_from_u64(if whole { 29 } else { 37 });
        let bf16 = |output| {
            Shape {
                precision: Precision::new(DType::BF16, output).unwrap(),
                ..Shape::new(300, 520, 260)
            }
            .problem()
            .unwrap()
        };
        let (bf16_f32, bf16) = (bf16(DType::F32), bf16(DType::BF16));
        // Outside the default block, the problems the schedule changes: whole blocks beside
        // edge ones, whole groups of stages; and bf16.
        let contract = contract();
        for config in configs {
            let plan = Plan::new(config);
            for (i, (name, p)) in contract.iter().enumerate() {
                if whole || i == 0 || i == 2 {
                    check(&plan, name, p, &mut rng);
                }
            }
            check(&plan, "bf16 300×520×260, C in f32", &bf16_f32, &mut rng);
            if whole {
                check(&plan, "bf16 300×520×260", &bf16, &mut rng);
            }
        }
        return;
    }
    println!(
        "branch taken: no mma.sync on {}: refusals ({which})",
        info.name
    );
    let probe = shape(64, 64, 64).problem().unwrap();
    for config in configs {
        let err = Plan::new(config).check(&probe, info).unwrap_err();
        assert!(without_mma_sync(&err), "{config}: {err}");
    }
}

#[test]
fn the_configurations_pass_the_contract_where_mma_sync_exists_and_are_refused_elsewhere() {
    contract_on_mma_sync(true);
    // f32 is no input of the rung, anywhere (f32 data are multiplied as tf32 only when asked).
    let f32_probe = Problem::new(8, 8, 8).unwrap();
    for config in Kernel::Mma.configs() {
        let checked = Plan::new(config).check(&f32_probe, gpu().info());
        assert!(checked.is_err(), "{config}");
    }
}

#[test]
fn the_other_schedules_pass_their_problems_where_mma_sync_exists_and_are_refused_elsewhere() {
    contract_on_mma_sync(false);
}

/// tf32 (`mma.m16n8k8`) on its own, so that a GPU check can run it alone (`GPU_MMA_FILTER`).
#[test]
fn the_configurations_pass_the_contract_in_tf32_where_mma_sync_exists_and_are_refused_elsewhere() {
    let info = gpu().info();
    let tf32_contract = contract_in(DType::TF32);
    if info.copy_async && !info.register_mma.is_empty() {
        println!("branch taken: mma.sync on {}: the tf32 contract", info.name);
        let mut rng = StdRng::seed_from_u64(31);
        // The whole contract in tf32's own 128×128 configuration, its first problem in the
        // others that compute tf32 (BK up to 32, no split, 64×64 warp tiles: `computes`).
        let mut checked = 0;
        let computing: Vec<Config> = Kernel::Mma
            .configs()
            .into_iter()
            .filter(|config| config.computes(tf32_contract[0].1.precision()))
            .collect();
        let all = computing.len();
        let mine = shard(computing);
        for config in &mine {
            let Config::Mma(c) = config else {
                unreachable!()
            };
            let whole = (c.bm, c.bn, c.bk) == (128, 128, 16);
            for (i, (name, p)) in tf32_contract.iter().enumerate() {
                if whole || i == 0 {
                    check(&Plan::new(*config), name, p, &mut rng);
                    checked += 1;
                }
            }
        }
        // Every configuration that computes tf32 checked, the whole contract in one (of all
        // shards together).
        assert!(checked >= mine.len(), "{checked} tf32 checks");
        if mine.len() == all {
            assert!(checked > tf32_contract.len(), "{checked} tf32 checks");
        }
        return;
    }
    println!("branch taken: no mma.sync on {}: tf32 refusals", info.name);
    let (_, probe) = &tf32_contract[0];
    for config in Kernel::Mma.configs() {
        let err = Plan::new(config).check(probe, info).unwrap_err();
        // (tf32 is refused first for the device's want of tf32 units.)
        assert!(
            without_mma_sync(&err)
                || matches!(
                    err,
                    Error::TypeUnavailable {
                        dtype: DType::TF32,
                        ..
                    } | Error::KernelUnavailable {
                        why: Unavailable::Precision(_),
                        ..
                    }
                ),
            "{config}: {err}"
        );
    }
}

/// Whether `err` refuses a configuration for the device's want of `mma.sync`, `cp.async` or
/// 32-wide planes.
fn without_mma_sync(err: &Error) -> bool {
    matches!(
        err,
        Error::KernelUnavailable {
            why: Unavailable::RegisterMma { .. }
                | Unavailable::AsyncCopy
                | Unavailable::PlaneWidth { .. },
            ..
        }
    )
}

/// The Mesa major version of a lavapipe device, from its driver string.
fn lavapipe_mesa(info: &tilemm::DeviceInfo) -> Option<u32> {
    let rest = info.driver.split("Mesa ").nth(1)?;
    let major: String = rest.chars().take_while(char::is_ascii_digit).collect();
    major.parse().ok()
}

/// Whether the emulation runs in this process, and which branch was taken, said.
fn the_emulation_runs_here() -> bool {
    let info = gpu().info();
    // Debian 12's lavapipe (Mesa 22, LLVM 15) spends minutes per kernel variant of the
    // emulation in LLVM's coroutine pass (about 6 minutes for these tests, against 3 on Mesa
    // 26): CI runs them in its Mesa 26 step, which sets TILEMM_EXPECT_MATRIX_UNITS.
    if lavapipe_mesa(info).is_some_and(|v| v < 26)
        && std::env::var_os("TILEMM_EXPECT_MATRIX_UNITS").is_none()
    {
        println!(
            "branch taken: not run on {} ({}): scripts/test-mesa26 runs it on lavapipe 26 \
             (set TILEMM_EXPECT_MATRIX_UNITS=1 to run it here)",
            info.name, info.driver
        );
        return false;
    }
    // Sharded (scripts/gpu-check's processes side by side), the first shard runs it.
    if let Some((i, n)) = shard_of().filter(|&(i, _)| i > 0) {
        println!("branch taken: not run in shard {i}/{n}: shard 0 runs the emulation");
        return false;
    }
    println!(
        "branch taken: the emulation on {} ({})",
        info.name, info.driver
    );
    true
}

#[test]
fn the_emulated_kernel_is_exact_and_within_the_bound_over_the_contract() {
    if !the_emulation_runs_here() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(23);
    // One warp, two steps of 16 per K tile: the contract's edges and whole blocks (the next
    // test, the rest). (Its 64-row warp tile takes the fragment addresses XORed first,
    // `MmaConfig::xor_first`, as the device's 64-row warps at 4 steps a tile do; the 32-row
    // ones below XOR the sum.)
    let plan = emulated(64, 64, 32, 1, 1, 2, 1);
    let Config::Mma(config) = plan.config else {
        unreachable!()
    };
    assert!(config.xor_first(2), "the emulation runs the XOR-first form");
    // C row-major in 4-element vectors: the staged epilogue, its staging beside the stages in
    // this device's shared memory (else C would go out in pairs, unchecked here).
    let c = tilemm::problem::MatrixDesc::row_major(64, 64);
    let limit = gpu().info().limits.max_shared_bytes;
    let staged = |plan: &Plan, input: u32| {
        let Config::Mma(config) = plan.config else {
            unreachable!()
        };
        for output in [2, 4] {
            assert_eq!(
                tilemm::kernels::mma::c_width(&config, &c, input, output, limit),
                4,
                "{plan}: C of {output}-byte elements in {limit} bytes of shared memory"
            );
        }
    };
    staged(&plan, 2);
    for (other, input) in [
        (emulated(32, 64, 32, 1, 2, 3, 1), 2),
        (emulated(64, 64, 32, 1, 1, 2, 3), 2),
        (sliced(32, 32, 64, 2), 2),
        (emulated(64, 64, 16, 1, 1, 2, 1), 4),
        (sliced(32, 16, 32, 2), 4),
    ] {
        staged(&other, input);
    }
    check_all(&plan, &contract(), &[0, 1, 2], &mut rng);
    // Ten rows of blocks: the rasterized grid's two groups of rows, the second of two (the
    // kernel variant of the first problem: no compile more).
    let tall = shape(600, 64, 72).problem().unwrap();
    check(
        &plan,
        "600×64×72, two groups of block rows",
        &tall,
        &mut rng,
    );
}

/// The rest of the contract on the one-warp configuration above: the transposes, C in the
/// input type, padded views with a column-major C, C in pairs inside C (four kernel variants,
/// a test of their own so that a runner of tests side by side takes them beside the first
/// three).
#[test]
fn the_emulated_kernel_over_the_contracts_transposes_and_padded_views() {
    if !the_emulation_runs_here() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(41);
    let plan = emulated(64, 64, 32, 1, 1, 2, 1);
    // C of 130×70 in f32 goes out in the fragments' pairs (N even, not a multiple of 4).
    let Config::Mma(config) = plan.config else {
        unreachable!()
    };
    let pairs = tilemm::problem::MatrixDesc::row_major(130, 70);
    let limit = gpu().info().limits.max_shared_bytes;
    assert_eq!(
        tilemm::kernels::mma::c_width(&config, &pairs, 2, 4, limit),
        2
    );
    check_all(&plan, &contract(), &[3, 4, 5, 6, 7], &mut rng);
}

// The emulation's checks in five tests, which a runner of tests side by side (cargo-nextest:
// scripts/test-mesa26) spreads over cores: each kernel variant (a schedule, a layout of the
// operands) is a compile of minutes on a slow day's lavapipe. The first four cover each part of
// the kernel once (about 13 variants); the fifth, the same parts in the other combinations
// (about 11 more), runs where asked: `scripts/test-mesa26 --run-ignored all`.

#[test]
fn the_emulated_kernel_in_other_warp_tiles_and_with_split_and_sliced_k() {
    if !the_emulation_runs_here() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(29);
    let contract = contract();
    // Two warps along N (nonzero column origins), three stages, whole groups of them (K of
    // 320, 10 tiles): both paths. Two warps along M (nonzero row origins): A stored by
    // columns. Split-K in 3 slices of one K tile: K of 64 gives an empty third slice, with a
    // batch and α/β.
    for (plan, which) in [
        (emulated(32, 64, 32, 1, 2, 3, 1), [2].as_slice()),
        (emulated(64, 32, 32, 2, 1, 2, 1), [3].as_slice()),
        (emulated(64, 64, 32, 1, 1, 2, 3), [0].as_slice()),
    ] {
        check_all(&plan, &contract, which, &mut rng);
    }
    // Sliced K: two warps, each 2 of a K tile's 4 steps (the registered 64×128's BK = 64 in
    // two groups), their sums added in shared memory: both paths with α/β, and whole groups of
    // stages (K of 320, 5 tiles; the same kernel variant). A by rows and B by rows start their
    // second group's fragments along the row and down the rows: both of `fragment_bases`'
    // ways (the transposes take the same two, operands swapped).
    check_all(&sliced(32, 32, 64, 2), &contract, &[0, 2], &mut rng);
}

#[test]
fn the_emulated_kernel_in_tf32() {
    if !the_emulation_runs_here() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(31);
    // tf32 (m16n8k8, emulated on f32), BK = 16: A row-major through `ldmatrix` and B
    // row-major through 32-bit loads, with both paths and α/β; A by columns (32-bit loads of
    // both). BK = 32 (4 steps of K, as the registered 128×128 and 128×256). Sliced K: each of
    // two warps 2 of BK = 32's 4 steps, B through 32-bit loads from the padded rows
    // (`word_bases` from the second group's first step).
    let tf32 = contract_in(DType::TF32);
    for (plan, which) in [
        (emulated(64, 64, 16, 1, 1, 2, 1), [0, 3].as_slice()),
        (emulated(32, 32, 32, 1, 1, 2, 1), [0].as_slice()),
        (sliced(32, 16, 32, 2), [0].as_slice()),
    ] {
        check_all(&plan, &tf32, which, &mut rng);
    }
}

#[test]
#[ignore = "the emulation's other combinations (about 11 kernel variants, 15 minutes of one core \
            on a slow day): scripts/test-mesa26 --run-ignored all"]
fn the_emulated_kernel_in_the_other_combinations_of_its_parts() {
    if !the_emulation_runs_here() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(37);
    // f16. One warp of 32×64 (the registered 64×128's warp tile: A's fragments and B's pairs in
    // unequal numbers): both paths, A stored by columns, B by columns. Two warps along N: B
    // stored by columns, and both paths at K of 64. Split-K: K of 48 gives a ragged second
    // slice and an empty third (C in f16 through the reduction).
    let contract = contract();
    for (plan, which) in [
        (emulated(32, 64, 32, 1, 1, 2, 1), [0, 3, 4].as_slice()),
        (emulated(32, 64, 32, 1, 2, 3, 1), [0, 4].as_slice()),
        (emulated(64, 64, 32, 1, 1, 2, 3), [4].as_slice()),
    ] {
        check_all(&plan, &contract, which, &mut rng);
    }
    // tf32: unaligned edges; B by columns (`ldmatrix` of both). Two warps along N, and along M:
    // the 32-bit loads at nonzero column and row origins, three stages. BK = 32 with padded
    // views; 4 stages (as tf32's 128×128) over whole groups of them.
    let tf32 = contract_in(DType::TF32);
    for (plan, which) in [
        (emulated(64, 64, 16, 1, 1, 2, 1), [1, 4].as_slice()),
        (emulated(32, 64, 16, 1, 2, 3, 1), [2].as_slice()),
        (emulated(64, 32, 16, 2, 1, 2, 1), [3].as_slice()),
        (emulated(32, 32, 32, 1, 1, 2, 1), [5].as_slice()),
        (emulated(32, 32, 16, 1, 1, 4, 1), [2].as_slice()),
    ] {
        check_all(&plan, &tf32, which, &mut rng);
    }
}

/// [`check`] on the problems of `contract` at `which`.
fn check_all(plan: &Plan, contract: &[(String, Problem)], which: &[usize], rng: &mut StdRng) {
    for &i in which {
        let (name, p) = &contract[i];
        check(plan, name, p, rng);
    }
}
