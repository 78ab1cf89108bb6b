//! What `tilemm run` found, as text for people and JSON for programs.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::backend::Backend;
use crate::device::DeviceInfo;
use crate::plan::{LaunchShape, Plan};
use crate::problem::Problem;
use crate::verify::{ReferenceKind, Verification};

fn ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// The kernel that ran and its launch.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// Kernel and configuration.
    pub plan: Plan,
    /// Grid, block, shared memory.
    pub launch: LaunchShape,
}

/// The first GPU run, which includes JIT compilation.
#[derive(Clone, Debug, Serialize)]
pub struct FirstRun {
    /// A and B to the device.
    #[serde(rename = "upload_ms", serialize_with = "ms")]
    pub upload: Duration,
    /// Launch until the kernel finished: compile, dispatch and kernel.
    #[serde(rename = "launch_ms", serialize_with = "ms")]
    pub launch: Duration,
    /// The kernel alone, as timed on the device.
    #[serde(rename = "kernel_ms", serialize_with = "ms")]
    pub kernel: Duration,
    /// JIT compilation, estimated as this launch's time less the second's (which reuses the
    /// compiled kernel). It counts compilation wherever it happens: in CubeCL on the host, or in
    /// a driver that compiles at first dispatch (lavapipe does, inside the kernel's timestamps).
    /// Its noise is the kernel's run-to-run variation.
    #[serde(rename = "compile_ms", serialize_with = "ms")]
    pub compile_estimate: Duration,
    /// C back to the host.
    #[serde(rename = "download_ms", serialize_with = "ms")]
    pub download: Duration,
    /// Upload + launch + download.
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

/// Everything `tilemm run` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The product.
    pub problem: Problem,
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
    /// Time to compute the reference.
    #[serde(rename = "reference_ms", serialize_with = "ms")]
    pub reference_time: Duration,
    /// The check of the reported C.
    pub verification: Verification,
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
            let [gx, gy, gz] = k.launch.grid;
            let [bx, by, bz] = k.launch.block;
            writeln!(
                f,
                "kernel      {}: grid {gx}×{gy}×{gz}, block {bx}×{by}×{bz}, {} B shared per block",
                k.plan, k.launch.shared_bytes
            )?;
        }
        if let Some(r) = &self.first_run {
            writeln!(
                f,
                "1st GPU     {} = upload {} + launch {} + download {}   ({:.2} GFLOPS)",
                msf(r.total),
                msf(r.upload),
                msf(r.launch),
                msf(r.download),
                r.gflops
            )?;
            writeln!(
                f,
                "            JIT compile ≈ {} (1st launch − 2nd launch); 1st kernel {} on the device",
                msf(r.compile_estimate),
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
        }
        writeln!(
            f,
            "CPU         {} ({}, {} threads, {:.2} GFLOPS)",
            msf(self.cpu.time),
            self.cpu.implementation,
            self.cpu.threads,
            self.cpu.gflops
        )?;
        let v = &self.verification;
        let reference = match v.reference {
            ReferenceKind::F64 => "f64 reference",
            ReferenceKind::F32 => "f32 reference (too large for f64 copies; bound doubled)",
        };
        let checked = if self.first_run.is_some() {
            "2nd GPU C"
        } else {
            "CPU C"
        };
        writeln!(
            f,
            "error       {checked} vs {reference} ({}): max abs {:.3e}, max rel {:.3e}",
            msf(self.reference_time),
            v.max_abs_err,
            v.max_rel_err
        )?;
        if v.bound_meaningful {
            writeln!(
                f,
                "bound       |c − ref| ≤ {:.3e}·(|A|·|B|) + {:.1e}  (γ_K = K·u/(1−K·u), K = {}, u = {:.3e}); worst err/bound {:.3e}",
                v.bound_factor,
                v.bound_floor,
                p.k,
                p.dtype.unit_roundoff(),
                v.worst_err_over_bound
            )?;
        } else {
            writeln!(
                f,
                "bound       none: K·u ≥ 1/2 at K = {}, where the worst-case bound says nothing, \
                 so this result cannot be verified (split K, or check in higher precision)",
                p.k
            )?;
        }
        if let Some(ulps) = v.err_in_ulps {
            let dtype = p.dtype.name();
            let verdict = if ulps <= v.ulps_warning_level {
                format!("as expected for {dtype} accumulation")
            } else {
                format!(
                    "WARNING: more than {dtype} accumulation explains; lower precision somewhere?"
                )
            };
            writeln!(
                f,
                "precision   max err = {ulps:.2}·u·(|A|·|B|), 2√K = {:.1}: {verdict}",
                v.ulps_warning_level
            )?;
        }
        if let Some((i, j, got, want)) = v.first_failure.filter(|_| v.bound_meaningful) {
            writeln!(
                f,
                "failures    {} of {} entries outside the bound; worst C[{i},{j}] = {got:e}, reference {want:e}",
                v.failures,
                p.c_len()
            )?;
        }
        if let Some(r) = &self.first_run {
            if !r.pass {
                writeln!(f, "failures    the 1st GPU run's C is outside the bound")?;
            }
        }
        write!(f, "result      {}", if self.pass { "PASS" } else { "FAIL" })
    }
}
