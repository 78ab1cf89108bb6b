//! Whether a product goes to the GPU or stays on the CPU: the cost model of the link
//! ([`crate::runtime::link::offload`]), decided once per shape class for the process.

use std::sync::Mutex;

use crate::error::Result;
use crate::problem::Problem;
use crate::runtime::backend::GpuSession;
use crate::tune;

/// The cost model's verdict per shape class and device, by tuning key: `Some(why)` keeps the
/// class on the CPU.
static ROUTED: Mutex<Vec<(String, Option<String>)>> = Mutex::new(Vec::new());

/// Why `problem` stays on the CPU rather than going to `gpu` with its transfers, or `None`:
/// the class's first call decides for the process, so that a given product always takes one
/// route.
pub fn stays_home(gpu: &GpuSession, problem: &Problem) -> Result<Option<String>> {
    let key = tune::TuneKey::new(gpu, problem).text();
    let known = |routed: &Vec<(String, Option<String>)>| {
        routed
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, why)| why.clone())
    };
    if let Some(why) = known(&ROUTED.lock().unwrap_or_else(|e| e.into_inner())) {
        return Ok(why);
    }
    let link = gpu.link()?;
    let peak =
        crate::device::peak::datasheet(&gpu.info().name, problem.precision).map(|p| p.gflops);
    let cpu = crate::host::cpu::measured_gflops()?;
    let verdict = crate::runtime::link::offload(problem, &link, peak, cpu);
    let why = (!verdict.device).then(|| {
        format!(
            "the CPU is expected to be faster for this size ({:.3} ms at {cpu:.0} GFLOPS, against \
             {:.3} ms on {} with its transfers at {:.1} GB/s up and {:.1} GB/s down)",
            verdict.cpu_s * 1e3,
            verdict.device_s * 1e3,
            gpu.info().name,
            link.upload_gb_s,
            link.download_gb_s
        )
    });
    let mut routed = ROUTED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(decided) = known(&routed) {
        return Ok(decided);
    }
    routed.push((key, why.clone()));
    Ok(why)
}
