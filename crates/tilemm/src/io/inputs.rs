//! tilemm's random operands: uniform in [-1, 1) from a seed, the data the tuner times and
//! verifies candidates on, and the verifier's statistical bound assumes.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serializer;

use crate::error::Result;
use crate::host;
use crate::problem::{DType, Problem};
use crate::types::element::{Element, HostData};

/// A problem's operands on the host: A, B, and C's initial contents when β ≠ 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Operands {
    /// A's buffer.
    pub a: HostData,
    /// B's buffer.
    pub b: HostData,
    /// C's buffer before the product, when it is read (β ≠ 0).
    pub c0: Option<HostData>,
}

/// tilemm's random operands for `problem`: uniform in [-1, 1) from `seed`, rounded to the
/// input type (and C₀ to the output type when β ≠ 0). Each buffer spans its view.
pub fn random_operands(problem: &Problem, seed: u64) -> Result<Operands> {
    let mut rng = StdRng::seed_from_u64(seed);
    let p = problem.precision;
    let a = random_data(&mut rng, p.input, problem.a_len(), "A")?;
    let b = random_data(&mut rng, p.input, problem.b_len(), "B")?;
    let c0 = random_c0(&mut rng, problem)?;
    Ok(Operands { a, b, c0 })
}

/// C's random initial contents for `problem` from `seed`, when β ≠ 0 reads them (for A and B
/// read from files).
pub fn random_initial_c(problem: &Problem, seed: u64) -> Result<Option<HostData>> {
    random_c0(&mut StdRng::seed_from_u64(seed), problem)
}

fn random_c0(rng: &mut StdRng, problem: &Problem) -> Result<Option<HostData>> {
    if !problem.reads_c() {
        return Ok(None);
    }
    let c = random_data(rng, problem.precision.output, problem.c_len(), "C")?;
    Ok(Some(c))
}

/// `len` values uniform in [-1, 1), rounded to `dtype`.
fn random_data(rng: &mut StdRng, dtype: DType, len: usize, what: &str) -> Result<HostData> {
    let mut data = host::zeros_of(dtype, len, what)?;
    crate::with_data!(&mut data, v => {
        for x in v.iter_mut() {
            *x = Element::from_f64(rng.random_range(-1.0f64..1.0));
        }
    });
    Ok(data)
}

/// A path in a report: as text, with what is not UTF-8 shown as U+FFFD (JSON holds only text).
pub fn lossy_path<S: Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// [`lossy_path`] for an optional path.
pub fn lossy_optional_path<S: Serializer>(
    path: &Option<PathBuf>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match path {
        Some(path) => lossy_path(path, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_operands_are_seeded_signed_and_sized() {
        let p = Problem::new(7, 5, 3).unwrap();
        let ops = random_operands(&p, 42).unwrap();
        let (a, b) = (
            ops.a.as_slice::<f32>().unwrap(),
            ops.b.as_slice::<f32>().unwrap(),
        );
        assert_eq!((a.len(), b.len()), (35, 15));
        assert_eq!(random_operands(&p, 42).unwrap(), ops);
        assert_ne!(random_operands(&p, 43).unwrap().a, ops.a);
        assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(a.iter().any(|&x| x < 0.0));
    }
}
