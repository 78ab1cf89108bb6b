//! What the compile check holds each rung's main loop to in machine code: the figures the
//! rungs are built to reach, kept with the check that reads them rather than in the kernel
//! trait (the library that runs kernels does not judge their machine code).

use serde::Serialize;
use tilemm::kernels::Config;
use tilemm::{DType, Precision};

/// What a matrix-unit kernel's main loop must show in NVIDIA SASS: the share of matrix
/// instructions, how many each fragment load feeds, barriers and copies in flight per K tile.
/// Besides these, it may have no element-wise staging (16-bit global loads or shared stores,
/// scalar shared loads feeding fragments, but for tf32's 32-bit fragment loads), and its global
/// loads must be 128-bit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MatrixLoopCriteria {
    /// The least share of matrix instructions among the loop's, in percent.
    pub min_matrix_percent: f64,
    /// The fewest matrix instructions per fragment load (`ldmatrix`).
    pub min_matrix_per_fragment_load: f64,
    /// Where scalar shared loads may feed fragments (tf32 stored with M or N contiguous,
    /// which `ldmatrix` cannot transpose), the fewest matrix instructions per such load; else
    /// none may.
    pub min_matrix_per_word_load: Option<f64>,
    /// The most cube barriers per K tile.
    pub max_barriers_per_tile: f64,
    /// The fewest K tiles whose copies are in flight while one is computed.
    pub min_stages_in_flight: u32,
    /// The schedule, on the architectures it is held to there ([`SCHEDULE_ARCHS`]): the
    /// longest run of the loop without a matrix instruction, at most.
    pub max_idle_run: u32,
    /// And whether a fragment load (`ldmatrix`) may sit in the run that holds the barrier
    /// (fragments loaded after the barrier rather than carried over from the step before).
    pub fragment_load_at_barrier: bool,
}

/// The architectures whose SASS the mma rung's schedule is held to (CUTLASS's sm80 mainloop
/// is written for them; the others get the same code from a scheduler not checked here).
pub const SCHEDULE_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// What a matrix-unit kernel's main loop must show in AMD assembly (CDNA's MFMA, RDNA 3's
/// WMMA): how many matrix instructions each load from LDS and from global memory feeds.
/// Besides these, its global loads must be 128-bit (`dwordx4`, `b128`), and it may not spill
/// (no scratch) unless the configuration says it may ([`tilemm::kernels::Rung::may_spill`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AmdMatrixLoopCriteria {
    /// The fewest matrix instructions (`v_mfma`, `v_wmma`) per load from LDS (`ds_read`,
    /// `ds_load`).
    pub min_matrix_per_shared_load: f64,
    /// The fewest matrix instructions per global load, where every unit stages (compilers
    /// place a load that only some units make outside the loop's straight line, where loop
    /// analysis does not see it).
    pub min_matrix_per_global_load: Option<f64>,
}

/// The least share of FMAs (in percent) the main loop must reach in NVIDIA SASS for
/// `precision`, where the configuration is built for it.
pub fn loop_fma_floor(config: &Config, precision: Precision) -> Option<f64> {
    let f32 = precision == Precision::F32;
    match config {
        // With an 8×8 micro-tile in f32 the main loop is at least 80% FFMA on sm_80 and sm_90
        // (siboehm's fastest kernels run 80–90%): wide shared loads leave 16 loads per 512
        // FMAs per step of BK. Smaller tiles, other types, are not held to it.
        Config::Vectorized(c) => (c.tm * c.tn >= 64 && f32).then_some(80.0),
        // With 64 or more f32 accumulators per unit, at least 75% on sm_80 and sm_90 (79%
        // measured): 5 points under the vectorized rung's, because the loop also holds the
        // next tile's loads from global memory, with their edge checks, which the FMAs overlap.
        Config::Warptile(c) => (c.per_unit() >= 64 && f32).then_some(75.0),
        // ≥ 80% in the main loop on sm_80 and sm_90 (81–82% measured): a trip of two chunks of
        // four K, 512 FFMA and 32 shared loads, that also holds a quarter of the tile's
        // copies (two 16-byte cp.async with their bounds, 35 instructions) and, on a tile's
        // last trip, its commit, wait and barrier. Before the copies and the barrier moved
        // into the loop it showed 87.5% with 41 address and loop instructions, but each tile
        // then ran a ~110-instruction stretch without an FFMA around its barrier outside the
        // loop: over a tile, ~2450 instructions then against ~2490 now (82–84% FFMA either
        // way). Four chunks a trip give 85% in 8 s of NVRTC.
        Config::Pipelined(_) => f32.then_some(80.0),
        _ => None,
    }
}

/// Where set, every shared-memory load in the main loop in NVIDIA SASS for `precision` must be
/// 128 bits wide and the loop must run at least this many FMAs per shared load: what an SGEMM
/// at cuBLAS's class shows.
pub fn min_fma_per_shared_load(config: &Config, precision: Precision) -> Option<f64> {
    match config {
        Config::Pipelined(_) => (precision == Precision::F32).then_some(16.0),
        _ => None,
    }
}

/// Where set, the longest run of an FMA loop without an FMA (in NVIDIA SASS for `precision`,
/// on [`SCHEDULE_ARCHS`]), which must then also hold the cube barrier: the pipelined rung's
/// schedule, CUTLASS's sm80 multistage one (fragments carried across chunks and tiles, copies
/// between the FMAs, the barrier before a tile's last K). Its runs are 16–23 instructions
/// (the barrier's wait and commit, on the tile's last trip); about 110 with the fragments
/// loaded after the barrier and the copies issued there.
pub fn fma_loop_max_idle_run(config: &Config, precision: Precision) -> Option<u32> {
    match config {
        Config::Pipelined(_) => (precision == Precision::F32).then_some(24),
        _ => None,
    }
}

/// What the main loop must show in NVIDIA SASS, where the configuration is built to feed
/// matrix units at full rate.
///
/// tf32 (m16n8k8) keeps the schedule: with B stored by rows (the layout checked), each pair of
/// B's fragments is 4 32-bit loads (`LDS`) per step for the warp tile's 8 MMAs, 2 each.
pub fn matrix_loop_criteria(config: &Config, precision: Precision) -> Option<MatrixLoopCriteria> {
    match config {
        // What an Ampere-class kernel aiming at 40–60% of cuBLAS shows (shared/notes: 37%
        // HMMA, 4 per LDSM, one BAR per tile, ≥ 2 stages in flight), on CUTLASS's sm80
        // schedule: fragments carried across steps and tiles, the barrier a step before the
        // tile's end, copies between the MMAs. The rung's runs are 11–13 instructions, 16 in
        // 128×128 with BK = 64 on sm_90; 18–23 there and in split-K while a lane held a
        // fragment address per step and pair (ptxas recomputed them at 252–254 registers);
        // about 80 with the fragments loaded after the barrier, as before.
        // A warp tile of WM×WN takes WM/16 + WN/16 `ldmatrix.x4` per step of K for
        // (WM/16)·(WN/8) MMAs: 4 per load at 64×64, 2.7 at 32×64 (64×128 in 4 warps), whose
        // loads also leave a smaller share to the MMAs (26–28% on sm_80 and sm_90).
        Config::Mma(c) => Some(MatrixLoopCriteria {
            // tf32's 32-bit fragment loads are 4 instructions where `ldmatrix` is one.
            min_matrix_percent: if precision.input == DType::TF32
                || c.warp_m() * c.warp_n() < 64 * 64
            {
                25.0
            } else {
                30.0
            },
            min_matrix_per_fragment_load: {
                let (m, n) = (f64::from(c.warp_m()), f64::from(c.warp_n()));
                // (Less a rounding's worth: the SASS gives the same ratio.)
                (m / 16.0 * n / 8.0) / (m / 16.0 + n / 16.0) - 1e-9
            },
            min_matrix_per_word_load: (precision.input == DType::TF32).then_some(2.0),
            max_barriers_per_tile: 1.0,
            min_stages_in_flight: 2,
            max_idle_run: 16,
            fragment_load_at_barrier: false,
        }),
        _ => None,
    }
}

/// What the main loop must show in AMD assembly.
///
/// The tensorcore rung's are the counts wide loads give. With A staged by rows and B by
/// columns (`FragmentLoads::AlongK`), each lane loads a fragment in wide LDS reads: CDNA's
/// wavefronts of 64 hold 4 elements of 16 bits per lane (one `ds_read_b64`), RDNA 3's
/// wavefronts of 32 hold 16 (A and B replicated across the halves: two `ds_load_b128`). So
/// TM×TN fragments per step of K take TM + TN fragment loads for TM·TN matrix instructions.
/// Each unit stages its share of A's and B's tiles in 16-byte global loads (checked where
/// every unit has a share). Element-wise loads (the layout the fragments do not want, or
/// narrow vectors) give 4 to 16 times more, and fail.
pub fn amd_matrix_loop_criteria(config: &Config) -> Option<AmdMatrixLoopCriteria> {
    let Config::Tensorcore(c) = config else {
        return None;
    };
    // 8×8 fragments are lavapipe's, never AMD's.
    if c.m != 16 {
        return None;
    }
    let reads_per_fragment = if c.plane == 32 { 2 } else { 1 };
    let matrix = f64::from(c.tm * c.tn);
    let shared_loads = f64::from(reads_per_fragment * (c.tm + c.tn));
    // 16-byte pieces of each tile per unit, where every unit takes the same number.
    let per_unit = |elements: u32| {
        let pieces = elements / 8;
        pieces.is_multiple_of(c.units()).then(|| pieces / c.units())
    };
    let global_loads = per_unit(c.bm() * c.k).zip(per_unit(c.k * c.bn()));
    Some(AmdMatrixLoopCriteria {
        min_matrix_per_shared_load: matrix / shared_loads,
        min_matrix_per_global_load: global_loads.map(|(a, b)| matrix / f64::from(a + b)),
    })
}
