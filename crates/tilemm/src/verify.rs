//! Checking a product against a CPU reference under a sound error bound that grows with K.
//!
//! For C = A·B computed in floating point with unit roundoff u, in any summation order,
//! |c − ab|ᵢⱼ ≤ γ_K·(|A|·|B|)ᵢⱼ with γ_K = K·u/(1 − K·u) (Higham, *Accuracy and Stability of
//! Numerical Algorithms*, §3.5), plus K times the underflow unit when products are subnormal.
//! The bound is relative to |A|·|B|, not to |C|, so it holds where signed data cancels and C is
//! near zero, which is where a bare rtol check fails or has to be loosened until it checks
//! nothing. A kernel that silently computes in lower precision (TF32, bf16, f16 accumulation)
//! can still stay inside it, so the report also gives the error in units of u·(|A|·|B|)ᵢⱼ,
//! which random data keeps near √K for a correct f32 kernel.

use serde::Serialize;

use crate::cpu::gemm_row_major;
use crate::error::Result;
use crate::problem::Problem;

/// The reference a result was compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReferenceKind {
    /// f64 products of the exact (f32) inputs: error negligible next to the bound.
    F64,
    /// An f32 product by the CPU crate, for sizes whose f64 copies don't fit in memory; its own
    /// error counts against the bound, which doubles.
    F32,
}

/// The reference product and the magnitudes |A|·|B| that scale the bound.
pub struct Reference {
    kind: ReferenceKind,
    problem: Problem,
    c: Vec<f64>,
    magnitude: Vec<f64>,
}

/// How a result compared with the reference.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verification {
    /// The reference used.
    pub reference: ReferenceKind,
    /// max |c − ref|.
    pub max_abs_err: f64,
    /// max |c − ref| / |ref| over entries with ref ≠ 0 (large where signed data cancels).
    pub max_rel_err: f64,
    /// The bound's factor: |c − ref|ᵢⱼ ≤ factor·(|A|·|B|)ᵢⱼ + floor.
    pub bound_factor: f64,
    /// The bound's absolute floor (subnormal products).
    pub bound_floor: f64,
    /// False when K·u ≥ 1/2: the bound then says nothing, and the result cannot pass.
    pub bound_meaningful: bool,
    /// max |c − ref|ᵢⱼ / boundᵢⱼ: at most 1 to pass.
    pub worst_err_over_bound: f64,
    /// max |c − ref|ᵢⱼ / (u·(|A|·|B|)ᵢⱼ), against an f64 reference.
    pub err_in_ulps: Option<f64>,
    /// 2·√K: `err_in_ulps` above it suggests lower precision than the dtype's.
    pub ulps_warning_level: f64,
    /// Entries outside the bound.
    pub failures: usize,
    /// The worst entry outside the bound: row, column, value, reference.
    pub first_failure: Option<(usize, usize, f64, f64)>,
    /// Whether every entry is inside the bound.
    pub pass: bool,
}

/// Bytes an f64 reference for `problem` takes (A, B, their magnitudes, C and |A|·|B|).
pub fn f64_reference_bytes(problem: &Problem) -> u64 {
    8 * (2 * problem.a_len() as u64 + 2 * problem.b_len() as u64 + 2 * problem.c_len() as u64)
}

/// Bytes an f32 reference takes.
pub fn f32_reference_bytes(problem: &Problem) -> u64 {
    4 * (problem.a_len() as u64 + problem.b_len() as u64 + 2 * problem.c_len() as u64)
}

/// The reference kind used when `available` bytes are free: f64 when its copies take at most half.
pub fn reference_kind_for(problem: &Problem, available: Option<u64>) -> ReferenceKind {
    const DEFAULT_BUDGET: u64 = 4 << 30;
    let budget = available.map_or(DEFAULT_BUDGET, |bytes| bytes / 2);
    if f64_reference_bytes(problem) <= budget {
        ReferenceKind::F64
    } else {
        ReferenceKind::F32
    }
}

impl Reference {
    /// Computes the reference for `problem` on the CPU.
    pub fn compute(problem: &Problem, a: &[f32], b: &[f32], kind: ReferenceKind) -> Result<Self> {
        problem.check_operands(a, b)?;
        let (m, k, n) = (problem.m, problem.k, problem.n);
        let (c, magnitude) = match kind {
            ReferenceKind::F64 => {
                let a64: Vec<f64> = a.iter().map(|&x| f64::from(x)).collect();
                let b64: Vec<f64> = b.iter().map(|&x| f64::from(x)).collect();
                let c = gemm_row_major(m, k, n, &a64, &b64, 1.0);
                let abs_a: Vec<f64> = a64.iter().map(|x| x.abs()).collect();
                drop(a64);
                let abs_b: Vec<f64> = b64.iter().map(|x| x.abs()).collect();
                drop(b64);
                (c, gemm_row_major(m, k, n, &abs_a, &abs_b, 1.0))
            }
            ReferenceKind::F32 => {
                let c = gemm_row_major(m, k, n, a, b, 1.0f32);
                let abs_a: Vec<f32> = a.iter().map(|x| x.abs()).collect();
                let abs_b: Vec<f32> = b.iter().map(|x| x.abs()).collect();
                let magnitude = gemm_row_major(m, k, n, &abs_a, &abs_b, 1.0f32);
                (
                    c.into_iter().map(f64::from).collect(),
                    magnitude.into_iter().map(f64::from).collect(),
                )
            }
        };
        Ok(Reference {
            kind,
            problem: *problem,
            c,
            magnitude,
        })
    }

    /// Which reference this is.
    pub fn kind(&self) -> ReferenceKind {
        self.kind
    }

    /// The bound's factor and floor: |c − ref|ᵢⱼ ≤ factor·(|A|·|B|)ᵢⱼ + floor.
    ///
    /// `None` when K·u ≥ 1/2, where the bound says nothing (K ≥ 2²³ in f32).
    pub fn bound(&self) -> Option<(f64, f64)> {
        let k = self.problem.k as f64;
        let dtype = self.problem.dtype;
        let gamma = |u: f64| (k * u < 0.5).then(|| k * u / (1.0 - k * u));
        let gamma_c = gamma(dtype.unit_roundoff())?;
        let floor = k * dtype.underflow_unit();
        Some(match self.kind {
            // The f64 reference is off by at most γ_K(2⁻⁵³)·|A|·|B| itself.
            ReferenceKind::F64 => (gamma_c + gamma(f64::EPSILON / 2.0)?, floor),
            // An f32 reference errs as much as the result, and its |A|·|B| is itself rounded
            // down by at most a factor 1 − γ_K.
            ReferenceKind::F32 => (2.0 * gamma_c / (1.0 - gamma_c), 2.0 * floor),
        })
    }

    /// Compares `c` (row-major, the problem's m×n) with the reference.
    pub fn check(&self, c: &[f32]) -> Verification {
        let k = self.problem.k as f64;
        let (factor, floor) = self.bound().unwrap_or((0.0, 0.0));
        let vacuous = self.bound().is_none();
        let u = self.problem.dtype.unit_roundoff();
        let mut v = Verification {
            reference: self.kind,
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            bound_factor: factor,
            bound_floor: floor,
            bound_meaningful: !vacuous,
            worst_err_over_bound: 0.0,
            err_in_ulps: (self.kind == ReferenceKind::F64).then_some(0.0),
            ulps_warning_level: 2.0 * k.sqrt(),
            failures: 0,
            first_failure: None,
            pass: !vacuous && c.len() == self.c.len(),
        };
        if c.len() != self.c.len() {
            v.failures = self.c.len();
            return v;
        }
        let n = self.problem.n;
        let mut worst_failure = 0.0f64;
        for (idx, ((&got, &want), &mag)) in c.iter().zip(&self.c).zip(&self.magnitude).enumerate() {
            let got = f64::from(got);
            let err = if got == want || (got.is_nan() && want.is_nan()) {
                0.0
            } else {
                (got - want).abs()
            };
            let bound = factor * mag + floor;
            // A NaN error (a NaN where a number belongs) fails: `!(err <= bound)`. An exact
            // match passes even where the bound is NaN (NaN or infinite inputs).
            let ratio = if err == 0.0 { 0.0 } else { err / bound };
            let within = err == 0.0 || err <= bound;
            if !within {
                v.failures += 1;
                let severity = if ratio.is_nan() { f64::INFINITY } else { ratio };
                if v.first_failure.is_none() || severity > worst_failure {
                    worst_failure = severity;
                    v.first_failure = Some((idx / n, idx % n, got, want));
                }
            }
            v.max_abs_err = nan_max(v.max_abs_err, err);
            if want != 0.0 {
                v.max_rel_err = nan_max(v.max_rel_err, err / want.abs());
            }
            v.worst_err_over_bound = nan_max(v.worst_err_over_bound, ratio);
            if let Some(ulps) = v.err_in_ulps.as_mut() {
                if mag > 0.0 {
                    *ulps = nan_max(*ulps, err / (u * mag));
                }
            }
        }
        v.pass &= v.failures == 0;
        v
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

    /// [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154].
    fn small_reference() -> Reference {
        let a = [1., 2., 3., 4., 5., 6.];
        let b = [7., 8., 9., 10., 11., 12.];
        Reference::compute(&problem(2, 3, 2), &a, &b, ReferenceKind::F64).unwrap()
    }

    #[test]
    fn exact_result_passes_with_zero_error() {
        let r = small_reference();
        let v = r.check(&[58., 64., 139., 154.]);
        assert!(v.pass);
        assert_eq!(v.max_abs_err, 0.0);
        assert_eq!(v.failures, 0);
    }

    #[test]
    fn an_error_beyond_the_bound_fails_and_is_located() {
        let r = small_reference();
        // 139 + 1e-3 is far beyond γ₃·(|A|·|B|) ≈ 3·2⁻²⁴·139.
        let v = r.check(&[58., 64., 139.001, 154.]);
        assert!(!v.pass);
        assert_eq!(v.failures, 1);
        assert_eq!(v.first_failure.map(|f| (f.0, f.1)), Some((1, 0)));
    }

    #[test]
    fn a_k_too_large_for_the_bound_cannot_pass() {
        // K·u ≥ 1/2 from K = 2²³ in f32; use the bound directly on a K just above it.
        let k = 1 << 23;
        let a = vec![0.0f32; k];
        let r = Reference::compute(&problem(1, k, 1), &a, &a, ReferenceKind::F64).unwrap();
        assert!(r.bound().is_none());
        let v = r.check(&[0.0]);
        assert!(!v.bound_meaningful && !v.pass, "{v:?}");
    }

    #[test]
    fn nan_fails_but_matching_nan_passes() {
        let p = problem(1, 1, 2);
        let r = Reference::compute(&p, &[1.0], &[f32::NAN, 2.0], ReferenceKind::F64).unwrap();
        assert!(r.check(&[f32::NAN, 2.0]).pass);
        let v = r.check(&[f32::NAN, f32::NAN]);
        assert!(!v.pass);
        assert_eq!(v.failures, 1);
    }

    #[test]
    fn bound_grows_with_k_and_doubles_for_an_f32_reference() {
        let a = vec![0.5f32; 1000];
        let b = vec![0.5f32; 1000];
        let small =
            Reference::compute(&problem(1, 10, 1), &a[..10], &b[..10], ReferenceKind::F64).unwrap();
        let large = Reference::compute(&problem(1, 1000, 1), &a, &b, ReferenceKind::F64).unwrap();
        let (f_small, _) = small.bound().unwrap();
        let (f_large, _) = large.bound().unwrap();
        assert!(f_large > 90.0 * f_small && f_large < 110.0 * f_small);
        let f32_ref = Reference::compute(&problem(1, 1000, 1), &a, &b, ReferenceKind::F32).unwrap();
        assert!(f32_ref.bound().unwrap().0 >= 2.0 * f_large * 0.999);
    }

    #[test]
    fn cancellation_passes_the_bound_where_rtol_fails() {
        // Exact: 1 + 2⁻³⁰ − 1 = 2⁻³⁰. Summed left to right in f32, 1 + 2⁻³⁰ rounds to 1 and the
        // result is 0: a 100% relative error, yet a correctly rounded f32 computation.
        let p = problem(1, 3, 1);
        let a = [1.0f32, 1.0, -1.0];
        let b = [1.0f32, 2f32.powi(-30), 1.0];
        let r = Reference::compute(&p, &a, &b, ReferenceKind::F64).unwrap();
        let sequential = a.iter().zip(&b).fold(0.0f32, |acc, (x, y)| acc + x * y);
        assert_eq!(sequential, 0.0);
        let v = r.check(&[sequential]);
        assert_eq!(v.max_rel_err, 1.0);
        assert!(v.pass, "{v:?}");
        // An error of 1e-6 is beyond γ₃·(|A|·|B|) ≈ 3.6e-7.
        assert!(!r.check(&[1e-6]).pass);
    }

    #[test]
    fn the_reference_falls_back_to_f32_when_f64_copies_do_not_fit() {
        let p = problem(1000, 1000, 1000);
        let f64_bytes = f64_reference_bytes(&p);
        assert_eq!(
            reference_kind_for(&p, Some(4 * f64_bytes)),
            ReferenceKind::F64
        );
        assert_eq!(reference_kind_for(&p, Some(f64_bytes)), ReferenceKind::F32);
        assert!(f32_reference_bytes(&p) < f64_bytes / 2);
    }

    #[test]
    fn an_f32_reference_still_catches_wrong_results() {
        let p = problem(16, 64, 16);
        let (a, b) = crate::inputs::random_operands(&p, 5);
        let r = Reference::compute(&p, &a, &b, ReferenceKind::F32).unwrap();
        let mut c = crate::cpu::matmul(&p, &a, &b).unwrap();
        assert!(r.check(&c).pass);
        assert!(r.check(&c).err_in_ulps.is_none());
        c[17] += 1e-3;
        let v = r.check(&c);
        assert!(!v.pass);
        assert_eq!(v.first_failure.map(|f| (f.0, f.1)), Some((1, 1)));
    }
}
