//! The CUDA backend: NVIDIA GPUs through CubeCL's cuda runtime (NVRTC at run time).

use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::prelude::*;
use cudarc::driver::{result, sys};

use crate::device::{DeviceInfo, DeviceKind, DeviceLimits};
use crate::error::{Error, Result};
use crate::runtime::gpu::Session;

/// What to install when no NVIDIA device shows up.
pub const INSTALL_HINT: &str = "install the NVIDIA driver (it provides libcuda.so) on a machine \
                                with an NVIDIA GPU";

/// Whether the NVIDIA driver library can be loaded. Without it cudarc (and so CubeCL) panics.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; nothing from it is called.
    unsafe { sys::is_culib_present() }
}

fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: dev comes from cuDeviceGet on an initialised driver.
    unsafe { result::device::get_attribute(dev, attr) }.map_err(|e| Error::Device {
        device: format!("CUDA device {dev}"),
        reason: e.to_string(),
    })
}

fn describe(index: usize) -> Result<DeviceInfo> {
    use sys::CUdevice_attribute as A;
    let driver_error = |e: cudarc::driver::DriverError| Error::Device {
        device: format!("CUDA device {index}"),
        reason: e.to_string(),
    };
    let dev = result::device::get(index as i32).map_err(driver_error)?;
    let name = result::device::get_name(dev).map_err(driver_error)?;
    // SAFETY: as above.
    let total = unsafe { result::device::total_mem(dev) }.map_err(driver_error)? as u64;
    let at = |a| attribute(dev, a).map(|v| v.max(0) as u32);
    let major = at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let integrated = at(A::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0;
    Ok(DeviceInfo {
        index,
        name,
        kind: if integrated {
            DeviceKind::IntegratedGpu
        } else {
            DeviceKind::DiscreteGpu
        },
        api: "CUDA".into(),
        driver: format!("sm_{major}{minor}"),
        timestamps: true,
        limits: DeviceLimits {
            // What a kernel may opt into (227 KiB on Hopper): CubeCL raises a kernel's
            // dynamic shared memory limit to what it declares, past the default 48 KiB.
            max_shared_bytes: at(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as usize,
            max_units_per_cube: at(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_cube_dim: [
                at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_cube_count: [
                at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            // CUDA has no binding limit: one buffer may take the whole memory.
            max_binding_bytes: total,
            max_buffer_bytes: total,
            memory_bytes: Some(total),
            multiprocessors: Some(at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?),
        },
        types: Default::default(),
        plane_size: 0,
        matrix_units: Vec::new(),
        register_mma: Vec::new(),
        copy_async: false,
    })
}

fn no_driver() -> Error {
    Error::NoDevice(format!(
        "no NVIDIA driver found (libcuda.so): {INSTALL_HINT}"
    ))
}

/// Every CUDA device, or none when the driver is missing.
pub fn list() -> Vec<DeviceInfo> {
    if !driver_present() || result::init().is_err() {
        return Vec::new();
    }
    let count = result::device::get_count().unwrap_or(0).max(0) as usize;
    (0..count).filter_map(|i| describe(i).ok()).collect()
}

/// Opens CUDA device `index` (default 0).
pub fn open(index: Option<usize>) -> Result<Session<CudaRuntime>> {
    if !driver_present() {
        return Err(no_driver());
    }
    result::init().map_err(|e| {
        Error::NoDevice(format!(
            "the NVIDIA driver did not initialise ({e}): {INSTALL_HINT}"
        ))
    })?;
    let count = result::device::get_count().unwrap_or(0).max(0) as usize;
    if count == 0 {
        return Err(Error::NoDevice(format!(
            "the NVIDIA driver reports no CUDA device: {INSTALL_HINT}"
        )));
    }
    let index = index.unwrap_or(0);
    if index >= count {
        return Err(Error::DeviceIndex { index, count });
    }
    let info = describe(index)?;
    let client = CudaRuntime::client(&CudaDevice::new(index));
    let session = Session::new(client, info, true);
    // The direct upload has not yet run on a GPU (none was lent when it was written): it is
    // taken only where TILEMM_CUDA_DIRECT=1 says so, as scripts/gpu-check does to test it.
    if std::env::var_os("TILEMM_CUDA_DIRECT").is_none_or(|v| v != "1") {
        return Ok(session);
    }
    // The primary context, which CubeCL's runtime uses too, for tilemm's own copies.
    match cudarc::driver::CudaContext::new(index) {
        Ok(context) => Ok(session.with_direct_upload(Box::new(move |client, bytes| {
            direct_upload(&context, client, bytes)
        }))),
        Err(_) => Ok(session),
    }
}

/// `bytes` in a new device buffer, copied by `cuMemcpyHtoD` straight from where they lie: a
/// DMA at the link's speed from registered memory ([`register`]), the driver's staged copy
/// from pageable memory, where CubeCL's own upload first copies the bytes twice on the host.
/// CubeCL's stream is waited for first (the buffer may reuse memory a pending kernel reads, and
/// is allocated in stream order), and the context after (a copy from pageable memory may return before its DMA ends, and
/// CubeCL's stream is not ordered after it). `None` on any failure: CubeCL's path then runs.
fn direct_upload(
    context: &std::sync::Arc<cudarc::driver::CudaContext>,
    client: &ComputeClient<CudaRuntime>,
    bytes: &[u8],
) -> Option<cubecl::server::Handle> {
    let handle = client.empty(bytes.len());
    let resource = client.get_resource(handle.clone()).ok()?;
    // After the resource: CubeCL allocates with cuMemAllocAsync on its stream, so the memory is
    // there once the stream has run to this point.
    cubecl::future::block_on(client.sync()).ok()?;
    let device = resource.resource();
    if device.size < bytes.len() as u64 {
        return None;
    }
    context.bind_to_thread().ok()?;
    // SAFETY: the device buffer holds at least bytes.len() bytes (checked), and nothing else
    // uses it until the copy ends (the context is synchronised before it is handed out).
    unsafe {
        result::memcpy_htod_sync(device.ptr, bytes).ok()?;
    }
    result::ctx::synchronize().ok()?;
    Some(handle)
}

/// Registers `arrays` with CUDA device `index` (`cuMemHostRegister`, portable: every context
/// sees them); memory registered already is left as it is.
pub fn register(index: usize, arrays: &[&[u8]]) -> Result<crate::runtime::register::Registration> {
    use crate::runtime::register::{Registration, Unregister};
    let fail = |e: String| Error::Device {
        device: format!("CUDA device {index}"),
        reason: format!("cannot register host memory: {e}"),
    };
    let context = cudarc::driver::CudaContext::new(index).map_err(|e| fail(e.to_string()))?;
    context.bind_to_thread().map_err(|e| fail(e.to_string()))?;
    Registration::each(arrays, Unregister::Cuda, |at, len| {
        // SAFETY: `at` points at `len` bytes borrowed for the guard's life.
        let status =
            unsafe { sys::cuMemHostRegister_v2(at, len, sys::CU_MEMHOSTREGISTER_PORTABLE) };
        match status {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED => Ok(false),
            other => Err(fail(format!("{other:?}"))),
        }
    })
}

/// The device address of `handle`'s first byte, once CubeCL's queued work has finished (so
/// that another library may use the memory on any stream).
pub(crate) fn device_pointer(
    session: &Session<CudaRuntime>,
    handle: &cubecl::server::Handle,
) -> Result<u64> {
    let client = session.client();
    let fail = |e: String| Error::Device {
        device: session.info().name.clone(),
        reason: format!("cannot take a device array's address: {e}"),
    };
    let resource = client
        .get_resource(handle.clone())
        .map_err(|e| fail(format!("{e:?}")))?;
    cubecl::future::block_on(client.sync()).map_err(|e| fail(e.to_string()))?;
    Ok(resource.resource().ptr)
}

/// Copies `bytes` from device memory at `from` (another library's array, ready once its
/// `stream` has finished) into `into`, a new buffer of CubeCL's on the same device.
pub(crate) fn copy_from_pointer(
    session: &Session<CudaRuntime>,
    from: u64,
    into: &cubecl::server::Handle,
    bytes: usize,
    stream: Option<u64>,
) -> Result<()> {
    let fail = |e: String| Error::Device {
        device: session.info().name.clone(),
        reason: format!("cannot copy another library's device array: {e}"),
    };
    let context =
        cudarc::driver::CudaContext::new(session.info().index).map_err(|e| fail(e.to_string()))?;
    context.bind_to_thread().map_err(|e| fail(e.to_string()))?;
    if let Some(stream) = stream {
        // SAFETY: the producer named this stream (1: the legacy default, 2: per thread, else
        // a handle it keeps alive while the array is exchanged).
        unsafe { result::stream::synchronize(stream as sys::CUstream) }
            .map_err(|e| fail(format!("waiting for the array's stream: {e}")))?;
    }
    // After CubeCL's queued work (the new buffer is allocated in stream order).
    let to = device_pointer(session, into)?;
    // SAFETY: `into` holds at least `bytes` (allocated for them); the caller vouches for
    // `bytes` readable bytes at `from` on this device, ready after the stream wait above.
    unsafe { result::memcpy_dtod_sync(to, from, bytes) }.map_err(|e| fail(e.to_string()))?;
    result::ctx::synchronize().map_err(|e| fail(e.to_string()))
}
