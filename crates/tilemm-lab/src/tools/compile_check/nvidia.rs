//! NVRTC with `-Xptxas=-v`: the registers, spills and shared memory ptxas allocated.

use std::ffi::CString;
use std::path::PathBuf;

use cudarc::nvrtc::{result, sys};

use super::{number_before, tool_error, ResourceUsage, Toolchain};
use crate::tools::compile_check::arch::{nvidia_occupancy, Arch};
use crate::tools::compile_check::loops::sass_main_loop;
use crate::Result;
use tilemm::plan::Plan;

const NVRTC_HINT: &str = "libnvrtc.so not found: install the CUDA toolkit, or \
    `pip install nvidia-cuda-nvrtc-cu12` and add its nvidia/cuda_nvrtc/lib to LD_LIBRARY_PATH";

/// Directories that may hold `cuda_runtime.h`, which CubeCL's CUDA source includes.
fn include_candidates(tools: &Toolchain) -> Vec<PathBuf> {
    let mut dirs = tools.cuda_include.clone();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = std::env::var_os(var) {
            dirs.push(PathBuf::from(root).join("include"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    // The PyPI wheels: nvidia/cuda_nvrtc/lib on LD_LIBRARY_PATH, headers in nvidia/cuda_runtime.
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(&paths) {
            if dir.ends_with("nvidia/cuda_nvrtc/lib") {
                if let Some(nvidia) = dir.parent().and_then(|p| p.parent()) {
                    dirs.push(nvidia.join("cuda_runtime/include"));
                }
            }
        }
    }
    dirs
}

/// NVRTC is loadable and `cuda_runtime.h` found; returns the include directory.
pub(super) fn preflight(tools: &Toolchain) -> Result<PathBuf> {
    // SAFETY: only tries to dlopen libnvrtc.
    if !unsafe { sys::is_culib_present() } {
        return Err(tool_error("NVRTC", NVRTC_HINT));
    }
    let candidates = include_candidates(tools);
    candidates
        .iter()
        .find(|dir| dir.join("cuda_runtime.h").is_file())
        .cloned()
        .ok_or_else(|| {
            tool_error(
                "NVRTC",
                format!(
                    "cuda_runtime.h not found in {:?}: install the CUDA toolkit or \
                     `pip install nvidia-cuda-runtime-cu12`, or pass its include directory",
                    candidates
                ),
            )
        })
}

/// A fixed kernel, no headers, whose compile time measures how fast this machine compiles
/// (`super::Pace`): an 8×8 micro-tile of FMAs over 32 unrolled steps of shared memory, about
/// what ptxas spends its time on in tilemm's kernels, and unchanged when they change.
const PACE_PROBE: &str = r#"
extern "C" __global__ void probe(const float* __restrict__ a, const float* __restrict__ b,
                                 float* c, int n) {
  __shared__ float sa[2][1024];
  __shared__ float sb[2][1024];
  float acc[8][8];
  #pragma unroll
  for (int i = 0; i < 8; i++)
    #pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  int t = threadIdx.x;
  for (int k0 = 0; k0 < n; k0 += 8) {
    int s = (k0 / 8) & 1;
    #pragma unroll
    for (int q = 0; q < 4; q++) {
      sa[s][t + 256 * q] = a[(k0 + q) * 1024 + t + blockIdx.x * 256];
      sb[s][t + 256 * q] = b[(k0 + q) * 1024 + t + blockIdx.y * 256];
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < 32; k++) {
      float ra[8], rb[8];
      #pragma unroll
      for (int i = 0; i < 8; i++) {
        ra[i] = sa[s][(k * 8 + i * 16 + t) & 1023];
        rb[i] = sb[s][(k * 16 + i + t * 8) & 1023];
      }
      #pragma unroll
      for (int i = 0; i < 8; i++)
        #pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
  }
  #pragma unroll
  for (int i = 0; i < 8; i++)
    #pragma unroll
    for (int j = 0; j < 8; j++) c[(blockIdx.x * 64 + i) * 1024 + t * 8 + j] = acc[i][j];
}
"#;

/// How long NVRTC takes for [`PACE_PROBE`] for sm_90: the shortest of three compiles, the
/// others' noise left out.
pub(super) fn pace_probe_seconds() -> Result<f64> {
    // SAFETY: only tries to dlopen libnvrtc (cudarc panics on a call without it).
    if !unsafe { sys::is_culib_present() } {
        return Err(tool_error("NVRTC", NVRTC_HINT));
    }
    let source = CString::new(PACE_PROBE).map_err(|e| tool_error("NVRTC", e))?;
    let options = ["--gpu-architecture=sm_90".to_string()];
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let program = result::create_program(&source, None).map_err(|e| tool_error("NVRTC", e))?;
        let start = std::time::Instant::now();
        // SAFETY: `program` was just created and is destroyed once, after the compile.
        let compiled = unsafe {
            let compiled = result::compile_program(program, &options);
            let _ = result::destroy_program(program);
            compiled
        };
        let seconds = start.elapsed().as_secs_f64();
        compiled.map_err(|e| tool_error("NVRTC", format!("the pace probe: {e:?}")))?;
        best = best.min(seconds);
    }
    Ok(best)
}

pub(super) fn check(
    plan: &Plan,
    precision: tilemm::problem::Precision,
    arch: &Arch,
    source: &str,
    tools: &Toolchain,
) -> Result<ResourceUsage> {
    let include = preflight(tools)?;
    let source = CString::new(source).map_err(|e| tool_error("NVRTC", e))?;
    let program = result::create_program(&source, None).map_err(|e| tool_error("NVRTC", e))?;
    let mut options = vec![
        format!("--gpu-architecture={}", arch.name),
        "-Xptxas=-v".to_string(),
        format!("--include-path={}", include.display()),
    ];
    // The PyPI wheels keep `crt/` (which `mma.h`, the WMMA API, includes) in nvcc's wheel, and
    // libcu++ (`cuda/barrier`, `nv/target`: the mma rung's pipeline) in CCCL's.
    if let Some(nvidia) = include.parent().and_then(|p| p.parent()) {
        for (wheel, header) in [("cuda_nvcc", "crt/mma.h"), ("cuda_cccl", "cuda/barrier")] {
            let dir = nvidia.join(wheel).join("include");
            if !include.join(header).is_file() && dir.join(header).is_file() {
                options.push(format!("--include-path={}", dir.display()));
            }
        }
    }
    // SAFETY: `program` was just created and is destroyed once, after its log is read.
    let start = std::time::Instant::now();
    let (compiled, log, cubin) = unsafe {
        let compiled = result::compile_program(program, &options);
        let log = result::get_program_log(program);
        let cubin = compiled.is_ok().then(|| cubin_of(program)).flatten();
        let _ = result::destroy_program(program);
        (compiled, log, cubin)
    };
    let compile_seconds = start.elapsed().as_secs_f64();
    let log: String = log
        .unwrap_or_default()
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8 as char)
        .collect();
    if compiled.is_err() {
        let first_error = log
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("compilation failed with no log");
        return Err(tool_error(
            "NVRTC",
            format!("{} for {}: {first_error}", plan, arch.name),
        ));
    }
    let registers = number_before(&log, " registers")
        .ok_or_else(|| tool_error("NVRTC", format!("no ptxas register report in: {log}")))?;
    let spills = number_before(&log, " bytes spill stores").unwrap_or(0)
        + number_before(&log, " bytes spill loads").unwrap_or(0);
    let static_shared = number_before(&log, " bytes smem").unwrap_or(0);
    let shape_threads = plan.threads_per_block();
    let dynamic_shared = plan.shared_bytes(precision) as u64;
    let (warps, limit) = nvidia_occupancy(
        arch,
        shape_threads,
        registers as u32,
        static_shared + dynamic_shared,
    );
    let sass = cubin.and_then(|c| disassemble(&c));
    if let (Some(dir), Some(listing)) = (&tools.sass_dir, &sass) {
        let name = format!("{}_{}_{}.sass", plan, arch.name, precision.short_name());
        let path = dir.join(name.replace([':', '='], "_"));
        std::fs::write(&path, listing)
            .map_err(|e| tool_error("nvdisasm", format!("writing {}: {e}", path.display())))?;
    }
    Ok(ResourceUsage {
        plan: *plan,
        precision,
        arch: arch.name.to_string(),
        registers: registers as u32,
        scalar_registers: None,
        spills,
        static_shared_bytes: static_shared,
        dynamic_shared_bytes: dynamic_shared,
        threads_per_block: shape_threads,
        occupancy: (warps, arch.max_warps),
        occupancy_limit: limit,
        main_loop: sass.as_deref().and_then(sass_main_loop),
        matrix_ops: sass.as_deref().map(super::loops::sass_matrix_ops),
        compile_seconds,
    })
}

/// The machine code NVRTC built (a cubin, for a real `sm_XX` target).
///
/// # Safety
/// `program` is a compiled NVRTC program.
unsafe fn cubin_of(program: sys::nvrtcProgram) -> Option<Vec<u8>> {
    let mut size = 0usize;
    if sys::nvrtcGetCUBINSize(program, &mut size).result().is_err() || size == 0 {
        return None;
    }
    let mut cubin = vec![0u8; size];
    sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast())
        .result()
        .ok()?;
    Some(cubin)
}

/// `nvdisasm`: on PATH (`scripts/setup` puts the PyPI wheel `nvidia-cuda-nvdisasm` there) or
/// in the CUDA toolkit.
fn nvdisasm() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("nvdisasm"))
                .collect()
        })
        .unwrap_or_default();
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvdisasm"));
    candidates.into_iter().find(|p| p.is_file())
}

/// The SASS of `cubin`, or `None` without a working nvdisasm.
fn disassemble(cubin: &[u8]) -> Option<String> {
    let tool = nvdisasm()?;
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("kernel.cubin");
    std::fs::write(&path, cubin).ok()?;
    let out = std::process::Command::new(tool)
        .arg("-c")
        .arg(&path)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
