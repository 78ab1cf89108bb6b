//! The kernel ladder: one file per rung, each a [`Rung`], and the registry that lists them.
//!
//! Everything that names kernels (the CLI's `--kernel`, its help and defaults, `bench`, `emit`,
//! the compile check, the kernel tests) reads [`Kernel::ALL`] and [`Config`]. Adding a rung is
//! its file plus one line in `registry!`'s invocation below.

pub mod common;

use common::args::{self, GemmInput};
use std::fmt;
use std::str::FromStr;

use cubecl::prelude::*;
use cubecl::server::Handle;
use serde::Serialize;

use crate::device::DeviceInfo;
use crate::error::Unavailable;
use crate::problem::{Precision, Problem};
use args::Args;

/// The longest compilation a first call's kernel may take (NVRTC for sm_90, on the
/// development machine): a call never waits on a search, and not on a long compile either.
pub const QUICK_COMPILE_SECONDS: f64 = 3.0;

/// A rung of the ladder: a kernel and the configurations it runs in.
///
/// Every rung takes the shared runtime signature of [`args`] and honours the whole contract:
/// strided and batched views, α and β, every precision.
pub trait Rung {
    /// Its name on the command line and in reports.
    const NAME: &'static str;
    /// One line on the technique it adds.
    const ABOUT: &'static str;
    /// Its configuration: one small value, shown and parsed as `key=value:...`.
    type Config: Copy + fmt::Debug + PartialEq + Eq + std::hash::Hash + Serialize + Send + Sync;

    /// Every configuration it can be built in.
    fn configs() -> Vec<Self::Config>;
    /// The configuration used when none is given.
    fn default_config() -> Self::Config;
    /// A configuration from its text (what [`Rung::show`] writes).
    fn parse(text: &str) -> Result<Self::Config, String>;
    /// The configuration as text.
    fn show(config: &Self::Config) -> String;
    /// Whether the configuration may spill registers in `precision` under `compiler`'s
    /// register allocation: one sized for CPU-like devices, whose stack is cheap; one whose
    /// accumulators are twice as wide in f64; one AMD's compiler gives more registers than
    /// NVIDIA's. The compile check fails on a spill in any other, and the tuner's model prunes
    /// one that may spill on a GPU.
    fn may_spill(_config: &Self::Config, _precision: Precision, _compiler: Compiler) -> bool {
        false
    }
    /// Whether the configuration compiles quickly enough (NVRTC for sm_90: at most
    /// [`QUICK_COMPILE_SECONDS`]) to be a first call's kernel, which no call waits on a search
    /// for ([`crate::tune::TuneBudget::None`]).
    fn quick_to_compile(_config: &Self::Config, _precision: Precision) -> bool {
        true
    }
    /// Whether the configuration computes `precision` on any device: a rung built on matrix
    /// units takes only the input types those multiply. tf32 is computed only where the rung
    /// says so: an f32 rung computes f32, which a tf32 request must not be labelled with.
    fn computes(_config: &Self::Config, precision: Precision) -> bool {
        precision.input != crate::problem::DType::TF32
    }
    /// Whether the configuration carries out matrix-unit instructions in ordinary arithmetic
    /// (the mma rung's emulation, for tests): then tf32 needs no tf32 units of the device,
    /// only its f32, on which the emulation rounds the inputs as the units do.
    fn emulates_matrix_units(_config: &Self::Config) -> bool {
        false
    }
    /// Whether `device` can run the configuration on `problem` beyond its limits, the
    /// precisions it computes and its plane width (which [`crate::plan::check::runnable`]
    /// checks for every rung): the matrix units, instructions or types it is built on. Asked
    /// before a product is launched, so that what would panic inside CubeCL is refused instead.
    fn supports(
        _config: &Self::Config,
        _problem: &Problem,
        _device: &DeviceInfo,
    ) -> std::result::Result<(), Unavailable> {
        Ok(())
    }
    /// The plane (warp, wavefront, subgroup) width the configuration is laid out for, if any:
    /// it runs only where every plane is exactly that wide.
    fn plane_width(_config: &Self::Config) -> Option<u32> {
        None
    }
    /// Whether the kernel is built on matrix units (CubeCL `cmma`): WGSL cannot express it
    /// (wgpu runs it through SPIR-V), and its machine code must show matrix instructions.
    const MATRIX_UNITS: bool = false;
    /// Whether the kernel exists for CUDA alone (PTX's `mma.sync`, `ldmatrix`, `cp.async`):
    /// `emit` and the compile check give no HIP or WGSL source for it.
    const CUDA_ONLY: bool = false;
    /// Whether the kernel fills its next tiles with asynchronous copies (`cp.async`) while it
    /// computes on this one, where the device has them (`DeviceInfo::copy_async`).
    const COPIES_ASYNC: bool = false;
    /// Slices of K the configuration computes side by side (split-K): above 1, each launch's
    /// grid z runs over slices × batch entries, C's buffer is the partials (f32, row-major,
    /// one M×N matrix per z, α = 1, β = 0), and [`common::split::reduce_partials()`] adds them into C.
    fn k_splits(_config: &Self::Config) -> u32 {
        1
    }
    /// Groups of a cube's units that each sum their own steps of every K tile into the same
    /// block of C (sliced K), added in shared memory before the epilogue: 1 where all the
    /// units' outputs differ.
    fn k_groups(_config: &Self::Config) -> u32 {
        1
    }
    /// Block, grid and resources of a launch over `problem` (canonical).
    fn shape(config: &Self::Config, problem: &Problem) -> LaunchShape;
    /// Enqueues one launch. `I` is the input buffers' element type (u32 for packed bf16), `A`
    /// the accumulator's and `O` C's.
    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Self::Config,
        launch: Launch<'_, R>,
    );
    /// Builds the kernel's IR into `kernel`'s scope, for `emit` and the compile check.
    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &Self::Config,
        kernel: Expand,
    ) -> CubeDim;
}

/// Whose register allocation a spill is judged under ([`Rung::may_spill`]): NVIDIA's (ptxas),
/// which stands for GPUs in general, or AMD's (clang), which runs out of registers sooner for
/// some rungs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// NVIDIA's ptxas, and GPUs in general.
    Nvidia,
    /// AMD's clang.
    Amd,
}

/// One launch of a rung, as [`Rung::launch`] receives it.
pub struct Launch<'a, R: Runtime> {
    /// The device.
    pub client: &'a ComputeClient<R>,
    /// The grid.
    pub count: CubeCount,
    /// A, B and C.
    pub buffers: [ArrayArg<R>; 3],
    /// The shared arguments.
    pub(crate) args: &'a Args,
}

/// The IR under construction, as [`Rung::expand`] receives it.
pub struct Expand<'a> {
    builder: &'a mut KernelBuilder,
    /// The operands' layouts the kernel is specialised for.
    pub layouts: args::Layouts,
    /// Elements per vector for rungs that load several at once (1 for packed bf16).
    pub line: u32,
    /// How the target loads matrix-unit fragments from shared memory.
    pub fragment_loads: FragmentLoads,
}

/// How a target's compiler loads a matrix-unit fragment from shared memory, which decides how
/// a rung built on `cmma` should stage its operands there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum FragmentLoads {
    /// Whole rows or columns at full width in either layout: CUDA's WMMA (`ldmatrix`, with
    /// `.trans`) and Vulkan's cooperative-matrix loads.
    #[default]
    EitherLayout,
    /// Element by element along each lane's row of A and column of B: HIP's rocWMMA and RDNA 3
    /// WMMA code, whose loads merge into wide ones (`ds_read_b64`, `ds_load_b128`) only where
    /// those lines are contiguous, that is where A is stored by rows and B by columns.
    AlongK,
}

/// Whether every runtime is treated as [`FragmentLoads::AlongK`] ([`stage_along_k_everywhere`]).
static ALONG_K_EVERYWHERE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

impl FragmentLoads {
    /// What the runtime named `runtime` (CubeCL's `Runtime::name`) compiles fragment loads to.
    pub fn of_runtime(runtime: &str) -> Self {
        if runtime == "hip" || ALONG_K_EVERYWHERE.load(std::sync::atomic::Ordering::Relaxed) {
            FragmentLoads::AlongK
        } else {
            FragmentLoads::EitherLayout
        }
    }
}

/// For tests: stage matrix-unit operands as for HIP ([`FragmentLoads::AlongK`]) on every
/// runtime from now on (`true`) or as each runtime wants (`false`), so that HIP's staging is
/// run and checked on a device without HIP (lavapipe). Both stagings compute the same product.
#[doc(hidden)]
pub fn stage_along_k_everywhere(on: bool) {
    ALONG_K_EVERYWHERE.store(on, std::sync::atomic::Ordering::Relaxed);
}

impl Expand<'_> {
    /// The target's widest vector, in elements, as the device properties the kernel is built
    /// with say (none: the builder has no properties).
    pub fn max_vector_size(&self) -> Option<usize> {
        self.builder
            .scope
            .properties
            .as_ref()
            .map(|p| p.hardware.max_vector_size)
    }

    /// Whether the target has asynchronous copies from global to shared memory (`cp.async`),
    /// as the device properties the kernel is built with say.
    pub fn copy_async(&self) -> bool {
        self.builder
            .scope
            .properties
            .as_ref()
            .is_some_and(|p| p.features.copy_async)
    }
}

/// The shared signature's arguments, registered in a kernel's IR.
pub(crate) struct Typed<
    'a,
    EA: CubePrimitive,
    EB: CubePrimitive,
    A: Float + CubeElement,
    O: CubePrimitive,
> {
    pub scope: &'a mut Scope,
    pub a: <Array<EA> as CubeType>::ExpandType,
    pub b: <Array<EB> as CubeType>::ExpandType,
    pub c: <Array<O> as CubeType>::ExpandType,
    pub args: <args::GemmArgs<A> as CubeType>::ExpandType,
}

impl<'a> Expand<'a> {
    /// Gives the vector size `N` (a kernel's `Size` parameter) its value, before the arguments
    /// that use it are registered.
    pub(crate) fn register_size<N: 'static>(&mut self, value: usize) {
        self.builder.scope.register_size::<N>(value);
    }

    /// Registers the shared signature's arguments, in order.
    pub(crate) fn typed<I: GemmInput, A: Float + CubeElement, O: Float>(
        self,
    ) -> Typed<'a, I, I, A, O> {
        self.typed_with::<I, I, A, O>()
    }

    /// [`Expand::typed`] with A's and B's elements of types `EA` and `EB` (vectors of the input
    /// type, for rungs that load several at once) and C's of type `O`.
    pub(crate) fn typed_with<
        EA: CubePrimitive,
        EB: CubePrimitive,
        A: Float + CubeElement,
        O: CubePrimitive,
    >(
        self,
    ) -> Typed<'a, EA, EB, A, O> {
        let builder = self.builder;
        let array = ArrayCompilationArg { inplace: None };
        let a = <Array<EA> as LaunchArg>::expand(&array, builder);
        let b = <Array<EB> as LaunchArg>::expand(&array, builder);
        let c = <Array<O> as LaunchArg>::expand_output(&array, builder);
        let args = <args::GemmArgs<A> as LaunchArg>::expand(&args::gemm_compilation(), builder);
        Typed {
            scope: &mut builder.scope,
            a,
            b,
            c,
            args,
        }
    }
}

/// Grid, block and resources of one launch, as a report shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LaunchShape {
    /// Cubes (blocks, workgroups) along x (columns of C), y (rows of C) and z (the batch).
    pub grid: [u32; 3],
    /// Units (threads) per cube along x, y and z.
    pub block: [u32; 3],
    /// Shared memory per cube, in bytes.
    pub shared_bytes: usize,
    /// Elements of K a unit consumes per iteration of its loop.
    pub k_per_trip: u32,
}

/// A square block of TPB×TPB units, one entry of C each: the naive and tiled rungs' layout.
#[derive(Clone, Copy, Debug)]
pub struct SquareBlock(pub u32);

impl SquareBlock {
    /// The sides the rungs are built for.
    pub const SIDES: [u32; 3] = [8, 16, 32];
    /// The example's side.
    pub const DEFAULT: u32 = 16;

    /// `tpb=N` with N one of [`SquareBlock::SIDES`].
    pub fn parse(text: &str) -> Result<u32, String> {
        let value = text
            .strip_prefix("tpb=")
            .ok_or_else(|| format!("expected tpb=N, not '{text}'"))?;
        value
            .parse()
            .ok()
            .filter(|t| Self::SIDES.contains(t))
            .ok_or_else(|| format!("unsupported tile size tpb={value}: choose 8, 16 or 32"))
    }

    /// The launch: one unit per entry of C, the batch along z.
    pub fn shape(self, problem: &Problem, shared_bytes: usize, k_per_trip: u32) -> LaunchShape {
        let tiles = |len: usize| len.div_ceil(self.0 as usize).min(u32::MAX as usize) as u32;
        LaunchShape {
            grid: [
                tiles(problem.n),
                tiles(problem.m),
                problem.batch.min(u32::MAX as usize) as u32,
            ],
            block: [self.0, self.0, 1],
            shared_bytes,
            k_per_trip,
        }
    }
}

/// Reads `key=value:...` settings: the values of `keys`, in that order, each given once. (Not
/// commas: lists of kernels are comma-separated.)
pub fn parse_settings(text: &str, keys: &[&str]) -> Result<Vec<u32>, String> {
    let mut values = vec![None; keys.len()];
    for part in text.split(':') {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, not '{part}'"))?;
        let slot = keys
            .iter()
            .position(|k| *k == key)
            .ok_or_else(|| format!("unknown setting '{key}' (expected {})", keys.join(", ")))?;
        let value = value
            .parse()
            .map_err(|_| format!("{key}={value}: expected a whole number"))?;
        if values[slot].replace(value).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    values
        .into_iter()
        .zip(keys)
        .map(|(v, k)| v.ok_or_else(|| format!("missing {k}=…")))
        .collect()
}

/// `config` if it is one of `configs`, else an error listing them.
pub fn one_of<C: PartialEq>(
    config: C,
    configs: Vec<C>,
    show: impl Fn(&C) -> String,
) -> Result<C, String> {
    if configs.contains(&config) {
        Ok(config)
    } else {
        let list: Vec<String> = configs.iter().map(&show).collect();
        Err(format!(
            "unsupported configuration {}: choose one of {}",
            show(&config),
            list.join("; ")
        ))
    }
}

/// The launch of a rung whose cubes each compute a `block[1]`×`block[0]` block of C (rows ×
/// columns), with `units` units per cube along x and y, the batch along z.
pub fn block_tiled_shape(
    problem: &Problem,
    block: [u32; 2],
    units: [u32; 2],
    shared_bytes: usize,
    k_per_trip: u32,
) -> LaunchShape {
    let tiles = |len: usize, side: u32| len.div_ceil(side as usize).min(u32::MAX as usize) as u32;
    LaunchShape {
        grid: [
            tiles(problem.n, block[0]),
            tiles(problem.m, block[1]),
            problem.batch.min(u32::MAX as usize) as u32,
        ],
        block: [units[0], units[1], 1],
        shared_bytes,
        k_per_trip,
    }
}

/// Declares the rungs: `module::Type => Variant`, in ladder order.
macro_rules! registry {
    ($($module:ident :: $rung:ident => $variant:ident),* $(,)?) => {
        // The `#[cube]` kernels generate undocumented modules and launch functions.
        $(#[allow(missing_docs)] pub mod $module;)*

        /// The rungs of the ladder, from the bottom up.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Kernel {
            $(
                #[doc = concat!("See [`", stringify!($module), "::", stringify!($rung), "`].")]
                $variant,
            )*
        }

        impl Kernel {
            /// Every rung, in ladder order.
            pub const ALL: &'static [Kernel] = &[$(Kernel::$variant),*];

            /// The rung's name.
            pub fn name(self) -> &'static str {
                match self { $(Kernel::$variant => <$module::$rung as Rung>::NAME,)* }
            }

            /// One line on the rung's technique.
            pub fn about(self) -> &'static str {
                match self { $(Kernel::$variant => <$module::$rung as Rung>::ABOUT,)* }
            }

            /// The configuration used when none is given.
            pub fn default_config(self) -> Config {
                match self {
                    $(Kernel::$variant => Config::$variant(<$module::$rung as Rung>::default_config()),)*
                }
            }

            /// Whether the rung is built on matrix units (see [`Rung::MATRIX_UNITS`]).
            pub fn matrix_units(self) -> bool {
                match self { $(Kernel::$variant => <$module::$rung as Rung>::MATRIX_UNITS,)* }
            }

            /// Whether the rung copies its next tiles asynchronously (see [`Rung::COPIES_ASYNC`]).
            pub fn copies_async(self) -> bool {
                match self { $(Kernel::$variant => <$module::$rung as Rung>::COPIES_ASYNC,)* }
            }

            /// Whether the rung exists for CUDA alone (see [`Rung::CUDA_ONLY`]).
            pub fn cuda_only(self) -> bool {
                match self { $(Kernel::$variant => <$module::$rung as Rung>::CUDA_ONLY,)* }
            }

            /// Every configuration the rung can be built in.
            pub fn configs(self) -> Vec<Config> {
                match self {
                    $(Kernel::$variant => <$module::$rung as Rung>::configs()
                        .into_iter().map(Config::$variant).collect(),)*
                }
            }

            /// The rung's configuration from its text.
            pub fn parse_config(self, text: &str) -> Result<Config, String> {
                match self {
                    $(Kernel::$variant => <$module::$rung as Rung>::parse(text).map(Config::$variant),)*
                }
            }
        }

        /// A rung and its configuration.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        pub enum Config {
            $(
                #[doc = concat!("[`", stringify!($module), "::", stringify!($rung), "`].")]
                $variant(<$module::$rung as Rung>::Config),
            )*
        }

        impl Config {
            /// The rung.
            pub fn kernel(&self) -> Kernel {
                match self { $(Config::$variant(_) => Kernel::$variant,)* }
            }

            /// The configuration's text, without the rung's name.
            pub fn settings(&self) -> String {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::show(c),)* }
            }

            /// Whether it compiles quickly enough to be a first call's kernel (see
            /// [`Rung::quick_to_compile`]).
            pub fn quick_to_compile(&self, precision: Precision) -> bool {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::quick_to_compile(c, precision),)* }
            }

            /// Whether it may spill registers in `precision` under `compiler` (see
            /// [`Rung::may_spill`]).
            pub fn may_spill(&self, precision: Precision, compiler: Compiler) -> bool {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::may_spill(c, precision, compiler),)* }
            }

            /// Slices of K computed side by side (see [`Rung::k_splits`]).
            pub fn k_splits(&self) -> u32 {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::k_splits(c),)* }
            }

            /// Groups of units summing their own steps of K (see [`Rung::k_groups`]).
            pub fn k_groups(&self) -> u32 {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::k_groups(c),)* }
            }

            /// The plane width it is laid out for (see [`Rung::plane_width`]).
            pub fn plane_width(&self) -> Option<u32> {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::plane_width(c),)* }
            }

            /// Whether it computes `precision` on any device (see [`Rung::computes`]).
            pub fn computes(&self, precision: Precision) -> bool {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::computes(c, precision),)* }
            }

            /// Whether it carries out matrix-unit instructions in ordinary arithmetic (see
            /// [`Rung::emulates_matrix_units`]).
            pub fn emulates_matrix_units(&self) -> bool {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::emulates_matrix_units(c),)* }
            }

            /// Whether `device` has what the rung is built on for `problem` (its own facts,
            /// [`Rung::supports`]; the whole question is
            /// [`crate::plan::check::runnable`]'s).
            pub fn rung_supports(
                &self,
                problem: &Problem,
                device: &DeviceInfo,
            ) -> std::result::Result<(), Unavailable> {
                match self {
                    $(Config::$variant(c) => <$module::$rung as Rung>::supports(c, problem, device),)*
                }
            }

            /// The launch over `problem` (canonical).
            pub fn shape(&self, problem: &Problem) -> LaunchShape {
                match self { $(Config::$variant(c) => <$module::$rung as Rung>::shape(c, problem),)* }
            }

            pub(crate) fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
                &self,
                launch: Launch<'_, R>,
            ) {
                match self {
                    $(Config::$variant(c) =>
                        <$module::$rung as Rung>::launch::<R, I, A, O>(c, launch),)*
                }
            }

            /// The kernel's IR into `builder`, for the generated-code tools ([`expand_kernel`]).
            pub(crate) fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
                &self,
                builder: &mut KernelBuilder,
                fragment_loads: FragmentLoads,
            ) -> CubeDim {
                let line = if I::PACKED_BF16 { 1 } else { 4 };
                let kernel = Expand {
                    builder,
                    layouts: args::Layouts::default(),
                    line,
                    fragment_loads,
                };
                match self {
                    $(Config::$variant(c) =>
                        <$module::$rung as Rung>::expand::<I, A, O>(c, kernel),)*
                }
            }
        }
    };
}

registry! {
    naive::Naive => Naive,
    tiled::Tiled => Tiled,
    blocktile1d::Blocktile1d => Blocktile1d,
    blocktile2d::Blocktile2d => Blocktile2d,
    vectorized::Vectorized => Vectorized,
    warptile::Warptile => Warptile,
    pipelined::Pipelined => Pipelined,
    register::Register => Register,
    broadcast::Broadcast => Broadcast,
    tensorcore::Tensorcore => Tensorcore,
    mma::Mma => Mma,
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kernel::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Kernel::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kernel '{s}' (choose one of: {})", names.join(", "))
            })
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kernel(), self.settings())
    }
}

impl FromStr for Config {
    type Err = String;

    /// `rung` (its default configuration) or `rung:settings`, e.g. `tiled:tpb=32`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((name, settings)) => name.parse::<Kernel>()?.parse_config(settings),
            None => Ok(s.parse::<Kernel>()?.default_config()),
        }
    }
}

/// Calls `$recv.$method::<$pre.., I, A, O>($args.., packed)` with the element types the kernels
/// use for `precision`: inputs `I` (u32 for bf16 packed two to a word, where the device has no
/// bf16), accumulator `A`, C's buffer `O` (f32 for packed bf16). One table for launching and for
/// emitting (`expand_kernel`), so that what `emit` shows is what runs.
macro_rules! with_kernel_types {
    ($precision:expr, $packed:expr,
     $recv:ident . $method:ident $(:: <$($pre:ty),*>)? ($($arg:expr),*)) => {{
        use half::{bf16, f16};
        use $crate::problem::DType;
        let p: $crate::problem::Precision = $precision;
        match (p.input, p.output, $packed) {
            (DType::F32 | DType::TF32, _, _) => {
                $recv.$method::<$($($pre,)*)? f32, f32, f32>($($arg),*)
            }
            (DType::F64, _, _) => $recv.$method::<$($($pre,)*)? f64, f64, f64>($($arg),*),
            (DType::F16, DType::F16, _) => $recv.$method::<$($($pre,)*)? f16, f32, f16>($($arg),*),
            (DType::F16, _, _) => $recv.$method::<$($($pre,)*)? f16, f32, f32>($($arg),*),
            (DType::BF16, _, true) => $recv.$method::<$($($pre,)*)? u32, f32, f32>($($arg),*),
            (DType::BF16, DType::BF16, false) => {
                $recv.$method::<$($($pre,)*)? bf16, f32, bf16>($($arg),*)
            }
            (DType::BF16, _, false) => $recv.$method::<$($($pre,)*)? bf16, f32, f32>($($arg),*),
        }
    }};
}

/// `config`'s kernel IR for `precision` into `builder` (`Config::expand` typed by
/// `with_kernel_types!`), for the generated-code tools. Not generic, so that its code is
/// generated here, where the launches already instantiate every kernel for every element type,
/// and not again in each crate that emits kernels (the lab, its tests: minutes of compiling);
/// the generic steps are private to this crate for that reason.
#[doc(hidden)]
pub fn expand_kernel(
    config: &Config,
    precision: Precision,
    packed: bool,
    builder: &mut KernelBuilder,
    fragment_loads: FragmentLoads,
) -> CubeDim {
    with_kernel_types!(precision, packed, config.expand(builder, fragment_loads))
}

/// The type C's buffer holds on a device: the output type, or f32 for bf16 where the device
/// has no bf16 type (`packed`).
pub fn stored_output(precision: crate::problem::Precision, packed: bool) -> crate::problem::DType {
    use crate::problem::DType;
    match precision.output {
        DType::BF16 if packed => DType::F32,
        other => other,
    }
}

/// Enqueues one launch of `config` with the shared arguments `args`, typed as `problem`'s
/// precision says. Handles hold the views' spans; the caller has checked the plan.
pub(crate) fn launch_one<R: Runtime>(
    client: &ComputeClient<R>,
    config: &Config,
    problem: &Problem,
    handles: [(&Handle, usize); 3],
    count: CubeCount,
    args: &Args,
    packed: bool,
) {
    // SAFETY: lengths are the views' spans (the caller's contract).
    let buffers = handles.map(|(h, len)| unsafe { ArrayArg::from_raw_parts(h.clone(), len) });
    let launch = Launch {
        client,
        count,
        buffers,
        args,
    };
    with_kernel_types!(problem.precision, packed, config.launch::<R>(launch))
}
