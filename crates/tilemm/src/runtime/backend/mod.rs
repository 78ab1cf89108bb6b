//! Where a product runs: the GPU runtimes CubeCL compiles for, and the CPU.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "hip")]
pub mod hip;
#[cfg(feature = "wgpu")]
pub mod wgpu;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::device::{DeviceInfo, DeviceLimits};
use crate::error::{Error, Result};
use crate::plan::{Launches, Plan};
use crate::problem::Problem;
use crate::runtime::gpu::{DeviceMatrix, GpuRun, Phases, Session};
use crate::types::element::{HostData, HostSlice};

#[cfg(not(any(feature = "wgpu", feature = "cuda", feature = "hip")))]
compile_error!("tilemm needs at least one GPU backend: enable the `wgpu`, `cuda` or `hip` feature");

/// A backend, as `--backend` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CubeCL's wgpu runtime: Vulkan, Metal, DX12.
    Wgpu,
    /// CubeCL's CUDA runtime (feature `cuda`).
    Cuda,
    /// CubeCL's HIP runtime for AMD GPUs (feature `hip`).
    Hip,
    /// The CPU, through the `gemm` crate.
    Cpu,
}

impl Backend {
    /// Every backend, in the order `auto` tries the GPU ones.
    pub const ALL: [Backend; 4] = [Backend::Cuda, Backend::Hip, Backend::Wgpu, Backend::Cpu];

    /// The GPU backends, in the order `auto` tries them: vendor runtimes before wgpu.
    pub const GPU: [Backend; 3] = [Backend::Cuda, Backend::Hip, Backend::Wgpu];

    /// The backend's name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
            Backend::Cpu => "cpu",
        }
    }

    /// Whether this build contains the backend.
    pub fn is_built(self) -> bool {
        match self {
            Backend::Wgpu => cfg!(feature = "wgpu"),
            Backend::Cuda => cfg!(feature = "cuda"),
            Backend::Hip => cfg!(feature = "hip"),
            Backend::Cpu => true,
        }
    }

    fn not_built(self) -> Error {
        Error::NotBuilt {
            what: format!("the {} backend", self.name()),
            feature: self.name(),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown backend '{s}' (choose one of: wgpu, cuda, hip, cpu)"))
    }
}

/// An open GPU device on whichever runtime it belongs to.
#[non_exhaustive]
pub enum GpuSession {
    /// A wgpu adapter.
    #[cfg(feature = "wgpu")]
    Wgpu(Session<cubecl::wgpu::WgpuRuntime>),
    /// A CUDA device.
    #[cfg(feature = "cuda")]
    Cuda(Session<cubecl::cuda::CudaRuntime>),
    /// A HIP (ROCm) device.
    #[cfg(feature = "hip")]
    Hip(Session<cubecl::hip::HipRuntime>),
}

macro_rules! with_session {
    ($session:expr, $s:ident => $body:expr) => {
        match $session {
            #[cfg(feature = "wgpu")]
            GpuSession::Wgpu($s) => $body,
            #[cfg(feature = "cuda")]
            GpuSession::Cuda($s) => $body,
            #[cfg(feature = "hip")]
            GpuSession::Hip($s) => $body,
        }
    };
}

/// Work for a session's own runtime type: what launches kernels of its own on tilemm's
/// device (a peer such as cubek-matmul), run by [`GpuSession::with_runtime`].
pub trait OnRuntime {
    /// What the work returns.
    type Output;
    /// Runs on `session`.
    fn run<R: cubecl::Runtime>(
        self,
        session: &crate::runtime::gpu::Session<R>,
    ) -> Result<Self::Output>;
}

impl GpuSession {
    /// Opens device `index` of `backend` (its best device if `None`).
    pub fn open(backend: Backend, index: Option<usize>) -> Result<Self> {
        if backend.is_built() && backend != Backend::Cpu {
            crate::host::ensure_driver_headroom(backend.name())?;
            // Before CubeCL reads its configuration, with the first client.
            crate::runtime::cache::configure_cubecl();
        }
        guarded(
            || backend.name().to_string(),
            || match backend {
                #[cfg(feature = "wgpu")]
                Backend::Wgpu => wgpu::open(index).map(GpuSession::Wgpu),
                #[cfg(feature = "cuda")]
                Backend::Cuda => cuda::open(index).map(GpuSession::Cuda),
                #[cfg(feature = "hip")]
                Backend::Hip => hip::open(index).map(GpuSession::Hip),
                Backend::Cpu => Err(Error::NoDevice(
                    "the cpu backend has no GPU device to open".into(),
                )),
                #[allow(unreachable_patterns)]
                other => Err(other.not_built()),
            },
        )
    }

    /// The session with its device's memory limits (binding, buffer, memory) lowered to
    /// `limits`, never raised; see [`Session::limit`].
    pub fn limit(self, limits: DeviceLimits) -> Self {
        match self {
            #[cfg(feature = "wgpu")]
            GpuSession::Wgpu(s) => GpuSession::Wgpu(s.limit(limits)),
            #[cfg(feature = "cuda")]
            GpuSession::Cuda(s) => GpuSession::Cuda(s.limit(limits)),
            #[cfg(feature = "hip")]
            GpuSession::Hip(s) => GpuSession::Hip(s.limit(limits)),
        }
    }

    /// The backend this session runs on.
    pub fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "wgpu")]
            GpuSession::Wgpu(_) => Backend::Wgpu,
            #[cfg(feature = "cuda")]
            GpuSession::Cuda(_) => Backend::Cuda,
            #[cfg(feature = "hip")]
            GpuSession::Hip(_) => Backend::Hip,
        }
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        with_session!(self, s => s.info())
    }

    /// Refuses a process forked after the session was opened ([`Error::Forked`]).
    pub fn check_process(&self) -> Result<()> {
        with_session!(self, s => s.check_process())
    }

    /// Whether kernel times come from device timestamps.
    pub fn has_device_timestamps(&self) -> bool {
        with_session!(self, s => s.has_device_timestamps())
    }

    /// Compiles `plan`'s kernel for `problem`'s precision and layouts, and returns how long
    /// that took; see [`Session::compile`].
    pub fn compile(&self, plan: &Plan, problem: &Problem) -> Result<std::time::Duration> {
        let took = self.guarded(|| with_session!(self, s => s.compile(plan, problem)));
        crate::runtime::cache::keep_new_kernels();
        took
    }

    /// How `problem` runs with `plan` here (panels, launches), or why it cannot; see
    /// [`Session::schedule`].
    pub fn schedule(
        &self,
        problem: &Problem,
        plan: &Plan,
    ) -> Result<crate::plan::panels::Schedule> {
        with_session!(self, s => s.schedule(problem, plan))
    }

    /// [`GpuSession::compile`] for a product scheduled once, by this session's
    /// [`GpuSession::schedule`].
    pub fn compile_scheduled(
        &self,
        schedule: &crate::plan::panels::Schedule,
    ) -> Result<std::time::Duration> {
        let took = self.guarded(|| with_session!(self, s => s.compile_scheduled(schedule)));
        crate::runtime::cache::keep_new_kernels();
        took
    }

    /// [`GpuSession::gemm`] for a product scheduled once, by this session's
    /// [`GpuSession::schedule`]: checked then, not again.
    pub fn gemm_scheduled(
        &self,
        schedule: &crate::plan::panels::Schedule,
        a: &HostData,
        b: &HostData,
        c0: Option<&HostData>,
    ) -> Result<GpuRun> {
        let run = self.guarded(|| with_session!(self, s => s.gemm_scheduled(schedule, a, b, c0)));
        crate::runtime::cache::keep_new_kernels();
        run
    }

    /// [`GpuSession::gemm`] on operands where they lie, C lent to `deliver` as it comes back;
    /// see [`Session::gemm_lent`].
    pub fn gemm_lent(
        &self,
        problem: &Problem,
        plan: &Plan,
        [a, b]: [HostSlice<'_>; 2],
        c0: Option<HostSlice<'_>>,
        deliver: &mut dyn FnMut(HostSlice<'_>) -> Result<()>,
    ) -> Result<Phases> {
        let run = self.guarded(|| {
            with_session!(self, s => {
                let schedule = s.schedule(problem, plan)?;
                s.gemm_lent(&schedule, a, b, c0, deliver)
            })
        });
        crate::runtime::cache::keep_new_kernels();
        run
    }

    /// C = α·A·B + β·C with `plan`, uploaded, run and downloaded; see [`Session::gemm`].
    pub fn gemm(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &HostData,
        b: &HostData,
        c0: Option<&HostData>,
    ) -> Result<GpuRun> {
        let run = self.guarded(|| with_session!(self, s => s.gemm(problem, plan, a, b, c0)));
        crate::runtime::cache::keep_new_kernels();
        run
    }

    /// Copies an input to the device; see [`Session::upload`].
    pub fn upload(&self, data: &HostData) -> Result<DeviceMatrix> {
        self.guarded(|| with_session!(self, s => s.upload(data)))
    }

    /// C's buffer on the device; see [`Session::output`].
    pub fn output(&self, problem: &Problem, c0: Option<&HostData>) -> Result<DeviceMatrix> {
        self.guarded(|| with_session!(self, s => s.output(problem, c0)))
    }

    /// Enqueues the product on resident matrices; see [`Session::enqueue`].
    pub fn enqueue(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.guarded(|| with_session!(self, s => s.enqueue(problem, plan, a, b, c)))
    }

    /// Enqueues a product scheduled once on resident matrices; see
    /// [`Session::enqueue_scheduled`].
    pub fn enqueue_scheduled(
        &self,
        schedule: &crate::plan::panels::Schedule,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.guarded(|| with_session!(self, s => s.enqueue_scheduled(schedule, a, b, c)))
    }

    /// C back on the host; see [`Session::download`].
    pub fn download(&self, c: &DeviceMatrix) -> Result<HostData> {
        self.guarded(|| with_session!(self, s => s.download(c)))
    }

    /// Copies host memory where it lies to a new device buffer; see [`Session::upload`].
    pub fn upload_lent(&self, data: HostSlice<'_>) -> Result<DeviceMatrix> {
        self.guarded(|| {
            with_session!(self, s => {
                s.check_buffer(data.as_bytes().len() as u64)?;
                s.upload_lent(data)
            })
        })
    }

    /// Refuses a dtype the device cannot hold in its own type; see [`Session::holds`].
    pub fn holds(&self, dtype: crate::problem::DType) -> Result<()> {
        with_session!(self, s => s.holds(dtype))
    }

    /// A new uninitialised device buffer; see [`Session::empty`].
    pub fn empty(&self, dtype: crate::problem::DType, len: usize) -> Result<DeviceMatrix> {
        self.guarded(|| with_session!(self, s => s.empty(dtype, len)))
    }

    /// Elements of a buffer back on the host; see [`Session::download_range`].
    pub fn download_range(
        &self,
        m: &DeviceMatrix,
        range: std::ops::Range<usize>,
    ) -> Result<HostData> {
        self.guarded(|| with_session!(self, s => s.download_range(m, range)))
    }

    /// Enqueues the product on resident matrices, C possibly sharing memory with A or B; see
    /// [`Session::enqueue_apart`].
    pub fn enqueue_apart(
        &self,
        problem: &Problem,
        plan: &Plan,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Launches> {
        self.guarded(|| with_session!(self, s => s.enqueue_apart(problem, plan, a, b, c)))
    }

    /// The device address of a buffer's first byte, once every queued kernel has finished
    /// (so that another library may read or write it on any stream): CUDA and HIP.
    pub fn device_pointer(&self, m: &DeviceMatrix) -> Result<u64> {
        self.check_process()?;
        #[allow(unreachable_patterns)]
        match self {
            #[cfg(feature = "cuda")]
            GpuSession::Cuda(s) => return self.guarded(|| cuda::device_pointer(s, &m.handle)),
            #[cfg(feature = "hip")]
            GpuSession::Hip(s) => return self.guarded(|| hip::device_pointer(s, &m.handle)),
            _ => {}
        }
        let _ = m;
        Err(self.no_pointers())
    }

    /// A new buffer of `len` elements of `dtype` copied from device memory at `address` (another
    /// library's array on this device), after `stream` (that library's, where it names one)
    /// has finished: one copy on the device (CubeCL cannot wrap memory it did not allocate).
    /// CUDA and HIP.
    pub fn copy_from_pointer(
        &self,
        address: u64,
        dtype: crate::problem::DType,
        len: usize,
        stream: Option<u64>,
    ) -> Result<DeviceMatrix> {
        self.check_process()?;
        let bytes = len * dtype.size_bytes();
        #[allow(unreachable_patterns)]
        match self {
            #[cfg(feature = "cuda")]
            GpuSession::Cuda(s) => {
                let matrix = self.empty(dtype, len)?;
                self.guarded(|| {
                    cuda::copy_from_pointer(s, address, &matrix.handle, bytes, stream)
                })?;
                return Ok(matrix);
            }
            #[cfg(feature = "hip")]
            GpuSession::Hip(s) => {
                let matrix = self.empty(dtype, len)?;
                self.guarded(|| hip::copy_from_pointer(s, address, &matrix.handle, bytes, stream))?;
                return Ok(matrix);
            }
            _ => {}
        }
        let _ = (address, bytes, stream);
        Err(self.no_pointers())
    }

    fn no_pointers(&self) -> Error {
        Error::NoDevice(format!(
            "{} buffers have no device address another library can use: the CUDA Array \
             Interface and DLPack need a CUDA (or HIP) device",
            self.backend()
        ))
    }

    /// The device's time for the work `work` enqueues; see [`Session::profile`].
    pub fn profile<E: From<Error> + Send>(
        &self,
        work: impl FnOnce() -> Result<(), E> + Send,
    ) -> Result<std::time::Duration, E> {
        // A panic inside is tilemm's error, then the caller's type.
        let mut inner = None;
        self.guarded(|| {
            inner = Some(with_session!(self, s => s.profile(work)));
            Ok(())
        })?;
        inner.expect("set when the guard returns Ok")
    }

    /// Device memory the session holds; see [`Session::memory`].
    pub fn memory(&self) -> Result<crate::runtime::gpu::DeviceMemory> {
        with_session!(self, s => s.memory())
    }

    /// `work` on this session's runtime, with a panic inside it as an error.
    pub fn with_runtime<W: OnRuntime>(&self, work: W) -> Result<W::Output> {
        self.guarded(|| with_session!(self, s => work.run(s)))
    }

    /// `work` on this session, with a panic inside it (CubeCL's) as an error.
    pub fn guarded<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        guarded(|| self.info().name.clone(), work)
    }

    /// Registers host arrays with this device for the guard's life (page-locked and mapped
    /// for its DMA engines; see [`crate::runtime::register`]). wgpu registers nothing, and the
    /// guard says why.
    pub fn register(&self, arrays: &[&[u8]]) -> Result<crate::runtime::register::Registration> {
        use crate::runtime::register::Registration;
        match self {
            #[cfg(feature = "wgpu")]
            GpuSession::Wgpu(s) => {
                s.check_process()?;
                Ok(Registration::none(
                    arrays,
                    "wgpu has no host memory registration: it uploads through mapped staging \
                     buffers of its own"
                        .into(),
                ))
            }
            #[cfg(feature = "cuda")]
            GpuSession::Cuda(s) => {
                s.check_process()?;
                self.guarded(|| cuda::register(s.info().index, arrays))
            }
            #[cfg(feature = "hip")]
            GpuSession::Hip(s) => {
                s.check_process()?;
                self.guarded(|| hip::register(s.info().index, arrays))
            }
        }
    }

    /// How fast this device's link moves bytes, measured at the first call; see
    /// [`Session::link`].
    pub fn link(&self) -> Result<crate::runtime::link::Link> {
        self.guarded(|| with_session!(self, s => s.link()))
    }

    /// Waits until the device is idle.
    pub fn sync(&self) -> Result<()> {
        self.guarded(|| with_session!(self, s => s.sync()))
    }
}

/// `work`, with a panic inside it as an error on `device`: tilemm runs inside other programs
/// (Python, BLAS callers), where a runtime's panic would end them.
fn guarded<T>(device: impl FnOnce() -> String, work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        Err(Error::Device {
            device: device(),
            reason: format!(
                "the runtime stopped: {}",
                crate::error::panic_message(&*payload)
            ),
        })
    })
}

/// The GPU devices of `backend` that this machine has (none for `cpu` or a backend not built).
pub fn list_devices(backend: Backend) -> Vec<DeviceInfo> {
    match backend {
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => wgpu::list(),
        #[cfg(feature = "cuda")]
        Backend::Cuda => cuda::list(),
        #[cfg(feature = "hip")]
        Backend::Hip => hip::list(),
        _ => Vec::new(),
    }
}

/// Opens `backend` (device `index`, or its best), or with `None` the best GPU of any backend
/// built. `Ok(None)` means the CPU alone: asked for, or no GPU found, with a note saying why.
pub fn open_device(
    backend: Option<Backend>,
    index: Option<usize>,
    notes: &mut Vec<String>,
) -> Result<Option<GpuSession>> {
    let session = open_any(backend, index, notes)?;
    if session.is_some() {
        notes.extend(crate::runtime::cache::kernel_cache_notes().iter().cloned());
    }
    if let (Some(_), crate::runtime::cache::KernelCache::Off(why)) =
        (&session, crate::runtime::cache::kernel_cache())
    {
        notes.push(format!(
            "compiled kernels are not kept for the next process: {why}"
        ));
    }
    Ok(session)
}

fn open_any(
    backend: Option<Backend>,
    index: Option<usize>,
    notes: &mut Vec<String>,
) -> Result<Option<GpuSession>> {
    match backend {
        Some(Backend::Cpu) if index.is_some() => Err(Error::CpuDeviceIndex),
        Some(Backend::Cpu) => Ok(None),
        Some(backend) => GpuSession::open(backend, index).map(Some),
        None => {
            let mut reasons = Vec::new();
            for backend in Backend::GPU.into_iter().filter(|b| b.is_built()) {
                match GpuSession::open(backend, index) {
                    Ok(session) => return Ok(Some(session)),
                    Err(Error::NoDevice(reason)) => reasons.push(reason),
                    Err(other) => return Err(other),
                }
            }
            notes.push(format!(
                "no GPU device found, so only the CPU path runs ({})",
                reasons.join("; ")
            ));
            Ok(None)
        }
    }
}

/// The device `tilemm run` picks among `devices` of `backend` when no `--device` is given:
/// wgpu's best adapter (discrete, integrated, virtual, other, CPU), else the first device.
pub fn default_device(backend: Backend, devices: &[DeviceInfo]) -> Option<usize> {
    match backend {
        #[cfg(feature = "wgpu")]
        Backend::Wgpu if !devices.is_empty() => Some(wgpu::best(devices)),
        _ => devices.first().map(|d| d.index),
    }
}

/// What to install so that some GPU backend of this build finds a device.
pub fn install_hint() -> String {
    let mut hints = Vec::new();
    #[cfg(feature = "cuda")]
    hints.push(format!("for CUDA, {}", cuda::INSTALL_HINT));
    #[cfg(feature = "hip")]
    hints.push(format!("for HIP, {}", hip::INSTALL_HINT));
    #[cfg(feature = "wgpu")]
    hints.push(format!("for wgpu, {}", wgpu::INSTALL_HINT));
    hints.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{test_device as device, DeviceKind};

    #[test]
    fn the_default_prefers_discrete_then_integrated_then_cpu_adapters() {
        let devices = [
            device(0, DeviceKind::Cpu),
            device(1, DeviceKind::IntegratedGpu),
            device(2, DeviceKind::DiscreteGpu),
            device(3, DeviceKind::DiscreteGpu),
        ];
        #[cfg(feature = "wgpu")]
        {
            assert_eq!(default_device(Backend::Wgpu, &devices), Some(2));
            assert_eq!(default_device(Backend::Wgpu, &devices[..2]), Some(1));
            assert_eq!(default_device(Backend::Wgpu, &devices[..1]), Some(0));
            assert_eq!(default_device(Backend::Wgpu, &[]), None);
        }
        // The vendor runtimes number only GPUs: their default is device 0.
        assert_eq!(default_device(Backend::Cuda, &devices[1..]), Some(1));
    }

    #[test]
    fn backends_parse_by_name_and_say_what_is_built() {
        assert_eq!("hip".parse::<Backend>(), Ok(Backend::Hip));
        assert!("opencl"
            .parse::<Backend>()
            .unwrap_err()
            .contains("wgpu, cuda, hip, cpu"));
        assert!(Backend::Cpu.is_built());
        assert_eq!(Backend::Cuda.is_built(), cfg!(feature = "cuda"));
    }
}
