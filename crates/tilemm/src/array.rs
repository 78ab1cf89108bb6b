//! GEMM over `ndarray` views: C = α·A·B + β·C for 2-D views (one product) and 3-D views
//! (a batch along axis 0, a batch of 1 broadcast over the others), with any strides.
//!
//! A view in C or Fortran order — a transpose such as `a.t()` included — is read in its memory
//! order and reaches the kernels as a row- or column-major description of the same elements,
//! not a transposed copy. Any other view (a slice with steps, negative strides) is copied into
//! a dense buffer in its own orientation first: ndarray cannot lend the memory between a
//! strided view's elements, which other views may own. Either way the elements are staged in
//! one host buffer for the upload.
//!
//! ```
//! use ndarray::{s, Array2};
//! use tilemm::{array::Gemm, Backend, GpuSession};
//!
//! let gpu = GpuSession::open(Backend::Wgpu, None)?;
//! let a = Array2::from_shape_fn((64, 48), |(i, j)| (i + j) as f32);
//! let b = Array2::from_shape_fn((64, 30), |(i, j)| i as f32 - j as f32);
//! // Aᵀ·B: the transpose is a view; every other column of B: a strided slice.
//! let c = Gemm::new(&gpu).product(a.t(), b.slice(s![.., ..;2]))?;
//! assert_eq!(c.dim(), (48, 15));
//! // C = 0.5·Aᵀ·B + 2·C, written into a block of a larger array.
//! let mut big = Array2::<f32>::ones((80, 80));
//! Gemm::new(&gpu).alpha(0.5).beta(2.0).write(a.t(), b.view(), big.slice_mut(s![..48, 10..40]))?;
//! assert_eq!(big[[0, 0]], 1.0);
//! # Ok::<(), tilemm::Error>(())
//! ```

use ndarray::{
    Array2, Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, ShapeBuilder,
};

use crate::backend::GpuSession;
use crate::element::{Element, HostData};
use crate::error::{Error, Result};
use crate::gpu::GpuRun;
use crate::ladder::Kernel;
use crate::plan::Plan;
use crate::problem::{MatrixDesc, Precision, Problem};

/// C = α·A·B + β·C on a GPU session, over ndarray views: set α, β and the plan, then
/// [`product`](Gemm::product) into a new array or [`write`](Gemm::write) into a view.
#[derive(Clone, Copy)]
pub struct Gemm<'s> {
    gpu: &'s GpuSession,
    plan: Plan,
    alpha: f64,
    beta: f64,
}

impl<'s> Gemm<'s> {
    /// C = A·B (α = 1, β = 0) with the tiled kernel on `gpu`.
    pub fn new(gpu: &'s GpuSession) -> Self {
        Gemm {
            gpu,
            plan: Plan::default_for(Kernel::Tiled),
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// α, the product's scale.
    pub fn alpha(self, alpha: f64) -> Self {
        Gemm { alpha, ..self }
    }

    /// β, C's scale ([`write`](Gemm::write) only: a new C has no prior value). β = 0 does not
    /// read C.
    pub fn beta(self, beta: f64) -> Self {
        Gemm { beta, ..self }
    }

    /// The kernel and configuration that run.
    pub fn plan(self, plan: Plan) -> Self {
        Gemm { plan, ..self }
    }

    /// α·A·B as a new row-major array, in the inputs' type.
    pub fn product<T: Element>(&self, a: ArrayView2<T>, b: ArrayView2<T>) -> Result<Array2<T>> {
        let c = self.product_batched(a.insert_axis(Axis(0)), b.insert_axis(Axis(0)))?;
        Ok(c.index_axis_move(Axis(0), 0))
    }

    /// α·A·B for each entry of the batch (axis 0; a batch of 1 is used for every entry) as a
    /// new row-major array, in the inputs' type.
    pub fn product_batched<T: Element>(
        &self,
        a: ArrayView3<T>,
        b: ArrayView3<T>,
    ) -> Result<Array3<T>> {
        let (batch, m, n) = (a.dim().0.max(b.dim().0), a.dim().1, b.dim().2);
        let mut c = Array3::from_elem((batch, m, n), T::from_f64(0.0));
        Gemm { beta: 0.0, ..*self }.write_batched(a, b, c.view_mut())?;
        Ok(c)
    }

    /// C = α·A·B + β·C into `c`, any view of inputs' type or, from f16 or bf16, of f32.
    pub fn write<I: Element, O: Element>(
        &self,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
        c: ArrayViewMut2<O>,
    ) -> Result<GpuRun> {
        self.write_batched(
            a.insert_axis(Axis(0)),
            b.insert_axis(Axis(0)),
            c.insert_axis(Axis(0)),
        )
    }

    /// [`write`](Gemm::write) for each entry of the batch (axis 0; an A or B with a batch of
    /// 1 is used for every entry). Returns the run: its times and schedule.
    pub fn write_batched<I: Element, O: Element>(
        &self,
        a: ArrayView3<I>,
        b: ArrayView3<I>,
        mut c: ArrayViewMut3<O>,
    ) -> Result<GpuRun> {
        let precision = Precision::new(I::DTYPE, O::DTYPE)?;
        let (batch, m, n) = c.dim();
        let k = a.dim().2;
        for (name, view_batch) in [("A", a.dim().0), ("B", b.dim().0)] {
            if view_batch != batch && view_batch != 1 {
                return Err(Error::View(format!(
                    "{name} has a batch of {view_batch} but C has {batch}: give {batch}, or 1 \
                     to use one matrix for every entry"
                )));
            }
        }
        if a.dim().1 != m || b.dim().2 != n || b.dim().1 != k {
            return Err(Error::View(format!(
                "A is {}×{}, B is {}×{} and C is {m}×{n}: A must be m×k, B k×n, C m×n",
                a.dim().1,
                a.dim().2,
                b.dim().1,
                b.dim().2
            )));
        }
        let (a_data, a_desc) = staged(a.view(), true);
        let (b_data, b_desc) = staged(b.view(), true);
        let (c0, c_desc) = staged(c.view(), self.beta != 0.0);
        let problem = Problem::general(
            (m, k, n, batch),
            a_desc,
            b_desc,
            c_desc,
            (self.alpha, self.beta),
            precision,
        )?;
        let (a_data, b_data) = (a_data.expect("staged"), b_data.expect("staged"));
        let c0 = c0.filter(|_| problem.reads_c());
        let run = self
            .gpu
            .gemm(&problem, &self.plan, &a_data, &b_data, c0.as_ref())?;
        let result = O::slice(&run.c).expect("C comes back in its own type");
        let strides = (c_desc.batch_stride, c_desc.row_stride, c_desc.col_stride);
        let view = ArrayView3::from_shape((batch, m, n).strides(strides), result)
            .expect("C's description fits its buffer");
        c.assign(&view);
        Ok(run)
    }
}

/// `view`'s description in one host buffer and, when `data`, the buffer: in memory order for a
/// view in C or Fortran order (per matrix), else copied densely in the view's orientation.
fn staged<T: Element>(view: ArrayView3<T>, data: bool) -> (Option<HostData>, MatrixDesc) {
    let (batch, rows, cols) = view.dim();
    let strides = view.strides();
    let flipped = view.permuted_axes([0, 2, 1]);
    // Memory order where the view has one; else its orientation, for a dense copy.
    let by_cols = if view.is_standard_layout() {
        false
    } else if flipped.is_standard_layout() {
        true
    } else {
        strides[1].unsigned_abs() < strides[2].unsigned_abs()
    };
    let desc = if by_cols {
        MatrixDesc::col_major(rows, cols)
    } else {
        MatrixDesc::row_major(rows, cols)
    };
    let desc = if batch == 1 { desc.broadcast() } else { desc };
    let data = data.then(|| {
        let ordered = if by_cols { flipped } else { view };
        let elements = match ordered.as_slice() {
            Some(slice) => slice.to_vec(),
            None => ordered.iter().copied().collect(),
        };
        HostData::from(elements)
    });
    (data, desc)
}
