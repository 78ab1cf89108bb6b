//! `tilemm bench`: kernels, peers, the vendor's BLAS and the CPU measured the same way.

use std::process::ExitCode;

use tilemm::io::inputs;
use tilemm::measure::bench;
use tilemm::measure::run::plan_host_memory;
use tilemm::plan::check;
use tilemm::runtime::backend::open_device;
use tilemm::tune::{self, TuneBudget, TuneOptions};
use tilemm::{one_line, Backend, DType, Plan, Precision, Problem, Shape};

use crate::args::*;
use crate::plot;
use crate::{say, CommandResult, Failure, EXIT_FAIL};

/// Sizes `bench` measures by default: 128 to 2048 on a CPU adapter (or the CPU alone), to
/// 8192 on GPUs.
fn default_sizes(kind: Option<tilemm::DeviceKind>) -> Vec<Size> {
    let top = match kind {
        Some(tilemm::DeviceKind::Cpu) | None => 2048,
        Some(_) => 8192,
    };
    std::iter::successors(Some(128), |n| Some(n * 2))
        .take_while(|&n| n <= top)
        .map(|n| Size(n, n, n))
        .collect()
}

pub fn bench_command(args: BenchArgs) -> CommandResult {
    let kernels = unnamed("--kernels", &args.kernels, &args.tpb)?;
    let (auto, plans) = bench_choices(&kernels, &args.tpb)?;
    // The progress bar says when auto is tuning.
    let tune_options = TuneOptions {
        on_tuning: None,
        ..args.tune.options(TuneBudget::Full)
    };
    if args.peers && !tilemm::measure::peers::BUILT {
        return Err(tilemm::Error::NotBuilt {
            what: "the cubek-matmul peers (--peers)".into(),
            feature: "peers",
        }
        .into());
    }
    if let Some(stem) = &args.plot {
        plot::check_destination(stem).map_err(Failure::Plot)?;
        plot::prepare_font().map_err(Failure::Plot)?;
    }
    let mut notes = Vec::new();
    let gpu = open_device(args.target.backend, args.target.device, &mut notes)?;
    let info = gpu.as_ref().map(|g| g.info());
    let sizes = if args.sizes.is_empty() {
        default_sizes(info.map(|i| i.kind))
    } else {
        args.sizes.clone()
    };
    let precision = Precision::of(args.dtype);
    // tf32 promises matrix units: refused, in one line, where there are none.
    match info {
        Some(info) => info.types.check(precision, &info.name)?,
        None if args.dtype == DType::TF32 => Err(tilemm::device::no_tf32("the CPU path"))?,
        None => {}
    }
    let problems = sizes
        .iter()
        .map(|&Size(m, k, n)| {
            Shape {
                precision,
                ..Shape::new(m, k, n)
            }
            .problem()
        })
        .collect::<tilemm::Result<Vec<_>>>()?;
    let peers = if args.peers && gpu.is_some() {
        tilemm::measure::peers::CubekStrategy::ALL.to_vec()
    } else {
        if args.peers {
            notes.push("--peers: no GPU device, so no cubek-matmul peer is measured".into());
        }
        Vec::new()
    };
    // cuBLAS is measured in every precision, rocBLAS in f32 only (wgpu has no vendor BLAS).
    let vendor = gpu
        .as_ref()
        .is_some_and(|g| g.backend() == Backend::Cuda || precision == Precision::F32);
    if gpu.as_ref().is_some_and(|g| g.backend() == Backend::Hip) && !vendor {
        notes.push(format!(
            "rocBLAS is measured in f32 only, so not in {}",
            args.dtype
        ));
    }
    // What "% peak" divides the GPU rows by: the figure given, else the datasheet's.
    let peak = gpu.as_ref().and_then(|g| {
        args.peak
            .and_then(tilemm::device::peak::given)
            .or_else(|| tilemm::device::peak::datasheet(&g.info().name, precision))
    });
    // Rungs measured by default whose default configuration the device cannot run (laid out
    // for planes of another width, more shared memory or threads than it has in this
    // precision) are measured in the first configuration it runs; those it cannot run at all
    // (matrix units it lacks, a precision they do not compute) are left out with a note. Named
    // ones are refused below.
    // Precision and layouts are the same for every size, and what a plan needs of the device
    // does not depend on the size: the first problem stands for them all.
    let mut plans = plans;
    if let (Some(info), Some(probe), true) = (info, problems.first(), args.kernels.is_empty()) {
        plans = plans
            .into_iter()
            .filter_map(|plan| {
                let Err(why) = check::runnable(&plan.config, probe, info) else {
                    return Some(plan);
                };
                match check::fitted(&plan, probe, info) {
                    Ok(other) => {
                        notes.push(format!("{other} is measured in place of {plan}: {why}"));
                        Some(other)
                    }
                    Err(_) => {
                        notes.push(format!("{plan} is not measured: {why}"));
                        None
                    }
                }
            })
            .collect();
    }
    // Refuse every impossible size before measuring anything.
    let mut references = Vec::new();
    for problem in &problems {
        if let Some(info) = info {
            for plan in &plans {
                plan.check(problem, info)?;
            }
        }
        // Every kernel, peer, the vendor library and the CPU are checked against one reference.
        references.push(
            plan_host_memory(
                problem,
                info,
                plans.len() + usize::from(auto) + peers.len() + 1 + usize::from(vendor),
            )?
            .0,
        );
    }
    // The implementation column fits any rung's name, as measured or as auto's choice.
    let width = tilemm::Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .map(|c| "auto → ".chars().count() + Plan::new(c).to_string().chars().count())
        .max()
        .unwrap_or(0)
        .max(40);
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        Format::Table
    };
    match format {
        Format::Table => {
            for note in &notes {
                say!("note: {note}");
            }
            match &gpu {
                Some(g) => say!(
                    "device: {} ({}, {} via {})",
                    g.info().name,
                    g.info().kind.name(),
                    g.info().api,
                    g.backend()
                ),
                None => say!("device: CPU only"),
            }
            match &peak {
                Some(p) => say!(
                    "peak: {:.0} GFLOPS in {} ({}); \"% peak\" is of the GPU's",
                    p.gflops,
                    args.dtype,
                    p.source
                ),
                None if gpu.is_some() => say!(
                    "peak: not known for this device in {} (give one with --peak)",
                    args.dtype
                ),
                None => {}
            }
            say!(
                "{:<16} {:<width$} {:<9} {:>11} {:>11} {:>10} {:>7}  {:<18} check",
                "size",
                "implementation",
                "computes",
                "median ms",
                "min ms",
                "GFLOPS",
                "% peak",
                "timing"
            );
        }
        Format::Csv => say!(
            "m,k,n,dtype,implementation,computed,median_ms,min_ms,gflops,percent_of_peak,timing,verified"
        ),
        Format::Json => {}
    }
    let repeat = usize::from(args.repeat);
    let per_size = if gpu.is_some() {
        plans.len() + usize::from(auto) + peers.len() + 1 + usize::from(vendor)
    } else {
        1
    };
    // A bar on stderr, drawn only on a terminal (indicatif hides it otherwise).
    let bar = indicatif::ProgressBar::new((per_size * problems.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    let mut all = Vec::new();
    let mut tunings = Vec::new();
    for (problem, reference) in problems.iter().zip(references) {
        let operands = inputs::random_operands(problem, 0)?;
        let work = bench::Workload::new(problem, &operands, reference)?;
        let mut rows = Vec::new();
        let step = |what: &str| {
            bar.set_message(format!("{} {what}", size_name(problem)));
        };
        if let Some(gpu) = &gpu {
            if auto {
                step("auto (tuning)");
                let tuning = tune::choose(gpu, problem, &tune_options)?;
                if format == Format::Table {
                    bar.suspend(|| -> Result<(), Failure> {
                        for note in &tuning.notes {
                            say!("note: {note}");
                        }
                        say!("{:<16} {tuning}", size_name(problem));
                        Ok(())
                    })?;
                }
                let mut row = bench::gpu_kernel(gpu, &work, &tuning.chosen, repeat)?;
                row.implementation = format!("auto → {}", row.implementation);
                rows.push(row);
                tunings.push(serde_json::json!({
                    "m": problem.m(), "k": problem.k(), "n": problem.n(), "tuning": tuning,
                }));
                bar.inc(1);
            }
            for plan in &plans {
                step(&plan.to_string());
                rows.push(bench::gpu_kernel(gpu, &work, plan, repeat)?);
                bar.inc(1);
            }
            for &strategy in &peers {
                step(&format!("cubek {strategy}"));
                match tilemm::measure::peers::cubek(gpu, &work, strategy, repeat) {
                    Ok(row) => rows.push(row),
                    // A strategy the device cannot run (tensor cores on lavapipe) is a note.
                    Err(err) => {
                        let note = format!(
                            "cubek-matmul {strategy} skipped at {}: {}",
                            size_name(problem),
                            one_line(&err.to_string())
                        );
                        if format == Format::Table {
                            bar.suspend(|| say(format_args!("note: {note}")))?;
                        }
                        notes.push(note);
                    }
                }
                bar.inc(1);
            }
            // The vendor library on the same device and matrices: the bar the ladder climbs to.
            step("vendor BLAS");
            match vendor
                .then(|| vendor_baseline(gpu, &work, repeat))
                .flatten()
            {
                Some(Ok(baseline)) => rows.push(baseline),
                Some(Err(err)) => {
                    let note = format!(
                        "vendor baseline skipped at {}: {}",
                        size_name(problem),
                        one_line(&err.to_string())
                    );
                    if format == Format::Table {
                        bar.suspend(|| say(format_args!("note: {note}")))?;
                    }
                    notes.push(note);
                }
                None => {}
            }
            bar.inc(usize::from(vendor) as u64);
        }
        // Every GPU row against the GPU's peak; the CPU's is not known.
        for row in &mut rows {
            row.percent_of_peak = peak.as_ref().map(|p| p.percent(row.gflops));
        }
        step("cpu");
        rows.push(bench::cpu_gemm(&work, repeat)?);
        bar.inc(1);
        for m in &rows {
            let check = if m.verified { "PASS" } else { "FAIL" };
            let percent = m.percent_of_peak;
            match format {
                Format::Table => bar.suspend(|| {
                    say(format_args!(
                        "{:<16} {:<width$} {:<9} {:>11.3} {:>11.3} {:>10.2} {:>7}  {:<18} {check}",
                        size_name(problem),
                        m.implementation,
                        m.computed.short_name(),
                        m.median_ms,
                        m.min_ms,
                        m.gflops,
                        percent.map_or("—".into(), |p| format!("{p:.1}")),
                        m.timing,
                    ))
                })?,
                Format::Csv => bar.suspend(|| {
                    say(format_args!(
                        "{},{},{},{},\"{}\",{},{},{},{},{},{},{}",
                        problem.m(),
                        problem.k(),
                        problem.n(),
                        args.dtype,
                        m.implementation.replace('"', "\"\""),
                        m.computed.short_name(),
                        m.median_ms,
                        m.min_ms,
                        m.gflops,
                        percent.map_or(String::new(), |p| p.to_string()),
                        m.timing,
                        m.verified
                    ))
                })?,
                Format::Json => {}
            }
        }
        all.extend(rows);
    }
    bar.finish_and_clear();
    if format == Format::Json {
        let object = serde_json::json!({
            "device": gpu.as_ref().map(|g| g.info()),
            "backend": gpu.as_ref().map_or(Backend::Cpu, |g| g.backend()),
            "dtype": args.dtype,
            "peak": peak,
            "notes": notes,
            "tuning": tunings,
            "measurements": all,
        });
        say!(
            "{}",
            serde_json::to_string_pretty(&object).expect("measurements serialize")
        );
    }
    if let Some(stem) = &args.plot {
        let title = match &gpu {
            Some(g) => format!("tilemm bench, {}, {}", g.info().name, args.dtype),
            None => format!("tilemm bench, CPU, {}", args.dtype),
        };
        let written = plot::write(stem, &title, &all).map_err(Failure::Plot)?;
        if format == Format::Table {
            say!(
                "plot: {} and {}",
                written[0].display(),
                written[1].display()
            );
        }
    }
    Ok(if all.iter().all(|m| m.verified) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

/// How `bench` prints its measurements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
    Json,
}

fn size_name(problem: &Problem) -> String {
    format!("{}×{}×{}", problem.m(), problem.k(), problem.n())
}

/// cuBLAS on a CUDA device, rocBLAS on a HIP device; `None` for wgpu, which has no vendor BLAS.
fn vendor_baseline(
    gpu: &tilemm::GpuSession,
    work: &bench::Workload,
    repeat: usize,
) -> Option<tilemm::Result<bench::Measurement>> {
    match gpu.backend() {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(tilemm::measure::vendor_blas::cublas_gemm(
            gpu.info().index,
            work,
            repeat,
        )),
        #[cfg(feature = "hip")]
        Backend::Hip => Some(tilemm::measure::vendor_blas::rocblas_sgemm(
            gpu.info().index,
            work,
            repeat,
        )),
        _ => {
            let _ = (work, repeat);
            None
        }
    }
}
