//! The example's experiment for complex products (`tilemm run --dtype c64|c128`): the product
//! on the device twice (the first run pays for tuning and compilation), on the CPU route, and
//! each result checked against a reference computed here in complex f64, independent of
//! `tilemm::complex`'s packed real product.
//!
//! **The bound.** Each part of op(A)·op(B) is a real sum of 2K products (Re = Σ aᵣbᵣ − aᵢbᵢ,
//! Im = Σ aᵣbᵢ + aᵢbᵣ), so in unit roundoff u, in any order,
//! |P − ref| ≤ γ_(2K)·M per part, M being the sum of the terms' magnitudes (Mᵣ = Σ |aᵣbᵣ| +
//! |aᵢbᵢ|, Mᵢ = Σ |aᵣbᵢ| + |aᵢbᵣ|). C = α·P + β·C₀ adds |α|·γ·M, C's rounding u·|C| and, in
//! the f64 reference, γ_(2K+2) in 2⁻⁵³; [`Check::bound`] is their sum with γ_(2K+2) for γ_(2K).
//! **The precision.** The data are random (uniform in [-1, 1), parts drawn independently), so
//! the rounding errors of each part's sum are mean-zero, with a standard deviation below
//! u·ρ·M (the real verifier's argument, `tilemm::verify`): each entry is also held to
//! [`PRECISION_SIGMAS`] of those plus C's own rounding, which a product computed in a lower
//! precision than the parts' (tf32 for complex64) exceeds.

use std::fmt;
use std::time::{Duration, Instant};

use ndarray::{Array3, ArrayView3, Axis, Zip};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tilemm::complex::{Complex, ComplexPart};
use tilemm::host::{self, Bytes};
use tilemm::runtime::backend::{open_device, Backend};
use tilemm::tune::{KernelChoice, TuneBudget};
use tilemm::verify::{PRECISION_SIGMAS, RANDOM_RMS_OVER_MEAN};
use tilemm::{Gemm, GemmRun, Precision, Result, Shape};

/// The complex types `run` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComplexType {
    /// Pairs of f32.
    Complex64,
    /// Pairs of f64.
    Complex128,
}

impl ComplexType {
    /// numpy's name.
    pub fn name(self) -> &'static str {
        match self {
            ComplexType::Complex64 => "complex64",
            ComplexType::Complex128 => "complex128",
        }
    }
}

/// The product and how to run it.
#[derive(Clone, Debug)]
pub struct ComplexRunOptions {
    /// The element type.
    pub dtype: ComplexType,
    /// C is m×n, A m×k, B k×n, `batch` of each.
    pub m: usize,
    /// See `m`.
    pub k: usize,
    /// See `m`.
    pub n: usize,
    /// Products in the batch.
    pub batch: usize,
    /// A stored k×m, used as Aᵀ (a view).
    pub trans_a: bool,
    /// B stored n×k, used as Bᵀ.
    pub trans_b: bool,
    /// A (and B) enter conjugated: with `trans_a`, Aᴴ.
    pub conj: [bool; 2],
    /// C = α·op(A)·op(B) + β·C.
    pub alpha: Complex<f64>,
    /// See `alpha`; β = 0 leaves C unread.
    pub beta: Complex<f64>,
    /// The random inputs' seed.
    pub seed: u64,
    /// The backend (`None`: the best GPU found, else the CPU alone).
    pub backend: Option<Backend>,
    /// The device within it.
    pub device: Option<usize>,
    /// The real product's kernel.
    pub kernel: KernelChoice,
    /// How `auto` tunes.
    pub budget: TuneBudget,
}

/// One result against the reference.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The largest |c − ref| over both parts.
    pub max_abs_err: f64,
    /// The largest error over its bound (≤ 1 passes).
    pub worst_err_over_bound: f64,
    /// The largest error over its precision limit (≤ 1 passes).
    pub worst_err_over_limit: f64,
    /// γ_(2K+2) in the parts' unit roundoff: the bound's factor on |α|·M.
    pub bound: f64,
    /// Both within.
    pub pass: bool,
}

/// One run of the product.
#[derive(Clone, Debug, Serialize)]
pub struct Timed {
    /// Where it ran (`GemmRun::route`).
    pub route: String,
    /// The real product's kernel, on a GPU.
    pub kernel: Option<String>,
    /// The whole call, packing, tuning and transfers included.
    pub ms: f64,
    /// The kernel alone, where the device timed it.
    pub kernel_ms: Option<f64>,
    /// Against the reference.
    pub check: Check,
}

/// What `run --dtype c64|c128` reports.
#[derive(Clone, Debug, Serialize)]
pub struct ComplexReport {
    /// C's type.
    pub dtype: ComplexType,
    /// The shape, as `C[m×n] = op(A)·op(B)`.
    pub problem: String,
    /// The seed of the random inputs.
    pub seed: u64,
    /// Real flops of one product: 8·m·n·k per batch entry.
    pub flops: f64,
    /// The device's first run (tuning and compilation included), when a device opened.
    pub first_gpu: Option<Timed>,
    /// Its second run.
    pub second_gpu: Option<Timed>,
    /// The CPU route.
    pub cpu: Timed,
    /// Why no device ran, and other notes.
    pub notes: Vec<String>,
    /// Every result passed.
    pub pass: bool,
}

/// Runs the experiment.
pub fn run_complex(options: &ComplexRunOptions) -> Result<ComplexReport> {
    match options.dtype {
        ComplexType::Complex64 => run_typed::<f32>(options),
        ComplexType::Complex128 => run_typed::<f64>(options),
    }
}

fn run_typed<T: ComplexPart>(o: &ComplexRunOptions) -> Result<ComplexReport> {
    check_size::<T>(o)?;
    let mut notes = Vec::new();
    let gpu = open_device(o.backend, o.device, &mut notes)?;
    let mut rng = StdRng::seed_from_u64(o.seed);
    let (a_rows, a_cols) = if o.trans_a { (o.k, o.m) } else { (o.m, o.k) };
    let (b_rows, b_cols) = if o.trans_b { (o.n, o.k) } else { (o.k, o.n) };
    let a = random::<T>(&mut rng, (o.batch, a_rows, a_cols));
    let b = random::<T>(&mut rng, (o.batch, b_rows, b_cols));
    let c0 = random::<T>(&mut rng, (o.batch, o.m, o.n));
    let (a, b) = (op(&a, o.trans_a), op(&b, o.trans_b));
    let reference = Reference::new(a, b, c0.view(), o);
    let run = |gemm: Gemm<'_>| -> Result<Timed> {
        let mut c = c0.clone();
        let start = Instant::now();
        let run = gemm
            .kernel(o.kernel)
            .tune_budget(o.budget)
            .complex()
            .conjugate(o.conj[0], o.conj[1])
            .alpha(o.alpha)
            .beta(o.beta)
            .write_batched(a, b, c.view_mut())?;
        // Launches that each continued the sum (a GPU's panels of K); the CPU route sums
        // fixed slabs of K in order.
        let passes = run.schedule.as_ref().map_or_else(
            || (2 * o.k).div_ceil(tilemm::host::cpu::K_SLAB).max(1),
            |s| s.passes,
        );
        Ok(timed(
            &run,
            start.elapsed(),
            reference.check(c.view(), passes),
        ))
    };
    let (first_gpu, second_gpu) = match &gpu {
        Some(gpu) => (
            Some(run(Gemm::new().on(gpu))?),
            Some(run(Gemm::new().on(gpu))?),
        ),
        None => (None, None),
    };
    let cpu = run(Gemm::new().device(Backend::Cpu, None))?;
    let pass = [&first_gpu, &second_gpu]
        .into_iter()
        .flatten()
        .chain([&cpu])
        .all(|t| t.check.pass);
    let batch = if o.batch > 1 {
        format!("{} × ", o.batch)
    } else {
        String::new()
    };
    let op = |name: &str, t: bool, conj: bool| match (t, conj) {
        (false, false) => name.to_string(),
        (true, false) => format!("{name}ᵀ"),
        (false, true) => format!("conj({name})"),
        (true, true) => format!("{name}ᴴ"),
    };
    Ok(ComplexReport {
        dtype: o.dtype,
        problem: format!(
            "{batch}C[{}×{}] = {}[{a_rows}×{a_cols}] · {}[{b_rows}×{b_cols}]",
            o.m,
            o.n,
            op("A", o.trans_a, o.conj[0]),
            op("B", o.trans_b, o.conj[1]),
        ),
        seed: o.seed,
        flops: 8.0 * (o.batch * o.m * o.n * o.k) as f64,
        first_gpu,
        second_gpu,
        cpu,
        notes,
        pass,
    })
}

/// Refuses, before any input exists, what the packed real product (m×2k times 2k×2n, as
/// `tilemm::complex` runs it) cannot describe and what this host cannot hold: the operands,
/// a run's C and packed copies with their uploads, and the reference (C and its magnitudes in
/// complex f64, one B in f64), so that a huge request fails with a message, not an
/// out-of-memory abort.
fn check_size<T: ComplexPart>(o: &ComplexRunOptions) -> Result<()> {
    let twice = |x: usize| {
        x.checked_mul(2).ok_or_else(|| tilemm::Error::TooLarge {
            m: o.m,
            k: o.k,
            n: o.n,
            why: "the packed real product's 2·K and 2·N overflow".into(),
        })
    };
    let packed = Shape {
        batch: o.batch,
        precision: Precision::of(T::DTYPE),
        ..Shape::new(o.m, twice(o.k)?, twice(o.n)?)
    }
    .problem()
    // The refusal names the complex product's own dimensions.
    .map_err(|e| match e {
        tilemm::Error::TooLarge { why, .. } => tilemm::Error::TooLarge {
            m: o.m,
            k: o.k,
            n: o.n,
            why: format!("{why} (as the packed real product, m×2k times 2k×2n)"),
        },
        e => e,
    })?;
    let part = std::mem::size_of::<T>();
    // In reals: the packed A is A, the packed B twice B, P is C.
    let (a, b2, c) = (
        Bytes::of(packed.a_len(), part),
        Bytes::of(packed.b_len(), part),
        Bytes::of(packed.c_len(), part),
    );
    // A, B (half of B₂) and C₀; a run's C, A₂, B₂ and P, the uploads' copies of A₂ and B₂, C's
    // download and its vector.
    let inputs = a + b2 + c;
    let run = c + a + b2 + c + (a + b2).times(2) + c.times(2);
    let reference = c.times(2 * 16 / part as u64) + Bytes::of(o.k, 16).times(o.n as u64);
    let margin = Bytes::exactly(256 << 20);
    host::ensure_headroom(inputs + run + reference + margin, host::headroom().as_ref())
}

/// The stored matrices as used: transposed views where asked.
fn op<T: ComplexPart>(x: &Array3<Complex<T>>, transposed: bool) -> ArrayView3<'_, Complex<T>> {
    if transposed {
        x.view().permuted_axes([0, 2, 1])
    } else {
        x.view()
    }
}

/// Parts uniform in [-1, 1), drawn independently.
fn random<T: ComplexPart>(rng: &mut StdRng, shape: (usize, usize, usize)) -> Array3<Complex<T>> {
    Array3::from_shape_simple_fn(shape, || {
        Complex::new(
            T::from_f64(rng.random_range(-1.0..1.0)),
            T::from_f64(rng.random_range(-1.0..1.0)),
        )
    })
}

fn timed(run: &GemmRun, time: Duration, check: Check) -> Timed {
    Timed {
        route: run.route.to_string(),
        kernel: run.plan.as_ref().map(|p| p.to_string()),
        ms: time.as_secs_f64() * 1e3,
        kernel_ms: run.kernel.map(|k| k.as_secs_f64() * 1e3),
        check,
    }
}

/// α·op(A)·op(B) + β·C₀ in complex f64, with each part's M, and the bound's terms.
struct Reference {
    want: Array3<Complex<f64>>,
    /// |α|·M + |β|·|C₀| per part (re, im).
    magnitude: Array3<Complex<f64>>,
    /// The parts' unit roundoff and smallest normal.
    u: f64,
    tiny: f64,
    k: usize,
}

impl Reference {
    fn new<T: ComplexPart>(
        a: ArrayView3<Complex<T>>,
        b: ArrayView3<Complex<T>>,
        c0: ArrayView3<Complex<T>>,
        o: &ComplexRunOptions,
    ) -> Self {
        let wide = |x: &Complex<T>, conj: bool| {
            let x = Complex::new(x.re.to_f64(), x.im.to_f64());
            if conj {
                x.conj()
            } else {
                x
            }
        };
        let (batch, m, k) = a.dim();
        let n = b.dim().2;
        let mut want = Array3::from_elem((batch, m, n), Complex::new(0.0, 0.0));
        let mut magnitude = want.clone();
        for e in 0..batch {
            // op(B) column by column, contiguous, in f64.
            let bt: Vec<Complex<f64>> = (0..n)
                .flat_map(|j| (0..k).map(move |l| (j, l)))
                .map(|(j, l)| wide(&b[[e, l, j]], o.conj[1]))
                .collect();
            let a = a.index_axis(Axis(0), e);
            let c0 = c0.index_axis(Axis(0), e);
            Zip::indexed(want.index_axis_mut(Axis(0), e))
                .and(magnitude.index_axis_mut(Axis(0), e))
                .par_for_each(|(i, j), want, magnitude| {
                    let (mut p, mut mr, mut mi) = (Complex::new(0.0, 0.0), 0.0, 0.0);
                    for (l, y) in bt[j * k..(j + 1) * k].iter().enumerate() {
                        let x = wide(&a[[i, l]], o.conj[0]);
                        p += x * y;
                        mr += (x.re * y.re).abs() + (x.im * y.im).abs();
                        mi += (x.re * y.im).abs() + (x.im * y.re).abs();
                    }
                    let c = wide(&c0[[i, j]], false);
                    let read_c = o.beta != Complex::new(0.0, 0.0);
                    *want = o.alpha * p + if read_c { o.beta * c } else { 0.0.into() };
                    // |α·P|'s parts are bounded by |α|·(Mᵣ + Mᵢ) each; so for β·C₀.
                    let scaled = o.alpha.norm() * (mr + mi)
                        + if read_c {
                            o.beta.norm() * (c.re.abs() + c.im.abs())
                        } else {
                            0.0
                        };
                    *magnitude = if o.alpha.im == 0.0 && o.beta.im == 0.0 {
                        // Real scalars keep the parts apart.
                        let beta = if read_c { o.beta.re.abs() } else { 0.0 };
                        Complex::new(
                            o.alpha.re.abs() * mr + beta * c.re.abs(),
                            o.alpha.re.abs() * mi + beta * c.im.abs(),
                        )
                    } else {
                        Complex::new(scaled, scaled)
                    };
                });
        }
        Reference {
            want,
            magnitude,
            u: T::DTYPE.unit_roundoff(),
            tiny: T::DTYPE.smallest_normal(),
            k,
        }
    }

    /// `c` against the reference, for a sum of each part's 2K terms continued over `passes`
    /// launches (each adds the rounding of α·acc and of the sum with what C held).
    fn check<T: ComplexPart>(&self, c: ArrayView3<Complex<T>>, passes: usize) -> Check {
        let terms = (2 * self.k + 2 * passes) as f64;
        let gamma = |n: f64, u: f64| {
            if n * u < 0.5 {
                n * u / (1.0 - n * u)
            } else {
                f64::INFINITY
            }
        };
        let factor = gamma(terms, self.u) + gamma(terms, f64::EPSILON / 2.0);
        // Products and sums that underflow, C's rounding near zero.
        let floor = (terms + 1.0) * self.tiny;
        let mut check = Check {
            max_abs_err: 0.0,
            worst_err_over_bound: 0.0,
            worst_err_over_limit: 0.0,
            bound: factor,
            pass: true,
        };
        let precision =
            (PRECISION_SIGMAS * RANDOM_RMS_OVER_MEAN + 2.0 * (passes.max(1) - 1) as f64) * self.u;
        Zip::from(&c)
            .and(&self.want)
            .and(&self.magnitude)
            .for_each(|c, want, magnitude| {
                for (got, want, m) in [
                    (c.re.to_f64(), want.re, magnitude.re),
                    (c.im.to_f64(), want.im, magnitude.im),
                ] {
                    // NaN fails every comparison: counted as infinitely wrong.
                    let err = if (got - want).abs() <= f64::MAX {
                        (got - want).abs()
                    } else {
                        f64::INFINITY
                    };
                    let rounding = 2.0 * self.u * want.abs() + floor;
                    check.max_abs_err = check.max_abs_err.max(err);
                    let over = |limit: f64| if err == 0.0 { 0.0 } else { err / limit };
                    check.worst_err_over_bound =
                        check.worst_err_over_bound.max(over(factor * m + rounding));
                    check.worst_err_over_limit = check
                        .worst_err_over_limit
                        .max(over(precision * m + rounding));
                }
            });
        check.pass = check.worst_err_over_bound <= 1.0 && check.worst_err_over_limit <= 1.0;
        check
    }
}

impl fmt::Display for ComplexReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = match self.dtype {
            ComplexType::Complex64 => "f32",
            ComplexType::Complex128 => "f64",
        };
        writeln!(
            f,
            "problem     {}, {} ({part} parts)",
            self.problem,
            self.dtype.name()
        )?;
        writeln!(
            f,
            "inputs      random, real and imaginary parts uniform in [-1, 1), seed {}",
            self.seed
        )?;
        for note in &self.notes {
            writeln!(f, "note        {note}")?;
        }
        let line = |f: &mut fmt::Formatter<'_>, name: &str, t: &Timed| {
            writeln!(
                f,
                "{name:<12}{:.3} ms ({:.2} GFLOPS, 8·m·n·k flops){} on {}",
                t.ms,
                self.flops / (t.ms * 1e6),
                t.kernel_ms
                    .map(|k| format!(", kernel {k:.3} ms"))
                    .unwrap_or_default(),
                t.route
            )?;
            if let Some(kernel) = &t.kernel {
                writeln!(
                    f,
                    "            kernel {kernel}: one real product of the packed parts"
                )?;
            }
            writeln!(
                f,
                "            max abs err {:.3e}; worst err/bound {:.3e} (γ_2K+2 = {:.3e}); worst err/limit {:.3e} ({} of {part}'s rounding on random data): {}",
                t.check.max_abs_err,
                t.check.worst_err_over_bound,
                t.check.bound,
                t.check.worst_err_over_limit,
                PRECISION_SIGMAS,
                if t.check.pass { "PASS" } else { "FAIL" }
            )
        };
        if let Some(t) = &self.first_gpu {
            line(f, "1st GPU", t)?;
        }
        if let Some(t) = &self.second_gpu {
            line(f, "2nd GPU", t)?;
        }
        line(f, "CPU", &self.cpu)?;
        write!(f, "result      {}", if self.pass { "PASS" } else { "FAIL" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dtype: ComplexType, (m, k, n): (usize, usize, usize)) -> ComplexRunOptions {
        ComplexRunOptions {
            dtype,
            m,
            k,
            n,
            batch: 1,
            trans_a: false,
            trans_b: false,
            conj: [false; 2],
            alpha: Complex::new(1.0, 0.0),
            beta: Complex::new(0.0, 0.0),
            seed: 3,
            backend: Some(Backend::Cpu),
            device: None,
            kernel: KernelChoice::Auto,
            budget: TuneBudget::None,
        }
    }

    /// The reference's product, rounded to complex64, with the inputs first rounded by `round`.
    fn rounded_product(
        a: &Array3<Complex<f32>>,
        b: &Array3<Complex<f32>>,
        round: impl Fn(f32) -> f32,
    ) -> Array3<Complex<f32>> {
        let r = |x: &Complex<f32>| Complex::new(round(x.re) as f64, round(x.im) as f64);
        let (_, m, k) = a.dim();
        let n = b.dim().2;
        Array3::from_shape_fn((1, m, n), |(_, i, j)| {
            let p: Complex<f64> = (0..k).map(|l| r(&a[[0, i, l]]) * r(&b[[0, l, j]])).sum();
            Complex::new(p.re as f32, p.im as f32)
        })
    }

    #[test]
    fn a_wrong_entry_and_a_lower_precision_fail() {
        let o = options(ComplexType::Complex64, (8, 2048, 6));
        let mut rng = StdRng::seed_from_u64(1);
        let a = random::<f32>(&mut rng, (1, 8, 2048));
        let b = random::<f32>(&mut rng, (1, 2048, 6));
        let c0 = Array3::from_elem((1, 8, 6), Complex::new(0.0f32, 0.0));
        let reference = Reference::new(a.view(), b.view(), c0.view(), &o);
        let right = rounded_product(&a, &b, |x| x);
        assert!(reference.check(right.view(), 1).pass);
        // One imaginary part off by 1e-3 of its magnitude.
        let mut wrong = right.clone();
        wrong[[0, 3, 2]].im += 1e-3 * reference.magnitude[[0, 3, 2]].im as f32;
        let check = reference.check(wrong.view(), 1);
        assert!(!check.pass && check.worst_err_over_bound > 1.0, "{check:?}");
        // tf32 inputs (10 stored bits): within the worst-case bound at K = 2048, past the limit
        // of f32's rounding on random data.
        let tf32 = rounded_product(&a, &b, tilemm::types::round_to_tf32);
        let check = reference.check(tf32.view(), 1);
        assert!(check.worst_err_over_bound <= 1.0, "{check:?}");
        assert!(!check.pass && check.worst_err_over_limit > 1.0, "{check:?}");
    }

    #[test]
    fn conjugates_transposes_and_complex_scalars_pass_on_the_cpu_route() {
        for dtype in [ComplexType::Complex64, ComplexType::Complex128] {
            let o = ComplexRunOptions {
                trans_a: true,
                conj: [true, true],
                alpha: Complex::new(0.5, -2.0),
                beta: Complex::new(0.0, 1.0),
                batch: 2,
                ..options(dtype, (7, 40, 9))
            };
            let report = run_complex(&o).unwrap();
            assert!(report.first_gpu.is_none());
            assert!(report.pass, "{report}");
            assert!(report.cpu.check.worst_err_over_bound > 0.0, "{report}");
            assert_eq!(report.problem, "2 × C[7×9] = Aᴴ[40×7] · conj(B)[40×9]");
        }
    }
}
