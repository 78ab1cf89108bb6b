//! `tilemm compile-check`: every kernel through NVRTC and clang, no GPU needed.

use std::process::ExitCode;

use tilemm::{DType, Plan, Precision};
use tilemm_lab::tools::compile_check::{self, criteria, Arch, Outcome, Toolchain, Vendor};

use crate::args::*;
use crate::{CommandResult, Failure, EXIT_FAIL};

pub fn compile_check_command(args: CompileCheckArgs) -> CommandResult {
    let mut plans = plans(&unnamed("--kernels", &args.kernels, &args.tpb)?, &args.tpb)?;
    // The rungs' default plans, which are fitted to each target's plane width (below).
    let defaults = plans.len();
    // By default, every configuration of a rung whose main loop is held to criteria (the
    // matrix-unit rungs: mma on NVIDIA, tensorcore on AMD), each its own row: each must meet
    // them.
    if args.kernels.is_empty() && args.tpb.is_empty() {
        let extra: Vec<Plan> = tilemm::Kernel::ALL
            .iter()
            .flat_map(|k| k.configs())
            .filter(|c| {
                criteria::matrix_loop_criteria(c, Precision::of(tilemm::DType::F16)).is_some()
                    || criteria::amd_matrix_loop_criteria(c).is_some()
            })
            .map(Plan::new)
            .filter(|p| !plans.contains(p))
            .collect();
        plans.extend(extra);
    }
    let mut tools = Toolchain {
        cuda_include: args.cuda_include.clone(),
        clang: args.clang.clone(),
        sass_dir: args.sass.clone(),
        pace: None,
    };
    compile_check::preflight(&args.archs, &tools)?;
    // The first call's compile-time limit scales with how fast this machine compiles today.
    tools.pace = compile_check::Pace::measure(&args.archs)?;
    if !args.json {
        say!("{}", compile_check::Row::TABLE_HEADER);
    }
    let (dtypes, archs) = (&args.dtypes, &args.archs);
    let named = !(args.kernels.is_empty() && args.tpb.is_empty());
    // The configurations beyond the defaults (the tuner's other candidates), unless
    // --every-target: on the last NVIDIA architecture given (and every AMD one), and not in
    // bf16, which is f16's code with another element type. Each default is checked
    // everywhere. The rows left out were 407 s of the 1060 s CI's compile check spent in
    // compilers (the mma rung's eight other configurations on sm_80, and in bf16 on sm_90).
    let last_nvidia = archs.iter().rev().find(|a| a.vendor == Vendor::Nvidia);
    let extra_target = |arch: &Arch, dtype: DType| {
        args.every_target
            || (dtype != DType::BF16
                && (arch.vendor != Vendor::Nvidia || Some(arch) == last_nvidia))
    };
    let mut jobs = Vec::new();
    for (index, plan) in plans.iter().enumerate() {
        for &dtype in dtypes {
            for arch in archs {
                if index >= defaults && !named && !extra_target(arch, dtype) {
                    continue;
                }
                let precision = Precision::of(dtype);
                // By default each rung is checked in its default configuration, or where the
                // target cannot run that (laid out for planes of another width), in its first
                // one it can.
                let fitted = (index < defaults && !named)
                    .then(|| {
                        let probe = compile_check::probe(precision);
                        tilemm::plan::check::fitted(plan, &probe, &arch.device()).ok()
                    })
                    .flatten();
                jobs.push((fitted.unwrap_or(*plan), precision, arch.clone()));
            }
        }
    }
    // A compile takes up to about 320 MB (mma 128×256 at BK 64 for sm_90): at most 8 at once
    // by default, whatever the core count.
    let workers = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
        |n| n as usize,
    );
    let mut via_rocwmma = false;
    let mut rows = Vec::with_capacity(jobs.len());
    compile_check::check_rows(&jobs, &tools, workers, |row| {
        if !args.json {
            say!("{row}");
        }
        // Whether a row was compiled through rocWMMA (said once, below the table).
        let (plan, _, arch) = &jobs[rows.len()];
        if matches!(row.outcome, Outcome::Compiled { .. }) {
            via_rocwmma |= compile_check::through_rocwmma(plan, arch);
        }
        rows.push(row);
        Ok::<(), Failure>(())
    })?;
    let report = compile_check::Report::new(rows, archs, via_rocwmma, tools.pace);
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&report).expect("the report serializes")
        );
    } else {
        // The rows were printed as they came.
        for note in &report.notes {
            say!("{note}");
        }
        say!(
            "{} compiled, {} skipped, {} failed",
            report.compiled,
            report.skipped,
            report.failed
        );
    }
    Ok(if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}
