//! The element types and precisions tilemm computes in, and the matrix units that multiply
//! them: plain values, imported by every layer above.

pub mod element;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A combination of element types tilemm does not compute (see [`Precision::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedPrecision(pub String);

impl fmt::Display for UnsupportedPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An element type of A, B or C, or of the accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: binary32's exponent with an 8-bit significand.
    BF16,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// TensorFloat-32: binary32's exponent with an 11-bit significand, the input type of
    /// NVIDIA's tf32 matrix units. Stored as f32 (A and B are f32 data); the matrix units
    /// multiply them rounded to tf32. An input type only: its products accumulate in f32.
    #[serde(rename = "tf32")]
    TF32,
}

impl DType {
    /// Every element type, by size.
    pub const ALL: [DType; 5] = [DType::F16, DType::BF16, DType::TF32, DType::F32, DType::F64];

    /// The types buffers hold (tf32 is stored as f32).
    pub const STORED: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

    /// The type a buffer of this type holds: f32 for tf32, else the type itself.
    pub fn storage(self) -> DType {
        match self {
            DType::TF32 => DType::F32,
            other => other,
        }
    }

    /// Bytes per element, as stored.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::TF32 => 4,
            DType::F64 => 8,
        }
    }

    /// Bits of significand, the implicit one included.
    pub fn significand_bits(self) -> u32 {
        match self {
            DType::F16 | DType::TF32 => 11,
            DType::BF16 => 8,
            DType::F32 => f32::MANTISSA_DIGITS,
            DType::F64 => f64::MANTISSA_DIGITS,
        }
    }

    /// The largest relative error of turning stored values into this type inside a kernel:
    /// 0 for every type but tf32, whose f32 inputs the matrix units take rounded. 2⁻¹⁰, twice
    /// tf32's unit roundoff, because hardware that reads an f32 register as tf32 truncates
    /// (tilemm's mma rung hands the units f32 registers as they are; cuBLAS's and
    /// cubek-matmul's are checked under the same bound).
    pub fn input_rounding(self) -> f64 {
        match self {
            DType::TF32 => 2.0 * self.unit_roundoff(),
            _ => 0.0,
        }
    }

    /// Unit roundoff u: the largest relative error of rounding to nearest.
    pub fn unit_roundoff(self) -> f64 {
        0.5f64.powi(self.significand_bits() as i32)
    }

    /// Smallest positive normal number. Devices may flush subnormal products and sums to zero
    /// (CUDA's fast math does, Vulkan allows it), so each product and each addition may lose up
    /// to this much besides its rounding.
    pub fn smallest_normal(self) -> f64 {
        match self {
            DType::F16 => f64::from(half::f16::MIN_POSITIVE),
            DType::BF16 => f64::from(half::bf16::MIN_POSITIVE),
            DType::F32 | DType::TF32 => f64::from(f32::MIN_POSITIVE),
            DType::F64 => f64::MIN_POSITIVE,
        }
    }

    /// Largest finite value: a result beyond it cannot be represented.
    pub fn largest(self) -> f64 {
        match self {
            DType::F16 => f64::from(half::f16::MAX),
            DType::BF16 => f64::from(half::bf16::MAX),
            DType::F32 => f64::from(f32::MAX),
            // (2 − 2⁻¹⁰)·2¹²⁷.
            DType::TF32 => f64::from(f32::from_bits(0x7f7f_e000)),
            DType::F64 => f64::MAX,
        }
    }

    /// Every integer of magnitude up to this bound is exactly representable (2^significand
    /// bits): integer data whose sums stay below it must give exact results.
    pub fn exact_integer_limit(self) -> f64 {
        2f64.powi(self.significand_bits() as i32)
    }

    /// `x` rounded to this type (to nearest, ties to even), as f64.
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F16 => f64::from(half::f16::from_f64(x)),
            DType::BF16 => f64::from(half::bf16::from_f64(x)),
            DType::F32 => f64::from(x as f32),
            DType::TF32 => f64::from(round_to_tf32(x as f32)),
            DType::F64 => x,
        }
    }

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::TF32 => "tf32",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown dtype '{s}' (choose one of: f16, bf16, tf32, f32, f64)")
            })
    }
}

/// `x` rounded to tf32's 10 stored mantissa bits, to nearest with ties away from zero (CUDA's
/// `cvt.rna.tf32.f32`); infinities and NaN pass through.
pub fn round_to_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    // Adding half of the last kept bit carries into the exponent where it must, up to
    // infinity past f32's largest value, as the hardware does.
    f32::from_bits((x.to_bits() + 0x1000) & !0x1fff)
}

/// The element types of a product: inputs A and B, the accumulator of the dot products, and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Precision {
    /// A and B.
    pub input: DType,
    /// The dot products, α and β.
    pub accumulate: DType,
    /// C, read (β ≠ 0) and written.
    pub output: DType,
}

impl Precision {
    /// Everything in f32.
    pub const F32: Precision = Precision {
        input: DType::F32,
        accumulate: DType::F32,
        output: DType::F32,
    };

    /// The precision with inputs and output of `dtype`: half types and tf32 accumulate in f32,
    /// and tf32's C is f32.
    pub fn of(dtype: DType) -> Precision {
        let accumulate = match dtype {
            DType::F16 | DType::BF16 | DType::F32 | DType::TF32 => DType::F32,
            DType::F64 => DType::F64,
        };
        Precision {
            input: dtype,
            accumulate,
            output: dtype.storage(),
        }
    }

    /// Inputs of `input` with C in `output`: the output is the input type, or f32 for half
    /// inputs (f16/f32/{f16, f32}, bf16/f32/{bf16, f32}, tf32/f32/f32, f32/f32/f32,
    /// f64/f64/f64).
    pub fn new(input: DType, output: DType) -> Result<Precision, UnsupportedPrecision> {
        let natural = Precision::of(input);
        if output == natural.output || output == natural.accumulate {
            Ok(Precision { output, ..natural })
        } else {
            let results = if natural.output == natural.accumulate {
                natural.output.to_string()
            } else {
                format!("{} or {}", natural.output, natural.accumulate)
            };
            Err(UnsupportedPrecision(format!(
                "{input} inputs give {results} results, not {output}"
            )))
        }
    }
}

impl Precision {
    /// The precision in one word: its input type, or input→output where C's type differs
    /// (`f16→f32`; tf32's C is f32, so `tf32`).
    pub fn short_name(&self) -> String {
        if self.output == self.input.storage() {
            self.input.to_string()
        } else {
            format!("{}→{}", self.input, self.output)
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.input == self.accumulate && self.accumulate == self.output {
            write!(f, "{}", self.input)
        } else {
            write!(
                f,
                "{} inputs, {} accumulation, {} output",
                self.input, self.accumulate, self.output
            )
        }
    }
}

/// A matrix-multiply unit a device registers (a tensor-core or cooperative-matrix
/// configuration): C (M×N, `cd`) += A (M×K, `a`) · B (K×N, `b`) per plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MatrixUnit {
    /// A's element type.
    pub a: DType,
    /// B's element type.
    pub b: DType,
    /// C's (and the accumulator's) element type.
    pub cd: DType,
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
}

impl std::fmt::Display for MatrixUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}×{}×{} {}×{}→{}",
            self.m, self.n, self.k, self.a, self.b, self.cd
        )
    }
}
