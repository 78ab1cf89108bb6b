//! `tilemm compile-check`: every kernel through NVRTC and clang, no GPU needed.

use std::process::ExitCode;

use tilemm::tools::compile_check::{self, Toolchain};
use tilemm::{Plan, Precision};

use crate::args::*;
use crate::{CommandResult, EXIT_FAIL};

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
                c.matrix_loop_criteria().is_some() || c.amd_matrix_loop_criteria().is_some()
            })
            .map(Plan::new)
            .filter(|p| !plans.contains(p))
            .collect();
        plans.extend(extra);
    }
    let tools = Toolchain {
        cuda_include: args.cuda_include.clone(),
        clang: args.clang.clone(),
        sass_dir: args.sass.clone(),
    };
    compile_check::preflight(&args.archs, &tools)?;
    if !args.json {
        say!("{}", compile_check::TABLE_HEADER);
    }
    let mut results = Vec::new();
    let (mut failures, mut skipped) = (0, 0);
    // Whether a row was compiled through rocWMMA (said once, below the table).
    let mut via_rocwmma = false;
    let (dtypes, archs) = (&args.dtypes, &args.archs);
    let every = plans.iter().enumerate().flat_map(|(index, plan)| {
        dtypes.iter().flat_map(move |&dtype| {
            archs
                .iter()
                .map(move |arch| (index < defaults, plan, dtype, arch))
        })
    });
    {
        for (default, plan, dtype, arch) in every {
            let precision = Precision::of(dtype);
            // By default each rung is checked in its default configuration, or where that is
            // laid out for planes of another width than the target's, in its first one that
            // fits the target's.
            let fitted = (default && args.kernels.is_empty() && args.tpb.is_empty())
                .then(|| crate::commands::bench::fit_plane(plan, arch.warp_size))
                .flatten();
            let plan = fitted.as_ref().unwrap_or(plan);
            if let Some(why) = compile_check::not_applicable(plan, precision, arch) {
                if !args.json {
                    say!(
                        "{:<40} {:<8} {:<9} skipped: {why}",
                        plan.to_string(),
                        arch.name,
                        compile_check::short_name(precision)
                    );
                }
                results.push(serde_json::json!({
                    "plan": plan, "precision": precision, "arch": arch.name,
                    "skipped": why,
                }));
                skipped += 1;
                continue;
            }
            match compile_check::check(plan, precision, arch, &tools) {
                Ok(usage) => {
                    via_rocwmma |= compile_check::through_rocwmma(plan, arch);
                    let spill = usage.forbidden_spill();
                    let no_mma = usage.missing_matrix_ops();
                    let low_fma = usage.below_fma_floor();
                    let unfed = usage.main_loop_failures();
                    let pass = !spill && !no_mma && !low_fma && unfed.is_empty();
                    failures += usize::from(!pass);
                    if !args.json {
                        let verdict = if spill {
                            "  FAIL: spills".to_string()
                        } else if no_mma {
                            "  FAIL: no matrix instruction".to_string()
                        } else if low_fma {
                            "  FAIL: main loop below its FMA floor".to_string()
                        } else if !unfed.is_empty() {
                            format!("  FAIL: main loop: {}", unfed.join("; "))
                        } else {
                            String::new()
                        };
                        say!("{usage}{verdict}");
                    }
                    results.push(serde_json::json!({
                        "usage": usage, "pass": pass, "main_loop_failures": unfed,
                    }));
                }
                Err(err) => {
                    failures += 1;
                    if !args.json {
                        say!(
                            "{:<40} {:<8} {:<9} FAIL: {err}",
                            plan.to_string(),
                            arch.name,
                            compile_check::short_name(precision)
                        );
                    }
                    results.push(serde_json::json!({
                        "plan": plan, "precision": precision, "arch": arch.name,
                        "error": err.to_string(), "pass": false,
                    }));
                }
            }
        }
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&results).expect("results serialize")
        );
    } else {
        if args
            .archs
            .iter()
            .any(|a| a.vendor == compile_check::Vendor::Amd)
        {
            match compile_check::hip_headers() {
                Some(dir) => say!(
                    "AMD sources were also compiled against the HIP headers in {} (those \
                     including a header missing there, such as hip_bf16.h before ROCm 6, \
                     against tilemm's stand-ins only)",
                    dir.display()
                ),
                None => say!(
                    "no HIP headers found (ROCm, or Debian's libamdhip64-dev): AMD sources were \
                     compiled against tilemm's stand-in header only"
                ),
            }
        }
        if let Some(headers) = via_rocwmma.then(compile_check::rocwmma_headers).flatten() {
            say!(
                "CDNA's tensor-core rows are what a `--features hip,rocwmma` build JITs: \
                 CubeCL's rocWMMA dialect, compiled against the rocWMMA headers in {}",
                headers.rocwmma.display()
            );
        }
        say!(
            "{} compiled, {skipped} skipped, {failures} failed",
            results.len() - failures - skipped
        );
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}
