//! What a device is and the limits that decide whether a GEMM fits on it.

pub mod peak;

use serde::Serialize;

use crate::error::{Error, Result};
pub use crate::types::MatrixUnit;
use crate::types::{DType, Precision};

/// The kind of adapter, as the driver reports it; selection prefers them in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// A GPU with its own memory.
    DiscreteGpu,
    /// A GPU sharing memory with the CPU.
    IntegratedGpu,
    /// A GPU behind a hypervisor.
    VirtualGpu,
    /// Anything the driver does not classify.
    Other,
    /// A driver that runs shaders on the CPU, such as Mesa's lavapipe.
    Cpu,
}

impl DeviceKind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::DiscreteGpu => "discrete GPU",
            DeviceKind::IntegratedGpu => "integrated GPU",
            DeviceKind::VirtualGpu => "virtual GPU",
            DeviceKind::Other => "other",
            DeviceKind::Cpu => "CPU adapter",
        }
    }
}

/// The limits that matter for GEMM, as the device reports them (not a runtime's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceLimits {
    /// Shared (workgroup) memory per cube, in bytes.
    pub max_shared_bytes: usize,
    /// Units (invocations, threads) per cube.
    pub max_units_per_cube: u32,
    /// Units per cube along x, y, z.
    pub max_cube_dim: [u32; 3],
    /// Cubes per dispatch along x, y, z.
    pub max_cube_count: [u32; 3],
    /// Largest buffer a kernel can bind, in bytes.
    pub max_binding_bytes: u64,
    /// Largest buffer that can be allocated, in bytes.
    pub max_buffer_bytes: u64,
    /// The device's memory, in bytes, where the runtime tells (CUDA, HIP; wgpu does not).
    pub memory_bytes: Option<u64>,
    /// Streaming multiprocessors (compute units), where the runtime tells (CUDA, HIP): how
    /// many cubes a launch needs to keep every one busy.
    pub multiprocessors: Option<u32>,
}

/// The element types a device computes with, beyond f32 (which every device has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TypeSupport {
    /// Arithmetic and buffers of f16 (WGSL `shader-f16`, Vulkan `shaderFloat16`).
    pub f16: bool,
    /// A bf16 type. Without one, tilemm packs bf16 inputs two to a 32-bit word, widens them
    /// in the kernel and keeps C in f32.
    pub bf16: bool,
    /// Arithmetic and buffers of f64 (Vulkan `shaderFloat64`; WGSL has none).
    pub f64: bool,
    /// Matrix units that multiply tf32 (NVIDIA sm_80 and later, through CUDA).
    pub tf32: bool,
}

impl TypeSupport {
    /// Refuses `precision` when `device` lacks one of its types, naming what is missing.
    pub fn check(&self, precision: Precision, device: &str) -> Result<()> {
        for dtype in [precision.input, precision.accumulate, precision.output] {
            let missing = match dtype {
                DType::F16 if !self.f16 => "16-bit floats (shader-f16 / shaderFloat16)",
                DType::F64 if !self.f64 => {
                    "64-bit floats (shaderFloat64; WGSL has none, so wgpu needs a Vulkan adapter on \
                     CubeCL's SPIR-V path)"
                }
                DType::TF32 if !self.tf32 => return Err(no_tf32(device)),
                _ => continue,
            };
            return Err(Error::TypeUnavailable {
                dtype,
                device: device.to_string(),
                missing,
                remedy: "the cpu backend computes every dtype",
            });
        }
        Ok(())
    }
}

/// The refusal of tf32 on `device` (a GPU without tf32 matrix units, or the CPU).
pub fn no_tf32(device: &str) -> Error {
    Error::TypeUnavailable {
        dtype: DType::TF32,
        device: device.to_string(),
        missing: "tf32 matrix units (NVIDIA tensor cores from sm_80 on, in a build with the cuda \
                  feature)",
        remedy: "f32 is computed on every device",
    }
}

/// One device a GEMM can run on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// Position in `tilemm devices`, the value `--device` takes.
    pub index: usize,
    /// The adapter's name.
    pub name: String,
    /// Discrete, integrated, CPU, ...
    pub kind: DeviceKind,
    /// The graphics or compute API: Vulkan, Metal, Dx12, CUDA, ...
    pub api: String,
    /// The driver and its version, where reported.
    pub driver: String,
    /// Whether kernel times can come from device timestamps.
    pub timestamps: bool,
    /// Its limits.
    pub limits: DeviceLimits,
    /// Element types beyond f32 (known once the device is open; all false in listings).
    pub types: TypeSupport,
    /// Units per plane (warp, wavefront, subgroup), where every plane has that many and plane
    /// operations (broadcasts) are available; 0 otherwise. (In listings, which do not open the
    /// device: the largest width where plane operations exist.)
    pub plane_size: u32,
    /// The matrix units it registers for CubeCL's `cmma` (fragments the runtime lays out;
    /// known once the device is open; none in listings).
    pub matrix_units: Vec<MatrixUnit>,
    /// The matrix units it registers for manual MMA (`mma.sync` on CUDA: fragments in
    /// registers the kernel lays out itself; known once the device is open).
    pub register_mma: Vec<MatrixUnit>,
    /// Asynchronous copies from global to shared memory (`cp.async`, CUDA sm_80 and later).
    pub copy_async: bool,
}

/// A device with the given index and kind and no limits, for tests of selection and planning.
#[doc(hidden)]
pub fn test_device(index: usize, kind: DeviceKind) -> DeviceInfo {
    DeviceInfo {
        index,
        name: format!("dev{index}"),
        kind,
        api: "Vulkan".into(),
        driver: String::new(),
        timestamps: true,
        limits: DeviceLimits {
            max_shared_bytes: 0,
            max_units_per_cube: 0,
            max_cube_dim: [0; 3],
            max_cube_count: [0; 3],
            max_binding_bytes: 0,
            max_buffer_bytes: 0,
            memory_bytes: None,
            multiprocessors: None,
        },
        types: TypeSupport::default(),
        plane_size: 0,
        matrix_units: Vec::new(),
        register_mma: Vec::new(),
        copy_async: false,
    }
}

/// A device with lavapipe's limits (128 MiB bindings) and f16, for tests of planning.
#[cfg(test)]
pub(crate) fn test_lavapipe() -> DeviceInfo {
    let mut device = test_device(0, DeviceKind::Cpu);
    device.name = "dev".into();
    device.limits = DeviceLimits {
        max_shared_bytes: 32768,
        max_units_per_cube: 1024,
        max_cube_dim: [1024, 1024, 64],
        max_cube_count: [65535, 65535, 65535],
        max_binding_bytes: 128 << 20,
        max_buffer_bytes: (1 << 31) - 1,
        memory_bytes: None,
        multiprocessors: None,
    };
    device.types.f16 = true;
    device
}
