//! Which kernel runs and how it is configured: one small value per launch.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::problem::{DType, Problem};

/// The kernels of the ladder, from the bottom rung up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Kernel {
    /// One unit per element of C, reading A and B straight from global memory.
    Naive,
    /// TPB×TPB tiles of A and B staged in shared memory between two barriers.
    Tiled,
}

impl Kernel {
    /// Every kernel, in ladder order.
    pub const ALL: [Kernel; 2] = [Kernel::Naive, Kernel::Tiled];

    /// The kernel's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Naive => "naive",
            Kernel::Tiled => "tiled",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Kernel::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kernel '{s}' (choose one of: {})", names.join(", "))
            })
    }
}

/// A kernel and its configuration.
///
/// Both rungs so far launch TPB×TPB units per cube, one per element of C, over a grid that covers
/// C; the tiled kernel also stages 2·TPB² elements in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Plan {
    /// Which kernel.
    pub kernel: Kernel,
    /// Threads per block along each axis (the example's TPB); also the shared tile's side.
    pub tpb: u32,
}

/// The tile sizes the kernels are built for.
pub const SUPPORTED_TPB: [u32; 3] = [8, 16, 32];

/// The example's tile size.
pub const DEFAULT_TPB: u32 = 16;

/// The most loop iterations a unit may run in one launch, over all of a kernel's loops together.
///
/// Some drivers cut long shader loops short and return a wrong sum without any error: Debian
/// 12's lavapipe (Mesa 22.3) stops after 65535 iterations counted over *all* loops of an
/// invocation, nested or one after another (measured: a 300×300 nested loop ran 65101 times),
/// so nesting loops does not help. tilemm therefore splits K into slabs, one launch each, the
/// later ones continuing the sum held in C, so that no unit ever runs more than this many
/// iterations in one launch. Half of Mesa's cap, for drivers with less.
pub const LOOP_TRIP_LIMIT: u32 = 1 << 15;

/// Grid, block and shared memory of one launch, as a report shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LaunchShape {
    /// Cubes (blocks, workgroups) along x (columns of C), y (rows of C) and z.
    pub grid: [u32; 3],
    /// Units (threads) per cube along x, y and z.
    pub block: [u32; 3],
    /// Shared memory per cube, in bytes.
    pub shared_bytes: usize,
    /// Launches the product takes: K is split into slabs of at most `k_per_launch`.
    pub launches: u32,
    /// Elements of K one launch covers (the last slab may be shorter).
    pub k_per_launch: u32,
}

/// One launch's share of K: the half-open range `begin..end`, and whether C already holds the
/// sum of the slabs before it (then the kernel continues that sum instead of starting at 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KSlab {
    /// First index of K in this launch.
    pub begin: u32,
    /// One past the last index of K in this launch.
    pub end: u32,
    /// Whether C holds the partial sums of the slabs before this one.
    pub accumulate: bool,
}

impl Plan {
    /// A plan, if `tpb` is one of [`SUPPORTED_TPB`].
    pub fn new(kernel: Kernel, tpb: u32) -> Result<Self> {
        if !SUPPORTED_TPB.contains(&tpb) {
            return Err(Error::UnsupportedTile { tpb });
        }
        Ok(Plan { kernel, tpb })
    }

    /// Threads (units) per block.
    pub fn threads_per_block(&self) -> u32 {
        self.tpb * self.tpb
    }

    /// Shared memory per block, in bytes, for elements of `dtype`.
    pub fn shared_bytes(&self, dtype: DType) -> usize {
        match self.kernel {
            Kernel::Naive => 0,
            Kernel::Tiled => 2 * (self.tpb * self.tpb) as usize * dtype.size_bytes(),
        }
    }

    /// Elements of K a unit consumes per iteration of the kernel's loop (the loop-trip budget's
    /// exchange rate): the naive kernel's loop takes one, the tiled kernel's one tile of TPB.
    pub fn k_per_trip(&self) -> u32 {
        match self.kernel {
            Kernel::Naive => 1,
            Kernel::Tiled => self.tpb,
        }
    }

    /// Elements of K one launch may cover without a unit exceeding [`LOOP_TRIP_LIMIT`].
    pub fn k_per_launch(&self) -> u32 {
        LOOP_TRIP_LIMIT.saturating_mul(self.k_per_trip())
    }

    /// The slabs of K, one per launch, in order. `problem` has been checked (`Plan::check`), so
    /// K fits 32 bits.
    pub fn k_slabs(&self, problem: &Problem) -> impl Iterator<Item = KSlab> {
        let k = problem.k as u32;
        let step = self.k_per_launch();
        (0..k.div_ceil(step)).map(move |i| {
            let begin = i * step;
            KSlab {
                begin,
                end: begin.saturating_add(step).min(k),
                accumulate: i > 0,
            }
        })
    }

    /// Whether the compiled kernel may spill registers to local memory. No rung so far does:
    /// the compile check fails on a spill in a kernel that promises none.
    pub fn may_spill(&self) -> bool {
        false
    }

    /// Grid, block and shared memory for `problem`. Fails when the grid overflows 32 bits.
    pub fn launch_shape(&self, problem: &Problem) -> Result<LaunchShape> {
        let tiles = |len: usize| u32::try_from(len.div_ceil(self.tpb as usize));
        let (Ok(gx), Ok(gy)) = (tiles(problem.n), tiles(problem.m)) else {
            return Err(Error::TooLarge {
                m: problem.m,
                k: problem.k,
                n: problem.n,
                why: "the grid of blocks does not fit 32-bit counts".into(),
            });
        };
        // The tiled kernel indexes up to a tile past the end of K before its guard.
        let Some(k) = u32::try_from(problem.k)
            .ok()
            .filter(|k| k.checked_add(self.tpb).is_some())
        else {
            return Err(Error::TooLarge {
                m: problem.m,
                k: problem.k,
                n: problem.n,
                why: "K does not fit the kernels' 32-bit indices".into(),
            });
        };
        let shared_bytes = self.shared_bytes(problem.dtype);
        let k_per_launch = self.k_per_launch();
        Ok(LaunchShape {
            grid: [gx, gy, 1],
            block: [self.tpb, self.tpb, 1],
            shared_bytes,
            launches: k.div_ceil(k_per_launch),
            k_per_launch: k_per_launch.min(k),
        })
    }

    /// Checks the launch and the operands of `problem` against a device's limits, so that what
    /// cannot run is refused with a message instead of failing (or silently misbehaving) on the
    /// device.
    pub fn check(&self, problem: &Problem, limits: &DeviceLimits, device: &str) -> Result<()> {
        let shape = self.launch_shape(problem)?;
        let refuse = |what: String, needed: String, limit: String| Error::DeviceLimit {
            what,
            needed,
            limit,
            device: device.to_string(),
        };
        let units = shape.block.iter().product::<u32>();
        if units > limits.max_units_per_cube {
            return Err(refuse(
                format!("the {} kernel with TPB={}", self.kernel, self.tpb),
                format!("{units} threads per block"),
                format!("{}", limits.max_units_per_cube),
            ));
        }
        for axis in 0..2 {
            if shape.block[axis] > limits.max_cube_dim[axis] {
                return Err(refuse(
                    format!("the {} kernel with TPB={}", self.kernel, self.tpb),
                    format!("a block side of {}", shape.block[axis]),
                    format!("{}", limits.max_cube_dim[axis]),
                ));
            }
            if shape.grid[axis] > limits.max_cube_count[axis] {
                return Err(refuse(
                    format!(
                        "problem {}×{}×{} with TPB={}",
                        problem.m, problem.k, problem.n, self.tpb
                    ),
                    format!(
                        "{} blocks along {}",
                        shape.grid[axis],
                        ["x (columns)", "y (rows)"][axis]
                    ),
                    format!("{}", limits.max_cube_count[axis]),
                ));
            }
        }
        if shape.shared_bytes > limits.max_shared_bytes {
            return Err(refuse(
                format!("the {} kernel with TPB={}", self.kernel, self.tpb),
                format!("{} bytes of shared memory", shape.shared_bytes),
                format!("{} bytes", limits.max_shared_bytes),
            ));
        }
        let (m, k, n) = (problem.m, problem.k, problem.n);
        let dtype = problem.dtype.name();
        if let Some(memory) = limits.memory_bytes {
            // The operands live on the device together; a runtime that runs out of memory
            // panics inside CubeCL instead of reporting it.
            let together = problem
                .operand_bytes()
                .iter()
                .try_fold(0u64, |sum, &b| sum.checked_add(b as u64));
            if together.is_none_or(|t| t > memory) {
                return Err(refuse(
                    format!("A, B and C of problem {m}×{k}×{n} ({dtype}) together"),
                    together.map_or_else(|| "more than 2⁶⁴ bytes".into(), format_bytes),
                    format!("{} of device memory", format_bytes(memory)),
                ));
            }
        }
        for ((name, rows, cols), bytes) in [("A", m, k), ("B", k, n), ("C", m, n)]
            .into_iter()
            .zip(problem.operand_bytes())
        {
            let what = || format!("matrix {name} ({rows}×{cols} {dtype})");
            let limit = limits.max_binding_bytes.min(limits.max_buffer_bytes);
            if bytes as u64 > limit {
                return Err(refuse(
                    what(),
                    format_bytes(bytes as u64),
                    format_bytes(limit),
                ));
            }
            // The kernels index with 32-bit integers.
            if rows * cols > u32::MAX as usize {
                return Err(refuse(
                    what(),
                    format!("{} elements", rows * cols),
                    format!("{} elements (32-bit indexing)", u32::MAX),
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, TPB={}", self.kernel, self.tpb)
    }
}

/// Bytes in the unit a person reads best (B, KiB, MiB, GiB).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {} ({bytes} bytes)", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lavapipe_like() -> DeviceLimits {
        DeviceLimits {
            max_shared_bytes: 32768,
            max_units_per_cube: 1024,
            max_cube_dim: [1024, 1024, 64],
            max_cube_count: [65535, 65535, 65535],
            max_binding_bytes: 128 << 20,
            max_buffer_bytes: (1 << 31) - 1,
            memory_bytes: None,
        }
    }

    #[test]
    fn only_supported_tiles_are_accepted() {
        assert!(matches!(
            Plan::new(Kernel::Tiled, 12),
            Err(Error::UnsupportedTile { tpb: 12 })
        ));
        for tpb in SUPPORTED_TPB {
            assert_eq!(Plan::new(Kernel::Naive, tpb).unwrap().tpb, tpb);
        }
    }

    #[test]
    fn launch_covers_c_with_ceil_division() {
        let plan = Plan::new(Kernel::Tiled, 16).unwrap();
        let shape = plan
            .launch_shape(&Problem::new(1000, 777, 513).unwrap())
            .unwrap();
        assert_eq!(shape.grid, [33, 63, 1]);
        assert_eq!(shape.block, [16, 16, 1]);
        assert_eq!(shape.shared_bytes, 2048);
        let naive = Plan::new(Kernel::Naive, 16).unwrap();
        assert_eq!(
            naive
                .launch_shape(&Problem::new(1, 1, 1).unwrap())
                .unwrap()
                .shared_bytes,
            0
        );
    }

    #[test]
    fn k_is_split_so_no_unit_loops_past_the_trip_limit() {
        let p = Problem::new(2, 3 * (LOOP_TRIP_LIMIT as usize) * 16 + 5, 2).unwrap();
        for (kernel, per_trip) in [(Kernel::Naive, 1), (Kernel::Tiled, 16)] {
            let plan = Plan::new(kernel, 16).unwrap();
            let slabs: Vec<KSlab> = plan.k_slabs(&p).collect();
            // Contiguous, covering K exactly once, only the first starting a fresh sum.
            assert_eq!(slabs[0].begin, 0);
            assert_eq!(slabs.last().unwrap().end as usize, p.k);
            for pair in slabs.windows(2) {
                assert_eq!(pair[0].end, pair[1].begin);
            }
            assert!(!slabs[0].accumulate && slabs[1..].iter().all(|s| s.accumulate));
            for s in &slabs {
                assert!(
                    (s.end - s.begin).div_ceil(per_trip) <= LOOP_TRIP_LIMIT,
                    "{s:?}"
                );
            }
            let shape = plan.launch_shape(&p).unwrap();
            assert_eq!(shape.launches as usize, slabs.len());
        }
        // Within the budget, one launch covers all of K.
        let small = Problem::new(4, LOOP_TRIP_LIMIT as usize, 4).unwrap();
        let slabs: Vec<KSlab> = Plan::new(Kernel::Naive, 8)
            .unwrap()
            .k_slabs(&small)
            .collect();
        assert_eq!(slabs.len(), 1);
    }

    #[test]
    fn matrices_over_the_binding_limit_are_refused() {
        let plan = Plan::new(Kernel::Naive, 16).unwrap();
        let limits = lavapipe_like();
        assert!(plan
            .check(&Problem::new(5792, 5792, 5792).unwrap(), &limits, "dev")
            .is_ok());
        let err = plan
            .check(&Problem::new(8192, 8192, 16).unwrap(), &limits, "dev")
            .unwrap_err();
        assert!(
            err.to_string().contains("matrix A (8192×8192 f32)"),
            "{err}"
        );
    }

    #[test]
    fn grids_over_the_dispatch_limit_are_refused() {
        let plan = Plan::new(Kernel::Naive, 8).unwrap();
        let mut limits = lavapipe_like();
        limits.max_binding_bytes = u64::MAX;
        limits.max_buffer_bytes = u64::MAX;
        let err = plan
            .check(&Problem::new(1, 1, 8 * 65536).unwrap(), &limits, "dev")
            .unwrap_err();
        assert!(err.to_string().contains("65536 blocks along x"), "{err}");
    }

    #[test]
    fn operands_beyond_the_devices_memory_together_are_refused() {
        let plan = Plan::new(Kernel::Tiled, 16).unwrap();
        let mut limits = lavapipe_like();
        limits.max_binding_bytes = 16 << 30;
        limits.max_buffer_bytes = 16 << 30;
        // A and B are 8 GiB and C 4 GiB, each under every per-buffer limit; 20 GiB together.
        limits.memory_bytes = Some(20 << 30);
        let fits = Problem::new(32768, 65536, 32768).unwrap();
        assert!(plan.check(&fits, &limits, "dev").is_ok());
        limits.memory_bytes = Some((20 << 30) - 1);
        let err = plan.check(&fits, &limits, "dev").unwrap_err().to_string();
        assert!(
            err.contains("together") && err.contains("device memory"),
            "{err}"
        );
    }

    #[test]
    fn a_k_whose_last_tile_overflows_32_bits_is_refused() {
        let plan = Plan::new(Kernel::Tiled, 32).unwrap();
        let p = Problem::new(1, u32::MAX as usize - 8, 1).unwrap();
        let err = plan.launch_shape(&p).unwrap_err().to_string();
        assert!(err.contains("32-bit"), "{err}");
        let ok = Problem::new(1, u32::MAX as usize - 32, 1).unwrap();
        assert!(plan.launch_shape(&ok).is_ok());
    }

    #[test]
    fn blocks_over_the_unit_limit_are_refused() {
        let plan = Plan::new(Kernel::Tiled, 32).unwrap();
        let mut limits = lavapipe_like();
        limits.max_units_per_cube = 256;
        let err = plan
            .check(&Problem::new(64, 64, 64).unwrap(), &limits, "dev")
            .unwrap_err();
        assert!(err.to_string().contains("1024 threads per block"), "{err}");
    }
}
