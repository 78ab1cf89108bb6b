//! What every rung's kernel takes besides its configuration, and the `#[cube]` pieces they
//! share: strided loads and the α/β epilogue.
//!
//! Every rung has the same runtime signature, `(a, b, c, args: GemmArgs)`, followed by its own
//! comptime configuration, so that launching, emitting and compile-checking a rung pass one
//! value, [`GemmArgs`], besides the buffers.

use cubecl::prelude::*;

use crate::problem::{MatrixDesc, Problem};

/// Where one operand's elements are: element (i, j) of batch entry b is at
/// `offset + b·batch_stride + i·row_stride + j·col_stride` (all 32-bit: the plan refuses
/// buffers of 2³² elements or more).
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct View {
    /// Index of (0, 0) of the first matrix.
    pub offset: u32,
    /// Elements between rows.
    pub row_stride: u32,
    /// Elements between columns.
    pub col_stride: u32,
    /// Elements between matrices of the batch (0: broadcast).
    pub batch_stride: u32,
}

/// The product's sizes and what this launch covers of it.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct Dims {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// First index of K this launch sums over.
    pub k_begin: u32,
    /// One past the last.
    pub k_end: u32,
    /// Batch entry of the grid's z = 0 (batches beyond the grid's z limit take more launches).
    pub batch_begin: u32,
}

/// What every rung's kernel takes besides the buffers A, B, C and its configuration: the three
/// operands' views, the sizes and the slab of K, α and β (in the accumulator's type `A`).
/// C stays a kernel argument of its own, the one buffer written.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct GemmArgs<A: Float + CubeElement> {
    /// Where A's elements are.
    pub va: View,
    /// Where B's elements are.
    pub vb: View,
    /// Where C's elements are.
    pub vc: View,
    /// The sizes and what this launch covers.
    pub dims: Dims,
    /// α.
    pub alpha: A,
    /// β for this launch.
    pub beta: A,
}

/// Element (i, j) of batch entry `batch` of `view`.
#[cube]
pub fn at(view: &View, batch: u32, i: u32, j: u32) -> usize {
    (view.offset + batch * view.batch_stride + i * view.row_stride + j * view.col_stride) as usize
}

/// The element type of A's and B's buffers. The type says how the buffer is read: u32 holds
/// bf16 values two to a word (for devices without a bf16 type), every other type its own values.
pub trait GemmInput: Scalar {
    /// Whether the buffer holds bf16 values packed two to a u32.
    const PACKED_BF16: bool = false;
    /// The type matrix-unit fragments hold these values in: their own (bf16 for packed bf16).
    /// The rungs built on matrix units compute f16 and bf16 inputs only ([`crate::kernels::Rung::computes`]).
    type Fragment: Float;
}

impl GemmInput for f32 {
    type Fragment = f32;
}
impl GemmInput for f64 {
    type Fragment = f64;
}
impl GemmInput for half::f16 {
    type Fragment = half::f16;
}
impl GemmInput for half::bf16 {
    type Fragment = half::bf16;
}
impl GemmInput for u32 {
    const PACKED_BF16: bool = true;
    type Fragment = half::bf16;
}

/// An input element, widened to the accumulator's type. Packed bf16 (`I` = u32,
/// [`GemmInput::PACKED_BF16`]): its bits, shifted into the high half of an f32, are that f32
/// exactly.
#[cube]
#[allow(clippy::manual_is_multiple_of)] // `%` is what the kernel language has.
pub fn load<I: GemmInput, A: Float>(buffer: &Array<I>, index: usize) -> A {
    if comptime!(I::PACKED_BF16) {
        let word = u32::cast_from(buffer[index / 2]);
        let bits = if index % 2 == 0 {
            word << 16
        } else {
            (word >> 16) << 16
        };
        A::cast_from(f32::reinterpret(bits))
    } else {
        A::cast_from(buffer[index])
    }
}

/// Element `index` of an operand held as vectors of `line` elements (`line` is `N`'s value),
/// widened to the accumulator's type; packed bf16 (`line` 1) as [`load()`] reads it.
#[cube]
#[allow(clippy::manual_is_multiple_of)]
pub fn fetch<I: GemmInput, A: Float, N: Size>(
    buffer: &Array<Vector<I, N>>,
    index: usize,
    #[comptime] line: u32,
) -> A {
    if comptime!(I::PACKED_BF16) {
        let word = u32::cast_from(buffer[index / 2][0]);
        let bits = if index % 2 == 0 {
            word << 16
        } else {
            (word >> 16) << 16
        };
        A::cast_from(f32::reinterpret(bits))
    } else if comptime!(line == 1) {
        A::cast_from(buffer[index][0])
    } else {
        // The element by selection, not by a dynamic index into the vector (which AMD's
        // compiler serves from scratch memory).
        let l = comptime!(line as usize);
        let vector = buffer[index / l];
        let lane = index % l;
        let mut value = A::cast_from(vector[0]);
        #[unroll]
        for e in 1..line {
            if lane == e as usize {
                value = A::cast_from(vector[e as usize]);
            }
        }
        value
    }
}

/// `steps` steps of K of a unit's TM×TN register tile: `acc += A[rows, k..k+steps] ·
/// B[k..k+steps, cols]`, with the values of A already in `av` (step u's TM values from
/// `u·TM`) and B's read from the row that starts `kb` past the columns' offsets `b_cols`, then
/// every `b_step` (in vectors of `line_b`: whole vectors inside B's row).
///
/// Each accumulator takes its `steps` products in a row (in order of k, as one step at a time
/// would): where the tile lives on the stack rather than in registers (lavapipe's 128 or more
/// accumulators per unit), that is one load and one store of it per `steps` FMAs instead of
/// per FMA. A GPU compiler keeps the tile in registers and schedules either order alike.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn outer_products<I: GemmInput, A: Float, NB: Size>(
    b: &Array<Vector<I, NB>>,
    b_cols: &Array<usize>,
    kb: usize,
    b_step: usize,
    av: &Array<A>,
    acc: &mut Array<A>,
    #[comptime] tm: u32,
    #[comptime] tn: u32,
    #[comptime] steps: u32,
    #[comptime] line_b: u32,
) {
    let mut bv = Array::<A>::new(comptime!((steps * tn) as usize));
    #[unroll]
    for u in 0..steps {
        let row = kb + (u as usize) * b_step;
        #[unroll]
        for v in 0..tn / line_b {
            if comptime!(line_b == 1) {
                bv[(u * tn + v) as usize] = fetch::<I, A, NB>(b, b_cols[v as usize] + row, 1u32);
            } else {
                let vec = b[(b_cols[(v * line_b) as usize] + row) / comptime!(line_b as usize)];
                #[unroll]
                for e in 0..line_b {
                    bv[(u * tn + v * line_b + e) as usize] = A::cast_from(vec[e as usize]);
                }
            }
        }
    }
    #[unroll]
    for i in 0..tm {
        #[unroll]
        for j in 0..tn {
            let e = (i * tn + j) as usize;
            let mut sum = acc[e];
            #[unroll]
            for u in 0..steps {
                sum += av[(u * tm + i) as usize] * bv[(u * tn + j) as usize];
            }
            acc[e] = sum;
        }
    }
}

/// Writes α·acc + β·C to entry `index` of C. With β = 0, C is not read, so whatever it held (an
/// uninitialised NaN included) does not reach the result.
#[cube]
pub fn store<A: Float, O: Float>(c: &mut Array<O>, index: usize, acc: A, alpha: A, beta: A) {
    let mut out = alpha * acc;
    if beta != A::new(0.0) {
        out += beta * A::cast_from(c[index]);
    }
    c[index] = O::cast_from(out);
}

/// Writes a unit's TM×TN tile of accumulators (`acc[i·TN + j]`, row-major) to the entries of C
/// from (`row0`, `col0`) on, those inside C only, through [`store()`].
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn store_tile<A: Float, O: Float>(
    c: &mut Array<O>,
    vc: &View,
    dims: &Dims,
    batch: u32,
    row0: u32,
    col0: u32,
    acc: &Array<A>,
    alpha: A,
    beta: A,
    #[comptime] tm: u32,
    #[comptime] tn: u32,
) {
    #[unroll]
    for i in 0..tm {
        #[unroll]
        for j in 0..tn {
            let (row, col) = (row0 + i, col0 + j);
            if row < dims.m && col < dims.n {
                let value = acc[(i * tn + j) as usize];
                store::<A, O>(c, at(vc, batch, row, col), value, alpha, beta);
            }
        }
    }
}

/// Along which axis each operand is contiguous: a compile-time choice that lets neighbouring
/// units fetch neighbouring elements whether A or B is stored row- or column-major.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Layouts {
    /// A is column-major (consecutive along a column).
    pub a_by_cols: bool,
    /// B is column-major.
    pub b_by_cols: bool,
}

/// The kernel arguments of one launch, ready to pass.
pub(crate) struct Args {
    /// A, B, C.
    pub views: [MatrixDesc; 3],
    /// Sizes and ranges.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// The slab of K.
    pub k_range: (u32, u32),
    /// The first batch entry of this launch.
    pub batch_begin: u32,
    /// α.
    pub alpha: f64,
    /// β for this launch (1 for the slabs after the first, which continue the sum in C).
    pub beta: f64,
}

impl Args {
    pub(crate) fn new(problem: &Problem) -> Self {
        Args {
            views: [problem.a, problem.b, problem.c],
            m: problem.m as u32,
            n: problem.n as u32,
            k_range: (0, problem.k as u32),
            batch_begin: 0,
            alpha: problem.alpha,
            beta: problem.beta,
        }
    }

    /// The operands' layouts, for kernels specialised on them.
    pub(crate) fn layouts(&self) -> Layouts {
        let by_cols = |which: usize| self.views[which].layout() == crate::problem::Layout::ColMajor;
        Layouts {
            a_by_cols: by_cols(0),
            b_by_cols: by_cols(1),
        }
    }

    /// The widest of 4, 2 and 1 elements that operand `which` (0: A, 1: B) can be read in, as
    /// vectors along its contiguous axis: A along K (row-major), B along N (row-major), with
    /// offsets, strides and the extent along that axis all multiples of it, so that no vector
    /// straddles a row or the buffer's end. 1 for packed bf16.
    pub(crate) fn line<I: GemmInput>(&self, which: usize) -> u32 {
        if self.views[which].col_stride != 1 {
            return 1;
        }
        self.staging_line::<I>(which, 4)
    }

    /// A's and B's widths ([`Args::line`]) for inputs packed (bf16 two to a u32) or not: what
    /// the host knows before it picks the input type.
    pub(crate) fn lines(&self, packed: bool) -> [u32; 2] {
        if packed {
            [self.line::<u32>(0), self.line::<u32>(1)]
        } else {
            [self.line::<f32>(0), self.line::<f32>(1)]
        }
    }

    /// A's and B's widths ([`Args::line`]) for a rung whose units each compute `tn` columns
    /// of C: B's narrowed to 1 where it does not divide them.
    pub(crate) fn unit_lines<I: GemmInput>(&self, tn: u32) -> (u32, u32) {
        let (line_a, line_b) = (self.line::<I>(0), self.line::<I>(1));
        (line_a, if tn.is_multiple_of(line_b) { line_b } else { 1 })
    }

    /// The widest power of two up to `widest` elements that operand `which` (0: A, 1: B) can be
    /// read in as vectors along the axis it is contiguous on (a row-major operand along its
    /// rows, a column-major one down its columns): offset, the other strides and the extent
    /// along that axis (K's within this slab) all multiples of it, so that every vector lies
    /// wholly inside the operand or wholly outside, and a tile starting at a multiple of it
    /// along that axis reads whole vectors. 1 for a strided operand or packed bf16.
    pub(crate) fn staging_line<I: GemmInput>(&self, which: usize, widest: u32) -> u32 {
        let d = &self.views[which];
        let by_cols = match d.layout() {
            crate::problem::Layout::RowMajor => false,
            crate::problem::Layout::ColMajor => true,
            crate::problem::Layout::Strided => return 1,
        };
        if I::PACKED_BF16 {
            return 1;
        }
        // A's rows run along K, B's along N; their columns along M and K.
        let (begin, end) = match (which, by_cols) {
            (0, false) | (1, true) => self.k_range,
            (0, true) => (0, self.m),
            _ => (0, self.n),
        };
        let other = if by_cols { d.col_stride } else { d.row_stride };
        let mut line = if widest > 1 { 1 << widest.ilog2() } else { 1 };
        while line > 1
            && ![
                d.offset,
                other,
                d.batch_stride,
                begin as usize,
                end as usize,
            ]
            .iter()
            .all(|x| x.is_multiple_of(line as usize))
        {
            line /= 2;
        }
        line
    }

    /// The shared arguments, as the kernel takes them.
    pub(crate) fn gemm<A: Float + CubeElement + num_traits::NumCast, R: Runtime>(
        &self,
    ) -> GemmArgsLaunch<A, R> {
        let view = |d: &MatrixDesc| {
            ViewLaunch::new(
                d.offset as u32,
                d.row_stride as u32,
                d.col_stride as u32,
                d.batch_stride as u32,
            )
        };
        let [va, vb, vc] = &self.views;
        GemmArgsLaunch::new(
            view(va),
            view(vb),
            view(vc),
            DimsLaunch::new(
                self.m,
                self.n,
                self.k_range.0,
                self.k_range.1,
                self.batch_begin,
            ),
            scalar::<A>(self.alpha),
            scalar::<A>(self.beta),
        )
    }
}

/// `x` (finite, already rounded to the accumulator by the problem) as the kernel's scalar type.
pub(crate) fn scalar<A: num_traits::NumCast>(x: f64) -> A {
    num_traits::NumCast::from(x).expect("finite scalars convert to the accumulator's type")
}

/// The compilation arguments of the shared arguments, for building a kernel's IR without a
/// device (`emit`, the compile check).
pub(crate) fn gemm_compilation<A: Float + CubeElement>() -> GemmArgsCompilationArg<A> {
    let view = || ViewCompilationArg {
        offset: (),
        row_stride: (),
        col_stride: (),
        batch_stride: (),
    };
    GemmArgsCompilationArg {
        va: view(),
        vb: view(),
        vc: view(),
        dims: DimsCompilationArg {
            m: (),
            n: (),
            k_begin: (),
            k_end: (),
            batch_begin: (),
        },
        alpha: (),
        beta: (),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{MatrixDesc, Shape};

    #[test]
    fn staging_lines_keep_every_vector_inside_or_outside_the_operand() {
        let p = Shape::new(64, 48, 40).problem().unwrap();
        let args = Args::new(&p);
        // Row-major A along K (48), B along N (40); 8 is the widest asked.
        assert_eq!(args.staging_line::<f32>(0, 8), 8);
        assert_eq!(args.staging_line::<f32>(1, 8), 8);
        assert_eq!(
            args.staging_line::<f32>(1, 16),
            8,
            "40 is not a multiple of 16"
        );
        assert_eq!(
            args.staging_line::<f32>(0, 6),
            4,
            "a power of two at most 6"
        );
        assert_eq!(args.staging_line::<u32>(0, 8), 1, "packed bf16");
        // A column-major runs along M (64); a padded stride of 66 allows 2.
        let mut a = MatrixDesc::row_major(48, 64);
        std::mem::swap(&mut a.rows, &mut a.cols);
        std::mem::swap(&mut a.row_stride, &mut a.col_stride);
        let mut args = Args::new(&p);
        args.views[0] = a;
        assert_eq!(args.staging_line::<f32>(0, 8), 8);
        args.views[0].col_stride = 66;
        assert_eq!(args.staging_line::<f32>(0, 8), 2);
        // An offset of 4, a slab of K from 20, a K of 45.
        let mut args = Args::new(&p);
        args.views[0].offset = 4;
        assert_eq!(args.staging_line::<f32>(0, 8), 4);
        args.views[0].offset = 0;
        args.k_range = (20, 48);
        assert_eq!(args.staging_line::<f32>(0, 8), 4);
        args.k_range = (0, 45);
        assert_eq!(args.staging_line::<f32>(0, 8), 1);
        // Strided: no axis to run along.
        args.views[1].col_stride = 2;
        assert_eq!(args.staging_line::<f32>(1, 8), 1);
    }
}
