//! The HIP backend: AMD GPUs through CubeCL's hip runtime (hiprtc at run time), the successor
//! of numba's ROC/HSA target.

use cubecl::hip::{AmdDevice, HipRuntime};
use cubecl::prelude::*;
use cubecl_hip_sys as hip;

use crate::device::{DeviceInfo, DeviceKind, DeviceLimits};
use crate::error::{Error, Result};
use crate::runtime::gpu::Session;

/// What to install when no AMD device shows up.
pub const INSTALL_HINT: &str = "install ROCm (it provides libamdhip64.so and libhiprtc.so; set \
                                ROCM_PATH if it is not on the library path) on a machine with an \
                                AMD GPU";

/// Whether libamdhip64 and libhiprtc load. Without them CubeCL aborts the process while
/// creating a client, so this is asked first.
pub fn runtime_present() -> bool {
    hip::is_available()
}

fn device_count() -> usize {
    let mut count = 0;
    // SAFETY: the libraries are loaded (checked by the caller); `count` is writable.
    let status = unsafe { hip::hipGetDeviceCount(&mut count) };
    if status == hip::HIP_SUCCESS {
        count.max(0) as usize
    } else {
        0
    }
}

fn device_name(index: usize) -> String {
    let mut name = [0 as std::os::raw::c_char; 256];
    // SAFETY: `name` holds 256 bytes, the length passed; index < device_count().
    let status = unsafe { hip::hipDeviceGetName(name.as_mut_ptr(), 256, index as i32) };
    if status != hip::HIP_SUCCESS {
        return format!("AMD GPU {index}");
    }
    // SAFETY: hipDeviceGetName wrote a NUL-terminated string into `name`.
    unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Opens HIP device `index` (default 0).
pub fn open(index: Option<usize>) -> Result<Session<HipRuntime>> {
    if !runtime_present() {
        return Err(Error::NoDevice(format!(
            "no AMD ROCm runtime found (libamdhip64.so, libhiprtc.so): {INSTALL_HINT}"
        )));
    }
    let count = device_count();
    if count == 0 {
        return Err(Error::NoDevice(format!(
            "the ROCm runtime reports no AMD GPU: {INSTALL_HINT}"
        )));
    }
    let index = index.unwrap_or(0);
    if index >= count {
        return Err(Error::DeviceIndex { index, count });
    }
    let client = HipRuntime::client(&AmdDevice::new(index));
    let props = client.properties();
    let hw = &props.hardware;
    let info = DeviceInfo {
        index,
        name: device_name(index),
        kind: DeviceKind::DiscreteGpu,
        api: "HIP".into(),
        driver: format!("wavefront {}", hw.plane_size_max),
        timestamps: true,
        limits: DeviceLimits {
            max_shared_bytes: hw.max_shared_memory_size,
            max_units_per_cube: hw.max_units_per_cube,
            max_cube_dim: [hw.max_cube_dim.0, hw.max_cube_dim.1, hw.max_cube_dim.2],
            max_cube_count: [
                hw.max_cube_count.0,
                hw.max_cube_count.1,
                hw.max_cube_count.2,
            ],
            max_binding_bytes: props.memory.max_page_size,
            max_buffer_bytes: props.memory.max_page_size,
            memory_bytes: total_memory(index),
            multiprocessors: hw.num_streaming_multiprocessors,
        },
        types: Default::default(),
        plane_size: 0,
        matrix_units: Vec::new(),
        register_mma: Vec::new(),
        copy_async: false,
    };
    Ok(Session::new(client, info, true))
}

/// The memory of HIP device `index`, if the runtime tells.
fn total_memory(index: usize) -> Option<u64> {
    let mut bytes = 0usize;
    // SAFETY: writes one usize; the runtime was loaded and the index checked by the caller.
    let status = unsafe { hip::hipDeviceTotalMem(&mut bytes, index as i32) };
    (status == hip::HIP_SUCCESS).then_some(bytes as u64)
}

/// Every HIP device, or none when ROCm is missing.
pub fn list() -> Vec<DeviceInfo> {
    if !runtime_present() {
        return Vec::new();
    }
    (0..device_count())
        .filter_map(|i| open(Some(i)).ok().map(|s| s.info().clone()))
        .collect()
}

/// Registers `arrays` with HIP device `index` (`hipHostRegister`); memory registered already
/// is left as it is.
pub fn register(index: usize, arrays: &[&[u8]]) -> Result<crate::runtime::register::Registration> {
    use crate::runtime::register::{Registration, Unregister};
    let fail = |e: String| Error::Device {
        device: format!("HIP device {index}"),
        reason: format!("cannot register host memory: {e}"),
    };
    // SAFETY: selects the device for this thread's HIP calls.
    let status = unsafe { hip::hipSetDevice(index as i32) };
    if status != hip::hipError_t_hipSuccess {
        return Err(fail(format!("hipSetDevice: error {status}")));
    }
    Registration::each(arrays, Unregister::Hip, |at, len| {
        // SAFETY: `at` points at `len` bytes borrowed for the guard's life.
        let status = unsafe { hip::hipHostRegister(at, len, hip::hipHostRegisterPortable) };
        if status == hip::hipError_t_hipSuccess {
            Ok(true)
        } else if status == hip::hipError_t_hipErrorHostMemoryAlreadyRegistered {
            Ok(false)
        } else {
            Err(fail(format!("hipHostRegister: error {status}")))
        }
    })
}

/// The device address of `handle`'s first byte, once CubeCL's queued work has finished (so
/// that another library may use the memory on any stream).
pub(crate) fn device_pointer(
    session: &Session<HipRuntime>,
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
    Ok(resource.resource().ptr as u64)
}

/// Copies `bytes` from device memory at `from` (another library's array, ready once its
/// `stream` has finished) into `into`, a new buffer of CubeCL's on the same device.
pub(crate) fn copy_from_pointer(
    session: &Session<HipRuntime>,
    from: u64,
    into: &cubecl::server::Handle,
    bytes: usize,
    stream: Option<u64>,
) -> Result<()> {
    let fail = |what: &str, status: hip::hipError_t| Error::Device {
        device: session.info().name.clone(),
        reason: format!("cannot copy another library's device array: {what}: error {status}"),
    };
    // SAFETY: selects the device for this thread's HIP calls.
    let status = unsafe { hip::hipSetDevice(session.info().index as i32) };
    if status != hip::hipError_t_hipSuccess {
        return Err(fail("hipSetDevice", status));
    }
    if let Some(stream) = stream {
        // SAFETY: the producer named this stream and keeps it alive during the exchange.
        let status = unsafe { hip::hipStreamSynchronize(stream as hip::hipStream_t) };
        if status != hip::hipError_t_hipSuccess {
            return Err(fail("hipStreamSynchronize", status));
        }
    }
    let to = device_pointer(session, into)?;
    // SAFETY: `into` holds at least `bytes`; the caller vouches for `bytes` readable bytes at
    // `from` on this device, ready after the stream wait above.
    let status = unsafe {
        hip::hipMemcpyDtoD(
            to as hip::hipDeviceptr_t,
            from as hip::hipDeviceptr_t,
            bytes,
        )
    };
    if status != hip::hipError_t_hipSuccess {
        return Err(fail("hipMemcpyDtoD", status));
    }
    // SAFETY: waits for this thread's device.
    let status = unsafe { hip::hipDeviceSynchronize() };
    if status != hip::hipError_t_hipSuccess {
        return Err(fail("hipDeviceSynchronize", status));
    }
    Ok(())
}
