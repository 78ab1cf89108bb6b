//! Peers measured beside the ladder by `tilemm bench --peers`, on the same device and resident
//! matrices, timed and verified the same way: CubeCL's own matmul, cubek-matmul 0.2 (the
//! release that pairs with cubecl 0.10), in the strategies that can run without tensor cores
//! and the one it picks itself. (The CPU path and cuBLAS/rocBLAS are measured by `bench`
//! whether or not peers are asked for.)

use std::fmt;

use crate::backend::GpuSession;
use crate::bench::{Measurement, Workload};
use crate::error::Result;

/// A cubek-matmul strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubekStrategy {
    /// `Strategy::Auto`: a tensor-core strategy where the device has one, else SimpleUnit.
    Auto,
    /// `Strategy::SimpleUnit`: a register tile per unit, tiles staged in shared memory.
    SimpleUnit,
    /// `Strategy::DoubleUnit`: SimpleUnit with double-buffered stages.
    DoubleUnit,
    /// `Strategy::Naive`: one unit per entry of C.
    Naive,
}

impl CubekStrategy {
    /// Every strategy measured, in that order.
    pub const ALL: [CubekStrategy; 4] = [
        CubekStrategy::Auto,
        CubekStrategy::SimpleUnit,
        CubekStrategy::DoubleUnit,
        CubekStrategy::Naive,
    ];

    #[cfg(feature = "peers")]
    fn strategy(self) -> cubek_matmul::launch::Strategy {
        use cubek_matmul::launch::Strategy;
        match self {
            CubekStrategy::Auto => Strategy::Auto,
            CubekStrategy::SimpleUnit => Strategy::SimpleUnit(Default::default()),
            CubekStrategy::DoubleUnit => Strategy::DoubleUnit(Default::default()),
            CubekStrategy::Naive => Strategy::Naive,
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
        })
    }
}

/// Whether this build has the peers (`--features peers`).
pub const BUILT: bool = cfg!(feature = "peers");

/// Times cubek-matmul's `strategy` on `work` as [`crate::bench::gpu_kernel`] times a rung: one
/// verified warm-up run (which compiles), then `repeat` timed runs on resident matrices.
/// Plain f32 products only (cubek has no α/β); a strategy the device cannot run is an error.
#[cfg(feature = "peers")]
pub fn cubek(
    gpu: &GpuSession,
    work: &Workload,
    strategy: CubekStrategy,
    repeat: usize,
) -> Result<Measurement> {
    let cubek = strategy.strategy();
    let name = format!("cubek-matmul 0.2 {strategy}");
    crate::bench::resident(gpu, work, name, repeat, |a, b, c| {
        gpu.cubek(&cubek, &work.problem, [a, b, c]).map(|()| 1)
    })
}

/// Without `--features peers`: says how to build them.
#[cfg(not(feature = "peers"))]
pub fn cubek(
    _gpu: &GpuSession,
    _work: &Workload,
    _strategy: CubekStrategy,
    _repeat: usize,
) -> Result<Measurement> {
    Err(crate::error::Error::View(
        "cubek-matmul peers are not in this build: build with `cargo build --release -p \
         tilemm-cli --features peers`"
            .into(),
    ))
}
