//! The example's experiment: the product on a GPU twice (the first run pays for JIT
//! compilation), on the CPU, and checked against a reference.

use std::time::{Duration, Instant};

use crate::backend::{open_device, Backend, GpuSession};
use crate::cpu;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::problem::Problem;
use crate::report::{CpuTimes, FirstRun, KernelReport, Report, SecondRun};
use crate::verify::{self, Reference, ReferenceKind};

/// What `run` should use.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// A backend, or `None` for the best one found (a GPU if any, else the CPU alone).
    pub backend: Option<Backend>,
    /// A device index within the backend (`tilemm devices`), or `None` for its best device.
    pub device: Option<usize>,
    /// The kernel and its configuration.
    pub plan: Plan,
}

/// A report and the product it describes.
pub struct Outcome {
    /// What happened.
    pub report: Report,
    /// C, row-major: from the second GPU run, or from the CPU when no GPU ran.
    pub c: Vec<f32>,
}

fn gflops(problem: &Problem, time: Duration) -> f64 {
    problem.flops() / time.as_secs_f64().max(1e-12) / 1e9
}

/// Checks that the host can hold `problem`'s A and B, C from `gpu_runs` GPU runs and one CPU
/// run, and a reference; returns the reference kind that fits.
pub fn check_host_memory(problem: &Problem, gpu_runs: u64) -> Result<ReferenceKind> {
    let available = cpu::available_memory();
    let reference_kind = verify::reference_kind_for(problem, available);
    let [a_bytes, b_bytes, c_bytes] = problem.operand_bytes().map(|b| b as u64);
    let reference_bytes = match reference_kind {
        ReferenceKind::F64 => verify::f64_reference_bytes(problem),
        ReferenceKind::F32 => verify::f32_reference_bytes(problem),
    };
    let needed = a_bytes + b_bytes + (gpu_runs + 1) * c_bytes + reference_bytes;
    match available {
        Some(available) if needed > available => Err(Error::HostMemory {
            needed_gib: needed as f64 / f64::from(1 << 30),
            available_gib: available as f64 / f64::from(1 << 30),
        }),
        _ => Ok(reference_kind),
    }
}

/// The experiment, prepared: device open, plan and memory checked, before any input exists.
pub struct Runner {
    problem: Problem,
    plan: Plan,
    gpu: Option<GpuSession>,
    reference_kind: ReferenceKind,
    notes: Vec<String>,
}

impl Runner {
    /// Opens the device and refuses what it or the host cannot hold, so that a huge or
    /// impossible request fails here with a message instead of after allocating its inputs.
    pub fn new(problem: &Problem, options: &RunOptions) -> Result<Self> {
        let mut notes = Vec::new();
        let gpu = open_device(options.backend, options.device, &mut notes)?;
        if let Some(gpu) = &gpu {
            options
                .plan
                .check(problem, &gpu.info().limits, &gpu.info().name)?;
        }
        let reference_kind = check_host_memory(problem, if gpu.is_some() { 2 } else { 0 })?;
        Ok(Runner {
            problem: *problem,
            plan: options.plan,
            gpu,
            reference_kind,
            notes,
        })
    }

    /// The GPU device the experiment runs on, if any.
    pub fn device(&self) -> Option<&GpuSession> {
        self.gpu.as_ref()
    }

    /// Runs the experiment on `a` and `b` (row-major f32 operands of the problem).
    pub fn run(self, a: &[f32], b: &[f32]) -> Result<Outcome> {
        let Runner {
            problem,
            plan,
            gpu,
            reference_kind,
            notes,
        } = self;
        let problem = &problem;
        problem.check_operands(a, b)?;
        let mut runs = None;
        if let Some(gpu) = &gpu {
            let first = gpu.matmul(problem, &plan, a, b)?;
            let second = gpu.matmul(problem, &plan, a, b)?;
            runs = Some((first, second));
        }

        // The CPU crate, timed on its second call so the thread pool's start-up is not counted.
        cpu::matmul(problem, a, b)?;
        let start = Instant::now();
        let cpu_c = cpu::matmul(problem, a, b)?;
        let cpu_time = start.elapsed();

        let start = Instant::now();
        let reference = Reference::compute(problem, a, b, reference_kind)?;
        let reference_time = start.elapsed();

        let (report_parts, c) = match runs {
            Some((first, second)) => {
                let first_check = reference.check(&first.c);
                let verification = reference.check(&second.c);
                let timestamps = gpu.as_ref().is_some_and(|g| g.has_device_timestamps());
                let parts = (
                    Some(FirstRun {
                        upload: first.upload,
                        launch: first.launch,
                        kernel: first.kernel,
                        compile_estimate: first.launch.saturating_sub(second.launch),
                        download: first.download,
                        total: first.total(),
                        gflops: gflops(problem, first.total()),
                        pass: first_check.pass,
                    }),
                    Some(SecondRun {
                        kernel: second.kernel,
                        kernel_timing: if timestamps {
                            "device timestamps"
                        } else {
                            "host clock"
                        },
                        kernel_gflops: gflops(problem, second.kernel),
                        total: second.total(),
                        total_gflops: gflops(problem, second.total()),
                    }),
                    verification,
                );
                (parts, second.c)
            }
            None => ((None, None, reference.check(&cpu_c)), cpu_c),
        };
        let (first_run, second_run, verification) = report_parts;
        let pass = verification.pass && first_run.as_ref().is_none_or(|f| f.pass);
        let report = Report {
            problem: *problem,
            backend: gpu.as_ref().map_or(Backend::Cpu, |g| g.backend()),
            device: gpu.as_ref().map(|g| g.info().clone()),
            kernel: gpu.as_ref().map(|_| KernelReport {
                plan,
                launch: plan
                    .launch_shape(problem)
                    .expect("checked against the device"),
            }),
            first_run,
            second_run,
            cpu: CpuTimes {
                implementation: cpu::CPU_GEMM,
                threads: cpu::threads(),
                time: cpu_time,
                gflops: gflops(problem, cpu_time),
            },
            reference_time,
            verification,
            notes,
            pass,
        };
        Ok(Outcome { report, c })
    }
}
