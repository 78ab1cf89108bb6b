//! f32 FMAs fed the way the fastest SIMT SGEMMs feed them (CUTLASS's sm80 SIMT multistage,
//! cuBLAS's sgemm kernels): the warptile rung's 8×8 micro-tiles and 64×32 warp tiles, with A
//! and B staged as they lie by a pipeline of asynchronous copies, and every fragment read as
//! a 128-bit shared load.
//!
//! - **Pipeline.** STAGES buffers of the BM×BK and BK×BN tiles in shared memory, filled by
//!   16-byte `cp.async` copies (zero-filled past the edges) that complete on one barrier per
//!   stage: while the cube computes on tile t, tiles t+1 … t+STAGES−1 are in flight, and no
//!   value passes through registers on its way to shared memory. One cube barrier per K tile.
//!   Where the device has no asynchronous copies (HIP, wgpu) the same stages are filled by
//!   ordinary loads and stores.
//! - **Fragments as 128-bit loads, in either layout.** A unit reads its fragments four K at a
//!   time: an operand stored with K contiguous (A row-major, B column-major) one 4-vector per
//!   row or column of its micro-tile; one stored the other way, one 4-vector of rows or
//!   columns per K. Either way 8 + 8 loads of 128 bits feed 256 FMAs (16:1), and the next
//!   four K's fragments are loaded before this four's FMAs (double-buffered registers).
//! - **Conflict-free shared memory.** A unit's rows of C (columns) are 4-vectors 4 rows apart
//!   from the next lane's where A (B) is stored with M (N) contiguous: a load reads 8 (4)
//!   consecutive chunks of one row. Where an operand is stored with K contiguous, the unit's
//!   rows (columns) are instead 8 (4) apart and the lanes' consecutive, and the stored rows are
//!   padded to 9 chunks: the rows one load reads fall in distinct bank groups, and every
//!   offset but the unit's first is a constant (no swizzle to compute per load).
//! - **Epilogue from the registers.** Each unit stores its 8×8 tile as 4-vectors of C (where
//!   C is row-major and aligned), with α and β applied in registers.
//!
//! The contract is whole, as in the mma rung whose staging this shares: operands that are not
//! 16-byte aligned, or strided, are copied element by element into the same layout, C that
//! is not row-major and aligned is stored element by element, and every edge is guarded.

use super::common::args::GemmInput;
use cubecl::prelude::barrier::Barrier;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, Dims, Layouts, View, GemmArgs};
use super::common::async_copy::{
    copy_plan, copy_width, stage_pair, store_width, CopyPlan, PairStaging, Share, StagedTile,
    Swizzle,
};
use super::{Compiler, LaunchShape, Rung};
use crate::problem::{Precision, Problem};

/// Lanes of a warp, as the layout groups units.
const WARP: u32 = 32;
/// Lanes along M and N in a warp: 8 × 4, each a TM × TN micro-tile.
const LANES_M: u32 = 8;
const LANES_N: u32 = 4;
/// A unit's micro-tile.
const TM: u32 = 8;
const TN: u32 = 8;
/// Elements per vector: f32 in 16-byte chunks.
const VECTOR: u32 = 4;
/// Elements of K per tile: rows stored with K contiguous are 8 chunks, which the swizzle
/// needs to place 8 rows in 8 bank groups.
const BK: u32 = 32;

/// A tile stored with K contiguous: rows of 8 chunks, padded to 9, so that row r's chunk c
/// falls in bank group (r + c) mod 8 and 8 consecutive rows read at one chunk position, or a
/// row's 8 chunks written by 8 lanes, fall in 8 distinct groups.
pub const K_CONTIGUOUS: Swizzle = Swizzle {
    chunks: BK / VECTOR,
    stride: BK / VECTOR + 1,
    shift: 0,
    mask: 0,
};

/// Elements from one row of a tile stored with K contiguous to the next.
const K_ROW: u32 = (BK / VECTOR + 1) * VECTOR;

/// An operand's `outer`×`inner` tile (A's BM×BK, B's BK×BN) of f32, stored as it lies.
pub fn staged_tile(outer: u32, inner: u32, by_cols: bool, is_a: bool) -> StagedTile {
    let plain = StagedTile::new(outer, inner, 4, by_cols);
    // K is the inner axis of A and the outer of B.
    let k_contiguous = is_a != by_cols;
    let swizzle = if k_contiguous {
        K_CONTIGUOUS
    } else {
        Swizzle {
            shift: 0,
            mask: 0,
            ..plain.swizzle
        }
    };
    StagedTile { swizzle, ..plain }
}

/// The rung.
pub struct Pipelined;

/// The rung's settings: the block tile, its warps (each 64×32) and the pipeline's depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PipelinedConfig {
    /// Rows of C per cube.
    pub bm: u32,
    /// Columns of C per cube.
    pub bn: u32,
    /// Elements of K per tile.
    pub bk: u32,
    /// Warps along the rows of C.
    pub wm: u32,
    /// Warps along the columns of C.
    pub wn: u32,
    /// Tiles of K in shared memory at once (copies in flight: `stages` − 1).
    pub stages: u32,
}

impl PipelinedConfig {
    const KEYS: [&'static str; 6] = ["bm", "bn", "bk", "wm", "wn", "stages"];

    /// Units per cube.
    pub fn units(&self) -> u32 {
        WARP * self.wm * self.wn
    }

    /// A's and B's tiles for operands in `layouts`.
    pub fn tiles(&self, layouts: Layouts) -> (StagedTile, StagedTile) {
        (
            staged_tile(self.bm, self.bk, layouts.a_by_cols, true),
            staged_tile(self.bk, self.bn, layouts.b_by_cols, false),
        )
    }

    /// Shared memory of the pipeline, in bytes (for its largest layout: both operands padded).
    pub fn shared_bytes(&self) -> usize {
        let (a, b) = self.tiles(Layouts {
            a_by_cols: false,
            b_by_cols: true,
        });
        (self.stages * (a.elements() + b.elements()) * 4) as usize
    }

    /// Whether the warps are 64×32, K tiles 32 deep and the tiles divide into chunks and units
    /// evenly, in every layout.
    pub fn valid(&self) -> bool {
        let units = self.units();
        // The fragments' offsets are masked to 16 bits (see `fragments`).
        let (a, b) = self.tiles(Layouts {
            a_by_cols: false,
            b_by_cols: true,
        });
        let within_mask = a.elements() <= 1 << 16 && b.elements() <= 1 << 16;
        let tiles_fit = [false, true].iter().all(|&by_cols| {
            let (ta, tb) = self.tiles(Layouts {
                a_by_cols: by_cols,
                b_by_cols: by_cols,
            });
            [ta, tb].iter().all(|t| {
                let chunks = t.swizzle.chunks;
                units.is_multiple_of(chunks) && (t.rows * chunks).is_multiple_of(units)
            })
        });
        self.bk == BK
            && within_mask
            && self.wm > 0
            && self.wn > 0
            && self.bm == self.wm * LANES_M * TM
            && self.bn == self.wn * LANES_N * TN
            && self.stages >= 2
            && tiles_fit
    }
}

/// Where a unit's fragments start in a stage (in elements).
#[derive(CubeType, Clone, Copy)]
struct Fragments {
    a: u32,
    b: u32,
}

/// Row `i` (of TM) of a unit's micro-tile, from its warp's first row, for lane row `lm`: with
/// A stored with M contiguous, 4-vectors 4 rows apart from the next lane's (4·lm + 32·i′ + v
/// for i = 4i′ + v); with K contiguous, rows 8 apart (lm + 8i).
#[cube]
fn row_in_warp(lm: u32, #[comptime] i: u32, #[comptime] layouts: Layouts) -> u32 {
    if comptime!(layouts.a_by_cols) {
        VECTOR * lm + comptime!((i / VECTOR) * VECTOR * LANES_M + i % VECTOR)
    } else {
        lm + comptime!(i * LANES_M)
    }
}

/// Column `j` (of TN) of a unit's micro-tile, from its warp's first column, for lane column
/// `ln`: with B stored with N contiguous, 4-vectors (4·ln + 16·j′ + w); with K contiguous,
/// columns 4 apart (ln + 4j).
#[cube]
fn col_in_warp(ln: u32, #[comptime] j: u32, #[comptime] layouts: Layouts) -> u32 {
    if comptime!(layouts.b_by_cols) {
        ln + comptime!(j * LANES_N)
    } else {
        VECTOR * ln + comptime!((j / VECTOR) * VECTOR * LANES_N + j % VECTOR)
    }
}

/// A unit's [`Fragments`]: its first row of A's stage and column of B's (see [`row_in_warp`]
/// and [`col_in_warp`]); every other offset it reads is a constant from these.
#[cube]
fn fragments(
    warp_row: u32,
    warp_col: u32,
    lane: u32,
    #[comptime] layouts: Layouts,
) -> Fragments {
    let (lm, ln) = (lane / LANES_N, lane % LANES_N);
    let row = warp_row + row_in_warp(lm, 0u32, layouts);
    let col = warp_col + col_in_warp(ln, 0u32, layouts);
    // K contiguous: a stored row per row of A (column of B), K_ROW apart; else the row's
    // element in row 0 of K.
    let a = if comptime!(layouts.a_by_cols) {
        row
    } else {
        row * K_ROW
    };
    let b = if comptime!(layouts.b_by_cols) {
        col * K_ROW
    } else {
        col
    };
    // Both lie within a stage (under 2¹⁶ elements). Said with a mask, the compiler knows that
    // adding a constant offset cannot wrap, and folds each load's constant into its address
    // instead of keeping a register per offset (which spilled, with a row stride of 36).
    Fragments {
        a: a & 0xffff,
        b: b & 0xffff,
    }
}

/// The FMAs of K `4·kc .. 4·kc + 4` from the stages at `base_a` and `base_b`, every fragment
/// read as 128-bit loads (4 consecutive elements at a multiple of 4). An operand stored with
/// K contiguous is read first, one 4-vector (its four K) per row of A or column of B of the
/// micro-tile: 8 loads. One stored the other way is read K by K, two 4-vectors per K, and the
/// next K's are loaded before this K's FMAs (double-buffered registers). Either way 8 + 8
/// loads feed 256 FMAs, and at most one operand's four K are held at once.
#[cube]
#[allow(clippy::too_many_arguments)]
fn multiply_four<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &SharedMemory<F>,
    base_a: u32,
    base_b: u32,
    at_: &Fragments,
    kc: u32,
    acc: &mut Array<F>,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
) {
    let (a_k_contiguous, b_k_contiguous) = comptime!((!layouts.a_by_cols, layouts.b_by_cols));
    // The K-contiguous operands' four K: ka[i·4 + kk], kb[j·4 + kk].
    let mut ka = Array::<F>::new(comptime!((TM * VECTOR) as usize));
    let mut kb = Array::<F>::new(comptime!((TN * VECTOR) as usize));
    if comptime!(a_k_contiguous) {
        // The unit's rows, 8 apart, chunk kc of each.
        #[unroll]
        for i in 0..TM {
            let offset = base_a + at_.a + comptime!(i * LANES_M * K_ROW) + kc * VECTOR;
            let v = vector_at::<F>(shared_a, offset);
            #[unroll]
            for kk in 0..VECTOR {
                ka[(i * VECTOR + kk) as usize] = v[kk as usize];
            }
        }
    }
    if comptime!(b_k_contiguous) {
        // The unit's columns, 4 apart, chunk kc of each.
        #[unroll]
        for j in 0..TN {
            let offset = base_b + at_.b + comptime!(j * LANES_N * K_ROW) + kc * VECTOR;
            let v = vector_at::<F>(shared_b, offset);
            #[unroll]
            for kk in 0..VECTOR {
                kb[(j * VECTOR + kk) as usize] = v[kk as usize];
            }
        }
    }
    // The other operands, K by K, in two buffers.
    let mut a0 = Array::<F>::new(comptime!(TM as usize));
    let mut b0 = Array::<F>::new(comptime!(TN as usize));
    let mut a1 = Array::<F>::new(comptime!(TM as usize));
    let mut b1 = Array::<F>::new(comptime!(TN as usize));
    load_k::<F>(
        shared_a, shared_b, base_a, base_b, at_, kc, 0u32, &mut a0, &mut b0, config, layouts,
    );
    #[unroll]
    for kk in 0..VECTOR {
        if comptime!(kk % 2 == 0) {
            if comptime!(kk + 1 < VECTOR) {
                load_k::<F>(
                    shared_a, shared_b, base_a, base_b, at_, kc, kk + 1, &mut a1, &mut b1,
                    config, layouts,
                );
            }
            multiply::<F>(&a0, &b0, &ka, &kb, acc, kk, layouts);
        } else {
            if comptime!(kk + 1 < VECTOR) {
                load_k::<F>(
                    shared_a, shared_b, base_a, base_b, at_, kc, kk + 1, &mut a0, &mut b0,
                    config, layouts,
                );
            }
            multiply::<F>(&a1, &b1, &ka, &kb, acc, kk, layouts);
        }
    }
}

/// Loads K `4·kc + kk` of the operands stored with K across rows (A column-major: rows of K,
/// BM wide, the unit's rows in 4-vectors 32 apart; B row-major: BN wide, columns in 4-vectors
/// 16 apart) into `fa[i]` and `fb[j]`: two 4-vectors each.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_k<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &SharedMemory<F>,
    base_a: u32,
    base_b: u32,
    at_: &Fragments,
    kc: u32,
    #[comptime] kk: u32,
    fa: &mut Array<F>,
    fb: &mut Array<F>,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
) {
    let (bm, bn) = comptime!((config.bm, config.bn));
    if comptime!(layouts.a_by_cols) {
        let row = VECTOR * kc + kk;
        #[unroll]
        for ip in 0..TM / VECTOR {
            let offset = base_a + at_.a + row * bm + comptime!(ip * VECTOR * LANES_M);
            let v = vector_at::<F>(shared_a, offset);
            #[unroll]
            for e in 0..VECTOR {
                fa[(VECTOR * ip + e) as usize] = v[e as usize];
            }
        }
    }
    if comptime!(!layouts.b_by_cols) {
        let row = VECTOR * kc + kk;
        #[unroll]
        for jp in 0..TN / VECTOR {
            let offset = base_b + at_.b + row * bn + comptime!(jp * VECTOR * LANES_N);
            let v = vector_at::<F>(shared_b, offset);
            #[unroll]
            for e in 0..VECTOR {
                fb[(VECTOR * jp + e) as usize] = v[e as usize];
            }
        }
    }
}

/// Four consecutive elements of `tile` from `offset`, a multiple of 4 (one 128-bit load where
/// the compiler sees the alignment, as NVRTC's does).
#[cube]
fn vector_at<F: Float>(tile: &SharedMemory<F>, offset: u32) -> Vector<F, Const<4>> {
    let mut v = Vector::<F, Const<4>>::empty();
    #[unroll]
    for e in 0..VECTOR {
        v[e as usize] = tile[(offset + e) as usize];
    }
    v
}

/// The FMAs of K `kk` of four: `acc[i·TN + j] += a_i · b_j`, A's values from `fa` (loaded for
/// this K) or `ka` (the four K of a K-contiguous A), B's likewise.
#[cube]
fn multiply<F: Float>(
    fa: &Array<F>,
    fb: &Array<F>,
    ka: &Array<F>,
    kb: &Array<F>,
    acc: &mut Array<F>,
    #[comptime] kk: u32,
    #[comptime] layouts: Layouts,
) {
    #[unroll]
    for i in 0..TM {
        let x = if comptime!(layouts.a_by_cols) {
            fa[i as usize]
        } else {
            ka[(i * VECTOR + kk) as usize]
        };
        #[unroll]
        for j in 0..TN {
            let y = if comptime!(layouts.b_by_cols) {
                kb[(j * VECTOR + kk) as usize]
            } else {
                fb[j as usize]
            };
            acc[(i * TN + j) as usize] += x * y;
        }
    }
}

/// One K tile's FMAs from the stages at `base_a` and `base_b`, four K at a time, in a loop of
/// BK / (4 · `per_trip`) trips. Unrolled whole, NVRTC took 136 s over the kernel's six tiles
/// (three stages, two paths) and lavapipe's LLVM minutes: two steps per trip on CUDA (a trip
/// of 512 FMAs and 32 shared loads, 90% FMA), one elsewhere. Debian 12's lavapipe counts these
/// trips against its cap of 65535 per unit: the host bounds them by splitting K
/// (k_per_trip = 4, see `shape`).
#[cube]
#[allow(clippy::too_many_arguments)]
fn compute_tile<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &SharedMemory<F>,
    base_a: u32,
    base_b: u32,
    at_: &Fragments,
    acc: &mut Array<F>,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] per_trip: u32,
) {
    for trip in 0..comptime!(config.bk / VECTOR / per_trip) {
        #[unroll]
        for step in 0..per_trip {
            multiply_four::<F>(
                shared_a,
                shared_b,
                base_a,
                base_b,
                at_,
                trip * per_trip + step,
                acc,
                config,
                layouts,
            );
        }
    }
}

/// Stages K tile `t` into stage `stage`: on the fast path (`fast`: whole tiles, both operands
/// aligned) along the copy plans, else with bounds.
#[cube]
#[allow(clippy::too_many_arguments)]
fn stage_tile<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    va: &View,
    vb: &View,
    dims: &Dims,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    plan_a: &CopyPlan,
    plan_b: &CopyPlan,
    batch: u32,
    row0: u32,
    col0: u32,
    t: u32,
    fast: bool,
    #[comptime] stage: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] asynchronous: bool,
) {
    let (tile_a, tile_b) = comptime!(config.tiles(layouts));
    let (stage_a, stage_b) = comptime!((stage * tile_a.elements(), stage * tile_b.elements()));
    // Synchronous copies take the emulation's path: loads and stores of the same elements.
    // Every loop unrolled but where the edges' copies run on CUDA (see `compute_tile`).
    let pair = comptime!(PairStaging {
        tile_a,
        tile_b,
        block: (config.bm, config.bn, config.bk),
        units: config.units(),
        widths: (width_a, width_b),
        emulate: !asynchronous,
        rolled_plans: false,
        rolled_bounded: asynchronous,
    });
    if fast {
        // (Only where both operands are copied in chunks: `fast` is false otherwise.)
        if comptime!(width_a > 1 && width_b > 1) {
            stage_pair::<F>(
                a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, t, true, batch, row0,
                col0, stage_a, stage_b, pair, Share::WHOLE, false, true,
            );
        }
    } else {
        stage_pair::<F>(
            a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, t, true, batch, row0, col0,
            stage_a, stage_b, pair, Share::WHOLE, false, false,
        );
    }
}

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, in f32. Cube (X, Y) computes the
/// BM×BN block at (Y·BM, X·BN); warp `UNIT_POS / 32` (row-major over WM×WN) its 64×32 warp
/// tile. A and B are copied in pieces of `width_a` and `width_b` elements (16 bytes, or 1
/// where they are not aligned), C stored in vectors of `NC` = `width_c` (4, or 1).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
// `%` is what the kernel language has.
#[allow(clippy::manual_is_multiple_of)]
pub fn pipelined_matmul<F: Float + CubeElement, O: Float, NC: Size>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<Vector<O, NC>>,
    args: GemmArgs<F>,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] width_c: u32,
    #[comptime] asynchronous: bool,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm, bn, bk, stages) = comptime!((config.bm, config.bn, config.bk, config.stages));
    let units = comptime!(config.units());
    let (tile_a, tile_b) = comptime!(config.tiles(layouts));
    let (stage_a, stage_b) = comptime!((tile_a.elements(), tile_b.elements()));

    let mut shared_a =
        SharedMemory::<F>::new_aligned(comptime!((stages * stage_a) as usize), 128usize);
    let mut shared_b =
        SharedMemory::<F>::new_aligned(comptime!((stages * stage_b) as usize), 128usize);
    // One barrier per stage: every unit arrives once its copies into the stage have landed.
    let mut full = Sequence::<Shared<Barrier>>::new();
    if comptime!(asynchronous) {
        #[unroll]
        for _ in 0..stages {
            full.push(Barrier::shared(CUBE_DIM, UNIT_POS == 0));
        }
    }

    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    let (warp, lane) = (UNIT_POS / WARP, UNIT_POS % WARP);
    let warp_row = (warp / comptime!(config.wn)) * comptime!(LANES_M * TM);
    let warp_col = (warp % comptime!(config.wn)) * comptime!(LANES_N * TN);
    let frags = fragments(warp_row, warp_col, lane, layouts);

    let mut acc = Array::<F>::new(comptime!((TM * TN) as usize));
    #[unroll]
    for e in 0..TM * TN {
        acc[e as usize] = F::new(0.0);
    }

    let plan_a = copy_plan(&va, batch, row0, dims.k_begin, tile_a, units, bk, false);
    let plan_b = copy_plan(&vb, batch, dims.k_begin, col0, tile_b, units, bk, true);
    // The fast path: a block inside C whose K tiles are all whole, both operands aligned. It
    // differs from the other only in how tiles are staged: one K loop branches per tile (the
    // FMAs are in `compute_tile`'s loop either way, and a loop per path doubled the code
    // NVRTC compiles).
    let whole = row0 + bm <= dims.m && col0 + bn <= dims.n && (dims.k_end - dims.k_begin) % bk == 0;
    let fast = comptime!(width_a > 1 && width_b > 1) && whole;
    k_loop::<F>(
        a, b, &va, &vb, &dims, &mut shared_a, &mut shared_b, &full, &plan_a, &plan_b,
        &frags, &mut acc, batch, row0, col0, fast, config, layouts, width_a, width_b,
        asynchronous,
    );

    // The epilogue, from the registers: columns in 4-vectors where B's layout gives them.
    let (lm, ln) = (lane / LANES_N, lane % LANES_N);
    #[unroll]
    for i in 0..TM {
        let row = row0 + warp_row + row_in_warp(lm, i, layouts);
        if row < dims.m {
            if comptime!(layouts.b_by_cols) {
                #[unroll]
                for j in 0..TN {
                    let col = col0 + warp_col + col_in_warp(ln, j, layouts);
                    if col < dims.n {
                        let index = at(&vc, batch, row, col);
                        let mut value = alpha * acc[(i * TN + j) as usize];
                        if beta != F::new(0.0) {
                            value += beta * F::cast_from(c[index][0]);
                        }
                        let mut out = Vector::<O, NC>::empty();
                        out[0] = O::cast_from(value);
                        c[index] = out;
                    }
                }
            } else {
                #[unroll]
                for jp in 0..TN / VECTOR {
                    let col = col0 + warp_col + col_in_warp(ln, comptime!(jp * VECTOR), layouts);
                    store_four::<F, O, NC>(
                        c,
                        &vc,
                        &dims,
                        batch,
                        row,
                        col,
                        &acc,
                        comptime!(i * TN + jp * VECTOR),
                        alpha,
                        beta,
                        width_c,
                    );
                }
            }
        }
    }
}

/// The K loop, over a pipeline of STAGES tiles where copies are asynchronous, else over one
/// stage. Every unit runs every trip (the barriers need them all); at most LOOP_TRIP_LIMIT of
/// them over this loop and `compute_tile`'s (k_per_trip = 4): the host splits K.
#[cube]
#[allow(clippy::too_many_arguments)]
fn k_loop<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    va: &View,
    vb: &View,
    dims: &Dims,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    full: &Sequence<Shared<Barrier>>,
    plan_a: &CopyPlan,
    plan_b: &CopyPlan,
    frags: &Fragments,
    acc: &mut Array<F>,
    batch: u32,
    row0: u32,
    col0: u32,
    fast: bool,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] asynchronous: bool,
) {
    let bk = comptime!(config.bk);
    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    if comptime!(!asynchronous) {
        // Synchronous copies overlap nothing: one stage, staged and then computed, between
        // two barriers. Half the code of the pipeline's (lavapipe's JIT pays for code).
        for t in 0..tiles {
            stage_tile::<F>(
                a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, batch, row0, col0, t, fast,
                0u32, config, layouts, width_a, width_b, asynchronous,
            );
            sync_cube();
            compute_tile::<F>(shared_a, shared_b, 0u32, 0u32, frags, acc, config, layouts, 1u32);
            sync_cube();
        }
    } else {
        // The pipeline: tiles in groups of STAGES, so that each tile's stage (and barrier) is
        // known at compile time. The first STAGES − 1 tiles are staged first; then, per tile,
        // the cube waits for its copies, passes one barrier (everyone is done with the
        // previous tile, whose stage is refilled next), stages the tile STAGES − 1 ahead and
        // computes.
        let stages = comptime!(config.stages);
        let (tile_a, tile_b) = comptime!(config.tiles(layouts));
        let (stage_a, stage_b) = comptime!((tile_a.elements(), tile_b.elements()));
        #[unroll]
        for s in 0..comptime!(stages - 1) {
            if s < tiles {
                stage_tile::<F>(
                    a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, batch, row0, col0, s, fast,
                    s, config, layouts, width_a, width_b, asynchronous,
                );
                let bar = full.index(comptime!(s as usize));
                bar.commit_copy_async();
                bar.arrive();
            }
        }
        let groups = tiles.div_ceil(stages);
        for group in 0..groups {
            let parity = group % 2;
            #[unroll]
            for s in 0..stages {
                let t = group * stages + s;
                if t < tiles {
                    full.index(comptime!(s as usize)).wait_parity(parity);
                    sync_cube();
                    let next = t + stages - 1;
                    if next < tiles {
                        let refill = comptime!((s + stages - 1) % stages);
                        stage_tile::<F>(
                            a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, batch, row0,
                            col0, next, fast, refill, config, layouts, width_a, width_b,
                            asynchronous,
                        );
                        let bar = full.index(comptime!(refill as usize));
                        bar.commit_copy_async();
                        bar.arrive();
                    }
                    compute_tile::<F>(
                        shared_a,
                        shared_b,
                        comptime!(s * stage_a),
                        comptime!(s * stage_b),
                        frags,
                        acc,
                        config,
                        layouts,
                        2u32,
                    );
                }
            }
        }
    }
}

/// Writes α·acc + β·C to columns `col .. col + 4` of row `row` of C (inside C by the caller's
/// check of the row), from `acc[first ..]`: as one 4-vector where C is stored in them (`NC` =
/// 4: row-major, offsets, strides and N multiples of 4, so the four are inside C together),
/// else element by element. With β = 0, C is not read.
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_four<F: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    batch: u32,
    row: u32,
    col: u32,
    acc: &Array<F>,
    #[comptime] first: u32,
    alpha: F,
    beta: F,
    #[comptime] width: u32,
) {
    if comptime!(width == VECTOR) {
        if col < dims.n {
            let index = at(vc, batch, row, col) / VECTOR as usize;
            let mut out = Vector::<O, NC>::empty();
            #[unroll]
            for e in 0..VECTOR {
                let mut value = alpha * acc[(first + e) as usize];
                if beta != F::new(0.0) {
                    value += beta * F::cast_from(c[index][e as usize]);
                }
                out[e as usize] = O::cast_from(value);
            }
            c[index] = out;
        }
    } else {
        #[unroll]
        for e in 0..VECTOR {
            if col + e < dims.n {
                let index = at(vc, batch, row, col + e);
                let mut value = alpha * acc[(first + e) as usize];
                if beta != F::new(0.0) {
                    value += beta * F::cast_from(c[index][0]);
                }
                let mut out = Vector::<O, NC>::empty();
                out[0] = O::cast_from(value);
                c[index] = out;
            }
        }
    }
}

impl Rung for Pipelined {
    const NAME: &'static str = "pipelined";
    const ABOUT: &'static str = "warptile's FMAs fed by a cp.async pipeline of operands staged as \
                                 they lie, fragments as 128-bit loads, double-buffered (f32)";
    type Config = PipelinedConfig;

    fn configs() -> Vec<PipelinedConfig> {
        let config = |bm, bn, wm, wn, stages| PipelinedConfig {
            bm,
            bn,
            bk: BK,
            wm,
            wn,
            stages,
        };
        // 8 warps of 64×32 (the warptile rung's fastest on an H100), 3 and 4 stages (108 and
        // 144 KiB of shared memory: one cube per SM); 4 warps for products of few blocks; and
        // one warp in 2 stages (27 KiB), for devices with 32 KiB of shared memory (lavapipe,
        // where the tests run it).
        [
            config(128, 128, 2, 4, 3),
            config(128, 128, 2, 4, 4),
            config(64, 128, 1, 4, 3),
            config(64, 32, 1, 1, 2),
        ]
        .into_iter()
        .filter(PipelinedConfig::valid)
        .collect()
    }

    fn default_config() -> PipelinedConfig {
        Self::configs()[0]
    }

    fn parse(text: &str) -> Result<PipelinedConfig, String> {
        let v = super::parse_settings(text, &PipelinedConfig::KEYS)?;
        let config = PipelinedConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            wm: v[3],
            wn: v[4],
            stages: v[5],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &PipelinedConfig) -> String {
        format!(
            "bm={}:bn={}:bk={}:wm={}:wn={}:stages={}",
            c.bm, c.bn, c.bk, c.wm, c.wn, c.stages
        )
    }

    fn computes(_config: &PipelinedConfig, precision: Precision) -> bool {
        precision == Precision::F32
    }

    /// clang 15 gives the warptile rung's micro-tiles 128 VGPRs or more and spills them on
    /// gfx1100 (see there); this rung's are the same 8×8.
    fn may_spill(_config: &PipelinedConfig, _precision: Precision, compiler: Compiler) -> bool {
        compiler == Compiler::Amd
    }

    fn shape(c: &PipelinedConfig, problem: &Problem) -> LaunchShape {
        // The barriers and the arrays' 128-byte alignment take 128 bytes more. Where
        // `compute_tile` is a loop, a tile of BK is BK / 4 + 1 trips at most (with the K
        // loop's), so a slab of LOOP_TRIP_LIMIT · 4 elements of K stays under 65535 trips.
        super::block_tiled_shape(
            problem,
            [c.bn, c.bm],
            [c.units(), 1],
            c.shared_bytes() + 128,
            VECTOR,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &PipelinedConfig,
        launch: super::Launch<'_, R>,
    ) {
        let super::Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        let asynchronous = client.properties().features.copy_async;
        // cp.async needs 16-byte aligned chunks; synchronous copies move a chunk element by
        // element and need only its elements consecutive (an operand that is not strided).
        // Fewer variants there: lavapipe's JIT takes seconds over each.
        let width = |d: &crate::problem::MatrixDesc| {
            if asynchronous {
                copy_width(d, 4)
            } else if d.layout() == crate::problem::Layout::Strided {
                1
            } else {
                VECTOR
            }
        };
        let (width_a, width_b) = (width(&args.views[0]), width(&args.views[1]));
        // A unit's columns are 4-vectors unless B is stored with K contiguous.
        let width_c = if args.layouts().b_by_cols {
            1
        } else {
            store_width(&args.views[2], VECTOR)
        };
        // SAFETY: (the caller's contract) the buffers hold the views' spans (f32: I = A = f32,
        // `computes`), the grid covers C once, every copy and store is guarded by the operands'
        // edges and the slab's end, 16-byte copies and 4-vectors of C are aligned
        // (`copy_width`, `store_width`), and cp.async is used only where the device has it.
        unsafe {
            pipelined_matmul::launch_unchecked::<A, O, R>(
                client,
                count,
                CubeDim::new_1d(config.units()),
                width_c as usize,
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config,
                args.layouts(),
                width_a,
                width_b,
                width_c,
                asynchronous,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &PipelinedConfig,
        kernel: super::Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let asynchronous = kernel.copy_async();
        let mut kernel = kernel;
        // The fast path: 16-byte copies of both operands, C in 4-vectors.
        kernel.register_size::<pipelined_matmul::NC>(VECTOR as usize);
        let t = kernel.typed_with::<A, A, A, Vector<O, pipelined_matmul::NC>>();
        pipelined_matmul::expand::<A, O, pipelined_matmul::NC>(
            t.scope,
            VECTOR as usize,
            t.a,
            t.b,
            t.c,
            t.args,
            *config,
            layouts,
            VECTOR,
            VECTOR,
            VECTOR,
            asynchronous,
        );
        CubeDim::new_1d(config.units())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16-byte bank group (of 8) a chunk at `position` (in chunks) falls in.
    fn group(position: u32) -> u32 {
        position % 8
    }

    /// Wavefronts one 128-bit load by a warp needs, its lanes reading the chunks at
    /// `positions`: the most distinct chunks in one bank group (lanes reading the same chunk
    /// share it: a broadcast).
    fn wavefronts(positions: &[u32]) -> usize {
        let mut distinct = positions.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        (0..8)
            .map(|g| distinct.iter().filter(|&&p| group(p) == g).count())
            .max()
            .unwrap_or(0)
    }

    /// The rows (columns) of a lane's micro-tile as the kernel's `row_in_warp` (`col_in_warp`)
    /// lays them out, `by_cols` being whether the operand is stored with M (N) contiguous.
    fn in_warp(lane_along: u32, i: u32, vectors: bool, lanes: u32) -> u32 {
        if vectors {
            VECTOR * lane_along + (i / VECTOR) * VECTOR * lanes + i % VECTOR
        } else {
            lane_along + i * lanes
        }
    }

    #[test]
    fn every_fragment_load_and_copy_takes_one_wavefront_in_every_layout() {
        for config in Pipelined::configs() {
            for (a_by_cols, b_by_cols) in [(false, false), (true, false), (false, true), (true, true)]
            {
                let layouts = Layouts {
                    a_by_cols,
                    b_by_cols,
                };
                let (ta, tb) = config.tiles(layouts);
                let what = format!("{}, {layouts:?}", Pipelined::show(&config));
                // Fragment loads: for each load a unit issues (row i or column j of its
                // micro-tile, at each chunk of K), the chunks the 32 lanes of a warp read.
                for warp in 0..config.wm * config.wn {
                    let warp_row = (warp / config.wn) * LANES_M * TM;
                    let warp_col = (warp % config.wn) * LANES_N * TN;
                    for kc in 0..BK / VECTOR {
                        for kk in 0..VECTOR {
                            for i in 0..TM {
                                let chunks: Vec<u32> = (0..WARP)
                                    .map(|lane| {
                                        let row = warp_row
                                            + in_warp(lane / LANES_N, i, a_by_cols, LANES_M);
                                        if a_by_cols {
                                            // Rows of K, chunks along M.
                                            ta.swizzle.position(VECTOR * kc + kk, row / VECTOR)
                                        } else {
                                            ta.swizzle.position(row, kc)
                                        }
                                    })
                                    .collect();
                                assert_eq!(wavefronts(&chunks), 1, "{what}: A row {i}, K {kc}");
                            }
                            for j in 0..TN {
                                let chunks: Vec<u32> = (0..WARP)
                                    .map(|lane| {
                                        let col = warp_col
                                            + in_warp(lane % LANES_N, j, !b_by_cols, LANES_N);
                                        if b_by_cols {
                                            tb.swizzle.position(col, kc)
                                        } else {
                                            tb.swizzle.position(VECTOR * kc + kk, col / VECTOR)
                                        }
                                    })
                                    .collect();
                                assert_eq!(wavefronts(&chunks), 1, "{what}: B col {j}, K {kc}");
                            }
                        }
                    }
                }
                // Copies: 8 consecutive units write 8 consecutive pieces of a row.
                for t in [ta, tb] {
                    let s = t.swizzle;
                    for first in (0..t.rows * s.chunks).step_by(8) {
                        let chunks: Vec<u32> = (first..first + 8)
                            .map(|piece| s.position(piece / s.chunks, piece % s.chunks))
                            .collect();
                        assert_eq!(wavefronts(&chunks), 1, "{what}: copies from piece {first}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_k_contiguous_row_with_rows_four_apart_would_conflict_which_is_why_the_padding() {
        // Rows 8 chunks long, unpadded: 8 rows read at one chunk position share a bank group.
        let plain = Swizzle {
            stride: BK / VECTOR,
            ..K_CONTIGUOUS
        };
        let rows: Vec<u32> = (0..8).map(|r| plain.position(r, 0)).collect();
        assert_eq!(wavefronts(&rows), 8);
        let rows: Vec<u32> = (0..8).map(|r| K_CONTIGUOUS.position(r, 0)).collect();
        assert_eq!(wavefronts(&rows), 1);
    }

    #[test]
    fn the_small_configuration_fits_32_kib_and_the_large_ones_the_h100() {
        let configs = Pipelined::configs();
        assert_eq!(configs.len(), 4, "every listed configuration is valid");
        assert!(configs.iter().any(|c| c.shared_bytes() + 128 <= 32 << 10));
        assert!(configs.iter().all(|c| c.shared_bytes() + 128 <= 227 << 10));
    }
}
