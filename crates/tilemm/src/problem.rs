//! The GEMM problem C = α·op(A)·op(B) + β·C over strided, batched views: shapes, strides,
//! scalars and precisions, validated once and then handed to planning, launch, the CPU path and
//! verification, so that nothing re-derives a shape or re-checks what was checked.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
pub use crate::types::{round_to_tf32, DType, Precision};

/// Where each element of a matrix (or of a batch of matrices) lives in its buffer: element
/// (i, j) of batch entry b is at `offset + b·batch_stride + i·row_stride + j·col_stride`.
///
/// A transpose is a view with the strides swapped ([`MatrixDesc::t`]); a batch stride of 0
/// uses one matrix for every entry of the batch (broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MatrixDesc {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Elements from one row to the next.
    pub row_stride: usize,
    /// Elements from one column to the next.
    pub col_stride: usize,
    /// Index of element (0, 0) of the first matrix.
    pub offset: usize,
    /// Elements from one matrix of the batch to the next; 0 broadcasts one matrix.
    pub batch_stride: usize,
}

/// How a matrix's elements are ordered in memory, as far as a kernel's access pattern cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Consecutive along a row (column stride 1; any row stride).
    RowMajor,
    /// Consecutive along a column (row stride 1; any column stride).
    ColMajor,
    /// Neither stride is 1.
    Strided,
}

impl Layout {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row-major",
            Layout::ColMajor => "column-major",
            Layout::Strided => "strided",
        }
    }
}

impl MatrixDesc {
    /// A dense row-major matrix (C order), one after another in a batch.
    pub fn row_major(rows: usize, cols: usize) -> Self {
        MatrixDesc {
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
            offset: 0,
            batch_stride: rows.saturating_mul(cols),
        }
    }

    /// A dense column-major matrix (Fortran order), one after another in a batch.
    pub fn col_major(rows: usize, cols: usize) -> Self {
        MatrixDesc::row_major(cols, rows).t()
    }

    /// The transpose, as a view of the same elements.
    pub fn t(self) -> Self {
        MatrixDesc {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// The same matrix for every entry of a batch.
    pub fn broadcast(self) -> Self {
        MatrixDesc {
            batch_stride: 0,
            ..self
        }
    }

    /// Where element (i, j) of batch entry `batch` lives. The desc has been validated for
    /// the batch (its span fits `usize`).
    pub fn index(&self, batch: usize, i: usize, j: usize) -> usize {
        self.offset + batch * self.batch_stride + i * self.row_stride + j * self.col_stride
    }

    /// How the kernels should walk it.
    pub fn layout(&self) -> Layout {
        if self.col_stride == 1 || self.cols == 1 {
            Layout::RowMajor
        } else if self.row_stride == 1 || self.rows == 1 {
            Layout::ColMajor
        } else {
            Layout::Strided
        }
    }

    /// Elements a buffer must hold for `batch` matrices of this view: one past the largest
    /// index. `None` when that overflows.
    pub fn span(&self, batch: usize) -> Option<usize> {
        let last = |count: usize, stride: usize| (count - 1).checked_mul(stride);
        last(batch, self.batch_stride)?
            .checked_add(last(self.rows, self.row_stride)?)?
            .checked_add(last(self.cols, self.col_stride)?)?
            .checked_add(self.offset)?
            .checked_add(1)
    }

    /// Whether two different (batch, i, j) of `batch` matrices may share an element: false
    /// when the axes, sorted by stride, each step past everything the shorter ones reach. (A
    /// sufficient test; views it refuses are rare and can be copied.)
    pub fn may_overlap(&self, batch: usize) -> bool {
        let mut axes = [
            (self.col_stride, self.cols),
            (self.row_stride, self.rows),
            (self.batch_stride, batch),
        ];
        axes.sort_unstable();
        let mut reach = 0usize;
        for (stride, count) in axes {
            if count <= 1 {
                continue;
            }
            if stride <= reach {
                return true;
            }
            match (count - 1)
                .checked_mul(stride)
                .and_then(|r| r.checked_add(reach))
            {
                Some(r) => reach = r,
                None => return true,
            }
        }
        false
    }
}

/// One product C = α·A·B + β·C of `batch` matrix triples, with A m×k, B k×n and C m×n each.
///
/// Built once (from sizes, flags or the shapes of input files) and then handed to planning,
/// launch, the CPU path and verification. α and β are stored as the accumulator rounds them, so
/// every path computes with the same scalars. β = 0 means C is not read: whatever it held (NaN
/// included) does not reach the result.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Problem {
    /// Rows of A and C.
    pub(crate) m: usize,
    /// Columns of A and rows of B: the length of each dot product.
    pub(crate) k: usize,
    /// Columns of B and C.
    pub(crate) n: usize,
    /// Products in the batch.
    pub(crate) batch: usize,
    /// Where A's elements are.
    pub(crate) a: MatrixDesc,
    /// Where B's elements are.
    pub(crate) b: MatrixDesc,
    /// Where C's elements are.
    pub(crate) c: MatrixDesc,
    /// The product's scale.
    pub(crate) alpha: f64,
    /// C's scale; 0 leaves C unread.
    pub(crate) beta: f64,
    /// Element types.
    pub(crate) precision: Precision,
}

/// Dense operands described by a few choices: what the CLI's flags and most callers need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Rows of A and C.
    pub m: usize,
    /// The dot products' length.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Products in the batch (1: a single product).
    pub batch: usize,
    /// A is stored k×m (row-major) and used transposed.
    pub trans_a: bool,
    /// B is stored n×k (row-major) and used transposed.
    pub trans_b: bool,
    /// One A for every product of the batch.
    pub broadcast_a: bool,
    /// One B for every product of the batch.
    pub broadcast_b: bool,
    /// α.
    pub alpha: f64,
    /// β.
    pub beta: f64,
    /// Element types.
    pub precision: Precision,
}

impl Shape {
    /// C = A·B in f32, dense and row-major.
    pub fn new(m: usize, k: usize, n: usize) -> Self {
        Shape {
            m,
            k,
            n,
            batch: 1,
            trans_a: false,
            trans_b: false,
            broadcast_a: false,
            broadcast_b: false,
            alpha: 1.0,
            beta: 0.0,
            precision: Precision::F32,
        }
    }

    /// The problem: every operand dense (row-major storage), batches one after another.
    pub fn problem(&self) -> Result<Problem> {
        let (m, k, n) = (self.m, self.k, self.n);
        let stored = |rows, cols, trans: bool, broadcast: bool| {
            let desc = if trans {
                MatrixDesc::row_major(cols, rows).t()
            } else {
                MatrixDesc::row_major(rows, cols)
            };
            if broadcast {
                desc.broadcast()
            } else {
                desc
            }
        };
        Problem::general(
            (m, k, n, self.batch),
            stored(m, k, self.trans_a, self.broadcast_a),
            stored(k, n, self.trans_b, self.broadcast_b),
            MatrixDesc::row_major(m, n),
            (self.alpha, self.beta),
            self.precision,
        )
    }
}

/// The problem's parts, read-only: a problem is made only by [`Shape::problem`] or
/// [`Problem::general`], which validate them together.
impl Problem {
    /// Rows of A and C.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Columns of A and rows of B: the length of each dot product.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of B and C.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Products in the batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Where A's elements are.
    pub fn a(&self) -> MatrixDesc {
        self.a
    }

    /// Where B's elements are.
    pub fn b(&self) -> MatrixDesc {
        self.b
    }

    /// Where C's elements are.
    pub fn c(&self) -> MatrixDesc {
        self.c
    }

    /// The product's scale.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// C's scale; 0 leaves C unread.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// Element types.
    pub fn precision(&self) -> Precision {
        self.precision
    }
}

impl Problem {
    /// C = A·B in f32, dense and row-major. Fails on a zero dimension or sizes whose byte
    /// counts overflow.
    pub fn new(m: usize, k: usize, n: usize) -> Result<Self> {
        Shape::new(m, k, n).problem()
    }

    /// The problem whose A has shape `a` and B has shape `b` (rows, columns), dense f32.
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

    /// Any product: sizes (m, k, n, batch), the three views, (α, β) and the precision.
    /// Validates everything a kernel relies on: matching shapes, spans that fit the address
    /// space, a C whose entries are all distinct, finite scalars.
    pub fn general(
        (m, k, n, batch): (usize, usize, usize, usize),
        a: MatrixDesc,
        b: MatrixDesc,
        c: MatrixDesc,
        (alpha, beta): (f64, f64),
        precision: Precision,
    ) -> Result<Self> {
        for (name, value) in [("m", m), ("k", k), ("n", n), ("batch", batch)] {
            if value == 0 {
                return Err(Error::ZeroDimension { name });
            }
        }
        Precision::new(precision.input, precision.output)?;
        for (name, desc, rows, cols) in [("A", a, m, k), ("B", b, k, n), ("C", c, m, n)] {
            if (desc.rows, desc.cols) != (rows, cols) {
                return Err(Error::InvalidView(format!(
                    "{name} is viewed as {}×{} but the product needs {rows}×{cols}",
                    desc.rows, desc.cols
                )));
            }
        }
        for (name, value) in [("alpha", alpha), ("beta", beta)] {
            if !value.is_finite() {
                return Err(Error::InvalidScalar(format!(
                    "{name} must be finite, not {value}"
                )));
            }
        }
        let (alpha, beta) = (
            precision.accumulate.round(alpha),
            precision.accumulate.round(beta),
        );
        if !alpha.is_finite() || !beta.is_finite() {
            return Err(Error::InvalidScalar(format!(
                "alpha and beta must be finite in {}",
                precision.accumulate
            )));
        }
        let problem = Problem {
            m,
            k,
            n,
            batch,
            a,
            b,
            c,
            alpha,
            beta,
            precision,
        };
        for (name, desc, dtype) in [
            ("A", a, precision.input),
            ("B", b, precision.input),
            ("C", c, precision.output),
        ] {
            desc.span(batch)
                .and_then(|len| len.checked_mul(dtype.size_bytes()))
                .filter(|&bytes| bytes <= isize::MAX as usize)
                .ok_or_else(|| Error::TooLarge {
                    m,
                    k,
                    n,
                    why: format!("{name}'s byte size overflows this machine's address space"),
                })?;
        }
        if c.may_overlap(batch) {
            return Err(Error::InvalidView(format!(
                "C's strides (row {}, column {}, batch {}) make entries share elements: each \
                 entry of C needs its own",
                c.row_stride, c.col_stride, c.batch_stride
            )));
        }
        Ok(problem)
    }

    /// The same product computed as Cᵀ = Bᵀ·Aᵀ when that suits the kernels better (C
    /// column-major), and whether it was swapped: the caller then passes B's buffer as A and
    /// A's as B. Kernels see only row-major or strided C.
    pub fn canonical(&self) -> (Problem, bool) {
        if self.c.layout() != Layout::ColMajor {
            return (*self, false);
        }
        let swapped = Problem {
            m: self.n,
            n: self.m,
            a: self.b.t(),
            b: self.a.t(),
            c: self.c.t(),
            ..*self
        };
        (swapped, true)
    }

    /// Elements A's buffer must hold.
    pub fn a_len(&self) -> usize {
        self.a.span(self.batch).expect("validated")
    }

    /// Elements B's buffer must hold.
    pub fn b_len(&self) -> usize {
        self.b.span(self.batch).expect("validated")
    }

    /// Elements C's buffer must hold.
    pub fn c_len(&self) -> usize {
        self.c.span(self.batch).expect("validated")
    }

    /// Entries of C that the product computes (batch·m·n).
    pub fn c_entries(&self) -> usize {
        self.batch * self.m * self.n
    }

    /// Bytes of A's, B's and C's buffers, in that order.
    pub fn operand_bytes(&self) -> [usize; 3] {
        let p = self.precision;
        [
            self.a_len() * p.input.size_bytes(),
            self.b_len() * p.input.size_bytes(),
            self.c_len() * p.output.size_bytes(),
        ]
    }

    /// Floating-point operations of the products (one multiply and one add per term).
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Whether C is read (β ≠ 0).
    pub fn reads_c(&self) -> bool {
        self.beta != 0.0
    }

    /// The bytes a product from host memory copies to the device: A's and B's buffers, and
    /// C's when β ≠ 0.
    pub fn upload_bytes(&self) -> u64 {
        let input = self.precision.input.storage().size_bytes() as u64;
        let c = if self.reads_c() {
            self.c_len() as u64 * self.precision.output.size_bytes() as u64
        } else {
            0
        };
        (self.a_len() + self.b_len()) as u64 * input + c
    }

    /// The bytes of C's buffer, which comes back to the host.
    pub fn download_bytes(&self) -> u64 {
        self.c_len() as u64 * self.precision.output.size_bytes() as u64
    }

    /// Checks that buffers of `a` and `b` elements hold this problem's A and B.
    pub fn check_operands(&self, a: usize, b: usize) -> Result<()> {
        for (what, got, expected) in [("A", a, self.a_len()), ("B", b, self.b_len())] {
            if got < expected {
                return Err(Error::DataLength {
                    what,
                    got,
                    expected,
                });
            }
        }
        Ok(())
    }

    /// Checks that a buffer of `c` elements holds this problem's C.
    pub fn check_output(&self, c: usize) -> Result<()> {
        if c < self.c_len() {
            return Err(Error::DataLength {
                what: "C",
                got: c,
                expected: self.c_len(),
            });
        }
        Ok(())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, n) = (self.m, self.n);
        if self.batch > 1 {
            write!(f, "{} × ", self.batch)?;
        }
        let scaled = self.alpha != 1.0 || self.beta != 0.0;
        write!(f, "C[{m}×{n}] = ")?;
        if self.alpha != 1.0 {
            write!(f, "{}·", self.alpha)?;
        }
        let view = |f: &mut fmt::Formatter<'_>, name: &str, desc: &MatrixDesc| {
            let layout = desc.layout();
            let broadcast = self.batch > 1 && desc.batch_stride == 0;
            let mut notes = Vec::new();
            if layout != Layout::RowMajor {
                notes.push(layout.name());
            }
            if broadcast {
                notes.push("broadcast");
            }
            if notes.is_empty() {
                write!(f, "{name}[{}×{}]", desc.rows, desc.cols)
            } else {
                write!(
                    f,
                    "{name}[{}×{}, {}]",
                    desc.rows,
                    desc.cols,
                    notes.join(", ")
                )
            }
        };
        view(f, "A", &self.a)?;
        write!(f, " · ")?;
        view(f, "B", &self.b)?;
        if scaled && self.beta != 0.0 {
            write!(f, " + {}·C", self.beta)?;
        }
        write!(f, ", {}", self.precision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_dimensions_are_rejected_by_name() {
        for (m, k, n, name) in [(0, 4, 4, "m"), (4, 0, 4, "k"), (4, 4, 0, "n")] {
            assert!(matches!(
                Problem::new(m, k, n),
                Err(Error::ZeroDimension { name: got }) if got == name
            ));
        }
        let mut shape = Shape::new(2, 2, 2);
        shape.batch = 0;
        assert!(matches!(
            shape.problem(),
            Err(Error::ZeroDimension { name: "batch" })
        ));
    }

    #[test]
    fn overflowing_sizes_are_rejected() {
        assert!(matches!(
            Problem::new(usize::MAX / 2, 3, 1),
            Err(Error::TooLarge { .. })
        ));
        let mut shape = Shape::new(1 << 20, 1, 1 << 20);
        shape.batch = 1 << 30;
        assert!(matches!(shape.problem(), Err(Error::TooLarge { .. })));
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

    #[test]
    fn a_transpose_is_a_view_with_swapped_strides() {
        let mut shape = Shape::new(3, 4, 5);
        shape.trans_a = true;
        shape.batch = 2;
        let p = shape.problem().unwrap();
        // A is stored 4×3 row-major; element (i, l) of A = storage (l, i).
        assert_eq!(p.a.index(0, 2, 1), 3 + 2);
        assert_eq!(p.a.index(1, 0, 0), 12);
        assert_eq!(p.a.layout(), Layout::ColMajor);
        assert_eq!(p.a_len(), 24);
        assert_eq!(p.c_entries(), 30);
    }

    #[test]
    fn broadcast_operands_span_one_matrix() {
        let mut shape = Shape::new(3, 4, 5);
        shape.batch = 7;
        shape.broadcast_b = true;
        let p = shape.problem().unwrap();
        assert_eq!(p.b_len(), 20);
        assert_eq!(p.a_len(), 7 * 12);
        assert!(p.to_string().contains("broadcast"), "{p}");
    }

    #[test]
    fn c_whose_entries_share_elements_is_refused() {
        let a = MatrixDesc::row_major(4, 3);
        let b = MatrixDesc::row_major(3, 4);
        let mut c = MatrixDesc::row_major(4, 4);
        c.row_stride = 2;
        let err = Problem::general((4, 3, 4, 1), a, b, c, (1.0, 0.0), Precision::F32)
            .unwrap_err()
            .to_string();
        assert!(err.contains("share elements"), "{err}");
        // Broadcasting C over a batch would write each entry several times.
        let c = MatrixDesc::row_major(4, 4).broadcast();
        assert!(Problem::general((4, 3, 4, 2), a, b, c, (1.0, 0.0), Precision::F32).is_err());
        // A and B may overlap (they are only read); a padded C is fine.
        let mut c = MatrixDesc::row_major(4, 4);
        c.row_stride = 9;
        c.offset = 3;
        let ok = Problem::general((4, 3, 4, 1), a, b, c, (1.0, 0.0), Precision::F32).unwrap();
        assert_eq!(ok.c_len(), 3 + 3 * 9 + 3 + 1);
    }

    #[test]
    fn views_must_have_the_products_shapes() {
        let err = Problem::general(
            (4, 3, 4, 1),
            MatrixDesc::row_major(3, 4),
            MatrixDesc::row_major(3, 4),
            MatrixDesc::row_major(4, 4),
            (1.0, 0.0),
            Precision::F32,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("A is viewed as 3×4"), "{err}");
    }

    #[test]
    fn column_major_c_is_computed_as_its_transpose() {
        let p = Problem::general(
            (2, 3, 4, 1),
            MatrixDesc::row_major(2, 3),
            MatrixDesc::row_major(3, 4),
            MatrixDesc::col_major(2, 4),
            (1.0, 0.0),
            Precision::F32,
        )
        .unwrap();
        let (q, swapped) = p.canonical();
        assert!(swapped);
        assert_eq!((q.m, q.k, q.n), (4, 3, 2));
        assert_eq!(q.c.layout(), Layout::RowMajor);
        // Cᵀ(j, i) is C(i, j): the same element.
        assert_eq!(q.c.index(0, 3, 1), p.c.index(0, 1, 3));
        assert_eq!(q.a.index(0, 3, 2), p.b.index(0, 2, 3));
        let (same, swapped) = Problem::new(2, 3, 4).unwrap().canonical();
        assert!(!swapped && same.c.layout() == Layout::RowMajor);
    }

    #[test]
    fn precisions_are_the_supported_triples_and_scalars_are_rounded_once() {
        assert_eq!(Precision::of(DType::F16).accumulate, DType::F32);
        assert_eq!(Precision::of(DType::F64).accumulate, DType::F64);
        assert!(Precision::new(DType::BF16, DType::F32).is_ok());
        assert!(Precision::new(DType::F32, DType::F16).is_err());
        assert!(Precision::new(DType::F64, DType::F32).is_err());
        let mut shape = Shape::new(2, 2, 2);
        shape.alpha = 0.1;
        let p = shape.problem().unwrap();
        assert_eq!(p.alpha, f64::from(0.1f32));
        shape.beta = f64::NAN;
        assert!(shape.problem().is_err());
    }

    #[test]
    fn unit_roundoffs_follow_the_significands() {
        assert_eq!(DType::F32.unit_roundoff(), f64::from(f32::EPSILON) / 2.0);
        assert_eq!(DType::F64.unit_roundoff(), f64::EPSILON / 2.0);
        assert_eq!(
            DType::F16.unit_roundoff(),
            f64::from(half::f16::EPSILON) / 2.0
        );
        assert_eq!(
            DType::BF16.unit_roundoff(),
            f64::from(half::bf16::EPSILON) / 2.0
        );
        assert_eq!(DType::F16.exact_integer_limit(), 2048.0);
        assert_eq!(DType::TF32.unit_roundoff(), 2f64.powi(-11));
    }

    #[test]
    fn tf32_is_an_f32_stored_input_type_rounded_to_nearest() {
        let p = Precision::of(DType::TF32);
        assert_eq!((p.accumulate, p.output), (DType::F32, DType::F32));
        assert_eq!(p.input.storage(), DType::F32);
        assert!(Precision::new(DType::TF32, DType::F32).is_ok());
        let err = Precision::new(DType::TF32, DType::TF32)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tf32 inputs give f32 results"), "{err}");
        assert_eq!("tf32".parse::<DType>(), Ok(DType::TF32));
        // 1 + 2⁻¹¹ is a tie: away from zero, to 1 + 2⁻¹⁰; just below it, down to 1.
        let one = 1.0f32;
        assert_eq!(round_to_tf32(one + 2f32.powi(-11)), one + 2f32.powi(-10));
        assert_eq!(round_to_tf32(one + 2f32.powi(-12)), one);
        assert_eq!(
            round_to_tf32(-(one + 2f32.powi(-11))),
            -(one + 2f32.powi(-10))
        );
        // Rounding carries into the exponent; f32's largest value overflows.
        assert_eq!(round_to_tf32(2.0 - 2f32.powi(-23)), 2.0);
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
        assert!(round_to_tf32(f32::NAN).is_nan());
        // Every rounded value has its 13 low mantissa bits clear and is within 2⁻¹¹.
        for i in 0..10_000u32 {
            let x = f32::from_bits(0x3f80_0000 + i * 0x1f3);
            let r = round_to_tf32(x);
            assert_eq!(r.to_bits() & 0x1fff, 0);
            assert!(f64::from((r - x).abs()) <= f64::from(x) * DType::TF32.unit_roundoff());
        }
        assert_eq!(DType::TF32.input_rounding(), 2f64.powi(-10));
        assert_eq!(DType::F16.input_rounding(), 0.0);
    }
}
