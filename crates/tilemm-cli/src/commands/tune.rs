//! `tilemm tune`: fill the tuning cache for a sweep of shape classes.

use std::process::ExitCode;

use tilemm::runtime::backend::open_device;
use tilemm::tune::{self, TuneBudget};
use tilemm::{Precision, Shape};

use crate::args::*;
use crate::{complain, CommandResult, Failure};

pub fn tune_command(args: TuneCommandArgs) -> CommandResult {
    let mut notes = Vec::new();
    let (backend, device) = args.target.resolve()?;
    let Some(gpu) = open_device(backend, device, &mut notes)? else {
        return Err(Failure::Usage(
            "tune needs a GPU device, and none was found or the CPU was named: the CPU path \
             has nothing to tune"
                .into(),
        ));
    };
    for note in &notes {
        complain(&format!("note: {note}"));
    }
    let options = args.tune.options(Some(TuneBudget::Full))?;
    let mut reports = Vec::new();
    for &Size(m, k, n) in &args.sizes {
        for &dtype in &args.dtype {
            let problem = Shape {
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                precision: Precision::of(dtype),
                ..Shape::new(m, k, n)
            }
            .problem()?;
            // A type the device lacks leaves its classes out; other sizes and types go on.
            let info = gpu.info();
            if let Err(e) = info.types.check(problem.precision(), &info.name) {
                complain(&format!("note: {m}×{k}×{n} {dtype} left out: {e}"));
                continue;
            }
            let report = match tune::choose(&gpu, &problem, &options) {
                Ok(report) => report,
                Err(e @ tilemm::Error::NoKernel(_)) => {
                    complain(&format!("note: {m}×{k}×{n} {dtype} left out: {e}"));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for note in &report.notes {
                complain(&format!("note: {note}"));
            }
            if !args.json {
                say!("{m}×{k}×{n} {dtype}: {report}");
            }
            reports.push(report);
        }
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialize")
        );
    }
    Ok(ExitCode::SUCCESS)
}
