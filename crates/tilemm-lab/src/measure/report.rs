//! What `tilemm run` found, as text for people and JSON for programs.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::inputs::Source;
use tilemm::device::DeviceInfo;
use tilemm::host::format_bytes;
use tilemm::plan::panels::Panels;
use tilemm::plan::{Launches, Plan};
use tilemm::problem::Problem;
use tilemm::runtime::backend::Backend;
use tilemm::tune::TuneReport;
use tilemm::verify::{ReferenceMode, Verification};

fn ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// The kernel that ran and its launch.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// Kernel and configuration.
    pub plan: Plan,
    /// How `auto` chose it, if it did.
    pub tuning: Option<TuneReport>,
    /// Grid, block, shared memory, and how many launches (of one block, with panels).
    pub launch: Launches,
    /// The blocks, when the operands exceed a binding or the device's memory.
    pub panels: Option<Panels>,
}

/// The first GPU run, which includes JIT compilation.
#[derive(Clone, Debug, Serialize)]
pub struct FirstRun {
    /// `auto`'s tuning: timing candidates (each compiled) and verifying the winner, or reading
    /// the cache.
    #[serde(rename = "tuning_ms", serialize_with = "ms")]
    pub tuning: Duration,
    /// JIT compilation, measured on its own: the kernel's first launch, on a tiny problem
    /// (CubeCL's code generation, the driver's compiler, one tiny dispatch).
    #[serde(rename = "compile_ms", serialize_with = "ms")]
    pub compile: Duration,
    /// A and B to the device.
    #[serde(rename = "upload_ms", serialize_with = "ms")]
    pub upload: Duration,
    /// Launch until the kernel finished (the kernel was compiled just before).
    #[serde(rename = "launch_ms", serialize_with = "ms")]
    pub launch: Duration,
    /// The kernel alone, as timed on the device.
    #[serde(rename = "kernel_ms", serialize_with = "ms")]
    pub kernel: Duration,
    /// C back to the host.
    #[serde(rename = "download_ms", serialize_with = "ms")]
    pub download: Duration,
    /// Tuning + compile + upload + launch + download.
    #[serde(rename = "total_ms", serialize_with = "ms")]
    pub total: Duration,
    /// GFLOPS over the total.
    pub gflops: f64,
    /// Whether this run's C also met the bound.
    pub pass: bool,
}

/// The second GPU run: the kernel is compiled and cached.
#[derive(Clone, Debug, Serialize)]
pub struct SecondRun {
    /// The kernel alone.
    #[serde(rename = "kernel_ms", serialize_with = "ms")]
    pub kernel: Duration,
    /// How the kernel was timed: "device timestamps" or "host clock".
    pub kernel_timing: &'static str,
    /// GFLOPS of the kernel alone.
    pub kernel_gflops: f64,
    /// Upload, kernel and download.
    #[serde(rename = "total_ms", serialize_with = "ms")]
    pub total: Duration,
    /// GFLOPS end to end.
    pub total_gflops: f64,
    /// A and B (and C when β ≠ 0) to the device.
    pub upload: Transfer,
    /// C back to the host.
    pub download: Transfer,
}

/// Bytes moved between the host and the device, and how fast.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Transfer {
    /// Bytes moved.
    pub bytes: u64,
    /// The time, host copies included.
    #[serde(rename = "time_ms", serialize_with = "ms")]
    pub time: Duration,
    /// Bytes per nanosecond (10⁹ bytes per second).
    pub gb_per_s: f64,
}

impl Transfer {
    /// `bytes` moved in `time`.
    pub fn new(bytes: u64, time: Duration) -> Self {
        Transfer {
            bytes,
            time,
            gb_per_s: bytes as f64 / time.as_secs_f64().max(1e-12) / 1e9,
        }
    }
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} ({:.2} GB/s)",
            format_bytes(self.bytes),
            msf(self.time),
            self.gb_per_s
        )
    }
}

/// The CPU crate's product.
#[derive(Clone, Debug, Serialize)]
pub struct CpuTimes {
    /// Crate and version.
    pub implementation: &'static str,
    /// Threads it used.
    pub threads: usize,
    /// Its time (second call).
    #[serde(rename = "time_ms", serialize_with = "ms")]
    pub time: Duration,
    /// Its GFLOPS.
    pub gflops: f64,
}

/// Host memory: what a run was planned to need beyond what the process held when it was
/// planned (before tuning and inputs), and what the process held then and at its peak.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HostMemory {
    /// What the run was planned to need, reference included: the most it may add.
    pub planned_bytes: u64,
    /// Resident memory when the run was planned (`None`: the OS does not tell, or cannot
    /// start measuring the peak afresh there).
    pub before_bytes: Option<u64>,
    /// Peak resident memory since the run was planned (or of the whole process, where
    /// `before_bytes` is `None`).
    pub peak_bytes: Option<u64>,
}

impl HostMemory {
    /// How far the process's peak rose above what it held when the run was planned.
    pub fn growth_bytes(&self) -> Option<u64> {
        Some(self.peak_bytes?.saturating_sub(self.before_bytes?))
    }
}

/// Everything `tilemm run` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The product.
    pub problem: Problem,
    /// Where A and B came from.
    pub inputs: Source,
    /// Where it ran.
    pub backend: Backend,
    /// The GPU device, if one ran.
    pub device: Option<DeviceInfo>,
    /// The kernel, if a GPU ran.
    pub kernel: Option<KernelReport>,
    /// First GPU run (with compilation).
    pub first_run: Option<FirstRun>,
    /// Second GPU run.
    pub second_run: Option<SecondRun>,
    /// The CPU path.
    pub cpu: CpuTimes,
    /// Time to compute the reference and check the results against it.
    #[serde(rename = "reference_ms", serialize_with = "ms")]
    pub reference_time: Duration,
    /// The check of the reported C.
    pub verification: Verification,
    /// Host memory: what the run was planned to need, and what it took.
    pub host_memory: HostMemory,
    /// Things the user should know (e.g. why no GPU ran).
    pub notes: Vec<String>,
    /// Whether every checked C met the bound.
    pub pass: bool,
}

fn msf(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        writeln!(f, "problem     {p}")?;
        match &self.inputs {
            Source::Random { seed } => {
                writeln!(f, "inputs      random, uniform in [-1, 1), seed {seed}")?
            }
            Source::Files { a, b, c } => {
                write!(f, "inputs      A {}, B {}", a.display(), b.display())?;
                match c {
                    Some(c) => writeln!(f, ", C₀ {}", c.display())?,
                    None if p.reads_c() => writeln!(f, ", C₀ random, uniform in [-1, 1)")?,
                    None => writeln!(f)?,
                }
            }
        }
        for note in &self.notes {
            writeln!(f, "note        {note}")?;
        }
        match &self.device {
            Some(d) => writeln!(
                f,
                "device      #{} {}: {}, {} via {}{}",
                d.index,
                d.name,
                d.kind.name(),
                d.api,
                self.backend,
                if d.driver.is_empty() {
                    String::new()
                } else {
                    format!(", driver {}", d.driver)
                }
            )?,
            None => writeln!(f, "device      CPU only ({} threads)", self.cpu.threads)?,
        }
        if let Some(k) = &self.kernel {
            let [gx, gy, gz] = k.launch.shape.grid;
            let [bx, by, bz] = k.launch.shape.block;
            writeln!(
                f,
                "kernel      {}: grid {gx}×{gy}×{gz}, block {bx}×{by}×{bz}, {} B shared per block",
                k.plan, k.launch.shape.shared_bytes
            )?;
            if let Some(t) = &k.tuning {
                writeln!(f, "tuning      {t}")?;
            }
            if let Some(p) = &k.panels {
                let [cm, ck, cn, cb] = p.counts;
                let plural = |n: usize, one: &str, many: &str| {
                    format!("{n} {}", if n == 1 { one } else { many })
                };
                writeln!(
                    f,
                    "panels      {} blocks (operands over one binding): {} of A and C ({} rows), \
                     {} of B ({} columns), {} ({}){}; each block copied into buffers of its \
                     own, the copies counted in upload and download",
                    p.count(),
                    plural(cm, "row panel", "row panels"),
                    p.rows,
                    plural(cn, "column panel", "column panels"),
                    p.cols,
                    plural(ck, "slab of K", "slabs of K"),
                    p.depth,
                    if cb > 1 {
                        format!(
                            ", {} of the batch ({})",
                            plural(cb, "chunk", "chunks"),
                            p.batch
                        )
                    } else {
                        String::new()
                    },
                )?;
            }
            if k.launch.k_slabs > 1 {
                writeln!(
                    f,
                    "            K in {} launches of up to {} (no unit loops more than {} times \
                     in one launch; some drivers cut longer loops short), each continuing the \
                     sum in C",
                    k.launch.k_slabs,
                    k.launch.k_per_launch,
                    tilemm::plan::LOOP_TRIP_LIMIT
                )?;
            }
            if k.launch.k_splits > 1 {
                writeln!(
                    f,
                    "            split-K: {} slices of K side by side (grid z = slices × batch \
                     entries) into f32 partials, added into C with α and β by a second launch",
                    k.launch.k_splits
                )?;
            }
            if k.launch.batch_chunks > 1 {
                writeln!(
                    f,
                    "            the batch in {} launches of up to {} (the grid's z limit)",
                    k.launch.batch_chunks,
                    gz / k.launch.k_splits.max(1)
                )?;
            }
        }
        if let Some(r) = &self.first_run {
            let tuning = if self.kernel.as_ref().is_some_and(|k| k.tuning.is_some()) {
                format!("tuning {} + ", msf(r.tuning))
            } else {
                String::new()
            };
            writeln!(
                f,
                "1st GPU     {} = {tuning}JIT compile {} + upload {} + launch {} + download {}   ({:.2} GFLOPS)",
                msf(r.total),
                msf(r.compile),
                msf(r.upload),
                msf(r.launch),
                msf(r.download),
                r.gflops
            )?;
            writeln!(
                f,
                "            compile measured on its own (the kernel's first launch, on a tiny \
                 problem); 1st kernel {} on the device",
                msf(r.kernel),
            )?;
        }
        if let Some(r) = &self.second_run {
            writeln!(
                f,
                "2nd GPU     kernel {} ({}, {:.2} GFLOPS); end to end {} ({:.2} GFLOPS)",
                msf(r.kernel),
                r.kernel_timing,
                r.kernel_gflops,
                msf(r.total),
                r.total_gflops
            )?;
            writeln!(
                f,
                "            upload {}; download {}",
                r.upload, r.download
            )?;
        }
        writeln!(
            f,
            "CPU         {} ({}, {} threads, {:.2} GFLOPS)",
            msf(self.cpu.time),
            self.cpu.implementation,
            self.cpu.threads,
            self.cpu.gflops
        )?;
        let m = &self.host_memory;
        let planned = format_bytes(m.planned_bytes);
        match (m.peak_bytes, m.growth_bytes()) {
            (Some(peak), Some(growth)) => writeln!(
                f,
                "memory      host peak {} since the run was planned, {} above what the process held then (planned: at most {planned})",
                format_bytes(peak),
                format_bytes(growth)
            )?,
            _ => writeln!(f, "memory      host: planned at most {planned}")?,
        }
        self.fmt_verification(f)?;
        write!(f, "result      {}", if self.pass { "PASS" } else { "FAIL" })
    }
}

impl Report {
    fn fmt_verification(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        let v = &self.verification;
        let dtype = p.precision().output.name();
        let acc = p.precision().accumulate;
        let scaled = p.alpha() != 1.0 || p.reads_c();
        let mag = if scaled {
            "M, M = |α|·|A|·|B| + |β|·|C₀|"
        } else {
            "|A|·|B|"
        };
        let reference = match v.reference {
            ReferenceMode::Whole => "f64 reference".to_string(),
            ReferenceMode::Blocks(b) => format!(
                "f64 reference, computed in {}×{}×{} blocks",
                b.rows, b.depth, b.cols
            ),
        };
        let checked = if self.first_run.is_some() {
            "2nd GPU C"
        } else {
            "CPU C"
        };
        let figures = match v.beyond_range_entries + v.nonfinite_entries {
            0 => format!(
                "max abs {:.3e}, max rel {:.3e}",
                v.max_abs_err, v.max_rel_err
            ),
            n if n == v.entries => {
                format!("no entry has a finite |A|·|B| within {dtype}'s range")
            }
            n => format!(
                "max abs {:.3e}, max rel {:.3e} over the {} entries with a finite |A|·|B| \
                 within {dtype}'s range",
                v.max_abs_err,
                v.max_rel_err,
                v.entries - n
            ),
        };
        writeln!(
            f,
            "error       {checked} vs {reference} ({}): {figures}",
            msf(self.reference_time),
        )?;
        let coarse = if p.precision().output.significand_bits() < acc.significand_bits() {
            p.precision().output
        } else {
            acc
        };
        let exact_limit = format!("2^{}", coarse.significand_bits());
        if v.all_exact() {
            writeln!(
                f,
                "bound       exact: integer data with {mag} ≤ {exact_limit} in every entry, so \
                 every partial sum is an integer {coarse} holds exactly, in any order; C must \
                 equal the product, and {}",
                if v.failures == 0 { "does" } else { "does not" }
            )?;
        } else {
            if v.exact_entries > 0 {
                writeln!(
                    f,
                    "bound       exact in {} of {} entries (integer data, {mag} ≤ {exact_limit}); \
                     the others against the bound below",
                    v.exact_entries, v.entries
                )?;
            }
            if v.bound_meaningful {
                let worst = if v.bound_entries > 0 {
                    format!("; worst err/bound {:.3e}", v.worst_err_over_bound)
                } else {
                    String::new()
                };
                writeln!(
                    f,
                    "bound       |c − ref| ≤ {:.3e}·{mag} + {:.1e}  (γ_K = K·u/(1−K·u), K = {}, \
                     u = {:.3e} for {acc} accumulation{}{}){worst}",
                    v.bound_factor,
                    v.bound_floor,
                    p.k(),
                    acc.unit_roundoff(),
                    if p.precision().input.input_rounding() > 0.0 {
                        format!(
                            ", {} inputs each within {:.3e}",
                            p.precision().input,
                            p.precision().input.input_rounding()
                        )
                    } else {
                        String::new()
                    },
                    if p.precision().output != acc {
                        format!(", plus {dtype} rounding of C")
                    } else {
                        String::new()
                    },
                )?;
                if v.subnormal_inputs {
                    writeln!(
                        f,
                        "            A or B holds subnormal numbers, which devices may flush to \
                         zero: the floor allows for losing every term they are in"
                    )?;
                }
            } else {
                writeln!(
                    f,
                    "bound       none: K·u ≥ 1/2 at K = {}, where the worst-case bound says \
                     nothing, so {} entries cannot be verified (split K, or check in higher \
                     precision)",
                    p.k(),
                    v.unverifiable_entries
                )?;
            }
        }
        if let Some(ulps) = v.err_in_ulps.filter(|_| v.range_failures == 0) {
            let promised = if p.precision().input == tilemm::problem::DType::TF32 {
                format!("tf32 inputs and {acc} accumulation")
            } else {
                format!("{acc} accumulation")
            };
            let line = match v.precision_limit_ulps {
                None => format!(
                    "max err = {ulps:.2}·u·(|A|·|B|), not held to a precision limit: only \
                     tilemm's random inputs have one (structured data can reach the bound \
                     legitimately)"
                ),
                Some(_) if v.precision_failures == 0 => format!(
                    "worst err/limit {:.3}: within what {promised} gives random inputs (10σ \
                     of its rounding, plus C's); max err = {ulps:.2}·u·(|A|·|B|)",
                    v.worst_err_over_precision_limit
                ),
                Some(_) => format!(
                    "worst err/limit {:.1}, {} entries over: beyond what {promised} gives \
                     random inputs (10σ): lower precision than promised (tf32 inputs, f16 or \
                     bf16 accumulation) somewhere",
                    v.worst_err_over_precision_limit, v.precision_failures
                ),
            };
            writeln!(f, "precision   {line}")?;
        }
        if v.range_failures > 0 {
            writeln!(
                f,
                "range       {} entries fail where |A|·|B| exceeds {dtype}'s largest value \
                 {:.3e} ({} of them have an exact value beyond it; the reference reaches \
                 {:.3e}, |A|·|B| {:.3e}): C overflows the {dtype} range there",
                v.range_failures,
                p.precision().output.largest().min(acc.largest()),
                v.overflow_entries,
                v.largest_reference,
                v.largest_magnitude
            )?;
        }
        if v.nonfinite_entries > 0 {
            writeln!(
                f,
                "inf/NaN     {} entries meet infinite or NaN inputs: each must be the reference's \
                 IEEE result (±inf or NaN) exactly",
                v.nonfinite_entries
            )?;
        }
        if let Some((i, j, got, want)) = v.worst_failure {
            let at = if p.batch() > 1 {
                format!("{},{i},{j}", v.worst_failure_batch)
            } else {
                format!("{i},{j}")
            };
            writeln!(
                f,
                "failures    {} of {} entries fail their check; worst C[{at}] = {got:e}, \
                 reference {want:.8e}",
                v.failures, v.entries
            )?;
        }
        if !v.right_length {
            writeln!(f, "failures    C does not have {} entries", v.entries)?;
        }
        if let Some(r) = &self.first_run {
            if !r.pass {
                writeln!(f, "failures    the 1st GPU run's C fails its check")?;
            }
        }
        Ok(())
    }
}
