//! A device session on a CubeCL runtime: matrices uploaded once and kept resident, products
//! launched on them any number of times, results downloaded when asked for.

use std::ops::Range;
use std::time::{Duration, Instant};

use cubecl::future::block_on;
use cubecl::ir::{ElemType, FloatKind, StorageType};
use cubecl::prelude::*;
use cubecl::profile::TimingMethod;
use cubecl::server::Handle;
use serde::Serialize;

use crate::device::{DeviceInfo, DeviceLimits, MatrixUnit, TypeSupport};
use crate::error::{one_line, Error, Result};
use crate::host;
use crate::kernels::{self, common::args::Args};
use crate::plan::panels::{self, Block, Schedule};
use crate::plan::{Launches, Plan};
use crate::problem::{DType, Layout, MatrixDesc, Problem};
use crate::runtime::link::Link;
use crate::runtime::transfer;
use crate::types::element::{HostData, HostSlice};

/// An open device on one CubeCL runtime (wgpu, CUDA, ...).
pub struct Session<R: Runtime> {
    client: ComputeClient<R>,
    info: DeviceInfo,
    /// The process that opened it: a child forked later cannot use it.
    opened_by: u32,
    /// The backend's own upload, where it has one with fewer copies than CubeCL's.
    direct: Option<DirectUpload<R>>,
    /// The link's speed, measured at its first use.
    link: std::sync::OnceLock<Link>,
}

/// Copies bytes into a new device buffer, or says it cannot (`None`: CubeCL's path then runs).
pub(crate) type DirectUpload<R> =
    Box<dyn Fn(&ComputeClient<R>, &[u8]) -> Option<Handle> + Send + Sync>;

/// How a matrix's elements are held on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// In its own type.
    Native,
    /// bf16, two to a 32-bit word (the device has no bf16 type); widened in the kernel.
    PackedBf16,
    /// bf16 held as f32 on the device (a C on a device without bf16), rounded on download.
    WidenedF32,
}

/// A matrix buffer resident on a device: upload once, launch on it many times.
#[derive(Clone, Debug)]
pub struct DeviceMatrix {
    /// CubeCL's handle to the buffer (for a peer that launches kernels of its own on it).
    pub handle: Handle,
    /// Elements of the host type it holds.
    len: usize,
    /// Elements as the kernels index the buffer (words when packed).
    words: usize,
    dtype: DType,
    stored: Stored,
}

impl DeviceMatrix {
    /// Elements of its host type.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its host element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// How the device holds it.
    pub fn stored(&self) -> Stored {
        self.stored
    }
}

/// Device memory held by a session ([`Session::memory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceMemory {
    /// Buffers alive.
    pub allocations: u64,
    /// Bytes in live buffers.
    pub in_use: u64,
    /// Bytes reserved in the runtime's pools (live buffers and room kept for reuse).
    pub reserved: u64,
}

/// One GPU product and where its time went.
#[derive(Clone, Debug)]
pub struct GpuRun {
    /// The result: C's buffer.
    pub c: HostData,
    /// Copying A, B (and C when β ≠ 0) to the device and allocating C, until the device is idle.
    pub upload: Duration,
    /// From the launch call until the kernel has finished (with JIT compilation, unless the
    /// kernel was compiled before: [`Session::compile`]).
    pub launch: Duration,
    /// The kernels alone, as the device's timestamps (or, without them, the host clock) saw
    /// them.
    pub kernel: Duration,
    /// Copying C back to the host.
    pub download: Duration,
    /// How it ran: panels, launches, and how often C was rounded (for
    /// [`Reference::check_passes`](crate::verify::Reference::check_passes)).
    pub schedule: Schedule,
    /// Bytes copied from the host to the device, and back.
    pub moved: Moved,
}

/// Bytes a product copied between the host and the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Moved {
    /// From the host to the device.
    pub to_device: u64,
    /// From the device to the host.
    pub from_device: u64,
}

/// Where a GPU product's time went, its result delivered elsewhere.
#[derive(Clone, Debug)]
pub struct Phases {
    /// Uploading A, B (and C₀).
    pub upload: Duration,
    /// Enqueuing the launches.
    pub launch: Duration,
    /// The kernels on the device.
    pub kernel: Duration,
    /// C back into the caller's memory.
    pub download: Duration,
    /// How it ran.
    pub schedule: Schedule,
    /// Bytes copied between the host and the device.
    pub moved: Moved,
}

impl Phases {
    /// The run, with its result.
    fn with(self, c: HostData) -> GpuRun {
        GpuRun {
            c,
            upload: self.upload,
            launch: self.launch,
            kernel: self.kernel,
            download: self.download,
            schedule: self.schedule,
            moved: self.moved,
        }
    }
}

/// `bytes` as elements of `dtype` (a device buffer's bytes are aligned for any element).
fn lent_bytes(bytes: &[u8], dtype: DType) -> HostSlice<'_> {
    match dtype {
        DType::F16 => HostSlice::F16(bytemuck::cast_slice(bytes)),
        DType::BF16 => HostSlice::BF16(bytemuck::cast_slice(bytes)),
        DType::F32 | DType::TF32 => HostSlice::F32(bytemuck::cast_slice(bytes)),
        DType::F64 => HostSlice::F64(bytemuck::cast_slice(bytes)),
    }
}

impl GpuRun {
    /// Upload, launch and download together.
    pub fn total(&self) -> Duration {
        self.upload + self.launch + self.download
    }
}

/// The element types `client` computes with. CubeCL's C++ runtimes do not register f64 though
/// CUDA and HIP compute it natively (`vendor_f64`).
pub(crate) fn type_support<R: Runtime>(client: &ComputeClient<R>, vendor_f64: bool) -> TypeSupport {
    let props = client.properties();
    let arithmetic = |kind: FloatKind| {
        use cubecl::ir::features::TypeUsage;
        let usage = props.type_usage(StorageType::Scalar(ElemType::Float(kind)));
        usage.contains(TypeUsage::Arithmetic) && usage.contains(TypeUsage::Buffer)
    };
    TypeSupport {
        f16: arithmetic(FloatKind::F16),
        bf16: arithmetic(FloatKind::BF16),
        f64: vendor_f64 || arithmetic(FloatKind::F64),
        // Known once the matrix units are (`Session::new`).
        tf32: false,
    }
}

/// The matrix-multiply configurations a runtime registers (cmma's or manual MMA's), in
/// tilemm's types (integer and 8-bit float units are left out: no rung uses them).
fn matrix_units(
    cmma: &std::collections::BTreeSet<cubecl::ir::features::MmaConfig>,
) -> Vec<MatrixUnit> {
    let dtype = |t: StorageType| match t {
        StorageType::Scalar(ElemType::Float(FloatKind::F16)) => Some(DType::F16),
        StorageType::Scalar(ElemType::Float(FloatKind::BF16)) => Some(DType::BF16),
        StorageType::Scalar(ElemType::Float(FloatKind::F32)) => Some(DType::F32),
        StorageType::Scalar(ElemType::Float(FloatKind::TF32)) => Some(DType::TF32),
        _ => None,
    };
    cmma.iter()
        .filter_map(|c| {
            Some(MatrixUnit {
                a: dtype(c.a_type)?,
                b: dtype(c.b_type)?,
                cd: dtype(c.cd_type)?,
                m: c.m,
                n: c.n,
                k: c.k,
            })
        })
        .collect()
}

impl<R: Runtime> Session<R> {
    pub(crate) fn new(
        mut client: ComputeClient<R>,
        mut info: DeviceInfo,
        vendor_f64: bool,
    ) -> Self {
        // Every thread's work on one stream, the opener's: CubeCL gives each calling thread a
        // stream and memory pools of its own otherwise, so a new thread (a Python worker, a
        // BLAS caller's) grew pools again, and its buffers were not reused by the others.
        // SAFETY: the session's work all goes through this client, in the order its callers
        // enqueue it; CubeCL's servers take work for a stream from any thread.
        unsafe { client.set_stream(cubecl::stream_id::StreamId::current()) };
        info.types = type_support(&client, vendor_f64);
        let props = client.properties();
        // A kernel laid out for planes of P units needs every plane to be P wide and plane
        // operations. CubeCL leaves plane operations out on CPU adapters; a backend that knows
        // the device has them (wgpu, from the adapter's subgroup feature) says so beforehand.
        let hw = &props.hardware;
        let ops = info.plane_size != 0
            || props
                .features
                .plane
                .contains(cubecl::ir::features::Plane::Ops);
        info.plane_size = if ops && hw.plane_size_min == hw.plane_size_max {
            hw.plane_size_max
        } else {
            0
        };
        let matmul = &props.features.matmul;
        info.matrix_units = matrix_units(&matmul.cmma);
        info.register_mma = matrix_units(&matmul.mma);
        info.copy_async = props.features.copy_async;
        info.types.tf32 = info
            .matrix_units
            .iter()
            .chain(&info.register_mma)
            .any(|u| u.a == DType::TF32);
        Session {
            client,
            info,
            opened_by: std::process::id(),
            direct: None,
            link: std::sync::OnceLock::new(),
        }
    }

    /// The session, uploading through `direct` where it can.
    pub(crate) fn with_direct_upload(self, direct: DirectUpload<R>) -> Self {
        Session {
            direct: Some(direct),
            ..self
        }
    }

    /// How fast this device's link moves bytes from and to pageable host memory, through the
    /// paths products take: measured at the first call (the best of three copies of 16 MiB,
    /// or half a binding where that is less, each way), then kept for the session.
    pub fn link(&self) -> Result<Link> {
        if let Some(link) = self.link.get() {
            return Ok(*link);
        }
        let words = ((16 << 20).min(self.info.limits.max_binding_bytes / 2) / 4).max(1024) as usize;
        let data: Vec<f32> = host::zeros(words, "the link's measurement")?;
        let (mut up, mut down) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            let start = Instant::now();
            let matrix = self.upload_lent(HostSlice::F32(&data))?;
            self.sync()?;
            up = up.min(start.elapsed());
            let start = Instant::now();
            self.download_with(&matrix, &mut |_| Ok(()))?;
            down = down.min(start.elapsed());
        }
        let bytes = (words * 4) as u64;
        let rate = |time: Duration| bytes as f64 / time.as_secs_f64().max(1e-9) / 1e9;
        let link = Link {
            bytes,
            upload_gb_s: rate(up),
            download_gb_s: rate(down),
        };
        Ok(*self.link.get_or_init(|| link))
    }

    /// A new device buffer holding `bytes`: the backend's direct upload where it has one,
    /// else CubeCL's (which copies the bytes twice on the host before its own upload).
    fn create(&self, bytes: &[u8]) -> Handle {
        self.direct
            .as_ref()
            .and_then(|direct| direct(&self.client, bytes))
            .unwrap_or_else(|| self.client.create_from_slice(bytes))
    }

    /// The session with its device's limits lowered to `limits` (never raised): to leave room
    /// for other work on the device, or to run products in panels on a small problem.
    pub fn limit(mut self, limits: DeviceLimits) -> Self {
        let l = &mut self.info.limits;
        l.max_binding_bytes = l.max_binding_bytes.min(limits.max_binding_bytes);
        l.max_buffer_bytes = l.max_buffer_bytes.min(limits.max_buffer_bytes);
        l.memory_bytes = match (l.memory_bytes, limits.memory_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self
    }

    /// Refuses a process forked after this session was opened ([`Error::Forked`]): its
    /// driver's threads stayed with the parent, so a launch or a wait would never return.
    pub fn check_process(&self) -> Result<()> {
        if std::process::id() == self.opened_by {
            Ok(())
        } else {
            Err(Error::Forked {
                device: self.info.name.clone(),
            })
        }
    }

    /// The device this session runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Whether kernel times come from device timestamps rather than the host clock.
    pub fn has_device_timestamps(&self) -> bool {
        self.client.properties().timing_method == TimingMethod::Device
    }

    /// Copies `data` to the device, as the kernels read inputs: bf16 packed two to a word where
    /// the device has no bf16 type (the bytes as they are, padded to a whole word).
    pub fn upload(&self, data: &HostData) -> Result<DeviceMatrix> {
        self.upload_lent(data.lend())
    }

    /// [`Session::upload`] from memory where it lies (the caller's own array).
    pub(crate) fn upload_lent(&self, data: HostSlice<'_>) -> Result<DeviceMatrix> {
        self.check_process()?;
        let dtype = data.dtype();
        let len = data.len();
        if dtype == DType::BF16 && !self.info.types.bf16 {
            let bytes = data.as_bytes();
            let handle = if bytes.len().is_multiple_of(4) {
                self.create(bytes)
            } else {
                let mut padded = host::with_capacity(bytes.len() + 2, "bf16 A or B padded")?;
                padded.extend_from_slice(bytes);
                padded.extend_from_slice(&[0, 0]);
                self.create(&padded)
            };
            return Ok(DeviceMatrix {
                handle,
                len,
                words: len.div_ceil(2),
                dtype,
                stored: Stored::PackedBf16,
            });
        }
        Ok(DeviceMatrix {
            handle: self.create(data.as_bytes()),
            len,
            words: len,
            dtype,
            stored: Stored::Native,
        })
    }

    /// C's buffer for `problem`: a copy of `c0` when given (β ≠ 0 reads it; with β = 0 it is
    /// what entries a kernel fails to write keep, e.g. NaN for a check), else uninitialised.
    /// bf16 is held as f32 where the device has no bf16 type.
    pub fn output(&self, problem: &Problem, c0: Option<&HostData>) -> Result<DeviceMatrix> {
        self.output_lent(problem, c0.map(HostData::lend))
    }

    /// [`Session::output`] with C₀ where it lies.
    pub(crate) fn output_lent(
        &self,
        problem: &Problem,
        c0: Option<HostSlice<'_>>,
    ) -> Result<DeviceMatrix> {
        let dtype = problem.precision.output;
        let len = problem.c_len();
        let widened = kernels::stored_output(problem.precision, !self.info.types.bf16) != dtype;
        let (stored, size) = if widened {
            (Stored::WidenedF32, 4)
        } else {
            (Stored::Native, dtype.size_bytes())
        };
        let handle = match c0 {
            Some(c0) => {
                problem.check_output(c0.len())?;
                if c0.dtype() != dtype {
                    return Err(Error::Precision(format!(
                        "C holds {} elements but the problem writes {dtype}",
                        c0.dtype()
                    )));
                }
                if widened {
                    let mut wide = host::with_capacity(c0.len(), "C widened to f32")?;
                    wide.extend((0..c0.len()).map(|i| c0.get(i) as f32));
                    self.create(f32::as_bytes(&wide))
                } else {
                    self.create(c0.as_bytes())
                }
            }
            _ => self.client.empty(len * size),
        };
        Ok(DeviceMatrix {
            handle,
            len,
            words: len,
            dtype,
            stored,
        })
    }

    /// Enqueues C = α·A·B + β·C with `plan` on resident matrices: one launch per slab of K and
    /// chunk of the batch. Returns at once; [`Session::download`] or a sync waits.
    pub fn enqueue(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.enqueue_with(problem, plan, [a, b, c], false)
    }

    /// [`Session::enqueue`] where C may share memory with A or B: the product is summed apart
    /// (in partials of the accumulator's type) and only then added into C, so no kernel reads
    /// an element of A or B that another has already overwritten.
    pub fn enqueue_apart(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.enqueue_with(problem, plan, [a, b, c], true)
    }

    fn enqueue_with(
        &self,
        problem: &Problem,
        plan: &Plan,
        [a, b, c]: [&DeviceMatrix; 3],
        apart: bool,
    ) -> Result<Launches> {
        self.check_process()?;
        check_resident(problem, [a, b, c])?;
        // Kernels see a row-major or strided C: a column-major one is computed as Cᵀ = BᵀAᵀ.
        let (canonical, swapped) = problem.canonical();
        let launches = plan.check(&canonical, &self.info)?;
        self.launch(plan, &canonical, swapped, &launches, [a, b, c], apart);
        Ok(launches)
    }

    /// A new device buffer of `len` elements of `dtype`, uninitialised, held in its own type
    /// (bf16 only where the device has it).
    pub fn empty(&self, dtype: DType, len: usize) -> Result<DeviceMatrix> {
        self.holds(dtype)?;
        let bytes = len.max(1).saturating_mul(dtype.size_bytes());
        self.check_buffer(bytes as u64)?;
        Ok(DeviceMatrix {
            handle: self.client.empty(bytes),
            len,
            words: len,
            dtype,
            stored: Stored::Native,
        })
    }

    /// Refuses a `dtype` this device cannot hold in its own type (and compute in).
    pub fn holds(&self, dtype: DType) -> Result<()> {
        self.check_process()?;
        self.info
            .types
            .check(crate::types::Precision::of(dtype), &self.info.name)?;
        if dtype == DType::BF16 && !self.info.types.bf16 {
            return Err(Error::TypeUnavailable {
                dtype,
                device: self.info.name.clone(),
                missing: "bf16 storage",
                remedy: "the cpu backend computes every dtype",
            });
        }
        Ok(())
    }

    /// Refuses a buffer of `bytes` past what one binding of this device can hold.
    pub(crate) fn check_buffer(&self, bytes: u64) -> Result<()> {
        let limit = self.info.limits.max_binding_bytes;
        if bytes > limit {
            return Err(Error::DeviceLimit {
                what: "a device array".into(),
                needed: format!("{bytes} bytes"),
                limit: format!("{limit} bytes in one buffer binding"),
                device: self.info.name.clone(),
            });
        }
        Ok(())
    }

    /// Elements `range` of a buffer held in its own type, back on the host: the range's bytes,
    /// from and to whole 4-byte words (wgpu's copy alignment), cross the link.
    pub fn download_range(&self, m: &DeviceMatrix, range: Range<usize>) -> Result<HostData> {
        self.check_process()?;
        if m.stored != Stored::Native || range.end > m.len || range.start > range.end {
            return Err(Error::InvalidView(format!(
                "elements {range:?} of a device buffer of {} ({:?})",
                m.len, m.stored
            )));
        }
        let size = m.dtype.size_bytes();
        let first = range.start * size / 4 * 4;
        let skip = range.start * size - first;
        let want = skip + range.len() * size;
        // A read runs to the end of the buffer's storage, whose size CubeCL does not say (it
        // may be padded past the bytes asked for): cut at the bytes the buffer was made for,
        // and read again to its end if that came back short.
        let made = (m.len * size) as u64;
        let last = ((range.end * size).div_ceil(4) * 4) as u64;
        let read = |handle: Handle| {
            self.client
                .read_one(handle)
                .map_err(|e| self.error(e.to_string()))
        };
        let from = m.handle.clone().offset_start(first as u64);
        let mut bytes = read(from.clone().offset_end(made.saturating_sub(last)))?;
        if bytes.len() < want {
            bytes = read(from)?;
        }
        let bytes = &bytes[skip..skip + range.len() * size];
        host::copy_of_slice(lent_bytes(bytes, m.dtype), "a device array's elements")
    }

    /// [`Session::enqueue`] for a product scheduled once ([`Session::schedule`]): what repeated
    /// timing launches. A product the schedule splits into panels for the device's memory is
    /// launched whole here, its matrices being resident already, after the check
    /// [`Session::enqueue`] makes.
    pub fn enqueue_scheduled(
        &self,
        schedule: &Schedule,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.check_process()?;
        check_resident(&schedule.problem, [a, b, c])?;
        let launches = if schedule.panels.is_whole() {
            schedule.launches
        } else {
            schedule.plan.check(&schedule.canonical, &self.info)?
        };
        self.launch(
            &schedule.plan,
            &schedule.canonical,
            schedule.swapped,
            &launches,
            [a, b, c],
            false,
        );
        Ok(launches)
    }

    /// Launches `plan` over `canonical` as `launches` say (checked by the caller), A and B
    /// swapped where `canonical` computes Cᵀ = Bᵀ·Aᵀ; `apart`: through partials, C written
    /// only once the whole product is summed.
    fn launch(
        &self,
        plan: &Plan,
        canonical: &Problem,
        swapped: bool,
        launches: &Launches,
        [a, b, c]: [&DeviceMatrix; 3],
        apart: bool,
    ) {
        let (a, b) = if swapped { (b, a) } else { (a, b) };
        let packed = a.stored == Stored::PackedBf16;
        let [gx, gy, gz] = launches.shape.grid;
        let handles = [
            (&a.handle, a.words),
            (&b.handle, b.words),
            (&c.handle, c.words),
        ];
        let batch = canonical.batch as u32;
        if apart || launches.uses_partials(canonical, packed) {
            self.enqueue_partials(plan, canonical, launches, handles, packed);
            return;
        }
        for slab in plan.k_slabs(canonical) {
            for chunk in 0..launches.batch_chunks {
                let begin = chunk * gz;
                let mut args = Args::new(canonical);
                args.k_range = (slab.begin, slab.end);
                args.batch_begin = begin;
                if slab.accumulate {
                    // Later slabs continue the sum the earlier ones left in C.
                    args.beta = 1.0;
                }
                let count = CubeCount::Static(gx, gy, gz.min(batch - begin));
                kernels::launch_one(
                    &self.client,
                    &plan.config,
                    canonical,
                    handles,
                    count,
                    &args,
                    packed,
                );
            }
        }
    }

    /// [`Session::enqueue`] for launches that keep partials ([`Launches::uses_partials`]):
    /// per chunk of the batch, each slab of K continues the sum in the partials (of the
    /// accumulator's type), then one reduction adds the slices into C with α and β, so C is
    /// rounded to its type once.
    fn enqueue_partials(
        &self,
        plan: &Plan,
        canonical: &Problem,
        launches: &Launches,
        [a, b, c]: [(&Handle, usize); 3],
        packed: bool,
    ) {
        let splits = launches.k_splits;
        let [gx, gy, gz] = launches.shape.grid;
        let per_chunk = gz / splits;
        let batch = canonical.batch as u32;
        let held = launches.partials_entries(canonical);
        let len = kernels::common::split::partials_len(canonical, splits, held);
        let elem = canonical.precision.accumulate.size_bytes();
        let partials = self.client.empty(len * elem);
        for chunk in 0..launches.batch_chunks {
            let begin = chunk * per_chunk;
            let entries = per_chunk.min(batch - begin);
            // Split-K's partials hold this chunk; the others the whole batch.
            let (partial, partials_begin) = if splits > 1 {
                let partial = kernels::common::split::partial_problem(canonical, splits, entries);
                (partial, 0)
            } else {
                (
                    kernels::common::split::partial_problem(canonical, 1, held),
                    begin,
                )
            };
            for slab in plan.k_slabs(canonical) {
                let mut args = Args::new(&partial);
                args.k_range = (slab.begin, slab.end);
                args.batch_begin = begin;
                if slab.accumulate {
                    // Later slabs continue the sum the earlier ones left in the partials.
                    args.beta = 1.0;
                }
                kernels::launch_one(
                    &self.client,
                    &plan.config,
                    &partial,
                    [a, b, (&partials, len)],
                    CubeCount::Static(gx, gy, entries * splits),
                    &args,
                    packed,
                );
            }
            kernels::common::split::reduce(
                &self.client,
                canonical,
                &partials,
                c,
                splits,
                entries,
                (begin, partials_begin),
                canonical.beta,
                packed,
            );
        }
    }

    /// C's buffer, back on the host (bf16 held as f32 rounded to bf16 on the way).
    pub fn download(&self, c: &DeviceMatrix) -> Result<HostData> {
        let mut out = None;
        self.download_with(c, &mut |data| {
            out = Some(host::copy_of_slice(data, "C from the device")?);
            Ok(())
        })?;
        Ok(out.expect("download_with delivers once"))
    }

    /// C's buffer as the device hands it back, lent to `deliver` (no copy of our own, except
    /// bf16 held as f32, rounded to bf16 on the way).
    pub(crate) fn download_with(
        &self,
        c: &DeviceMatrix,
        deliver: &mut dyn FnMut(HostSlice<'_>) -> Result<()>,
    ) -> Result<()> {
        self.check_process()?;
        let bytes = self
            .client
            .read_one(c.handle.clone())
            .map_err(|e| self.error(e.to_string()))?;
        match (c.stored, c.dtype) {
            (Stored::WidenedF32, _) => {
                let wide = f32::from_bytes(&bytes);
                let mut out = host::with_capacity(c.len, "C from the device")?;
                out.extend(wide[..c.len].iter().map(|&x| half::bf16::from_f32(x)));
                deliver(HostSlice::BF16(&out))
            }
            (_, dtype) => {
                let bytes = &bytes[..c.len * dtype.size_bytes()];
                deliver(lent_bytes(bytes, dtype))
            }
        }
    }

    /// The device memory CubeCL holds for this session: bytes in live buffers, and bytes
    /// reserved in its pools (kept for reuse after buffers are dropped).
    pub fn memory(&self) -> Result<DeviceMemory> {
        let usage = self
            .client
            .memory_usage()
            .map_err(|e| self.error(format!("{e:?}")))?;
        Ok(DeviceMemory {
            allocations: usage.number_allocs,
            in_use: usage.bytes_in_use,
            reserved: usage.bytes_reserved,
        })
    }

    /// Waits until the device is idle.
    pub fn sync(&self) -> Result<()> {
        block_on(self.client.sync()).map_err(|e| self.error(e.to_string()))
    }

    /// Runs `work` (enqueues) and returns the device's time for it: its timestamps where it has
    /// them, else the host clock around the work and a sync.
    pub fn profile<E: From<crate::Error> + Send>(
        &self,
        work: impl FnOnce() -> Result<(), E> + Send,
    ) -> Result<Duration, E> {
        let client = &self.client;
        let mut inner = Ok(());
        let (flushed, profile) = client
            .profile(
                || {
                    inner = work();
                    client.flush()
                },
                "tilemm::gemm",
            )
            .map_err(|e| E::from(self.error(format!("{e:?}"))))?;
        inner?;
        flushed.map_err(|e| E::from(self.error(e.to_string())))?;
        Ok(block_on(profile.resolve()).duration())
    }

    /// Compiles `plan`'s kernel for `problem`'s precision and layouts (as its schedule runs
    /// them) by launching it once on a tiny problem (2 rows; K and N of 1 to 4, so that vector
    /// widths, like layouts, are those of the run), and returns how long that took: JIT
    /// compilation (CubeCL's code generation and the driver's compiler; lavapipe compiles at
    /// the first dispatch) plus one tiny dispatch. Measured directly, not as the difference of
    /// two runs. Later launches of the plan, at any size and with any strides, reuse the kernel,
    /// unless a layout changes the rung's access pattern.
    pub fn compile(&self, plan: &Plan, problem: &Problem) -> Result<Duration> {
        self.compile_scheduled(&self.schedule(problem, plan)?)
    }

    /// [`Session::compile`] for a product scheduled once ([`Session::schedule`]).
    pub fn compile_scheduled(&self, schedule: &Schedule) -> Result<Duration> {
        let plan = &schedule.plan;
        let block = match schedule.panels.blocks(&schedule.canonical).next() {
            Some(first) if !schedule.panels.is_whole() => {
                schedule
                    .panels
                    .block_problem(&schedule.canonical, &first, true)?
            }
            _ => schedule.canonical,
        };
        // A tiny problem the kernel is specialised for as for the real one: the same layouts,
        // and the same vector widths (rungs that read A and B as vectors compile one kernel
        // per width pair; the width follows strides and extents).
        let packed = block.precision.input == DType::BF16 && !self.info.types.bf16;
        let lines = |p: &Problem| {
            let mut args = Args::new(p);
            args.k_range.1 = plan.k_slabs(p).next().map_or(0, |s| s.end);
            args.lines(packed)
        };
        let want = lines(&block);
        let like = |view: &MatrixDesc, rows, cols| {
            if view.layout() == Layout::ColMajor {
                MatrixDesc::col_major(rows, cols)
            } else {
                MatrixDesc::row_major(rows, cols)
            }
        };
        let tiny_of = |k: usize, n: usize| {
            Problem::general(
                (2, k, n, 1),
                like(&block.a, 2, k),
                like(&block.b, k, n),
                MatrixDesc::row_major(2, n),
                (1.0, 0.0),
                block.precision,
            )
        };
        let mut tiny = tiny_of(2, 2)?;
        'search: for k in [4, 2, 1] {
            for n in [4, 2, 1] {
                let candidate = tiny_of(k, n)?;
                if lines(&candidate) == want {
                    tiny = candidate;
                    break 'search;
                }
            }
        }
        plan.check(&tiny, &self.info)?;
        let start = Instant::now();
        let zeros = |len| HostData::from_f64(tiny.precision.input, std::iter::repeat_n(0.0, len));
        let a = self.upload(&zeros(tiny.a_len()))?;
        let b = self.upload(&zeros(tiny.b_len()))?;
        let c = self.output(&tiny, None)?;
        self.enqueue(&tiny, plan, &a, &b, &c)?;
        self.sync()?;
        Ok(start.elapsed())
    }

    /// How `problem` runs with `plan` here: its canonical form, its panels (when its
    /// operands exceed a binding or the device's memory), the launches, or why it cannot run.
    pub fn schedule(&self, problem: &Problem, plan: &Plan) -> Result<Schedule> {
        Schedule::new(problem, plan, &self.info)
    }

    /// C = α·A·B + β·C with `plan`: upload, launch and download, each timed. A product whose
    /// operands exceed a binding runs in panels ([`panels`]): each block is copied into
    /// buffers of its own, and the times add up over the blocks.
    pub fn gemm(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &HostData,
        b: &HostData,
        c0: Option<&HostData>,
    ) -> Result<GpuRun> {
        self.gemm_scheduled(&self.schedule(problem, plan)?, a, b, c0)
    }

    /// [`Session::gemm`] for a product scheduled once ([`Session::schedule`]): checked then,
    /// not again.
    pub fn gemm_scheduled(
        &self,
        schedule: &Schedule,
        a: &HostData,
        b: &HostData,
        c0: Option<&HostData>,
    ) -> Result<GpuRun> {
        let mut c = None;
        let phases = self.gemm_lent(
            schedule,
            a.lend(),
            b.lend(),
            c0.map(HostData::lend),
            &mut |done| {
                c = Some(host::copy_of_slice(done, "C from the device")?);
                Ok(())
            },
        )?;
        Ok(phases.with(c.expect("gemm_lent delivers C")))
    }

    /// [`Session::gemm_scheduled`] on operands where they lie (the caller's arrays, as
    /// `schedule`'s problem describes them), C lent to `deliver` as it comes back (described
    /// by the problem's C), for the caller to put where it belongs.
    pub fn gemm_lent(
        &self,
        schedule: &Schedule,
        a: HostSlice<'_>,
        b: HostSlice<'_>,
        c0: Option<HostSlice<'_>>,
        deliver: &mut dyn FnMut(HostSlice<'_>) -> Result<()>,
    ) -> Result<Phases> {
        self.check_process()?;
        let (problem, plan) = (&schedule.problem, &schedule.plan);
        problem.check_operands(a.len(), b.len())?;
        if !schedule.panels.is_whole() {
            return self.gemm_in_panels(schedule, plan, a, b, c0, deliver);
        }

        let start = Instant::now();
        let to_device = [Some(a), Some(b), c0]
            .iter()
            .flatten()
            .map(|x| x.as_bytes().len() as u64)
            .sum();
        let a = self.upload_lent(a)?;
        let b = self.upload_lent(b)?;
        let c = self.output_lent(problem, c0)?;
        check_resident(problem, [&a, &b, &c])?;
        self.sync()?;
        let upload = start.elapsed();

        let start = Instant::now();
        let (canonical, launches) = (&schedule.canonical, &schedule.launches);
        let kernel = self.profile::<Error>(|| {
            self.launch(
                plan,
                canonical,
                schedule.swapped,
                launches,
                [&a, &b, &c],
                false,
            );
            Ok(())
        })?;
        self.sync()?;
        let launch = start.elapsed();

        let start = Instant::now();
        self.download_with(&c, deliver)?;
        let download = start.elapsed();
        Ok(Phases {
            upload,
            launch,
            kernel,
            download,
            schedule: *schedule,
            moved: Moved {
                to_device,
                from_device: (c.words * stored_size(&c)) as u64,
            },
        })
    }

    /// [`Session::gemm`] block by block: for each chunk of the batch, row panel and column
    /// panel, C's block is uploaded (when read) and its slabs of K accumulate into it, each
    /// with its blocks of A and B copied into buffers of their own; then it goes back into C.
    fn gemm_in_panels(
        &self,
        schedule: &Schedule,
        plan: &Plan,
        a: HostSlice<'_>,
        b: HostSlice<'_>,
        c0: Option<HostSlice<'_>>,
        deliver: &mut dyn FnMut(HostSlice<'_>) -> Result<()>,
    ) -> Result<Phases> {
        let panels = &schedule.panels;
        let (a, b) = if schedule.swapped { (b, a) } else { (a, b) };
        let output = schedule.canonical.precision.output;
        // Slabs of K continue the sum in C's blocks: held in the accumulator's type where C's
        // is narrower, and rounded to C's once at the end (Panels::plan counted them so).
        let problem = &panels.summed(&schedule.canonical);
        let held = problem.precision.output;
        let mut c = match c0 {
            Some(c0) if problem.reads_c() => {
                problem.check_output(c0.len())?;
                if c0.dtype() != output {
                    return Err(Error::Precision(format!(
                        "C holds {} elements but the problem writes {output}",
                        c0.dtype()
                    )));
                }
                host::converted(&c0.to_owned(), held, "C, assembled from panels")?
            }
            _ => host::zeros_of(held, problem.c_len(), "C, assembled from panels")?,
        };
        // The blocks go through the transfer schedule, two at a time: block i + 1 is gathered
        // and uploaded while block i computes (no wait between them; C's block comes back
        // when its last slab of K is done).
        let start = Instant::now();
        let mut engine = PanelEngine {
            session: self,
            plan,
            problem,
            panels,
            blocks: panels.blocks(problem).collect(),
            operands: [a, b],
            c: &mut c,
            staged: vec![None, None],
            resident: vec![None, None],
            c_block: None,
            upload: Duration::ZERO,
            download: Duration::ZERO,
            moved: Moved::default(),
        };
        let pieces = engine.blocks.len();
        transfer::run(&mut engine, pieces, PANEL_SLOTS)?;
        let (upload, mut download, moved) = (engine.upload, engine.download, engine.moved);
        let launch = start.elapsed().saturating_sub(upload + download);
        // The device's own time is not taken block by block (that would wait for each): the
        // kernels' share of the pipeline is what the host saw.
        let kernel = launch;
        if held != output {
            let start = Instant::now();
            c = host::converted(&c, output, "C, rounded to its type")?;
            download += start.elapsed();
        }
        deliver(c.lend())?;
        Ok(Phases {
            upload,
            launch,
            kernel,
            download,
            schedule: *schedule,
            moved,
        })
    }

    /// The CubeCL client, for a baseline that launches kernels of its own (cubek-matmul).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    fn error(&self, reason: String) -> Error {
        Error::Device {
            device: self.info.name.clone(),
            reason: one_line(&reason),
        }
    }
}

/// Blocks of a product in panels in flight at once: one computing while the next is gathered
/// and uploaded.
const PANEL_SLOTS: usize = 2;

/// A product in panels as the transfer schedule drives it ([`transfer::Engine`]): a piece is
/// a block (a slab of K over a panel of C), staged by gathering its blocks of A and B from the
/// caller's memory, uploaded, and computed into C's block on the device, which comes back
/// into C after its last slab.
///
/// CubeCL 0.10 exposes neither its stream nor events, so the events here are already fired:
/// its upload has copied the staged bytes before it returns (the staging slot is free at
/// once), and its launches run in stream order after the uploads they read (a device slot's
/// buffers are dropped, and their memory reused, in that order too).
struct PanelEngine<'s, 'h, R: Runtime> {
    session: &'s Session<R>,
    plan: &'s Plan,
    problem: &'s Problem,
    panels: &'s panels::Panels,
    blocks: Vec<Block>,
    operands: [HostSlice<'h>; 2],
    /// C, assembled on the host.
    c: &'s mut HostData,
    /// Per slot, the gathered blocks of A and B with their block problem.
    staged: Vec<Option<(Problem, HostData, HostData)>>,
    /// Per slot, the uploaded blocks.
    resident: Vec<Option<(Problem, DeviceMatrix, DeviceMatrix)>>,
    /// C's block on the device, from its first slab to its last.
    c_block: Option<DeviceMatrix>,
    upload: Duration,
    download: Duration,
    moved: Moved,
}

impl<R: Runtime> transfer::Engine for PanelEngine<'_, '_, R> {
    type Event = ();
    type Error = Error;

    fn stage(&mut self, piece: usize, slot: usize) -> Result<()> {
        let start = Instant::now();
        let block = &self.blocks[piece];
        let sub = self
            .panels
            .block_problem(self.problem, block, block.depth.start == 0)?;
        let [a, b] = self.operands;
        let a_at = (block.batch.clone(), block.rows.clone(), block.depth.clone());
        let b_at = (block.batch.clone(), block.depth.clone(), block.cols.clone());
        let a = panels::gather(a, &self.problem.a, a_at, &sub.a, "a block of A")?;
        let b = panels::gather(b, &self.problem.b, b_at, &sub.b, "a block of B")?;
        self.staged[slot] = Some((sub, a, b));
        self.upload += start.elapsed();
        Ok(())
    }

    fn upload(&mut self, _piece: usize, slot: usize) -> Result<()> {
        let start = Instant::now();
        let (sub, a, b) = self.staged[slot].take().expect("staged before its upload");
        self.moved.to_device += (a.lend().as_bytes().len() + b.lend().as_bytes().len()) as u64;
        let a = self.session.upload(&a)?;
        let b = self.session.upload(&b)?;
        self.resident[slot] = Some((sub, a, b));
        self.upload += start.elapsed();
        Ok(())
    }

    fn compute(&mut self, piece: usize, slot: usize, _uploaded: &()) -> Result<()> {
        let block = &self.blocks[piece];
        let (sub, a, b) = self.resident[slot]
            .as_ref()
            .expect("uploaded before its compute");
        let at = (block.batch.clone(), block.rows.clone(), block.cols.clone());
        if block.depth.start == 0 {
            let start = Instant::now();
            let c0 = if sub.reads_c() {
                let c = self.c.lend();
                Some(panels::gather(
                    c,
                    &self.problem.c,
                    at.clone(),
                    &sub.c,
                    "a block of C",
                )?)
            } else {
                None
            };
            if let Some(c0) = &c0 {
                self.moved.to_device += c0.lend().as_bytes().len() as u64;
            }
            self.c_block = Some(self.session.output(sub, c0.as_ref())?);
            self.upload += start.elapsed();
        }
        let c_dev = self
            .c_block
            .as_ref()
            .expect("the first slab made C's block");
        self.session.enqueue(sub, self.plan, a, b, c_dev)?;
        if block.depth.end == self.problem.k {
            let start = Instant::now();
            let done = self.session.download(c_dev)?;
            self.moved.from_device += (c_dev.words * stored_size(c_dev)) as u64;
            panels::scatter(self.c, &self.problem.c, at, &done, &sub.c);
            self.download += start.elapsed();
        }
        Ok(())
    }

    fn wait(&mut self, _event: &()) -> Result<()> {
        Ok(())
    }
}

/// Bytes per element of the buffer as the device holds it.
fn stored_size(m: &DeviceMatrix) -> usize {
    match m.stored {
        Stored::Native => m.dtype.size_bytes(),
        Stored::PackedBf16 | Stored::WidenedF32 => 4,
    }
}

/// Refuses resident matrices that do not hold `problem`'s element types, or hold too few
/// elements.
fn check_resident(problem: &Problem, [a, b, c]: [&DeviceMatrix; 3]) -> Result<()> {
    let p = problem.precision;
    // tf32 inputs are f32 data.
    for (what, m, dtype, len) in [
        ("A", a, p.input.storage(), problem.a_len()),
        ("B", b, p.input.storage(), problem.b_len()),
        ("C", c, p.output, problem.c_len()),
    ] {
        if m.dtype.storage() != dtype {
            return Err(Error::Precision(format!(
                "{what} holds {} elements but the problem computes {dtype}",
                m.dtype
            )));
        }
        if m.len < len {
            return Err(Error::DataLength {
                what,
                got: m.len,
                expected: len,
            });
        }
    }
    Ok(())
}
