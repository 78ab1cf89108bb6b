//! The source the JIT generates for a kernel, without a device: numba's `inspect_ptx` /
//! `inspect_asm` for tilemm.
//!
//! CubeCL's launch path builds a kernel's IR with the device's properties, then hands it to the
//! runtime's compiler. Here the IR is built the same way (the expansion function the `#[cube]`
//! macro generates, fed by a `KernelBuilder`) with the properties of a representative device of
//! each target, and compiled by the same compilers: CubeCL's C++ generator for CUDA and HIP, its
//! WGSL generator for wgpu. A test checks that the WGSL equals what the wgpu runtime compiles on
//! a real adapter.

use std::fmt;
use std::str::FromStr;

use cubecl::ir::{
    AddressType, DeviceProperties, HardwareProperties, MemoryDeviceProperties, TargetProperties,
};
use cubecl::prelude::*;
use cubecl::profile::TimingMethod;
use cubecl::{Compiler, ExecutionMode};
use cubecl_cpp::shared::{CompilationOptions, CppCompiler, CppSupportedFeatures};

use crate::error::{Error, Result};
use crate::kernels::{naive, tiled};
use crate::plan::{Kernel, Plan};

/// A language the kernels can be emitted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// CUDA C++, as NVRTC compiles it (NVIDIA).
    Cuda,
    /// HIP C++, as hiprtc compiles it (AMD ROCm).
    Hip,
    /// WGSL, as wgpu compiles it (Vulkan, Metal, DX12).
    Wgsl,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 3] = [Target::Cuda, Target::Hip, Target::Wgsl];

    /// The target's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cuda => "cuda",
            Target::Hip => "hip",
            Target::Wgsl => "wgsl",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown target '{s}' (choose one of: cuda, hip, wgsl)"))
    }
}

/// The kernel's entry point in the generated source, as CubeCL names it.
pub fn entry_point(kernel: Kernel) -> &'static str {
    match kernel {
        Kernel::Naive => "naive_matmul_f_f32",
        Kernel::Tiled => "tiled_matmul_f_f32",
    }
}

/// Properties of a representative device of `target`: what CubeCL reads while building IR.
fn device_properties(target: Target) -> DeviceProperties {
    let (plane, max_shared) = match target {
        Target::Cuda => (32, 48 * 1024),
        // CDNA wavefronts are 64 wide; 64 KiB of LDS per workgroup.
        Target::Hip => (64, 64 * 1024),
        Target::Wgsl => (32, 32 * 1024),
    };
    let hardware = HardwareProperties {
        load_width: 128,
        plane_size_min: plane,
        plane_size_max: plane,
        max_bindings: 32,
        max_shared_memory_size: max_shared,
        max_cube_count: (u32::MAX >> 1, 65535, 65535),
        max_units_per_cube: 1024,
        max_cube_dim: (1024, 1024, 64),
        num_streaming_multiprocessors: None,
        num_cpu_cores: None,
        num_tensor_cores: None,
        min_tensor_cores_dim: None,
        max_vector_size: 4,
    };
    let memory = MemoryDeviceProperties {
        max_page_size: 1 << 30,
        alignment: 256,
    };
    let mut props =
        DeviceProperties::new(Default::default(), memory, hardware, TimingMethod::System);
    match target {
        Target::Cuda | Target::Hip => cubecl_cpp::register_supported_types(&mut props),
        Target::Wgsl => {
            use cubecl::ir::{ElemType, FloatKind, IntKind, UIntKind};
            props.register_address_type(AddressType::U32);
            for ty in [
                ElemType::UInt(UIntKind::U32),
                ElemType::Int(IntKind::I32),
                ElemType::Float(FloatKind::F32),
                ElemType::Float(FloatKind::Flex32),
                ElemType::Bool,
            ] {
                props.register_type_usage(ty, cubecl::ir::features::TypeUsage::all());
            }
        }
    }
    props
}

/// The IR of `plan`'s kernel, built as the `#[cube]` macro's launch path builds it.
fn definition(
    plan: &Plan,
    target_props: TargetProperties,
    props: &DeviceProperties,
) -> KernelDefinition {
    let settings = KernelSettings::default()
        .cube_dim(CubeDim::new_2d(plan.tpb, plan.tpb))
        .address_type(AddressType::U32)
        .kernel_name(entry_point(plan.kernel));
    let mut builder = KernelBuilder::default();
    builder.runtime_properties(target_props);
    builder.device_properties(props);
    AddressType::U32.register(&mut builder.scope);
    let array = ArrayCompilationArg { inplace: None };
    let a = <Array<f32> as LaunchArg>::expand(&array, &mut builder);
    let b = <Array<f32> as LaunchArg>::expand(&array, &mut builder);
    let c = <Array<f32> as LaunchArg>::expand_output(&array, &mut builder);
    let m = <u32 as LaunchArg>::expand(&(), &mut builder);
    let k = <u32 as LaunchArg>::expand(&(), &mut builder);
    let n = <u32 as LaunchArg>::expand(&(), &mut builder);
    let k_begin = <u32 as LaunchArg>::expand(&(), &mut builder);
    let k_end = <u32 as LaunchArg>::expand(&(), &mut builder);
    let accumulate = <u32 as LaunchArg>::expand(&(), &mut builder);
    let scope = &mut builder.scope;
    match plan.kernel {
        Kernel::Naive => {
            naive::naive_matmul::expand::<f32>(scope, a, b, c, m, k, n, k_begin, k_end, accumulate)
        }
        Kernel::Tiled => tiled::tiled_matmul::expand::<f32>(
            scope, a, b, c, m, k, n, k_begin, k_end, accumulate, plan.tpb,
        ),
    }
    builder.build(settings)
}

fn compile_error(target: Target, e: impl fmt::Display) -> Error {
    Error::Emit {
        target: target.name(),
        reason: e.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

/// Compiles `plan`'s IR with compiler `C`, as the runtime of `target` does.
fn compile<C: Compiler + Default>(
    plan: &Plan,
    target: Target,
    options: &C::CompilationOptions,
) -> Result<String> {
    let def = definition(
        plan,
        TargetProperties::default(),
        &device_properties(target),
    );
    let kernel = C::default()
        .compile(
            def,
            options,
            ExecutionMode::Unchecked,
            AddressType::U32.unsigned_type(),
        )
        .map_err(|e| compile_error(target, e))?;
    Ok(kernel.to_string())
}

/// The source the JIT compiles for `plan` on `target`.
pub fn source(plan: &Plan, target: Target) -> Result<String> {
    type Cuda = CppCompiler<cubecl_cpp::cuda::CudaDialect<cubecl_cpp::cuda::mma::CudaWmmaCompiler>>;
    type Hip =
        CppCompiler<cubecl_cpp::hip::HipDialect<cubecl_cpp::hip::mma::WmmaIntrinsicCompiler>>;
    // As CubeCL's runtimes set them: fast math everywhere, grid constants from sm_70 on,
    // 64-wide wavefronts on CDNA.
    let features = CppSupportedFeatures {
        fast_math: true,
        ..Default::default()
    };
    match target {
        Target::Cuda => compile::<Cuda>(
            plan,
            target,
            &CompilationOptions {
                warp_size: 32,
                supports_features: CppSupportedFeatures {
                    grid_constants: true,
                    ..features
                },
            },
        ),
        Target::Hip => compile::<Hip>(
            plan,
            target,
            &CompilationOptions {
                warp_size: 64,
                supports_features: features,
            },
        ),
        #[cfg(feature = "wgpu")]
        Target::Wgsl => compile::<cubecl::wgpu::WgslCompiler>(
            plan,
            target,
            &cubecl::WgpuCompilationOptions::default(),
        ),
        #[cfg(not(feature = "wgpu"))]
        Target::Wgsl => Err(Error::BackendNotBuilt {
            backend: "wgpu (WGSL)",
            feature: "wgpu",
        }),
    }
}

/// CUDA and HIP source needs no device and no wgpu: these run in every build.
#[cfg(test)]
mod cpp_tests {
    use super::*;

    #[test]
    fn cuda_and_hip_show_the_tiled_kernels_shared_tiles_and_barriers() {
        let plan = Plan::new(Kernel::Tiled, 16).unwrap();
        let cuda = source(&plan, Target::Cuda).unwrap();
        assert!(
            cuda.contains("__shared__") && cuda.matches("__syncthreads()").count() == 2,
            "{cuda}"
        );
        assert!(cuda.contains("extern \"C\" __global__") && cuda.contains("tiled_matmul_f_f32"));
        let hip = source(&plan, Target::Hip).unwrap();
        assert!(
            hip.contains("hip/hip_runtime.h") && hip.matches("__syncthreads()").count() == 2,
            "{hip}"
        );
        // The naive kernel has neither.
        let naive = source(&Plan::new(Kernel::Naive, 16).unwrap(), Target::Cuda).unwrap();
        assert!(
            !naive.contains("__syncthreads") && !naive.contains("__shared__"),
            "{naive}"
        );
    }

    #[cfg(not(feature = "wgpu"))]
    #[test]
    fn wgsl_in_a_build_without_wgpu_is_refused() {
        let err = source(&Plan::new(Kernel::Naive, 8).unwrap(), Target::Wgsl).unwrap_err();
        assert!(matches!(err, Error::BackendNotBuilt { .. }), "{err}");
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use crate::plan::SUPPORTED_TPB;
    use cubecl::wgpu::WgpuRuntime;
    use cubecl::WgpuCompilationOptions;

    /// The IR the `#[cube]` macro's own launch path builds on a real adapter, compiled to WGSL.
    fn runtime_wgsl(client: &ComputeClient<WgpuRuntime>, plan: &Plan) -> String {
        let settings = KernelSettings::default()
            .cube_dim(CubeDim::new_2d(plan.tpb, plan.tpb))
            .address_type(AddressType::U32);
        let array = || ArrayCompilationArg { inplace: None };
        let def = match plan.kernel {
            Kernel::Naive => naive::naive_matmul::NaiveMatmul::<f32, WgpuRuntime>::new(
                settings,
                client.clone(),
                array(),
                array(),
                array(),
                (),
                (),
                (),
                (),
                (),
                (),
            )
            .define(),
            Kernel::Tiled => tiled::tiled_matmul::TiledMatmul::<f32, WgpuRuntime>::new(
                settings,
                client.clone(),
                array(),
                array(),
                array(),
                (),
                (),
                (),
                (),
                (),
                (),
                plan.tpb,
            )
            .define(),
        };
        cubecl::wgpu::WgslCompiler::default()
            .compile(
                def,
                &WgpuCompilationOptions::default(),
                ExecutionMode::Unchecked,
                AddressType::U32.unsigned_type(),
            )
            .unwrap()
            .to_string()
    }

    #[test]
    fn emitted_wgsl_is_what_the_launch_path_builds_on_a_real_adapter() {
        let session = crate::backend::wgpu::open(None).unwrap_or_else(|e| {
            panic!("this test compares with a real wgpu adapter and found none: {e}")
        });
        for kernel in Kernel::ALL {
            for tpb in SUPPORTED_TPB {
                let plan = Plan::new(kernel, tpb).unwrap();
                let emitted = source(&plan, Target::Wgsl).unwrap();
                assert_eq!(emitted, runtime_wgsl(session.client(), &plan), "{plan}");
            }
        }
    }

    #[test]
    fn the_wgsl_shows_the_tiled_kernels_shared_tiles_and_barriers() {
        let plan = Plan::new(Kernel::Tiled, 16).unwrap();
        let wgsl = source(&plan, Target::Wgsl).unwrap();
        assert!(
            wgsl.contains("var<workgroup>") && wgsl.matches("workgroupBarrier()").count() == 2,
            "{wgsl}"
        );
    }

    #[test]
    fn emitted_wgsl_is_valid_for_naga() {
        use wgpu::naga;
        for kernel in Kernel::ALL {
            let wgsl = source(&Plan::new(kernel, 32).unwrap(), Target::Wgsl).unwrap();
            let module =
                naga::front::wgsl::parse_str(&wgsl).unwrap_or_else(|e| panic!("{kernel}: {e}"));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{kernel}: {e:?}"));
        }
    }
}
