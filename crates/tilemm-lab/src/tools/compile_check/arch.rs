//! The architectures the compile check targets and the limits that turn resource use into
//! occupancy (NVIDIA's CUDA occupancy tables; AMD's CDNA and RDNA ISA guides).

use std::fmt;
use std::str::FromStr;

use tilemm::device::{DeviceInfo, DeviceKind, DeviceLimits, TypeSupport};
use tilemm::types::{DType, MatrixUnit};

/// Who makes the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// CUDA, `sm_XY`.
    Nvidia,
    /// ROCm/HIP, `gfxNNNN`.
    Amd,
}

/// A GPU architecture and its occupancy limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arch {
    /// The name compilers take: `sm_80`, `gfx90a`.
    pub name: &'static str,
    /// NVIDIA or AMD.
    pub vendor: Vendor,
    /// Threads per warp (wavefront).
    pub warp_size: u32,
    /// Resident warps per SM (NVIDIA) or waves per SIMD (AMD).
    pub max_warps: u32,
    /// Resident blocks per SM (NVIDIA).
    pub max_blocks: u32,
    /// 32-bit registers per SM (NVIDIA).
    pub registers: u32,
    /// Registers are allocated per warp in multiples of this (NVIDIA).
    pub register_granularity: u32,
    /// Shared memory per SM (NVIDIA) or LDS per CU (AMD), in bytes.
    pub shared_bytes: u64,
}

const fn nvidia(name: &'static str, shared_kib: u64, max_warps: u32, max_blocks: u32) -> Arch {
    Arch {
        name,
        vendor: Vendor::Nvidia,
        warp_size: 32,
        max_warps,
        max_blocks,
        registers: 65536,
        register_granularity: 256,
        shared_bytes: shared_kib * 1024,
    }
}

const fn amd(name: &'static str, wave: u32, max_waves: u32) -> Arch {
    Arch {
        name,
        vendor: Vendor::Amd,
        warp_size: wave,
        max_warps: max_waves,
        max_blocks: 0,
        registers: 0,
        register_granularity: 0,
        // 64 KiB of LDS per CU (per CU in RDNA's CU mode).
        shared_bytes: 64 * 1024,
    }
}

/// The architectures CI checks: Ampere and Hopper; CDNA2 (MI200), CDNA3 (MI300), RDNA3.
pub const DEFAULT_ARCHS: [&str; 5] = ["sm_80", "sm_90", "gfx90a", "gfx940", "gfx1100"];

/// Every architecture the check knows.
pub const KNOWN: [Arch; 8] = [
    nvidia("sm_75", 64, 32, 16),
    nvidia("sm_80", 164, 64, 32),
    nvidia("sm_86", 100, 48, 16),
    nvidia("sm_89", 100, 48, 24),
    nvidia("sm_90", 228, 64, 32),
    amd("gfx90a", 64, 8),
    amd("gfx940", 64, 8),
    amd("gfx1100", 32, 16),
];

impl FromStr for Arch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KNOWN.iter().find(|a| a.name == s).cloned().ok_or_else(|| {
            let names: Vec<_> = KNOWN.iter().map(|a| a.name).collect();
            format!(
                "unknown architecture '{s}' (choose from: {})",
                names.join(", ")
            )
        })
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Resident warps per SM on NVIDIA and the resource that limits them.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn nvidia_occupancy(
    arch: &Arch,
    threads_per_block: u32,
    registers_per_thread: u32,
    shared_per_block: u64,
) -> (u32, &'static str) {
    let warps_per_block = threads_per_block.div_ceil(arch.warp_size);
    let regs_per_warp = (registers_per_thread.max(1) * arch.warp_size)
        .div_ceil(arch.register_granularity)
        * arch.register_granularity;
    let by_shared = arch
        .shared_bytes
        .checked_div(shared_per_block)
        .map_or(u32::MAX, |blocks| blocks.min(u64::from(u32::MAX)) as u32);
    let limits = [
        (arch.max_warps / warps_per_block, "threads"),
        (arch.max_blocks, "blocks"),
        (
            arch.registers / (regs_per_warp * warps_per_block),
            "registers",
        ),
        (by_shared, "shared memory"),
    ];
    let (blocks, limit) = limits
        .into_iter()
        .min_by_key(|(b, _)| *b)
        .expect("four limits");
    (blocks * warps_per_block, limit)
}

/// Waves per SIMD on AMD: the compiler's figure (registers, workgroup size), further limited
/// by the LDS the launch adds.
pub(crate) fn amd_occupancy(
    arch: &Arch,
    threads_per_block: u32,
    compiler_waves: u32,
    shared_per_block: u64,
) -> (u32, &'static str) {
    let waves_per_block = threads_per_block.div_ceil(arch.warp_size);
    if shared_per_block == 0 {
        return (compiler_waves, "registers/waves");
    }
    let blocks_per_cu = (arch.shared_bytes / shared_per_block).min(u64::from(u32::MAX)) as u32;
    // A CU has four SIMDs that share its LDS.
    let by_lds = blocks_per_cu * waves_per_block / 4;
    if by_lds < compiler_waves {
        (by_lds, "LDS")
    } else {
        (compiler_waves, "registers/waves")
    }
}

impl Arch {
    /// The architecture as a device for [`tilemm::plan::check::runnable`]: its plane width and
    /// types, the matrix units and instructions CubeCL reaches on it (WMMA and rocWMMA
    /// fragments of 16×16×16, f16 everywhere and bf16 from sm_80; `mma.sync` m16n8k16 and
    /// `cp.async` from sm_80), and no limits on a block: the compile check reports what a
    /// block uses, it does not launch one.
    pub fn device(&self) -> DeviceInfo {
        let nvidia_sm = match self.vendor {
            Vendor::Nvidia => self.name.trim_start_matches("sm_").parse::<u32>().ok(),
            Vendor::Amd => None,
        };
        let ampere = nvidia_sm.is_some_and(|sm| sm >= 80);
        let unit = |input: DType, (m, n, k): (u32, u32, u32)| MatrixUnit {
            a: input,
            b: input,
            cd: DType::F32,
            m,
            n,
            k,
        };
        let inputs: &[DType] = if nvidia_sm == Some(75) {
            &[DType::F16]
        } else {
            &[DType::F16, DType::BF16]
        };
        let fragments: &[(u32, u32, u32)] = match self.vendor {
            Vendor::Nvidia => &[(16, 16, 16), (32, 8, 16), (8, 32, 16)],
            Vendor::Amd => &[(16, 16, 16)],
        };
        let matrix_units = inputs
            .iter()
            .flat_map(|&i| fragments.iter().map(move |&f| unit(i, f)))
            .collect();
        let register_mma = if ampere {
            vec![
                unit(DType::F16, (16, 8, 16)),
                unit(DType::BF16, (16, 8, 16)),
                unit(DType::TF32, (16, 8, 8)),
            ]
        } else {
            Vec::new()
        };
        DeviceInfo {
            index: 0,
            name: self.name.to_string(),
            kind: DeviceKind::DiscreteGpu,
            api: match self.vendor {
                Vendor::Nvidia => "CUDA",
                Vendor::Amd => "HIP",
            }
            .into(),
            driver: String::new(),
            timestamps: true,
            limits: DeviceLimits {
                max_shared_bytes: usize::MAX,
                max_units_per_cube: u32::MAX,
                max_cube_dim: [u32::MAX; 3],
                max_cube_count: [u32::MAX; 3],
                max_binding_bytes: u64::MAX,
                max_buffer_bytes: u64::MAX,
                memory_bytes: None,
                multiprocessors: None,
            },
            types: TypeSupport {
                f16: true,
                bf16: true,
                f64: true,
                tf32: ampere,
            },
            plane_size: self.warp_size,
            matrix_units,
            register_mma,
            copy_async: ampere,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_occupancy_follows_the_binding_limit() {
        let sm80: Arch = "sm_80".parse().unwrap();
        // 256 threads, 32 registers, 2 KiB shared: 8 blocks of 8 warps = 64 warps, full.
        assert_eq!(nvidia_occupancy(&sm80, 256, 32, 2048), (64, "threads"));
        // 128 registers per thread: 65536 / (128·32·8) = 2 blocks = 16 warps.
        assert_eq!(nvidia_occupancy(&sm80, 256, 128, 0), (16, "registers"));
        // 64 KiB of shared per block: 164 / 64 = 2 blocks.
        assert_eq!(
            nvidia_occupancy(&sm80, 256, 32, 64 * 1024),
            (16, "shared memory")
        );
    }

    #[test]
    fn amd_occupancy_is_capped_by_lds() {
        let gfx90a: Arch = "gfx90a".parse().unwrap();
        assert_eq!(amd_occupancy(&gfx90a, 256, 8, 2048), (8, "registers/waves"));
        // 32 KiB per block: 2 blocks per CU of 4 waves over 4 SIMDs = 2 waves per SIMD.
        assert_eq!(amd_occupancy(&gfx90a, 256, 8, 32 * 1024), (2, "LDS"));
        assert!("gfx9000".parse::<Arch>().is_err());
    }
}
