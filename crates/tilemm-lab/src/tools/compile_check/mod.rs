//! Compiling every kernel for NVIDIA and AMD targets without a GPU, and reading the resources
//! the compiled code uses: registers, spills, shared memory, and the occupancy they allow.
//!
//! NVIDIA: the generated CUDA source through NVRTC (loaded at run time, e.g. from the PyPI wheel
//! `nvidia-cuda-nvrtc-cu12`) with `-Xptxas=-v`, which reports what ptxas allocated. AMD: the
//! generated HIP source through a plain clang (Debian `clang-15`, no ROCm), whose
//! `-Rpass-analysis=kernel-resource-usage` remarks report SGPRs, VGPRs, scratch and spills; a
//! small header stands in for `<hip/hip_runtime.h>`, mapping indices and barriers to the AMDGPU
//! builtins HIP itself uses. Where ROCm's real HIP headers are installed (ROCm, or Debian's
//! `libamdhip64-dev`), each HIP source is also compiled against them, syntax and types only.
//!
//! Shared memory is sized at launch (CubeCL declares one dynamic `extern __shared__` array), so
//! compilers report only static shared memory; the plan's own figure is added for occupancy.

mod amd;
mod arch;
pub mod criteria;
pub mod loops;
#[cfg(feature = "cuda")]
mod nvidia;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, PoisonError, RwLock};

use serde::Serialize;

pub use amd::{hip_headers, rocwmma_headers, through_rocwmma, RocWmmaHeaders};
pub use arch::{Arch, Vendor, DEFAULT_ARCHS, KNOWN};

use crate::tools::emit;
use crate::{Error, Result};
use tilemm::kernels::Compiler;
use tilemm::plan::Plan;
use tilemm::problem::Precision;

/// What one compilation used, per kernel and target.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceUsage {
    /// The kernel and its configuration.
    pub plan: Plan,
    /// The element types it was compiled for.
    pub precision: Precision,
    /// The target architecture, e.g. `sm_90` or `gfx90a`.
    pub arch: String,
    /// Registers per thread (NVIDIA) or vector registers per lane (AMD VGPRs).
    pub registers: u32,
    /// Scalar registers per wave (AMD SGPRs).
    pub scalar_registers: Option<u32>,
    /// Bytes spilled to local memory per thread (stores + loads on NVIDIA; VGPR and SGPR spill
    /// count and scratch on AMD).
    pub spills: u64,
    /// Static shared memory the compiler reports, in bytes.
    pub static_shared_bytes: u64,
    /// Dynamic shared memory the plan asks for at launch, in bytes.
    pub dynamic_shared_bytes: u64,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Resident warps (waves) per SM (SIMD) and the hardware maximum.
    pub occupancy: (u32, u32),
    /// What limits the occupancy: registers, shared memory, threads or blocks.
    pub occupancy_limit: &'static str,
    /// The main loop's instruction mix, from the machine code (`None` where the disassembler
    /// is missing, or the code has no loop with an FMA).
    pub main_loop: Option<loops::LoopMix>,
    /// Matrix-unit instructions in the whole kernel (HMMA; MFMA, WMMA), where the machine code
    /// could be read.
    pub matrix_ops: Option<u32>,
    /// How long the compiler took (NVRTC's compilation to a cubin; clang's to assembly), in
    /// seconds on this machine: a first call compiles one kernel, and must not wait long
    /// ([`tilemm::kernels::QUICK_COMPILE_SECONDS`]).
    pub compile_seconds: f64,
}

impl ResourceUsage {
    /// Whether a spill breaks the plan's promise not to spill.
    pub fn forbidden_spill(&self) -> bool {
        let compiler = if self.arch.starts_with("gfx") {
            Compiler::Amd
        } else {
            Compiler::Nvidia
        };
        let allowed = self.plan.config.may_spill(self.precision, compiler);
        self.spills > 0 && !allowed
    }

    /// Whether the main loop's FMA share falls short of the floor the plan is built for, on
    /// NVIDIA (where it is read from SASS).
    ///
    /// A plan with a floor whose main loop could not be read (no nvdisasm) fails too: the
    /// floor is then unchecked, not met.
    pub fn below_fma_floor(&self) -> bool {
        let floor = criteria::loop_fma_floor(&self.plan.config, self.precision);
        match (floor, self.main_loop) {
            (Some(floor), Some(mix)) if self.arch.starts_with("sm_") => mix.percent() < floor,
            (Some(_), None) if self.arch.starts_with("sm_") => true,
            _ => false,
        }
    }

    /// Whether a kernel built on matrix units compiled to code without a matrix instruction
    /// (a silent fallback to ordinary arithmetic).
    ///
    /// Machine code that could not be read (no nvdisasm, no assembly) counts as missing: the
    /// presence is then unchecked, not shown.
    pub fn missing_matrix_ops(&self) -> bool {
        self.plan.kernel().matrix_units() && self.matrix_ops.unwrap_or(0) == 0
    }

    /// The criteria of its plan's main loop ([`criteria::matrix_loop_criteria`],
    /// [`criteria::min_fma_per_shared_load`] on NVIDIA,
    /// [`criteria::amd_matrix_loop_criteria`] on AMD) that the machine code misses,
    /// each as a short phrase; none for a plan without criteria. A main loop that could not be
    /// read misses them all.
    pub fn main_loop_failures(&self) -> Vec<String> {
        if !self.arch.starts_with("sm_") {
            return self.amd_matrix_loop_failures();
        }
        let mut failures = self.shared_load_failures();
        failures.extend(self.matrix_loop_failures());
        failures
    }

    /// [`ResourceUsage::main_loop_failures`] of a matrix-unit loop in AMD assembly
    /// ([`criteria::amd_matrix_loop_criteria`]).
    fn amd_matrix_loop_failures(&self) -> Vec<String> {
        let Some(criteria) = criteria::amd_matrix_loop_criteria(&self.plan.config) else {
            return Vec::new();
        };
        let Some(mix) = self.main_loop.filter(|m| m.matrix > 0) else {
            return vec!["no main loop with matrix instructions could be read".to_string()];
        };
        let mut failures = Vec::new();
        // (A little slack for rounding: the criteria are ratios of small counts.)
        let short = |ratio: Option<f64>, least: f64| ratio.is_none_or(|r| r + 1e-9 < least);
        if short(
            mix.matrix_per_fragment_load(),
            criteria.min_matrix_per_shared_load,
        ) {
            failures.push(format!(
                "{} matrix instructions per LDS read (< {:.2})",
                mix.matrix_per_fragment_load()
                    .map_or("no LDS reads, so no".into(), |r| format!("{r:.2}")),
                criteria.min_matrix_per_shared_load
            ));
        }
        if let Some(least) = criteria.min_matrix_per_global_load {
            if short(mix.matrix_per_global_load(), least) {
                failures.push(format!(
                    "{} matrix instructions per global load (< {least:.2})",
                    mix.matrix_per_global_load()
                        .map_or("no global loads, so no".into(), |r| format!("{r:.2}")),
                ));
            }
        }
        if mix.wide_global_loads < mix.global_loads {
            failures.push(format!(
                "{} of {} global loads 128-bit",
                mix.wide_global_loads, mix.global_loads
            ));
        }
        failures
    }

    /// [`ResourceUsage::main_loop_failures`] of an FMA loop: its shared loads, and its schedule
    /// ([`criteria::fma_loop_max_idle_run`]).
    fn shared_load_failures(&self) -> Vec<String> {
        let Some(least) = criteria::min_fma_per_shared_load(&self.plan.config, self.precision)
        else {
            return Vec::new();
        };
        let Some(mix) = self.main_loop.filter(|m| m.fma > 0) else {
            return vec!["no main loop with FMAs could be read".to_string()];
        };
        let mut failures = Vec::new();
        if mix.wide_shared_loads < mix.shared_loads {
            failures.push(format!(
                "{} of {} shared loads 128-bit",
                mix.wide_shared_loads, mix.shared_loads
            ));
        }
        match mix.fma_per_shared_load() {
            Some(r) if r >= least => {}
            r => failures.push(format!(
                "{} FMAs per shared load (< {least})",
                r.map_or("no shared loads, so no".into(), |r| format!("{r:.1}")),
            )),
        }
        let schedule = criteria::fma_loop_max_idle_run(&self.plan.config, self.precision)
            .filter(|_| criteria::SCHEDULE_ARCHS.contains(&self.arch.as_str()));
        if let Some(most) = schedule {
            if mix.longest_idle_run > most {
                failures.push(format!(
                    "{} instructions in a row without an FMA (> {most})",
                    mix.longest_idle_run
                ));
            }
            if mix.barriers == 0 {
                failures.push("no barrier in the main loop, where the FMAs cover it".to_string());
            }
        }
        failures
    }

    /// [`ResourceUsage::main_loop_failures`] of a matrix-unit loop.
    fn matrix_loop_failures(&self) -> Vec<String> {
        let Some(criteria) = criteria::matrix_loop_criteria(&self.plan.config, self.precision)
        else {
            return Vec::new();
        };
        let Some(mix) = self.main_loop.filter(|m| m.matrix > 0) else {
            return vec!["no main loop with matrix instructions could be read".to_string()];
        };
        let mut failures = Vec::new();
        if mix.matrix_percent() < criteria.min_matrix_percent {
            failures.push(format!(
                "matrix instructions {:.0}% of the main loop (< {:.0}%)",
                mix.matrix_percent(),
                criteria.min_matrix_percent
            ));
        }
        match mix.matrix_per_fragment_load() {
            Some(r) if r >= criteria.min_matrix_per_fragment_load => {}
            r => failures.push(format!(
                "{} matrix instructions per ldmatrix (< {:.1})",
                r.map_or("no ldmatrix, so no".into(), |r| format!("{r:.1}")),
                criteria.min_matrix_per_fragment_load
            )),
        }
        let words_allowed = criteria
            .min_matrix_per_word_load
            .is_some_and(|r| f64::from(mix.matrix) >= r * f64::from(mix.scalar_shared_loads));
        if mix.narrow_accesses > 0 || (mix.scalar_shared_loads > 0 && !words_allowed) {
            failures.push(format!(
                "element-wise staging ({} 16-bit global loads or shared stores, {} scalar shared \
                 loads)",
                mix.narrow_accesses, mix.scalar_shared_loads
            ));
        }
        if mix.wide_global_loads < mix.global_loads || mix.global_loads == 0 {
            failures.push(format!(
                "{} of {} global loads 128-bit",
                mix.wide_global_loads, mix.global_loads
            ));
        }
        match mix.barriers_per_tile() {
            Some(b) if b <= criteria.max_barriers_per_tile => {}
            b => failures.push(format!(
                "{} barriers per K tile (> {})",
                b.map_or("no copy stages, so unknown".into(), |b| format!("{b:.1}")),
                criteria.max_barriers_per_tile
            )),
        }
        match mix.stages_in_flight() {
            Some(s) if s >= criteria.min_stages_in_flight => {}
            s => failures.push(format!(
                "{} K tiles in flight (< {})",
                s.unwrap_or(0),
                criteria.min_stages_in_flight
            )),
        }
        if criteria::SCHEDULE_ARCHS.contains(&self.arch.as_str()) {
            if mix.longest_idle_run > criteria.max_idle_run {
                failures.push(format!(
                    "{} instructions in a row without a matrix instruction (> {})",
                    mix.longest_idle_run, criteria.max_idle_run
                ));
            }
            if mix.fragment_load_at_barrier && !criteria.fragment_load_at_barrier {
                failures.push("ldmatrix in the run that holds the barrier".to_string());
            }
        }
        failures
    }
}

/// Why `plan` in `precision` is not compiled for `arch`, if it is not: what
/// [`tilemm::plan::check::runnable`] refuses on the architecture ([`Arch::device`]: a
/// precision the rung does not compute, a layout for another plane width, matrix units or
/// instructions the architecture lacks), a CUDA-only rung on AMD, or a compiler or headers that
/// cannot take the matrix-unit code here.
pub fn not_applicable(plan: &Plan, precision: Precision, arch: &Arch) -> Option<String> {
    if plan.kernel().cuda_only() && arch.vendor == Vendor::Amd {
        return Some(format!(
            "the {} rung is CUDA's (mma.sync, ldmatrix, cp.async)",
            plan.kernel()
        ));
    }
    let probe = probe(precision);
    if let Err(why) = tilemm::plan::check::runnable(&plan.config, &probe, &arch.device()) {
        return Some(why.to_string());
    }
    if plan.kernel().matrix_units() && arch.vendor == Vendor::Amd {
        let bf16 = precision.input == tilemm::types::DType::BF16;
        if amd::through_rocwmma(plan, arch) && amd::rocwmma_headers().is_none() {
            return Some(
                "CubeCL 0.10 reaches CDNA's matrix cores only through rocWMMA, whose headers \
                 (and ROCm's HIP headers) are not found: tilemm's source tree has rocWMMA 0.7 in \
                 third_party/rocwmma, Debian's HIP headers are in libamdhip64-dev"
                    .to_string(),
            );
        }
        if bf16 && amd::through_rocwmma(plan, arch) {
            // CubeCL's bf16 HIP code includes hip_bf16.h, which came with ROCm 6.
            if !amd::rocwmma_headers().is_some_and(|h| h.hip.join("hip/hip_bf16.h").is_file()) {
                return Some(
                    "CubeCL's bf16 HIP code includes hip/hip_bf16.h (ROCm 6 and later), which \
                     the HIP headers rocWMMA is compiled against here lack"
                        .to_string(),
                );
            }
        } else if bf16 {
            return Some(
                "clang 15's AMD targets have no __bf16, which CubeCL's WMMA intrinsics take \
                 (LLVM 17 and later do)"
                    .to_string(),
            );
        }
    }
    None
}

/// A problem of `precision` that stands for every size: the check of what a plan needs of a
/// target does not depend on the sizes.
pub fn probe(precision: Precision) -> tilemm::problem::Problem {
    tilemm::problem::Shape {
        precision,
        ..tilemm::problem::Shape::new(1, 1, 1)
    }
    .problem()
    .expect("a 1×1×1 problem is valid")
}

impl fmt::Display for ResourceUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registers = match self.scalar_registers {
            Some(s) => format!("{} V + {} S", self.registers, s),
            None => self.registers.to_string(),
        };
        let (active, max) = self.occupancy;
        // The matrix columns, for a main loop with matrix instructions.
        let matrix_loop = self.main_loop.filter(|l| l.matrix > 0);
        let column = |f: &dyn Fn(&loops::LoopMix) -> Option<String>| {
            matrix_loop
                .as_ref()
                .and_then(f)
                .unwrap_or_else(|| "—".to_string())
        };
        write!(
            f,
            "{:<40} {:<8} {:<9} {:>12} {:>7} {:>8} {:>9} {:>9} {:>5} {:>7} {:>5} {:>6} {:>7} {:>8} {:>6} {:>6}/{:<3} {:>4.0}%  {:<9} {:>9.1}",
            self.plan.to_string(),
            self.arch,
            self.precision.short_name(),
            registers,
            self.spills,
            self.static_shared_bytes,
            self.dynamic_shared_bytes,
            self.main_loop
                .filter(|l| l.fma > 0)
                .map_or_else(
                    || "—".to_string(),
                    |l| format!("{:.0}%/{}", l.percent(), l.instructions)
                ),
            self.main_loop
                .map_or_else(|| "—".to_string(), |l| l.longest_idle_run.to_string()),
            self.matrix_ops
                .map_or_else(|| "—".to_string(), |n| n.to_string()),
            column(&|l| Some(format!("{:.0}%", l.matrix_percent()))),
            column(&|l| l.matrix_per_fragment_load().map(|r| format!("{r:.1}"))),
            column(&|l| (l.copy_commits > 0).then(|| format!(
                "{}/{}",
                l.async_copies / l.copy_commits,
                l.stages_in_flight().unwrap_or(0)
            ))),
            column(&|l| l.barriers_per_tile().map(|b| format!("{b:.1}"))),
            column(&|l| Some(if l.fragment_load_at_barrier { "yes" } else { "no" }.to_string())),
            active,
            max,
            100.0 * f64::from(active) / f64::from(max.max(1)),
            self.occupancy_limit,
            self.compile_seconds
        )
    }
}

impl Row {
    /// The column headings matching a [`Row`]'s `Display` (and [`ResourceUsage`]'s). `idle`:
    /// the main loop's longest run of instructions without its work (matrix instructions, else
    /// FMAs), around the back edge included. The matrix columns, for a main loop with matrix
    /// instructions: their share of it (`mma%`), matrix instructions per fragment load
    /// (`mma:ld`: ldmatrix, ds_read), asynchronous copies per K tile and K tiles in flight
    /// (`async`), cube barriers per K tile (`bar/t`), whether a fragment load sits in the run
    /// without matrix instructions that holds a barrier (`ld@bar`).
    pub const TABLE_HEADER: &str =
        "kernel                                   arch     precision    registers  spills  static B  dynamic B  loop FMA  idle  matrix  mma% mma:ld   async    bar/t ld@bar  occupancy     limit      compile s";
}

/// Where to find the tools.
#[derive(Clone, Debug, Default)]
pub struct Toolchain {
    /// Directories holding `cuda_runtime.h` (the generated CUDA includes it). Empty: look in
    /// `$CUDA_PATH/include`, `/usr/local/cuda/include` and Python's `nvidia/cuda_runtime/include`.
    pub cuda_include: Vec<PathBuf>,
    /// The clang that compiles AMD code; `None`: `clang-15`, then `clang`.
    pub clang: Option<PathBuf>,
    /// Where to write each kernel's machine code: NVIDIA SASS (`.sass`), AMD assembly (`.s`);
    /// `None`: nowhere.
    pub sass_dir: Option<PathBuf>,
    /// How fast this machine compiles ([`Pace::measure`]), which scales the first call's
    /// compile-time limit; `None`: as fast as the development machine.
    pub pace: Option<Pace>,
}

/// How long NVRTC took for the pace probe (a fixed kernel, `nvidia.rs`) on the development
/// machine (2 cores). Derived on 2026-11-28, a slow day there: in one run the probe took
/// 1.0–1.8 s (the shortest of three) and the mma rung's 128×128 at BK 32 in f16 for sm_90
/// 11.0–12.6 s, a ratio of about 10, where that kernel takes 4.1 s on a usual day.
pub const PACE_PROBE_SECONDS: f64 = 0.4;

/// How fast the machine running the check compiles, from a fixed kernel's compile time: the
/// limit on a first call's compile is a limit on the kernel, so it scales with the machine
/// (a shared machine can compile 3× slower on one day than on another), where a regression in
/// the kernel is many times.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Pace {
    /// The probe's compile time here (NVRTC for sm_90, shortest of three).
    pub probe_seconds: f64,
}

impl Pace {
    /// Times the probe through NVRTC, where the check compiles for an NVIDIA target (the limit
    /// is NVRTC's; without one, `None`: the limit as on the development machine).
    pub fn measure(archs: &[Arch]) -> Result<Option<Pace>> {
        if !archs.iter().any(|a| a.vendor == Vendor::Nvidia) {
            return Ok(None);
        }
        #[cfg(feature = "cuda")]
        return Ok(Some(Pace {
            probe_seconds: nvidia::pace_probe_seconds()?,
        }));
        #[cfg(not(feature = "cuda"))]
        Ok(None)
    }

    /// How many times slower than the development machine this one compiles, never under 1.
    pub fn factor(&self) -> f64 {
        (self.probe_seconds / PACE_PROBE_SECONDS).max(1.0)
    }

    /// The longest a first call's kernel may take to compile here: twice
    /// [`tilemm::kernels::QUICK_COMPILE_SECONDS`] (a margin for a shared machine's noise), times
    /// [`Pace::factor`].
    pub fn compile_limit(pace: Option<Pace>) -> f64 {
        2.0 * tilemm::kernels::QUICK_COMPILE_SECONDS * pace.map_or(1.0, |p| p.factor())
    }
}

/// Checks that the tools for every architecture in `archs` are there, so that a missing tool is
/// reported once, up front, rather than as a failure of every kernel.
pub fn preflight(archs: &[Arch], tools: &Toolchain) -> Result<()> {
    // The listings' folder is made here, once, rather than failing every row.
    if let Some(dir) = &tools.sass_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::Toolchain {
            tool: "--sass".into(),
            reason: format!("cannot create {}: {e}", dir.display()),
        })?;
    }
    if archs.iter().any(|a| a.vendor == Vendor::Nvidia) {
        #[cfg(feature = "cuda")]
        nvidia::preflight(tools)?;
        #[cfg(not(feature = "cuda"))]
        return Err(Error::Tilemm(tilemm::Error::NotBuilt {
            what: "the cuda backend (NVRTC, for the NVIDIA compile check)".into(),
            feature: "cuda",
        }));
    }
    if archs.iter().any(|a| a.vendor == Vendor::Amd) {
        amd::find_clang(tools)?;
    }
    Ok(())
}

/// Compiles `plan`'s kernel in `precision` for `arch` and reports what it uses.
pub fn check(
    plan: &Plan,
    precision: Precision,
    arch: &Arch,
    tools: &Toolchain,
) -> Result<ResourceUsage> {
    match arch.vendor {
        Vendor::Nvidia => {
            #[cfg(feature = "cuda")]
            {
                let source = emit::source_for(plan, precision, emit::Target::Cuda)?;
                nvidia::check(plan, precision, arch, &source, tools)
            }
            #[cfg(not(feature = "cuda"))]
            {
                let _ = (tools, precision);
                Err(Error::Tilemm(tilemm::Error::NotBuilt {
                    what: "the cuda backend (NVRTC, for the NVIDIA compile check)".into(),
                    feature: "cuda",
                }))
            }
        }
        Vendor::Amd => {
            let units = if amd::through_rocwmma(plan, arch) {
                emit::HipMatrixUnits::RocWmma
            } else {
                emit::HipMatrixUnits::Intrinsics
            };
            let source = emit::hip_source(plan, precision, arch.warp_size, units)?;
            amd::check(plan, precision, arch, &source, tools)
        }
    }
}

/// One row of the compile check: a plan in a precision for an architecture, and what came of
/// it. `Display` is the table's row, `Serialize` its JSON (`compile-check --json`).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The plan as `--kernels` takes it (`tiled:tpb=16`).
    pub kernel: String,
    /// The precision in one word (`f32`, `f16→f32`).
    pub dtype: String,
    /// The architecture's name (`sm_90`, `gfx90a`).
    pub arch: String,
    /// Compiled, skipped or failed.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What came of one row.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Compiled: what it uses, and the criteria it misses (none: it passes).
    Compiled {
        /// Registers, spills, shared memory, occupancy, the main loop's instruction mix.
        usage: Box<ResourceUsage>,
        /// Each criterion the compiled code misses, as a short phrase.
        failures: Vec<String>,
    },
    /// Not compiled, for this reason ([`not_applicable`]).
    Skipped {
        /// Why the target cannot compile the plan.
        reason: String,
    },
    /// The compiler or a tool failed.
    Failed {
        /// The error, on one line.
        error: String,
    },
}

impl Row {
    /// Whether the row counts as a failure (a compile error, or a criterion missed).
    pub fn failed(&self) -> bool {
        match &self.outcome {
            Outcome::Compiled { failures, .. } => !failures.is_empty(),
            Outcome::Skipped { .. } => false,
            Outcome::Failed { .. } => true,
        }
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Compiled { usage, failures } if failures.is_empty() => write!(f, "{usage}"),
            Outcome::Compiled { usage, failures } => {
                write!(f, "{usage}  FAIL: {}", failures.join("; "))
            }
            Outcome::Skipped { reason } => write!(
                f,
                "{:<40} {:<8} {:<9} skipped: {reason}",
                self.kernel, self.arch, self.dtype
            ),
            Outcome::Failed { error } => write!(
                f,
                "{:<40} {:<8} {:<9} FAIL: {error}",
                self.kernel, self.arch, self.dtype
            ),
        }
    }
}

/// Checks one row: skips what `arch` cannot compile ([`not_applicable`]), else compiles it
/// ([`check`]) and holds the result to its plan's criteria (no spill it does not allow, matrix
/// instructions where it is built on matrix units, its main loop's FMA floor and mix).
pub fn check_row(plan: &Plan, precision: Precision, arch: &Arch, tools: &Toolchain) -> Row {
    checked_row(
        plan,
        precision,
        arch,
        tools,
        Pace::compile_limit(tools.pace),
    )
    .0
}

/// [`check_row`] with the first call's compile-time `limit`, and whether the row missed it
/// (which a compile slowed by others beside it can).
fn checked_row(
    plan: &Plan,
    precision: Precision,
    arch: &Arch,
    tools: &Toolchain,
    limit: f64,
) -> (Row, bool) {
    let mut slow = false;
    let outcome = if let Some(reason) = not_applicable(plan, precision, arch) {
        Outcome::Skipped { reason }
    } else {
        match check(plan, precision, arch, tools) {
            Ok(usage) => {
                let mut failures = Vec::new();
                if usage.forbidden_spill() {
                    failures.push("spills".to_string());
                }
                if usage.missing_matrix_ops() {
                    failures.push("no matrix instruction".to_string());
                }
                if usage.below_fma_floor() {
                    failures.push("main loop below its FMA floor".to_string());
                }
                // A first call compiles one kernel: a quick one must stay quick.
                if plan.config.quick_to_compile(precision) && usage.compile_seconds > limit {
                    slow = true;
                    failures.push(format!(
                        "compiles in {:.1} s, over {limit:.1} s for a first call's kernel \
                         on this machine",
                        usage.compile_seconds
                    ));
                }
                failures.extend(
                    usage
                        .main_loop_failures()
                        .into_iter()
                        .map(|f| format!("main loop: {f}")),
                );
                Outcome::Compiled {
                    usage: Box::new(usage),
                    failures,
                }
            }
            Err(err) => Outcome::Failed {
                error: err.to_string(),
            },
        }
    };
    let row = Row {
        kernel: plan.to_string(),
        dtype: precision.short_name(),
        arch: arch.name.to_string(),
        outcome,
    };
    (row, slow)
}

/// Checks every (plan, precision, architecture) of `jobs` on `workers` threads (NVRTC and clang
/// compile a kernel on one core) and hands each row to `each`, in the order of `jobs`, as soon
/// as the rows before it are done; stops at the first error `each` returns. A row that misses
/// the compile-time limit (beside other compiles, or in a slow spell of a shared machine) is
/// compiled again alone, right after the pace probe is timed again where it was measured, and
/// that time counts against that pace: the limit is on a first call's compile, which runs
/// alone.
pub fn check_rows<E>(
    jobs: &[(Plan, Precision, Arch)],
    tools: &Toolchain,
    workers: usize,
    mut each: impl FnMut(Row) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let next = AtomicUsize::new(0);
    // Held shared by each compile, and alone by a compile that is timed again.
    let alone = RwLock::new(());
    let (done, results) = mpsc::channel();
    let threads = workers.clamp(1, jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (done, next, alone) = (done.clone(), &next, &alone);
            scope.spawn(move || loop {
                let index = next.fetch_add(1, Relaxed);
                let Some((plan, precision, arch)) = jobs.get(index) else {
                    break;
                };
                let (mut row, slow) = {
                    let _shared = alone.read().unwrap_or_else(PoisonError::into_inner);
                    checked_row(
                        plan,
                        *precision,
                        arch,
                        tools,
                        Pace::compile_limit(tools.pace),
                    )
                };
                if slow {
                    let _alone = alone.write().unwrap_or_else(PoisonError::into_inner);
                    let limit = Pace::compile_limit(pace_now(tools.pace));
                    row = checked_row(plan, *precision, arch, tools, limit).0;
                }
                if done.send((index, row)).is_err() {
                    break;
                }
            });
        }
        drop(done);
        // Rows come back as they finish; each waits here until those before it are handed on.
        let mut waiting = BTreeMap::new();
        let mut handed = 0;
        for (index, row) in results {
            waiting.insert(index, row);
            while let Some(row) = waiting.remove(&handed) {
                each(row)?;
                handed += 1;
            }
        }
        Ok(())
    })
}

/// The pace probe timed again where `pace` was measured (else `None`); `pace` itself where the
/// probe fails this time.
fn pace_now(pace: Option<Pace>) -> Option<Pace> {
    #[cfg(feature = "cuda")]
    if pace.is_some() {
        if let Ok(probe_seconds) = nvidia::pace_probe_seconds() {
            return Some(Pace { probe_seconds });
        }
    }
    pace
}

/// The compile check's rows, what was compiled against what (`notes`), and the counts.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Each plan × precision × architecture, in order.
    pub rows: Vec<Row>,
    /// Which headers the AMD sources were compiled against, and what the CDNA tensor-core rows
    /// stand for.
    pub notes: Vec<String>,
    /// Rows compiled that meet their criteria.
    pub compiled: usize,
    /// Rows not compiled ([`not_applicable`]).
    pub skipped: usize,
    /// Rows that failed to compile or missed a criterion.
    pub failed: usize,
    /// How fast this machine compiled, where it was measured (the first call's compile-time
    /// limit scales with it).
    pub pace: Option<Pace>,
}

impl Report {
    /// Counts `rows` and says what the AMD sources were compiled against (`via_rocwmma`:
    /// whether a row went through rocWMMA) and how fast this machine compiled (`pace`).
    pub fn new(rows: Vec<Row>, archs: &[Arch], via_rocwmma: bool, pace: Option<Pace>) -> Report {
        let mut notes = Vec::new();
        if archs.iter().any(|a| a.vendor == Vendor::Amd) {
            notes.push(match hip_headers() {
                Some(dir) => format!(
                    "AMD sources were also compiled against the HIP headers in {} (those \
                     including a header missing there, such as hip_bf16.h before ROCm 6, \
                     against tilemm's stand-ins only)",
                    dir.display()
                ),
                None => "no HIP headers found (ROCm, or Debian's libamdhip64-dev): AMD sources \
                         were compiled against tilemm's stand-in header only"
                    .to_string(),
            });
        }
        if let Some(pace) = pace {
            notes.push(format!(
                "a first call's kernel may compile in {:.1} s here: the pace probe compiled in \
                 {:.2} s, {PACE_PROBE_SECONDS:.2} s on the development machine (a row over the \
                 limit is timed again alone, after the probe)",
                Pace::compile_limit(Some(pace)),
                pace.probe_seconds,
            ));
        }
        if let Some(headers) = via_rocwmma.then(rocwmma_headers).flatten() {
            notes.push(format!(
                "CDNA's tensor-core rows are what a `--features hip,rocwmma` build JITs: \
                 CubeCL's rocWMMA dialect, compiled against the rocWMMA headers in {}",
                headers.rocwmma.display()
            ));
        }
        let failed = rows.iter().filter(|r| r.failed()).count();
        let skipped = rows
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skipped { .. }))
            .count();
        Report {
            compiled: rows.len() - failed - skipped,
            rows,
            notes,
            skipped,
            failed,
            pace,
        }
    }
}

/// The number just before `suffix` in a ptxas report (`Used 40 registers`). Here, not in the
/// NVIDIA module, so that its test runs in every build.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn number_before(log: &str, suffix: &str) -> Option<u64> {
    let end = log.find(suffix)?;
    let digits: String = log[..end]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

fn tool_error(tool: &str, reason: impl fmt::Display) -> Error {
    Error::Toolchain {
        tool: tool.to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilemm::problem::DType;
    use tilemm::Kernel;

    #[test]
    fn ptxas_report_is_parsed() {
        let log = "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 416 bytes cmem[0]\n\
                   ptxas         .     0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads";
        assert_eq!(number_before(log, " registers"), Some(40));
        assert_eq!(number_before(log, " bytes smem"), Some(2048));
        assert_eq!(number_before(log, " bytes spill stores"), Some(8));
        assert_eq!(number_before(log, " bytes spill loads"), Some(12));
    }

    /// The tensor-core rung's default configuration for RDNA 3 (wavefronts of 32) as the
    /// compile check reads it on gfx1100, with the main loop `mix`.
    fn on_gfx1100(mix: loops::LoopMix, spills: u64) -> ResourceUsage {
        let config = Kernel::Tensorcore.default_config();
        ResourceUsage {
            plan: Plan::new(config),
            precision: Precision::of(DType::F16),
            arch: "gfx1100".into(),
            registers: 104,
            scalar_registers: Some(30),
            spills,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 10240,
            threads_per_block: 128,
            occupancy: (6, 16),
            occupancy_limit: "LDS",
            main_loop: Some(mix),
            matrix_ops: Some(mix.matrix),
            compile_seconds: 0.0,
        }
    }

    /// Rows come back in the order asked for, whichever worker finishes first, and the first
    /// error of the caller's stops the check. (Rows the targets skip need no compiler.)
    #[test]
    fn the_compile_limit_scales_with_a_slower_machine_and_never_shrinks() {
        let limit = 2.0 * tilemm::kernels::QUICK_COMPILE_SECONDS;
        assert_eq!(Pace::compile_limit(None), limit);
        let slower = Pace {
            probe_seconds: 3.0 * PACE_PROBE_SECONDS,
        };
        assert!((slower.factor() - 3.0).abs() < 1e-12);
        assert!((Pace::compile_limit(Some(slower)) - 3.0 * limit).abs() < 1e-9);
        let faster = Pace {
            probe_seconds: PACE_PROBE_SECONDS / 2.0,
        };
        assert_eq!(Pace::compile_limit(Some(faster)), limit);
    }

    #[test]
    fn rows_are_handed_on_in_order_and_an_error_stops_them() {
        let plan = Plan::new(Kernel::Mma.default_config());
        let jobs: Vec<_> = (0..12)
            .map(|i| {
                let dtype = [DType::F32, DType::F64][i % 2];
                (plan, Precision::of(dtype), KNOWN[i % KNOWN.len()].clone())
            })
            .collect();
        let tools = Toolchain::default();
        let mut seen = Vec::new();
        let result: std::result::Result<(), ()> = check_rows(&jobs, &tools, 3, |row| {
            assert!(matches!(row.outcome, Outcome::Skipped { .. }), "{row}");
            seen.push((row.arch, row.dtype));
            Ok(())
        });
        assert!(result.is_ok());
        let asked: Vec<_> = jobs
            .iter()
            .map(|(_, precision, arch)| (arch.name.to_string(), precision.short_name()))
            .collect();
        assert_eq!(seen, asked);
        let mut handed = 0;
        let stopped = check_rows(&jobs, &tools, 3, |_| {
            handed += 1;
            if handed == 4 {
                Err(handed)
            } else {
                Ok(())
            }
        });
        assert_eq!(stopped, Err(4));
        assert_eq!(handed, 4);
    }

    /// What wide loads give for 2×2 fragments per wavefront of 32: 4 WMMA, 8 `ds_load_b128`
    /// (two per fragment), 2 `global_load_b128`.
    fn wide() -> loops::LoopMix {
        loops::LoopMix {
            matrix: 4,
            instructions: 120,
            fragment_loads: 8,
            global_loads: 2,
            wide_global_loads: 2,
            ..Default::default()
        }
    }

    #[test]
    fn amd_matrix_loops_pass_with_wide_loads_and_fail_element_wise() {
        assert!(on_gfx1100(wide(), 0).main_loop_failures().is_empty());
        // B's fragments read element by element (B staged by rows): 4 + 32 LDS reads.
        let by_elements = loops::LoopMix {
            fragment_loads: 36,
            ..wide()
        };
        let failures = on_gfx1100(by_elements, 0).main_loop_failures();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("per LDS read"), "{failures:?}");
        // Staging in 16-bit global loads.
        let narrow = loops::LoopMix {
            global_loads: 16,
            wide_global_loads: 0,
            ..wide()
        };
        let failures = on_gfx1100(narrow, 0).main_loop_failures();
        assert_eq!(failures.len(), 2, "{failures:?}");
        // A main loop that could not be read fails rather than passing unchecked.
        let mut unread = on_gfx1100(wide(), 0);
        unread.main_loop = None;
        assert_eq!(unread.main_loop_failures().len(), 1);
        // Scratch is a failure of its own for a configuration that must not spill.
        assert!(on_gfx1100(wide(), 12).forbidden_spill());
    }
}
