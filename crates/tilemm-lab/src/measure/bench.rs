//! One runner that measures every implementation the same way: a warm-up run (JIT compile,
//! thread-pool start), then repeated timed runs, a median, and a check of the result, so that
//! no figure is reported for a wrong answer.

use std::time::Instant;

use serde::Serialize;

use crate::inputs::Operands;
use crate::measure::kernel_clock;
use crate::Result;
use tilemm::host::{self, cpu};
use tilemm::plan::Plan;
use tilemm::problem::Problem;
use tilemm::runtime::backend::GpuSession;
use tilemm::runtime::gpu::DeviceMatrix;
use tilemm::runtime::timing::Samples;
use tilemm::types::element::HostData;
use tilemm::verify::{Reference, ReferencePlan};

/// One problem's operands and reference, measured by every implementation in turn.
pub struct Workload<'a> {
    /// The product.
    pub problem: Problem,
    /// A, B and C's initial contents.
    pub operands: &'a Operands,
    /// What every result is checked against.
    pub reference: Reference<'a>,
}

impl<'a> Workload<'a> {
    /// The operands of `problem` (tilemm's random data, from
    /// [`crate::inputs::random_operands`]) and their reference, computed as `plan` says
    /// ([`crate::measure::run::plan_host_memory`] fits it to the host). Every result is held to the
    /// bound and to the precision limit of random inputs, so that no row computed in a lower
    /// precision than its label passes.
    pub fn new(problem: &Problem, operands: &'a Operands, plan: ReferencePlan) -> Result<Self> {
        let Operands { a, b, c0 } = operands;
        Ok(Workload {
            problem: *problem,
            operands,
            reference: Reference::with_plan(problem, a, b, c0.as_ref(), plan)?.random_inputs(),
        })
    }
}

/// The timings of one implementation on one problem.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// What ran, e.g. "tiled, TPB=16" or "cpu (gemm 0.19)".
    pub implementation: String,
    /// The product.
    pub problem: Problem,
    /// The precision it computed: the problem's, except the CPU path's f32 in a tf32 run.
    pub computed: tilemm::problem::Precision,
    /// How the times were taken: "device (CUPTI)", "device events", "device timestamps",
    /// "host clock".
    pub timing: &'static str,
    /// Each timed run, in milliseconds.
    pub samples_ms: Vec<f64>,
    /// Median of the samples.
    pub median_ms: f64,
    /// Fastest sample.
    pub min_ms: f64,
    /// The median of the same runs on the host clock, from the call to its wait's return:
    /// `median_ms` where that is the host clock already.
    pub host_median_ms: f64,
    /// GFLOPS at the median.
    pub gflops: f64,
    /// The GFLOPS as a percentage of the device's peak, where known (see [`tilemm::device::peak`]).
    pub percent_of_peak: Option<f64>,
    /// Whether the result met the verification bound.
    pub verified: bool,
}

/// One timed run: its time on the clock a row names, and on the host's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Milliseconds on the row's clock.
    pub ms: f64,
    /// Milliseconds on the host clock, from the call to its wait's return.
    pub host_ms: f64,
}

impl Sample {
    /// A run timed on the host clock alone.
    pub fn host(ms: f64) -> Sample {
        Sample { ms, host_ms: ms }
    }

    /// `run` (which waits for its work) timed on the host clock too: `run` returns its time on
    /// its own clock.
    pub fn around(run: impl FnOnce() -> Result<f64>) -> Result<Sample> {
        let start = Instant::now();
        let ms = run()?;
        Ok(Sample {
            ms,
            host_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// The one way an implementation is measured: `warm_up` runs it once (JIT compilation,
/// thread-pool start) and says whether its result met the bound; then `repeat` runs of `run`,
/// each returning its own time, taken as `timing` says, and on the host clock.
pub(crate) fn measured(
    implementation: String,
    problem: &Problem,
    timing: &'static str,
    repeat: usize,
    warm_up: impl FnOnce() -> Result<bool>,
    mut run: impl FnMut() -> Result<Sample>,
) -> Result<Measurement> {
    let verified = warm_up()?;
    let mut host = Samples::default();
    let samples = Samples::take(repeat.max(1), || {
        let sample = run()?;
        host.0.push(sample.host_ms);
        Ok::<_, crate::Error>(sample.ms)
    })?;
    let median_ms = samples.median();
    Ok(Measurement {
        implementation,
        problem: *problem,
        computed: problem.precision(),
        timing,
        min_ms: samples.min(),
        host_median_ms: host.median(),
        median_ms,
        gflops: problem.flops() / (median_ms * 1e-3) / 1e9,
        percent_of_peak: None,
        samples_ms: samples.0,
        verified,
    })
}

/// Measures `launch` (enqueueing C = α·A·B + β·C on its A, B and C and returning the roundings
/// of C it makes) on `work`'s matrices made resident: the warm-up launch's result is
/// downloaded and verified, the later launches timed on the device. How every GPU
/// implementation, rung or peer, is measured.
pub(crate) fn resident(
    gpu: &GpuSession,
    work: &Workload,
    implementation: String,
    repeat: usize,
    launch: impl Fn(&DeviceMatrix, &DeviceMatrix, &DeviceMatrix) -> Result<usize> + Sync,
) -> Result<Measurement> {
    let Workload {
        problem,
        operands,
        reference,
    } = work;
    let a = gpu.upload(&operands.a)?;
    let b = gpu.upload(&operands.b)?;
    let c = gpu.output(problem, operands.c0.as_ref())?;
    let warm_up = || {
        let passes = launch(&a, &b, &c)?;
        Ok(reference.check_passes(&gpu.download(&c)?, passes)?.pass)
    };
    // C keeps changing when β ≠ 0; the time does not depend on its values.
    let timed = || gpu.time_ms(|| launch(&a, &b, &c).map(|_| ()));
    if let Some(clock) = kernel_clock::for_session(gpu) {
        let run = || clock.time(|| timed().map(drop));
        match measured(
            implementation.clone(),
            problem,
            kernel_clock::TIMING,
            repeat,
            warm_up,
            run,
        ) {
            // The clock could not time this row (a note says why where CUPTI failed): the
            // session's own clock, which the row names.
            Err(crate::Error::Clock(_)) => {}
            measurement => return measurement,
        }
    }
    let run = || Sample::around(timed);
    measured(implementation, problem, gpu.timing(), repeat, warm_up, run)
}

/// Times the kernels of `plan` on resident matrices (uploaded once), `repeat` times after one
/// warm-up run whose result is downloaded and verified. The plan is scheduled and checked once.
pub fn gpu_kernel(
    gpu: &GpuSession,
    work: &Workload,
    plan: &Plan,
    repeat: usize,
) -> Result<Measurement> {
    let schedule = gpu.schedule(&work.problem, plan)?;
    resident(gpu, work, plan.to_string(), repeat, |a, b, c| {
        Ok(gpu.enqueue_scheduled(&schedule, a, b, c)?.k_slabs as usize)
    })
}

/// Times `plan`'s products from host memory, end to end, `repeat` times after one warm-up run
/// whose result is verified: each run uploads A and B (and C when β ≠ 0) from `work`'s host
/// buffers, computes and downloads C into a host array, as the front door does
/// (`GpuSession::gemm_lent`), on the host clock. With `registered`, the buffers are
/// registered with the device first ([`GpuSession::register`]).
pub fn gpu_from_host(
    gpu: &GpuSession,
    work: &Workload,
    plan: &Plan,
    repeat: usize,
    registered: bool,
) -> Result<Measurement> {
    let Workload {
        problem,
        operands: Operands { a, b, c0 },
        reference,
    } = work;
    let c = host::zeros_of(problem.precision().output, problem.c_len(), "C on the host")?;
    let _pinned = if registered {
        Some(gpu.register(&[a.as_bytes(), b.as_bytes(), c.as_bytes()])?)
    } else {
        None
    };
    let product = |c: &mut HostData| {
        gpu.gemm_lent(
            problem,
            plan,
            [a.lend(), b.lend()],
            c0.as_ref().map(HostData::lend),
            &mut |done| {
                tilemm::with_data!(&mut *c, v => {
                    let done = tilemm::types::element::Element::lent(done)
                        .expect("C comes back in its own type");
                    v.copy_from_slice(done);
                });
                Ok(())
            },
        )
        .map(|_| ())
    };
    let name = format!(
        "{plan}, from host ({})",
        if registered { "registered" } else { "pageable" }
    );
    let cell = std::cell::RefCell::new(c);
    measured(
        name,
        problem,
        "host clock",
        repeat,
        || {
            product(&mut cell.borrow_mut())?;
            Ok(reference.check(&cell.borrow())?.pass)
        },
        || {
            let start = Instant::now();
            product(&mut cell.borrow_mut())?;
            Ok(Sample::host(start.elapsed().as_secs_f64() * 1e3))
        },
    )
}

/// Times the CPU path `repeat` times after one warm-up run.
pub fn cpu_gemm(work: &Workload, repeat: usize) -> Result<Measurement> {
    let Workload {
        problem,
        operands: Operands { a, b, c0 },
        reference,
    } = work;
    let product = || cpu::product(problem, a, b, c0.as_ref());
    let run = || {
        let start = Instant::now();
        drop(product()?);
        Ok(Sample::host(start.elapsed().as_secs_f64() * 1e3))
    };
    let mut m = measured(
        format!("cpu ({}, {} threads)", cpu::CPU_GEMM, cpu::threads()),
        problem,
        "host clock",
        repeat,
        || Ok(reference.check(&product()?)?.pass),
        run,
    )?;
    // tf32 inputs are multiplied in f32 here.
    m.computed.input = m.computed.input.storage();
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_measurement_has_a_median_and_is_verified() {
        let p = Problem::new(64, 48, 32).unwrap();
        let ops = crate::inputs::random_operands(&p, 3).unwrap();
        let plan = ReferencePlan::fit(&p, 2, None).unwrap();
        let work = Workload::new(&p, &ops, plan).unwrap();
        let m = cpu_gemm(&work, 3).unwrap();
        assert_eq!(m.samples_ms.len(), 3);
        assert!(m.min_ms <= m.median_ms && m.median_ms > 0.0);
        assert_eq!(
            m.host_median_ms, m.median_ms,
            "the CPU is timed on the host clock alone"
        );
        assert!(m.verified);
    }
}
