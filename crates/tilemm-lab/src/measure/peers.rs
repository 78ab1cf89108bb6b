//! Peers measured beside the ladder by `tilemm bench --peers`, on the same device and resident
//! matrices, timed and verified the same way: CubeCL's own matmul, cubek-matmul 0.2 (the
//! release that pairs with cubecl 0.10), in its unit (SIMT) strategies, its tensor-core ones
//! (cmma and manual MMA, single- and double-buffered, specialized) and the one it picks
//! itself. (The CPU path and cuBLAS/rocBLAS are measured by `bench` whether or not peers are
//! asked for.)
//!
//! Each row is labelled by what it computes. cubek-matmul runs f32 inputs on tensor cores as
//! tf32 wherever the device has the type (`adjust_dtypes` in its `definition/blueprint.rs`):
//! such a strategy is a tf32 peer, measured with `--dtype tf32`, never an f32 one.

use std::fmt;

use crate::measure::bench::{Measurement, Workload};
use crate::{Error, Result};
#[cfg(feature = "peers")]
use cubecl::prelude::*;
use tilemm::device::DeviceInfo;
use tilemm::problem::DType;
use tilemm::runtime::backend::GpuSession;
#[cfg(feature = "peers")]
use tilemm::{
    one_line,
    problem::Problem,
    runtime::gpu::{DeviceMatrix, Session},
};

/// A cubek-matmul strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubekStrategy {
    /// `Strategy::Auto`: `SimpleCyclicCmma` where the device runs it, else `SimpleUnit`.
    Auto,
    /// `Strategy::SimpleUnit`: a register tile per unit, tiles staged in shared memory.
    SimpleUnit,
    /// `Strategy::DoubleUnit`: SimpleUnit with double-buffered stages.
    DoubleUnit,
    /// `Strategy::Naive`: one unit per entry of C.
    Naive,
    /// `Strategy::SimpleCyclicCmma`: cmma fragments, one stage, cyclic loads.
    SimpleCmma,
    /// `Strategy::SimpleCyclicMma`: manual MMA (mma.sync, ldmatrix), one stage.
    SimpleMma,
    /// `Strategy::DoubleCyclicMma`: manual MMA, double-buffered stages.
    DoubleMma,
    /// `Strategy::DoubleAsyncCyclicMma`: manual MMA, double-buffered with async copies.
    DoubleAsyncMma,
    /// `Strategy::SpecializedCyclicMma`: manual MMA, producer and consumer planes.
    SpecializedMma,
}

impl CubekStrategy {
    /// Every strategy measured, in that order.
    pub const ALL: [CubekStrategy; 9] = [
        CubekStrategy::Auto,
        CubekStrategy::SimpleUnit,
        CubekStrategy::DoubleUnit,
        CubekStrategy::Naive,
        CubekStrategy::SimpleCmma,
        CubekStrategy::SimpleMma,
        CubekStrategy::DoubleMma,
        CubekStrategy::DoubleAsyncMma,
        CubekStrategy::SpecializedMma,
    ];

    /// Whether it runs on matrix units (tensor cores, cooperative matrices).
    pub fn matrix_units(self) -> bool {
        !matches!(
            self,
            CubekStrategy::Auto
                | CubekStrategy::SimpleUnit
                | CubekStrategy::DoubleUnit
                | CubekStrategy::Naive
        )
    }

    /// The input type it multiplies `dtype`'s data in on `device`: tf32 for f32 data on
    /// matrix units where the device has tf32, else the data's own type. (`Auto` is resolved
    /// first: see [`cubek`].)
    pub fn computes(self, dtype: DType, device: &DeviceInfo) -> DType {
        let data = dtype.storage();
        if self.matrix_units() && data == DType::F32 && device.types.tf32 {
            DType::TF32
        } else {
            data
        }
    }

    #[cfg(feature = "peers")]
    fn strategy(self) -> cubek_matmul::launch::Strategy {
        use cubek_matmul::launch::Strategy;
        match self {
            CubekStrategy::Auto => Strategy::Auto,
            CubekStrategy::SimpleUnit => Strategy::SimpleUnit(Default::default()),
            CubekStrategy::DoubleUnit => Strategy::DoubleUnit(Default::default()),
            CubekStrategy::Naive => Strategy::Naive,
            CubekStrategy::SimpleCmma => Strategy::SimpleCyclicCmma(Default::default()),
            CubekStrategy::SimpleMma => Strategy::SimpleCyclicMma(Default::default()),
            CubekStrategy::DoubleMma => Strategy::DoubleCyclicMma(Default::default()),
            CubekStrategy::DoubleAsyncMma => Strategy::DoubleAsyncCyclicMma(Default::default()),
            CubekStrategy::SpecializedMma => Strategy::SpecializedCyclicMma(Default::default()),
        }
    }
}

impl fmt::Display for CubekStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CubekStrategy::Auto => "auto",
            CubekStrategy::SimpleUnit => "simple-unit",
            CubekStrategy::DoubleUnit => "double-unit",
            CubekStrategy::Naive => "naive",
            CubekStrategy::SimpleCmma => "simple-cyclic-cmma",
            CubekStrategy::SimpleMma => "simple-cyclic-mma",
            CubekStrategy::DoubleMma => "double-cyclic-mma",
            CubekStrategy::DoubleAsyncMma => "double-async-cyclic-mma",
            CubekStrategy::SpecializedMma => "specialized-cyclic-mma",
        })
    }
}

/// Whether this build has the peers (`--features peers`).
pub(crate) const BUILT: bool = cfg!(feature = "peers");

/// Times cubek-matmul's `strategy` on `work` as [`crate::measure::bench::gpu_kernel`] times a rung: one
/// verified warm-up run (which compiles), then `repeat` timed runs on resident matrices.
/// Plain products only (cubek has no α/β). A strategy the device cannot run is an error, and
/// so is one that computes another precision than `work`'s (tf32 for f32, or f32 for tf32).
/// `Auto` is resolved as cubek-matmul resolves it (its tensor-core strategy if that launches,
/// else SimpleUnit) and labelled by what it ran.
#[cfg(feature = "peers")]
pub fn cubek(
    gpu: &GpuSession,
    work: &Workload,
    strategy: CubekStrategy,
    repeat: usize,
) -> Result<Measurement> {
    let problem = &work.problem;
    let (resolved, name) = match strategy {
        CubekStrategy::Auto => {
            let a = gpu.upload(&work.operands.a)?;
            let b = gpu.upload(&work.operands.b)?;
            let c = gpu.output(problem, None)?;
            let cmma = CubekStrategy::SimpleCmma;
            let ran = match run_cubek(gpu, &cmma.strategy(), problem, [&a, &b, &c]) {
                Ok(()) => cmma,
                Err(_) => CubekStrategy::SimpleUnit,
            };
            (ran, format!("cubek-matmul 0.2 auto ({ran})"))
        }
        other => (other, format!("cubek-matmul 0.2 {other}")),
    };
    let wanted = problem.precision().input;
    let computed = resolved.computes(wanted, gpu.info());
    if computed != wanted {
        return Err(Error::Baseline {
            name,
            reason: format!("it computes {computed} here, not {wanted}"),
        });
    }
    let cubek = resolved.strategy();
    crate::measure::bench::resident(gpu, work, name, repeat, |a, b, c| {
        run_cubek(gpu, &cubek, problem, [a, b, c]).map(|()| 1)
    })
}

/// Enqueues C = A·B with CubeCL's own matmul (cubek-matmul) in `strategy`, on resident
/// matrices, row-major and contiguous, batch 1, in any of tilemm's precisions (f16 and bf16
/// accumulate in f32 there too): what `bench` measures peers on.
#[cfg(feature = "peers")]
fn launch_cubek<R: cubecl::Runtime>(
    session: &Session<R>,
    strategy: &cubek_matmul::launch::Strategy,
    problem: &Problem,
    [a, b, c]: [&DeviceMatrix; 3],
) -> Result<()> {
    use cubek_matmul::definition::{MatmulElems, MatmulGlobalElems};
    let dtype = problem.precision().input;
    let plain = problem.batch() == 1
        && problem.precision() == tilemm::problem::Precision::of(dtype)
        && [problem.a(), problem.b(), problem.c()]
            .iter()
            .all(|v| v.col_stride == 1 && v.row_stride == v.cols && v.offset == 0);
    if !plain {
        return Err(Error::Baseline {
            name: "cubek-matmul".into(),
            reason: "measured on plain products only (batch 1, dense, row-major, one \
                     precision)"
                .into(),
        });
    }
    // (cubek-matmul panics on a type the device lacks; tilemm packs bf16 there.)
    if dtype == DType::BF16 && !session.info().types.bf16 {
        return Err(Error::Baseline {
            name: "cubek-matmul".into(),
            reason: "it needs a bf16 type, which this device lacks".into(),
        });
    }
    let tensor = |m: &DeviceMatrix, rows: usize, cols: usize| TensorBinding::<R> {
        handle: m.handle.clone().binding(),
        strides: [cols, 1].into(),
        shape: [rows, cols].into(),
        runtime: std::marker::PhantomData,
    };
    let element = match dtype {
        DType::F16 => half::f16::as_type_native_unchecked(),
        DType::BF16 => half::bf16::as_type_native_unchecked(),
        // cubek-matmul takes tf32 as f32 data, and rounds it on its tensor-core paths.
        DType::F32 | DType::TF32 => f32::as_type_native_unchecked(),
        DType::F64 => f64::as_type_native_unchecked(),
    }
    .storage_type();
    let (mm, k, n) = (problem.m(), problem.k(), problem.n());
    let lhs = cubek_std::InputBinding::new(tensor(a, mm, k), element);
    let rhs = cubek_std::InputBinding::new(tensor(b, k, n), element);
    // Half precisions accumulate in f32, as tilemm's do.
    let mut dtypes = MatmulElems::from_globals(&MatmulGlobalElems {
        lhs: element,
        rhs: element,
        out: element,
    });
    cubek_matmul::launch::launch_ref(
        strategy,
        session.client(),
        lhs,
        rhs,
        tensor(c, mm, n),
        &mut dtypes,
    )
    .map_err(|e| Error::Baseline {
        name: format!("cubek-matmul {strategy}"),
        reason: one_line(&format!("{e:?}")),
    })
}

/// [`launch_cubek`] on whichever runtime `gpu` is, a panic inside it as an error.
#[cfg(feature = "peers")]
fn run_cubek(
    gpu: &GpuSession,
    strategy: &cubek_matmul::launch::Strategy,
    problem: &Problem,
    matrices: [&DeviceMatrix; 3],
) -> Result<()> {
    struct Cubek<'a> {
        strategy: &'a cubek_matmul::launch::Strategy,
        problem: &'a Problem,
        matrices: [&'a DeviceMatrix; 3],
    }
    impl tilemm::runtime::backend::OnRuntime for Cubek<'_> {
        // The peer's own errors ride inside tilemm's.
        type Output = Result<()>;
        fn run<R: cubecl::Runtime>(self, session: &Session<R>) -> tilemm::Result<Result<()>> {
            Ok(launch_cubek(
                session,
                self.strategy,
                self.problem,
                self.matrices,
            ))
        }
    }
    gpu.with_runtime(Cubek {
        strategy,
        problem,
        matrices,
    })?
}

/// Without `--features peers`: says how to build them.
#[cfg(not(feature = "peers"))]
pub fn cubek(
    _gpu: &GpuSession,
    _work: &Workload,
    _strategy: CubekStrategy,
    _repeat: usize,
) -> Result<Measurement> {
    Err(Error::Tilemm(tilemm::Error::NotBuilt {
        what: "the cubek-matmul peers".into(),
        feature: "peers",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilemm::device::{test_device, DeviceKind};

    #[test]
    fn tensor_core_strategies_on_f32_data_are_tf32_where_the_device_has_it() {
        let mut device = test_device(0, DeviceKind::DiscreteGpu);
        device.types.tf32 = true;
        for s in CubekStrategy::ALL {
            let expected = if s.matrix_units() {
                DType::TF32
            } else {
                DType::F32
            };
            assert_eq!(s.computes(DType::F32, &device), expected, "{s}");
            assert_eq!(s.computes(DType::TF32, &device), expected, "{s}");
            assert_eq!(s.computes(DType::F16, &device), DType::F16, "{s}");
        }
        // Without tf32 (AMD's f32 matrix cores, lavapipe) f32 stays f32, and tf32 asked for
        // is f32 computed.
        device.types.tf32 = false;
        for s in CubekStrategy::ALL {
            assert_eq!(s.computes(DType::TF32, &device), DType::F32, "{s}");
        }
    }
}
