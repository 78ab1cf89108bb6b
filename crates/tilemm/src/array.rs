//! The front door: [`matmul`] and [`Gemm`], C = α·A·B + β·C over `ndarray` views of f16, bf16,
//! f32 or f64, on the fastest route this machine has, with the kernel the tuner picks.
//!
//! 2-D views are one product; 3-D views a batch along axis 0 (a batch of 1 broadcast over the
//! others), with any strides. Operands are read where they lie and C is written in place: the
//! CPU route calls the `gemm` crate on the views themselves (any non-negative strides, zero
//! included); a GPU uploads a view with a unit stride and a compact span straight from the
//! caller's memory, and C comes back from the device's bytes into the view. A view in C or
//! Fortran order (a transpose such as `a.t()` included) reaches the kernels as a row- or
//! column-major description of the same elements, not a transposed copy. Views no route can
//! read as they are (negative strides; on a GPU, no unit stride or a sparse span) are copied
//! once into a dense buffer in their own orientation.
//!
//! The route, unless one is named: a GPU (CUDA, then HIP, then wgpu's best adapter) opened
//! once per process and shared by every thread; where the only adapter is a CPU emulation such
//! as lavapipe, the CPU path, which is several times faster there. The kernel, unless one is
//! named: `auto`, the tuner's verified choice for the device and shape class
//! ([`crate::tune`]), which costs a new class about a second and is the class's kernel for the
//! rest of the process (so a given product always gives the same bits).
//!
//! ```
//! use ndarray::{s, Array2};
//! use tilemm::{Backend, Gemm};
//!
//! let a = Array2::from_shape_fn((64, 48), |(i, j)| (i + j) as f32);
//! let b = Array2::from_shape_fn((64, 30), |(i, j)| i as f32 - j as f32);
//! // Aᵀ·B: the transpose is a view; every other column of B: a strided slice.
//! let c = tilemm::matmul(a.t(), b.slice(s![.., ..;2]))?;
//! assert_eq!(c.dim(), (48, 15));
//! // C = 0.5·Aᵀ·B + 2·C, written into a block of a larger array, on the wgpu device.
//! let mut big = Array2::<f32>::ones((80, 80));
//! let run = Gemm::new()
//!     .device(Backend::Wgpu, None)
//!     .alpha(0.5)
//!     .beta(2.0)
//!     .write(a.t(), b.view(), big.slice_mut(s![..48, 10..40]))?;
//! assert_eq!(big[[0, 0]], 1.0);
//! println!("{}", run.route);
//! # Ok::<(), tilemm::Error>(())
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use ndarray::{
    Array2, Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, ShapeBuilder,
};
use serde::Serialize;

use crate::dispatch::{self, DeviceSpec, Settings};
use crate::error::{Error, Result};
use crate::plan::panels::Schedule;
use crate::plan::Plan;
use crate::problem::{Layout, MatrixDesc, Precision, Problem};
use crate::runtime::backend::{Backend, GpuSession};
pub use crate::runtime::gpu::Moved;
use crate::tune::{KernelChoice, TuneBudget, TuneReport};
use crate::types::element::{Element, HostSlice};

/// C = A·B for two 2-D views of the same element type, as a new row-major array: the front
/// door, with [`Gemm::new`]'s defaults (the fastest route, the tuner's kernel).
///
/// ```
/// let a = ndarray::Array2::from_shape_fn((64, 48), |(i, j)| (i * j % 7) as f64);
/// let b = ndarray::Array2::from_shape_fn((48, 30), |(i, j)| (i + j) as f64);
/// assert_eq!(tilemm::matmul(a.view(), b.view())?, a.dot(&b));
/// # Ok::<(), tilemm::Error>(())
/// ```
pub fn matmul<T: Element>(a: ArrayView2<T>, b: ArrayView2<T>) -> Result<Array2<T>> {
    Gemm::new().product(a, b)
}

/// Registers host arrays with the device the default route computes on, for the guard's life:
/// the seed's `roc.register(A, B, C)`. Products on registered memory copy it by DMA at the
/// link's speed (CUDA, HIP); on wgpu and the CPU route nothing is registered, and
/// [`Registration::why_not`](crate::Registration::why_not) says why. See [`Gemm::register`].
///
/// ```
/// let a = ndarray::Array2::<f32>::ones((64, 64));
/// let b = ndarray::Array2::<f32>::ones((64, 64));
/// let mut c = ndarray::Array2::<f32>::zeros((64, 64));
/// fn bytes(x: &ndarray::Array2<f32>) -> &[u8] {
///     bytemuck::cast_slice(x.as_slice().unwrap())
/// }
/// let pinned = tilemm::register(&[bytes(&a), bytes(&b), bytes(&c)])?;
/// println!("registered: {} ({:?})", pinned.is_registered(), pinned.why_not());
/// tilemm::Gemm::new().write(a.view(), b.view(), c.view_mut())?;
/// drop(pinned);
/// # Ok::<(), tilemm::Error>(())
/// ```
pub fn register(arrays: &[&[u8]]) -> Result<crate::runtime::register::Registration> {
    Gemm::new().register(arrays)
}

/// Where a product is computed.
#[derive(Clone, Copy)]
pub(crate) enum Target<'s> {
    /// The fastest route found (see the module's documentation).
    Auto,
    /// This open session.
    Session(&'s GpuSession),
    /// This backend and device (its best with `None`), opened once per process; the CPU for
    /// [`Backend::Cpu`].
    Named(Backend, Option<usize>),
}

/// The route a product took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "route", rename_all = "lowercase")]
pub enum Route {
    /// The CPU path ([`crate::host::cpu`]), and why.
    Cpu {
        /// Why the CPU: named, no GPU, or only a CPU emulation of one.
        why: String,
    },
    /// A GPU device.
    Gpu {
        /// Its backend.
        backend: Backend,
        /// Its name and driver.
        device: String,
    },
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Cpu { why } => write!(
                f,
                "the CPU ({}, {} threads): {why}",
                crate::host::cpu::CPU_GEMM,
                crate::host::cpu::threads()
            ),
            Route::Gpu { backend, device } => write!(f, "{device} through {backend}"),
        }
    }
}

/// A route resolved to what computes.
enum Resolved<'s> {
    Cpu(String),
    Gpu(&'s GpuSession),
}

impl Resolved<'_> {
    fn route(&self) -> Route {
        match self {
            Resolved::Cpu(why) => Route::Cpu { why: why.clone() },
            Resolved::Gpu(gpu) => Route::Gpu {
                backend: gpu.backend(),
                device: format!("{} ({})", gpu.info().name, gpu.info().driver),
            },
        }
    }
}

/// C = α·A·B + β·C over ndarray views: choose the route, kernel, α and β, then
/// [`product`](Gemm::product) into a new array or [`write`](Gemm::write) into a view.
#[derive(Clone, Copy)]
pub struct Gemm<'s> {
    pub(crate) target: Target<'s>,
    pub(crate) kernel: KernelChoice,
    /// `None`: the settings' ([`Settings::tune_budget`]).
    pub(crate) budget: Option<TuneBudget>,
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
}

impl Default for Gemm<'static> {
    fn default() -> Self {
        Gemm::new()
    }
}

impl Gemm<'static> {
    /// C = A·B (α = 1, β = 0) on the fastest route found, with the tuner's kernel (`auto`).
    pub fn new() -> Self {
        Gemm {
            target: Target::Auto,
            kernel: KernelChoice::Auto,
            budget: None,
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

impl<'s> Gemm<'s> {
    /// On this open session.
    pub fn on<'t>(self, gpu: &'t GpuSession) -> Gemm<'t> {
        Gemm {
            target: Target::Session(gpu),
            kernel: self.kernel,
            budget: self.budget,
            alpha: self.alpha,
            beta: self.beta,
        }
    }

    /// On device `index` of `backend` (its best device with `None`), CPU adapters included,
    /// opened once per process; [`Backend::Cpu`] is the CPU path.
    pub fn device(self, backend: Backend, index: Option<usize>) -> Self {
        Gemm {
            target: Target::Named(backend, index),
            ..self
        }
    }

    /// The kernel: [`KernelChoice::Auto`] (the default) or a rung in a configuration.
    pub fn kernel(self, kernel: KernelChoice) -> Self {
        Gemm { kernel, ..self }
    }

    /// How long `auto` may tune a shape class not yet fully tuned, on each product
    /// ([`TuneBudget::Auto`] by default: about a second; a class partly tuned goes on in later
    /// processes until every candidate has been timed). The first choice of a class is final
    /// for the process: a given product always runs the same kernel there, and gives the same
    /// bits. A budget of 0 takes the cached choice as it is and, for a class
    /// never seen, times its best-ranked candidate that compiles (usually the first: one
    /// compilation), never a search; the process keeps that choice for the class.
    pub fn tune_budget(self, budget: TuneBudget) -> Self {
        Gemm {
            budget: Some(budget),
            ..self
        }
    }

    /// The kernel and configuration that run (short for [`kernel`](Gemm::kernel)).
    pub fn plan(self, plan: Plan) -> Self {
        self.kernel(KernelChoice::Fixed(plan.config))
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

    /// Registers host arrays (their bytes: `bytemuck::cast_slice` of A's, B's and C's
    /// elements) with the device this route computes on, for the guard's life: page-locked
    /// and mapped for its DMA engines (`cuMemHostRegister`, `hipHostRegister`), so that
    /// products on them upload and download at the link's speed. On wgpu and the CPU route
    /// nothing is registered (the CPU reads host memory where it lies; wgpu has no such
    /// thing), and the guard says why. The guard does not borrow the arrays: keep them alive
    /// while it lives.
    pub fn register(&self, arrays: &[&[u8]]) -> Result<crate::runtime::register::Registration> {
        match self.resolve()? {
            Resolved::Cpu(why) => Ok(crate::runtime::register::Registration::none(
                arrays,
                format!("the CPU route reads host memory where it lies ({why})"),
            )),
            Resolved::Gpu(gpu) => gpu.register(arrays),
        }
    }

    /// The route products take, opening the device if this process has not yet.
    pub fn route(&self) -> Result<Route> {
        Ok(self.resolve()?.route())
    }

    fn resolve(&self) -> Result<Resolved<'s>> {
        match self.target {
            Target::Session(gpu) => {
                gpu.check_process()?;
                Ok(Resolved::Gpu(gpu))
            }
            Target::Named(Backend::Cpu, Some(_)) => Err(Error::CpuDeviceIndex),
            Target::Named(Backend::Cpu, None) => Ok(Resolved::Cpu("named".into())),
            Target::Named(backend, index) => {
                match dispatch::sessions::session(Some(backend), index)? {
                    Ok(gpu) => {
                        gpu.check_process()?;
                        Ok(Resolved::Gpu(gpu))
                    }
                    // (open_device answers a named backend with a session or an error.)
                    Err(why) => Err(Error::NoDevice(why)),
                }
            }
            Target::Auto => match Settings::global().usable()?.device {
                DeviceSpec::Cpu => Ok(Resolved::Cpu(format!(
                    "named by {}",
                    dispatch::DEVICE_VARIABLE
                ))),
                DeviceSpec::Gpu { backend, index } => Gemm {
                    target: Target::Named(backend, index),
                    ..*self
                }
                .resolve(),
                DeviceSpec::Auto => self.best(),
            },
        }
    }

    /// The fastest route, as the module's documentation says.
    fn best(&self) -> Result<Resolved<'s>> {
        match dispatch::route::auto_gpu()? {
            Err(why) => Ok(Resolved::Cpu(why)),
            // A child forked after the parent opened the device: the CPU computes.
            Ok(gpu) => match gpu.check_process() {
                Ok(()) => Ok(Resolved::Gpu(gpu)),
                Err(e) => Ok(Resolved::Cpu(e.to_string())),
            },
        }
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
        let len = batch
            .checked_mul(m)
            .and_then(|l| l.checked_mul(n))
            .ok_or_else(|| Error::OutOfMemory {
                what: "C".into(),
                bytes: u64::MAX,
            })?;
        let mut c = crate::host::with_capacity(len, "C")?;
        c.resize(len, T::from_f64(0.0));
        let mut c = Array3::from_shape_vec((batch, m, n), c).expect("C has batch·m·n elements");
        Gemm { beta: 0.0, ..*self }.write_batched(a, b, c.view_mut())?;
        Ok(c)
    }

    /// C = α·A·B + β·C into `c`, any view of inputs' type or, from f16 or bf16, of f32.
    pub fn write<I: Element, O: Element>(
        &self,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
        c: ArrayViewMut2<O>,
    ) -> Result<GemmRun> {
        self.write_batched(
            a.insert_axis(Axis(0)),
            b.insert_axis(Axis(0)),
            c.insert_axis(Axis(0)),
        )
    }

    /// [`write`](Gemm::write) for each entry of the batch (axis 0; an A or B with a batch of
    /// 1 is used for every entry). Returns what ran, where, and how long it took.
    pub fn write_batched<I: Element, O: Element>(
        &self,
        a: ArrayView3<I>,
        b: ArrayView3<I>,
        c: ArrayViewMut3<O>,
    ) -> Result<GemmRun> {
        self.write_batched_until(a, b, c, &|| false)
    }

    /// [`write_batched`](Gemm::write_batched), stopped with [`Error::Interrupted`] once `stop`
    /// returns true: on the CPU route between pieces of the product (a slab of K over a panel
    /// of rows, about 2³¹ operations), on a GPU before its product starts (a launch, once
    /// started, runs to its end). `c` is then left as it was.
    pub fn write_batched_until<I: Element, O: Element>(
        &self,
        a: ArrayView3<I>,
        b: ArrayView3<I>,
        mut c: ArrayViewMut3<O>,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<GemmRun> {
        let start = Instant::now();
        let precision = Precision::new(I::DTYPE, O::DTYPE)?;
        let (batch, m, n) = c.dim();
        let k = a.dim().2;
        for (name, view_batch) in [("A", a.dim().0), ("B", b.dim().0)] {
            if view_batch != batch && view_batch != 1 {
                return Err(Error::InvalidView(format!(
                    "{name} has a batch of {view_batch} but C has {batch}: give {batch}, or 1 \
                     to use one matrix for every entry"
                )));
            }
        }
        if a.dim().1 != m || b.dim().2 != n || b.dim().1 != k {
            return Err(Error::InvalidView(format!(
                "A is {}×{}, B is {}×{} and C is {m}×{n}: A must be m×k, B k×n, C m×n",
                a.dim().1,
                a.dim().2,
                b.dim().1,
                b.dim().2
            )));
        }
        let dims = (m, k, n, batch);
        let scalars = (self.alpha, self.beta);
        // The CPU route reads A and B and writes C where they lie; so does its problem. Built
        // first: it validates the call before any device opens. (The operands themselves, and
        // any copy one needs, are made once the route is known.)
        let c_lent = described(&c.view());
        let c_desc = cpu_desc(&c.view());
        let lent_problem =
            Problem::general(dims, cpu_desc(&a), cpu_desc(&b), c_desc, scalars, precision)?;
        // numpy's stacked `x @ w` is one product of all the stack's rows, on every route: the
        // same elements, one launch of whole tiles on a GPU where entries of few rows would
        // fill a sliver of each, B packed once on the CPU (whose own rule says when).
        let folded = crate::host::cpu::batch_as_rows(&lent_problem);
        if let (Some((rows, rows_a, rows_c)), Some(_), Some(_)) = (folded, described(&a), c_lent) {
            let (ra, ca) = (rows_a.row_stride, rows_a.col_stride);
            let (rc, cc) = (rows_c.row_stride, rows_c.col_stride);
            // SAFETY: the same elements as `a` and `c` (described from their first ones,
            // non-negative strides), each entry's rows going on from the last's; C's are
            // distinct (validated above), and `c` stays borrowed while the new view lives.
            let (rows_a, rows_c) = unsafe {
                (
                    ArrayView3::from_shape_ptr((1, rows, k).strides((0, ra, ca)), a.as_ptr()),
                    ArrayViewMut3::from_shape_ptr(
                        (1, rows, n).strides((0, rc, cc)),
                        c.as_mut_ptr(),
                    ),
                )
            };
            // B is one matrix for every entry: its first (a broadcast view may repeat it).
            let b = b.slice_axis(Axis(0), (0..1).into());
            return self.write_batched_until(rows_a, b, rows_c, stop);
        }
        let mut problem = lent_problem;
        let mut resolved = self.resolve()?;
        // The fastest route falls back to the CPU where the GPU cannot compute the precision.
        // Auto as the caller or the settings asked: TILEMM_DEVICE=cuda names a device, and
        // a named device is not rerouted.
        let auto =
            matches!(self.target, Target::Auto) && Settings::global().device == DeviceSpec::Auto;
        if let (true, Resolved::Gpu(gpu)) = (auto, &resolved) {
            if let Err(e) = gpu.info().types.check(precision, &gpu.info().name) {
                resolved = Resolved::Cpu(e.to_string());
            }
        }
        // The fastest route offloads a product only where its bytes over the link and its
        // compute on the device are expected to finish before the CPU would (the class's first
        // call decides for the process, so that a given product always takes one route).
        if let (true, Resolved::Gpu(gpu)) = (auto, &resolved) {
            if let Some(why) = dispatch::route::stays_home(gpu, &lent_problem)? {
                resolved = Resolved::Cpu(why);
            }
        }
        // On a GPU, A and B are uploaded from where they lie when one of their strides is 1
        // and they span little more than their elements; C comes back dense.
        let mut gpu_operands = None;
        if let Resolved::Gpu(_) = resolved {
            let (ga, gb) = (
                Operand::new(a, Reader::Gpu, "A")?,
                Operand::new(b, Reader::Gpu, "B")?,
            );
            problem =
                Problem::general(dims, ga.desc, gb.desc, dense(&c.view()), scalars, precision)?;
            gpu_operands = Some((ga, gb));
        }
        // The kernel: named, or the tuner's verified choice (on the fastest route, the CPU when
        // no kernel can run the problem here).
        let mut tuning = None;
        let mut plan = None;
        if let Resolved::Gpu(gpu) = resolved {
            match self.kernel {
                KernelChoice::Fixed(config) => plan = Some(Plan::new(config)),
                KernelChoice::Auto => match dispatch::choose::kernel(
                    gpu,
                    &problem,
                    self.budget.unwrap_or(Settings::global().tune_budget),
                ) {
                    Ok(report) => {
                        plan = Some(report.chosen);
                        tuning = Some(report);
                    }
                    Err(Error::NoKernel(why)) if auto => resolved = Resolved::Cpu(why),
                    Err(e) => return Err(e),
                },
            }
        }
        let mut done = GemmRun {
            route: resolved.route(),
            plan,
            tuning,
            schedule: None,
            kernel: None,
            time: Duration::ZERO,
            moved: Moved::default(),
        };
        if stop() {
            return Err(Error::Interrupted);
        }
        match (resolved, plan, gpu_operands) {
            (Resolved::Gpu(gpu), Some(plan), Some((ga, gb))) => {
                let c0 = if problem.reads_c() {
                    // SAFETY: C₀ is read by the upload, which ends before `put` writes C.
                    let c0 = unsafe { c.raw_view().deref_into_view() };
                    Some(Operand::new(c0, Reader::Dense(problem.c), "C")?)
                } else {
                    None
                };
                let mut put = |result: HostSlice<'_>| {
                    let result = O::lent(result).expect("C comes back in its own type");
                    let view = ArrayView3::from_shape(
                        (batch, m, n).strides(strides_of(&problem.c)),
                        result,
                    )
                    .expect("C's description fits its buffer");
                    crate::host::copy_into(c.view_mut(), view)
                };
                let run = gpu.gemm_lent(
                    &problem,
                    &plan,
                    [ga.lend(), gb.lend()],
                    c0.as_ref().map(Operand::lend),
                    &mut put,
                )?;
                done.schedule = Some(run.schedule);
                done.kernel = Some(run.kernel);
                done.moved = run.moved;
            }
            _ => {
                let problem = lent_problem;
                let (lent_a, lent_b) = (
                    Operand::new(a, Reader::Cpu, "A")?,
                    Operand::new(b, Reader::Cpu, "B")?,
                );
                match c_lent {
                    // SAFETY: the views lend A, B and C (C mutably, so no one else reads or
                    // writes it meanwhile); the problem describes them from their first
                    // elements.
                    Some(_) => unsafe {
                        crate::host::cpu::gemm_in_place(
                            &problem,
                            lent_a.at,
                            lent_b.at,
                            c.as_mut_ptr(),
                            stop,
                        )?
                    },
                    // C's strides go backwards: computed in a dense copy, then put back.
                    None => {
                        let mut copy = Operand::new(c.view(), Reader::Dense(c_desc), "C")?
                            .copy
                            .expect("a dense copy of C");
                        // SAFETY: as above, C being the copy.
                        unsafe {
                            crate::host::cpu::gemm_in_place(
                                &problem,
                                lent_a.at,
                                lent_b.at,
                                copy.as_mut_ptr(),
                                stop,
                            )?
                        };
                        let view = ArrayView3::from_shape(
                            (batch, m, n).strides(strides_of(&c_desc)),
                            &copy[..],
                        )
                        .expect("C's description fits its buffer");
                        crate::host::copy_into(c.view_mut(), view)?;
                    }
                }
            }
        }
        done.time = start.elapsed();
        log::debug!(
            "tilemm: {m}×{k}×{n} (batch {batch}) {precision} on {}{}",
            done.route,
            done.plan
                .map_or_else(String::new, |p| format!(", kernel {p}"))
        );
        Ok(done)
    }
}

/// What a [`Gemm`] did: where it ran, with which kernel, and how long it took.
#[derive(Clone, Debug)]
pub struct GemmRun {
    /// Where it ran.
    pub route: Route,
    /// On a GPU, the kernel that ran.
    pub plan: Option<Plan>,
    /// With `auto` on a GPU, what the tuner did.
    pub tuning: Option<TuneReport>,
    /// On a GPU, how it ran: panels, launches, and how often C was rounded.
    pub schedule: Option<Schedule>,
    /// On a GPU, the kernels alone (device timestamps where it has them).
    pub kernel: Option<Duration>,
    /// The whole call, staging and tuning included.
    pub time: Duration,
    /// Bytes copied between the host and the device (none on the CPU route, none for device
    /// arrays' own elements).
    pub moved: Moved,
}

/// Who reads an [`Operand`], and so what it may be.
#[derive(Clone, Copy)]
pub(crate) enum Reader {
    /// The CPU route: any view with non-negative strides, as it is.
    Cpu,
    /// An upload: one unit stride, no zero stride within a matrix, and a span of little more
    /// than the elements (the span is what is copied).
    Gpu,
    /// Exactly this dense layout.
    Dense(MatrixDesc),
}

/// A matrix (or a batch) as a route reads it: the caller's view where it lies, or a dense copy
/// when the reader cannot take the view.
pub(crate) struct Operand<'v, T> {
    /// The copy, when one was made.
    copy: Option<Vec<T>>,
    /// Element (0, 0) of the first matrix.
    at: *const T,
    /// Elements from `at` to the last one read, inclusive.
    span: usize,
    /// Where the elements are, from `at`.
    pub(crate) desc: MatrixDesc,
    view: std::marker::PhantomData<&'v [T]>,
}

impl<'v, T: Element> Operand<'v, T> {
    pub(crate) fn new(view: ArrayView3<'v, T>, reader: Reader, what: &str) -> Result<Self> {
        let batch = view.dim().0;
        let lent = described(&view).filter(|desc| match reader {
            Reader::Cpu => true,
            Reader::Gpu => {
                let nonzero = (desc.rows <= 1 || desc.row_stride != 0)
                    && (desc.cols <= 1 || desc.col_stride != 0);
                let compact = desc
                    .span(batch)
                    .is_some_and(|span| span <= 2 * view.len() + 1024);
                desc.layout() != Layout::Strided && nonzero && compact
            }
            Reader::Dense(dense) => same_elements(desc, &dense, batch),
        });
        if let Some(desc) = lent {
            return Ok(Operand {
                copy: None,
                at: view.as_ptr(),
                span: desc.span(batch).expect("a view's span fits in memory"),
                desc,
                view: std::marker::PhantomData,
            });
        }
        let desc = match reader {
            Reader::Dense(desc) => desc,
            _ => dense(&view),
        };
        let len = desc.span(batch).expect("a dense copy's span fits");
        let mut copy = crate::host::with_capacity(len, what)?;
        copy.resize(len, T::from_f64(0.0));
        let into = ArrayViewMut3::from_shape(view.dim().strides(strides_of(&desc)), &mut copy[..])
            .expect("a dense layout fits its buffer");
        crate::host::copy_into(into, view)?;
        Ok(Operand {
            at: copy.as_ptr(),
            span: len,
            desc,
            copy: Some(copy),
            view: std::marker::PhantomData,
        })
    }

    /// The elements from the first to the last read, gaps between a view's elements included.
    pub(crate) fn lend(&self) -> HostSlice<'_> {
        // SAFETY: `at` and `span` cover the view's elements, all of them inside one
        // allocation (ndarray's views never leave theirs), which the view borrows for 'v; or
        // the copy this operand owns. The bytes between the elements are only read, copied
        // with the rest for an upload.
        T::lend(unsafe { std::slice::from_raw_parts(self.at, self.span) })
    }
}

/// `view`'s elements described from its first one, when its strides go forward (zero
/// included); strides of axes of length 1 are normalised, since no element is reached by them.
/// A batch of 1 is a broadcast.
fn described<T>(view: &ArrayView3<T>) -> Option<MatrixDesc> {
    let (batch, rows, cols) = view.dim();
    let [sb, sr, sc] = [0, 1, 2].map(|axis| view.strides()[axis]);
    let (sr, sc) = match (rows <= 1, cols <= 1) {
        (true, true) => (1, 1),
        (true, false) => (if sc == 1 { cols as isize } else { 1 }, sc),
        (false, true) => (sr, if sr == 1 { rows as isize } else { 1 }),
        (false, false) => (sr, sc),
    };
    let sb = if batch <= 1 { 0 } else { sb };
    if sb < 0 || sr < 0 || sc < 0 {
        return None;
    }
    Some(MatrixDesc {
        rows,
        cols,
        row_stride: sr as usize,
        col_stride: sc as usize,
        offset: 0,
        batch_stride: sb as usize,
    })
}

/// How the CPU route reads `view`: where it lies ([`described`]), or as its dense copy.
fn cpu_desc<T>(view: &ArrayView3<T>) -> MatrixDesc {
    described(view).unwrap_or_else(|| dense(view))
}

/// Whether `a` and `b` put every element of `batch` matrices at the same place.
fn same_elements(a: &MatrixDesc, b: &MatrixDesc, batch: usize) -> bool {
    (a.rows, a.cols, a.offset) == (b.rows, b.cols, b.offset)
        && (a.rows <= 1 || a.row_stride == b.row_stride)
        && (a.cols <= 1 || a.col_stride == b.col_stride)
        && (batch <= 1 || a.batch_stride == b.batch_stride)
}

/// A dense layout for `view`'s elements: in its memory order where it has one (per matrix),
/// else along its shorter stride; a batch of 1 is a broadcast.
pub(crate) fn dense<T>(view: &ArrayView3<T>) -> MatrixDesc {
    let (batch, rows, cols) = view.dim();
    let strides = view.strides();
    let flipped = view.view().permuted_axes([0, 2, 1]);
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
    if batch == 1 {
        desc.broadcast()
    } else {
        desc
    }
}

/// `desc`'s strides as ndarray takes them (batch, row, column).
pub(crate) fn strides_of(desc: &MatrixDesc) -> (usize, usize, usize) {
    (desc.batch_stride, desc.row_stride, desc.col_stride)
}
