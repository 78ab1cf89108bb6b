//! The command line: clap's structures, the argument groups the commands share, and the
//! values parsed from text.

use std::fmt;
use std::io::{self, Write as _};
use std::path::PathBuf;

use tilemm::tune::{TuneBudget, TuneOptions};
use tilemm::{Backend, Config, DType, KernelChoice, Plan};
use tilemm_lab::measure::complex::ComplexType;
use tilemm_lab::tools::compile_check::Arch;
use tilemm_lab::tools::emit::Target;

use crate::Failure;
use clap::{Args, Parser, Subcommand};

/// Fast matrix multiplication on the GPUs of every vendor, checked against the CPU.
#[derive(Parser)]
#[command(name = "tilemm", version, about, arg_required_else_help = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Multiply on a GPU twice (1st run includes JIT compilation), on the CPU, and verify.
    Run(RunArgs),
    /// Measure kernels and the CPU path the same way: warm-up, repeated runs, median, checked.
    Bench(BenchArgs),
    /// Tune `--kernel auto` for a sweep of sizes and element types, and keep the choices in the
    /// tuning cache, so that later runs of those shape classes start at once.
    Tune(TuneCommandArgs),
    /// Print the source the JIT generates for a kernel (CUDA, HIP or WGSL), without a device.
    Emit {
        /// Kernel: a rung of the ladder, optionally with its settings (`tiled:tpb=32`).
        #[arg(long, default_value = "tiled")]
        kernel: Named<Config>,
        /// Target language: cuda, hip or wgsl.
        #[arg(long)]
        target: Target,
        /// Threads per block along each axis (8, 16, 32): short for `--kernel RUNG:tpb=T`.
        #[arg(long)]
        tpb: Option<u32>,
        /// Element type of A and B (and C): f32, f16, bf16, tf32 (f32 data on tf32 matrix
        /// units, C in f32) or f64.
        #[arg(long, default_value = "f32")]
        dtype: DType,
    },
    /// Compile every kernel for NVIDIA (NVRTC) and AMD (clang) targets, no GPU needed, and
    /// report registers, spills, shared memory and occupancy. Fails on a compile error or a
    /// spill in a kernel whose plan forbids one.
    CompileCheck(CompileCheckArgs),
    /// List the devices tilemm can run on, with the limits that matter for GEMM.
    Devices {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Where to run: shared by `run` and `bench`.
#[derive(Args)]
pub(crate) struct DeviceArgs {
    /// Backend: wgpu, cuda, hip or cpu (the CPU alone). Default: what $TILEMM_DEVICE names
    /// (`cpu`, `cuda:1`, …), else the best GPU found (CUDA, then HIP, then wgpu; CPU
    /// emulations such as lavapipe included), else the CPU alone.
    #[arg(long)]
    pub(crate) backend: Option<Backend>,
    /// Device index within the backend (see `tilemm devices`).
    #[arg(long)]
    pub(crate) device: Option<usize>,
}

impl DeviceArgs {
    /// The backend and index to open: the flags, else the settings' `TILEMM_DEVICE` (`None`:
    /// the best device).
    pub(crate) fn resolve(&self) -> tilemm::Result<(Option<Backend>, Option<usize>)> {
        if self.backend.is_some() || self.device.is_some() {
            return Ok((self.backend, self.device));
        }
        Ok(tilemm::Settings::global().usable()?.device.parts())
    }
}

/// `run --dtype`: a real type of the ladder, or a complex one (`tilemm::complex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunType {
    Real(DType),
    Complex(ComplexType),
}

impl std::str::FromStr for RunType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "c64" | "complex64" => Ok(RunType::Complex(ComplexType::Complex64)),
            "c128" | "complex128" => Ok(RunType::Complex(ComplexType::Complex128)),
            _ => s.parse().map(RunType::Real).map_err(|_| {
                format!("unknown dtype '{s}' (choose one of: f16, bf16, tf32, f32, f64, c64, c128)")
            }),
        }
    }
}

/// How `--kernel auto` tunes: shared by `run`, `bench` and `tune`.
#[derive(Args)]
pub(crate) struct TuneArgs {
    /// How long `auto` may time candidates when the cache does not hold the device and shape
    /// class as fully tuned: none (or 0: no search; the cached choice, else the best-ranked
    /// candidate quick to compile), auto (about 1 s, or 20× the product's own time if longer;
    /// later runs of the class go on where it stopped), full (every candidate the model
    /// keeps), or seconds. The best-ranked candidate not yet timed always is, and the winner is
    /// verified. Default: $TILEMM_TUNE_BUDGET, else none, for `run`; full for `bench` and
    /// `tune`. The cache file is $TILEMM_CACHE_DIR/tuning.json, else tilemm/tuning.json in
    /// the user's cache directory.
    #[arg(
        long,
        value_name = "none|auto|full|SECONDS",
        allow_negative_numbers = true
    )]
    pub(crate) tune_budget: Option<TuneBudget>,
    /// Tune even when the cache holds a choice, and replace it.
    #[arg(long)]
    pub(crate) retune: bool,
}

impl TuneArgs {
    /// The options, with `budget` unless --tune-budget was given (`None`: the settings',
    /// `TILEMM_TUNE_BUDGET`, else no search).
    pub(crate) fn options(&self, budget: Option<TuneBudget>) -> tilemm::Result<TuneOptions> {
        let budget = match budget {
            Some(budget) => budget,
            None => tilemm::Settings::global().usable()?.tune_budget,
        };
        // On a terminal, a line on stderr says why the first run of a shape class waits.
        let on_tuning: fn(&str) = |line| {
            let _ = writeln!(io::stderr(), "tilemm: {line}");
        };
        Ok(TuneOptions {
            budget: self.tune_budget.unwrap_or(budget),
            retune: self.retune,
            on_tuning: io::IsTerminal::is_terminal(&io::stderr()).then_some(on_tuning),
            ..TuneOptions::default()
        })
    }
}

/// `run --kernel`'s help, with the rungs of the registry.
pub(crate) fn run_kernel_help() -> String {
    let names: Vec<&str> = tilemm::Kernel::ALL.iter().map(|k| k.name()).collect();
    format!(
        "Kernel: auto (the tuner picks, and remembers, the fastest rung for the device and shape \
         class), or a rung of the ladder ({}), optionally with its settings (`tiled:tpb=32`). \
         Default: auto, or tiled with --tpb",
        names.join(", ")
    )
}

/// A peak rate in GFLOPS: finite and positive.
pub(crate) fn peak_gflops(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|g| g.is_finite() && *g > 0.0)
        .ok_or_else(|| format!("'{s}' is not a positive number of GFLOPS"))
}

#[derive(Args)]
pub(crate) struct RunArgs {
    /// Kernel: auto (the tuner picks, and remembers, the fastest rung for the device and
    /// shape class), or a rung of the ladder, optionally with its settings (`tiled:tpb=32`).
    /// Default: auto, or tiled with --tpb.
    #[arg(long, help = run_kernel_help())]
    pub(crate) kernel: Option<Named<KernelChoice>>,
    /// Threads per block along each axis (8, 16, 32): short for `--kernel RUNG:tpb=T`.
    #[arg(long)]
    pub(crate) tpb: Option<u32>,
    /// Rows of A and C.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    pub(crate) m: usize,
    /// Columns of A, rows of B.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    pub(crate) k: usize,
    /// Columns of B and C.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    pub(crate) n: usize,
    /// Products in the batch: A, B and C hold that many matrices each.
    #[arg(long, default_value_t = 1, conflicts_with = "a", value_parser = dimension)]
    pub(crate) batch: usize,
    /// A is stored transposed (K×M; with --a, the file as stored) and used as Aᵀ: a view, not
    /// a copy, as BLAS's TRANSA.
    #[arg(long)]
    pub(crate) trans_a: bool,
    /// B is stored transposed (N×K; with --b, the file as stored) and used as Bᵀ.
    #[arg(long)]
    pub(crate) trans_b: bool,
    /// α in C = α·A·B + β·C.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub(crate) alpha: f64,
    /// β in C = α·A·B + β·C; C then starts random (uniform in [-1, 1)). 0 leaves C unread.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub(crate) beta: f64,
    /// Element type of A, B and C: f32, f16, bf16 (accumulated in f32), tf32 (f32 data
    /// multiplied by tf32 matrix units, NVIDIA sm_80 and later through cuda; never chosen
    /// for f32), f64, or c64/c128 (complex64, complex128: random inputs only, the 4M method
    /// as one real product of the packed parts, checked against a complex f64 reference).
    /// Default: f32, or the files' type; with files it must be theirs (tf32: float32 files).
    #[arg(long, value_name = "f32|f16|bf16|tf32|f64|c64|c128")]
    pub(crate) dtype: Option<RunType>,
    /// Seed of the random inputs (uniform in [-1, 1)).
    #[arg(long, default_value_t = 0, conflicts_with = "a")]
    pub(crate) seed: u64,
    /// Read A from a 2-D float16, float32 or float64 .npy file, or a pipe such as `<(…)`
    /// (needs --b). The files' dtype is the precision; a Fortran-order file is used as a
    /// column-major view, not reordered.
    #[arg(long, requires = "b", value_name = "A.npy")]
    pub(crate) a: Option<PathBuf>,
    /// Read B from a .npy file of A's dtype (needs --a).
    #[arg(long, requires = "a", value_name = "B.npy")]
    pub(crate) b: Option<PathBuf>,
    /// Read C's initial value from a .npy file of A's dtype (needs --a); C keeps the file's
    /// order. With β = 0 it is not read, as in BLAS.
    #[arg(long, requires = "a", value_name = "C0.npy")]
    pub(crate) c: Option<PathBuf>,
    /// Write C to a .npy file in its dtype (bf16 as float32, exactly; 3-D for a batch).
    #[arg(long, value_name = "C.npy")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) target: DeviceArgs,
    #[command(flatten)]
    pub(crate) tune: TuneArgs,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Kernels to measure, comma-separated: auto, or a rung with optional settings
    /// (`auto,naive,tiled:tpb=32,register:tm=16:tn=8:side=8`). Default: auto and every rung in
    /// its default configuration.
    #[arg(long, value_delimiter = ',')]
    pub(crate) kernels: Vec<Named<KernelChoice>>,
    /// Tile sizes to measure each kernel with, comma-separated (8, 16, 32): short for
    /// `RUNG:tpb=T` settings.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tpb: Vec<u32>,
    /// Problem sizes, comma-separated: N for N×N×N, or MxKxN. Default: 128, 256, … up to 2048
    /// on a CPU adapter (lavapipe) or the CPU alone, up to 8192 on GPUs.
    #[arg(long, value_delimiter = ',')]
    pub(crate) sizes: Vec<Size>,
    /// Timed runs per measurement (after one warm-up run).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) repeat: u16,
    /// Element type of A, B and C: f32, f16, bf16 (accumulated in f32), tf32 (f32 data on
    /// tf32 matrix units) or f64. Rungs that do not compute it are left out with a note (named
    /// ones are refused), and so are peers that do not (rocBLAS is measured in f32 only; a
    /// cubek-matmul strategy the device cannot run in it, or that computes another precision,
    /// such as its tensor-core strategies' tf32 for f32, is skipped with a note).
    #[arg(long, default_value = "f32")]
    pub(crate) dtype: DType,
    /// The device's peak GFLOPS for --dtype, for the "% peak" column where tilemm's datasheet
    /// table does not know the device (or to measure against another figure, such as the peak
    /// at the clock the device sustains). Default: the datasheet figure, where known.
    #[arg(long, value_name = "GFLOPS", value_parser = peak_gflops, allow_negative_numbers = true)]
    pub(crate) peak: Option<f64>,
    #[command(flatten)]
    pub(crate) target: DeviceArgs,
    #[command(flatten)]
    pub(crate) tune: TuneArgs,
    /// Also measure the peers on the same device: CubeCL's own matmul (cubek-matmul 0.2) in
    /// its auto, unit (simple, double), naive and tensor-core (simple cmma; simple, double,
    /// double-async and specialized mma) strategies, each where it computes --dtype (its
    /// tensor cores turn f32 into tf32) (a build with --features peers). The CPU path (unless
    /// --no-cpu), and cuBLAS or rocBLAS on CUDA or HIP, are always measured.
    #[arg(long)]
    pub(crate) peers: bool,
    /// Measure products from host memory, end to end, instead of kernels on resident
    /// matrices: each timed run uploads A and B, computes and downloads C into a host array,
    /// as the front door, Python and the BLAS do (the CPU path reads host memory anyway). On
    /// CUDA and HIP, tilemm's choice is also measured on registered memory, and cuBLAS with
    /// its copies from pageable and registered memory. cubek-matmul's peers are left out.
    #[arg(long)]
    pub(crate) from_host: bool,
    /// Leave the CPU path's row out of a GPU sweep (at 8192³ it takes seconds a run); every
    /// row is still checked against the reference. Without a GPU the CPU path is measured.
    #[arg(long)]
    pub(crate) no_cpu: bool,
    /// Write a plot of GFLOPS against size, one line per implementation, to STEM.svg and
    /// STEM.png.
    #[arg(long, value_name = "STEM")]
    pub(crate) plot: Option<PathBuf>,
    /// Print the measurements as CSV.
    #[arg(long, conflicts_with = "json")]
    pub(crate) csv: bool,
    /// Print the measurements as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct TuneCommandArgs {
    /// Problem sizes, comma-separated: N for N×N×N, or MxKxN. Each stands for its shape class
    /// (M, K and N each rounded to the nearest power of two).
    #[arg(long, value_delimiter = ',', default_value = "256,1024")]
    pub(crate) sizes: Vec<Size>,
    /// Element types, comma-separated: f32, f16, bf16, tf32 or f64; those the device cannot
    /// compute are left out with a note.
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    pub(crate) dtype: Vec<DType>,
    /// A is stored transposed (K×M): its own shape class.
    #[arg(long)]
    pub(crate) trans_a: bool,
    /// B is stored transposed (N×K): its own shape class.
    #[arg(long)]
    pub(crate) trans_b: bool,
    #[command(flatten)]
    pub(crate) target: DeviceArgs,
    #[command(flatten)]
    pub(crate) tune: TuneArgs,
    /// Print the tuner's reports as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct CompileCheckArgs {
    /// Architectures, comma-separated (sm_75, sm_80, sm_86, sm_89, sm_90, gfx90a, gfx940, gfx1100).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sm_80,sm_90,gfx90a,gfx940,gfx1100"
    )]
    pub(crate) archs: Vec<Arch>,
    /// Kernels, comma-separated (default: every rung, in its default configuration).
    #[arg(long, value_delimiter = ',')]
    pub(crate) kernels: Vec<Named<Config>>,
    /// Tile sizes, comma-separated: short for `RUNG:tpb=T` settings.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tpb: Vec<u32>,
    /// Element types, comma-separated, each in its own precision (f16, bf16 and tf32
    /// accumulate in f32).
    #[arg(long, value_delimiter = ',', default_value = "f32,f16,bf16,tf32,f64")]
    pub(crate) dtypes: Vec<DType>,
    /// A directory holding cuda_runtime.h (default: CUDA_PATH, /usr/local/cuda, or the PyPI
    /// wheel next to libnvrtc on LD_LIBRARY_PATH).
    #[arg(long, value_name = "DIR")]
    pub(crate) cuda_include: Vec<PathBuf>,
    /// The clang that compiles AMD code (default: clang-15, then clang).
    #[arg(long, value_name = "PATH")]
    pub(crate) clang: Option<PathBuf>,
    /// Also write each kernel's machine code to DIR, one file per kernel, architecture and
    /// precision: NVIDIA SASS (nvdisasm's listing, `.sass`) and AMD assembly (clang's, `.s`),
    /// what the table's loop columns are read from.
    #[arg(long, value_name = "DIR")]
    pub(crate) sass: Option<PathBuf>,
    /// Compile this many kernels at once (default: one per core, at most 8). Rows print in
    /// order either way; a row over the first call's compile-time limit is compiled again
    /// alone, and that time is the one shown.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) jobs: Option<u32>,
    /// Also compile the matrix-unit rungs' configurations beyond their defaults for every
    /// architecture and element type given (default: for the last NVIDIA architecture given
    /// and every AMD one, and not in bf16, which is f16's code with another element type).
    #[arg(long)]
    pub(crate) every_target: bool,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A value as typed on the command line, with its text: a kernel's own settings are told
/// apart from its defaults.
#[derive(Clone, Debug)]
pub(crate) struct Named<T> {
    pub(crate) value: T,
    pub(crate) text: String,
}

impl<T: std::str::FromStr> std::str::FromStr for Named<T>
where
    T::Err: fmt::Display,
{
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Ok(Named {
            value: text.parse().map_err(|e: T::Err| e.to_string())?,
            text: text.into(),
        })
    }
}

/// The values of `named`, refused where one names a tile size (`:tpb=`) that `--tpb` contradicts:
/// neither silently wins.
pub(crate) fn unnamed<T: Clone>(
    flag: &str,
    named: &[Named<T>],
    tpb: &[u32],
) -> Result<Vec<T>, Failure> {
    for n in named {
        let own = n
            .text
            .split(':')
            .skip(1)
            .find_map(|s| s.trim().strip_prefix("tpb="));
        let differs = |own: &&str| tpb.iter().any(|&t| own.trim().parse() != Ok(t));
        if let Some(own) = own.filter(differs) {
            let given: Vec<String> = tpb.iter().map(u32::to_string).collect();
            return Err(Failure::Usage(format!(
                "--tpb {} conflicts with tpb={own} in {flag} {}: give the tile size once",
                given.join(","),
                n.text
            )));
        }
    }
    Ok(named.iter().map(|n| n.value.clone()).collect())
}

/// The plans `configs` name (default: every rung in its default configuration, or with `tpb`,
/// every rung that has that setting), each with every tile size of `tpb` when some are given.
pub(crate) fn plans(configs: &[Config], tpb: &[u32]) -> Result<Vec<Plan>, Failure> {
    let configs: Vec<Config> = if configs.is_empty() {
        // With --tpb alone, the rungs that have a TPB setting.
        let has_tpb = |k: &&tilemm::Kernel| {
            tpb.iter()
                .all(|t| k.parse_config(&format!("tpb={t}")).is_ok())
        };
        tilemm::Kernel::ALL
            .iter()
            .filter(has_tpb)
            .map(|k| k.default_config())
            .collect()
    } else {
        configs.to_vec()
    };
    let mut plans = Vec::new();
    for config in configs {
        if tpb.is_empty() {
            plans.push(Plan::new(config));
        }
        for t in tpb {
            let config = config
                .kernel()
                .parse_config(&format!("tpb={t}"))
                .map_err(Failure::Usage)?;
            plans.push(Plan::new(config));
        }
    }
    Ok(plans)
}

/// A matrix dimension: a whole number (0 is refused by name later, with the other checks).
pub(crate) fn dimension(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => {
            format!("'{s}' is too large for this machine's sizes")
        }
        _ => format!("'{s}' is not a matrix dimension (a whole number ≥ 1)"),
    })
}

/// A problem size on the command line: `N` (square) or `MxKxN`.
#[derive(Clone, Copy)]
pub(crate) struct Size(pub(crate) usize, pub(crate) usize, pub(crate) usize);

impl std::str::FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(['x', 'X', '×']).collect();
        let parse = |p: &str| {
            p.trim()
                .parse::<usize>()
                .map_err(|e| format!("size '{s}': {e} (write N or MxKxN)"))
        };
        match parts.as_slice() {
            [n] => parse(n).map(|n| Size(n, n, n)),
            [m, k, n] => Ok(Size(parse(m)?, parse(k)?, parse(n)?)),
            _ => Err(format!("size '{s}': write N or MxKxN")),
        }
    }
}

/// `--kernel` with `--tpb` applied: `--tpb` alone means the example's tiled kernel, and `auto`
/// picks its own tile sizes.
pub(crate) fn kernel_choice(
    kernel: Option<KernelChoice>,
    tpb: Option<u32>,
) -> Result<KernelChoice, Failure> {
    let kernel = match (kernel, tpb) {
        (Some(kernel), _) => kernel,
        (None, Some(_)) => KernelChoice::Fixed(tilemm::Kernel::Tiled.default_config()),
        (None, None) => KernelChoice::Auto,
    };
    match (kernel, tpb) {
        (KernelChoice::Auto, Some(_)) => Err(Failure::Usage(
            "--tpb needs a rung (--kernel tiled, say): auto picks tile sizes itself".into(),
        )),
        (KernelChoice::Fixed(config), tpb) => Ok(KernelChoice::Fixed(
            plans(&[config], tpb.as_slice())?[0].config,
        )),
        (KernelChoice::Auto, None) => Ok(KernelChoice::Auto),
    }
}

/// What `bench --kernels` names, `--tpb` applied: `auto` (when named, or by default) and the
/// plans. The default is auto and every rung in its default configuration.
pub(crate) fn bench_choices(
    kernels: &[KernelChoice],
    tpb: &[u32],
) -> Result<(bool, Vec<Plan>), Failure> {
    let fixed: Vec<Config> = kernels
        .iter()
        .filter_map(|k| match k {
            KernelChoice::Fixed(c) => Some(*c),
            KernelChoice::Auto => None,
        })
        .collect();
    if kernels.contains(&KernelChoice::Auto) && !tpb.is_empty() {
        return Err(Failure::Usage(
            "--tpb needs rungs (--kernels tiled, say): auto picks tile sizes itself".into(),
        ));
    }
    let auto = kernels.contains(&KernelChoice::Auto) || (kernels.is_empty() && tpb.is_empty());
    let plans = if fixed.is_empty() && !kernels.is_empty() && tpb.is_empty() {
        // `--kernels auto` alone.
        Vec::new()
    } else {
        plans(&fixed, tpb)?
    };
    Ok((auto, plans))
}
