//! `tilemm run`: the example's experiment, from the library's `Runner`.

use std::io;
use std::process::ExitCode;

use tilemm::{DType, KernelChoice, Precision, Shape};
use tilemm_lab::inputs;
use tilemm_lab::inputs::Source;
use tilemm_lab::measure::complex::{run_complex, ComplexRunOptions, ComplexType};
use tilemm_lab::measure::run::{RunOptions, Runner};

use crate::args::*;
use crate::{complain, say, CommandResult, Failure, EXIT_FAIL};

pub fn run_command(args: RunArgs) -> CommandResult {
    let kernel = unnamed("--kernel", args.kernel.as_slice(), args.tpb.as_slice())?;
    let kernel = kernel_choice(kernel.into_iter().next(), args.tpb)?;
    let dtype = match args.dtype {
        Some(RunType::Complex(dtype)) => return run_complex_command(&args, dtype, kernel),
        Some(RunType::Real(dtype)) => Some(dtype),
        None => None,
    };
    // An unusable destination is refused before the run, not after it.
    let output = args
        .out
        .as_deref()
        .map(inputs::Output::create)
        .transpose()?;
    let (backend, device) = args.target.resolve()?;
    let options = RunOptions {
        backend,
        device,
        kernel,
        tune: args.tune.options(None)?,
    };
    // Device and memory are checked before any input exists: a huge request fails with a
    // message, not an out-of-memory abort, and a file's data is read only once it is known to
    // fit.
    let outcome = match (&args.a, &args.b) {
        (Some(a_path), Some(b_path)) => {
            let ops = inputs::FileOps {
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                dtype,
            };
            let (problem, files) = inputs::OperandFiles::open(
                a_path,
                b_path,
                args.c.as_deref(),
                (args.alpha, args.beta),
                ops,
            )?;
            for note in &files.notes {
                complain(&format!("note: {note}"));
            }
            // The report names C₀'s file only where it is read (β ≠ 0).
            let c_read = files.c.as_ref().map(|c| c.path().to_path_buf());
            let runner = Runner::new(&problem, &options)?;
            let (a, b, c0) = files.read()?;
            let c0 = match c0 {
                Some(c0) => Some(c0),
                None => inputs::random_initial_c(&problem, args.seed)?,
            };
            let files = Source::Files {
                a: a_path.clone(),
                b: b_path.clone(),
                c: c_read,
            };
            runner.run(&inputs::Operands { a, b, c0 }, files)?
        }
        _ => {
            let problem = Shape {
                m: args.m,
                k: args.k,
                n: args.n,
                batch: args.batch,
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                broadcast_a: false,
                broadcast_b: false,
                alpha: args.alpha,
                beta: args.beta,
                precision: Precision::of(dtype.unwrap_or(DType::F32)),
            }
            .problem()?;
            let runner = Runner::new(&problem, &options)?;
            let operands = inputs::random_operands(&problem, args.seed)?;
            runner.run(&operands, Source::Random { seed: args.seed })?
        }
    };
    let problem = outcome.report.problem;
    if let Some(output) = output {
        output.write(&outcome.c, &problem.c(), problem.batch())?;
    }
    let report = if args.json {
        serde_json::to_string_pretty(&outcome.report).expect("reports serialize")
    } else {
        outcome.report.to_string()
    };
    print_report(&report, outcome.report.pass)
}

/// `run --dtype c64|c128`: random inputs on the device twice and on the CPU route, each result
/// checked against a complex f64 reference (`tilemm_lab::measure::complex`).
fn run_complex_command(args: &RunArgs, dtype: ComplexType, kernel: KernelChoice) -> CommandResult {
    if args.a.is_some() || args.out.is_some() {
        return Err(Failure::Usage(format!(
            "--dtype {} takes random inputs: --a, --b, --c and --out read and write real \
             .npy files (float16, float32, float64)",
            dtype.name()
        )));
    }
    let (backend, device) = args.target.resolve()?;
    let options = ComplexRunOptions {
        dtype,
        m: args.m,
        k: args.k,
        n: args.n,
        batch: args.batch,
        trans_a: args.trans_a,
        trans_b: args.trans_b,
        conj: [false; 2],
        alpha: args.alpha.into(),
        beta: args.beta.into(),
        seed: args.seed,
        backend,
        device,
        kernel,
        budget: args.tune.options(None)?.budget,
    };
    let outcome = run_complex(&options)?;
    let report = if args.json {
        serde_json::to_string_pretty(&outcome).expect("reports serialize")
    } else {
        outcome.to_string()
    };
    print_report(&report, outcome.pass)
}

/// The report (text or JSON) on standard output, and the verdict's exit code.
fn print_report(report: &str, pass: bool) -> CommandResult {
    let verdict = if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    };
    let printed = say(format_args!("{report}"));
    match printed {
        // The verdict stands even if nobody reads the report.
        Err(Failure::Stdout(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(verdict),
        Err(e) => Err(e),
        Ok(()) => Ok(verdict),
    }
}
