//! The device's own time for the kernels a run launches on CUDA, from CUPTI's kernel activity
//! records: one clock for tilemm's kernels, cubek-matmul's and cuBLAS's, so that `bench`
//! compares them like for like.
//!
//! CubeCL 0.10 keeps its CUDA stream private, so no event can be recorded around its launches;
//! CUPTI writes every kernel's start and end, read off the GPU's timer, whatever stream it ran
//! on. A run's time is the span from its first kernel's start to its last kernel's end: what a
//! pair of events around it measures, less the events' own few microseconds.
//!
//! libcupti is opened at run time (the CUDA toolkit's `extras/CUPTI/lib64`, or the
//! `nvidia-cuda-cupti-cu12` wheel that PyTorch installs); without it, or with another profiler
//! holding CUPTI, [`KernelClock::get`] says why and `bench` times as before (the host clock
//! for CubeCL's kernels, events for cuBLAS), saying so on every row.

use tilemm::runtime::backend::{Backend, GpuSession};

#[cfg(feature = "cuda")]
pub use cupti::KernelClock;

/// How rows timed by [`KernelClock`] name their clock.
pub const TIMING: &str = "device (CUPTI)";

/// Where to find libcupti, for the note a sweep prints without it.
pub const INSTALL_HINT: &str = "put the CUDA toolkit's extras/CUPTI/lib64 on LD_LIBRARY_PATH, or \
                                `pip install nvidia-cuda-cupti-cu12` (cu13 for CUDA 13) and put \
                                its site-packages/nvidia/cuda_cupti/lib there";

/// The clock for `gpu`'s kernels, where it has one (CUDA, with libcupti).
pub fn for_session(gpu: &GpuSession) -> Option<&'static KernelClock> {
    (gpu.backend() == Backend::Cuda)
        .then(KernelClock::get)
        .and_then(|clock| clock.ok())
}

/// Why `gpu`'s kernels are not timed by a [`KernelClock`], where a sweep should say so: on
/// CUDA without libcupti.
pub fn missing(gpu: &GpuSession) -> Option<String> {
    if gpu.backend() != Backend::Cuda {
        return None;
    }
    let why = KernelClock::get().err()?;
    Some(format!(
        "kernels are timed on the host clock and cuBLAS with events, not all on the device's \
         kernel timestamps: {why}"
    ))
}

/// No kernel clock in a build without CUDA.
#[cfg(not(feature = "cuda"))]
pub enum KernelClock {}

#[cfg(not(feature = "cuda"))]
impl KernelClock {
    /// Why there is none.
    pub fn get() -> Result<&'static KernelClock, &'static str> {
        Err("built without the cuda feature")
    }

    /// Never called: there is no clock.
    pub fn time(&self, _: impl FnOnce() -> crate::Result<()>) -> crate::Result<Sample> {
        match *self {}
    }
}

#[cfg(not(feature = "cuda"))]
use crate::measure::bench::Sample;

/// From the first start to the last end, in ms, of a run that took `host_ms` on the host
/// clock: refused for no kernel, or for a span longer than the run (records not its own). Here,
/// not in the CUPTI module, so that its test runs in every build.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn checked_span(kernels: &[(u64, u64)], host_ms: f64) -> std::result::Result<f64, String> {
    let (Some(first), Some(last)) = (
        kernels.iter().map(|k| k.0).min(),
        kernels.iter().map(|k| k.1).max(),
    ) else {
        return Err("CUPTI recorded no kernel for a timed run".into());
    };
    let ms = last.saturating_sub(first) as f64 * 1e-6;
    if ms > host_ms {
        return Err(format!(
            "CUPTI's kernels span {ms:.4} ms, more than the {host_ms:.4} ms the run took"
        ));
    }
    Ok(ms)
}

#[cfg(feature = "cuda")]
mod cupti;

#[cfg(test)]
mod tests {
    use super::checked_span;

    #[test]
    fn a_span_runs_from_the_first_start_to_the_last_end_within_the_run() {
        let kernels = [(2_000_000, 2_500_000), (1_000_000, 1_400_000)];
        let ms = checked_span(&kernels, 2.0).unwrap();
        assert!((ms - 1.5).abs() < 1e-12, "{ms}");
        assert!(checked_span(&[], 2.0).unwrap_err().contains("no kernel"));
        // Records spanning more than the run are not the run's.
        assert!(checked_span(&kernels, 1.0)
            .unwrap_err()
            .contains("more than"));
    }
}
