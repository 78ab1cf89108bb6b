//! The wgpu backend: Vulkan, Metal and DX12 adapters, lavapipe included.

use cubecl::future::block_on;
use cubecl::prelude::*;
use cubecl::wgpu::{init_device, RuntimeOptions, WgpuRuntime, WgpuSetup};

use crate::device::{DeviceInfo, DeviceKind, DeviceLimits};
use crate::error::{Error, Result};
use crate::runtime::gpu::Session;

/// What to install when no adapter shows up.
pub const INSTALL_HINT: &str = "install your GPU's Vulkan driver, or Mesa's CPU driver lavapipe \
                                (Debian/Ubuntu: `sudo apt-get install mesa-vulkan-drivers`)";

/// Runs `f` with libwayland's notice held off the process's stderr: on a headless machine
/// without `XDG_RUNTIME_DIR`, Mesa's device-select layer connects to Wayland while the Vulkan
/// stack starts and libwayland prints "error: XDG_RUNTIME_DIR is invalid or not set in the
/// environment." into the host program's stderr (a Python user's, a BLAS caller's). The
/// environment stays as the user set it: fd 2 points at a pipe while `f` runs, and everything
/// written there but that notice goes on to stderr afterwards (another thread's lines too,
/// only later; a child process another thread starts meanwhile inherits the pipe as its
/// stderr, which is read until `f` returns).
fn without_wayland_notice<T>(f: impl FnOnce() -> T) -> T {
    use std::io::{Read, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::sync::Mutex;

    const NOTICE: &str = "XDG_RUNTIME_DIR is invalid or not set in the environment";
    // libwayland is quiet where the variable names a folder (one left by `sudo` may not).
    let usable =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|dir| std::path::Path::new(&dir).is_dir());
    if usable {
        return f();
    }
    static HELD: Mutex<()> = Mutex::new(());
    let _one_at_a_time = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut fds = [0; 2];
    // SAFETY: plain POSIX calls on descriptors this function owns; fd 2 is put back by
    // `Restore` on every way out, panics included.
    let saved = unsafe { libc::dup(2) };
    if saved < 0 || unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        if saved >= 0 {
            unsafe { libc::close(saved) };
        }
        return f();
    }
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let saved = unsafe { OwnedFd::from_raw_fd(saved) };
    struct Restore<'a>(&'a OwnedFd);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            use std::os::fd::AsRawFd;
            // SAFETY: `self.0` is the process's stderr, duplicated before it was replaced.
            unsafe { libc::dup2(self.0.as_raw_fd(), 2) };
        }
    }
    // The pipe is drained while `f` runs, so a chatty `f` never blocks on a full pipe; once
    // `f` is done, what is left is read without waiting for an end of file (a child process
    // started meanwhile may hold the write end open).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = done.clone();
    let reader = std::thread::Builder::new().spawn(move || {
        use std::os::fd::AsRawFd;
        use std::sync::atomic::Ordering;
        // SAFETY: fcntl and poll on the pipe's read end, which this thread owns.
        unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut file = std::fs::File::from(read);
        let (mut text, mut chunk) = (Vec::new(), [0u8; 4096]);
        loop {
            let was_done = finished.load(Ordering::Acquire);
            let mut poll = libc::pollfd {
                fd: file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            unsafe { libc::poll(&mut poll, 1, 20) };
            let mut got = false;
            loop {
                match file.read(&mut chunk) {
                    Ok(0) => return text,
                    Ok(n) => {
                        text.extend_from_slice(&chunk[..n]);
                        got = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            if was_done && !got {
                return text;
            }
        }
    });
    // No thread to drain the pipe (a process limit): no filter, the notice is harmless.
    let Ok(reader) = reader else {
        return f();
    };
    let result = {
        use std::os::fd::AsRawFd;
        // SAFETY: fd 2 becomes the pipe's write end until `restore` drops.
        unsafe { libc::dup2(write.as_raw_fd(), 2) };
        drop(write);
        let _restore = Restore(&saved);
        f()
    };
    done.store(true, std::sync::atomic::Ordering::Release);
    let text = reader.join().unwrap_or_default();
    let mut stderr = std::io::stderr().lock();
    for line in text.split_inclusive(|&b| b == b'\n') {
        if !String::from_utf8_lossy(line).contains(NOTICE) {
            let _ = stderr.write_all(line);
        }
    }
    result
}

// The APIs CubeCL's wgpu runtime compiles for; OpenGL (a secondary wgpu backend) is left out.
fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::PRIMARY,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

fn adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY))
}

/// The adapter as `tilemm devices` lists it, with the limits it offers.
fn describe(index: usize, adapter: &wgpu::Adapter) -> DeviceInfo {
    describe_with_limits(index, adapter, &adapter.limits())
}

/// The adapter with `limits`: on an open device, the ones the device was granted, which are
/// what wgpu validates launches against.
fn describe_with_limits(
    index: usize,
    adapter: &wgpu::Adapter,
    limits: &wgpu::Limits,
) -> DeviceInfo {
    let info = adapter.get_info();
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => DeviceKind::DiscreteGpu,
        wgpu::DeviceType::IntegratedGpu => DeviceKind::IntegratedGpu,
        wgpu::DeviceType::VirtualGpu => DeviceKind::VirtualGpu,
        wgpu::DeviceType::Cpu => DeviceKind::Cpu,
        wgpu::DeviceType::Other => DeviceKind::Other,
    };
    let driver = [info.driver.as_str(), info.driver_info.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    DeviceInfo {
        index,
        name: info.name.clone(),
        kind,
        api: format!("{:?}", info.backend),
        driver,
        timestamps: adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY),
        limits: DeviceLimits {
            max_shared_bytes: limits.max_compute_workgroup_storage_size as usize,
            max_units_per_cube: limits.max_compute_invocations_per_workgroup,
            max_cube_dim: [
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z,
            ],
            max_cube_count: [limits.max_compute_workgroups_per_dimension; 3],
            max_binding_bytes: limits.max_storage_buffer_binding_size,
            max_buffer_bytes: limits.max_buffer_size,
            memory_bytes: None,
            multiprocessors: None,
        },
        types: Default::default(),
        // Where the adapter has subgroup operations; `Session::new` keeps it if fixed.
        plane_size: if adapter.features().contains(wgpu::Features::SUBGROUP) {
            info.subgroup_max_size
        } else {
            0
        },
        matrix_units: Vec::new(),
        register_mma: Vec::new(),
        copy_async: false,
    }
}

/// Every adapter wgpu finds, in its order (the index `--device` takes).
pub fn list() -> Vec<DeviceInfo> {
    without_wayland_notice(|| {
        adapters(&instance())
            .iter()
            .enumerate()
            .map(|(i, a)| describe(i, a))
            .collect()
    })
}

/// Opens adapter `index`, or the best one (discrete before integrated before CPU) if `None`.
pub fn open(index: Option<usize>) -> Result<Session<WgpuRuntime>> {
    let (instance, mut adapters) = without_wayland_notice(|| {
        let instance = instance();
        let adapters = adapters(&instance);
        (instance, adapters)
    });
    if adapters.is_empty() {
        return Err(Error::NoDevice(format!(
            "no Vulkan, Metal or DX12 adapter found: {INSTALL_HINT}"
        )));
    }
    let index = match index {
        Some(i) if i >= adapters.len() => {
            return Err(Error::DeviceIndex {
                index: i,
                count: adapters.len(),
            })
        }
        Some(i) => i,
        None => best(
            &adapters
                .iter()
                .enumerate()
                .map(|(i, a)| describe(i, a))
                .collect::<Vec<_>>(),
        ),
    };
    let adapter = adapters.swap_remove(index);
    let name = adapter.get_info().name;

    // The adapter's own limits, not wgpu's defaults (which cap bindings at 128 MiB and shared
    // memory at 16 KiB), and its features, as CubeCL's own device request does.
    let (device, queue) = block_on(
        adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("tilemm"),
            required_features: adapter
                .features()
                .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
            required_limits: adapter.limits(),
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            trace: wgpu::Trace::Off,
            // SAFETY: the same request CubeCL makes; tilemm passes no passthrough shaders.
            experimental_features: unsafe { wgpu::ExperimentalFeatures::enabled() },
        }),
    )
    .map_err(|e| Error::Device {
        device: name,
        reason: format!("cannot open the device: {e}"),
    })?;
    let info = describe_with_limits(index, &adapter, &device.limits());
    let backend = adapter.get_info().backend;
    let writer = queue.clone();
    let setup = WgpuSetup {
        instance,
        adapter,
        device,
        queue,
        backend,
    };
    let device = init_device(setup, runtime_options()?);
    Ok(
        Session::new(WgpuRuntime::client(&device), info, false).with_direct_upload(Box::new(
            move |client, bytes| direct_upload(&writer, client, bytes),
        )),
    )
}

/// `bytes` in a new buffer, written by wgpu's `write_buffer` into the buffer CubeCL allocated:
/// one copy, into wgpu's staging memory (CubeCL's own upload copies the bytes twice on the
/// host first). CubeCL's work so far is submitted first (a flush), so that the write, which
/// wgpu runs at the next submission, comes after any use of the memory it reuses. Sizes that
/// are not a multiple of 4 bytes (wgpu's copy alignment) are left to CubeCL.
fn direct_upload(
    queue: &wgpu::Queue,
    client: &ComputeClient<WgpuRuntime>,
    bytes: &[u8],
) -> Option<cubecl::server::Handle> {
    if bytes.is_empty()
        || !bytes
            .len()
            .is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT as usize)
    {
        return None;
    }
    let handle = client.empty(bytes.len());
    client.flush().ok()?;
    let resource = client.get_resource(handle.clone()).ok()?;
    let buffer = resource.resource();
    if buffer.size < bytes.len() as u64 {
        return None;
    }
    queue.write_buffer(&buffer.buffer, buffer.offset, bytes);
    Some(handle)
}

/// The index of the adapter to use by default: the first of the most preferred kind.
pub fn best(devices: &[DeviceInfo]) -> usize {
    devices
        .iter()
        .min_by_key(|d| (d.kind, d.index))
        .map_or(0, |d| d.index)
}

/// CubeCL's wgpu options, built here: its default reads `CUBECL_WGPU_MAX_TASKS` and panics on
/// a value that is not a number, so tilemm reads and checks it instead.
fn runtime_options() -> Result<RuntimeOptions> {
    const DEFAULT_MAX_TASKS: usize = 32;
    let setting = |name: &str, value: &std::ffi::OsStr, reason: &str| Error::Setting {
        name: name.into(),
        value: value.to_string_lossy().into(),
        reason: reason.into(),
    };
    let tasks_max = match std::env::var_os("CUBECL_WGPU_MAX_TASKS") {
        None => DEFAULT_MAX_TASKS,
        Some(value) => match value.to_str().and_then(|v| v.trim().parse::<usize>().ok()) {
            Some(n @ 1..=65536) => n,
            _ => {
                return Err(setting(
                    "CUBECL_WGPU_MAX_TASKS",
                    &value,
                    "CubeCL's tasks per submission must be a whole number from 1 to 65536 \
                     (default 32); fix or unset it",
                ))
            }
        },
    };
    // CubeCL writes each kernel's SPIR-V there and panics where it cannot.
    if let Some(dir) = std::env::var_os("CUBECL_DEBUG_SPIRV") {
        let writable = dir.to_str().is_some()
            && std::fs::metadata(&dir).is_ok_and(|m| m.is_dir())
            && tempfile::tempfile_in(&dir).is_ok();
        if !writable {
            return Err(setting(
                "CUBECL_DEBUG_SPIRV",
                &dir,
                "CubeCL writes each kernel's SPIR-V there, but it is not a folder tilemm can \
                 write in; fix or unset it",
            ));
        }
    }
    Ok(RuntimeOptions {
        tasks_max,
        memory_config: Default::default(),
    })
}
