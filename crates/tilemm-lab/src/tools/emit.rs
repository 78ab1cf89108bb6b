//! The source the JIT generates for a kernel, without a device: numba's `inspect_ptx` /
//! `inspect_asm` for tilemm.
//!
//! CubeCL's launch path builds a kernel's IR with the device's properties, then hands it to the
//! runtime's compiler. Here the IR is built the same way (the expansion function the `#[cube]`
//! macro generates, fed by a `KernelBuilder`) with the properties of a representative device of
//! each target, and compiled by the same compilers: CubeCL's C++ generator for CUDA and HIP, its
//! WGSL generator for wgpu (what Metal and DX12 adapters get; Vulkan adapters get SPIR-V with
//! the default `vulkan` feature). A test checks that naga validates the WGSL.

use std::fmt;
use std::str::FromStr;

use cubecl::ir::{
    AddressType, DeviceProperties, HardwareProperties, MemoryDeviceProperties, TargetProperties,
};
use cubecl::prelude::*;
use cubecl::profile::TimingMethod;
use cubecl::{Compiler, ExecutionMode};
use cubecl_cpp::shared::{CompilationOptions, CppCompiler, CppSupportedFeatures};

use crate::{Error, Result};
use tilemm::plan::Plan;
use tilemm::problem::{DType, Precision};

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

/// The kernel's entry point in the generated source, as CubeCL names it: the rung's
/// `{name}_matmul` function with the accumulator's and output's types (on the C++ targets, which
/// have every type).
pub fn entry_point(plan: &Plan, precision: Precision) -> String {
    kernel_name(plan, precision.accumulate, precision.output)
}

fn kernel_name(plan: &Plan, accumulate: DType, output: DType) -> String {
    format!("{}_matmul_a_{accumulate}_o_{output}", plan.kernel().name())
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
        // As the runtimes say: CUDA and HIP have no limit of their own, wgpu 4.
        max_vector_size: if target == Target::Wgsl {
            4
        } else {
            usize::MAX
        },
    };
    let memory = MemoryDeviceProperties {
        max_page_size: 1 << 30,
        alignment: 256,
    };
    let mut props =
        DeviceProperties::new(Default::default(), memory, hardware, TimingMethod::System);
    // CUDA's runtime says so from sm_80 on, the architectures `emit` and the compile check
    // build CUDA kernels for.
    props.features.copy_async = target == Target::Cuda;
    match target {
        Target::Cuda | Target::Hip => cubecl_cpp::register_supported_types(&mut props),
        Target::Wgsl => {
            use cubecl::ir::{ElemType, FloatKind, IntKind, UIntKind};
            props.register_address_type(AddressType::U32);
            for ty in [
                ElemType::UInt(UIntKind::U32),
                ElemType::Int(IntKind::I32),
                ElemType::Float(FloatKind::F32),
                ElemType::Float(FloatKind::F16),
                ElemType::Float(FloatKind::Flex32),
                ElemType::Bool,
            ] {
                props.register_type_usage(ty, cubecl::ir::features::TypeUsage::all());
            }
        }
    }
    props
}

/// The IR of `plan`'s kernel for `precision`, built as the `#[cube]` macro's launch path
/// builds it. bf16 is packed (two to a word, C in f32) on WGSL, which has no bf16 type.
fn definition(
    plan: &Plan,
    precision: Precision,
    target: Target,
    target_props: TargetProperties,
    props: &DeviceProperties,
) -> KernelDefinition {
    let mut builder = KernelBuilder::default();
    builder.runtime_properties(target_props);
    builder.device_properties(props);
    AddressType::U32.register(&mut builder.scope);
    let config = &plan.config;
    let b = &mut builder;
    let packed = target == Target::Wgsl;
    let fragment_loads = match target {
        Target::Hip => tilemm::kernels::FragmentLoads::AlongK,
        Target::Cuda | Target::Wgsl => tilemm::kernels::FragmentLoads::EitherLayout,
    };
    let dim = tilemm::kernels::expand_kernel(config, precision, packed, b, fragment_loads);
    let output = tilemm::kernels::stored_output(precision, packed);
    let name = kernel_name(plan, precision.accumulate, output);
    let settings = KernelSettings::default()
        .cube_dim(dim)
        .address_type(AddressType::U32)
        .kernel_name(name);
    builder.build(settings)
}

fn compile_error(target: Target, e: impl fmt::Display) -> Error {
    Error::Emit {
        target: target.name(),
        reason: e.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

/// What the runtime of `target` tells kernels at build time: on CUDA, how manual MMA's
/// fragments lie in registers (as `CudaRuntime::target_properties` says: A row-major, B
/// column-major, 32-bit registers of 2 halves or 1 tf32).
fn target_properties(target: Target) -> TargetProperties {
    match target {
        Target::Cuda => TargetProperties {
            mma: cubecl::ir::MmaProperties {
                contiguous_elements: cubecl::ir::ContiguousElements::new(
                    cubecl_cpp::cuda::mma::contiguous_elements_cuda,
                ),
                ..Default::default()
            },
        },
        _ => TargetProperties::default(),
    }
}

/// Compiles `plan`'s IR with compiler `C`, as the runtime of `target` does.
fn compile<C: Compiler + Default>(
    plan: &Plan,
    precision: Precision,
    target: Target,
    options: &C::CompilationOptions,
) -> Result<String> {
    let def = definition(
        plan,
        precision,
        target,
        target_properties(target),
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

/// The source the JIT compiles for `plan` on `target`, in f32.
pub fn source(plan: &Plan, target: Target) -> Result<String> {
    source_for(plan, Precision::F32, target)
}

/// The source the JIT compiles for `plan` on `target` in `precision`.
pub fn source_for(plan: &Plan, precision: Precision, target: Target) -> Result<String> {
    // CubeCL's kernel builder reads its configuration: tilemm's, not a cubecl.toml nearby.
    tilemm::runtime::cache::configure_cubecl();
    if target != Target::Cuda && plan.kernel().cuda_only() {
        return Err(Error::Emit {
            target: target.name(),
            reason: format!(
                "the {} rung is CUDA's alone (PTX's mma.sync, ldmatrix and cp.async)",
                plan.kernel()
            ),
        });
    }
    if target == Target::Wgsl && plan.kernel().matrix_units() {
        return Err(Error::Emit {
            target: target.name(),
            reason: format!(
                "the {} rung needs cooperative matrices, which WGSL lacks (wgpu runs it through \
                 CubeCL's SPIR-V path on Vulkan)",
                plan.kernel()
            ),
        });
    }
    if !plan.config.computes(precision) {
        return Err(Error::Emit {
            target: target.name(),
            reason: format!("the {} rung does not compute {precision}", plan.kernel()),
        });
    }
    type Cuda = CppCompiler<cubecl_cpp::cuda::CudaDialect<cubecl_cpp::cuda::mma::CudaWmmaCompiler>>;
    // As CubeCL's runtimes set them: fast math everywhere, grid constants from sm_70 on,
    // 64-wide wavefronts on CDNA.
    let features = CppSupportedFeatures {
        fast_math: true,
        ..Default::default()
    };
    match target {
        Target::Cuda => compile::<Cuda>(
            plan,
            precision,
            target,
            &CompilationOptions {
                warp_size: 32,
                supports_features: CppSupportedFeatures {
                    grid_constants: true,
                    ..features
                },
            },
        ),
        Target::Hip => hip_source(plan, precision, 64, HipMatrixUnits::of_this_build()),
        #[cfg(feature = "wgpu")]
        Target::Wgsl => compile::<cubecl::wgpu::WgslCompiler>(
            plan,
            precision,
            target,
            &cubecl::WgpuCompilationOptions::default(),
        ),
        #[cfg(not(feature = "wgpu"))]
        Target::Wgsl => Err(Error::Tilemm(tilemm::Error::NotBuilt {
            what: "the wgpu backend (WGSL)".into(),
            feature: "wgpu",
        })),
    }
}

/// How HIP code reaches AMD's matrix units (CubeCL's two HIP dialects; they differ only in
/// kernels that use matrix units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HipMatrixUnits {
    /// RDNA 3's WMMA compiler intrinsics, in the source itself (CDNA has none).
    Intrinsics,
    /// rocWMMA's fragments (`#include <rocwmma/rocwmma.hpp>`), which rocWMMA lowers to MFMA on
    /// CDNA: what a build with the `rocwmma` feature JITs.
    RocWmma,
}

impl HipMatrixUnits {
    /// What this build's HIP runtime JITs.
    pub const fn of_this_build() -> Self {
        if cfg!(feature = "rocwmma") {
            HipMatrixUnits::RocWmma
        } else {
            HipMatrixUnits::Intrinsics
        }
    }
}

/// The HIP source the JIT compiles for `plan` in `precision` for wavefronts of `warp_size`
/// (64 on CDNA, what `emit` shows; 32 on RDNA, whose WMMA needs it), with matrix units reached
/// through `units`.
pub fn hip_source(
    plan: &Plan,
    precision: Precision,
    warp_size: u32,
    units: HipMatrixUnits,
) -> Result<String> {
    tilemm::runtime::cache::configure_cubecl();
    type Hip =
        CppCompiler<cubecl_cpp::hip::HipDialect<cubecl_cpp::hip::mma::WmmaIntrinsicCompiler>>;
    type HipRocWmma =
        CppCompiler<cubecl_cpp::hip::HipDialect<cubecl_cpp::hip::mma::RocWmmaCompiler>>;
    if plan.kernel().cuda_only() {
        return Err(Error::Emit {
            target: Target::Hip.name(),
            reason: format!("the {} rung is CUDA's alone", plan.kernel()),
        });
    }
    if !plan.config.computes(precision) {
        return Err(Error::Emit {
            target: Target::Hip.name(),
            reason: format!("the {} rung does not compute {precision}", plan.kernel()),
        });
    }
    let options = CompilationOptions {
        warp_size,
        supports_features: CppSupportedFeatures {
            fast_math: true,
            ..Default::default()
        },
    };
    match units {
        HipMatrixUnits::Intrinsics => compile::<Hip>(plan, precision, Target::Hip, &options),
        HipMatrixUnits::RocWmma => compile::<HipRocWmma>(plan, precision, Target::Hip, &options),
    }
}

/// CUDA and HIP source needs no device and no wgpu: these run in every build.
#[cfg(test)]
mod cpp_tests {
    use super::*;
    use tilemm::kernels::Kernel;

    fn plan(text: &str) -> Plan {
        Plan::new(text.parse().unwrap())
    }

    #[test]
    fn cuda_and_hip_show_the_tiled_kernels_shared_tiles_and_barriers() {
        let plan = plan("tiled:tpb=16");
        let cuda = source(&plan, Target::Cuda).unwrap();
        assert!(
            cuda.contains("__shared__") && cuda.matches("__syncthreads()").count() == 2,
            "{cuda}"
        );
        assert!(
            cuda.contains("extern \"C\" __global__")
                && cuda.contains(&entry_point(&plan, Precision::F32))
        );
        let hip = source(&plan, Target::Hip).unwrap();
        assert!(
            hip.contains("hip/hip_runtime.h") && hip.matches("__syncthreads()").count() == 2,
            "{hip}"
        );
        // The naive kernel has neither.
        let naive = source(&Plan::default_for(Kernel::Naive), Target::Cuda).unwrap();
        assert!(
            !naive.contains("__syncthreads") && !naive.contains("__shared__"),
            "{naive}"
        );
    }

    /// The patched CubeCL optimizer (third_party/cubecl-opt, which the SPIR-V compiler runs on
    /// every kernel wgpu JITs for Vulkan) gives each rung's kernel the program upstream's
    /// quadratic passes give it: its default configuration, and the mma rung's emulation (the
    /// largest kernel lavapipe compiles), up to the variables' ids.
    #[test]
    fn the_linear_optimizer_passes_give_upstreams_program_for_every_rung() {
        use cubecl_opt::{set_upstream_passes, OptimizerBuilder};
        use tilemm::kernels::mma::MmaConfig;
        use tilemm::kernels::Config;
        let emulated = Plan::new(Config::Mma(MmaConfig {
            bm: 64,
            bn: 64,
            bk: 32,
            wm: 1,
            wn: 1,
            stages: 2,
            split: 1,
            wk: 1,
            emulate: true,
        }));
        let plans = Kernel::ALL.iter().map(|kernel| Plan::default_for(*kernel));
        for plan in plans.chain([emulated]) {
            // One precision a rung (the passes see the same program with another element
            // type): upstream's passes take minutes over all of them.
            let precision = DType::ALL
                .into_iter()
                .filter_map(|dtype| Precision::new(dtype, DType::F32).ok())
                .find(|precision| plan.config.computes(*precision))
                .unwrap_or_else(|| panic!("{plan} computes no precision"));
            let target = if plan.kernel().cuda_only() {
                Target::Cuda
            } else {
                Target::Wgsl
            };
            // A definition of its own for each: the optimizer takes variables from the scope's
            // allocator, which clones of a definition share.
            let optimized = |upstream| {
                let def = definition(
                    &plan,
                    precision,
                    target,
                    target_properties(target),
                    &device_properties(target),
                );
                set_upstream_passes(upstream);
                let opt = OptimizerBuilder::default().optimize(def.body, def.cube_dim);
                set_upstream_passes(false);
                canonical(&opt.to_string())
            };
            let (theirs, ours) = (optimized(true), optimized(false));
            assert!(
                theirs == ours,
                "{plan} in {precision}: the programs differ (variables renamed in order)\n{}",
                first_difference(&theirs, &ours)
            );
        }
    }

    /// `program` with its variables (`local(N)`, `binding(N)`) renamed in the order they first
    /// appear: a variable's id is the allocator's next when a pass asks for one, which two
    /// equal programs reached in different steps need not share.
    fn canonical(program: &str) -> String {
        let mut names = std::collections::HashMap::new();
        let mut out = String::with_capacity(program.len());
        let mut rest = program;
        while let Some(at) = rest.find(['l', 'b']) {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let Some(kind) = ["local(", "binding("]
                .into_iter()
                .find(|k| rest.starts_with(k))
            else {
                out.push_str(&rest[..1]);
                rest = &rest[1..];
                continue;
            };
            let digits = rest[kind.len()..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len() - kind.len());
            let id = &rest[kind.len()..kind.len() + digits];
            let count = names.len();
            let name = names.entry((kind, id.to_string())).or_insert(count);
            out.push_str(&format!("{kind}{name}"));
            rest = &rest[kind.len() + digits..];
        }
        out.push_str(rest);
        out
    }

    /// The first line where two programs differ, with its neighbours.
    fn first_difference(theirs: &str, ours: &str) -> String {
        let (a, b): (Vec<_>, Vec<_>) = (theirs.lines().collect(), ours.lines().collect());
        let at = (0..a.len().max(b.len()))
            .find(|&i| a.get(i) != b.get(i))
            .unwrap_or(0);
        let around =
            |lines: &[&str]| lines[at.saturating_sub(3)..(at + 3).min(lines.len())].join("\n");
        format!(
            "line {at}, upstream:\n{}\nlinear:\n{}",
            around(&a),
            around(&b)
        )
    }

    #[test]
    fn every_rung_compiles_for_every_precision_in_cuda_and_hip() {
        for kernel in Kernel::ALL {
            for dtype in DType::ALL {
                for output in [dtype, DType::F32] {
                    let Ok(precision) = Precision::new(dtype, output) else {
                        continue;
                    };
                    let plan = Plan::default_for(*kernel);
                    if !plan.config.computes(precision) {
                        continue;
                    }
                    for target in [Target::Cuda, Target::Hip] {
                        if target == Target::Hip && kernel.cuda_only() {
                            let err = source_for(&plan, precision, target).unwrap_err();
                            assert!(err.to_string().contains("CUDA's alone"), "{err}");
                            continue;
                        }
                        let src = source_for(&plan, precision, target)
                            .unwrap_or_else(|e| panic!("{plan} {precision} {target}: {e}"));
                        assert!(src.contains(&entry_point(&plan, precision)), "{src}");
                    }
                }
            }
        }
    }

    #[cfg(not(feature = "wgpu"))]
    #[test]
    fn wgsl_in_a_build_without_wgpu_is_refused() {
        let err = source(&plan("naive:tpb=8"), Target::Wgsl).unwrap_err();
        assert!(
            matches!(err, Error::Tilemm(tilemm::Error::NotBuilt { .. })),
            "{err}"
        );
    }

    #[test]
    fn hip_reaches_cdna_matrix_units_only_through_rocwmma() {
        let tensorcore = plan("tensorcore:m=16:n=16:k=16:wm=2:wn=2:tm=1:tn=1:plane=64");
        let f16 = Precision::of(DType::F16);
        let rocwmma = hip_source(&tensorcore, f16, 64, HipMatrixUnits::RocWmma).unwrap();
        assert!(
            rocwmma.contains("#include <rocwmma/rocwmma.hpp>")
                && rocwmma.contains("rocwmma::mma_sync"),
            "{rocwmma}"
        );
        let intrinsics = hip_source(&tensorcore, f16, 64, HipMatrixUnits::Intrinsics).unwrap();
        assert!(!intrinsics.contains("rocwmma"), "{intrinsics}");
        // Kernels without matrix units are the same source either way, up to the order and
        // offsets of the shared arrays: CubeCL's allocator varies those from call to call.
        let tiled = plan("tiled:tpb=16");
        let offsets_blanked = |units| {
            let source = hip_source(&tiled, Precision::F32, 64, units).unwrap();
            let mut lines: Vec<String> = source
                .lines()
                .map(|line| match line.find("&dynamic_shared_mem[") {
                    Some(at) => format!("{}&dynamic_shared_mem[_]);", &line[..at]),
                    None => line.to_string(),
                })
                .collect();
            lines.sort();
            lines
        };
        let (with_rocwmma, intrinsics) = (
            offsets_blanked(HipMatrixUnits::RocWmma),
            offsets_blanked(HipMatrixUnits::Intrinsics),
        );
        assert!(with_rocwmma.iter().all(|line| !line.contains("rocwmma")));
        assert_eq!(with_rocwmma, intrinsics);
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use tilemm::kernels::Kernel;

    #[test]
    fn the_wgsl_shows_the_tiled_kernels_shared_tiles_and_barriers() {
        let plan = Plan::new("tiled:tpb=16".parse().unwrap());
        let wgsl = source(&plan, Target::Wgsl).unwrap();
        assert!(
            wgsl.contains("var<workgroup>") && wgsl.matches("workgroupBarrier()").count() == 2,
            "{wgsl}"
        );
    }

    #[test]
    fn emitted_wgsl_is_valid_for_naga_in_every_precision_wgsl_has() {
        use wgpu::naga;
        for kernel in Kernel::ALL.iter().filter(|k| !k.matrix_units()) {
            for config in kernel.configs() {
                for precision in [
                    Precision::F32,
                    Precision::of(DType::F16),
                    Precision::of(DType::BF16),
                ] {
                    let plan = Plan::new(config);
                    if !config.computes(precision) {
                        continue;
                    }
                    let wgsl = source_for(&plan, precision, Target::Wgsl).unwrap();
                    let module = naga::front::wgsl::parse_str(&wgsl)
                        .unwrap_or_else(|e| panic!("{plan} {precision}: {e}"));
                    naga::valid::Validator::new(
                        naga::valid::ValidationFlags::all(),
                        naga::valid::Capabilities::all(),
                    )
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{plan} {precision}: {e:?}"));
                }
            }
        }
    }
}
