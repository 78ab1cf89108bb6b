//! `tilemm bench`: kernels, peers, the vendor's BLAS and the CPU measured the same way.

use std::process::ExitCode;

use tilemm::runtime::backend::open_device;
use tilemm::tune::{TuneBudget, TuneOptions};
use tilemm::{DType, Plan, Precision, Shape};
use tilemm_lab::measure::bench::Measurement;
use tilemm_lab::measure::sweep::{size_name, Event, Sweep, SweepRequest};

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
    if let Some(stem) = &args.plot {
        plot::check_destination(stem).map_err(Failure::Plot)?;
        plot::prepare_font().map_err(Failure::Plot)?;
    }
    let mut device_notes = Vec::new();
    let (backend, device) = args.target.resolve()?;
    let gpu = open_device(backend, device, &mut device_notes)?;
    let sizes = if args.sizes.is_empty() {
        default_sizes(gpu.as_ref().map(|g| g.info().kind))
    } else {
        args.sizes.clone()
    };
    let precision = Precision::of(args.dtype);
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
    let sweep = Sweep::new(
        gpu.as_ref(),
        SweepRequest {
            problems,
            plans,
            named: !args.kernels.is_empty(),
            auto,
            // The progress bar says when auto is tuning.
            tune: TuneOptions {
                on_tuning: None,
                ..args.tune.options(Some(TuneBudget::Full))?
            },
            peers: args.peers,
            from_host: args.from_host,
            peak: args.peak,
            repeat: usize::from(args.repeat),
            cpu: !args.no_cpu,
        },
    )?;
    let notes: Vec<&String> = device_notes.iter().chain(sweep.notes()).collect();
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
            match sweep.peak() {
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
                "{:<16} {:<width$} {:<9} {:>11} {:>11} {:>11} {:>10} {:>7}  {:<18} check",
                "size",
                "implementation",
                "computes",
                "median ms",
                "min ms",
                "host ms",
                "GFLOPS",
                "% peak",
                "timing"
            );
        }
        Format::Csv => say!(
            "m,k,n,dtype,implementation,computed,median_ms,min_ms,host_median_ms,gflops,percent_of_peak,timing,verified"
        ),
        Format::Json => {}
    }
    // A bar on stderr, drawn only on a terminal (indicatif hides it otherwise).
    let bar = indicatif::ProgressBar::new(sweep.steps() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    let table = format == Format::Table;
    let mut report = sweep.run(|event| match event {
        Event::Start { problem, what } => {
            if !bar.message().is_empty() {
                bar.inc(1);
            }
            bar.set_message(format!("{} {what}", size_name(problem)));
            Ok(())
        }
        Event::Tuned { problem, report } if table => bar.suspend(|| {
            for note in &report.notes {
                say!("note: {note}");
            }
            say!("{:<16} {report}", size_name(problem));
            Ok(())
        }),
        Event::Note(note) if table => bar.suspend(|| say(format_args!("note: {note}"))),
        Event::Measured(m) => bar.suspend(|| print_row(format, m, args.dtype, width)),
        _ => Ok::<(), Failure>(()),
    })?;
    bar.finish_and_clear();
    if format == Format::Json {
        report.notes = device_notes.iter().chain(&report.notes).cloned().collect();
        say!(
            "{}",
            serde_json::to_string_pretty(&report).expect("the report serializes")
        );
    }
    if let Some(stem) = &args.plot {
        let title = match &gpu {
            Some(g) => format!("tilemm bench, {}, {}", g.info().name, args.dtype),
            None => format!("tilemm bench, CPU, {}", args.dtype),
        };
        let written = plot::write(stem, &title, &report.measurements).map_err(Failure::Plot)?;
        if format == Format::Table {
            say!(
                "plot: {} and {}",
                written[0].display(),
                written[1].display()
            );
        }
    }
    Ok(if report.verified() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

/// One measurement as a row of the table or the CSV (none in JSON, printed whole at the end).
fn print_row(format: Format, m: &Measurement, dtype: DType, width: usize) -> Result<(), Failure> {
    let check = if m.verified { "PASS" } else { "FAIL" };
    let percent = m.percent_of_peak;
    let p = &m.problem;
    match format {
        Format::Table => say(format_args!(
            "{:<16} {:<width$} {:<9} {:>11.4} {:>11.4} {:>11.4} {:>10.2} {:>7}  {:<18} {check}",
            size_name(p),
            m.implementation,
            m.computed.short_name(),
            m.median_ms,
            m.min_ms,
            m.host_median_ms,
            m.gflops,
            percent.map_or("—".into(), |p| format!("{p:.1}")),
            m.timing,
        )),
        Format::Csv => say(format_args!(
            "{},{},{},{},\"{}\",{},{},{},{},{},{},{},{}",
            p.m(),
            p.k(),
            p.n(),
            dtype,
            m.implementation.replace('"', "\"\""),
            m.computed.short_name(),
            m.median_ms,
            m.min_ms,
            m.host_median_ms,
            m.gflops,
            percent.map_or(String::new(), |p| p.to_string()),
            m.timing,
            m.verified
        )),
        Format::Json => Ok(()),
    }
}

/// How `bench` prints its measurements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
    Json,
}
