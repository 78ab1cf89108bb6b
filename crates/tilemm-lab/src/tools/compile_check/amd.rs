//! clang's AMDGPU resource remarks: SGPRs, VGPRs, scratch, spills, waves per SIMD.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{tool_error, ResourceUsage, Toolchain};
use crate::tools::compile_check::arch::{amd_occupancy, Arch};
use crate::Result;
use tilemm::plan::Plan;

/// Stands in for `<hip/hip_runtime.h>` so no ROCm installation is needed.
const HIP_SHIM: &str = include_str!("hip_shim.h");
/// Stand-ins for the half-precision headers the f16 and bf16 kernels include.
const HIP_FP16_SHIM: &str = include_str!("hip_fp16_shim.h");
const HIP_BF16_SHIM: &str = include_str!("hip_bf16_shim.h");
/// Device-library stand-ins for sources compiled against the real HIP headers (rocWMMA's).
const HIP_OCKL_SHIM: &str = include_str!("hip_ockl_shim.h");

const CLANG_HINT: &str =
    "install clang (Debian/Ubuntu: `apt-get install clang-15`) or pass its path";

pub(super) fn find_clang(tools: &Toolchain) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = match &tools.clang {
        Some(path) => vec![path.clone()],
        None => vec!["clang-15".into(), "clang".into()],
    };
    candidates
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or_else(|| tool_error("clang", CLANG_HINT))
}

/// The include directory of ROCm's real HIP headers, if installed (ROCm, or Debian's
/// `libamdhip64-dev`).
pub fn hip_headers() -> Option<PathBuf> {
    ["ROCM_PATH", "HIP_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("include"))
        .chain(["/opt/rocm/include".into(), "/usr/include".into()])
        .find(|dir| dir.join("hip/hip_runtime.h").is_file())
}

/// Whether `plan` on `arch` is compiled through rocWMMA: the tensor-core rung on CDNA
/// (wavefronts of 64), whose matrix cores CubeCL 0.10 reaches only that way.
pub fn through_rocwmma(plan: &Plan, arch: &Arch) -> bool {
    matches!(plan.config, tilemm::Config::Tensorcore(_))
        && arch.vendor == super::arch::Vendor::Amd
        && arch.warp_size == 64
}

/// Where a rocWMMA source's headers are: ROCm's HIP headers, and rocWMMA's (the ROCm install's
/// own, else the copy in tilemm's source tree, `third_party/rocwmma`, which matches Debian's
/// ROCm 5.2 HIP headers).
#[derive(Clone, Debug)]
pub struct RocWmmaHeaders {
    /// The include directory holding `hip/hip_runtime.h`.
    pub hip: PathBuf,
    /// The include directory holding `rocwmma/rocwmma.hpp`.
    pub rocwmma: PathBuf,
}

/// The headers rocWMMA sources compile against, if both are found.
pub fn rocwmma_headers() -> Option<RocWmmaHeaders> {
    let hip = hip_headers()?;
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../third_party/rocwmma/include");
    let rocwmma = [hip.clone(), vendored]
        .into_iter()
        .find(|dir| dir.join("rocwmma/rocwmma.hpp").is_file())?;
    let rocwmma = rocwmma.canonicalize().unwrap_or(rocwmma);
    Some(RocWmmaHeaders { hip, rocwmma })
}

/// Compiles `kernel` against the real HIP headers in `include` (syntax and types only: without
/// ROCm's device libraries the code generation would call into missing functions).
fn check_against_hip_headers(
    clang: &Path,
    arch: &Arch,
    kernel: &Path,
    include: &Path,
) -> Result<()> {
    let output = device_compile(clang, arch)
        .args(["-fsyntax-only", "-D__HIP_PLATFORM_AMD__"])
        .args(["-include", "__clang_hip_runtime_wrapper.h"])
        .arg("-I")
        .arg(include)
        .arg(kernel)
        .output()
        .map_err(|e| tool_error("clang", e))?;
    if output.status.success() {
        return Ok(());
    }
    Err(tool_error(
        "clang",
        format!(
            "against the HIP headers in {}: {}",
            include.display(),
            first_error(&output.stderr)
        ),
    ))
}

/// clang compiling HIP device code for `arch`, without ROCm's device libraries or headers.
fn device_compile(clang: &Path, arch: &Arch) -> Command {
    let mut command = Command::new(clang);
    command
        .args(["-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc"])
        .arg(format!("--offload-arch={}", arch.name));
    command
}

/// The first line of a compiler's output that reports an error.
fn first_error(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("compilation failed")
        .to_string()
}

/// A scratch directory that removes itself.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> std::io::Result<Self> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tilemm-hip-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("hip"))?;
        Ok(ScratchDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The value of remark `name:` (e.g. `VGPRs:`) in clang's output.
fn remark(stderr: &str, name: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let rest = line.split("remark:").nth(1)?.trim_start();
        let value = rest.strip_prefix(name)?.trim_start();
        value.split_whitespace().next()?.parse().ok()
    })
}

/// Whether every `#include <hip/…>` of `source` exists under `include`.
fn has_every_include(source: &str, include: &Path) -> bool {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#include <")?.strip_suffix('>'))
        .filter(|h| h.starts_with("hip/"))
        .all(|h| include.join(h).exists())
}

pub(super) fn check(
    plan: &Plan,
    precision: tilemm::problem::Precision,
    arch: &Arch,
    source: &str,
    tools: &Toolchain,
) -> Result<ResourceUsage> {
    let clang = find_clang(tools)?;
    let io = |e: std::io::Error| tool_error("clang", e);
    let dir = ScratchDir::new().map_err(io)?;
    for (name, text) in [
        ("hip_runtime.h", HIP_SHIM),
        ("hip_fp16.h", HIP_FP16_SHIM),
        ("hip_bf16.h", HIP_BF16_SHIM),
    ] {
        std::fs::write(dir.path().join("hip").join(name), text).map_err(io)?;
    }
    let kernel = dir.path().join("kernel.hip");
    std::fs::write(&kernel, source).map_err(io)?;
    let mut command = device_compile(&clang, arch);
    command.args(["-O3", "-S", "-Rpass-analysis=kernel-resource-usage"]);
    // rocWMMA needs the real HIP headers' types (the stand-ins' half is not HIP's class), and
    // C++17; the device library's work-item queries and fences come from a stand-in instead.
    let rocwmma = source.contains("<rocwmma/rocwmma.hpp>");
    if rocwmma {
        let headers = rocwmma_headers()
            .ok_or_else(|| tool_error("clang", "rocWMMA's or ROCm's HIP headers are not found"))?;
        let shim = dir.path().join("tilemm_ockl.h");
        std::fs::write(&shim, HIP_OCKL_SHIM).map_err(io)?;
        command
            .args(["-std=c++17", "-D__HIP_PLATFORM_AMD__"])
            .args(["-include", "__clang_hip_runtime_wrapper.h"])
            .args(["-include", "hip/hip_runtime.h", "-include"])
            .arg(&shim)
            .arg("-I")
            .arg(&headers.hip)
            .arg("-I")
            .arg(&headers.rocwmma);
    } else {
        command.arg("-I").arg(dir.path());
    }
    let start = std::time::Instant::now();
    let output = command
        .arg("-o")
        .arg(dir.path().join("kernel.s"))
        .arg(&kernel)
        .output()
        .map_err(io)?;
    let compile_seconds = start.elapsed().as_secs_f64();
    if !output.status.success() {
        return Err(tool_error(
            "clang",
            format!(
                "{} for {}: {}",
                plan,
                arch.name,
                first_error(&output.stderr)
            ),
        ));
    }
    // Older HIP headers (Debian's ROCm 5) lack hip_bf16.h: a source including a header they
    // lack is checked against the stand-ins only.
    if let Some(include) = hip_headers().filter(|dir| !rocwmma && has_every_include(source, dir)) {
        check_against_hip_headers(&clang, arch, &kernel, &include)?;
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let value = |name: &str| {
        remark(&stderr, name).ok_or_else(|| {
            tool_error(
                "clang",
                format!("no '{name}' remark for {} on {}", plan, arch.name),
            )
        })
    };
    let vgprs = value("VGPRs:")?;
    let sgprs = value("SGPRs:")?;
    let scratch = value("ScratchSize [bytes/lane]:")?;
    let spills = value("VGPRs Spill:")? + value("SGPRs Spill:")? + scratch;
    let waves = value("Occupancy [waves/SIMD]:")? as u32;
    let static_lds = value("LDS Size [bytes/block]:")?;
    let threads = plan.threads_per_block();
    let dynamic_lds = plan.shared_bytes(precision) as u64;
    let (occupancy, limit) = amd_occupancy(arch, threads, waves, static_lds + dynamic_lds);
    // The assembly, for the main loop's mix (a compiler that wrote none gives no figure).
    let assembly = std::fs::read_to_string(dir.path().join("kernel.s")).unwrap_or_default();
    // With `--sass`, the assembly and the HIP source it came from, side by side.
    if let Some(out) = tools.sass_dir.as_ref().filter(|_| !assembly.is_empty()) {
        let name = format!("{}_{}_{}", plan, arch.name, precision.short_name());
        let stem = out.join(name.replace([':', '='], "_"));
        for (extension, text) in [("s", &assembly[..]), ("hip", source)] {
            let path = stem.with_extension(extension);
            std::fs::write(&path, text)
                .map_err(|e| tool_error("clang", format!("writing {}: {e}", path.display())))?;
        }
    }
    Ok(ResourceUsage {
        plan: *plan,
        precision,
        arch: arch.name.to_string(),
        registers: vgprs as u32,
        scalar_registers: Some(sgprs as u32),
        spills,
        static_shared_bytes: static_lds,
        dynamic_shared_bytes: dynamic_lds,
        threads_per_block: threads,
        occupancy: (occupancy, arch.max_warps),
        occupancy_limit: limit,
        main_loop: super::loops::amdgpu_main_loop(&assembly),
        matrix_ops: (!assembly.is_empty()).then(|| super::loops::amdgpu_matrix_ops(&assembly)),
        compile_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::remark;

    #[test]
    fn clang_remarks_are_parsed() {
        let stderr = "k.hip:19:1: remark:     SGPRs: 21 [-Rpass-analysis=kernel-resource-usage]\n\
                      k.hip:19:1: remark:     VGPRs: 28 [-Rpass-analysis=kernel-resource-usage]\n\
                      k.hip:19:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]\n\
                      k.hip:19:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]";
        assert_eq!(remark(stderr, "SGPRs:"), Some(21));
        assert_eq!(remark(stderr, "VGPRs:"), Some(28));
        assert_eq!(remark(stderr, "VGPRs Spill:"), Some(3));
        assert_eq!(remark(stderr, "ScratchSize [bytes/lane]:"), Some(0));
        assert_eq!(remark(stderr, "AGPRs:"), None);
    }
}
