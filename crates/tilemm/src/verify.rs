//! Checking a product against a CPU reference under a sound error bound that grows with K.
//!
//! For C = A·B computed in floating point with unit roundoff u, in any summation order,
//! |c − ab|ᵢⱼ ≤ γ_K·(|A|·|B|)ᵢⱼ with γ_K = K·u/(1 − K·u) (Higham, *Accuracy and Stability of
//! Numerical Algorithms*, §3.5), as long as nothing overflows, plus an absolute floor for
//! products and sums that underflow (or that a device flushes to zero). The bound is relative
//! to |A|·|B|, not to |C|, so it holds where signed data cancels and C is near zero, which is
//! where a bare rtol check fails or has to be loosened until it checks nothing.
//!
//! Where the bound is looser than the truth, tilemm asks for more:
//! - **Exact products.** When A and B hold integers and (|A|·|B|)ᵢⱼ ≤ 2²⁴, every product and
//!   every partial sum, in any order, is an integer that f32 represents exactly: the entry must
//!   equal the reference. A kernel that drops one term of 65536 fails here, where the γ_K bound
//!   (3.9e-3 relative at that K) would let it pass.
//! - **Range.** Entries whose |A|·|B| exceeds f32's range may overflow on the way; a failure
//!   there is reported as an overflow, with the reference's magnitude, not as imprecision.
//! - **Precision.** A kernel that silently computes in lower precision (tf32 inputs, bf16 or
//!   f16 accumulation) can stay inside the worst-case bound: for f32 random data in [-1, 1) the
//!   bound K²·2⁻²⁶ exceeds tf32's error √K·2⁻¹¹ from K ≈ 700 on. Where the inputs are tilemm's
//!   random data ([`Reference::random_inputs`]), each entry is therefore also held to what the
//!   promised precision gives such data, [`Reference::precision_limit`]: its rounding errors
//!   are mean-zero and independent of the data's signs, so their sum over any summation order
//!   has a standard deviation below u·ρ·Mᵢⱼ (ρ = rms/mean of |a·b|), and 10 of those is
//!   never reached by chance (the union bound over 10⁹ entries leaves 10⁻¹³). tf32 input
//!   rounding exceeds that limit for K up to millions, f16 or bf16 accumulation at any K: a
//!   lower precision than promised FAILS.
//!
//! The reference is independent of every path it checks: the products are recomputed in f64
//! (which is exact for each product of two f32 values) by blocks of A and B converted on the
//! fly, so it never holds f64 copies of whole operands. When several results are checked and
//! it fits in memory it is kept whole and reused by each check; otherwise each check recomputes
//! it block by block.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::host::format_bytes;
use crate::host::{self, Bytes};
use crate::problem::{MatrixDesc, Problem};
use crate::types::element::{Element, HostData};

/// The most memory a block of the reference works in.
const MAX_BLOCK_BYTES: u64 = 256 << 20;

/// The budget when the OS says nothing about memory.
const DEFAULT_BUDGET: u64 = 4 << 30;

/// Standard deviations of rounding error an entry of a random-input product may reach before
/// its precision is doubted: Gaussian tails put 10σ at 10⁻²³ per entry.
pub const PRECISION_SIGMAS: f64 = 10.0;

/// rms / mean of |a·b| for independent a, b uniform in [-1, 1): (1/3) / (1/4) = 4/3; 1.5 leaves
/// room for the rounding of the data to f16 or bf16.
pub const RANDOM_RMS_OVER_MEAN: f64 = 1.5;

/// What the verifier may assume of the inputs' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputValues {
    /// Nothing (files, structured data): only the worst-case bound and exactness apply.
    Any,
    /// tilemm's random data ([`crate::io::inputs::random_operands`]): independent, uniform in
    /// [-1, 1) (rounded to the input type), so zero-mean, and the precision limit applies.
    Random,
}

/// The rows, columns and depth (K) of one block of the reference computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Rows of A and C per block.
    pub rows: usize,
    /// Columns of B and C per block.
    pub cols: usize,
    /// Elements of K per block.
    pub depth: usize,
}

impl Block {
    /// f64 values and magnitudes of one block of A, one of B and one of C.
    fn bytes(&self) -> Bytes {
        let elems = Bytes::of(self.rows, self.depth)
            + Bytes::of(self.depth, self.cols)
            + Bytes::of(self.rows, self.cols);
        elems.times(16)
    }
}

/// How the reference is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "held")]
pub enum ReferenceMode {
    /// Computed once, whole (C and |A|·|B| in f64), and reused by every check.
    Whole,
    /// Too large to keep: each check recomputes it in blocks of this shape.
    Blocks(Block),
}

/// How a problem's reference will be computed, and the host memory that takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReferencePlan {
    /// Whole or in blocks.
    pub mode: ReferenceMode,
    /// The blocks it is computed in, either way.
    pub block: Block,
    /// Host memory it needs.
    pub bytes: u64,
}

impl ReferencePlan {
    /// The plan for `problem`, checking `checks` results, within `budget` bytes (`None`:
    /// unknown, assume 4 GiB): whole when several results are checked and it fits, else in
    /// blocks that fit (a single check reads the reference once: holding it whole would only
    /// cost memory, and the time to clear it); an error when not even one block fits.
    pub fn fit(problem: &Problem, checks: usize, budget: Option<u64>) -> Result<Self> {
        let budget = budget.unwrap_or(DEFAULT_BUDGET);
        let block = block_for(problem, budget.min(MAX_BLOCK_BYTES));
        let block_bytes = block.bytes();
        let whole = Bytes::of(problem.c_len(), 16) + block_bytes;
        if checks > 1 && whole.get().is_some_and(|b| b <= budget) {
            return Ok(ReferencePlan {
                mode: ReferenceMode::Whole,
                block,
                bytes: whole.get().unwrap_or(u64::MAX),
            });
        }
        match block_bytes.get().filter(|&b| b <= budget) {
            Some(bytes) => Ok(ReferencePlan {
                mode: ReferenceMode::Blocks(block),
                block,
                bytes,
            }),
            None => Err(Error::HostMemory {
                needed: format!(
                    "{} more, for the smallest block of the reference,",
                    format_bytes(block_bytes.get().unwrap_or(u64::MAX))
                ),
                available: Some(format!(
                    "{} besides the rest of the run",
                    format_bytes(budget)
                )),
            }),
        }
    }
}

/// The largest block (rows, columns, depth) whose f64 buffers take at most `bytes`.
fn block_for(problem: &Problem, bytes: u64) -> Block {
    let elems = (bytes / 16).max(3) as usize;
    let side = (((elems / 3) as f64).sqrt() as usize).max(1);
    // Square blocks, then what a short dimension leaves over goes to the others (a single
    // column of C may be very tall, a single row very wide): r·d + d·c + r·c ≤ elems.
    let depth = problem.k.min(side);
    let mut cols = problem.n.min(side);
    let grow = |fixed: usize, other: usize| elems.saturating_sub(fixed) / (other.max(1));
    let rows = problem
        .m
        .min(grow(depth * cols, depth + cols).max(side.min(problem.m)))
        .max(1);
    cols = problem
        .n
        .min(grow(rows * depth, rows + depth).max(cols))
        .max(1);
    Block { rows, cols, depth }
}

/// The reference product of one problem's operands, and the magnitudes that scale the bound.
pub struct Reference<'a> {
    problem: Problem,
    a: &'a HostData,
    b: &'a HostData,
    /// C's initial contents, when β ≠ 0.
    c0: Option<&'a HostData>,
    plan: ReferencePlan,
    /// Whether A, B (and C₀, α and β where they count) are integers.
    integer_data: bool,
    /// Extra absolute error a device may make by flushing subnormal inputs to zero: each term
    /// with a subnormal operand is then lost, and |a·b| < λ·max(|A|, |B|) for such a term.
    subnormal_slack: f64,
    /// α·A·B + β·C₀ and |α|·|A|·|B| + |β|·|C₀| in f64, batch after batch, row-major, when held
    /// whole.
    whole: Option<(Vec<f64>, Vec<f64>)>,
    /// What the inputs' values are known to be.
    values: InputValues,
}

/// How a result compared with the reference.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verification {
    /// How the f64 reference was held.
    pub reference: ReferenceMode,
    /// max |c − ref| over the entries within range.
    pub max_abs_err: f64,
    /// max |c − ref| / |ref| over those entries with ref ≠ 0 (large where signed data cancels).
    pub max_rel_err: f64,
    /// The bound's factor: |c − ref|ᵢⱼ ≤ factor·Mᵢⱼ + floor, M = |α|·(|A|·|B|) + |β|·|C₀|.
    pub bound_factor: f64,
    /// The bound's absolute floor (underflow, or subnormals flushed to zero).
    pub bound_floor: f64,
    /// False when K·u ≥ 1/2: the bound then says nothing, and only exact entries can pass.
    pub bound_meaningful: bool,
    /// Entries of C (all batches).
    pub entries: usize,
    /// Whether every element of A and B (and C₀, α, β when β ≠ 0) is an integer.
    pub integer_inputs: bool,
    /// Entries that had to equal the reference exactly (integer data, M within the exact
    /// integers of the accumulator and the output).
    pub exact_entries: usize,
    /// Entries that neither exactness nor a meaningful bound could check.
    pub unverifiable_entries: usize,
    /// Entries checked against the bound (not exact, finite, the bound meaningful).
    pub bound_entries: usize,
    /// max |c − ref|ᵢⱼ / boundᵢⱼ over the entries checked against the bound: at most 1 to pass.
    pub worst_err_over_bound: f64,
    /// max |c − ref|ᵢⱼ / (u·Mᵢⱼ) over the entries checked against the bound, u the unit
    /// roundoff of the accumulator (of the output, when that is coarser).
    pub err_in_ulps: Option<f64>,
    /// What the inputs' values were known to be: for [`InputValues::Random`] every entry
    /// checked against the bound was also held to the precision limit.
    pub input_values: InputValues,
    /// The precision limit's main term, in the units of `err_in_ulps`: what the promised
    /// precision's rounding stays below on random inputs (`None` without them).
    pub precision_limit_ulps: Option<f64>,
    /// max |c − ref|ᵢⱼ / limitᵢⱼ over the entries held to the precision limit: above 1, the
    /// result is less precise than promised.
    pub worst_err_over_precision_limit: f64,
    /// Entries within the bound whose error exceeds the precision limit (counted among the
    /// failures).
    pub precision_failures: usize,
    /// The largest |reference| (finite values).
    pub largest_reference: f64,
    /// The largest Mᵢⱼ (finite values).
    pub largest_magnitude: f64,
    /// Entries whose M exceeds the range of the accumulator or output (the error figures leave
    /// them out).
    pub beyond_range_entries: usize,
    /// Entries that NaN or infinite inputs reach: they must equal the reference's IEEE result
    /// (±inf, or NaN) exactly, and the error figures leave them out.
    pub nonfinite_entries: usize,
    /// Whether A or B holds subnormal numbers (the bound's floor then allows for a device that
    /// flushes them to zero).
    pub subnormal_inputs: bool,
    /// Entries whose exact value lies beyond the output type's range.
    pub overflow_entries: usize,
    /// Failed entries whose M exceeds the range (so sums may have overflowed).
    pub range_failures: usize,
    /// Entries that failed their check.
    pub failures: usize,
    /// The worst failed entry: row, column, value, reference (in batch entry
    /// `worst_failure_batch`).
    pub worst_failure: Option<(usize, usize, f64, f64)>,
    /// The batch entry of the worst failure.
    pub worst_failure_batch: usize,
    /// Whether C's buffer had the problem's length.
    pub right_length: bool,
    /// Whether every entry passed its check.
    pub pass: bool,
}

impl Verification {
    /// Whether every entry had to equal the reference exactly (the report then says "exact").
    pub fn all_exact(&self) -> bool {
        self.right_length && self.entries > 0 && self.exact_entries == self.entries
    }
}

/// What each entry is held to.
struct Rule {
    factor: f64,
    floor: f64,
    meaningful: bool,
    integer_inputs: bool,
    exact_limit: f64,
    range: f64,
    u: f64,
    /// The precision limit, for random inputs: |c − ref| ≤ on_m·M + on_ref·|ref| + floor.
    precision: Option<PrecisionLimit>,
}

/// The precision limit's terms: see [`Reference::precision_limit`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrecisionLimit {
    /// The factor on M = |α|·|A|·|B| + |β|·|C₀|.
    pub on_magnitude: f64,
    /// The factor on |ref|: roundings of C itself and the bias of truncated inputs.
    pub on_result: f64,
    /// The absolute floor (underflow), as the bound's.
    pub floor: f64,
}

impl<'a> Reference<'a> {
    /// The reference of `problem` for `a`, `b` and (when β ≠ 0) C's initial contents `c0`,
    /// held whole if this process has the memory (so that any number of checks reuse it), else
    /// recomputed in blocks by each check.
    pub fn new(
        problem: &Problem,
        a: &'a HostData,
        b: &'a HostData,
        c0: Option<&'a HostData>,
    ) -> Result<Self> {
        let budget = host::headroom().map(|h| h.bytes / 2);
        let plan = ReferencePlan::fit(problem, usize::MAX, budget)?;
        Self::with_plan(problem, a, b, c0, plan)
    }

    /// The reference, computed as `plan` says.
    pub fn with_plan(
        problem: &Problem,
        a: &'a HostData,
        b: &'a HostData,
        c0: Option<&'a HostData>,
        plan: ReferencePlan,
    ) -> Result<Self> {
        problem.check_operands(a.len(), b.len())?;
        let c0 = c0.filter(|_| problem.reads_c());
        if problem.reads_c() {
            let c0 = c0.ok_or_else(|| {
                Error::MissingOperand("β ≠ 0 reads C, but no initial C was given".into())
            })?;
            problem.check_output(c0.len())?;
        }
        let stats = |d: &HostData| crate::with_data!(d, v => Stats::of(v));
        let (sa, sb) = (stats(a), stats(b));
        let sc = c0.map(stats);
        // A device that flushes subnormal inputs loses each term they are in: at most the
        // input type's smallest normal times the other factor.
        let subnormal_slack = if sa.subnormal || sb.subnormal {
            problem.precision.input.smallest_normal() * problem.k as f64 * (sa.largest + sb.largest)
        } else {
            0.0
        };
        let integer = |x: f64| x.is_finite() && x.trunc() == x;
        let integer_data = sa.integer
            && sb.integer
            && integer(problem.alpha)
            && (!problem.reads_c() || (sc.is_some_and(|s| s.integer) && integer(problem.beta)));
        let mut reference = Reference {
            problem: *problem,
            a,
            b,
            c0,
            plan,
            integer_data,
            subnormal_slack,
            whole: None,
            values: InputValues::Any,
        };
        if plan.mode == ReferenceMode::Whole {
            let entries = problem.c_entries();
            let mut c = host::zeros(entries, "the f64 reference")?;
            let mut magnitude = host::zeros(entries, "the reference's magnitudes")?;
            let mut scratch = Scratch::new(&plan.block)?;
            let (m, n, block) = (problem.m, problem.n, plan.block);
            for batch in 0..problem.batch {
                for i0 in (0..m).step_by(block.rows) {
                    for j0 in (0..n).step_by(block.cols) {
                        let rows = i0..(i0 + block.rows).min(m);
                        let cols = j0..(j0 + block.cols).min(n);
                        let at = batch * m * n + i0 * n + j0;
                        reference.compute_block(
                            batch,
                            rows,
                            cols,
                            (&mut c[at..], &mut magnitude[at..]),
                            n,
                            &mut scratch,
                        );
                    }
                }
            }
            reference.whole = Some((c, magnitude));
        }
        Ok(reference)
    }

    /// How the reference is held.
    pub fn mode(&self) -> ReferenceMode {
        self.plan.mode
    }

    /// Declares A, B (and C₀) tilemm's random data ([`InputValues::Random`]), so that every
    /// check also holds each entry to the precision limit ([`Reference::precision_limit`]).
    /// Only for data from [`crate::io::inputs::random_operands`] (or the same distribution):
    /// structured data can reach the worst case legitimately.
    pub fn random_inputs(mut self) -> Self {
        self.values = InputValues::Random;
        self
    }

    /// The precision limit for a result whose K was summed in `passes` launches, on random
    /// inputs: |c − ref|ᵢⱼ ≤ on_m·Mᵢⱼ + on_ref·|refᵢⱼ| + floor.
    ///
    /// Each rounding of the accumulation is a relative error δ, |δ| ≤ u, of a partial sum s;
    /// over random zero-mean data the δ are mean-zero and independent of the signs, so the
    /// error Σ δ·s has variance at most u²·Σ s², whatever the summation order (K − 1 sums,
    /// each over at most K terms: E Σ s² ≤ K²·E(ab)²). So its standard deviation is at most
    /// u·K·rms(ab) = u·ρ·M, with ρ = rms(ab)/mean|ab|. Inputs rounded in the kernel (tf32) add
    /// Σ a·b·(δa + δb), where uniform data puts each δ uniformly within its rounding interval
    /// (to nearest or truncated alike: a deviation of u_tf32/√3): deviation √(2/3)·u·ρ·M/√K,
    /// and, where the hardware truncates, a bias of at most 2⁻¹⁰·|ref|. C's own roundings (α,
    /// β, the output type, each pass) are bounded outright, directed rounding allowed. The
    /// limit is [`PRECISION_SIGMAS`] deviations plus those bounds.
    pub fn precision_limit(&self, passes: usize) -> PrecisionLimit {
        let p = self.problem.precision;
        let k = self.problem.k.max(1) as f64;
        let passes = passes.max(1) as f64;
        let u_acc = p.accumulate.unit_roundoff();
        let rounds_inputs = p.input.input_rounding() > 0.0;
        let input_deviation = if rounds_inputs {
            (2.0f64 / 3.0).sqrt() * p.input.unit_roundoff() / k.sqrt()
        } else {
            0.0
        };
        let deviation = RANDOM_RMS_OVER_MEAN * (u_acc + input_deviation);
        let mut on_magnitude = PRECISION_SIGMAS * deviation;
        // Truncated inputs shrink every product by up to 2·2⁻¹¹ on average; α·acc and the
        // sum with β·C₀ round C (β·C₀'s own rounding is at most u·M).
        let mut on_result = p.input.input_rounding() + 2.0 * u_acc;
        if self.problem.reads_c() {
            on_magnitude += u_acc;
        }
        // C is rounded to the output type once; each pass after the first adds its sum to the
        // partial sums (at most M) in the accumulator's type.
        if p.output != p.accumulate {
            let u_out = p.output.unit_roundoff();
            on_result += 2.0 * u_out * (1.0 + u_out);
        }
        on_magnitude += (passes - 1.0) * 2.0 * u_acc;
        PrecisionLimit {
            on_magnitude,
            on_result,
            floor: self
                .bound_for(passes as usize)
                .map_or(0.0, |(_, floor)| floor),
        }
    }

    /// The bound's factor and floor for a result computed in one pass over K:
    /// |c − ref|ᵢⱼ ≤ factor·Mᵢⱼ + floor. See [`Reference::bound_for`].
    pub fn bound(&self) -> Option<(f64, f64)> {
        self.bound_for(1)
    }

    /// The bound's factor and floor for a result whose K was summed in `passes` launches, each
    /// continuing the sum the earlier ones left in the accumulator's type (tilemm never rounds
    /// a partial sum to a narrower C):
    ///
    /// - inputs: rounded in the kernel (tf32), each product off by (1 + u_in)² − 1;
    /// - accumulation: γ with K + 2·passes roundings of the accumulator (K products and sums,
    ///   and per pass the α product and the β sum);
    /// - output: one rounding to the output type when that is coarser than the accumulator;
    /// - the f64 reference's own γ_(K+2) in 2⁻⁵³.
    ///
    /// `None` when the bound says nothing (K·u ≥ 1/2).
    pub fn bound_for(&self, passes: usize) -> Option<(f64, f64)> {
        let p = self.problem.precision;
        let k = self.problem.k as f64;
        let passes = passes.max(1) as f64;
        let gamma = |n: f64, u: f64| (n * u < 0.5).then(|| n * u / (1.0 - n * u));
        let u_in = p.input.input_rounding();
        let inputs = u_in * (2.0 + u_in);
        let accumulate =
            (1.0 + inputs) * (1.0 + gamma(k + 2.0 * passes, p.accumulate.unit_roundoff())?) - 1.0;
        let output = if p.output == p.accumulate {
            0.0
        } else {
            gamma(1.0, p.output.unit_roundoff())? * (1.0 + accumulate)
        };
        let factor = accumulate + output + gamma(k + 2.0, f64::EPSILON / 2.0)?;
        // K products and K − 1 additions, each of which may underflow or be flushed to zero,
        // terms with a subnormal operand, which a device may flush to zero whole, and C's
        // rounding near zero.
        let mut floor =
            (2.0 * k + 2.0 * passes) * p.accumulate.smallest_normal() + self.subnormal_slack;
        if p.output != p.accumulate {
            floor += p.output.smallest_normal();
        }
        Some((factor, floor))
    }

    /// Compares `c` (C's buffer) with the reference, for a result computed in one pass.
    pub fn check(&self, c: &HostData) -> Result<Verification> {
        self.check_passes(c, 1)
    }

    /// Compares `c` with the reference, for a result whose K was summed in `passes` launches.
    pub fn check_passes(&self, c: &HostData, passes: usize) -> Result<Verification> {
        Ok(self
            .check_all(&[c], passes)?
            .pop()
            .expect("one verification per result"))
    }

    /// Compares each of `results` with the reference, in one pass over it.
    pub fn check_all(&self, results: &[&HostData], passes: usize) -> Result<Vec<Verification>> {
        let bound = self.bound_for(passes);
        let (factor, floor) = bound.unwrap_or((0.0, 0.0));
        let p = self.problem.precision;
        // Exact results need every partial sum and C itself exact: the coarser type decides.
        let coarse = if p.output.significand_bits() < p.accumulate.significand_bits() {
            p.output
        } else {
            p.accumulate
        };
        let precision = (self.values == InputValues::Random).then(|| self.precision_limit(passes));
        let rule = Rule {
            factor,
            floor,
            meaningful: bound.is_some(),
            integer_inputs: self.integer_data,
            exact_limit: coarse.exact_integer_limit(),
            range: p.output.largest().min(p.accumulate.largest()),
            u: coarse.unit_roundoff(),
            precision,
        };
        let mut tallies: Vec<Tally> = results
            .iter()
            .map(|c| {
                let right = c.len() >= self.problem.c_len() && c.dtype() == p.output;
                Tally::new(self, right, bound, &rule)
            })
            .collect();
        let (m, n) = (self.problem.m, self.problem.n);
        let block = self.plan.block;
        let mut got = host::zeros(block.rows * block.cols, "a block of C in f64")?;
        let desc = self.problem.c;
        let mut compare = |batch: usize,
                           rows: std::ops::Range<usize>,
                           cols: std::ops::Range<usize>,
                           want: &[f64],
                           magnitude: &[f64],
                           ld: usize| {
            let w = cols.len();
            for (tally, c) in tallies.iter_mut().zip(results) {
                if !tally.v.right_length {
                    continue;
                }
                crate::with_data!(c, v => gather(v, &desc, batch, rows.clone(), cols.clone(), &mut got));
                for (r, i) in rows.clone().enumerate() {
                    for (q, j) in cols.clone().enumerate() {
                        let at = r * ld + q;
                        tally.entry(
                            &rule,
                            (batch, i, j),
                            got[r * w + q],
                            want[at],
                            magnitude[at],
                        );
                    }
                }
            }
        };
        match &self.whole {
            Some((want, magnitude)) => {
                for batch in 0..self.problem.batch {
                    for i0 in (0..m).step_by(block.rows) {
                        let rows = i0..(i0 + block.rows).min(m);
                        for j0 in (0..n).step_by(block.cols) {
                            let cols = j0..(j0 + block.cols).min(n);
                            let at = batch * m * n + i0 * n + j0;
                            compare(batch, rows.clone(), cols, &want[at..], &magnitude[at..], n);
                        }
                    }
                }
            }
            None => {
                let mut scratch = Scratch::new(&block)?;
                let mut want = host::zeros(block.rows * block.cols, "a block of the reference")?;
                let mut magnitude = host::zeros(block.rows * block.cols, "a block of magnitudes")?;
                for batch in 0..self.problem.batch {
                    for i0 in (0..m).step_by(block.rows) {
                        for j0 in (0..n).step_by(block.cols) {
                            let rows = i0..(i0 + block.rows).min(m);
                            let cols = j0..(j0 + block.cols).min(n);
                            let ld = cols.len();
                            self.compute_block(
                                batch,
                                rows.clone(),
                                cols.clone(),
                                (&mut want, &mut magnitude),
                                ld,
                                &mut scratch,
                            );
                            compare(batch, rows, cols, &want, &magnitude, ld);
                        }
                    }
                }
            }
        }
        Ok(tallies.into_iter().map(Tally::finish).collect())
    }

    /// Writes α·A·B + β·C₀ and |α|·|A|·|B| + |β|·|C₀| of rows × cols of batch entry `batch`
    /// into `out` (row stride `ld`), over K in blocks of A and B converted to f64 in `scratch`.
    fn compute_block(
        &self,
        batch: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
        out: (&mut [f64], &mut [f64]),
        ld: usize,
        scratch: &mut Scratch,
    ) {
        let p = &self.problem;
        let k = p.k;
        let (r, w) = (rows.len(), cols.len());
        let (c_out, mag_out) = out;
        // The last row of the block ends at (r − 1)·ld + w.
        let needed = (r - 1) * ld + w;
        assert!(c_out.len() >= needed && mag_out.len() >= needed);
        for k0 in (0..k).step_by(scratch.depth) {
            let d = scratch.depth.min(k - k0);
            crate::with_data!(self.a, v => widen(
                v, &p.a, batch, rows.clone(), k0..k0 + d, &mut scratch.a, &mut scratch.abs_a,
            ));
            crate::with_data!(self.b, v => widen(
                v, &p.b, batch, k0..k0 + d, cols.clone(), &mut scratch.b, &mut scratch.abs_b,
            ));
            for (dst, lhs, rhs) in [
                (&mut *c_out, &scratch.a, &scratch.b),
                (&mut *mag_out, &scratch.abs_a, &scratch.abs_b),
            ] {
                // SAFETY: dst holds r rows of stride ld with w ≥ columns each (asserted above),
                // lhs r×d and rhs d×w row-major, all within the scratch buffers sized for the
                // largest block; with read_dst the slab adds to the sum of the earlier ones.
                unsafe {
                    gemm::gemm(
                        r,
                        w,
                        d,
                        dst.as_mut_ptr(),
                        1,
                        ld as isize,
                        k0 > 0,
                        lhs.as_ptr(),
                        1,
                        d as isize,
                        rhs.as_ptr(),
                        1,
                        w as isize,
                        1.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(0),
                    );
                }
            }
        }
        // The scalars, applied once in f64 (the bound counts their rounding).
        let (alpha, beta) = (p.alpha, p.beta);
        for q in 0..r {
            let row = &mut c_out[q * ld..q * ld + w];
            let mag = &mut mag_out[q * ld..q * ld + w];
            for (j, (x, s)) in row.iter_mut().zip(mag.iter_mut()).enumerate() {
                *x *= alpha;
                *s *= alpha.abs();
                if let Some(c0) = self.c0 {
                    let y = c0.get(p.c.index(batch, rows.start + q, cols.start + j));
                    *x += beta * y;
                    *s += (beta * y).abs();
                }
            }
        }
    }
}

/// What the reference needs to know of an operand's values.
#[derive(Clone, Copy)]
struct Stats {
    integer: bool,
    subnormal: bool,
    largest: f64,
}

impl Stats {
    fn of<T: Element>(v: &[T]) -> Stats {
        let mut s = Stats {
            integer: true,
            subnormal: false,
            largest: 0.0,
        };
        for x in v.iter().map(|x| x.to_f64()) {
            s.integer &= x.is_finite() && x.trunc() == x;
            if x.is_finite() {
                s.largest = s.largest.max(x.abs());
                s.subnormal |= x != 0.0 && x.abs() < T::DTYPE.smallest_normal();
            }
        }
        s
    }
}

/// rows × cols of batch entry `batch` of the view `desc` of `src`, as f64 values and
/// magnitudes, row-major.
fn widen<T: Element>(
    src: &[T],
    desc: &MatrixDesc,
    batch: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    values: &mut [f64],
    magnitudes: &mut [f64],
) {
    let w = cols.len();
    for (r, i) in rows.enumerate() {
        for (q, j) in cols.clone().enumerate() {
            let x = src[desc.index(batch, i, j)].to_f64();
            values[r * w + q] = x;
            magnitudes[r * w + q] = x.abs();
        }
    }
}

/// rows × cols of batch entry `batch` of C's view `desc`, as f64, row-major.
fn gather<T: Element>(
    src: &[T],
    desc: &MatrixDesc,
    batch: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [f64],
) {
    let w = cols.len();
    for (r, i) in rows.enumerate() {
        for (q, j) in cols.clone().enumerate() {
            out[r * w + q] = src[desc.index(batch, i, j)].to_f64();
        }
    }
}

/// f64 copies of one block of A and one of B, and their magnitudes.
struct Scratch {
    depth: usize,
    a: Vec<f64>,
    abs_a: Vec<f64>,
    b: Vec<f64>,
    abs_b: Vec<f64>,
}

impl Scratch {
    fn new(block: &Block) -> Result<Self> {
        let a_len = block.rows * block.depth;
        let b_len = block.depth * block.cols;
        Ok(Scratch {
            depth: block.depth,
            a: host::zeros(a_len, "a block of A in f64")?,
            abs_a: host::zeros(a_len, "a block of |A| in f64")?,
            b: host::zeros(b_len, "a block of B in f64")?,
            abs_b: host::zeros(b_len, "a block of |B| in f64")?,
        })
    }
}

/// One result's comparison, entry by entry.
struct Tally {
    v: Verification,
    worst_severity: f64,
}

impl Tally {
    fn new(
        reference: &Reference,
        right_length: bool,
        bound: Option<(f64, f64)>,
        rule: &Rule,
    ) -> Self {
        let (factor, floor) = bound.unwrap_or((0.0, 0.0));
        let entries = reference.problem.c_entries();
        Tally {
            v: Verification {
                reference: reference.plan.mode,
                max_abs_err: 0.0,
                max_rel_err: 0.0,
                bound_factor: factor,
                bound_floor: floor,
                bound_meaningful: bound.is_some(),
                entries,
                integer_inputs: reference.integer_data,
                exact_entries: 0,
                bound_entries: 0,
                unverifiable_entries: 0,
                worst_err_over_bound: 0.0,
                err_in_ulps: None,
                input_values: reference.values,
                precision_limit_ulps: rule.precision.map(|l| l.on_magnitude / rule.u),
                worst_err_over_precision_limit: 0.0,
                precision_failures: 0,
                largest_reference: 0.0,
                largest_magnitude: 0.0,
                beyond_range_entries: 0,
                nonfinite_entries: 0,
                subnormal_inputs: reference.subnormal_slack > 0.0,
                overflow_entries: 0,
                range_failures: 0,
                failures: if right_length { 0 } else { entries },
                worst_failure: None,
                worst_failure_batch: 0,
                right_length,
                pass: false,
            },
            worst_severity: 0.0,
        }
    }

    /// Checks C's entry (batch, row, column).
    fn entry(&mut self, rule: &Rule, at: (usize, usize, usize), got: f64, want: f64, mag: f64) {
        let v = &mut self.v;
        let err = if got == want || (got.is_nan() && want.is_nan()) {
            0.0
        } else {
            (got - want).abs()
        };
        if want.is_finite() {
            v.largest_reference = v.largest_reference.max(want.abs());
            v.overflow_entries += usize::from(want.abs() > rule.range);
        }
        if mag.is_finite() {
            v.largest_magnitude = v.largest_magnitude.max(mag);
        }
        // NaN or infinite inputs give a NaN or infinite magnitude; finite magnitudes beyond the
        // range mean sums may overflow. Neither kind enters the error figures.
        let finite = mag.is_finite();
        let in_range = finite && mag <= rule.range;
        v.beyond_range_entries += usize::from(finite && !in_range);
        v.nonfinite_entries += usize::from(!finite);
        let (ok, severity) = if !finite {
            // The bound would be infinite and pass anything: IEEE arithmetic gives the same ±inf
            // or NaN in f32 as in f64, so ask for it exactly.
            (err == 0.0, f64::INFINITY)
        } else if rule.integer_inputs && mag <= rule.exact_limit {
            v.exact_entries += 1;
            (err == 0.0, f64::INFINITY)
        } else if !rule.meaningful {
            v.unverifiable_entries += 1;
            (true, 0.0)
        } else {
            v.bound_entries += 1;
            let bound = rule.factor * mag + rule.floor;
            // A NaN error (a NaN where a number belongs) fails.
            let ratio = if err == 0.0 { 0.0 } else { err / bound };
            let mut ok = err == 0.0 || err <= bound;
            let mut severity = if ratio.is_nan() { f64::INFINITY } else { ratio };
            if in_range {
                v.worst_err_over_bound = nan_max(v.worst_err_over_bound, ratio);
                if mag > 0.0 {
                    let ulps = err / (rule.u * mag);
                    v.err_in_ulps = Some(v.err_in_ulps.map_or(ulps, |e| nan_max(e, ulps)));
                }
                if let Some(limit) = rule.precision.filter(|_| ok) {
                    let limit =
                        limit.on_magnitude * mag + limit.on_result * want.abs() + limit.floor;
                    let over = if err == 0.0 { 0.0 } else { err / limit };
                    v.worst_err_over_precision_limit =
                        nan_max(v.worst_err_over_precision_limit, over);
                    if over > 1.0 {
                        ok = false;
                        severity = over;
                        v.precision_failures += 1;
                    }
                }
            }
            (ok, severity)
        };
        if in_range {
            v.max_abs_err = nan_max(v.max_abs_err, err);
            if want != 0.0 {
                v.max_rel_err = nan_max(v.max_rel_err, err / want.abs());
            }
        }
        if !ok {
            v.failures += 1;
            v.range_failures += usize::from(finite && !in_range);
            if v.worst_failure.is_none() || severity > self.worst_severity {
                self.worst_severity = severity;
                v.worst_failure = Some((at.1, at.2, got, want));
                v.worst_failure_batch = at.0;
            }
        }
    }

    fn finish(mut self) -> Verification {
        let v = &mut self.v;
        v.pass = v.right_length && v.failures == 0 && v.unverifiable_entries == 0;
        self.v
    }
}

/// max that keeps a NaN (a NaN error must not vanish from the report).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(m: usize, k: usize, n: usize) -> Problem {
        Problem::new(m, k, n).unwrap()
    }

    fn data(v: &[f32]) -> HostData {
        HostData::F32(v.to_vec())
    }

    fn check(p: &Problem, a: &[f32], b: &[f32], c: &[f32]) -> Verification {
        Reference::new(p, &data(a), &data(b), None)
            .unwrap()
            .check(&data(c))
            .unwrap()
    }

    /// A plan that forces the reference into blocks of `side` (rows, columns and depth).
    fn blocked(p: &Problem, side: usize) -> ReferencePlan {
        let block = Block {
            rows: side.min(p.m),
            cols: side.min(p.n),
            depth: side.min(p.k),
        };
        ReferencePlan {
            mode: ReferenceMode::Blocks(block),
            block,
            bytes: block.bytes().get().unwrap(),
        }
    }

    const A23: [f32; 6] = [1., 2., 3., 4., 5., 6.];
    const B32: [f32; 6] = [7., 8., 9., 10., 11., 12.];

    #[test]
    fn integer_inputs_must_be_exact_and_say_so() {
        // [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154].
        let p = problem(2, 3, 2);
        let v = check(&p, &A23, &B32, &[58., 64., 139., 154.]);
        assert!(v.pass && v.all_exact(), "{v:?}");
        assert_eq!((v.exact_entries, v.max_abs_err), (4, 0.0));
        // One unit off in 139 is within γ₃·(|A|·|B|)'s reach for larger values, but not exact.
        let v = check(&p, &A23, &B32, &[58., 64., 139.001, 154.]);
        assert!(!v.pass);
        assert_eq!(v.failures, 1);
        assert_eq!(v.worst_failure.map(|f| (f.0, f.1)), Some((1, 0)));
    }

    #[test]
    fn a_dropped_term_of_65536_fails_although_the_bound_would_pass_it() {
        // The case: ones(1×65536)·ones(65536×1) gave 65535 on a driver that cut the
        // loop; γ_K·K = 256 would have passed it.
        let k = 65536;
        let p = problem(1, k, 1);
        let ones = data(&vec![1.0f32; k]);
        let reference = Reference::new(&p, &ones, &ones, None).unwrap();
        let (factor, _) = reference.bound().unwrap();
        assert!(factor * k as f64 > 1.0);
        let v = reference.check(&data(&[65535.0])).unwrap();
        assert!(!v.pass && v.exact_entries == 1, "{v:?}");
        assert!(reference.check(&data(&[65536.0])).unwrap().all_exact());
    }

    #[test]
    fn integers_beyond_two_to_the_24_fall_back_to_the_bound() {
        // 4096 · 8192 = 2²⁵: sums of such products may round in f32.
        let p = problem(1, 2, 1);
        let v = check(&p, &[4096., 1.], &[8192., 1.], &[33554432.]);
        assert_eq!(v.exact_entries, 0);
        assert!(v.pass && !v.all_exact(), "{v:?}");
    }

    #[test]
    fn exact_integers_are_verifiable_where_the_bound_says_nothing() {
        // K·u ≥ 1/2 from K = 2²³ in f32: the bound is vacuous, but zeros are integers.
        let k = 1 << 23;
        let p = problem(1, k, 1);
        let zeros = vec![0.0f32; k];
        let v = check(&p, &zeros, &zeros, &[0.0]);
        assert!(!v.bound_meaningful && v.pass && v.all_exact(), "{v:?}");
        // Non-integer data at that K cannot be verified, so it cannot pass.
        let halves = vec![0.5f32; k];
        let v = check(&p, &halves, &halves, &[(k / 4) as f32]);
        assert!(!v.pass && v.unverifiable_entries == 1, "{v:?}");
    }

    #[test]
    fn nan_fails_but_matching_nan_passes() {
        let p = problem(1, 1, 2);
        assert!(check(&p, &[1.0], &[f32::NAN, 2.0], &[f32::NAN, 2.0]).pass);
        let v = check(&p, &[1.0], &[f32::NAN, 2.0], &[f32::NAN, f32::NAN]);
        assert!(!v.pass);
        assert_eq!(v.failures, 1);
    }

    #[test]
    fn infinite_inputs_must_give_the_ieee_result_exactly() {
        // [inf 1]·[1; 1] = inf: an infinite bound must not pass a finite or negative answer.
        let p = problem(1, 2, 1);
        let (a, b) = ([f32::INFINITY, 1.0], [1.0f32, 1.0]);
        assert!(check(&p, &a, &b, &[f32::INFINITY]).pass);
        for wrong in [0.0, 1e30, f32::NEG_INFINITY, f32::NAN] {
            let v = check(&p, &a, &b, &[wrong]);
            assert!(!v.pass && v.nonfinite_entries == 1, "{wrong}: {v:?}");
            assert_eq!(v.range_failures, 0, "{wrong}: not an overflow");
        }
        // inf·0 is NaN in f32 as in f64.
        assert!(check(&p, &[f32::INFINITY, 0.0], &[0.0, 1.0], &[f32::NAN]).pass);
    }

    #[test]
    fn subnormal_inputs_flushed_to_zero_still_pass_and_nothing_more() {
        // 1e-39 is subnormal in f32. A device that flushes it (Vulkan allows it, CUDA's fast
        // math does) returns 0 for
        // 1e-39·1e30 = 1e-9: within the floor for subnormal inputs (λ·K·max|B| = 1.2e-8, λ the
        // smallest normal number). 1e-7 off is not.
        let p = problem(1, 1, 1);
        let (a, b) = ([1e-39f32], [1e30f32]);
        let v = check(&p, &a, &b, &[0.0]);
        assert!(v.pass && v.subnormal_inputs, "{v:?}");
        assert!(!check(&p, &a, &b, &[1e-7]).pass);
        // Without subnormal inputs the floor stays at underflow size.
        let v = check(&p, &[1e-30], &b, &[1.0]);
        assert!(!v.subnormal_inputs && v.bound_floor < 1e-37, "{v:?}");
    }

    #[test]
    fn overflow_is_reported_as_such() {
        // 1e30·1e30 + 1e30·1e30 = 2e60: no f32 can hold it; the kernel returns +inf.
        let p = problem(1, 2, 2);
        let a = [1e30f32, 1e30];
        let b = [1e30f32, 1.0, 1e30, 1.0];
        let v = check(&p, &a, &b, &[f32::INFINITY, 2e30]);
        assert!(!v.pass);
        assert_eq!(
            (v.overflow_entries, v.range_failures, v.failures),
            (1, 1, 1)
        );
        assert!((v.largest_reference / 2e60 - 1.0).abs() < 1e-6, "{v:?}");
        // The in-range entry still gives meaningful error figures.
        assert!(
            v.max_abs_err.is_finite() && v.worst_err_over_bound.is_finite(),
            "{v:?}"
        );
    }

    #[test]
    fn bound_grows_with_k() {
        let a = data(&[0.5f32; 1000]);
        let a10 = data(&[0.5f32; 10]);
        let small = Reference::new(&problem(1, 10, 1), &a10, &a10, None).unwrap();
        let large = Reference::new(&problem(1, 1000, 1), &a, &a, None).unwrap();
        let (f_small, _) = small.bound().unwrap();
        let (f_large, _) = large.bound().unwrap();
        // γ over K + 2 roundings (the α product and the β sum).
        let ratio = f_large / f_small;
        assert!((ratio / (1002.0 / 12.0) - 1.0).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn cancellation_passes_the_bound_where_rtol_fails() {
        // Exact: 1 + 2⁻³⁰ − 1 = 2⁻³⁰. Summed left to right in f32, 1 + 2⁻³⁰ rounds to 1 and the
        // result is 0: a 100% relative error, yet a correctly rounded f32 computation.
        let p = problem(1, 3, 1);
        let a = [1.0f32, 1.0, -1.0];
        let b = [1.0f32, 2f32.powi(-30), 1.0];
        let sequential = a.iter().zip(&b).fold(0.0f32, |acc, (x, y)| acc + x * y);
        assert_eq!(sequential, 0.0);
        let v = check(&p, &a, &b, &[sequential]);
        assert_eq!(v.max_rel_err, 1.0);
        assert!(v.pass, "{v:?}");
        // An error of 1e-6 is beyond γ₃·(|A|·|B|) ≈ 3.6e-7.
        assert!(!check(&p, &a, &b, &[1e-6]).pass);
    }

    #[test]
    fn a_reference_in_blocks_agrees_with_the_whole_one_and_catches_the_same_errors() {
        let p = problem(37, 53, 29);
        let ops = crate::io::inputs::random_operands(&p, 5).unwrap();
        let (a, b) = (&ops.a, &ops.b);
        let mut c = crate::host::cpu::product(&p, a, b, None).unwrap();
        let whole = Reference::new(&p, a, b, None).unwrap();
        assert_eq!(whole.mode(), ReferenceMode::Whole);
        let blocks = Reference::with_plan(&p, a, b, None, blocked(&p, 7)).unwrap();
        let (w, bl) = (whole.check(&c).unwrap(), blocks.check(&c).unwrap());
        assert!(w.pass && bl.pass);
        // Blocks of K sum in another order, so the f64 references may differ in the last bits;
        // the verdicts and the error figures agree.
        assert!(
            (w.max_abs_err - bl.max_abs_err).abs() < 1e-12,
            "{w:?} {bl:?}"
        );
        if let HostData::F32(c) = &mut c {
            c[17 * 29 + 11] += 1e-3;
        }
        for v in blocks.check_all(&[&c, &c], 1).unwrap() {
            assert!(!v.pass);
            assert_eq!(v.worst_failure.map(|f| (f.0, f.1)), Some((17, 11)));
        }
    }

    #[test]
    fn the_reference_is_not_the_cpu_paths_own_arithmetic() {
        // The CPU path's f32 result differs from the f64 reference (its rounding is checked,
        // not copied): on random data the error is nonzero yet within the bound.
        let p = problem(64, 300, 48);
        let ops = crate::io::inputs::random_operands(&p, 9).unwrap();
        let c = crate::host::cpu::product(&p, &ops.a, &ops.b, None).unwrap();
        let v = Reference::new(&p, &ops.a, &ops.b, None)
            .unwrap()
            .check(&c)
            .unwrap();
        assert!(v.pass && v.max_abs_err > 0.0, "{v:?}");
    }

    #[test]
    fn the_plan_holds_the_reference_whole_only_when_it_fits() {
        let p = problem(1000, 1000, 1000);
        let whole = ReferencePlan::fit(&p, 2, Some(1 << 30)).unwrap();
        assert_eq!(whole.mode, ReferenceMode::Whole);
        // One check reads the reference once: no point holding it.
        let once = ReferencePlan::fit(&p, 1, Some(1 << 30)).unwrap();
        assert!(matches!(once.mode, ReferenceMode::Blocks(_)));
        let blocks = ReferencePlan::fit(&p, 2, Some(8 << 20)).unwrap();
        assert!(matches!(blocks.mode, ReferenceMode::Blocks(_)));
        assert!(blocks.bytes <= 8 << 20, "{blocks:?}");
        // A single row of C a billion wide still fits in blocks.
        let wide = problem(1, 1, 1_000_000_000);
        let plan = ReferencePlan::fit(&wide, 2, Some(64 << 20)).unwrap();
        assert!(plan.bytes <= 64 << 20 && plan.block.cols > 1000, "{plan:?}");
        // Not even a 1×1×1 block (48 bytes) fits in 10.
        assert!(ReferencePlan::fit(&p, 2, Some(10)).is_err());
    }

    /// A and B random, and C computed on the CPU from them in f32 after rounding A and B to
    /// tf32 (what tf32 tensor cores compute).
    fn tf32_result(p: &Problem, seed: u64) -> (HostData, HostData, HostData) {
        let ops = crate::io::inputs::random_operands(p, seed).unwrap();
        let rounded = |d: &HostData| {
            HostData::F32(
                d.as_slice::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&x| crate::problem::round_to_tf32(x))
                    .collect(),
            )
        };
        let c = crate::host::cpu::product(p, &rounded(&ops.a), &rounded(&ops.b), None).unwrap();
        (ops.a, ops.b, c)
    }

    #[test]
    fn a_tf32_result_offered_as_f32_fails_and_passes_as_tf32() {
        use crate::problem::{DType, Precision, Shape};
        for k in [64, 1000, 4096, 20_000] {
            let f32_problem = problem(48, k, 40);
            let (a, b, c) = tf32_result(&f32_problem, k as u64);
            // The worst-case f32 bound alone catches it at small K, and lets it through from
            // K ≈ 700 on (K²·2⁻²⁶ against √K·2⁻¹¹).
            let as_f32 = Reference::new(&f32_problem, &a, &b, None).unwrap();
            let lenient = as_f32.check(&c).unwrap();
            if k == 64 || k >= 4096 {
                assert_eq!(lenient.pass, k >= 4096, "K = {k}: {lenient:?}");
            }
            // Held to what f32 gives random data, it fails everywhere.
            let v = as_f32.random_inputs().check(&c).unwrap();
            assert!(!v.pass && v.precision_failures > 0, "K = {k}: {v:?}");
            assert!(v.worst_err_over_precision_limit > 2.0, "K = {k}: {v:?}");
            // The same C checked as tf32 passes, bound and limit both.
            let tf32_problem = Shape {
                precision: Precision::of(DType::TF32),
                ..Shape::new(48, k, 40)
            }
            .problem()
            .unwrap();
            let v = Reference::new(&tf32_problem, &a, &b, None)
                .unwrap()
                .random_inputs()
                .check(&c)
                .unwrap();
            assert!(v.pass, "K = {k}: {v:?}");
            assert!(v.worst_err_over_precision_limit < 0.5, "K = {k}: {v:?}");
            // And the f32 result of the same data passes as f32, far inside the limit.
            let exact_f32 = crate::host::cpu::product(&f32_problem, &a, &b, None).unwrap();
            let v = Reference::new(&f32_problem, &a, &b, None)
                .unwrap()
                .random_inputs()
                .check(&exact_f32)
                .unwrap();
            assert!(
                v.pass && v.worst_err_over_precision_limit < 0.2,
                "K = {k}: {v:?}"
            );
        }
    }

    #[test]
    fn integers_tf32_cannot_hold_expose_it_exactly() {
        // Odd integers above 2¹¹ need 12 significant bits: tf32 rounds them, f32 does not, and
        // every partial sum stays an integer below 2²⁴, so an f32 result must be exact.
        let p = problem(8, 256, 8);
        let a: Vec<f32> = (0..p.a_len())
            .map(|i| (2049 + 2 * (i * 37 % 1000)) as f32)
            .collect();
        let b: Vec<f32> = (0..p.b_len())
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let round = |v: &[f32]| {
            HostData::F32(
                v.iter()
                    .map(|&x| crate::problem::round_to_tf32(x))
                    .collect(),
            )
        };
        let c = crate::host::cpu::product(&p, &round(&a), &round(&b), None).unwrap();
        let v = check(&p, &a, &b, c.as_slice::<f32>().unwrap());
        assert!(!v.pass && v.exact_entries == 64 && v.failures > 0, "{v:?}");
    }

    #[test]
    fn correct_results_stay_inside_the_precision_limit_in_every_precision() {
        use crate::problem::{DType, Precision, Shape};
        let precisions = [
            Precision::F32,
            Precision::of(DType::F64),
            Precision::of(DType::F16),
            Precision::new(DType::F16, DType::F32).unwrap(),
            Precision::of(DType::BF16),
            Precision::new(DType::BF16, DType::F32).unwrap(),
        ];
        for precision in precisions {
            for (k, alpha, beta) in [
                (1, 1.0, 0.0),
                (7, 0.5, 2.0),
                (513, 1.0, 0.0),
                (4096, -1.5, 1.0),
            ] {
                let p = Shape {
                    precision,
                    alpha,
                    beta,
                    batch: 2,
                    ..Shape::new(33, k, 17)
                }
                .problem()
                .unwrap();
                let ops = crate::io::inputs::random_operands(&p, k as u64).unwrap();
                let c = crate::host::cpu::product(&p, &ops.a, &ops.b, ops.c0.as_ref()).unwrap();
                let v = Reference::new(&p, &ops.a, &ops.b, ops.c0.as_ref())
                    .unwrap()
                    .random_inputs()
                    .check(&c)
                    .unwrap();
                assert!(v.pass, "{precision}, K = {k}: {v:?}");
            }
        }
    }

    #[test]
    fn half_precision_accumulation_fails_where_f32_accumulation_was_promised() {
        // f16 inputs, f32 accumulation and output promised; the sums kept in f16 instead.
        use crate::problem::{DType, Precision, Shape};
        let p = Shape {
            precision: Precision::new(DType::F16, DType::F32).unwrap(),
            ..Shape::new(16, 256, 16)
        }
        .problem()
        .unwrap();
        let ops = crate::io::inputs::random_operands(&p, 3).unwrap();
        let (a, b) = (
            ops.a.as_slice::<half::f16>().unwrap(),
            ops.b.as_slice::<half::f16>().unwrap(),
        );
        let c: Vec<f32> = (0..16 * 16)
            .map(|e| {
                let (i, j) = (e / 16, e % 16);
                let mut sum = half::f16::ZERO;
                for l in 0..256 {
                    sum = half::f16::from_f32(
                        sum.to_f32() + (a[i * 256 + l] * b[l * 16 + j]).to_f32(),
                    );
                }
                sum.to_f32()
            })
            .collect();
        let v = Reference::new(&p, &ops.a, &ops.b, None)
            .unwrap()
            .random_inputs()
            .check(&HostData::F32(c))
            .unwrap();
        assert!(!v.pass && v.precision_failures > 0, "{v:?}");
    }

    #[test]
    fn a_result_of_the_wrong_length_fails() {
        let p = problem(2, 3, 2);
        let v = check(&p, &A23, &B32, &[58., 64., 139.]);
        assert!(!v.pass && !v.right_length);
    }
}
