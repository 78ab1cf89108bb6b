//! The GEMM problem: shapes, layouts and element type, decided once and passed everywhere.

use serde::Serialize;

use crate::error::{Error, Result};

/// The element type of A, B and C.
///
/// Only f32 exists today; f16, bf16 and f64 join here, and everything that depends on the type
/// (sizes, the verification bound) asks this value rather than assuming f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
        }
    }

    /// Unit roundoff u (half the machine epsilon) of the arithmetic the kernels accumulate in.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f64::from(f32::EPSILON) / 2.0,
        }
    }

    /// Smallest positive normal number. Devices may flush subnormal products and sums to zero
    /// (CUDA's fast math does, Vulkan allows it), so each product and each addition may lose up
    /// to this much besides its rounding.
    pub fn smallest_normal(self) -> f64 {
        match self {
            DType::F32 => f64::from(f32::MIN_POSITIVE),
        }
    }

    /// Largest finite value: a product beyond it cannot be represented.
    pub fn largest(self) -> f64 {
        match self {
            DType::F32 => f64::from(f32::MAX),
        }
    }

    /// Every integer of magnitude up to this bound is exactly representable (2^significand
    /// bits): integer inputs whose sums stay below it must give exact results.
    pub fn exact_integer_limit(self) -> f64 {
        match self {
            DType::F32 => f64::from(1u32 << f32::MANTISSA_DIGITS),
        }
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
        }
    }
}

/// How a matrix is laid out in its buffer.
///
/// Only dense row-major (C order) storage exists today; transposed and strided layouts join here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Layout {
    /// Dense, row-major: element (i, j) of an r×c matrix is at i·c + j.
    RowMajor,
}

/// One matrix product C = A·B, with A m×k, B k×n and C m×n.
///
/// Built once (from sizes or from the shapes of input files) and then handed to planning,
/// launch, the CPU path and verification, so nothing re-derives a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Problem {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of A and rows of B: the length of each dot product.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Element type of all three matrices.
    pub dtype: DType,
    /// Layout of A.
    pub a_layout: Layout,
    /// Layout of B.
    pub b_layout: Layout,
}

impl Problem {
    /// An f32, row-major problem. Fails on a zero dimension or sizes whose byte counts overflow.
    pub fn new(m: usize, k: usize, n: usize) -> Result<Self> {
        for (name, value) in [("m", m), ("k", k), ("n", n)] {
            if value == 0 {
                return Err(Error::ZeroDimension { name });
            }
        }
        let problem = Problem {
            m,
            k,
            n,
            dtype: DType::F32,
            a_layout: Layout::RowMajor,
            b_layout: Layout::RowMajor,
        };
        let too_large = |why: &str| Error::TooLarge {
            m,
            k,
            n,
            why: why.to_string(),
        };
        for (rows, cols) in [(m, k), (k, n), (m, n)] {
            rows.checked_mul(cols)
                .and_then(|len| len.checked_mul(problem.dtype.size_bytes()))
                .filter(|&bytes| bytes <= isize::MAX as usize)
                .ok_or_else(|| {
                    too_large("a matrix's byte size overflows this machine's address space")
                })?;
        }
        // 2·m·n·k must be a finite f64 count for GFLOPS, and m·n·k must fit u128 trivially.
        Ok(problem)
    }

    /// The problem whose A has shape `a` and B has shape `b` (rows, columns).
    pub fn from_shapes(a: (usize, usize), b: (usize, usize)) -> Result<Self> {
        if a.1 != b.0 {
            return Err(Error::ShapeMismatch {
                a_rows: a.0,
                a_cols: a.1,
                b_rows: b.0,
                b_cols: b.1,
            });
        }
        Problem::new(a.0, a.1, b.1)
    }

    /// Elements of A.
    pub fn a_len(&self) -> usize {
        self.m * self.k
    }

    /// Elements of B.
    pub fn b_len(&self) -> usize {
        self.k * self.n
    }

    /// Elements of C.
    pub fn c_len(&self) -> usize {
        self.m * self.n
    }

    /// Bytes of A, B and C, in that order.
    pub fn operand_bytes(&self) -> [usize; 3] {
        let size = self.dtype.size_bytes();
        [
            self.a_len() * size,
            self.b_len() * size,
            self.c_len() * size,
        ]
    }

    /// Floating-point operations of the product (one multiply and one add per term).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Checks that `a` and `b` have the lengths this problem needs.
    pub fn check_operands<T>(&self, a: &[T], b: &[T]) -> Result<()> {
        for (what, got, expected) in [("A", a.len(), self.a_len()), ("B", b.len(), self.b_len())] {
            if got != expected {
                return Err(Error::DataLength {
                    what,
                    got,
                    expected,
                });
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "C[{m}×{n}] = A[{m}×{k}] · B[{k}×{n}], {dtype}",
            m = self.m,
            k = self.k,
            n = self.n,
            dtype = self.dtype.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_dimensions_are_rejected_by_name() {
        assert!(matches!(
            Problem::new(0, 4, 4),
            Err(Error::ZeroDimension { name: "m" })
        ));
        assert!(matches!(
            Problem::new(4, 0, 4),
            Err(Error::ZeroDimension { name: "k" })
        ));
        assert!(matches!(
            Problem::new(4, 4, 0),
            Err(Error::ZeroDimension { name: "n" })
        ));
    }

    #[test]
    fn overflowing_sizes_are_rejected() {
        assert!(matches!(
            Problem::new(usize::MAX / 2, 3, 1),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn shapes_must_chain() {
        assert!(matches!(
            Problem::from_shapes((3, 4), (5, 6)),
            Err(Error::ShapeMismatch {
                a_cols: 4,
                b_rows: 5,
                ..
            })
        ));
        let p = Problem::from_shapes((3, 4), (4, 6)).unwrap();
        assert_eq!((p.m, p.k, p.n), (3, 4, 6));
        assert_eq!(p.flops(), 144.0);
    }
}
