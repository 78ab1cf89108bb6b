//! The `tilemm` command line: a thin layer over the `tilemm` library.

use std::fmt;
use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tilemm::backend::{default_device, install_hint, list_devices, open_device};
use tilemm::bench;
use tilemm::compile_check::{self, Arch, Toolchain};
use tilemm::emit::{self, Target};
use tilemm::plan::format_bytes;
use tilemm::run::{plan_host_memory, Inputs, RunOptions, Runner};
use tilemm::tune::{self, TuneBudget, TuneOptions};
use tilemm::{
    inputs, one_line, Backend, Config, DType, KernelChoice, Plan, Precision, Problem, Shape,
};

mod plot;

/// Fast matrix multiplication on the GPUs of every vendor, checked against the CPU.
#[derive(Parser)]
#[command(name = "tilemm", version, about, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
struct DeviceArgs {
    /// Backend: wgpu, cuda, hip or cpu (the CPU alone). Default: the best GPU found (CUDA, then
    /// HIP, then wgpu), else the CPU alone.
    #[arg(long)]
    backend: Option<Backend>,
    /// Device index within the backend (see `tilemm devices`).
    #[arg(long)]
    device: Option<usize>,
}

/// How `--kernel auto` tunes: shared by `run`, `bench` and `tune`.
#[derive(Args)]
struct TuneArgs {
    /// How long `auto` may time candidates when the cache does not hold the device and shape
    /// class as fully tuned: auto (about 1 s, or 20× the product's own time if longer; later
    /// runs of the class go on where it stopped), full (every candidate the model keeps), or
    /// seconds (0: the best-ranked candidate alone). The best-ranked candidate not yet timed
    /// always is, and the winner is verified. Default: auto for `run`, full for `bench` and
    /// `tune`. The cache file is $TILEMM_CACHE_DIR/tuning.json, else tilemm/tuning.json in
    /// the user's cache directory.
    #[arg(long, value_name = "auto|full|SECONDS", allow_negative_numbers = true)]
    tune_budget: Option<TuneBudget>,
    /// Tune even when the cache holds a choice, and replace it.
    #[arg(long)]
    retune: bool,
}

impl TuneArgs {
    /// The options, with `budget` unless --tune-budget was given.
    fn options(&self, budget: TuneBudget) -> TuneOptions {
        // On a terminal, a line on stderr says why the first run of a shape class waits.
        let on_tuning: fn(&str) = |line| {
            let _ = writeln!(io::stderr(), "tilemm: {line}");
        };
        TuneOptions {
            budget: self.tune_budget.unwrap_or(budget),
            retune: self.retune,
            on_tuning: io::IsTerminal::is_terminal(&io::stderr()).then_some(on_tuning),
            ..TuneOptions::default()
        }
    }
}

/// `run --kernel`'s help, with the rungs of the registry.
fn run_kernel_help() -> String {
    let names: Vec<&str> = tilemm::Kernel::ALL.iter().map(|k| k.name()).collect();
    format!(
        "Kernel: auto (the tuner picks, and remembers, the fastest rung for the device and shape \
         class), or a rung of the ladder ({}), optionally with its settings (`tiled:tpb=32`). \
         Default: auto, or tiled with --tpb",
        names.join(", ")
    )
}

/// A peak rate in GFLOPS: finite and positive.
fn peak_gflops(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|g| g.is_finite() && *g > 0.0)
        .ok_or_else(|| format!("'{s}' is not a positive number of GFLOPS"))
}

#[derive(Args)]
struct RunArgs {
    /// Kernel: auto (the tuner picks, and remembers, the fastest rung for the device and
    /// shape class), or a rung of the ladder, optionally with its settings (`tiled:tpb=32`).
    /// Default: auto, or tiled with --tpb.
    #[arg(long, help = run_kernel_help())]
    kernel: Option<Named<KernelChoice>>,
    /// Threads per block along each axis (8, 16, 32): short for `--kernel RUNG:tpb=T`.
    #[arg(long)]
    tpb: Option<u32>,
    /// Rows of A and C.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    m: usize,
    /// Columns of A, rows of B.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    k: usize,
    /// Columns of B and C.
    #[arg(short, default_value_t = 256, conflicts_with = "a", allow_negative_numbers = true, value_parser = dimension)]
    n: usize,
    /// Products in the batch: A, B and C hold that many matrices each.
    #[arg(long, default_value_t = 1, conflicts_with = "a", value_parser = dimension)]
    batch: usize,
    /// A is stored transposed (K×M; with --a, the file as stored) and used as Aᵀ: a view, not
    /// a copy, as BLAS's TRANSA.
    #[arg(long)]
    trans_a: bool,
    /// B is stored transposed (N×K; with --b, the file as stored) and used as Bᵀ.
    #[arg(long)]
    trans_b: bool,
    /// α in C = α·A·B + β·C.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    alpha: f64,
    /// β in C = α·A·B + β·C; C then starts random (uniform in [-1, 1)). 0 leaves C unread.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    beta: f64,
    /// Element type of A, B and C: f32, f16, bf16 (accumulated in f32), tf32 (f32 data
    /// multiplied by tf32 matrix units, NVIDIA sm_80 and later through cuda; never chosen
    /// for f32) or f64. Default: f32, or the files' type; with files it must be theirs (tf32:
    /// float32 files).
    #[arg(long)]
    dtype: Option<DType>,
    /// Seed of the random inputs (uniform in [-1, 1)).
    #[arg(long, default_value_t = 0, conflicts_with = "a")]
    seed: u64,
    /// Read A from a 2-D float16, float32 or float64 .npy file, or a pipe such as `<(…)`
    /// (needs --b). The files' dtype is the precision; a Fortran-order file is used as a
    /// column-major view, not reordered.
    #[arg(long, requires = "b", value_name = "A.npy")]
    a: Option<PathBuf>,
    /// Read B from a .npy file of A's dtype (needs --a).
    #[arg(long, requires = "a", value_name = "B.npy")]
    b: Option<PathBuf>,
    /// Read C's initial value from a .npy file of A's dtype (needs --a); C keeps the file's
    /// order. With β = 0 it is not read, as in BLAS.
    #[arg(long, requires = "a", value_name = "C0.npy")]
    c: Option<PathBuf>,
    /// Write C to a .npy file in its dtype (bf16 as float32, exactly; 3-D for a batch).
    #[arg(long, value_name = "C.npy")]
    out: Option<PathBuf>,
    #[command(flatten)]
    target: DeviceArgs,
    #[command(flatten)]
    tune: TuneArgs,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchArgs {
    /// Kernels to measure, comma-separated: auto, or a rung with optional settings
    /// (`auto,naive,tiled:tpb=32,register:tm=16:tn=8:side=8`). Default: auto and every rung in
    /// its default configuration.
    #[arg(long, value_delimiter = ',')]
    kernels: Vec<Named<KernelChoice>>,
    /// Tile sizes to measure each kernel with, comma-separated (8, 16, 32): short for
    /// `RUNG:tpb=T` settings.
    #[arg(long, value_delimiter = ',')]
    tpb: Vec<u32>,
    /// Problem sizes, comma-separated: N for N×N×N, or MxKxN. Default: 128, 256, … up to 2048
    /// on a CPU adapter (lavapipe) or the CPU alone, up to 8192 on GPUs.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<Size>,
    /// Timed runs per measurement (after one warm-up run).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    repeat: u16,
    /// Element type of A, B and C: f32, f16, bf16 (accumulated in f32), tf32 (f32 data on
    /// tf32 matrix units) or f64. Rungs that do not compute it are left out with a note (named
    /// ones are refused), and so are peers that do not (rocBLAS is measured in f32 only; a
    /// cubek-matmul strategy the device cannot run in it, or that computes another precision,
    /// such as its tensor-core strategies' tf32 for f32, is skipped with a note).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// The device's peak GFLOPS for --dtype, for the "% peak" column where tilemm's datasheet
    /// table does not know the device (or to measure against another figure, such as the peak
    /// at the clock the device sustains). Default: the datasheet figure, where known.
    #[arg(long, value_name = "GFLOPS", value_parser = peak_gflops, allow_negative_numbers = true)]
    peak: Option<f64>,
    #[command(flatten)]
    target: DeviceArgs,
    #[command(flatten)]
    tune: TuneArgs,
    /// Also measure the peers on the same device: CubeCL's own matmul (cubek-matmul 0.2) in
    /// its auto, unit (simple, double), naive and tensor-core (simple cmma; simple, double,
    /// double-async and specialized mma) strategies, each where it computes --dtype (its
    /// tensor cores turn f32 into tf32) (a build with --features peers). The CPU path, and
    /// cuBLAS or rocBLAS on CUDA or HIP, are always measured.
    #[arg(long)]
    peers: bool,
    /// Write a plot of GFLOPS against size, one line per implementation, to STEM.svg and
    /// STEM.png.
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
    /// Print the measurements as CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print the measurements as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TuneCommandArgs {
    /// Problem sizes, comma-separated: N for N×N×N, or MxKxN. Each stands for its shape class
    /// (M, K and N each rounded to the nearest power of two).
    #[arg(long, value_delimiter = ',', default_value = "256,1024")]
    sizes: Vec<Size>,
    /// Element types, comma-separated: f32, f16, bf16, tf32 or f64; those the device cannot
    /// compute are left out with a note.
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    dtype: Vec<DType>,
    /// A is stored transposed (K×M): its own shape class.
    #[arg(long)]
    trans_a: bool,
    /// B is stored transposed (N×K): its own shape class.
    #[arg(long)]
    trans_b: bool,
    #[command(flatten)]
    target: DeviceArgs,
    #[command(flatten)]
    tune: TuneArgs,
    /// Print the tuner's reports as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CompileCheckArgs {
    /// Architectures, comma-separated (sm_75, sm_80, sm_86, sm_89, sm_90, gfx90a, gfx940, gfx1100).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sm_80,sm_90,gfx90a,gfx940,gfx1100"
    )]
    archs: Vec<Arch>,
    /// Kernels, comma-separated (default: every rung, in its default configuration).
    #[arg(long, value_delimiter = ',')]
    kernels: Vec<Named<Config>>,
    /// Tile sizes, comma-separated: short for `RUNG:tpb=T` settings.
    #[arg(long, value_delimiter = ',')]
    tpb: Vec<u32>,
    /// Element types, comma-separated, each in its own precision (f16 and bf16 accumulate in
    /// f32).
    #[arg(long, value_delimiter = ',', default_value = "f32,f16,bf16,f64")]
    dtypes: Vec<DType>,
    /// A directory holding cuda_runtime.h (default: CUDA_PATH, /usr/local/cuda, or the PyPI
    /// wheel next to libnvrtc on LD_LIBRARY_PATH).
    #[arg(long, value_name = "DIR")]
    cuda_include: Vec<PathBuf>,
    /// The clang that compiles AMD code (default: clang-15, then clang).
    #[arg(long, value_name = "PATH")]
    clang: Option<PathBuf>,
    /// Also write each kernel's machine code to DIR, one file per kernel, architecture and
    /// precision: NVIDIA SASS (nvdisasm's listing, `.sass`) and AMD assembly (clang's, `.s`),
    /// what the table's loop columns are read from.
    #[arg(long, value_name = "DIR")]
    sass: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// A value as typed on the command line, with its text: a kernel's own settings are told
/// apart from its defaults.
#[derive(Clone, Debug)]
struct Named<T> {
    value: T,
    text: String,
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
fn unnamed<T: Clone>(flag: &str, named: &[Named<T>], tpb: &[u32]) -> Result<Vec<T>, Failure> {
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
fn plans(configs: &[Config], tpb: &[u32]) -> Result<Vec<Plan>, Failure> {
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
fn dimension(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => {
            format!("'{s}' is too large for this machine's sizes")
        }
        _ => format!("'{s}' is not a matrix dimension (a whole number ≥ 1)"),
    })
}

/// A problem size on the command line: `N` (square) or `MxKxN`.
#[derive(Clone, Copy)]
struct Size(usize, usize, usize);

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

/// Why a command stopped.
enum Failure {
    /// The request could not be run.
    Tilemm(tilemm::Error),
    /// Arguments that contradict each other.
    Usage(String),
    /// The plot could not be prepared or written.
    Plot(String),
    /// A panic: a bug, tilemm's or a dependency's.
    Internal(String),
    /// Standard output could not be written.
    Stdout(io::Error),
}

impl From<tilemm::Error> for Failure {
    fn from(e: tilemm::Error) -> Self {
        Failure::Tilemm(e)
    }
}

type CommandResult = Result<ExitCode, Failure>;

/// Writes a line to stdout. A failed write (a full disk, `> /dev/full`) stops the command; a
/// closed pipe (`| head -1`) stops it quietly.
fn say(line: fmt::Arguments) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(Failure::Stdout)
}

macro_rules! say {
    ($($arg:tt)*) => {
        say(format_args!($($arg)*))?
    };
}

/// One line on stderr; if even that fails there is nobody left to tell.
fn complain(message: &str) {
    let _ = writeln!(io::stderr(), "tilemm: {}", one_line(message));
}

/// Exit codes: 0 verified, 1 the result failed verification, 2 the request could not be run.
const EXIT_FAIL: u8 = 1;
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    // A write past a file-size limit (`ulimit -f`) is then an error tilemm reports, not a
    // signal that kills it half-way through writing --out.
    #[cfg(unix)]
    // SAFETY: ignoring a signal installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            // --help, --version.
            return match write!(io::stdout(), "{}", err.render())
                .and_then(|()| io::stdout().flush())
            {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    complain(&format!("error: cannot write to standard output: {e}"));
                    ExitCode::from(EXIT_ERROR)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Err(err) => {
            // clap's message spans several lines; tilemm's errors are one line each.
            let text = err.render().to_string();
            let text: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("For more information"))
                .collect::<Vec<_>>()
                .join("\n");
            complain(&text);
            return ExitCode::from(EXIT_ERROR);
        }
    };
    // A panic (a bug, or a dependency's) is one line on stderr and exit 2, like any refusal:
    // the hook keeps its message and place, and the command is caught where it unwinds to.
    std::panic::set_hook(Box::new(|info| {
        let message = tilemm::panic_message(info.payload());
        let place = info
            .location()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        if std::thread::current().name() == Some("main") {
            *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{message}{place}"));
        } else {
            // A runtime's own thread, which its runtime catches: said, in one line.
            complain(&format!("note: a runtime thread stopped: {message}{place}"));
        }
    }));
    let result = std::panic::catch_unwind(|| dispatch(cli.command)).unwrap_or_else(|payload| {
        // The hook's record has the place; a panic resumed from another thread has only its
        // payload.
        let what = PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
        Err(Failure::Internal(
            what.unwrap_or_else(|| tilemm::panic_message(&*payload)),
        ))
    });
    let result =
        result.and_then(|code| io::stdout().flush().map(|()| code).map_err(Failure::Stdout));
    match result {
        Ok(code) => code,
        // Whoever closed the pipe has read what they wanted.
        Err(Failure::Stdout(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Stdout(e)) => {
            complain(&format!("error: cannot write to standard output: {e}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Tilemm(err)) => {
            // The library names the cargo feature; the command line says how to build it.
            let rebuild = match &err {
                tilemm::Error::NotBuilt { feature, .. } => {
                    format!(" (rebuild: cargo build --release -p tilemm-cli --features {feature})")
                }
                _ => String::new(),
            };
            complain(&format!("error: {err}{rebuild}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Usage(message) | Failure::Plot(message)) => {
            complain(&format!("error: {message}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Internal(message)) => {
            complain(&format!(
                "error: internal error (please report it): {message}"
            ));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The last panic's message and place, for the one line that reports it.
static PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn dispatch(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Run(args) => run_command(args),
        Command::Bench(args) => bench_command(args),
        Command::Tune(args) => tune_command(args),
        Command::Devices { json } => devices_command(json),
        Command::CompileCheck(args) => compile_check_command(args),
        Command::Emit {
            kernel,
            target,
            tpb,
            dtype,
        } => emit_command(kernel, target, tpb, dtype),
    }
}

/// `--kernel` with `--tpb` applied: `--tpb` alone means the example's tiled kernel, and `auto`
/// picks its own tile sizes.
fn kernel_choice(kernel: Option<KernelChoice>, tpb: Option<u32>) -> Result<KernelChoice, Failure> {
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
fn bench_choices(kernels: &[KernelChoice], tpb: &[u32]) -> Result<(bool, Vec<Plan>), Failure> {
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

fn run_command(args: RunArgs) -> CommandResult {
    let kernel = unnamed("--kernel", args.kernel.as_slice(), args.tpb.as_slice())?;
    let kernel = kernel_choice(kernel.into_iter().next(), args.tpb)?;
    // An unusable destination is refused before the run, not after it.
    let output = args
        .out
        .as_deref()
        .map(inputs::Output::create)
        .transpose()?;
    let options = RunOptions {
        backend: args.target.backend,
        device: args.target.device,
        kernel,
        tune: args.tune.options(TuneBudget::Auto),
    };
    // Device and memory are checked before any input exists: a huge request fails with a
    // message, not an out-of-memory abort, and a file's data is read only once it is known to
    // fit.
    let outcome = match (&args.a, &args.b) {
        (Some(a_path), Some(b_path)) => {
            let ops = inputs::FileOps {
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                dtype: args.dtype,
            };
            let (problem, files) = inputs::OperandFiles::open(
                a_path,
                b_path,
                args.c.as_deref(),
                (args.alpha, args.beta),
                ops,
            )?;
            for note in &files.notes {
                complain(&format!("note: {note}"));
            }
            let runner = Runner::new(&problem, &options)?;
            let (a, b, c0) = files.read()?;
            let c0 = match c0 {
                Some(c0) => Some(c0),
                None => inputs::random_initial_c(&problem, args.seed)?,
            };
            let files = Inputs::Files {
                a: a_path.clone(),
                b: b_path.clone(),
                c: args.c.clone(),
            };
            runner.run(&inputs::Operands { a, b, c0 }, files)?
        }
        _ => {
            let problem = Shape {
                m: args.m,
                k: args.k,
                n: args.n,
                batch: args.batch,
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                broadcast_a: false,
                broadcast_b: false,
                alpha: args.alpha,
                beta: args.beta,
                precision: Precision::of(args.dtype.unwrap_or(DType::F32)),
            }
            .problem()?;
            let runner = Runner::new(&problem, &options)?;
            let operands = inputs::random_operands(&problem, args.seed)?;
            runner.run(&operands, Inputs::Random { seed: args.seed })?
        }
    };
    let problem = outcome.report.problem;
    if let Some(output) = output {
        output.write(&outcome.c, &problem.c, problem.batch)?;
    }
    let verdict = if outcome.report.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    };
    let printed = if args.json {
        say(format_args!(
            "{}",
            serde_json::to_string_pretty(&outcome.report).expect("reports serialize")
        ))
    } else {
        say(format_args!("{}", outcome.report))
    };
    match printed {
        // The verdict stands even if nobody reads the report.
        Err(Failure::Stdout(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(verdict),
        Err(e) => Err(e),
        Ok(()) => Ok(verdict),
    }
}

fn tune_command(args: TuneCommandArgs) -> CommandResult {
    let mut notes = Vec::new();
    let Some(gpu) = open_device(args.target.backend, args.target.device, &mut notes)? else {
        return Err(Failure::Usage(
            "tune needs a GPU device, and none was found or the CPU was named: the CPU path \
             has nothing to tune"
                .into(),
        ));
    };
    for note in &notes {
        complain(&format!("note: {note}"));
    }
    let options = args.tune.options(TuneBudget::Full);
    let mut reports = Vec::new();
    for &Size(m, k, n) in &args.sizes {
        for &dtype in &args.dtype {
            let problem = Shape {
                trans_a: args.trans_a,
                trans_b: args.trans_b,
                precision: Precision::of(dtype),
                ..Shape::new(m, k, n)
            }
            .problem()?;
            // A type the device lacks leaves its classes out; other sizes and types go on.
            let info = gpu.info();
            if let Err(e) = info.types.check(problem.precision, &info.name) {
                complain(&format!("note: {m}×{k}×{n} {dtype} left out: {e}"));
                continue;
            }
            let report = tune::choose(&gpu, &problem, &options)?;
            for note in &report.notes {
                complain(&format!("note: {note}"));
            }
            if !args.json {
                say!("{m}×{k}×{n} {dtype}: {report}");
            }
            reports.push(report);
        }
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialize")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Sizes `bench` measures by default: 128 to 2048 on a CPU adapter (or the CPU alone), to
/// 8192 on GPUs.
fn default_sizes(kind: Option<tilemm::DeviceKind>) -> Vec<Size> {
    let top = match kind {
        Some(tilemm::DeviceKind::Cpu) | None => 2048,
        Some(_) => 8192,
    };
    std::iter::successors(Some(128), |n| Some(n * 2))
        .take_while(|&n| n <= top)
        .map(|n| Size(n, n, n))
        .collect()
}

fn bench_command(args: BenchArgs) -> CommandResult {
    let kernels = unnamed("--kernels", &args.kernels, &args.tpb)?;
    let (auto, plans) = bench_choices(&kernels, &args.tpb)?;
    // The progress bar says when auto is tuning.
    let tune_options = TuneOptions {
        on_tuning: None,
        ..args.tune.options(TuneBudget::Full)
    };
    if args.peers && !tilemm::peers::BUILT {
        return Err(tilemm::Error::NotBuilt {
            what: "the cubek-matmul peers (--peers)".into(),
            feature: "peers",
        }
        .into());
    }
    if let Some(stem) = &args.plot {
        plot::check_destination(stem).map_err(Failure::Plot)?;
        plot::prepare_font().map_err(Failure::Plot)?;
    }
    let mut notes = Vec::new();
    let gpu = open_device(args.target.backend, args.target.device, &mut notes)?;
    let info = gpu.as_ref().map(|g| g.info());
    let sizes = if args.sizes.is_empty() {
        default_sizes(info.map(|i| i.kind))
    } else {
        args.sizes.clone()
    };
    let precision = Precision::of(args.dtype);
    // tf32 promises matrix units: refused, in one line, where there are none.
    match info {
        Some(info) => info.types.check(precision, &info.name)?,
        None if args.dtype == DType::TF32 => Err(tilemm::device::no_tf32("the CPU path"))?,
        None => {}
    }
    let problems = sizes
        .iter()
        .map(|&Size(m, k, n)| {
            Shape {
                precision,
                ..Shape::new(m, k, n)
            }
            .problem()
        })
        .collect::<tilemm::Result<Vec<_>>>()?;
    let peers = if args.peers && gpu.is_some() {
        tilemm::peers::CubekStrategy::ALL.to_vec()
    } else {
        if args.peers {
            notes.push("--peers: no GPU device, so no cubek-matmul peer is measured".into());
        }
        Vec::new()
    };
    // cuBLAS is measured in every precision, rocBLAS in f32 only (wgpu has no vendor BLAS).
    let vendor = gpu
        .as_ref()
        .is_some_and(|g| g.backend() == Backend::Cuda || precision == Precision::F32);
    if gpu.as_ref().is_some_and(|g| g.backend() == Backend::Hip) && !vendor {
        notes.push(format!(
            "rocBLAS is measured in f32 only, so not in {}",
            args.dtype
        ));
    }
    // What "% peak" divides the GPU rows by: the figure given, else the datasheet's.
    let peak = gpu.as_ref().and_then(|g| {
        args.peak
            .and_then(tilemm::peak::given)
            .or_else(|| tilemm::peak::datasheet(&g.info().name, precision))
    });
    // Rungs measured by default whose default configuration the device cannot run (laid out
    // for planes of another width, more shared memory or threads than it has in this
    // precision) are measured in the first configuration it runs; those it cannot run at all
    // (matrix units it lacks, a precision they do not compute) are left out with a note. Named
    // ones are refused below.
    let mut plans = plans;
    if let (Some(info), true) = (info, args.kernels.is_empty()) {
        let unavailable = |plan: &Plan| {
            let kernel = format!("the {plan} kernel");
            problems.iter().find_map(|p| match plan.check(p, info) {
                Err(tilemm::Error::KernelUnavailable { why, .. }) => Some(why.to_string()),
                // A limit of the kernel's own (its block, its shared memory), not the size's.
                Err(e @ tilemm::Error::DeviceLimit { .. })
                    if matches!(&e,
                    tilemm::Error::DeviceLimit { what, .. } if *what == kernel) =>
                {
                    Some(e.to_string())
                }
                _ => None,
            })
        };
        plans = plans
            .into_iter()
            .filter_map(|plan| {
                let Some(why) = unavailable(&plan) else {
                    return Some(plan);
                };
                let runnable = plan
                    .kernel()
                    .configs()
                    .into_iter()
                    .map(Plan::new)
                    .find(|p| unavailable(p).is_none());
                match runnable {
                    Some(other) => {
                        notes.push(format!("{other} is measured in place of {plan}: {why}"));
                        Some(other)
                    }
                    None => {
                        notes.push(format!("{plan} is not measured: {why}"));
                        None
                    }
                }
            })
            .collect();
    }
    // Refuse every impossible size before measuring anything.
    let mut references = Vec::new();
    for problem in &problems {
        if let Some(info) = info {
            for plan in &plans {
                plan.check(problem, info)?;
            }
        }
        // Every kernel, peer, the vendor library and the CPU are checked against one reference.
        references.push(plan_host_memory(
            problem,
            info,
            plans.len() + usize::from(auto) + peers.len() + 1 + usize::from(vendor),
        )?);
    }
    // The implementation column fits any rung's name, as measured or as auto's choice.
    let width = tilemm::Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .map(|c| "auto → ".chars().count() + Plan::new(c).to_string().chars().count())
        .max()
        .unwrap_or(0)
        .max(40);
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        Format::Table
    };
    match format {
        Format::Table => {
            for note in &notes {
                say!("note: {note}");
            }
            match &gpu {
                Some(g) => say!(
                    "device: {} ({}, {} via {})",
                    g.info().name,
                    g.info().kind.name(),
                    g.info().api,
                    g.backend()
                ),
                None => say!("device: CPU only"),
            }
            match &peak {
                Some(p) => say!(
                    "peak: {:.0} GFLOPS in {} ({}); \"% peak\" is of the GPU's",
                    p.gflops,
                    args.dtype,
                    p.source
                ),
                None if gpu.is_some() => say!(
                    "peak: not known for this device in {} (give one with --peak)",
                    args.dtype
                ),
                None => {}
            }
            say!(
                "{:<16} {:<width$} {:<9} {:>11} {:>11} {:>10} {:>7}  {:<18} check",
                "size",
                "implementation",
                "computes",
                "median ms",
                "min ms",
                "GFLOPS",
                "% peak",
                "timing"
            );
        }
        Format::Csv => say!(
            "m,k,n,dtype,implementation,computed,median_ms,min_ms,gflops,percent_of_peak,timing,verified"
        ),
        Format::Json => {}
    }
    let repeat = usize::from(args.repeat);
    let per_size = if gpu.is_some() {
        plans.len() + usize::from(auto) + peers.len() + 1 + usize::from(vendor)
    } else {
        1
    };
    // A bar on stderr, drawn only on a terminal (indicatif hides it otherwise).
    let bar = indicatif::ProgressBar::new((per_size * problems.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    let mut all = Vec::new();
    let mut tunings = Vec::new();
    for (problem, reference) in problems.iter().zip(references) {
        let operands = inputs::random_operands(problem, 0)?;
        let work = bench::Workload::new(problem, &operands, reference)?;
        let mut rows = Vec::new();
        let step = |what: &str| {
            bar.set_message(format!("{} {what}", size_name(problem)));
        };
        if let Some(gpu) = &gpu {
            if auto {
                step("auto (tuning)");
                let tuning = tune::choose(gpu, problem, &tune_options)?;
                if format == Format::Table {
                    bar.suspend(|| -> Result<(), Failure> {
                        for note in &tuning.notes {
                            say!("note: {note}");
                        }
                        say!("{:<16} {tuning}", size_name(problem));
                        Ok(())
                    })?;
                }
                let mut row = bench::gpu_kernel(gpu, &work, &tuning.chosen, repeat)?;
                row.implementation = format!("auto → {}", row.implementation);
                rows.push(row);
                tunings.push(serde_json::json!({
                    "m": problem.m, "k": problem.k, "n": problem.n, "tuning": tuning,
                }));
                bar.inc(1);
            }
            for plan in &plans {
                step(&plan.to_string());
                rows.push(bench::gpu_kernel(gpu, &work, plan, repeat)?);
                bar.inc(1);
            }
            for &strategy in &peers {
                step(&format!("cubek {strategy}"));
                match tilemm::peers::cubek(gpu, &work, strategy, repeat) {
                    Ok(row) => rows.push(row),
                    // A strategy the device cannot run (tensor cores on lavapipe) is a note.
                    Err(err) => {
                        let note = format!(
                            "cubek-matmul {strategy} skipped at {}: {}",
                            size_name(problem),
                            one_line(&err.to_string())
                        );
                        if format == Format::Table {
                            bar.suspend(|| say(format_args!("note: {note}")))?;
                        }
                        notes.push(note);
                    }
                }
                bar.inc(1);
            }
            // The vendor library on the same device and matrices: the bar the ladder climbs to.
            step("vendor BLAS");
            match vendor
                .then(|| vendor_baseline(gpu, &work, repeat))
                .flatten()
            {
                Some(Ok(baseline)) => rows.push(baseline),
                Some(Err(err)) => {
                    let note = format!(
                        "vendor baseline skipped at {}: {}",
                        size_name(problem),
                        one_line(&err.to_string())
                    );
                    if format == Format::Table {
                        bar.suspend(|| say(format_args!("note: {note}")))?;
                    }
                    notes.push(note);
                }
                None => {}
            }
            bar.inc(usize::from(vendor) as u64);
        }
        // Every GPU row against the GPU's peak; the CPU's is not known.
        for row in &mut rows {
            row.percent_of_peak = peak.as_ref().map(|p| p.percent(row.gflops));
        }
        step("cpu");
        rows.push(bench::cpu_gemm(&work, repeat)?);
        bar.inc(1);
        for m in &rows {
            let check = if m.verified { "PASS" } else { "FAIL" };
            let percent = m.percent_of_peak;
            match format {
                Format::Table => bar.suspend(|| {
                    say(format_args!(
                        "{:<16} {:<width$} {:<9} {:>11.3} {:>11.3} {:>10.2} {:>7}  {:<18} {check}",
                        size_name(problem),
                        m.implementation,
                        m.computed.short_name(),
                        m.median_ms,
                        m.min_ms,
                        m.gflops,
                        percent.map_or("—".into(), |p| format!("{p:.1}")),
                        m.timing,
                    ))
                })?,
                Format::Csv => bar.suspend(|| {
                    say(format_args!(
                        "{},{},{},{},\"{}\",{},{},{},{},{},{},{}",
                        problem.m,
                        problem.k,
                        problem.n,
                        args.dtype,
                        m.implementation.replace('"', "\"\""),
                        m.computed.short_name(),
                        m.median_ms,
                        m.min_ms,
                        m.gflops,
                        percent.map_or(String::new(), |p| p.to_string()),
                        m.timing,
                        m.verified
                    ))
                })?,
                Format::Json => {}
            }
        }
        all.extend(rows);
    }
    bar.finish_and_clear();
    if format == Format::Json {
        let object = serde_json::json!({
            "device": gpu.as_ref().map(|g| g.info()),
            "backend": gpu.as_ref().map_or(Backend::Cpu, |g| g.backend()),
            "dtype": args.dtype,
            "peak": peak,
            "notes": notes,
            "tuning": tunings,
            "measurements": all,
        });
        say!(
            "{}",
            serde_json::to_string_pretty(&object).expect("measurements serialize")
        );
    }
    if let Some(stem) = &args.plot {
        let title = match &gpu {
            Some(g) => format!("tilemm bench, {}, {}", g.info().name, args.dtype),
            None => format!("tilemm bench, CPU, {}", args.dtype),
        };
        let written = plot::write(stem, &title, &all).map_err(Failure::Plot)?;
        if format == Format::Table {
            say!(
                "plot: {} and {}",
                written[0].display(),
                written[1].display()
            );
        }
    }
    Ok(if all.iter().all(|m| m.verified) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

/// How `bench` prints its measurements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
    Json,
}

fn size_name(problem: &Problem) -> String {
    format!("{}×{}×{}", problem.m, problem.k, problem.n)
}

/// cuBLAS on a CUDA device, rocBLAS on a HIP device; `None` for wgpu, which has no vendor BLAS.
fn vendor_baseline(
    gpu: &tilemm::GpuSession,
    work: &bench::Workload,
    repeat: usize,
) -> Option<tilemm::Result<bench::Measurement>> {
    match gpu.backend() {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(tilemm::vendor_blas::cublas_gemm(
            gpu.info().index,
            work,
            repeat,
        )),
        #[cfg(feature = "hip")]
        Backend::Hip => Some(tilemm::vendor_blas::rocblas_sgemm(
            gpu.info().index,
            work,
            repeat,
        )),
        _ => {
            let _ = (work, repeat);
            None
        }
    }
}

/// The first configuration of `plan`'s rung laid out for planes of `width`, where `plan` is
/// laid out for another width.
fn fit_plane(plan: &Plan, width: u32) -> Option<Plan> {
    if plan.config.plane_width().is_none_or(|p| p == width) {
        return None;
    }
    plan.kernel()
        .configs()
        .into_iter()
        .find(|c| c.plane_width() == Some(width))
        .map(Plan::new)
}

fn compile_check_command(args: CompileCheckArgs) -> CommandResult {
    let mut plans = plans(&unnamed("--kernels", &args.kernels, &args.tpb)?, &args.tpb)?;
    // The rungs' default plans, which are fitted to each target's plane width (below).
    let defaults = plans.len();
    // By default, every configuration of a rung whose main loop is held to criteria (the
    // matrix-unit rungs: mma on NVIDIA, tensorcore on AMD), each its own row: each must meet
    // them.
    if args.kernels.is_empty() && args.tpb.is_empty() {
        let extra: Vec<Plan> = tilemm::Kernel::ALL
            .iter()
            .flat_map(|k| k.configs())
            .filter(|c| {
                c.matrix_loop_criteria().is_some() || c.amd_matrix_loop_criteria().is_some()
            })
            .map(Plan::new)
            .filter(|p| !plans.contains(p))
            .collect();
        plans.extend(extra);
    }
    let tools = Toolchain {
        cuda_include: args.cuda_include.clone(),
        clang: args.clang.clone(),
        sass_dir: args.sass.clone(),
    };
    compile_check::preflight(&args.archs, &tools)?;
    if !args.json {
        say!("{}", compile_check::TABLE_HEADER);
    }
    let mut results = Vec::new();
    let (mut failures, mut skipped) = (0, 0);
    // Whether a row was compiled through rocWMMA (said once, below the table).
    let mut via_rocwmma = false;
    let (dtypes, archs) = (&args.dtypes, &args.archs);
    let every = plans.iter().enumerate().flat_map(|(index, plan)| {
        dtypes.iter().flat_map(move |&dtype| {
            archs
                .iter()
                .map(move |arch| (index < defaults, plan, dtype, arch))
        })
    });
    {
        for (default, plan, dtype, arch) in every {
            let precision = Precision::of(dtype);
            // By default each rung is checked in its default configuration, or where that is
            // laid out for planes of another width than the target's, in its first one that
            // fits the target's.
            let fitted = (default && args.kernels.is_empty() && args.tpb.is_empty())
                .then(|| fit_plane(plan, arch.warp_size))
                .flatten();
            let plan = fitted.as_ref().unwrap_or(plan);
            if let Some(why) = compile_check::not_applicable(plan, precision, arch) {
                if !args.json {
                    say!(
                        "{:<40} {:<8} {:<9} skipped: {why}",
                        plan.to_string(),
                        arch.name,
                        compile_check::short_name(precision)
                    );
                }
                results.push(serde_json::json!({
                    "plan": plan, "precision": precision, "arch": arch.name,
                    "skipped": why,
                }));
                skipped += 1;
                continue;
            }
            match compile_check::check(plan, precision, arch, &tools) {
                Ok(usage) => {
                    via_rocwmma |= compile_check::through_rocwmma(plan, arch);
                    let spill = usage.forbidden_spill();
                    let no_mma = usage.missing_matrix_ops();
                    let low_fma = usage.below_fma_floor();
                    let unfed = usage.main_loop_failures();
                    let pass = !spill && !no_mma && !low_fma && unfed.is_empty();
                    failures += usize::from(!pass);
                    if !args.json {
                        let verdict = if spill {
                            "  FAIL: spills".to_string()
                        } else if no_mma {
                            "  FAIL: no matrix instruction".to_string()
                        } else if low_fma {
                            "  FAIL: main loop below its FMA floor".to_string()
                        } else if !unfed.is_empty() {
                            format!("  FAIL: main loop: {}", unfed.join("; "))
                        } else {
                            String::new()
                        };
                        say!("{usage}{verdict}");
                    }
                    results.push(serde_json::json!({
                        "usage": usage, "pass": pass, "main_loop_failures": unfed,
                    }));
                }
                Err(err) => {
                    failures += 1;
                    if !args.json {
                        say!(
                            "{:<40} {:<8} {:<9} FAIL: {err}",
                            plan.to_string(),
                            arch.name,
                            compile_check::short_name(precision)
                        );
                    }
                    results.push(serde_json::json!({
                        "plan": plan, "precision": precision, "arch": arch.name,
                        "error": err.to_string(), "pass": false,
                    }));
                }
            }
        }
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&results).expect("results serialize")
        );
    } else {
        if args
            .archs
            .iter()
            .any(|a| a.vendor == compile_check::Vendor::Amd)
        {
            match compile_check::hip_headers() {
                Some(dir) => say!(
                    "AMD sources were also compiled against the HIP headers in {} (those \
                     including a header missing there, such as hip_bf16.h before ROCm 6, \
                     against tilemm's stand-ins only)",
                    dir.display()
                ),
                None => say!(
                    "no HIP headers found (ROCm, or Debian's libamdhip64-dev): AMD sources were \
                     compiled against tilemm's stand-in header only"
                ),
            }
        }
        if let Some(headers) = via_rocwmma.then(compile_check::rocwmma_headers).flatten() {
            say!(
                "CDNA's tensor-core rows are what a `--features hip,rocwmma` build JITs: \
                 CubeCL's rocWMMA dialect, compiled against the rocWMMA headers in {}",
                headers.rocwmma.display()
            );
        }
        say!(
            "{} compiled, {skipped} skipped, {failures} failed",
            results.len() - failures - skipped
        );
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

fn emit_command(
    kernel: Named<Config>,
    target: Target,
    tpb: Option<u32>,
    dtype: DType,
) -> CommandResult {
    let kernel = unnamed("--kernel", &[kernel], tpb.as_slice())?;
    let plan = plans(&kernel, tpb.as_slice())?[0];
    let source = emit::source_for(&plan, Precision::of(dtype), target)?;
    say!("{source}");
    Ok(ExitCode::SUCCESS)
}

fn devices_command(json: bool) -> CommandResult {
    let backends: Vec<Backend> = Backend::GPU.into_iter().filter(|b| b.is_built()).collect();
    let found: Vec<_> = backends.iter().map(|&b| (b, list_devices(b))).collect();
    if json {
        let object = serde_json::json!({
            "backends": found.iter().map(|(b, devices)| serde_json::json!({
                "backend": b,
                "devices": devices,
            })).collect::<Vec<_>>(),
            "cpu": { "implementation": tilemm::cpu::CPU_GEMM, "threads": tilemm::cpu::threads() },
            "default": found
                .iter()
                .find_map(|(b, devices)| default_device(*b, devices).map(|i| serde_json::json!({
                    "backend": b, "index": i,
                }))),
        });
        say!(
            "{}",
            serde_json::to_string_pretty(&object).expect("devices serialize")
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Without --backend/--device, `run` takes the first backend with a device, and its default.
    let chosen = found
        .iter()
        .find_map(|(b, devices)| default_device(*b, devices).map(|i| (*b, i)));
    for (backend, devices) in &found {
        if devices.is_empty() {
            say!("{backend}: no device found");
            continue;
        }
        for d in devices {
            let l = &d.limits;
            let mark = if chosen == Some((*backend, d.index)) {
                "  [default]"
            } else {
                ""
            };
            say!(
                "{backend} #{}: {} ({}, {}){mark}",
                d.index,
                d.name,
                d.kind.name(),
                d.api
            );
            if !d.driver.is_empty() {
                say!("    driver               {}", d.driver);
            }
            say!(
                "    shared per block     {}",
                format_bytes(l.max_shared_bytes as u64)
            );
            say!(
                "    threads per block    {} (x ≤ {}, y ≤ {}, z ≤ {})",
                l.max_units_per_cube,
                l.max_cube_dim[0],
                l.max_cube_dim[1],
                l.max_cube_dim[2]
            );
            say!("    blocks per dimension {}", l.max_cube_count[0]);
            say!(
                "    largest binding      {}",
                format_bytes(l.max_binding_bytes)
            );
            say!(
                "    largest buffer       {}",
                format_bytes(l.max_buffer_bytes)
            );
            say!(
                "    timestamp queries    {}",
                if d.timestamps { "yes" } else { "no" }
            );
        }
    }
    if found.iter().all(|(_, d)| d.is_empty()) {
        say!("no GPU device found: {}", install_hint());
    }
    say!(
        "cpu: {} on {} threads",
        tilemm::cpu::CPU_GEMM,
        tilemm::cpu::threads()
    );
    Ok(ExitCode::SUCCESS)
}
