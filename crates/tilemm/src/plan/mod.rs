//! Which rung runs, in which configuration, and how a product is cut into launches: slabs of K
//! (for drivers that cut long loops short) and chunks of the batch (for the grid's z limit).

pub mod check;
pub mod panels;

use std::fmt;

use serde::Serialize;

use crate::device::{DeviceInfo, DeviceLimits};
use crate::error::{Error, Result};
use crate::kernels::{Config, Kernel, LaunchShape};
use crate::problem::{DType, Precision, Problem};

/// The most loop iterations a unit may run in one launch, over all of a kernel's loops together.
///
/// Some drivers cut long shader loops short and return a wrong sum without any error: Debian
/// 12's lavapipe (Mesa 22.3) stops after 65535 iterations counted over *all* loops of an
/// invocation, nested or one after another (measured: a 300×300 nested loop ran 65101 times),
/// so nesting loops does not help. tilemm therefore splits K into slabs, one launch each, the
/// later ones continuing the sum held in C (β = 1), or in partials of the accumulator's type
/// where C's is narrower ([`Launches::uses_partials`]), so that no unit ever runs more than
/// this many iterations in one launch. Half of Mesa's cap, for drivers with less.
pub const LOOP_TRIP_LIMIT: u32 = 1 << 15;

/// A rung and its configuration: what runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Plan {
    /// The rung and its settings.
    pub config: Config,
}

/// One launch's share of K: the half-open range `begin..end`, and whether C already holds the
/// sum of the slabs before it (then the launch continues that sum with β = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KSlab {
    /// First index of K in this launch.
    pub begin: u32,
    /// One past the last index of K in this launch.
    pub end: u32,
    /// Whether C holds the partial sums of the slabs before this one.
    pub accumulate: bool,
}

/// How a product is launched: one launch's shape, and how many launches cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Launches {
    /// Each launch's grid, block and resources (z: the batch entries of one launch).
    pub shape: LaunchShape,
    /// Slabs of K (each a launch per batch chunk).
    pub k_slabs: u32,
    /// Elements of K one slab covers (the last may be shorter).
    pub k_per_launch: u32,
    /// Chunks of the batch, each at most the grid's z limit (with split-K: its share).
    pub batch_chunks: u32,
    /// Slices of K computed side by side in each launch (split-K; 1: none): the grid's z is
    /// slices × the chunk's batch entries, and a reduction adds the slices into C.
    pub k_splits: u32,
}

impl Launches {
    /// Launches in all.
    pub fn count(&self) -> u64 {
        u64::from(self.k_slabs) * u64::from(self.batch_chunks)
    }

    /// Whether the launches keep their sums in partials of the accumulator's type (one M×N
    /// matrix per slice of K and batch entry), added into C once at the end: split-K's slices,
    /// and any product whose K takes several slabs while C's stored type is narrower than the
    /// accumulator (continuing the sum in C would round it to C's type at every slab: an f16
    /// C stops counting at 2048). `packed`: bf16 is held as f32 (the device has no bf16).
    pub fn uses_partials(&self, problem: &Problem, packed: bool) -> bool {
        let narrow_c = crate::kernels::stored_output(problem.precision, packed)
            != problem.precision.accumulate;
        self.k_splits > 1 || (self.k_slabs > 1 && narrow_c)
    }

    /// Batch entries the partials hold: split-K's, one chunk of the batch (its kernels index
    /// the partials from the chunk's start); otherwise the whole batch, since a rung that does
    /// not split K writes its C at the batch entry it computes.
    pub fn partials_entries(&self, problem: &Problem) -> u32 {
        if self.k_splits > 1 {
            self.shape.grid[2] / self.k_splits
        } else {
            problem.batch as u32
        }
    }
}

impl Plan {
    /// The plan running `config`.
    pub fn new(config: Config) -> Self {
        Plan { config }
    }

    /// `kernel` in its default configuration.
    pub fn default_for(kernel: Kernel) -> Self {
        Plan::new(kernel.default_config())
    }

    /// The rung.
    pub fn kernel(&self) -> Kernel {
        self.config.kernel()
    }

    /// Elements of K one launch may cover without a unit exceeding [`LOOP_TRIP_LIMIT`].
    pub fn k_per_launch(&self, problem: &Problem) -> u32 {
        LOOP_TRIP_LIMIT.saturating_mul(self.config.shape(problem).k_per_trip)
    }

    /// The slabs of K, one per launch, in order. `problem` has been checked
    /// ([`Plan::launches`]), so K fits 32 bits.
    pub fn k_slabs(&self, problem: &Problem) -> impl Iterator<Item = KSlab> {
        let k = problem.k as u32;
        let step = self.k_per_launch(problem);
        (0..k.div_ceil(step)).map(move |i| {
            let begin = i * step;
            KSlab {
                begin,
                end: begin.saturating_add(step).min(k),
                accumulate: i > 0,
            }
        })
    }

    /// Units (threads) per block.
    pub fn threads_per_block(&self) -> u32 {
        let tiny = Problem::new(1, 1, 1).expect("a 1×1×1 problem is valid");
        self.config.shape(&tiny).block.iter().product()
    }

    /// Shared memory per block, in bytes, in `precision`.
    pub fn shared_bytes(&self, precision: Precision) -> usize {
        let tiny = crate::problem::Shape {
            precision,
            ..crate::problem::Shape::new(1, 1, 1)
        }
        .problem()
        .expect("a 1×1×1 problem is valid");
        self.config.shape(&tiny).shared_bytes
    }

    /// How `problem` (canonical) is launched on a device with `limits`: the batch is cut into
    /// chunks of the grid's z limit. Fails when K or the grid overflows 32 bits.
    pub fn launches(&self, problem: &Problem, limits: &DeviceLimits) -> Result<Launches> {
        let too_large = |why: &str| Error::TooLarge {
            m: problem.m,
            k: problem.k,
            n: problem.n,
            why: why.into(),
        };
        let mut shape = self.config.shape(problem);
        let tiles = |len: usize, side: u32| len.div_ceil(side as usize);
        if tiles(problem.n, shape.block[0]) > u32::MAX as usize
            || tiles(problem.m, shape.block[1]) > u32::MAX as usize
        {
            return Err(too_large("the grid of blocks does not fit 32-bit counts"));
        }
        // Kernels index up to a tile past the end of K before their guard.
        let k = u32::try_from(problem.k)
            .ok()
            .filter(|k| {
                k.checked_add(shape.k_per_trip.max(shape.block[0]))
                    .is_some()
            })
            .ok_or_else(|| too_large("K does not fit the kernels' 32-bit indices"))?;
        let k_splits = self.config.k_splits().max(1);
        // Batch entries per launch: the grid's z holds each entry once per slice of K.
        let z = (limits.max_cube_count[2] / k_splits).max(1);
        let batch = u32::try_from(problem.batch)
            .map_err(|_| too_large("the batch does not fit a 32-bit count"))?;
        shape.grid[2] = batch.min(z) * k_splits;
        let k_per_launch = self.k_per_launch(problem);
        Ok(Launches {
            shape,
            k_slabs: k.div_ceil(k_per_launch),
            k_per_launch: k_per_launch.min(k),
            batch_chunks: batch.div_ceil(z),
            k_splits,
        })
    }

    /// Whether this plan runs `problem` (canonical) on `device`, and its launches: see
    /// [`check::check`], the one runnability check.
    pub fn check(&self, problem: &Problem, device: &DeviceInfo) -> Result<Launches> {
        check::check(self, problem, device)
    }
}

/// Bytes of A's, B's and C's buffers on `device`: bf16 packed two to a word where the device
/// has no bf16 type, and C then held in f32.
pub fn device_bytes(problem: &Problem, device: &DeviceInfo) -> [usize; 3] {
    let mut bytes = problem.operand_bytes();
    if problem.precision.output == DType::BF16 && !device.types.bf16 {
        bytes[2] = problem.c_len() * 4;
    }
    if problem.precision.input == DType::BF16 && !device.types.bf16 {
        bytes[0] = problem.a_len().div_ceil(2) * 4;
        bytes[1] = problem.b_len().div_ceil(2) * 4;
    }
    bytes
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Unavailable;
    use crate::problem::Shape;

    fn lavapipe_like() -> DeviceInfo {
        crate::device::test_lavapipe()
    }

    fn plan(text: &str) -> Plan {
        Plan::new(text.parse().unwrap())
    }

    #[test]
    fn plane_layouts_run_only_on_planes_of_their_width() {
        let problem = Problem::new(64, 64, 64).unwrap();
        let eight = plan("broadcast:tm=16:tn=8:planes=8:plane=8");
        let warp = plan("broadcast:tm=8:tn=4:planes=4:plane=32");
        let mut device = lavapipe_like();
        for (width, runs) in [(8, [true, false]), (32, [false, true]), (0, [false, false])] {
            device.plane_size = width;
            for (plan, runs) in [eight, warp].iter().zip(runs) {
                match plan.check(&problem, &device) {
                    Ok(_) => assert!(runs, "{plan} on planes of {width}"),
                    Err(Error::KernelUnavailable {
                        why: Unavailable::PlaneWidth { built, device },
                        ..
                    }) => {
                        assert!(!runs, "{plan} on planes of {width}");
                        assert_eq!((Some(built), device), (plan.config.plane_width(), width));
                    }
                    Err(e) => panic!("{plan} on planes of {width}: {e}"),
                }
            }
        }
        // A device whose planes vary in width (or have no operations) says so.
        let err = eight.check(&problem, &device).unwrap_err().to_string();
        assert!(err.contains("no fixed width"), "{err}");
    }

    #[test]
    fn configurations_parse_and_show_as_text() {
        assert_eq!(plan("tiled:tpb=32").to_string(), "tiled:tpb=32");
        assert_eq!(plan("naive").to_string(), "naive:tpb=16");
        let err = "tiled:tpb=12".parse::<Config>().unwrap_err();
        assert!(err.contains("choose 8, 16 or 32"), "{err}");
        assert!("blocked"
            .parse::<Config>()
            .unwrap_err()
            .contains("naive, tiled"));
        for kernel in Kernel::ALL {
            for config in kernel.configs() {
                assert_eq!(config.to_string().parse::<Config>(), Ok(config));
            }
        }
    }

    #[test]
    fn launch_covers_c_with_ceil_division() {
        let device = lavapipe_like();
        let p = Problem::new(1000, 777, 513).unwrap();
        let launches = plan("tiled:tpb=16").check(&p, &device).unwrap();
        assert_eq!(launches.shape.grid, [33, 63, 1]);
        assert_eq!(launches.shape.block, [16, 16, 1]);
        assert_eq!(launches.shape.shared_bytes, 2048);
        assert_eq!(launches.count(), 1);
        let naive = plan("naive:tpb=16").check(&p, &device).unwrap();
        assert_eq!(naive.shape.shared_bytes, 0);
    }

    #[test]
    fn batches_beyond_the_grids_z_limit_take_several_launches() {
        let mut device = lavapipe_like();
        device.limits.max_cube_count[2] = 4;
        let p = Shape {
            batch: 10,
            ..Shape::new(3, 3, 3)
        }
        .problem()
        .unwrap();
        let launches = plan("naive:tpb=8").check(&p, &device).unwrap();
        assert_eq!((launches.shape.grid[2], launches.batch_chunks), (4, 3));
    }

    #[test]
    fn k_is_split_so_no_unit_loops_past_the_trip_limit() {
        let p = Problem::new(2, 3 * (LOOP_TRIP_LIMIT as usize) * 16 + 5, 2).unwrap();
        for (text, per_trip) in [("naive:tpb=16", 1), ("tiled:tpb=16", 16)] {
            let plan = plan(text);
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
            let launches = plan.check(&p, &lavapipe_like()).unwrap();
            assert_eq!(launches.k_slabs as usize, slabs.len());
        }
        // Within the budget, one launch covers all of K.
        let small = Problem::new(4, LOOP_TRIP_LIMIT as usize, 4).unwrap();
        assert_eq!(plan("naive:tpb=8").k_slabs(&small).count(), 1);
    }

    #[test]
    fn matrices_over_the_binding_limit_are_refused() {
        let plan = plan("naive:tpb=16");
        let device = lavapipe_like();
        assert!(plan
            .check(&Problem::new(5792, 5792, 5792).unwrap(), &device)
            .is_ok());
        let err = plan
            .check(&Problem::new(8192, 8192, 16).unwrap(), &device)
            .unwrap_err();
        assert!(err.to_string().contains("matrix A (8192×8192)"), "{err}");
    }

    #[test]
    fn grids_over_the_dispatch_limit_are_refused() {
        let mut device = lavapipe_like();
        device.limits.max_binding_bytes = u64::MAX;
        device.limits.max_buffer_bytes = u64::MAX;
        let err = plan("naive:tpb=8")
            .check(&Problem::new(1, 1, 8 * 65536).unwrap(), &device)
            .unwrap_err();
        assert!(err.to_string().contains("65536 blocks along x"), "{err}");
    }

    #[test]
    fn operands_beyond_the_devices_memory_together_are_refused() {
        let plan = plan("tiled:tpb=16");
        let mut device = lavapipe_like();
        device.limits.max_binding_bytes = 16 << 30;
        device.limits.max_buffer_bytes = 16 << 30;
        // A and B are 8 GiB and C 4 GiB, each under every per-buffer limit; 20 GiB together.
        device.limits.memory_bytes = Some(20 << 30);
        let fits = Problem::new(32768, 65536, 32768).unwrap();
        assert!(plan.check(&fits, &device).is_ok());
        let err = |device: &DeviceInfo| plan.check(&fits, device).unwrap_err().to_string();
        device.limits.memory_bytes = Some((20 << 30) - 1);
        assert!(
            err(&device).contains("together") && err(&device).contains("device memory"),
            "{}",
            err(&device)
        );
    }

    #[test]
    fn a_k_whose_last_tile_overflows_32_bits_is_refused() {
        let device = lavapipe_like();
        let plan = plan("tiled:tpb=32");
        let p = Problem::new(1, u32::MAX as usize - 8, 1).unwrap();
        let err = plan.launches(&p, &device.limits).unwrap_err().to_string();
        assert!(err.contains("32-bit"), "{err}");
        let ok = Problem::new(1, u32::MAX as usize - 32, 1).unwrap();
        assert!(plan.launches(&ok, &device.limits).is_ok());
    }

    #[test]
    fn blocks_over_the_unit_limit_are_refused() {
        let mut device = lavapipe_like();
        device.limits.max_units_per_cube = 256;
        let err = plan("tiled:tpb=32")
            .check(&Problem::new(64, 64, 64).unwrap(), &device)
            .unwrap_err();
        assert!(err.to_string().contains("1024 threads per block"), "{err}");
    }

    #[test]
    fn precisions_the_device_lacks_are_refused_by_name() {
        let device = lavapipe_like();
        let f64_problem = Shape {
            precision: Precision::of(DType::F64),
            ..Shape::new(4, 4, 4)
        }
        .problem()
        .unwrap();
        let err = plan("naive").check(&f64_problem, &device).unwrap_err();
        assert!(matches!(err, Error::TypeUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("f64"), "{err}");
        // bf16 without a bf16 type is packed: half the bytes of f32, C in f32.
        let bf16 = Shape {
            precision: Precision::of(DType::BF16),
            ..Shape::new(3, 3, 3)
        }
        .problem()
        .unwrap();
        assert_eq!(device_bytes(&bf16, &device), [20, 20, 36]);
        assert!(plan("naive").check(&bf16, &device).is_ok());
    }

    #[test]
    fn split_k_puts_its_slices_on_the_grid_and_its_partials_in_the_limits() {
        let split = plan("mma:bm=128:bn=128:bk=32:wm=2:wn=2:stages=3:split=4");
        let whole = plan("mma:bm=128:bn=128:bk=32:wm=2:wn=2:stages=3:split=1");
        let mut device = lavapipe_like();
        let f16 = |m, k, n, batch| {
            Shape {
                precision: Precision::new(DType::F16, DType::F32).unwrap(),
                batch,
                ..Shape::new(m, k, n)
            }
            .problem()
            .unwrap()
        };
        let cube = f16(1024, 1024, 1024, 1);
        let l = split.launches(&cube, &device.limits).unwrap();
        assert_eq!(
            (l.shape.grid, l.k_splits, l.batch_chunks),
            ([8, 8, 4], 4, 1)
        );
        let l = whole.launches(&cube, &device.limits).unwrap();
        assert_eq!((l.shape.grid, l.k_splits), ([8, 8, 1], 1));
        // The grid's z holds each batch entry once per slice: 8 in z give 2 entries a launch.
        device.limits.max_cube_count[2] = 8;
        let l = split
            .launches(&f16(256, 256, 256, 3), &device.limits)
            .unwrap();
        assert_eq!((l.shape.grid[2], l.batch_chunks), (8, 2));

        // Where the rung runs (an sm_80-like device), the partials count against the binding.
        device.plane_size = 32;
        device.copy_async = true;
        device.types.f16 = true;
        device.register_mma = vec![crate::device::MatrixUnit {
            a: DType::F16,
            b: DType::F16,
            cd: DType::F32,
            m: 16,
            n: 8,
            k: 16,
        }];
        device.limits.max_shared_bytes = 100 << 10;
        device.limits.max_units_per_cube = 1024;
        device.limits.max_cube_dim = [1024, 1024, 64];
        assert!(whole.check(&cube, &device).is_ok());
        assert!(split.check(&cube, &device).is_ok());
        // 4 partials of 1024² f32 are 16 MiB, C itself 4.
        device.limits.max_binding_bytes = 8 << 20;
        assert!(whole.check(&cube, &device).is_ok());
        let err = split.check(&cube, &device).unwrap_err().to_string();
        assert!(err.contains("partials of 4 slices of K"), "{err}");
    }
}
