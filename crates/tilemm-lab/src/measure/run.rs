//! The example's experiment: the product on a GPU twice (the first run pays for JIT
//! compilation), on the CPU, and checked against a reference.

use std::time::{Duration, Instant};

use crate::inputs::{Operands, Source};
use crate::measure::kernel_clock;
use crate::measure::report::{
    CpuTimes, FirstRun, HostMemory, KernelReport, Report, SecondRun, Transfer,
};
use tilemm::device::{DeviceInfo, DeviceKind};
use tilemm::host::cpu;
use tilemm::host::{self, Bytes};
use tilemm::plan::panels::Schedule;
use tilemm::plan::Plan;
use tilemm::problem::Problem;
use tilemm::runtime::backend::{open_device, Backend, GpuSession};
use tilemm::tune::{self, KernelChoice, TuneOptions, TuneReport};
use tilemm::types::element::HostData;
use tilemm::verify::{Reference, ReferencePlan};
use tilemm::Result;

/// What `run` should use.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// A backend, or `None` for the best one found (a GPU if any, else the CPU alone).
    pub backend: Option<Backend>,
    /// A device index within the backend (`tilemm devices`), or `None` for its best device.
    pub device: Option<usize>,
    /// The kernel and its configuration, or `auto`.
    pub kernel: KernelChoice,
    /// How `auto` tunes.
    pub tune: TuneOptions,
}

/// A report and the product it describes.
pub struct Outcome {
    /// What happened.
    pub report: Report,
    /// C's buffer: from the second GPU run, or from the CPU when no GPU ran.
    pub c: HostData,
}

fn gflops(problem: &Problem, time: Duration) -> f64 {
    problem.flops() / time.as_secs_f64().max(1e-12) / 1e9
}

/// Host memory a run takes besides its reference, every copy counted: A and B; the copies
/// CubeCL 0.10 makes of them on upload (`create_from_slice` copies the data twice before the
/// runtime stages it); the C copies alive at once (the one kept, the CPU's, and a device
/// download's bytes next to the vector made from them); on a device whose memory is the
/// host's (a CPU adapter such as lavapipe, or an integrated GPU), the device's buffers and
/// their staging copies; and a margin for threads, the CPU crate's packing buffers and the
/// driver.
fn host_bytes_besides_reference(problem: &Problem, gpu: Option<&DeviceInfo>) -> Bytes {
    let [a, b, c] = problem.operand_bytes().map(|x| Bytes::exactly(x as u64));
    // C₀, when read, is kept for the reference; the CPU path widens half precisions to f32.
    let c0 = if problem.reads_c() { c } else { Bytes::ZERO };
    let widened = if problem.precision().input.size_bytes() < 4 {
        Bytes::of(problem.a_len(), 4)
            + Bytes::of(problem.b_len(), 4)
            + Bytes::of(problem.c_len(), 4)
    } else {
        Bytes::ZERO
    };
    let (a, b) = (a + c0 + widened, b);
    // Threads and the CPU crate's packing buffers; a GPU driver also compiles kernels on the
    // host (LLVM, for lavapipe).
    let margin = Bytes::exactly(96 << 20);
    let driver = Bytes::exactly(160 << 20);
    match gpu {
        None => a + b + c + margin,
        Some(info) => {
            let shares_host_memory =
                matches!(info.kind, DeviceKind::Cpu | DeviceKind::IntegratedGpu);
            let device = if shares_host_memory {
                (a + b + c).times(2)
            } else {
                Bytes::ZERO
            };
            let uploads = (a + b).times(2);
            a + b + uploads + c.times(3) + device + margin + driver
        }
    }
}

/// Refuses `problem` when this process cannot hold everything a run of it makes, and plans the
/// reference for `checks` results in what remains: whole if several are checked and half of
/// that holds it, else in blocks. Returns the reference's plan and the bytes the whole run may
/// add, reference included.
pub fn plan_host_memory(
    problem: &Problem,
    gpu: Option<&DeviceInfo>,
    checks: usize,
) -> Result<(ReferencePlan, u64)> {
    let headroom = host::headroom();
    let others = host_bytes_besides_reference(problem, gpu);
    // The smallest reference there is: a few blocks of a few kilobytes.
    host::ensure_headroom(others + Bytes::exactly(1 << 20), headroom.as_ref())?;
    let budget = headroom
        .as_ref()
        .zip(others.get())
        .map(|(h, others)| h.bytes.saturating_sub(others) / 2);
    // Fitted into half of what the rest leaves, so the run as a whole fits too.
    let reference = ReferencePlan::fit(problem, checks, budget)?;
    let planned = (others + Bytes::exactly(reference.bytes)).get();
    Ok((reference, planned.unwrap_or(u64::MAX)))
}

/// The experiment, prepared: device open, plan and memory checked, before any input exists.
pub struct Runner {
    problem: Problem,
    plan: Plan,
    gpu: Option<GpuSession>,
    schedule: Option<Schedule>,
    tuning: Option<TuneReport>,
    reference: ReferencePlan,
    memory: HostMemory,
    notes: Vec<String>,
}

impl Runner {
    /// Opens the device, picks the kernel (tuning for `auto`), and refuses what the device or
    /// the host cannot hold, so that a huge or impossible request fails here with a message
    /// instead of after allocating its inputs.
    pub fn new(problem: &Problem, options: &RunOptions) -> Result<Self> {
        let mut notes = Vec::new();
        let gpu = open_device(options.backend, options.device, &mut notes)?;
        // tf32 is a promise of tf32 matrix units: the CPU path would compute f32 and label it
        // tf32.
        if gpu.is_none() && problem.precision().input == tilemm::problem::DType::TF32 {
            return Err(tilemm::device::no_tf32("the CPU path"));
        }
        if let Some(gpu) = &gpu {
            // What the device refuses whatever the kernel (a type it lacks, a grid over its
            // limits), before the host's memory and before tuning.
            let first = match options.kernel {
                KernelChoice::Fixed(config) => Plan::new(config),
                KernelChoice::Auto => Plan::default_for(tilemm::Kernel::Naive),
            };
            gpu.schedule(problem, &first)?;
        }
        // The two GPU runs' results, or the CPU's alone; what the host cannot hold is refused
        // before anything, tuning included, allocates.
        let checks = if gpu.is_some() { 2 } else { 1 };
        let (reference, planned_bytes) =
            plan_host_memory(problem, gpu.as_ref().map(|g| g.info()), checks)?;
        let memory = HostMemory {
            planned_bytes,
            before_bytes: host::reset_peak()
                .then(host::resident)
                .flatten()
                .map(|(now, _)| now),
            peak_bytes: None,
        };
        let (plan, tuning) = match (&gpu, options.kernel) {
            (Some(gpu), KernelChoice::Auto) => {
                let report = tune::choose(gpu, problem, &options.tune)?;
                notes.extend(report.notes.iter().cloned());
                (report.chosen, Some(report))
            }
            (_, KernelChoice::Fixed(config)) => (Plan::new(config), None),
            // No GPU runs: the plan is never used.
            (None, KernelChoice::Auto) => (Plan::default_for(tilemm::Kernel::Tiled), None),
        };
        // Made once, here, and handed to compile, both runs and the report.
        let schedule = gpu
            .as_ref()
            .map(|gpu| gpu.schedule(problem, &plan))
            .transpose()?;
        Ok(Runner {
            problem: *problem,
            plan,
            gpu,
            schedule,
            tuning,
            reference,
            memory,
            notes,
        })
    }

    /// The GPU device the experiment runs on, if any.
    pub fn device(&self) -> Option<&GpuSession> {
        self.gpu.as_ref()
    }

    /// Runs the experiment on `operands` (the problem's A, B and C₀, from `inputs`).
    pub fn run(self, operands: &Operands, inputs: Source) -> Result<Outcome> {
        let Runner {
            problem,
            plan,
            gpu,
            schedule,
            tuning,
            reference,
            memory,
            notes,
        } = self;
        let problem = &problem;
        let Operands { a, b, c0 } = operands;
        let c0 = c0.as_ref();
        problem.check_operands(a.len(), b.len())?;

        let start = Instant::now();
        let mut reference = Reference::with_plan(problem, a, b, c0, reference)?;
        if inputs.random() {
            reference = reference.random_inputs();
        }
        let mut reference_time = start.elapsed();
        let mut check = |c: &HostData, passes: usize| {
            let start = Instant::now();
            let verification = reference.check_passes(c, passes);
            reference_time += start.elapsed();
            verification
        };

        // Each C is checked as soon as it exists and dropped unless it is the one reported, so
        // no more copies are alive than the memory estimate counts.
        let mut gpu_runs = None;
        if let (Some(gpu), Some(schedule)) = (&gpu, &schedule) {
            let passes = schedule.passes;
            let compile = gpu.compile_scheduled(schedule)?;
            let first = gpu.gemm_scheduled(schedule, a, b, c0)?;
            let first_pass = check(&first.c, passes)?.pass;
            drop(first.c);
            // Tuning is part of what the first call costs (nothing on a cache hit but the
            // read); its candidates' compiles are in it, so this compile is then the cache's.
            let tuned = tuning.as_ref().map_or(Duration::ZERO, |t| t.time);
            let total = tuned + compile + first.upload + first.launch + first.download;
            let first = FirstRun {
                tuning: tuned,
                compile,
                upload: first.upload,
                launch: first.launch,
                kernel: first.kernel,
                download: first.download,
                total,
                gflops: gflops(problem, total),
                pass: first_pass,
            };
            // The kernel's time on the device's own clock where there is one (CUDA with CUPTI,
            // as `bench` times it), from one more run of a whole schedule (panels put copies
            // between the kernels) under CUPTI's tracing, which slows launches and copies: the
            // second run, untraced, gives the other figures. Its C is dropped unread, so no
            // more copies are alive than one.
            let mut device_ms = None;
            if let Some(clock) =
                kernel_clock::for_session(gpu).filter(|_| schedule.panels.is_whole())
            {
                let mut traced = Ok(());
                let sample = clock.time(|| {
                    traced = gpu.gemm_scheduled(schedule, a, b, c0).map(drop);
                    Ok(())
                });
                traced?;
                device_ms = sample.ok().map(|s| s.ms);
            }
            let second = gpu.gemm_scheduled(schedule, a, b, c0)?;
            gpu_runs = Some((first, second, passes, device_ms));
        }

        // The CPU crate, timed on its second call so the thread pool's start-up is not counted;
        // the first call is a small product, so that it costs no memory of note.
        let warm = Problem::new(
            problem.m().min(64),
            problem.k().min(64),
            problem.n().min(64),
        )?;
        let warm_data = HostData::F32(vec![0.0; 64 * 64]);
        cpu::product(&warm, &warm_data, &warm_data, None)?;
        let start = Instant::now();
        let cpu_c = cpu::product(problem, a, b, c0)?;
        let cpu_time = start.elapsed();

        let (first_run, second_run, c, passes) = match gpu_runs {
            Some((first, second, passes, device_ms)) => {
                drop(cpu_c);
                let timestamps = gpu.as_ref().is_some_and(|g| g.has_device_timestamps());
                let (kernel, kernel_timing) = match device_ms {
                    Some(ms) => (Duration::from_secs_f64(ms / 1e3), kernel_clock::TIMING),
                    None if timestamps => (second.kernel, "device timestamps"),
                    None => (second.kernel, "host clock"),
                };
                let second_run = SecondRun {
                    kernel,
                    kernel_timing,
                    kernel_gflops: gflops(problem, kernel),
                    total: second.total(),
                    total_gflops: gflops(problem, second.total()),
                    upload: Transfer::new(problem.upload_bytes(), second.upload),
                    download: Transfer::new(problem.download_bytes(), second.download),
                };
                (Some(first), Some(second_run), second.c, passes)
            }
            None => (None, None, cpu_c, 1),
        };
        let verification = check(&c, passes)?;
        let pass = verification.pass && first_run.as_ref().is_none_or(|f| f.pass);
        let report = Report {
            problem: *problem,
            inputs,
            backend: gpu.as_ref().map_or(Backend::Cpu, |g| g.backend()),
            device: gpu.as_ref().map(|g| g.info().clone()),
            kernel: schedule.map(|s| KernelReport {
                plan,
                tuning,
                launch: s.launches,
                panels: (!s.panels.is_whole()).then_some(s.panels),
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
            host_memory: HostMemory {
                peak_bytes: host::resident().map(|(_, peak)| peak),
                ..memory
            },
            notes,
            pass,
        };
        Ok(Outcome { report, c })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilemm::device::test_device;

    fn device(kind: DeviceKind) -> DeviceInfo {
        test_device(0, kind)
    }

    #[test]
    fn sizes_whose_byte_counts_overflow_are_refused_not_wrapped() {
        // C alone is 2⁶³ − 2³² bytes: two copies of it overflow 64 bits.
        let p = Problem::new(2_147_483_647, 1, 1_073_741_824).unwrap();
        let err = plan_host_memory(&p, Some(&device(DeviceKind::DiscreteGpu)), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("host memory"), "{err}");
        let err = plan_host_memory(&p, None, 1).unwrap_err().to_string();
        assert!(err.contains("host memory"), "{err}");
    }
}
