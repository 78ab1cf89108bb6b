//! The vendor libraries tilemm's kernels are measured against: cuBLAS on NVIDIA, rocBLAS on
//! AMD, both loaded at run time, timed the same way as `bench::gpu_kernel` (one warm-up call,
//! then the median of timed calls) and checked against the same reference.

#[allow(unused_imports)]
use crate::inputs::Operands;
#[cfg(any(feature = "cuda", feature = "hip"))]
use crate::measure::bench::{measured, Measurement, Sample, Workload};

/// A and B of `problem` when it is the product the baselines cover so far: dense row-major
/// A·B of `T` in the precision of `dtype` (whose data `T` holds: f32 for tf32), one matrix,
/// α = 1, β = 0.
#[allow(dead_code)]
fn dense<'a, T: tilemm::types::element::Element>(
    problem: &tilemm::problem::Problem,
    operands: &'a Operands,
    dtype: tilemm::problem::DType,
) -> crate::Result<(&'a [T], &'a [T])> {
    debug_assert_eq!(dtype.storage(), T::DTYPE);
    let plain = tilemm::problem::Shape {
        precision: tilemm::problem::Precision::of(dtype),
        ..tilemm::problem::Shape::new(problem.m(), problem.k(), problem.n())
    }
    .problem()?;
    match (
        *problem == plain,
        operands.a.as_slice::<T>(),
        operands.b.as_slice::<T>(),
    ) {
        (true, Some(a), Some(b)) => Ok((a, b)),
        _ => Err(crate::Error::Baseline {
            name: "the vendor's BLAS".into(),
            reason: format!("it covers dense row-major A·B in {dtype} here, so far"),
        }),
    }
}

/// Where a baseline's operands start and its result ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostCopies {
    /// On the device: the kernel alone is timed.
    Resident,
    /// In pageable host memory: each timed run copies A and B up and C down (`cudaMemcpy`).
    Pageable,
    /// In host memory registered with the device (`cuMemHostRegister`): the same copies, by DMA.
    Registered,
}

impl HostCopies {
    /// The row name's suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            HostCopies::Resident => "",
            HostCopies::Pageable => ", from host (pageable)",
            HostCopies::Registered => ", from host (registered)",
        }
    }
}

/// cuBLAS on CUDA device `index` in `work`'s precision: SGEMM, DGEMM, GemmEx with f16 or
/// bf16 inputs and output and f32 computation (tilemm's half precisions), and GemmEx on f32
/// data with `CUBLAS_COMPUTE_32F_FAST_TF32` for tf32 (its tensor cores; never for f32); with
/// `copies`, from host memory.
#[cfg(feature = "cuda")]
pub fn cublas_gemm(
    index: usize,
    work: &Workload,
    repeat: usize,
    copies: HostCopies,
) -> Result<Measurement> {
    use tilemm::problem::DType;
    let named = |name: &str| format!("{name}{}", copies.suffix());
    match work.problem.precision().input {
        DType::F32 => cublas::<f32>(
            index,
            work,
            repeat,
            &named("cuBLAS sgemm"),
            DType::F32,
            copies,
        ),
        DType::TF32 => cublas::<f32>(
            index,
            work,
            repeat,
            &named("cuBLAS gemmEx f32, tf32 compute"),
            DType::TF32,
            copies,
        ),
        DType::F64 => cublas::<f64>(
            index,
            work,
            repeat,
            &named("cuBLAS dgemm"),
            DType::F64,
            copies,
        ),
        DType::F16 => cublas::<half::f16>(
            index,
            work,
            repeat,
            &named("cuBLAS gemmEx f16, f32 compute"),
            DType::F16,
            copies,
        ),
        DType::BF16 => cublas::<half::bf16>(
            index,
            work,
            repeat,
            &named("cuBLAS gemmEx bf16, f32 compute"),
            DType::BF16,
            copies,
        ),
    }
}
#[cfg(any(feature = "cuda", feature = "hip"))]
use crate::Result;

/// cuBLAS on CUDA device `index` in `T` (`dtype`'s data): row-major C = A·B computed as
/// column-major Cᵀ = Bᵀ·Aᵀ, so no operand is transposed or copied.
#[cfg(feature = "cuda")]
fn cublas<T>(
    index: usize,
    work: &Workload,
    repeat: usize,
    name: &str,
    dtype: tilemm::problem::DType,
    copies: HostCopies,
) -> Result<Measurement>
where
    T: tilemm::types::element::Element
        + cudarc::driver::DeviceRepr
        + cudarc::driver::ValidAsZeroBits,
    cudarc::cublas::CudaBlas: cudarc::cublas::Gemm<T>,
{
    let Workload {
        problem,
        operands,
        reference,
    } = work;
    let (a, b) = dense::<T>(problem, operands, dtype)?;
    use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
    use cudarc::driver::{sys::CUevent_flags, CudaContext};

    let error = |what: &str, e: &dyn std::fmt::Debug| tilemm::Error::Device {
        device: format!("CUDA device {index}"),
        reason: format!("cuBLAS baseline: {what}: {e:?}"),
    };
    if !tilemm::runtime::backend::cuda::driver_present() {
        return Err(tilemm::Error::NoDevice(format!(
            "no NVIDIA driver found (libcuda.so): {}",
            tilemm::runtime::backend::cuda::INSTALL_HINT
        ))
        .into());
    }
    // SAFETY: only tries to dlopen libcublas.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err(tilemm::Error::NoDevice(
            "libcublas.so not found: install the CUDA toolkit or `pip install nvidia-cublas-cu12`"
                .into(),
        )
        .into());
    }
    problem.check_operands(a.len(), b.len())?;
    let (m, k, n) = (problem.m(), problem.k(), problem.n());
    let int = |d: usize| i32::try_from(d).map_err(|e| error("dimension over 2³¹", &e));
    let (m32, k32, n32) = (int(m)?, int(k)?, int(n)?);
    let ctx = CudaContext::new(index).map_err(|e| error("context", &e))?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).map_err(|e| error("handle", &e))?;
    let a_dev = stream.clone_htod(a).map_err(|e| error("upload", &e))?;
    let b_dev = stream.clone_htod(b).map_err(|e| error("upload", &e))?;
    let mut c_dev = stream
        .alloc_zeros::<T>(m * n)
        .map_err(|e| error("alloc", &e))?;
    let config = GemmConfig::<T> {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n32,
        n: m32,
        k: k32,
        alpha: T::from_f64(1.0),
        lda: n32,
        ldb: k32,
        beta: T::from_f64(0.0),
        ldc: n32,
    };
    // Events around the call, as cuBLAS is usually timed.
    let run = |c_dev: &mut cudarc::driver::CudaSlice<T>| -> Result<f64> {
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(timing).map_err(|e| error("event", &e))?;
        let end = ctx.new_event(timing).map_err(|e| error("event", &e))?;
        start.record(&stream).map_err(|e| error("event", &e))?;
        if dtype == tilemm::problem::DType::TF32 {
            // SAFETY: as for `gemm` below; the f32 buffers are what GemmEx's CUDA_R_32F
            // describes, and α, β are f32 for a 32F compute type.
            unsafe { tf32_gemm(&blas, &config, &b_dev, &a_dev, c_dev) }
        } else {
            // SAFETY: the buffers hold k·n, m·k and m·n elements, as the config's leading
            // dimensions and sizes describe.
            unsafe { blas.gemm(config, &b_dev, &a_dev, c_dev) }
        }
        .map_err(|e| error(name, &e))?;
        end.record(&stream).map_err(|e| error("event", &e))?;
        end.synchronize().map_err(|e| error("sync", &e))?;
        Ok(f64::from(
            start.elapsed_ms(&end).map_err(|e| error("event", &e))?,
        ))
    };
    run(&mut c_dev)?;
    let c = stream
        .clone_dtoh(&c_dev)
        .map_err(|e| error("download", &e))?;
    let verified = reference.check(&T::wrap(c))?.pass;
    if copies == HostCopies::Resident {
        // On the clock that times tilemm's kernels where there is one (the kernels' span, in
        // place of the events').
        if let Ok(clock) = crate::measure::kernel_clock::KernelClock::get() {
            match measured(
                name.into(),
                problem,
                crate::measure::kernel_clock::TIMING,
                repeat,
                || Ok(verified),
                || clock.time(|| run(&mut c_dev).map(drop)),
            ) {
                // The clock could not time this row (a note says why where CUPTI failed):
                // events, as without it.
                Err(crate::Error::Clock(_)) => {}
                measurement => return measurement,
            }
        }
        return measured(
            name.into(),
            problem,
            "device events",
            repeat,
            || Ok(verified),
            || Sample::around(|| run(&mut c_dev)),
        );
    }
    // From host memory: A and B up, the product, C down into a host array, on the host clock.
    let mut a_dev = a_dev;
    let mut b_dev = b_dev;
    let mut c_host = vec![T::from_f64(0.0); m * n];
    let _pinned = if copies == HostCopies::Registered {
        let spans = [
            bytemuck::cast_slice::<T, u8>(a),
            bytemuck::cast_slice::<T, u8>(b),
            bytemuck::cast_slice::<T, u8>(&c_host),
        ];
        Some(tilemm::runtime::backend::cuda::register(index, &spans)?)
    } else {
        None
    };
    let mut from_host = || -> Result<f64> {
        let start = std::time::Instant::now();
        stream
            .memcpy_htod(a, &mut a_dev)
            .map_err(|e| error("upload", &e))?;
        stream
            .memcpy_htod(b, &mut b_dev)
            .map_err(|e| error("upload", &e))?;
        if dtype == tilemm::problem::DType::TF32 {
            // SAFETY: as in `run`.
            unsafe { tf32_gemm(&blas, &config, &b_dev, &a_dev, &mut c_dev) }
        } else {
            // SAFETY: as in `run`.
            unsafe { blas.gemm(config, &b_dev, &a_dev, &mut c_dev) }
        }
        .map_err(|e| error(name, &e))?;
        stream
            .memcpy_dtoh(&c_dev, c_host.as_mut_slice())
            .map_err(|e| error("download", &e))?;
        stream.synchronize().map_err(|e| error("sync", &e))?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    measured(
        name.into(),
        problem,
        "host clock",
        repeat,
        || Ok(verified),
        || from_host().map(Sample::host),
    )
}

/// cuBLAS's tf32 product: GemmEx on f32 data with `CUBLAS_COMPUTE_32F_FAST_TF32`. (cudarc's
/// `Gemm<f32>` is SGEMM, which computes in f32.)
///
/// # Safety
/// `config` describes the buffers: `a` (here B) k·n, `b` (A) m·k, `c` m·n elements of f32.
#[cfg(feature = "cuda")]
unsafe fn tf32_gemm<T>(
    blas: &cudarc::cublas::CudaBlas,
    config: &cudarc::cublas::GemmConfig<T>,
    a: &cudarc::driver::CudaSlice<T>,
    b: &cudarc::driver::CudaSlice<T>,
    c: &mut cudarc::driver::CudaSlice<T>,
) -> std::result::Result<(), cudarc::cublas::result::CublasError> {
    use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cudaDataType_t};
    use cudarc::driver::{DevicePtr, DevicePtrMut};
    let (alpha, beta) = (1.0f32, 0.0f32);
    let stream = c.stream().clone();
    let (a, _a) = a.device_ptr(&stream);
    let (b, _b) = b.device_ptr(&stream);
    let (c, _c) = c.device_ptr_mut(&stream);
    cudarc::cublas::result::gemm_ex(
        *blas.handle(),
        config.transa,
        config.transb,
        config.m,
        config.n,
        config.k,
        (&alpha as *const f32).cast(),
        a as *const _,
        cudaDataType_t::CUDA_R_32F,
        config.lda,
        b as *const _,
        cudaDataType_t::CUDA_R_32F,
        config.ldb,
        (&beta as *const f32).cast(),
        c as *mut _,
        cudaDataType_t::CUDA_R_32F,
        config.ldc,
        cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
    )
}

/// rocBLAS, opened at run time: the three entry points the baseline needs.
#[cfg(feature = "hip")]
mod rocblas {
    use std::os::raw::{c_int, c_void};

    pub type Handle = *mut c_void;
    pub type Status = c_int;
    pub const SUCCESS: Status = 0;
    pub const OPERATION_NONE: c_int = 111;

    pub type CreateHandle = unsafe extern "C" fn(*mut Handle) -> Status;
    pub type DestroyHandle = unsafe extern "C" fn(Handle) -> Status;
    #[allow(clippy::type_complexity)]
    pub type Sgemm = unsafe extern "C" fn(
        Handle,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
        *const f32,
        *const f32,
        c_int,
        *const f32,
        c_int,
        *const f32,
        *mut f32,
        c_int,
    ) -> Status;

    /// The library, from ROCM_PATH or the loader's search path.
    pub fn open() -> Result<libloading::Library, String> {
        let mut candidates: Vec<std::path::PathBuf> = ["ROCM_PATH", "HIP_PATH"]
            .into_iter()
            .filter_map(std::env::var_os)
            .map(|root| std::path::PathBuf::from(root).join("lib/librocblas.so"))
            .collect();
        candidates.push("librocblas.so".into());
        candidates.push("librocblas.so.4".into());
        let mut errors = Vec::new();
        for candidate in candidates {
            // SAFETY: loading rocBLAS runs its initialisers, which only register its kernels.
            match unsafe { libloading::Library::new(&candidate) } {
                Ok(lib) => return Ok(lib),
                Err(e) => errors.push(format!("{}: {e}", candidate.display())),
            }
        }
        Err(errors.join("; "))
    }
}

/// rocBLAS SGEMM on HIP device `index`, the row-major product computed as column-major
/// Cᵀ = Bᵀ·Aᵀ like the cuBLAS baseline.
#[cfg(feature = "hip")]
pub fn rocblas_sgemm(index: usize, work: &Workload, repeat: usize) -> Result<Measurement> {
    let Workload {
        problem,
        operands,
        reference,
    } = work;
    let (a, b) = dense::<f32>(problem, operands, tilemm::problem::DType::F32)?;
    use std::os::raw::c_void;

    use cubecl_hip_sys as hip;

    let device = format!("HIP device {index}");
    let error = |what: &str, status: i64| tilemm::Error::Device {
        device: device.clone(),
        reason: format!("rocBLAS baseline: {what} failed with status {status}"),
    };
    if !tilemm::runtime::backend::hip::runtime_present() {
        return Err(tilemm::Error::NoDevice(format!(
            "no AMD ROCm runtime found: {}",
            tilemm::runtime::backend::hip::INSTALL_HINT
        ))
        .into());
    }
    let lib = rocblas::open().map_err(|e| {
        tilemm::Error::NoDevice(format!(
            "librocblas.so not found ({e}): install rocBLAS (part of ROCm)"
        ))
    })?;
    problem.check_operands(a.len(), b.len())?;
    let (m, k, n) = (problem.m(), problem.k(), problem.n());
    let int = |d: usize| i32::try_from(d).map_err(|_| error("dimension over 2³¹", d as i64));
    let (m32, k32, n32) = (int(m)?, int(k)?, int(n)?);
    let check = |what: &str, status: hip::hipError_t| {
        if status == hip::HIP_SUCCESS {
            Ok(())
        } else {
            Err(error(what, status as i64))
        }
    };

    // SAFETY: every pointer passed below is either allocated here with the size the call
    // uses, or a host slice of the length the problem implies; each allocation is freed once.
    unsafe {
        let create: libloading::Symbol<rocblas::CreateHandle> = lib
            .get(b"rocblas_create_handle\0")
            .map_err(|_| error("symbol rocblas_create_handle", -1))?;
        let destroy: libloading::Symbol<rocblas::DestroyHandle> = lib
            .get(b"rocblas_destroy_handle\0")
            .map_err(|_| error("symbol rocblas_destroy_handle", -1))?;
        let sgemm: libloading::Symbol<rocblas::Sgemm> = lib
            .get(b"rocblas_sgemm\0")
            .map_err(|_| error("symbol rocblas_sgemm", -1))?;
        check("hipSetDevice", hip::hipSetDevice(index as i32))?;

        let mut buffers: [*mut c_void; 3] = [std::ptr::null_mut(); 3];
        let sizes = problem.operand_bytes();
        let result = (|| -> Result<Measurement> {
            for (buffer, &size) in buffers.iter_mut().zip(&sizes) {
                check("hipMalloc", hip::hipMalloc(buffer, size))?;
            }
            for (i, host) in [a, b].into_iter().enumerate() {
                check(
                    "hipMemcpy",
                    hip::hipMemcpy(
                        buffers[i],
                        host.as_ptr().cast(),
                        sizes[i],
                        hip::hipMemcpyKind_hipMemcpyHostToDevice,
                    ),
                )?;
            }
            let mut handle: rocblas::Handle = std::ptr::null_mut();
            let status = create(&mut handle);
            if status != rocblas::SUCCESS {
                return Err(error("rocblas_create_handle", i64::from(status)).into());
            }
            let (alpha, beta) = (1.0f32, 0.0f32);
            let run = || -> Result<f64> {
                let mut events: [hip::hipEvent_t; 2] = [std::ptr::null_mut(); 2];
                for event in &mut events {
                    check("hipEventCreate", hip::hipEventCreate(event))?;
                }
                check(
                    "hipEventRecord",
                    hip::hipEventRecord(events[0], std::ptr::null_mut()),
                )?;
                let status = sgemm(
                    handle,
                    rocblas::OPERATION_NONE,
                    rocblas::OPERATION_NONE,
                    n32,
                    m32,
                    k32,
                    &alpha,
                    buffers[1].cast(),
                    n32,
                    buffers[0].cast(),
                    k32,
                    &beta,
                    buffers[2].cast(),
                    n32,
                );
                check(
                    "hipEventRecord",
                    hip::hipEventRecord(events[1], std::ptr::null_mut()),
                )?;
                check("hipEventSynchronize", hip::hipEventSynchronize(events[1]))?;
                let mut ms = 0.0f32;
                check(
                    "hipEventElapsedTime",
                    hip::hipEventElapsedTime(&mut ms, events[0], events[1]),
                )?;
                for event in events {
                    hip::hipEventDestroy(event);
                }
                if status != rocblas::SUCCESS {
                    return Err(error("rocblas_sgemm", i64::from(status)).into());
                }
                Ok(f64::from(ms))
            };
            let warm_up = || {
                run()?;
                let mut c = tilemm::host::zeros::<f32>(m * n, "C from the device")?;
                check(
                    "hipMemcpy",
                    hip::hipMemcpy(
                        c.as_mut_ptr().cast(),
                        buffers[2],
                        sizes[2],
                        hip::hipMemcpyKind_hipMemcpyDeviceToHost,
                    ),
                )?;
                Ok(reference
                    .check(&tilemm::types::element::HostData::F32(c))?
                    .pass)
            };
            let measurement = measured(
                "rocBLAS sgemm".into(),
                problem,
                "device events",
                repeat,
                warm_up,
                || Sample::around(run),
            );
            destroy(handle);
            measurement
        })();
        for buffer in buffers.into_iter().filter(|b| !b.is_null()) {
            hip::hipFree(buffer);
        }
        result
    }
}
