//! The one runnability check: whether a plan can run a problem on a device, answered with a
//! typed refusal. The auto tuner, `run`, `bench`, the compile check and the tests all ask it
//! here; what a rung needs stays in the rung's own file ([`crate::kernels::Rung`]'s
//! `computes`, `plane_width`, `supports` and `shape`).

use crate::device::DeviceInfo;
use crate::error::{Error, Result, Unavailable};
use crate::host::format_bytes;
use crate::kernels::Config;
use crate::plan::{device_bytes, Launches, Plan};
use crate::problem::{DType, MatrixDesc, Precision, Problem};

/// Whether `device` can run `config` on problems of `problem`'s precision and layouts,
/// whatever their sizes: the rung computes the precision, finds the instructions or matrix
/// units it is built on, is laid out for the device's plane width, and its block fits the
/// device's threads and shared memory.
pub fn runnable(
    config: &Config,
    problem: &Problem,
    device: &DeviceInfo,
) -> std::result::Result<(), Unavailable> {
    if !config.computes(problem.precision) {
        return Err(Unavailable::Precision(problem.precision));
    }
    // A CUDA-only rung names the instructions the device lacks before its width.
    let cuda_only = config.kernel().cuda_only();
    if cuda_only {
        config.rung_supports(problem, device)?;
    }
    if let Some(built) = config.plane_width().filter(|&p| p != device.plane_size) {
        return Err(Unavailable::PlaneWidth {
            built,
            device: device.plane_size,
        });
    }
    if !cuda_only {
        config.rung_supports(problem, device)?;
    }
    let limits = &device.limits;
    let shape = config.shape(problem);
    let within = |what: &'static str, needed: u64, limit: u64| {
        if needed > limit {
            Err(Unavailable::Limit {
                what,
                needed,
                limit,
            })
        } else {
            Ok(())
        }
    };
    within(
        "threads per block",
        shape.block.iter().map(|&b| u64::from(b)).product(),
        u64::from(limits.max_units_per_cube),
    )?;
    within(
        "threads along x of a block",
        u64::from(shape.block[0]),
        u64::from(limits.max_cube_dim[0]),
    )?;
    within(
        "threads along y of a block",
        u64::from(shape.block[1]),
        u64::from(limits.max_cube_dim[1]),
    )?;
    within(
        "bytes of shared memory",
        shape.shared_bytes as u64,
        limits.max_shared_bytes as u64,
    )
}

/// What runs in place of `plan` on `device` for problems like `problem`: the plan itself where
/// it is [`runnable`], else the first configuration of its rung that is; where none is, the
/// plan's own refusal.
pub fn fitted(
    plan: &Plan,
    problem: &Problem,
    device: &DeviceInfo,
) -> std::result::Result<Plan, Unavailable> {
    match runnable(&plan.config, problem, device) {
        Ok(()) => Ok(*plan),
        Err(why) => plan
            .kernel()
            .configs()
            .into_iter()
            .find(|c| runnable(c, problem, device).is_ok())
            .map(Plan::new)
            .ok_or(why),
    }
}

/// The whole check of `plan` on `problem` (canonical) and `device`: the device has the
/// element types, the plan is [`runnable`], the grid fits, and the operands fit the device's
/// memory, its bindings and 32-bit indexing. What cannot run is refused with a message instead
/// of failing (or silently misbehaving) on the device.
pub fn check(plan: &Plan, problem: &Problem, device: &DeviceInfo) -> Result<Launches> {
    let limits = &device.limits;
    let launches = plan.launches(problem, limits)?;
    let shape = launches.shape;
    let refuse = |what: String, needed: String, limit: String| Error::DeviceLimit {
        what,
        needed,
        limit,
        device: device.name.clone(),
    };
    // An emulation of matrix units multiplies tf32 in f32 arithmetic, which every device has.
    let types = if plan.config.emulates_matrix_units() && problem.precision.input == DType::TF32 {
        Precision::F32
    } else {
        problem.precision
    };
    device.types.check(types, &device.name)?;
    runnable(&plan.config, problem, device).map_err(|why| Error::KernelUnavailable {
        kernel: plan.config.to_string(),
        device: device.name.clone(),
        why,
    })?;
    for axis in 0..2 {
        if shape.grid[axis] > limits.max_cube_count[axis] {
            return Err(refuse(
                format!(
                    "problem {}×{}×{} with {}",
                    problem.m, problem.k, problem.n, plan.config
                ),
                format!(
                    "{} blocks along {}",
                    shape.grid[axis],
                    ["x (columns)", "y (rows)"][axis]
                ),
                format!("{}", limits.max_cube_count[axis]),
            ));
        }
    }
    let (m, k, n) = (problem.m, problem.k, problem.n);
    let bytes = device_bytes(problem, device);
    // Partials (split-K's, or a narrow C's over slabs of K): one M×N matrix of the
    // accumulator per slice and batch entry of a launch.
    let partials = launches
        .uses_partials(problem, !device.types.bf16)
        .then(|| {
            let entries = launches.partials_entries(problem);
            let len =
                crate::kernels::common::split::partials_len(problem, launches.k_splits, entries);
            (
                len,
                len.saturating_mul(problem.precision.accumulate.size_bytes()),
            )
        });
    if let Some(memory) = limits.memory_bytes {
        // The operands live on the device together; a runtime that runs out of memory
        // panics inside CubeCL instead of reporting it.
        let together = bytes
            .iter()
            .chain(partials.as_ref().map(|(_, b)| b))
            .try_fold(0u64, |sum, &b| sum.checked_add(b as u64));
        if together.is_none_or(|t| t > memory) {
            return Err(refuse(
                format!(
                    "A, B and C of problem {m}×{k}×{n} ({}) together",
                    problem.precision
                ),
                together.map_or_else(|| "more than 2⁶⁴ bytes".into(), format_bytes),
                format!("{} of device memory", format_bytes(memory)),
            ));
        }
    }
    // Every buffer a launch binds: A, B, C and split-K's partials.
    let matrix = |name: &str, desc: &MatrixDesc| {
        let batch = if problem.batch > 1 {
            format!("{} × ", problem.batch)
        } else {
            String::new()
        };
        format!("matrix {name} ({batch}{}×{})", desc.rows, desc.cols)
    };
    let spans = [problem.a_len(), problem.b_len(), problem.c_len()];
    let buffers = [("A", problem.a), ("B", problem.b), ("C", problem.c)]
        .into_iter()
        .zip(spans)
        .zip(bytes)
        .map(|(((name, desc), span), bytes)| (matrix(name, &desc), span, bytes))
        .chain(partials.map(|(len, bytes)| {
            let what = if launches.k_splits > 1 {
                format!("the partials of {} slices of K", launches.k_splits)
            } else {
                format!("the {} partial sums of C", problem.precision.accumulate)
            };
            (what, len, bytes)
        }));
    let limit = limits.max_binding_bytes.min(limits.max_buffer_bytes);
    for (what, span, bytes) in buffers {
        if bytes as u64 > limit {
            return Err(refuse(
                what,
                format_bytes(bytes as u64),
                format_bytes(limit),
            ));
        }
        // The kernels index with 32-bit integers.
        if span > u32::MAX as usize {
            return Err(refuse(
                what,
                format!("{span} elements"),
                format!("{} elements (32-bit indexing)", u32::MAX),
            ));
        }
    }
    Ok(launches)
}
