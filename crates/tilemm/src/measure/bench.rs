//! One runner that measures every implementation the same way: a warm-up run (JIT compile,
//! thread-pool start), then repeated timed runs, a median, and a check of the result, so that
//! no figure is reported for a wrong answer.

use std::time::Instant;

use serde::Serialize;

use crate::error::Result;
use crate::host::cpu;
use crate::io::inputs::Operands;
use crate::plan::Plan;
use crate::problem::Problem;
use crate::runtime::backend::GpuSession;
use crate::runtime::gpu::DeviceMatrix;
use crate::verify::{Reference, ReferencePlan};

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
    /// [`crate::io::inputs::random_operands`]) and their reference, computed as `plan` says
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
    pub computed: crate::problem::Precision,
    /// How the times were taken: "device timestamps", "host clock".
    pub timing: &'static str,
    /// Each timed run, in milliseconds.
    pub samples_ms: Vec<f64>,
    /// Median of the samples.
    pub median_ms: f64,
    /// Fastest sample.
    pub min_ms: f64,
    /// GFLOPS at the median.
    pub gflops: f64,
    /// The GFLOPS as a percentage of the device's peak, where known (see [`crate::device::peak`]).
    pub percent_of_peak: Option<f64>,
    /// Whether the result met the verification bound.
    pub verified: bool,
}

pub(crate) fn measurement(
    implementation: String,
    problem: &Problem,
    timing: &'static str,
    samples_ms: Vec<f64>,
    verified: bool,
) -> Measurement {
    let mut sorted = samples_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median_ms = if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2]
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) / 2.0
    };
    Measurement {
        implementation,
        problem: *problem,
        computed: problem.precision,
        timing,
        min_ms: sorted[0],
        gflops: problem.flops() / (median_ms * 1e-3) / 1e9,
        percent_of_peak: None,
        median_ms,
        samples_ms,
        verified,
    }
}

/// Times `launch` (enqueueing C = α·A·B + β·C on its A, B and C and returning the roundings
/// of C it makes) on `work`'s matrices made resident: one warm-up launch, whose result is
/// downloaded and verified, then `repeat` launches timed on the device. The one way every GPU
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
    let passes = launch(&a, &b, &c)?;
    let result = gpu.download(&c)?;
    let verified = reference.check_passes(&result, passes)?.pass;
    drop(result);
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        // C keeps changing when β ≠ 0; the time does not depend on its values.
        let time = gpu.profile(|| launch(&a, &b, &c).map(|_| ()))?;
        samples.push(time.as_secs_f64() * 1e3);
    }
    let timing = if gpu.has_device_timestamps() {
        "device timestamps"
    } else {
        "host clock"
    };
    Ok(measurement(
        implementation,
        problem,
        timing,
        samples,
        verified,
    ))
}

/// Times the kernels of `plan` on resident matrices (uploaded once), `repeat` times after one
/// warm-up run whose result is downloaded and verified.
pub fn gpu_kernel(
    gpu: &GpuSession,
    work: &Workload,
    plan: &Plan,
    repeat: usize,
) -> Result<Measurement> {
    resident(gpu, work, plan.to_string(), repeat, |a, b, c| {
        gpu.enqueue(&work.problem, plan, a, b, c)
            .map(|launches| launches.k_slabs as usize)
    })
}

/// Times the CPU path `repeat` times after one warm-up run.
pub fn cpu_gemm(work: &Workload, repeat: usize) -> Result<Measurement> {
    let Workload {
        problem,
        operands: Operands { a, b, c0 },
        reference,
    } = work;
    let verified = reference
        .check(&cpu::product(problem, a, b, c0.as_ref())?)?
        .pass;
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let c = cpu::product(problem, a, b, c0.as_ref())?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
        drop(c);
    }
    let mut m = measurement(
        format!("cpu ({}, {} threads)", cpu::CPU_GEMM, cpu::threads()),
        problem,
        "host clock",
        samples,
        verified,
    );
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
        let ops = crate::io::inputs::random_operands(&p, 3).unwrap();
        let plan = ReferencePlan::fit(&p, 2, None).unwrap();
        let work = Workload::new(&p, &ops, plan).unwrap();
        let m = cpu_gemm(&work, 3).unwrap();
        assert_eq!(m.samples_ms.len(), 3);
        assert!(m.min_ms <= m.median_ms && m.median_ms > 0.0);
        assert!(m.verified);
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let p = Problem::new(1, 1, 1).unwrap();
        let m = measurement("x".into(), &p, "host clock", vec![4.0, 1.0, 3.0, 2.0], true);
        assert_eq!(m.median_ms, 2.5);
        assert_eq!(m.min_ms, 1.0);
    }
}
