//! Running a plan on a CubeCL runtime: upload, launch, download, each timed.

use std::time::{Duration, Instant};

use cubecl::future::block_on;
use cubecl::prelude::*;
use cubecl::profile::TimingMethod;

use crate::device::DeviceInfo;
use crate::error::{one_line, Error, Result};
use crate::host;
use crate::kernels;
use crate::plan::Plan;
use crate::problem::Problem;

/// An open device on one CubeCL runtime (wgpu, CUDA, ...).
pub struct Session<R: Runtime> {
    client: ComputeClient<R>,
    info: DeviceInfo,
}

/// One GPU product and where its time went.
#[derive(Clone, Debug)]
pub struct GpuRun {
    /// The result, row-major.
    pub c: Vec<f32>,
    /// Copying A and B to the device and allocating C, until the device is idle.
    pub upload: Duration,
    /// From the launch call until the kernel has finished (with JIT compilation, unless the
    /// kernel was compiled before: [`Session::compile`]).
    pub launch: Duration,
    /// The kernel alone, as the device's timestamps (or, without them, the host clock) saw it.
    pub kernel: Duration,
    /// Copying C back to the host.
    pub download: Duration,
}

impl GpuRun {
    /// Upload, launch and download together.
    pub fn total(&self) -> Duration {
        self.upload + self.launch + self.download
    }
}

impl<R: Runtime> Session<R> {
    pub(crate) fn new(client: ComputeClient<R>, info: DeviceInfo) -> Self {
        Session { client, info }
    }

    /// The CubeCL client of the device.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// The device this session runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Whether kernel times come from device timestamps rather than the host clock.
    pub fn has_device_timestamps(&self) -> bool {
        self.client.properties().timing_method == TimingMethod::Device
    }

    /// Compiles `plan`'s kernel by launching it once on a 1×1×1 problem, and returns how long
    /// that took: JIT compilation (CubeCL's code generation and the driver's compiler; lavapipe
    /// compiles at the first dispatch) plus one tiny dispatch. Measured directly, not as the
    /// difference of two runs. Later launches of the plan, at any size, reuse the kernel.
    pub fn compile(&self, plan: &Plan) -> Result<Duration> {
        let tiny = Problem::new(1, 1, 1)?;
        plan.check(&tiny, &self.info.limits, &self.info.name)?;
        let client = &self.client;
        let start = Instant::now();
        let a = client.create_from_slice(f32::as_bytes(&[0.0]));
        let b = client.create_from_slice(f32::as_bytes(&[0.0]));
        let c = client.empty(4);
        kernels::launch(client, plan, &tiny, &a, &b, &c);
        self.sync()?;
        Ok(start.elapsed())
    }

    /// C = A·B with `plan`, on row-major f32 operands of `problem`.
    pub fn matmul(&self, problem: &Problem, plan: &Plan, a: &[f32], b: &[f32]) -> Result<GpuRun> {
        problem.check_operands(a, b)?;
        plan.check(problem, &self.info.limits, &self.info.name)?;
        let client = &self.client;

        let start = Instant::now();
        let a_handle = client.create_from_slice(f32::as_bytes(a));
        let b_handle = client.create_from_slice(f32::as_bytes(b));
        let c_handle = client.empty(problem.operand_bytes()[2]);
        self.sync()?;
        let upload = start.elapsed();

        let start = Instant::now();
        let (flushed, profile) = client
            .profile(
                || {
                    kernels::launch(client, plan, problem, &a_handle, &b_handle, &c_handle);
                    client.flush()
                },
                "tilemm::matmul",
            )
            .map_err(|e| self.error(format!("{e:?}")))?;
        flushed.map_err(|e| self.error(e.to_string()))?;
        let kernel = block_on(profile.resolve()).duration();
        self.sync()?;
        let launch = start.elapsed();

        let start = Instant::now();
        let bytes = client
            .read_one(c_handle)
            .map_err(|e| self.error(e.to_string()))?;
        let mut c = host::with_capacity(problem.c_len(), "C from the device")?;
        c.extend_from_slice(f32::from_bytes(&bytes));
        drop(bytes);
        let download = start.elapsed();

        Ok(GpuRun {
            c,
            upload,
            launch,
            kernel,
            download,
        })
    }

    fn sync(&self) -> Result<()> {
        block_on(self.client.sync()).map_err(|e| self.error(e.to_string()))
    }

    fn error(&self, reason: String) -> Error {
        Error::Device {
            device: self.info.name.clone(),
            reason: one_line(&reason),
        }
    }
}
