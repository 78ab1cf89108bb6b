//! Whether a product goes to the GPU or stays on the CPU, decided once per shape class for the
//! process: by the measured route model ([`super::model`]) where both routes have been timed at
//! the product's size, else by the cost model of the link
//! ([`crate::runtime::link::offload`]).

use std::sync::{Mutex, OnceLock};

use super::memo::Memo;
use super::model::{self, Model};
use super::sessions::{self, Opened};

use crate::device::{DeviceInfo, DeviceKind};
use crate::error::Result;
use crate::problem::Problem;
use crate::runtime::backend::{list_devices, Backend, GpuSession};
use crate::tune;

/// The cost model's verdict per shape class and device, by tuning key: `Some(why)` keeps the
/// class on the CPU.
static ROUTED: Memo<String, Option<String>> = Memo::new();

/// Why `problem` stays on the CPU rather than going to `gpu` with its transfers, or `None`:
/// the class's first call decides for the process, so that a given product always takes one
/// route.
pub fn stays_home(gpu: &GpuSession, problem: &Problem) -> Result<Option<String>> {
    let key = tune::TuneKey::new(gpu, problem).text();
    if let Some(why) = ROUTED.get(&key) {
        return Ok(why);
    }
    let why = match measured_verdict(gpu, problem) {
        Some(why) => why,
        None => link_verdict(gpu, problem)?,
    };
    Ok(ROUTED.keep(key, why))
}

/// The GPU products go to when no device is named: the best one found, unless every device is
/// a CPU emulation (lavapipe, slower than tilemm's CPU path: naming its backend uses it), or
/// why there is none. Emulations are recognised before they are opened: an open lavapipe keeps
/// threads that slow the CPU path by a tenth.
pub fn auto_gpu() -> Result<Opened> {
    // Looked for once per process: listing adapters costs milliseconds, and every call of the
    // default route asks.
    static EMULATED_ONLY: OnceLock<Option<String>> = OnceLock::new();
    let emulated_only = EMULATED_ONLY.get_or_init(|| {
        let found: Vec<_> = Backend::GPU
            .into_iter()
            .filter(|b| b.is_built())
            .flat_map(|b| list_devices(b).into_iter().map(move |d| (b, d)))
            .collect();
        let emulated = |(_, d): &(Backend, DeviceInfo)| d.kind == DeviceKind::Cpu;
        let (backend, device) = found.first().filter(|_| found.iter().all(emulated))?;
        Some(format!(
            "the only GPU adapter, {}, is a CPU emulation, slower than the CPU path (name its \
             backend to use it: {}={backend})",
            device.name,
            super::DEVICE_VARIABLE
        ))
    });
    if let Some(why) = emulated_only {
        return Ok(Err(why.clone()));
    }
    match sessions::session(None, None)? {
        Ok(gpu) if gpu.info().kind == DeviceKind::Cpu => Ok(Err(format!(
            "the only GPU adapter, {}, is a CPU emulation, slower than the CPU path (name its \
             backend to use it)",
            gpu.info().name
        ))),
        opened => Ok(opened),
    }
}

/// The link's cost model's verdict for `problem` ([`crate::runtime::link::offload`]):
/// `Some(why)` keeps it on the CPU.
fn link_verdict(gpu: &GpuSession, problem: &Problem) -> Result<Option<String>> {
    let link = gpu.link()?;
    let peak =
        crate::device::peak::datasheet(&gpu.info().name, problem.precision).map(|p| p.gflops);
    let cpu = crate::host::cpu::measured_gflops()?;
    let verdict = crate::runtime::link::offload(problem, &link, peak, cpu);
    Ok((!verdict.device).then(|| {
        format!(
            "the CPU is expected to be faster for this size ({:.3} ms at {cpu:.0} GFLOPS, against \
             {:.3} ms on {} with its transfers at {:.1} GB/s up and {:.1} GB/s down)",
            verdict.cpu_s * 1e3,
            verdict.device_s * 1e3,
            gpu.info().name,
            link.upload_gb_s,
            link.download_gb_s
        )
    }))
}

/// The process's measured route model, loaded from tilemm's cache (`routes.json`) by the first
/// caller, with the notes of its loading (a file that could not be used).
pub fn model() -> &'static (Mutex<Model>, Vec<String>) {
    static MODEL: OnceLock<(Mutex<Model>, Vec<String>)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let mut notes = Vec::new();
        let path = crate::runtime::cache::dir().map(|d| d.join("routes.json"));
        let model = Model::load(path, &mut notes);
        (Mutex::new(model), notes)
    })
}

/// The route model's name for tilemm's CPU path on this machine.
pub fn cpu_id() -> String {
    format!(
        "cpu {}, {} threads",
        crate::host::cpu::CPU_GEMM,
        crate::host::cpu::threads()
    )
}

/// The route model's name for `gpu`: backend, device and driver.
pub fn gpu_id(gpu: &GpuSession) -> String {
    format!(
        "gpu {} {} ({})",
        gpu.backend(),
        gpu.info().name,
        gpu.info().driver
    )
}

/// The measured verdict for `problem`'s size: `Some(Some(why))` keeps it on the CPU,
/// `Some(None)` sends it to `gpu`, `None` where the two routes have not both been timed in
/// full at its size.
fn measured_verdict(gpu: &GpuSession, problem: &Problem) -> Option<Option<String>> {
    let bucket = model::bucket(problem.flops() / 2.0);
    let precision = problem.precision.to_string();
    let model = model().0.lock().unwrap_or_else(|e| e.into_inner());
    let timed = |id: &str| {
        model
            .measured(id, &precision, bucket)
            .filter(|m| m.samples >= model::SAMPLES)
    };
    let (cpu, device) = (timed(&cpu_id())?, timed(&gpu_id(gpu))?);
    Some((cpu.ns_per_fma < device.ns_per_fma).then(|| {
        format!(
            "measured faster on the CPU at this size ({:.4} ns per multiply-add, against {:.4} \
             on {})",
            cpu.ns_per_fma,
            device.ns_per_fma,
            gpu.info().name
        )
    }))
}
