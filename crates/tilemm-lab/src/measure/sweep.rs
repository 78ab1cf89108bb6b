//! `tilemm bench` as a library: a [`Sweep`] of sizes × implementations (the rungs, auto's
//! choice, cubek-matmul's strategies, the vendor's BLAS and the CPU), each measured by the one
//! runner of [`crate::measure::bench`] and checked, into a typed [`BenchReport`] that prints as
//! a table, CSV or JSON.

use serde::Serialize;

use crate::inputs;
use crate::measure::bench::{self, Measurement, Workload};
use crate::measure::kernel_clock;
use crate::measure::peers::{self, CubekStrategy};
use crate::measure::run::plan_host_memory;
use crate::measure::vendor_blas::HostCopies;
use tilemm::device::peak::{self, Peak};
use tilemm::device::DeviceInfo;
use tilemm::one_line;
use tilemm::plan::check;
use tilemm::plan::Plan;
use tilemm::problem::{Precision, Problem};
use tilemm::runtime::backend::{Backend, GpuSession};
use tilemm::tune::{self, TuneOptions, TuneReport};
use tilemm::verify::ReferencePlan;
use tilemm::Result;

/// What to measure.
#[derive(Clone, Debug)]
pub struct SweepRequest {
    /// The products, all of one precision and layout.
    pub problems: Vec<Problem>,
    /// The rungs' plans.
    pub plans: Vec<Plan>,
    /// Whether the plans were named: then each runs as named or is refused. Otherwise a plan
    /// the device cannot run is measured in the first configuration of its rung it runs, or
    /// left out, with a note.
    pub named: bool,
    /// Whether auto's choice is measured too (tuned with `tune`).
    pub auto: bool,
    /// How auto tunes.
    pub tune: TuneOptions,
    /// Whether cubek-matmul's strategies are measured (the `peers` feature).
    pub peers: bool,
    /// Whether GPU rows are products from host memory, end to end
    /// ([`bench::gpu_from_host`]), rather than kernels on resident matrices.
    pub from_host: bool,
    /// The peak "% peak" divides by, in GFLOPS; `None`: the device's datasheet figure.
    pub peak: Option<f64>,
    /// Timed runs per implementation and size.
    pub repeat: usize,
    /// Whether the CPU path is measured beside a GPU's rows (it always is without a GPU):
    /// at 8192³ it takes seconds a run. Every row is checked against the reference either way.
    pub cpu: bool,
}

/// A sweep, checked and ready: what runs, and why anything was left out.
pub struct Sweep<'g> {
    gpu: Option<&'g GpuSession>,
    precision: Precision,
    problems: Vec<Problem>,
    references: Vec<ReferencePlan>,
    plans: Vec<Plan>,
    auto: bool,
    tune: TuneOptions,
    peers: Vec<CubekStrategy>,
    vendor: bool,
    from_host: bool,
    peak: Option<Peak>,
    repeat: usize,
    /// Whether the CPU path is measured.
    cpu: bool,
    notes: Vec<String>,
}

/// What a running sweep tells its caller, as it happens.
pub enum Event<'a> {
    /// About to measure `what` on `problem`.
    Start {
        /// The size.
        problem: &'a Problem,
        /// The implementation.
        what: &'a str,
    },
    /// Auto tuned (or read its choice) for `problem`.
    Tuned {
        /// The size.
        problem: &'a Problem,
        /// What the tuner did.
        report: &'a TuneReport,
    },
    /// Something the user should know (a peer or baseline that could not run).
    Note(&'a str),
    /// One implementation measured.
    Measured(&'a Measurement),
}

/// One size's tuning, in the report.
#[derive(Clone, Debug, Serialize)]
pub struct SizedTuning {
    /// Rows.
    pub m: usize,
    /// Depth.
    pub k: usize,
    /// Columns.
    pub n: usize,
    /// What the tuner did.
    pub tuning: TuneReport,
}

/// What `tilemm bench` found.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The GPU device, if one ran.
    pub device: Option<DeviceInfo>,
    /// Where it ran.
    pub backend: Backend,
    /// The precision's input type, as asked for.
    pub dtype: tilemm::problem::DType,
    /// What "% peak" divides by.
    pub peak: Option<Peak>,
    /// What the user should know.
    pub notes: Vec<String>,
    /// Auto's tuning per size.
    pub tuning: Vec<SizedTuning>,
    /// Every implementation on every size.
    pub measurements: Vec<Measurement>,
}

impl BenchReport {
    /// Whether every measured result passed its check.
    pub fn verified(&self) -> bool {
        self.measurements.iter().all(|m| m.verified)
    }
}

impl<'g> Sweep<'g> {
    /// Checks `request` on `gpu` (or the CPU alone) before anything is measured: the device's
    /// types, each plan (fitted or refused, [`check::fitted`]), every size against every plan
    /// and the host's memory; picks the peers, the vendor's BLAS and the peak.
    pub fn new(gpu: Option<&'g GpuSession>, request: SweepRequest) -> Result<Sweep<'g>> {
        let SweepRequest {
            problems,
            plans,
            named,
            auto,
            tune,
            peers,
            from_host,
            peak,
            repeat,
            cpu,
        } = request;
        let precision = problems.first().map_or(Precision::F32, |p| p.precision());
        let info = gpu.map(|g| g.info());
        let mut notes = Vec::new();
        // tf32 promises matrix units: refused, in one line, where there are none.
        match info {
            Some(info) => info.types.check(precision, &info.name)?,
            None if precision.input == tilemm::problem::DType::TF32 => {
                return Err(tilemm::device::no_tf32("the CPU path"))
            }
            None => {}
        }
        if peers && !peers::BUILT {
            return Err(tilemm::Error::NotBuilt {
                what: "the cubek-matmul peers (--peers)".into(),
                feature: "peers",
            });
        }
        if peers && from_host {
            notes.push(
                "--from-host: cubek-matmul's peers are measured on resident matrices only, so \
                 not here"
                    .into(),
            );
        }
        if !cpu && gpu.is_none() {
            notes.push("--no-cpu: no GPU device, so the CPU path is what is measured".into());
        }
        let cpu = cpu || gpu.is_none();
        let peers = if peers && gpu.is_some() && !from_host {
            CubekStrategy::ALL.to_vec()
        } else {
            if peers {
                notes.push("--peers: no GPU device, so no cubek-matmul peer is measured".into());
            }
            Vec::new()
        };
        // cuBLAS is measured in every precision, rocBLAS in f32 only (wgpu has no vendor BLAS).
        let vendor =
            gpu.is_some_and(|g| g.backend() == Backend::Cuda || precision == Precision::F32);
        let vendor = vendor && !(from_host && gpu.is_some_and(|g| g.backend() == Backend::Hip));
        if from_host && gpu.is_some_and(|g| g.backend() == Backend::Hip) {
            notes.push("--from-host: rocBLAS is measured on resident matrices only".into());
        } else if gpu.is_some_and(|g| g.backend() == Backend::Hip) && !vendor {
            notes.push(format!(
                "rocBLAS is measured in f32 only, so not in {}",
                precision.input
            ));
        }
        if let Some(note) = gpu.filter(|_| !from_host).and_then(kernel_clock::missing) {
            notes.push(note);
        }
        let peak = info.and_then(|info| {
            peak.and_then(peak::given)
                .or_else(|| peak::datasheet(&info.name, precision))
        });
        // Precision and layouts are the same for every size, and what a plan needs of the
        // device does not depend on the size: the first problem stands for them all.
        let mut plans = plans;
        if let (Some(info), Some(probe), false) = (info, problems.first(), named) {
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
        // Every impossible size is refused before anything is measured; every implementation
        // is checked against one reference per size.
        let registers = from_host && gpu.is_some_and(|g| g.backend() != Backend::Wgpu);
        let per_size = plans.len()
            + usize::from(auto)
            + peers.len()
            + usize::from(cpu)
            + usize::from(vendor) * if registers { 2 } else { 1 }
            + usize::from(registers && (auto || !plans.is_empty()));
        let mut references = Vec::new();
        for problem in &problems {
            if let Some(info) = info {
                for plan in &plans {
                    plan.check(problem, info)?;
                }
            }
            references.push(plan_host_memory(problem, info, per_size)?.0);
        }
        Ok(Sweep {
            gpu,
            precision,
            problems,
            references,
            plans,
            auto,
            tune,
            peers,
            vendor,
            from_host,
            peak,
            repeat,
            cpu,
            notes,
        })
    }

    /// Whether this sweep also measures registered host memory (from host, CUDA or HIP).
    fn registers(&self) -> bool {
        self.from_host && self.gpu.is_some_and(|g| g.backend() != Backend::Wgpu)
    }

    /// What the user should know before anything is measured.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What "% peak" divides by.
    pub fn peak(&self) -> Option<&Peak> {
        self.peak.as_ref()
    }

    /// How many implementations are measured, over all sizes.
    pub fn steps(&self) -> usize {
        let per_size = if self.gpu.is_some() {
            let registers = self.registers();
            self.plans.len()
                + usize::from(self.auto)
                + self.peers.len()
                + usize::from(self.cpu)
                + usize::from(self.vendor) * if registers { 2 } else { 1 }
                + usize::from(registers && (self.auto || !self.plans.is_empty()))
        } else {
            1
        };
        per_size * self.problems.len()
    }

    /// Measures everything, size by size, telling `on` as it goes; an error of `on` (its own
    /// type: a closed stdout, say) stops the sweep.
    pub fn run<E: From<crate::Error> + From<tilemm::Error>>(
        self,
        mut on: impl FnMut(Event<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<BenchReport, E> {
        let registers = self.registers();
        let Sweep {
            gpu,
            precision,
            problems,
            references,
            plans,
            auto,
            tune,
            peers,
            vendor,
            from_host,
            peak,
            repeat,
            cpu,
            mut notes,
        } = self;
        // One implementation measured as the sweep asks: its kernel on resident matrices, or
        // its products from host memory (pageable, or registered).
        let measure = |gpu: &GpuSession, work: &Workload, plan: &Plan, registered: bool| {
            if from_host {
                bench::gpu_from_host(gpu, work, plan, repeat, registered)
            } else {
                bench::gpu_kernel(gpu, work, plan, repeat)
            }
        };
        let mut measurements = Vec::new();
        let mut tunings = Vec::new();
        // Whether `new` said the kernel clock is missing.
        let mut clock_noted = from_host || gpu.is_some_and(|g| kernel_clock::missing(g).is_some());
        for (problem, reference) in problems.iter().zip(references) {
            let operands = inputs::random_operands(problem, 0)?;
            let work = Workload::new(problem, &operands, reference)?;
            let mut rows = Vec::new();
            if let Some(gpu) = gpu {
                if auto {
                    on(Event::Start {
                        problem,
                        what: "auto (tuning)",
                    })?;
                    let tuning = tune::choose(gpu, problem, &tune)?;
                    on(Event::Tuned {
                        problem,
                        report: &tuning,
                    })?;
                    let mut row = measure(gpu, &work, &tuning.chosen, false)?;
                    row.implementation = format!("auto → {}", row.implementation);
                    rows.push(row);
                    if registers {
                        let mut row = measure(gpu, &work, &tuning.chosen, true)?;
                        row.implementation = format!("auto → {}", row.implementation);
                        rows.push(row);
                    }
                    tunings.push(SizedTuning {
                        m: problem.m(),
                        k: problem.k(),
                        n: problem.n(),
                        tuning,
                    });
                }
                for (i, plan) in plans.iter().enumerate() {
                    on(Event::Start {
                        problem,
                        what: &plan.to_string(),
                    })?;
                    rows.push(measure(gpu, &work, plan, false)?);
                    // Without auto, the first plan stands for tilemm on registered memory.
                    if registers && !auto && i == 0 {
                        rows.push(measure(gpu, &work, plan, true)?);
                    }
                }
                for &strategy in &peers {
                    on(Event::Start {
                        problem,
                        what: &format!("cubek {strategy}"),
                    })?;
                    match peers::cubek(gpu, &work, strategy, repeat) {
                        Ok(row) => rows.push(row),
                        // A strategy the device cannot run (tensor cores on lavapipe) is a note.
                        Err(err) => {
                            let note = format!(
                                "cubek-matmul {strategy} skipped at {}: {}",
                                size_name(problem),
                                one_line(&err.to_string())
                            );
                            on(Event::Note(&note))?;
                            notes.push(note);
                        }
                    }
                }
                // The vendor library on the same device and matrices: the bar the ladder
                // climbs to.
                if vendor {
                    on(Event::Start {
                        problem,
                        what: "vendor BLAS",
                    })?;
                    let copies = match (from_host, registers) {
                        (false, _) => vec![HostCopies::Resident],
                        (true, false) => vec![HostCopies::Pageable],
                        (true, true) => vec![HostCopies::Pageable, HostCopies::Registered],
                    };
                    for copies in copies {
                        match vendor_baseline(gpu, &work, repeat, copies) {
                            Some(Ok(baseline)) => rows.push(baseline),
                            Some(Err(err)) => {
                                let note = format!(
                                    "vendor baseline skipped at {}: {}",
                                    size_name(problem),
                                    one_line(&err.to_string())
                                );
                                on(Event::Note(&note))?;
                                notes.push(note);
                            }
                            None => {}
                        }
                    }
                }
            }
            // Every GPU row against the GPU's peak; the CPU's is not known.
            for row in &mut rows {
                row.percent_of_peak = peak.as_ref().map(|p| p.percent(row.gflops));
            }
            if cpu {
                on(Event::Start {
                    problem,
                    what: "cpu",
                })?;
                rows.push(bench::cpu_gemm(&work, repeat)?);
            }
            // The kernel clock failing on a run (its rows then on the other clocks) is said once.
            if let Some(note) = gpu
                .filter(|_| !from_host && !clock_noted)
                .and_then(kernel_clock::missing)
            {
                on(Event::Note(&note))?;
                notes.push(note);
                clock_noted = true;
            }
            for row in &rows {
                on(Event::Measured(row))?;
            }
            measurements.extend(rows);
        }
        Ok(BenchReport {
            device: gpu.map(|g| g.info().clone()),
            backend: gpu.map_or(Backend::Cpu, |g| g.backend()),
            dtype: precision.input,
            peak,
            notes,
            tuning: tunings,
            measurements,
        })
    }
}

/// A size as `M×K×N`.
pub fn size_name(problem: &Problem) -> String {
    format!("{}×{}×{}", problem.m(), problem.k(), problem.n())
}

/// cuBLAS on a CUDA device, rocBLAS on a HIP device; `None` for wgpu, which has no vendor BLAS.
fn vendor_baseline(
    gpu: &GpuSession,
    work: &Workload,
    repeat: usize,
    copies: HostCopies,
) -> Option<crate::Result<Measurement>> {
    match gpu.backend() {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(crate::measure::vendor_blas::cublas_gemm(
            gpu.info().index,
            work,
            repeat,
            copies,
        )),
        #[cfg(feature = "hip")]
        Backend::Hip => Some(crate::measure::vendor_blas::rocblas_sgemm(
            gpu.info().index,
            work,
            repeat,
        )),
        _ => {
            let _ = (work, repeat, copies);
            None
        }
    }
}
