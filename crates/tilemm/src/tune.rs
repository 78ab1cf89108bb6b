//! `--kernel auto`: the autotuner. For a key of (device and driver, precision, layouts, shape
//! class) it ranks the valid (rung, configuration) candidates by a model, times the best-ranked
//! ones on a proxy problem of the class within a time budget, verifies the winner against the
//! reference, and keeps the choice in a cache file, so that another process does not tune
//! again.
//!
//! CubeCL 0.10's tuner (`cubecl-runtime`'s `tune`) is not used: it cannot verify a winner, does
//! not say whether its cache was hit or how many candidates it timed, has no time budget, and
//! its cache root is a process-wide setting that panics when set twice.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize, Serializer};

use crate::device::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::io::inputs;
use crate::kernels::{Compiler, Config, Kernel};
use crate::plan::Plan;
use crate::problem::{Layout, MatrixDesc, Problem};
use crate::runtime::backend::GpuSession;
use crate::runtime::timing::Samples;
use crate::types::element::HostData;
use crate::verify::Reference;

/// What `--kernel` names: a rung in a configuration, or `auto` (the tuner picks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelChoice {
    /// The tuner picks per device and shape class.
    Auto,
    /// This rung and configuration.
    Fixed(Config),
}

impl FromStr for KernelChoice {
    type Err = String;

    /// `auto`, or a rung with optional settings (see [`Config`]'s `FromStr`).
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        if s == "auto" {
            Ok(KernelChoice::Auto)
        } else {
            s.parse()
                .map(KernelChoice::Fixed)
                .map_err(|e| format!("{e}, or auto"))
        }
    }
}

impl fmt::Display for KernelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelChoice::Auto => f.write_str("auto"),
            KernelChoice::Fixed(c) => c.fmt(f),
        }
    }
}

/// How long one call of the tuner may time candidates for a class it has not fully tuned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneBudget {
    /// No search (the default of every front end): the cached choice as it is, else the
    /// model's best-ranked candidate among those quick to compile, verified, kept and saved.
    None,
    /// About 1 s, or 20 times the product's own time when that is longer: a first call costs
    /// in proportion to its work, and calls of the class go on tuning until it is fully tuned.
    Auto,
    /// This long per call.
    Time(Duration),
    /// Every candidate the model keeps, in this call.
    Full,
}

impl TuneBudget {
    /// The least time [`TuneBudget::Auto`] allows.
    pub const AUTO_FLOOR: Duration = Duration::from_secs(1);
    /// How many times the product's own time [`TuneBudget::Auto`] allows, when that is more.
    pub const AUTO_FACTOR: f64 = 20.0;

    /// Whether the budget allows a search: anything but [`TuneBudget::None`] (or a time of 0).
    pub fn searches(self) -> bool {
        !matches!(self, TuneBudget::None) && self != TuneBudget::Time(Duration::ZERO)
    }

    /// The time a call may spend timing, when the product is estimated to take `product_ms`.
    pub fn per_call(self, product_ms: f64) -> Duration {
        match self {
            TuneBudget::Auto => {
                let scaled = product_ms * Self::AUTO_FACTOR / 1e3;
                if scaled.is_finite() && scaled > Self::AUTO_FLOOR.as_secs_f64() {
                    Duration::from_secs_f64(scaled.min(1e6))
                } else {
                    Self::AUTO_FLOOR
                }
            }
            TuneBudget::Time(d) => d,
            TuneBudget::None => Duration::ZERO,
            TuneBudget::Full => Duration::MAX,
        }
    }
}

impl FromStr for TuneBudget {
    type Err = String;

    /// `none` (or 0), `auto`, `full`, or a number of seconds up to 1000000.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.trim() {
            "none" => Ok(TuneBudget::None),
            "auto" => Ok(TuneBudget::Auto),
            "full" => Ok(TuneBudget::Full),
            seconds => seconds
                .parse::<f64>()
                .ok()
                .filter(|b| b.is_finite() && (0.0..=1e6).contains(b))
                .map(|b| match b {
                    0.0 => TuneBudget::None,
                    b => TuneBudget::Time(Duration::from_secs_f64(b)),
                })
                .ok_or_else(|| {
                    format!(
                        "'{s}' is not none, auto, full, or a number of seconds from 0 to 1000000"
                    )
                }),
        }
    }
}

impl fmt::Display for TuneBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TuneBudget::None => f.write_str("none"),
            TuneBudget::Auto => f.write_str("auto"),
            TuneBudget::Full => f.write_str("full"),
            TuneBudget::Time(d) => write!(f, "{} s", d.as_secs_f64()),
        }
    }
}

impl Serialize for TuneBudget {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How the tuner works.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// How long a call may time candidates for a class the cache does not hold as fully tuned;
    /// the best-ranked candidate not yet timed always is.
    pub budget: TuneBudget,
    /// The cache file, or `None` to neither read nor save choices.
    pub cache: Option<PathBuf>,
    /// Tune even when the cache holds a choice (and replace it).
    pub retune: bool,
    /// Called with one line when timing starts (not on a cache hit), so that a command line
    /// can say why the first run waits.
    pub on_tuning: Option<fn(&str)>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            budget: TuneBudget::None,
            cache: default_cache_file(),
            retune: false,
            on_tuning: None,
        }
    }
}

/// The cache file: `$TILEMM_CACHE_DIR/tuning.json`, else `tilemm/tuning.json` under the user's
/// cache directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux).
pub fn default_cache_file() -> Option<PathBuf> {
    Some(crate::runtime::cache::dir()?.join("tuning.json"))
}

/// Sizes a shape class is anchored at: each of M, K and N rounded to the nearest power of two
/// (in ratio), at most [`anchor_cap`]. Products of one class run fastest with the same kernel
/// closely enough, and its anchor is the proxy problem the candidates are timed on.
pub fn anchor(len: usize, cap: usize) -> usize {
    let below = 1usize << (usize::BITS - 1 - len.max(1).leading_zeros());
    let nearest = if (len as f64) >= below as f64 * std::f64::consts::SQRT_2 {
        below.saturating_mul(2)
    } else {
        below
    };
    nearest.min(cap)
}

/// The largest anchor on a device: larger products tune on this size, so that timing every
/// candidate and the proxy's reference stay within seconds (less on CPU adapters, which run
/// kernels slowly).
pub fn anchor_cap(kind: DeviceKind) -> usize {
    match kind {
        DeviceKind::Cpu => 1024,
        _ => 2048,
    }
}

/// What a choice is kept under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TuneKey {
    /// Backend, device, driver.
    pub device: String,
    /// Precision (input → accumulator → output).
    pub precision: String,
    /// Layouts of A, B and C (row, col or strided).
    pub layouts: [&'static str; 3],
    /// The vector widths A and B are read in (4, 2 or 1, from their strides and extents): rungs
    /// that read vectors compile, and run, one kernel per pair.
    pub lines: [u32; 2],
    /// The shape class's anchored M, K and N.
    pub anchors: [usize; 3],
    /// Whether bf16 is packed two to a word on this device.
    #[serde(skip)]
    packed: bool,
}

/// The vector widths `problem` (as given) is read in, on its canonical form.
fn lines_of(problem: &Problem, packed: bool) -> [u32; 2] {
    let args = crate::kernels::common::args::Args::new(&problem.canonical().0);
    args.lines(packed)
}

impl TuneKey {
    /// The key of `problem` on `gpu`.
    pub fn new(gpu: &GpuSession, problem: &Problem) -> Self {
        let info = gpu.info();
        let cap = anchor_cap(info.kind);
        let packed = problem.precision.input == crate::problem::DType::BF16 && !info.types.bf16;
        TuneKey {
            device: format!("{} {} ({})", gpu.backend(), info.name, info.driver),
            precision: problem.precision.to_string(),
            layouts: [problem.a, problem.b, problem.c].map(|v| short_layout(v.layout())),
            lines: lines_of(problem, packed),
            anchors: [problem.m, problem.k, problem.n].map(|len| anchor(len, cap)),
            packed,
        }
    }

    /// The key as the cache file writes it.
    pub fn text(&self) -> String {
        let [m, k, n] = self.anchors;
        let [a, b, c] = self.layouts;
        let [la, lb] = self.lines;
        format!(
            "{} | {} | A {a}, B {b}, C {c} | vectors {la}, {lb} | {m}×{k}×{n}",
            self.device, self.precision
        )
    }

    /// The problem candidates are timed on: the class's anchor sizes (less up to 3 each, so
    /// that its vector widths are the key's) in its layouts and precision, one matrix, C = A·B.
    fn proxy(&self, problem: &Problem) -> Result<Problem> {
        let like = |view: &MatrixDesc, rows, cols| {
            if view.layout() == Layout::ColMajor {
                MatrixDesc::col_major(rows, cols)
            } else {
                MatrixDesc::row_major(rows, cols)
            }
        };
        let make = |[m, k, n]: [usize; 3]| {
            Problem::general(
                (m, k, n, 1),
                like(&problem.a, m, k),
                like(&problem.b, k, n),
                like(&problem.c, m, n),
                (1.0, 0.0),
                problem.precision,
            )
        };
        let [m, k, n] = self.anchors;
        let less = |len: usize, by: usize| len.saturating_sub(by).max(1);
        for dm in 0..4 {
            for dk in 0..4 {
                for dn in 0..4 {
                    let proxy = make([less(m, dm), less(k, dk), less(n, dn)])?;
                    if lines_of(&proxy, self.packed) == self.lines {
                        return Ok(proxy);
                    }
                }
            }
        }
        // Widths the anchor sizes cannot give (a strided view's): the anchor as it is.
        make(self.anchors)
    }
}

fn short_layout(layout: Layout) -> &'static str {
    match layout {
        Layout::RowMajor => "row",
        Layout::ColMajor => "col",
        Layout::Strided => "strided",
    }
}

/// Where the choice came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheUse {
    /// The cache held a choice for the key, fully tuned (or the budget was 0).
    Hit,
    /// It held a choice made on a partial budget: more candidates were timed against it.
    Continued,
    /// It held none (or could not be read): the candidates were timed.
    Miss,
    /// `retune`: the candidates were timed whatever the cache held.
    Retuned,
    /// No cache file (none configured, or no cache directory): the candidates were timed.
    Off,
}

fn ms<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// One candidate's timing on the proxy.
#[derive(Clone, Debug, Serialize)]
pub struct Timed {
    /// What ran.
    pub plan: Plan,
    /// Median of its timed runs, per launch, in milliseconds (one run when it was clearly
    /// slower than the best so far).
    pub median_ms: f64,
    /// The fastest of its runs, per launch, in milliseconds: what candidates are ranked by,
    /// since noise on a shared machine only ever adds time.
    pub min_ms: f64,
    /// Its runs.
    pub runs: usize,
    /// Launches per run, back to back within one timing ([`launches_per_run`]).
    pub launches: usize,
}

/// How long one timed run of a candidate spans at least, in milliseconds, where
/// [`MAX_LAUNCHES`] allows: a product shorter than this is launched again back to back within
/// the run, and the run's time divided among the launches. The host's wait for the device is
/// a fixed cost of each timing (tens of µs on CUDA, where an H100 multiplies 1024³ in 16 µs:
/// BENCHMARKS.md, 2026-11-28), which would otherwise rank small classes by noise.
pub const RUN_SPAN_MS: f64 = 1.0;

/// Launches per timed run at most.
pub const MAX_LAUNCHES: usize = 32;

/// Launches per timed run of a candidate whose one launch, timed alone, took `single_ms`
/// (the wait included): enough to span [`RUN_SPAN_MS`], from 1 to [`MAX_LAUNCHES`].
pub fn launches_per_run(single_ms: f64) -> usize {
    if single_ms.is_nan() || single_ms <= 0.0 {
        return 1;
    }
    // (A float to usize cast saturates; the clamp bounds it.)
    ((RUN_SPAN_MS / single_ms).ceil() as usize).clamp(1, MAX_LAUNCHES)
}

/// What the tuner did, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    /// The key, as the cache file writes it.
    pub key: String,
    /// Hit, miss, retuned or off.
    pub cache: CacheUse,
    /// The cache file.
    #[serde(serialize_with = "crate::io::inputs::lossy_optional_path")]
    pub cache_file: Option<PathBuf>,
    /// The choice.
    pub chosen: Plan,
    /// The proxy problem's M, K and N.
    pub proxy: [usize; 3],
    /// Candidates valid for the problem on this device.
    pub candidates: usize,
    /// Those the model pruned before timing (configurations that spill on GPUs, or waste most
    /// of their tile on the proxy).
    pub pruned: usize,
    /// Those timed in this call, fastest first (empty on a hit).
    pub timed: Vec<Timed>,
    /// Those timed for the class so far, this call's included.
    pub tried: usize,
    /// Those the model kept: the class is fully tuned when all of them have been timed.
    pub kept: usize,
    /// The choice's proxy time when it was tuned (also on a hit, from the cache).
    pub median_ms: f64,
    /// Whether the choice was verified on the proxy against the reference (on a hit: when it
    /// was tuned; the run verifies its own result in any case).
    pub verified: bool,
    /// The budget this call had.
    pub budget: TuneBudget,
    /// Time spent here: reading the cache, or timing, verifying and saving.
    #[serde(rename = "time_ms", serialize_with = "ms")]
    pub time: Duration,
    /// Whether the choice was written to the cache file.
    pub saved: bool,
    /// Things the user should know (an unreadable cache, a candidate that failed).
    pub notes: Vec<String>,
}

impl fmt::Display for TuneReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [m, k, n] = self.proxy;
        let file = self
            .cache_file
            .as_ref()
            .map_or_else(|| "no cache file".into(), |p| p.display().to_string());
        let state = if self.complete() {
            "fully tuned".to_string()
        } else if !self.budget.searches() {
            format!(
                "first-call choice: {} of the {} candidates the model keeps timed, no search \
                 (`tilemm tune` searches)",
                self.tried, self.kept
            )
        } else {
            format!(
                "partly tuned: {} of the {} candidates the model keeps timed, later calls go on",
                self.tried, self.kept
            )
        };
        match self.cache {
            CacheUse::Hit => write!(
                f,
                "auto → {}: tuning cache hit ({file}), read in {:.1} ms, {state}",
                self.chosen,
                self.time.as_secs_f64() * 1e3
            ),
            _ => {
                let why = match self.cache {
                    CacheUse::Retuned => "retuned",
                    CacheUse::Off => "no cache",
                    CacheUse::Continued => "tuning continued from the cache",
                    _ => "tuning cache miss",
                };
                write!(
                    f,
                    "auto → {}: {why}; timed {} of {} candidates ({} pruned by the model) on \
                     {m}×{k}×{n} in {:.2} s (budget {}), winner {:.3} ms {}, {state}{}",
                    self.chosen,
                    self.timed.len(),
                    self.candidates,
                    self.pruned,
                    self.time.as_secs_f64(),
                    self.budget,
                    self.median_ms,
                    if self.verified {
                        "and verified"
                    } else {
                        "(not verified)"
                    },
                    if self.saved {
                        format!("; saved to {file}")
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

impl TuneReport {
    /// Whether every candidate the model keeps for the class has been timed.
    pub fn complete(&self) -> bool {
        self.tried >= self.kept
    }
}

/// A cached choice.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    /// The configuration, as `Config`'s `Display` writes it.
    config: String,
    /// Its proxy time: median and fastest run.
    median_ms: f64,
    min_ms: f64,
    /// The candidates timed for the class so far, as `Config`'s `Display` writes them.
    tried: Vec<String>,
    /// Whether they are all the candidates the model kept.
    complete: bool,
    /// Whether it was verified.
    verified: bool,
}

/// The tuning cache at `path`: format 3 (times per launch in runs of back-to-back launches;
/// format 2's were one launch with the host's wait); entries hold for the tilemm version that
/// wrote them (whose kernels may differ); thousands of choices take a few hundred KiB, so a
/// file over 16 MiB is not read; a saver waits up to 10 s for another (each holds the lock for
/// milliseconds).
fn cache_store(path: &Path) -> crate::io::store::Store {
    crate::io::store::Store {
        what: "tuning cache",
        path: path.to_path_buf(),
        format: 3,
        per_version: true,
        max_bytes: 16 << 20,
        lock_wait: Duration::from_secs(10),
    }
}

/// Every configuration of every rung that can run `problem` (and its proxy) on `gpu`.
fn candidates(gpu: &GpuSession, problem: &Problem, proxy: &Problem) -> Vec<Plan> {
    Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .map(Plan::new)
        .filter(|plan| gpu.schedule(problem, plan).is_ok() && gpu.schedule(proxy, plan).is_ok())
        .collect()
}

/// The model's score of `plan` on `proxy` (higher is better; 0: pruned), a crude roofline
/// proxy: FMAs per element loaded, at the unit's registers (a TM×TN tile loads TM + TN per
/// step of K for TM·TN FMAs) and at the cube's shared tile (BM·BN/(BM+BN), where the rung
/// stages tiles in shared memory), times the share of the launched tile that is inside C.
///
/// On CPU adapters (lavapipe, SwiftShader) shared memory is ordinary memory behind a barrier
/// that costs more than it saves, and a spill is a cheap stack access, so only the register
/// tile counts there; on GPUs a configuration that spills is pruned, and, where the device
/// says how many `multiprocessors` it has, a launch of fewer cubes scores by the share it keeps
/// busy, to the power [`IDLE_EXPONENT`] (1024³ in blocks of 128×128 is 64 cubes for an H100's
/// 132 SMs, and 128 blocks of 64×128 are faster there; split-K fills them, but its slices'
/// partials cost memory traffic in proportion to the slices over K, which the score weighs
/// too).
pub fn model_score(
    plan: &Plan,
    proxy: &Problem,
    kind: DeviceKind,
    multiprocessors: Option<u32>,
    copy_async: bool,
) -> f64 {
    let cpu_like = kind == DeviceKind::Cpu;
    if plan.config.may_spill(proxy.precision, Compiler::Nvidia) && !cpu_like {
        return 0.0;
    }
    // The tile one cube computes, read off a launch over a large power-of-two product.
    let large = Problem::new(1 << 16, 1, 1 << 16).expect("valid");
    let shape = plan.config.shape(&large);
    let bn = (1usize << 16) / shape.grid[0].max(1) as usize;
    let bm = (1usize << 16) / shape.grid[1].max(1) as usize;
    let units = shape.block.iter().product::<u32>().max(1) as f64;
    // The unit tile, taken as square: TM·TN outputs load about 2·√(TM·TN) per step of K.
    // (Units in groups along K each hold the whole block's outputs between them.)
    let outputs = (bm * bn) as f64 * f64::from(plan.config.k_groups()) / units;
    let register = outputs / (2.0 * outputs.sqrt());
    let shared = if shape.shared_bytes > 0 && !cpu_like {
        (bm * bn) as f64 / (bm + bn) as f64
    } else {
        register
    };
    let (canonical, _) = proxy.canonical();
    let covered = |len: usize, tile: usize| (len.div_ceil(tile) * tile) as f64;
    let useful =
        (canonical.m * canonical.n) as f64 / (covered(canonical.m, bm) * covered(canonical.n, bn));
    // A launch that computes mostly padding is not worth a timing.
    if useful < 0.25 {
        return 0.0;
    }
    // The model counts loads per product, but a matrix instruction does many products at
    // once: on GPUs the matrix-unit rungs (which run only where the units exist) go first.
    let units = if plan.kernel().matrix_units() && !cpu_like {
        MATRIX_UNIT_GAIN
    } else {
        1.0
    };
    // Tiles copied asynchronously while the warps compute hide the loads' latency that the
    // model's loads per FMA leave out.
    let overlap = if copy_async && plan.kernel().copies_async() && !cpu_like {
        ASYNC_COPY_GAIN
    } else {
        1.0
    };
    let busy = match multiprocessors {
        Some(sms) if sms > 0 && !cpu_like => {
            // The blocks' share of the SMs to IDLE_EXPONENT, times what split-K's slices, side
            // by side, add to it in proportion, as before (at the partials' cost: measured,
            // they cost more than the model says): filled^E · sliced/filled.
            let grid = plan.config.shape(proxy).grid;
            let blocks = grid.iter().map(|&g| u64::from(g)).product::<u64>() as f64;
            let filled = (blocks / f64::from(sms)).min(1.0);
            let sliced = (blocks * f64::from(plan.config.k_splits()) / f64::from(sms)).min(1.0);
            filled.powf(IDLE_EXPONENT - 1.0) * sliced
        }
        _ => 1.0,
    };
    useful * register * shared * units * overlap * busy * partials_share(plan, &canonical)
}

/// How a launch that leaves SMs idle scores: by the share it keeps busy to this power, not in
/// proportion. Its cubes run one to an SM, few warps each, latency-bound (Nsight Compute on an
/// H200: 2 warps per scheduler, 0.4 of them eligible in a cycle), so a larger block's reuse buys
/// less than the model's reuse says, and an idle SM costs more than its share. Fitted to an H200
/// at 1024³ in f16 (BENCHMARKS.md, 2026-11-28): 128 blocks of 64×128 took 0.0121 ms, 64 of
/// 128×128 0.0153–0.0158 and 32 of 128×256 0.0245; in proportion the model ranked 128×128 first
/// (its reuse 2.1× for half the SMs), to the 1.5th power 64×128 first by 1.34× (measured 1.29×)
/// and 128×256 last. Launches that fill the SMs score as before.
pub const IDLE_EXPONENT: f64 = 1.5;

/// The share of a split-K launch's time left to its products once its partials have moved: the
/// slices write `splits` M×N matrices of f32 that a second kernel reads back, 8·splits·M·N
/// bytes against 2·M·N·K flops, which at [`FLOPS_PER_BYTE`] take 4·splits·rate/K of the
/// products' time. 1 for a launch that does not split K. (On an H100 at 1024³ in f16, 2 and 4
/// slices took 0.084 and 0.088 ms on the device clock where one took 0.016: BENCHMARKS.md,
/// 2026-11-28.)
fn partials_share(plan: &Plan, canonical: &Problem) -> f64 {
    let splits = plan.config.k_splits();
    if splits <= 1 {
        return 1.0;
    }
    let rate = if plan.kernel().matrix_units() {
        FLOPS_PER_BYTE.0
    } else {
        FLOPS_PER_BYTE.1
    };
    1.0 / (1.0 + 4.0 * f64::from(splits) * rate / canonical.k().max(1) as f64)
}

/// Flops per byte of memory traffic at a GPU's peak, for its matrix units and its FMA units: an
/// H100 multiplies 989 TFLOPS of f16 on its tensor cores and 67 of f32 on its FMA units, and
/// moves 3.35 TB/s.
pub const FLOPS_PER_BYTE: (f64, f64) = (300.0, 20.0);

/// How much more a GPU's matrix units multiply than its FMA units, as the model ranks them:
/// 16-bit inputs run 2× (RDNA 3's WMMA) to 15× (H100: 989 against 67 TFLOPS) the f32 FMA
/// rate. 4 ranks the matrix-unit rungs first without pushing the SIMT rungs out of
/// [`MODEL_SPAN`], so both are timed.
pub const MATRIX_UNIT_GAIN: f64 = 4.0;

/// How much more the rungs that copy their next tiles asynchronously deliver, as the model
/// ranks them where the device has the copies: on an H100 the pipelined rung took 0.103 ms at
/// 1024³ in f32 where the warp-tiled one (whose register tile the model scores 1.4× higher) took
/// 0.265, and 3.19 against 3.76 ms at 4096³ (BENCHMARKS.md, 2026-11-28).
pub const ASYNC_COPY_GAIN: f64 = 2.0;

/// Candidates scoring below the best score over this are not timed: an order of magnitude
/// less reuse (the naive and tiled rungs against register-blocked ones) is not made up for by
/// anything the model leaves out, and their runs are the slowest to time.
pub const MODEL_SPAN: f64 = 16.0;

/// The candidates the model keeps for `proxy` on a device of `kind`, best-ranked first, and
/// how many it pruned; never none when there are candidates.
fn ranked(all: &[Plan], proxy: &Problem, device: &DeviceInfo) -> (Vec<Plan>, usize) {
    let (kind, sms) = (device.kind, device.limits.multiprocessors);
    let mut scored: Vec<(f64, Plan)> = all
        .iter()
        .map(|plan| {
            (
                model_score(plan, proxy, kind, sms, device.copy_async),
                *plan,
            )
        })
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0));
    let floor = scored.first().map_or(0.0, |s| s.0 / MODEL_SPAN);
    let kept = scored
        .iter()
        .filter(|(s, _)| *s > 0.0 && *s >= floor)
        .count()
        .max(1)
        .min(scored.len());
    let pruned = scored.len() - kept;
    (
        scored.into_iter().take(kept).map(|(_, p)| p).collect(),
        pruned,
    )
}

/// Puts the candidates quick to compile first, each group in the model's order: a first call
/// compiles one kernel, a quick one where the model keeps one.
fn first_call_order(ranked: &mut [Plan], quick: impl Fn(&Plan) -> bool) {
    ranked.sort_by_key(|p| !quick(p));
}

/// Runs the tuner for `problem` on `gpu`.
///
/// A class the cache holds as fully tuned is a hit. Otherwise the best-ranked candidates not
/// yet timed for the class are timed within the budget (the first always), the fastest that
/// meets the bound on the proxy wins (or the cached choice, when it stays faster), and the
/// choice is saved with what was timed, so that the next call goes on where this one stopped
/// until every candidate the model keeps has been timed. A cache that cannot be read or
/// written costs a note, never the run.
pub fn choose(gpu: &GpuSession, problem: &Problem, options: &TuneOptions) -> Result<TuneReport> {
    let start = Instant::now();
    let key = TuneKey::new(gpu, problem);
    let text = key.text();
    let proxy = key.proxy(problem)?;
    let mut notes = Vec::new();
    let cached = match (&options.cache, options.retune) {
        (Some(path), false) => cache_store(path).load::<Entry>(&mut notes).remove(&text),
        _ => None,
    };
    let all = candidates(gpu, problem, &proxy);
    if all.is_empty() {
        return Err(Error::NoKernel(format!(
            "no kernel of the ladder can run {}×{}×{} on {}",
            problem.m,
            problem.k,
            problem.n,
            gpu.info().name
        )));
    }
    let (ranked, pruned) = ranked(&all, &proxy, gpu.info());
    // How many of the kept candidates a list of configurations names.
    let timed_of = |tried: &[String]| {
        ranked
            .iter()
            .filter(|p| tried.contains(&p.config.to_string()))
            .count()
    };
    let report = |cache, chosen, timed, median_ms, tried: usize, saved, notes| TuneReport {
        key: text.clone(),
        cache,
        cache_file: options.cache.clone(),
        chosen,
        proxy: [proxy.m, proxy.k, proxy.n],
        candidates: all.len(),
        pruned,
        timed,
        tried,
        kept: ranked.len(),
        median_ms,
        verified: true,
        budget: options.budget,
        time: start.elapsed(),
        saved,
        notes,
    };

    // The cached choice, if it can still run here: final when the class is fully tuned, else
    // where the search goes on from.
    let mut previous: Option<(Timed, Vec<String>)> = None;
    if let Some(entry) = cached {
        match entry.config.parse::<Config>().map(Plan::new) {
            // Only a choice the tuner verified is used: an entry that says otherwise (edited,
            // or damaged) is tuned again.
            Ok(_) if !entry.verified => notes.push(format!(
                "the cached choice {} was not verified; tuning again",
                entry.config
            )),
            Ok(plan) if all.contains(&plan) => {
                // An entry saved as fully tuned is final.
                let tried = if entry.complete {
                    ranked.len()
                } else {
                    timed_of(&entry.tried)
                };
                if tried == ranked.len() || !options.budget.searches() {
                    return Ok(report(
                        CacheUse::Hit,
                        plan,
                        Vec::new(),
                        entry.median_ms,
                        tried,
                        false,
                        notes,
                    ));
                }
                let timed = Timed {
                    plan,
                    median_ms: entry.median_ms,
                    min_ms: entry.min_ms,
                    runs: 0,
                    launches: 0,
                };
                previous = Some((timed, entry.tried));
            }
            Ok(plan) => notes.push(format!(
                "the cached choice {plan} cannot run this problem here; tuning again"
            )),
            Err(e) => notes.push(format!(
                "the cached choice '{}' is not a kernel of this tilemm ({e}); tuning again",
                entry.config
            )),
        }
    }
    let cache_use = match (&options.cache, options.retune, &previous) {
        (None, _, _) => CacheUse::Off,
        (Some(_), true, _) => CacheUse::Retuned,
        (Some(_), false, Some(_)) => CacheUse::Continued,
        (Some(_), false, None) => CacheUse::Miss,
    };
    let mut tried: Vec<String> = previous.as_ref().map_or_else(Vec::new, |p| p.1.clone());
    let mut untimed: Vec<Plan> = ranked
        .iter()
        .filter(|p| !tried.contains(&p.config.to_string()))
        .copied()
        .collect();
    if !options.budget.searches() {
        first_call_order(&mut untimed, |p| {
            p.config.quick_to_compile(problem.precision)
        });
    }

    if let Some(say) = options.on_tuning {
        let effort = match options.budget {
            TuneBudget::None => "the best-ranked one".to_string(),
            TuneBudget::Full => "all of them".to_string(),
            TuneBudget::Time(d) => format!("for about {:.1} s", d.as_secs_f64()),
            TuneBudget::Auto => "for about 1 s, or 20× the product's time".to_string(),
        };
        say(&format!(
            "tuning auto: timing up to {} candidates on {}×{}×{} {effort}; what is learned is \
             kept for later runs",
            untimed.len(),
            proxy.m,
            proxy.k,
            proxy.n,
        ));
    }
    let operands = inputs::random_operands(&proxy, 0x7475_6e65)?;
    let a = gpu.upload(&operands.a)?;
    let b = gpu.upload(&operands.b)?;
    let c = gpu.output(&proxy, None)?;
    let mut timed: Vec<Timed> = Vec::new();
    let skip = |notes: &mut Vec<String>, plan: &Plan, e: Error| {
        notes.push(format!(
            "candidate {plan} skipped: {}",
            crate::one_line(&e.to_string())
        ));
    };
    // The product's own time, estimated from the fastest proxy time by the ratio of work.
    let scale = problem.flops() / proxy.flops();
    for plan in &untimed {
        let best = timed
            .iter()
            .chain(previous.as_ref().map(|p| &p.0))
            .map(|t| t.min_ms)
            .fold(f64::INFINITY, f64::min);
        // The first candidate not yet timed always is.
        if !timed.is_empty() && start.elapsed() >= options.budget.per_call(best * scale) {
            break;
        }
        tried.push(plan.config.to_string());
        // Scheduled and checked once. The first launch compiles; a tiny one, so that a slow
        // kernel costs its compile only once.
        let schedule = gpu.schedule(&proxy, plan);
        let runs = schedule.and_then(|schedule| {
            gpu.compile_scheduled(&schedule)?;
            let launch = || gpu.enqueue_scheduled(&schedule, &a, &b, &c).map(|_| ());
            // One launch alone sizes the runs; where it spans a run already, it is the first.
            let single = gpu.time_ms(launch)?;
            let launches = launches_per_run(single);
            let time = || -> Result<f64> {
                let all = gpu.time_ms(|| (0..launches).try_for_each(|_| launch()))?;
                Ok(all / launches as f64)
            };
            let mut runs = if launches == 1 {
                Samples(vec![single])
            } else {
                Samples::take(1, time)?
            };
            // One run is enough to drop a candidate twice as slow as the best.
            if runs.min() < 2.0 * best {
                runs.extend(4, time)?;
            }
            Ok((runs, launches))
        });
        match runs {
            Ok((runs, launches)) => timed.push(Timed {
                plan: *plan,
                median_ms: runs.median(),
                min_ms: runs.min(),
                runs: runs.0.len(),
                launches,
            }),
            Err(e) => skip(&mut notes, plan, e),
        }
    }
    timed.sort_by(|x, y| x.min_ms.total_cmp(&y.min_ms));

    // The fastest whose result meets the bound, each computed into a C of NaN, so that an
    // entry a kernel leaves unwritten fails the check instead of showing an earlier result.
    // Random inputs: a winner that computes in a lower precision than asked fails. The cached
    // choice was verified when it was chosen, and stays while nothing verified beats it.
    // The reference (an f64 product on the CPU) and the C of NaN are made only when a
    // candidate needs them.
    let mut checking = None;
    let mut winner = None;
    for t in &timed {
        if let Some((cached, _)) = &previous {
            if cached.min_ms <= t.min_ms {
                break;
            }
        }
        let check = (|| -> Result<bool> {
            let (reference, nan) = match &mut checking {
                Some(made) => made,
                None => checking.insert((
                    Reference::new(&proxy, &operands.a, &operands.b, None)?.random_inputs(),
                    HostData::from_f64(
                        proxy.precision.output,
                        std::iter::repeat_n(f64::NAN, proxy.c_len()),
                    ),
                )),
            };
            let c = gpu.output(&proxy, Some(nan))?;
            let launches = gpu.enqueue(&proxy, &t.plan, &a, &b, &c)?;
            let result = gpu.download(&c)?;
            Ok(reference
                .check_passes(&result, launches.k_slabs as usize)?
                .pass)
        })();
        match check {
            Ok(true) => {
                winner = Some(t.clone());
                break;
            }
            Ok(false) => notes.push(format!(
                "candidate {} failed verification on the proxy; not chosen",
                t.plan
            )),
            Err(e) => skip(&mut notes, &t.plan, e),
        }
    }
    let Some(winner) = winner.or_else(|| previous.map(|p| p.0)) else {
        return Err(Error::NoKernel(format!(
            "no timed kernel computed {}×{}×{} correctly on {}: {}",
            proxy.m,
            proxy.k,
            proxy.n,
            gpu.info().name,
            notes.join("; ")
        )));
    };

    let complete = timed_of(&tried) == ranked.len();
    let mut saved = false;
    if let Some(path) = &options.cache {
        let entry = Entry {
            config: winner.plan.config.to_string(),
            median_ms: winner.median_ms,
            min_ms: winner.min_ms,
            tried: tried.clone(),
            complete,
            verified: true,
        };
        match cache_store(path).update(|entries| {
            entries.insert(text.clone(), entry);
        }) {
            Ok(_) => saved = true,
            Err(e) => notes.push(format!("tuning cache not saved to {}: {e}", path.display())),
        }
    }
    let tried = timed_of(&tried);
    Ok(report(
        cache_use,
        winner.plan,
        timed,
        winner.median_ms,
        tried,
        saved,
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_the_nearest_power_of_two_in_ratio_up_to_the_cap() {
        let a = |len| anchor(len, 2048);
        assert_eq!([a(1), a(2), a(3), a(5), a(6)], [1, 2, 4, 4, 8]);
        // 1024·√2 ≈ 1448: the boundary between the 1024 and 2048 classes.
        assert_eq!(
            [a(1000), a(1024), a(1448), a(1449)],
            [1024, 1024, 1024, 2048]
        );
        assert_eq!([a(2048), a(5000), a(usize::MAX)], [2048, 2048, 2048]);
        assert_eq!(anchor(100_000, anchor_cap(DeviceKind::Cpu)), 1024);
    }

    #[test]
    fn the_auto_budget_is_a_second_or_twenty_times_the_product() {
        let auto = TuneBudget::Auto;
        assert_eq!(auto.per_call(10.0), Duration::from_secs(1));
        assert_eq!(auto.per_call(f64::INFINITY), Duration::from_secs(1));
        assert_eq!(auto.per_call(200.0), Duration::from_secs(4));
        assert_eq!(
            TuneBudget::Time(Duration::ZERO).per_call(200.0),
            Duration::ZERO
        );
        assert_eq!(TuneBudget::Full.per_call(1.0), Duration::MAX);
        assert_eq!("none".parse(), Ok(TuneBudget::None));
        assert_eq!("0".parse(), Ok(TuneBudget::None));
        assert!(!TuneBudget::None.searches() && !TuneBudget::Time(Duration::ZERO).searches());
        assert!(
            TuneBudget::Auto.searches() && TuneBudget::Time(Duration::from_millis(1)).searches()
        );
        assert_eq!("auto".parse(), Ok(TuneBudget::Auto));
        assert_eq!("full".parse(), Ok(TuneBudget::Full));
        assert_eq!(
            " 2.5".parse(),
            Ok(TuneBudget::Time(Duration::from_millis(2500)))
        );
        for bad in ["-1", "nan", "1e7", "soon"] {
            let err = bad.parse::<TuneBudget>().unwrap_err();
            assert!(err.contains("none, auto, full, or a number"), "{err}");
        }
        assert_eq!(
            TuneBudget::Time(Duration::from_millis(1)).to_string(),
            "0.001 s"
        );
    }

    #[test]
    fn a_first_call_compiles_a_quick_kernel_where_the_model_keeps_one() {
        let plan = |kernel: Kernel| Plan::new(kernel.default_config());
        let slow = plan(Kernel::Pipelined);
        let quick = |p: &Plan| *p != slow;
        let mut ranked = vec![slow, plan(Kernel::Warptile), plan(Kernel::Tiled)];
        first_call_order(&mut ranked, quick);
        assert_eq!(
            ranked,
            [plan(Kernel::Warptile), plan(Kernel::Tiled), slow],
            "the model's order among the quick ones, the slow one last"
        );
        let mut alone = vec![slow];
        first_call_order(&mut alone, quick);
        assert_eq!(
            alone,
            [slow],
            "a slow kernel is still a candidate when it is the only one"
        );
    }

    #[test]
    fn short_products_are_timed_in_runs_of_back_to_back_launches() {
        // 1024³ on an H100 with the host's wait: about 0.05 ms alone, 20 launches a run.
        assert_eq!(launches_per_run(0.05), 20);
        assert_eq!(launches_per_run(0.3), 4);
        // A run's worth alone (lavapipe's products): as before, one launch a run.
        assert_eq!(launches_per_run(RUN_SPAN_MS), 1);
        assert_eq!(launches_per_run(40.0), 1);
        // At most MAX_LAUNCHES; and a time that is no time is one launch.
        assert_eq!(launches_per_run(1e-6), MAX_LAUNCHES);
        for nothing in [0.0, -1.0, f64::NAN] {
            assert_eq!(launches_per_run(nothing), 1);
        }
        assert_eq!(launches_per_run(f64::INFINITY), 1);
    }

    #[test]
    fn kernel_choice_reads_auto_or_a_configuration() {
        assert_eq!("auto".parse::<KernelChoice>(), Ok(KernelChoice::Auto));
        let tiled = "tiled:tpb=8".parse::<KernelChoice>().unwrap();
        assert_eq!(tiled.to_string(), "tiled:tpb=8");
        let err = "fast".parse::<KernelChoice>().unwrap_err();
        assert!(err.contains("naive") && err.ends_with("or auto"), "{err}");
    }

    #[test]
    fn the_model_ranks_reuse_prunes_padding_and_spills_on_gpus() {
        let p = Problem::new(1024, 1024, 1024).unwrap();
        let score = |text: &str, kind| {
            model_score(&Plan::new(text.parse().unwrap()), &p, kind, None, false)
        };
        let gpu = DeviceKind::DiscreteGpu;
        assert!(score("naive", gpu) < score("tiled", gpu));
        assert!(score("tiled", gpu) < score("blocktile1d", gpu));
        assert!(score("blocktile1d", gpu) < score("blocktile2d", gpu));
        // Register tiles of 16×8 spill on GPUs (compile check) and are pruned there, not on CPUs.
        let big = "register:tm=16:tn=8:side=8";
        assert_eq!(score(big, gpu), 0.0);
        assert!(score(big, DeviceKind::Cpu) > score("blocktile2d", DeviceKind::Cpu));
        // The vectorized 8×8 tile fits in f32 but may spill in f64: pruned on GPUs in f64 only.
        let vectorized = Plan::new("vectorized".parse().unwrap());
        assert!(model_score(&vectorized, &p, gpu, None, false) > 0.0);
        let f64 = crate::problem::Shape {
            precision: crate::problem::Precision::of(crate::problem::DType::F64),
            ..crate::problem::Shape::new(1024, 1024, 1024)
        }
        .problem()
        .unwrap();
        assert_eq!(model_score(&vectorized, &f64, gpu, None, false), 0.0);
        // A 128×128 tile over a 16×1024 product computes mostly padding.
        let thin = Problem::new(16, 1024, 1024).unwrap();
        let plan = Plan::new("blocktile2d:bm=128:bn=128:bk=8:tm=8:tn=8".parse().unwrap());
        assert_eq!(model_score(&plan, &thin, gpu, None, false), 0.0);
        // Matrix-unit rungs rank first on GPUs (f16 here), and the SIMT rungs stay timed.
        let f16 = crate::problem::Shape {
            precision: crate::problem::Precision::of(crate::problem::DType::F16),
            ..crate::problem::Shape::new(4096, 4096, 4096)
        }
        .problem()
        .unwrap();
        // (The mma rung runs only where the device has cp.async, so both rungs' gains count.)
        let on = |text: &str, kind| {
            model_score(&Plan::new(text.parse().unwrap()), &f16, kind, None, true)
        };
        for matrix in ["mma", "tensorcore"] {
            assert!(on(matrix, gpu) > on("warptile", gpu), "{matrix}");
            assert!(
                on(matrix, gpu) < MODEL_SPAN * on("warptile", gpu),
                "{matrix}"
            );
        }
    }

    #[test]
    fn the_model_weighs_idle_multiprocessors_against_split_k_partials() {
        let cube = |n| {
            crate::problem::Shape {
                precision: crate::problem::Precision::of(crate::problem::DType::BF16),
                ..crate::problem::Shape::new(n, n, n)
            }
            .problem()
            .unwrap()
        };
        let gpu = DeviceKind::DiscreteGpu;
        let mma = |split| format!("mma:bm=128:bn=128:bk=32:wm=2:wn=2:stages=3:split={split}");
        let wide = "mma:bm=128:bn=256:bk=32:wm=2:wn=4:stages=3:split=1";
        let score = |text: &str, n, sms| {
            model_score(&Plan::new(text.parse().unwrap()), &cube(n), gpu, sms, true)
        };
        // An H100's 132 SMs: at 1024³, 64 blocks of 128×128 (32 of 128×256) leave half of them
        // idle, and 2 slices of K would fill them, but their partials cost more than the idle
        // SMs (measured there: 0.016 ms whole, 0.084 in 2 slices, 0.088 in 4); 128×128 ranks
        // above 128×256, as measured (0.016 against 0.025 ms).
        let h100 = Some(132);
        for split in [2, 4] {
            assert!(score(&mma(1), 1024, h100) > score(&mma(split), 1024, h100));
        }
        assert!(score(&mma(1), 1024, h100) > score(wide, 1024, h100));
        // Sliced K: its 8 warps hold the same 32×64 warp tiles as the 4 of 64×128 alone, two
        // groups each holding the block's outputs, and launch the same 128 blocks: the same
        // score, not the half-size unit tile that 8 warps over 64×128 outputs would be.
        let few = "mma:bm=64:bn=128:bk=32:wm=2:wn=2:stages=3:split=1";
        let sliced = "mma:bm=64:bn=128:bk=64:wm=2:wn=2:stages=3:split=1:wk=2";
        assert_eq!(score(sliced, 1024, h100), score(few, 1024, h100));
        // And 64×128 first at 1024³, 128 blocks where 128×128 launches 64 (on an H200: 0.0121
        // ms against 0.0153–0.0158, sliced K 0.0113), but last of the three at 4096³, where all
        // fill the SMs (0.405 ms against 0.328–0.349 for 128×256 and 128×128).
        assert!(score(few, 1024, h100) > score(&mma(1), 1024, h100));
        assert!(score(wide, 4096, h100) > score(&mma(1), 4096, h100));
        assert!(score(&mma(1), 4096, h100) > score(few, 4096, h100));
        // A long K makes the partials cheap: 2 slices win from K of about 2400 at this size. (The
        // tuner scores and times on proxies of K up to 2048, where one slice ranks first.)
        let at = |split: u32, k| {
            let p = crate::problem::Shape {
                precision: crate::problem::Precision::of(crate::problem::DType::BF16),
                ..crate::problem::Shape::new(1024, k, 1024)
            }
            .problem()
            .unwrap();
            model_score(&Plan::new(mma(split).parse().unwrap()), &p, gpu, h100, true)
        };
        assert!(at(2, 1 << 15) > at(1, 1 << 15));
        let capped = anchor(1 << 15, anchor_cap(gpu));
        assert_eq!(capped, 2048);
        assert!(at(1, capped) > at(2, capped));
        // At 4096³ every candidate fills them: the model is as without the count.
        for text in [mma(1), mma(2), wide.to_string()] {
            assert_eq!(score(&text, 4096, h100), score(&text, 4096, None), "{text}");
        }
        // Without the count (wgpu), a split launch gains nothing for its partials.
        assert!(score(&mma(1), 1024, None) > score(&mma(2), 1024, None));
        let cpu = |sms| {
            model_score(
                &Plan::new(mma(1).parse().unwrap()),
                &cube(1024),
                DeviceKind::Cpu,
                sms,
                true,
            )
        };
        assert_eq!(cpu(h100), cpu(None));
    }

    #[test]
    fn the_model_ranks_asynchronous_copies_first_where_the_device_has_them() {
        let p = Problem::new(1024, 1024, 1024).unwrap();
        // The two configurations measured there.
        let pipelined = "pipelined:bm=128:bn=128:bk=32:wm=2:wn=4:stages=3";
        let warptile = "warptile:bm=128:bn=128:bk=16:wm=64:wn=64:wni=4:tm=8:tn=4:warp=32";
        let score = |text: &str, copy_async| {
            let plan = Plan::new(text.parse().unwrap());
            model_score(&plan, &p, DeviceKind::DiscreteGpu, Some(132), copy_async)
        };
        // On an H100: the pipelined rung 0.103 ms at 1024³ in f32, the warp-tiled one 0.265.
        assert!(score(pipelined, true) > score(warptile, true));
        // Without the copies (AMD, wgpu) it copies synchronously: the model as before, which
        // ranks the larger register tile first.
        assert!(score(pipelined, false) < score(warptile, false));
        assert_eq!(
            score(pipelined, true),
            ASYNC_COPY_GAIN * score(pipelined, false)
        );
        assert_eq!(score(warptile, true), score(warptile, false));
    }

    fn entry(config: &str) -> Entry {
        Entry {
            config: config.into(),
            median_ms: 1.0,
            min_ms: 1.0,
            tried: vec![config.into()],
            complete: false,
            verified: true,
        }
    }

    fn save(path: &Path, key: &str, entry: Entry) -> std::io::Result<()> {
        cache_store(path)
            .update(|entries| {
                entries.insert(key.into(), entry);
            })
            .map(|_| ())
    }

    #[test]
    fn the_cache_file_keeps_entries_of_other_processes_and_survives_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("tuning.json");
        let mut notes = Vec::new();
        assert!(cache_store(&path).load::<Entry>(&mut notes).is_empty());
        assert!(notes.is_empty(), "an absent file is no news: {notes:?}");
        save(&path, "one", entry("naive:tpb=16")).unwrap();
        save(&path, "two", entry("tiled:tpb=8")).unwrap();
        let file = cache_store(&path).load::<Entry>(&mut notes);
        assert_eq!(file.len(), 2);
        assert_eq!(file["two"].config, "tiled:tpb=8");
        assert!(notes.is_empty());

        std::fs::write(&path, "{\"format\": 1, \"tilemm\"").unwrap();
        assert!(cache_store(&path).load::<Entry>(&mut notes).is_empty());
        assert!(notes[0].contains("corrupt"), "{notes:?}");
        // Saving replaces the corrupt file.
        save(&path, "three", entry("naive:tpb=8")).unwrap();
        notes.clear();
        assert_eq!(cache_store(&path).load::<Entry>(&mut notes).len(), 1);
        assert!(notes.is_empty());

        let old = r#"{"format": 3, "tilemm": "0.0.1", "entries": {"x": {"config": "naive:tpb=8", "median_ms": 1.0, "min_ms": 1.0, "tried": [], "complete": true, "verified": true}}}"#;
        std::fs::write(&path, old).unwrap();
        assert!(cache_store(&path).load::<Entry>(&mut notes).is_empty());
        assert!(notes[0].contains("from tilemm 0.0.1"), "{notes:?}");

        // A directory where the file should be: unreadable, noted, not fatal.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(dir.path().join("sub").join("tuning.json.lock").is_file());
        notes.clear();
        assert!(cache_store(&path).load::<Entry>(&mut notes).is_empty());
        assert!(notes[0].contains("unreadable"), "{notes:?}");
        assert!(save(&path, "four", entry("naive:tpb=8")).is_err());

        // A FIFO where the file or its lock should be: noted at once, no hang, and replaced by
        // the next save.
        let mkfifo = |fifo: &Path| {
            let _ = std::fs::remove_file(fifo);
            crate::io::files::tests::mkfifo(fifo);
        };
        std::fs::remove_dir(&path).unwrap();
        mkfifo(&path);
        notes.clear();
        assert!(cache_store(&path).load::<Entry>(&mut notes).is_empty());
        assert!(notes[0].contains("FIFO"), "{notes:?}");
        save(&path, "five", entry("naive:tpb=8")).unwrap();
        assert_eq!(cache_store(&path).load::<Entry>(&mut notes).len(), 1);
        mkfifo(&dir.path().join("sub").join("tuning.json.lock"));
        save(&path, "six", entry("naive:tpb=8")).unwrap();
        assert_eq!(cache_store(&path).load::<Entry>(&mut notes).len(), 2);
    }
}
