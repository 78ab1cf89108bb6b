//! Device arrays: matrices that stay on a GPU between products, as numba's example keeps its
//! operands there (`cuda.to_device`, `cuda.device_array`, `copy_to_host`).
//!
//! A [`DeviceArray`] is a view (a batch of matrices: shape, strides, offset) of a buffer on one
//! device. [`Gemm::to_device`] uploads an ndarray view, [`Gemm::device_empty`] makes an
//! uninitialised one, [`Gemm::write_device`] and [`Gemm::product_device`] compute on them with
//! no copy to or from the host, and [`DeviceArray::to_host`] brings one back. Views share
//! their buffer, which lives while any view does: [`DeviceArray::t`] and
//! [`DeviceArray::view`] cost nothing. Like CuPy's arrays, a device array is a handle: a product
//! written into one is seen by every view of its buffer. Products are enqueued and return at
//! once; reading back waits for them.
//!
//! ```
//! use ndarray::Array2;
//! use tilemm::{Backend, Gemm};
//!
//! let gemm = Gemm::new().device(Backend::Wgpu, None);
//! let a = Array2::from_shape_fn((64, 48), |(i, j)| ((i + j) % 5) as f32);
//! let b = Array2::from_shape_fn((48, 30), |(i, j)| ((i * j) % 3) as f32);
//! let (da, db) = (gemm.to_device_2d(a.view())?, gemm.to_device_2d(b.view())?);
//! let dc = gemm.product_device(&da, &db)?; // on the device: no byte moved
//! let dd = gemm.product_device(&dc.t(), &dc)?; // (A·B)ᵀ·(A·B), still there
//! let c = a.dot(&b);
//! assert_eq!(dc.to_host_2d()?, c);
//! assert_eq!(dd.to_host_2d()?, c.t().dot(&c));
//! # Ok::<(), tilemm::Error>(())
//! ```

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{Array2, Array3, ArrayView2, ArrayView3, ArrayViewMut3, Axis, ShapeBuilder};

use crate::array::{dense, strides_of, Gemm, GemmRun, Moved, Operand, Reader, Route, Target};
use crate::dispatch::{self, DeviceSpec, Settings};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::problem::{MatrixDesc, Precision, Problem};
use crate::runtime::backend::{install_hint, Backend, GpuSession};
use crate::runtime::gpu::DeviceMatrix;
use crate::tune::KernelChoice;
use crate::types::element::Element;

/// A batch of matrices on a GPU: a strided view of a device buffer ([module](self)).
pub struct DeviceArray<'s, T> {
    buffer: Arc<Buffer<'s>>,
    batch: usize,
    /// Where each element is, from the buffer's first.
    desc: MatrixDesc,
    element: PhantomData<T>,
}

/// A device buffer and the session that holds it.
struct Buffer<'s> {
    gpu: &'s GpuSession,
    matrix: DeviceMatrix,
}

impl<T> Clone for DeviceArray<'_, T> {
    /// Another view of the same elements (no copy).
    fn clone(&self) -> Self {
        DeviceArray {
            buffer: Arc::clone(&self.buffer),
            batch: self.batch,
            desc: self.desc,
            element: PhantomData,
        }
    }
}

impl<T: Element> std::fmt::Debug for DeviceArray<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceArray({:?} {}, {:?} on {})",
            self.dim(),
            self.buffer.matrix.dtype(),
            self.desc,
            self.buffer.gpu.info().name
        )
    }
}

/// Elements from the first of `batch` matrices of `desc` to one past the last (0 when empty).
fn extent(batch: usize, desc: &MatrixDesc) -> Option<usize> {
    if batch == 0 || desc.rows == 0 || desc.cols == 0 {
        return Some(0);
    }
    Some(desc.span(batch)? - desc.offset)
}

impl<'s, T: Element> DeviceArray<'s, T> {
    /// (batch, rows, columns).
    pub fn dim(&self) -> (usize, usize, usize) {
        (self.batch, self.desc.rows, self.desc.cols)
    }

    /// Where its elements are in its buffer (offset and strides in elements).
    pub fn desc(&self) -> MatrixDesc {
        self.desc
    }

    /// The device it lives on.
    pub fn session(&self) -> &'s GpuSession {
        self.buffer.gpu
    }

    /// Elements its buffer holds (every view of it included).
    pub fn buffer_len(&self) -> usize {
        self.buffer.matrix.len()
    }

    /// Each matrix transposed: a view of the same elements.
    pub fn t(&self) -> Self {
        DeviceArray {
            desc: self.desc.t(),
            ..self.clone()
        }
    }

    /// Another view of its buffer: `batch` matrices placed as `desc` says (from the buffer's
    /// first element), every element inside the buffer. numpy's `as_strided`, checked.
    pub fn view(&self, batch: usize, desc: MatrixDesc) -> Result<Self> {
        let len = self.buffer_len();
        let fits = extent(batch, &desc)
            .and_then(|e| e.checked_add(desc.offset))
            .is_some_and(|end| end <= len || extent(batch, &desc) == Some(0));
        if !fits {
            return Err(Error::InvalidView(format!(
                "a view of {batch} {}×{} matrices at offset {} with strides (batch {}, row {}, \
                 column {}) reaches past its device buffer of {len} elements",
                desc.rows,
                desc.cols,
                desc.offset,
                desc.batch_stride,
                desc.row_stride,
                desc.col_stride
            )));
        }
        Ok(DeviceArray {
            batch,
            desc,
            ..self.clone()
        })
    }

    /// Whether it and `other` may share an element: the same buffer, overlapping ranges.
    pub fn may_share_memory<U>(&self, other: &DeviceArray<'_, U>) -> bool {
        let same = std::ptr::eq(
            Arc::as_ptr(&self.buffer) as *const (),
            Arc::as_ptr(&other.buffer) as *const (),
        );
        let range = |batch, desc: &MatrixDesc| {
            let len = extent(batch, desc).unwrap_or(usize::MAX);
            desc.offset..desc.offset.saturating_add(len)
        };
        let (a, b) = (
            range(self.batch, &self.desc),
            range(other.batch, &other.desc),
        );
        same && !a.is_empty() && !b.is_empty() && a.start < b.end && b.start < a.end
    }

    /// Back on the host, as a new row-major array. Waits for the products that write it; only
    /// the span of its elements crosses the link.
    pub fn to_host(&self) -> Result<Array3<T>> {
        let (batch, rows, cols) = self.dim();
        let mut out = crate::host::with_capacity(batch * rows * cols, "a device array's copy")?;
        out.resize(batch * rows * cols, T::from_f64(0.0));
        let mut out = Array3::from_shape_vec(self.dim(), out).expect("batch·rows·cols elements");
        self.copy_to(out.view_mut())?;
        Ok(out)
    }

    /// [`DeviceArray::to_host`] for a batch of one matrix.
    pub fn to_host_2d(&self) -> Result<Array2<T>> {
        if self.batch != 1 {
            return Err(Error::InvalidView(format!(
                "to_host_2d: the device array holds a batch of {} matrices",
                self.batch
            )));
        }
        Ok(self.to_host()?.index_axis_move(Axis(0), 0))
    }

    /// Copies its elements into `out` (of its shape, any strides): numba's
    /// `copy_to_host(ary)`.
    pub fn copy_to(&self, out: ArrayViewMut3<T>) -> Result<()> {
        if out.dim() != self.dim() {
            return Err(Error::InvalidView(format!(
                "copy_to_host: the device array is {:?} (batch, rows, columns) but the host \
                 array is {:?}",
                self.dim(),
                out.dim()
            )));
        }
        let Some(len) = extent(self.batch, &self.desc).filter(|&len| len > 0) else {
            return Ok(());
        };
        let gpu = self.buffer.gpu;
        let data = gpu.download_range(
            &self.buffer.matrix,
            self.desc.offset..self.desc.offset + len,
        )?;
        let elements = T::lent(data.lend()).expect("a device array holds its own type");
        let relative = MatrixDesc {
            offset: 0,
            ..self.desc
        };
        let view = ArrayView3::from_shape(self.dim().strides(strides_of(&relative)), elements)
            .expect("the span holds every element");
        crate::host::copy_into(out, view)
    }

    /// The device address of element (0, 0) of its first matrix, once every queued product
    /// has finished: what the CUDA Array Interface and DLPack hand to another library (CUDA
    /// and HIP). Valid while this array (or another view of its buffer) lives.
    pub fn device_pointer(&self) -> Result<u64> {
        let base = self.buffer.gpu.device_pointer(&self.buffer.matrix)?;
        Ok(base + (self.desc.offset * T::DTYPE.size_bytes()) as u64)
    }

    /// A new device array of `len` elements (one row) copied from another library's device
    /// memory at `address` on `gpu`, ready once `stream` (that library's, where it names one)
    /// has finished: one copy on the device (CUDA and HIP).
    ///
    /// # Safety
    /// `address` must point at `len` readable elements of `T` on `gpu`'s device.
    pub unsafe fn from_device_pointer(
        gpu: &'s GpuSession,
        address: u64,
        len: usize,
        stream: Option<u64>,
    ) -> Result<Self> {
        let matrix = gpu.copy_from_pointer(address, T::DTYPE, len, stream)?;
        Ok(Self::whole(gpu, matrix))
    }

    /// The whole of a new buffer, as one row.
    fn whole(gpu: &'s GpuSession, matrix: DeviceMatrix) -> Self {
        let len = matrix.len();
        DeviceArray {
            buffer: Arc::new(Buffer { gpu, matrix }),
            batch: 1,
            desc: MatrixDesc::row_major(1, len).broadcast(),
            element: PhantomData,
        }
    }
}

impl<'s> Gemm<'s> {
    /// The GPU device arrays of this route live on: the session or device named, else
    /// `TILEMM_DEVICE`'s, else the best GPU found, CPU emulations such as lavapipe included
    /// (device arrays need a GPU; the CPU route computes on host arrays).
    pub fn device_session(&self) -> Result<&'s GpuSession> {
        let spec = match self.target {
            Target::Session(gpu) => {
                gpu.check_process()?;
                return Ok(gpu);
            }
            Target::Named(Backend::Cpu, _) => DeviceSpec::Cpu,
            Target::Named(backend, index) => DeviceSpec::Gpu { backend, index },
            Target::Auto => Settings::global().usable()?.device,
        };
        match dispatch::sessions::session_for(spec)? {
            Ok(gpu) => {
                gpu.check_process()?;
                Ok(gpu)
            }
            Err(why) => Err(Error::NoDevice(format!(
                "device arrays live on a GPU, and there is none: {why} ({})",
                install_hint()
            ))),
        }
    }

    /// `a` copied to the device ([`Gemm::device_session`]), in its own memory order where it
    /// has one (C or Fortran, per matrix), else row-major.
    pub fn to_device<T: Element>(&self, a: ArrayView3<T>) -> Result<DeviceArray<'s, T>> {
        let gpu = self.device_session()?;
        // Checked before the upload: a device without the type would pack or widen it.
        gpu.holds(T::DTYPE)?;
        let batch = a.dim().0;
        if a.is_empty() {
            return DeviceArray::whole(gpu, gpu.empty(T::DTYPE, 0)?).view(batch, dense(&a));
        }
        let operand = Operand::new(a, Reader::Dense(dense(&a)), "a device array's upload")?;
        let matrix = gpu.upload_lent(operand.lend())?;
        let whole = DeviceArray::whole(gpu, matrix);
        let desc = operand.desc;
        whole.view(batch, desc)
    }

    /// [`Gemm::to_device`] for one matrix.
    pub fn to_device_2d<T: Element>(&self, a: ArrayView2<T>) -> Result<DeviceArray<'s, T>> {
        self.to_device(a.insert_axis(Axis(0)))
    }

    /// A new row-major device array of `dim` (batch, rows, columns), uninitialised (numba's
    /// `device_array`): write it with a product before reading it.
    pub fn device_empty<T: Element>(
        &self,
        (batch, rows, cols): (usize, usize, usize),
    ) -> Result<DeviceArray<'s, T>> {
        let gpu = self.device_session()?;
        let len = batch
            .checked_mul(rows)
            .and_then(|l| l.checked_mul(cols))
            .ok_or_else(|| Error::TooLarge {
                m: rows,
                k: 0,
                n: cols,
                why: format!("a device array of {batch}×{rows}×{cols} elements"),
            })?;
        let whole = DeviceArray::whole(gpu, gpu.empty(T::DTYPE, len)?);
        whole.view(batch, MatrixDesc::row_major(rows, cols))
    }

    /// α·A·B as a new row-major device array, computed where A and B live.
    pub fn product_device<T: Element>(
        &self,
        a: &DeviceArray<'s, T>,
        b: &DeviceArray<'s, T>,
    ) -> Result<DeviceArray<'s, T>> {
        let batch = a.batch.max(b.batch);
        let gemm = Gemm {
            target: Target::Session(a.session()),
            beta: 0.0,
            ..*self
        };
        let c = gemm.device_empty((batch, a.desc.rows, b.desc.cols))?;
        gemm.write_device(a, b, &c)?;
        Ok(c)
    }

    /// C = α·A·B + β·C on device arrays of one device, C any view of inputs' type or, from
    /// f16 or bf16, of f32 (A or B with a batch of 1 serves every entry of C's batch). C may
    /// share memory with A or B: the product is then summed apart before C is written. No
    /// byte crosses the link (a K of 0 uploads two small zero operands). The product is
    /// enqueued: reading C back waits for it.
    pub fn write_device<I: Element, O: Element>(
        &self,
        a: &DeviceArray<'s, I>,
        b: &DeviceArray<'s, I>,
        c: &DeviceArray<'s, O>,
    ) -> Result<GemmRun> {
        let start = Instant::now();
        let gpu = a.session();
        let named = match self.target {
            Target::Auto => None,
            _ => Some(self.device_session()?),
        };
        for (what, other) in [("B", b.session()), ("C", c.session())]
            .into_iter()
            .chain(named.map(|g| ("the device named", g)))
        {
            if !std::ptr::eq(gpu, other) {
                return Err(Error::DeviceMismatch(format!(
                    "A is on {} but {what} is on {}: device arrays of a product must share \
                     one device (copy one with to_host and to_device)",
                    describe(gpu),
                    describe(other)
                )));
            }
        }
        gpu.check_process()?;
        let precision = Precision::new(I::DTYPE, O::DTYPE)?;
        let (batch, m, n) = c.dim();
        let k = a.desc.cols;
        for (name, view_batch) in [("A", a.batch), ("B", b.batch)] {
            if view_batch != batch && view_batch != 1 {
                return Err(Error::InvalidView(format!(
                    "{name} has a batch of {view_batch} but C has {batch}: give {batch}, or 1 \
                     to use one matrix for every entry"
                )));
            }
        }
        if a.desc.rows != m || b.desc.cols != n || b.desc.rows != k {
            return Err(Error::InvalidView(format!(
                "A is {}×{}, B is {}×{} and C is {m}×{n}: A must be m×k, B k×n, C m×n",
                a.desc.rows, k, b.desc.rows, b.desc.cols
            )));
        }
        let mut done = GemmRun {
            route: Route::Gpu {
                backend: gpu.backend(),
                device: format!("{} ({})", gpu.info().name, gpu.info().driver),
            },
            plan: None,
            tuning: None,
            schedule: None,
            kernel: None,
            time: std::time::Duration::ZERO,
            moved: Moved::default(),
        };
        if batch == 0 || m == 0 || n == 0 {
            return Ok(done);
        }
        // A K of 0 is C = β·C: a product of zeros with a K of 1, which the kernels scale C by.
        let zeros;
        let (a, b) = if k == 0 {
            let gemm = Gemm {
                target: Target::Session(gpu),
                ..*self
            };
            let zero = |dim| Array3::from_elem(dim, I::from_f64(0.0));
            zeros = (
                gemm.to_device(zero((1, m, 1)).view())?,
                gemm.to_device(zero((1, 1, n)).view())?,
            );
            done.moved.to_device = ((m + n) * I::DTYPE.size_bytes()) as u64;
            (&zeros.0, &zeros.1)
        } else {
            (a, b)
        };
        let broadcast = |x: &DeviceArray<I>| {
            if x.batch == 1 {
                x.desc.broadcast()
            } else {
                x.desc
            }
        };
        let problem = Problem::general(
            (m, k.max(1), n, batch),
            broadcast(a),
            broadcast(b),
            c.desc,
            (if k == 0 { 0.0 } else { self.alpha }, self.beta),
            precision,
        )?;
        let plan = match self.kernel {
            KernelChoice::Fixed(config) => Plan::new(config),
            KernelChoice::Auto => {
                let budget = self.budget.unwrap_or(Settings::global().tune_budget);
                let report = dispatch::choose::kernel(gpu, &problem, budget)?;
                let plan = report.chosen;
                done.tuning = Some(report);
                plan
            }
        };
        let (ma, mb, mc) = (&a.buffer.matrix, &b.buffer.matrix, &c.buffer.matrix);
        if c.may_share_memory(a) || c.may_share_memory(b) {
            gpu.enqueue_apart(&problem, &plan, ma, mb, mc)?;
        } else {
            gpu.enqueue(&problem, &plan, ma, mb, mc)?;
        }
        done.plan = Some(plan);
        done.time = start.elapsed();
        Ok(done)
    }
}

/// A session in an error message.
fn describe(gpu: &GpuSession) -> String {
    format!(
        "{} {} ({})",
        gpu.backend(),
        gpu.info().index,
        gpu.info().name
    )
}
