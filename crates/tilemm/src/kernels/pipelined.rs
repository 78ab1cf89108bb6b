//! f32 FMAs fed the way the fastest SIMT SGEMMs feed them (CUTLASS's sm80 SIMT multistage,
//! cuBLAS's sgemm kernels): the warptile rung's 8×8 micro-tiles and 64×32 warp tiles, with A
//! and B staged as they lie by a pipeline of asynchronous copies, and every fragment read as
//! a 128-bit shared load.
//!
//! - **Pipeline.** STAGES buffers of the BM×BK and BK×BN tiles in shared memory, filled by
//!   16-byte `cp.async` copies (zero-filled past the edges) that complete on one barrier per
//!   stage: while the cube computes on tile t, tiles t+1 … t+STAGES−1 are in flight, and no
//!   value passes through registers on its way to shared memory. Where the device has no
//!   asynchronous copies (HIP, wgpu) the same stages are filled by ordinary loads and stores.
//! - **CUTLASS's sm80 schedule** (`mma_multistage.h`, as in the mma rung): the FMAs of each K
//!   issue on fragments loaded during the K before, and a chunk's first on those loaded during
//!   the last K of the chunk before (the next tile's first chunk during the tile's last);
//!   the copies of the tile fetched are spread over the tile's trips, each bounded by the
//!   operands' edges without a branch; and the one cube barrier per K tile comes before the
//!   tile's last K, whose FMAs cover it. No stretch of more than about 20 instructions
//!   without an FMA, where the copies and the fragments' first loads once made one of ~110
//!   around each barrier.
//! - **Fragments as 128-bit loads, in either layout.** A unit reads its fragments four K at a
//!   time: an operand stored with K contiguous (A row-major, B column-major) one 4-vector per
//!   row or column of its micro-tile; one stored the other way, one 4-vector of rows or
//!   columns per K. Either way 8 + 8 loads of 128 bits feed 256 FMAs (16:1), in registers
//!   double-buffered across chunks and K (`Held`).
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
//! 16-byte aligned, or strided, are copied element by element into the same layout (staged
//! whole before each tile's trips), C that
//! is not row-major and aligned is stored element by element, and every edge is guarded.

use super::common::args::GemmInput;
use cubecl::prelude::barrier::Barrier;
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, Dims, GemmArgs, Layouts, View};
use super::common::async_copy::{
    copy_plan, copy_run, copy_width, drain_past_end, piece_run, stage_pair, store_width, within,
    CopyPlan, PairStaging, PieceRun, Share, StagedTile, Swizzle,
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
        // Fragment offsets are masked to 16 bits (see `within`): the stages must fit.
        let (a, b) = self.tiles(Layouts {
            a_by_cols: false,
            b_by_cols: true,
        });
        let within_mask =
            self.stages * a.elements() <= 1 << 16 && self.stages * b.elements() <= 1 << 16;
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
        // Each trip of a tile issues an equal share of a unit's copies (see `copy_trips`).
        let copies_spread = [false, true].iter().all(|&by_cols| {
            let (ta, tb) = self.tiles(Layouts {
                a_by_cols: by_cols,
                b_by_cols: !by_cols,
            });
            [ta, tb].iter().all(|&t| {
                let (count, trips) = (copies_per_unit(t, units), BK / VECTOR / PER_TRIP);
                count > 0 && count.is_multiple_of(trips)
            })
        });
        self.bk == BK
            && within_mask
            && copies_spread
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

/// A unit's fragments in registers. An operand stored with K contiguous is read a chunk (four
/// K) at a time, one 4-vector per row of A (`ka[i·4 + kk]`) or column of B (`kb[j·4 + kk]`),
/// in two sets: the chunk computed and the next, loaded meanwhile. One stored the other way is
/// read K by K (`fa[i]`, `fb[j]`: two 4-vectors), in two sets by the parity of K. A layout
/// leaves the arrays it does not read unused.
#[derive(CubeType)]
struct Held<F: Float> {
    ka0: Array<F>,
    ka1: Array<F>,
    kb0: Array<F>,
    kb1: Array<F>,
    fa0: Array<F>,
    fa1: Array<F>,
    fb0: Array<F>,
    fb1: Array<F>,
}

#[cube]
impl<F: Float> Held<F> {
    fn new() -> Held<F> {
        Held::<F> {
            ka0: Array::<F>::new(comptime!((TM * VECTOR) as usize)),
            ka1: Array::<F>::new(comptime!((TM * VECTOR) as usize)),
            kb0: Array::<F>::new(comptime!((TN * VECTOR) as usize)),
            kb1: Array::<F>::new(comptime!((TN * VECTOR) as usize)),
            fa0: Array::<F>::new(comptime!(TM as usize)),
            fa1: Array::<F>::new(comptime!(TM as usize)),
            fb0: Array::<F>::new(comptime!(TN as usize)),
            fb1: Array::<F>::new(comptime!(TN as usize)),
        }
    }
}

/// Loads what K `4·kc` (a chunk's first) needs into chunk set `set`: the K-contiguous
/// operands' four K (8 loads each: the unit's rows 8 apart, or columns 4 apart, chunk kc of
/// each) and the others' first K ([`load_k`]).
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_head<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &SharedMemory<F>,
    base_a: u32,
    base_b: u32,
    at_: &Fragments,
    kc: u32,
    held: &mut Held<F>,
    #[comptime] set: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
) {
    if comptime!(!layouts.a_by_cols) {
        let start = within(base_a + at_.a + kc * VECTOR);
        #[unroll]
        for i in 0..TM {
            let offset = start + comptime!(i * LANES_M * K_ROW);
            let v = vector_at::<F>(shared_a, offset);
            #[unroll]
            for kk in 0..VECTOR {
                if comptime!(set == 0) {
                    held.ka0[(i * VECTOR + kk) as usize] = v[kk as usize];
                } else {
                    held.ka1[(i * VECTOR + kk) as usize] = v[kk as usize];
                }
            }
        }
    }
    if comptime!(layouts.b_by_cols) {
        let start = within(base_b + at_.b + kc * VECTOR);
        #[unroll]
        for j in 0..TN {
            let offset = start + comptime!(j * LANES_N * K_ROW);
            let v = vector_at::<F>(shared_b, offset);
            #[unroll]
            for kk in 0..VECTOR {
                if comptime!(set == 0) {
                    held.kb0[(j * VECTOR + kk) as usize] = v[kk as usize];
                } else {
                    held.kb1[(j * VECTOR + kk) as usize] = v[kk as usize];
                }
            }
        }
    }
    load_k::<F>(shared_a, shared_b, base_a, base_b, at_, kc, 0u32, held, config, layouts);
}

/// Loads K `4·kc + kk` of the operands stored with K across rows (A column-major: rows of K,
/// BM wide, the unit's rows in 4-vectors 32 apart; B row-major: BN wide, columns in 4-vectors
/// 16 apart) into the K set of `kk`'s parity: two 4-vectors each.
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
    held: &mut Held<F>,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
) {
    let (bm, bn) = comptime!((config.bm, config.bn));
    let odd = comptime!(kk % 2 == 1);
    if comptime!(layouts.a_by_cols) {
        let start = within(base_a + at_.a + kc * comptime!(VECTOR * bm));
        #[unroll]
        for ip in 0..TM / VECTOR {
            let offset = start + comptime!(kk * bm + ip * VECTOR * LANES_M);
            let v = vector_at::<F>(shared_a, offset);
            #[unroll]
            for e in 0..VECTOR {
                if comptime!(odd) {
                    held.fa1[(VECTOR * ip + e) as usize] = v[e as usize];
                } else {
                    held.fa0[(VECTOR * ip + e) as usize] = v[e as usize];
                }
            }
        }
    }
    if comptime!(!layouts.b_by_cols) {
        let start = within(base_b + at_.b + kc * comptime!(VECTOR * bn));
        #[unroll]
        for jp in 0..TN / VECTOR {
            let offset = start + comptime!(kk * bn + jp * VECTOR * LANES_N);
            let v = vector_at::<F>(shared_b, offset);
            #[unroll]
            for e in 0..VECTOR {
                if comptime!(odd) {
                    held.fb1[(VECTOR * jp + e) as usize] = v[e as usize];
                } else {
                    held.fb0[(VECTOR * jp + e) as usize] = v[e as usize];
                }
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

/// The FMAs of K `kk` of a chunk: `acc[i·TN + j] += a_i · b_j`, A's values from its K set of
/// `kk`'s parity or from chunk set `set` (K contiguous), B's likewise.
#[cube]
fn multiply<F: Float>(
    held: &Held<F>,
    acc: &mut Array<F>,
    #[comptime] kk: u32,
    #[comptime] set: u32,
    #[comptime] layouts: Layouts,
) {
    let odd = comptime!(kk % 2 == 1);
    #[unroll]
    for i in 0..TM {
        let x = if comptime!(layouts.a_by_cols) {
            if comptime!(odd) {
                held.fa1[i as usize]
            } else {
                held.fa0[i as usize]
            }
        } else if comptime!(set == 0) {
            held.ka0[(i * VECTOR + kk) as usize]
        } else {
            held.ka1[(i * VECTOR + kk) as usize]
        };
        #[unroll]
        for j in 0..TN {
            let y = if comptime!(layouts.b_by_cols) {
                if comptime!(set == 0) {
                    held.kb0[(j * VECTOR + kk) as usize]
                } else {
                    held.kb1[(j * VECTOR + kk) as usize]
                }
            } else if comptime!(odd) {
                held.fb1[j as usize]
            } else {
                held.fb0[j as usize]
            };
            acc[(i * TN + j) as usize] += x * y;
        }
    }
}

/// Stages K tile `t` into the stages at `stage_a` and `stage_b`, each piece placed and bounded
/// on its own: for operands of which one at least is copied element by element (not 16-byte
/// aligned, or strided).
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
    stage_a: u32,
    stage_b: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] asynchronous: bool,
) {
    // Synchronous copies take the emulation's path: loads and stores of the same elements.
    // The loop over bounded pieces is kept rolled on CUDA (NVRTC's time).
    let pair = comptime!(staging(config, layouts, width_a, width_b, asynchronous));
    stage_pair::<F>(
        a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, t, true, batch, row0, col0,
        stage_a, stage_b, pair, Share::WHOLE, false, false,
    );
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
    k_loop::<F>(
        a, b, &va, &vb, &dims, &mut shared_a, &mut shared_b, &full, &plan_a, &plan_b,
        &frags, &mut acc, batch, row0, col0, config, layouts, width_a, width_b,
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

/// The K loop, on CUTLASS's sm80 multistage schedule (`mma_multistage.h`, as in the mma rung),
/// with STAGES tiles in shared memory: tiles in flight STAGES − 1 ahead; within a tile, the
/// FMAs of each K issue on fragments loaded during the K before (a chunk's K-contiguous
/// fragments during the last K of the chunk before, the tile's last chunk loading the next
/// tile's first), the copies of the tile fetched are spread over the trips, and the one cube
/// barrier per tile (after waiting for the next tile) comes before the tile's last K, whose
/// FMAs cover it. Every unit runs every trip (the barriers need them all); at most
/// LOOP_TRIP_LIMIT of them over this loop and [`k_tile`]'s (k_per_trip = 4): the host splits
/// K.
///
/// Where copies are asynchronous, tiles run in groups of STAGES so that each tile's stage and
/// barriers are known at compile time. Elsewhere (HIP, wgpu) the copies are loads and stores
/// that complete before the barrier, the same schedule runs with no stage barriers, and one
/// tile body serves every stage (half the code: lavapipe's JIT pays for code).
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
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] asynchronous: bool,
) {
    let (bk, stages) = comptime!((config.bk, config.stages));
    let (tile_a, tile_b) = comptime!(config.tiles(layouts));
    let (stage_a, stage_b) = comptime!((tile_a.elements(), tile_b.elements()));
    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    // The block lies inside C (its corner always does): its tiles are whole but the slab's last.
    let interior =
        dims.m - row0 >= comptime!(config.bm) && dims.n - col0 >= comptime!(config.bn);
    let mut held = Held::<F>::new();
    // The first STAGES − 1 tiles in flight, then tile 0's first fragments.
    #[unroll]
    for s in 0..comptime!(stages - 1) {
        if s < tiles {
            if comptime!(width_a > 1 && width_b > 1) {
                let (base_a, base_b) = comptime!((s * stage_a, s * stage_b));
                let mut run_a =
                    tile_run(plan_a, dims, row0, col0, s, tiles, base_a, config, layouts, true);
                let mut run_b =
                    tile_run(plan_b, dims, row0, col0, s, tiles, base_b, config, layouts, false);
                copy_trips::<F>(
                    a, b, plan_a, plan_b, &mut run_a, &mut run_b, shared_a, shared_b, base_a,
                    base_b, 1u32, config, layouts, true, asynchronous,
                );
            } else {
                stage_tile::<F>(
                    a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, batch, row0, col0, s,
                    comptime!(s * stage_a), comptime!(s * stage_b), config, layouts,
                    width_a, width_b, asynchronous,
                );
            }
            if comptime!(asynchronous) {
                let bar = full.index(comptime!(s as usize));
                bar.commit_copy_async();
                bar.arrive();
            }
        }
    }
    if tiles > 0 {
        if comptime!(asynchronous) {
            full.index(0usize).wait_parity(0u32);
        } else {
            sync_cube();
        }
        load_head::<F>(
            shared_a, shared_b, 0u32, 0u32, frags, 0u32, &mut held, 0u32, config, layouts,
        );
    }
    if comptime!(asynchronous) {
        let groups = tiles.div_ceil(stages);
        for group in 0..groups {
            #[unroll]
            for s in 0..stages {
                let t = group * stages + s;
                // Tile t + 1 is phase (t + 1) / STAGES of its stage's barrier.
                let next_parity = if comptime!(s + 1 < stages) {
                    group % 2
                } else {
                    (group + 1) % 2
                };
                let (next, refill) = comptime!(((s + 1) % stages, (s + stages - 1) % stages));
                if t < tiles {
                    k_tile::<F>(
                        a, b, va, vb, dims, shared_a, shared_b, full, plan_a, plan_b, frags,
                        &mut held, acc, batch, row0, col0, interior, t, tiles,
                        comptime!(s * stage_a), comptime!(s * stage_b),
                        comptime!(next * stage_a), comptime!(next * stage_b),
                        comptime!(refill * stage_a), comptime!(refill * stage_b), next_parity,
                        s, config, layouts, width_a, width_b, asynchronous,
                    );
                }
            }
        }
        drain_past_end(full, tiles, stages);
    } else {
        let mut stage = 0u32;
        for t in 0..tiles {
            let next = select(stage + 1 == stages, 0u32, stage + 1);
            let refill = select(stage == 0, comptime!(stages - 1), stage - 1);
            k_tile::<F>(
                a, b, va, vb, dims, shared_a, shared_b, full, plan_a, plan_b, frags, &mut held,
                acc, batch, row0, col0, interior, t, tiles, stage * stage_a, stage * stage_b,
                next * stage_a, next * stage_b, refill * stage_a, refill * stage_b, 0u32, 0u32,
                config, layouts, width_a, width_b, asynchronous,
            );
            stage = next;
        }
    }
}

/// Chunks of four K per trip of [`k_tile`]'s loop over a tile: a trip of 512 FMAs and 32
/// shared loads, in which the two chunk sets of fragments alternate with no moves. Unrolled
/// whole, NVRTC took 136 s over the kernel's tiles and lavapipe's LLVM minutes; four chunks a
/// trip took 8 s. Debian 12's lavapipe counts trips against its cap of 65535 per unit: the
/// host bounds them by splitting K (k_per_trip = 4, see `shape`).
const PER_TRIP: u32 = 2;

/// Tile `t` of [`k_loop`], whose stages start at `base_*`, the next tile's at `next_*` and the
/// one refilled (tile t − 1's, with tile t + STAGES − 1) at `refill_*`; `s` its stage's
/// barrier and `next_parity` the phase of the next tile's, where copies are asynchronous. On
/// entry `held` has the tile's first fragments (chunk set 0); on return, the next tile's.
#[cube]
#[allow(clippy::too_many_arguments)]
// A comptime condition and a run-time one stay nested: `comptime && runtime` would compile
// the branch in every variant.
#[allow(clippy::collapsible_if)]
fn k_tile<F: Float>(
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
    held: &mut Held<F>,
    acc: &mut Array<F>,
    batch: u32,
    row0: u32,
    col0: u32,
    interior: bool,
    t: u32,
    tiles: u32,
    base_a: u32,
    base_b: u32,
    next_a: u32,
    next_b: u32,
    refill_a: u32,
    refill_b: u32,
    next_parity: u32,
    #[comptime] s: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] asynchronous: bool,
) {
    let stages = comptime!(config.stages);
    let per_trip = comptime!(PER_TRIP);
    let trips = comptime!(config.bk / VECTOR / per_trip);
    let (next_bar, refill_bar) = comptime!(((s + 1) % stages, (s + stages - 1) % stages));
    let fetched = t + stages - 1;
    // Operands copied in 16-byte pieces: the fetched tile's copies spread over the trips, each
    // bounded (no branch). Others: staged whole, element by element, before the trips (its
    // stage was freed by the last tile's barrier).
    let chunked = comptime!(width_a > 1 && width_b > 1);
    if !comptime!(chunked) {
        if fetched < tiles {
            stage_tile::<F>(
                a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, batch, row0, col0,
                fetched, refill_a, refill_b, config, layouts, width_a, width_b,
                asynchronous,
            );
        }
    }
    let mut run_a = tile_run(
        plan_a, dims, row0, col0, fetched, tiles, refill_a, config, layouts, true,
    );
    let mut run_b = tile_run(
        plan_b, dims, row0, col0, fetched, tiles, refill_b, config, layouts, false,
    );
    // In a block inside C, a fetched tile inside the slab is whole: its copies need no bounds
    // (a uniform branch a trip, where the bounds cost about 25 instructions of some 630).
    let k0 = dims.k_begin + fetched * comptime!(config.bk);
    let whole = interior && fetched < tiles && dims.k_end - k0 >= comptime!(config.bk);
    for trip in 0..trips {
        if comptime!(chunked) {
            // Both arms the same calls: `bounded` is a compile-time argument.
            if whole {
                copy_trips::<F>(
                    a, b, plan_a, plan_b, &mut run_a, &mut run_b, shared_a, shared_b, refill_a,
                    refill_b, trips, config, layouts, false, asynchronous,
                );
            } else {
                copy_trips::<F>(
                    a, b, plan_a, plan_b, &mut run_a, &mut run_b, shared_a, shared_b, refill_a,
                    refill_b, trips, config, layouts, true, asynchronous,
                );
            }
        }
        #[unroll]
        for h in 0..per_trip {
            let kc = trip * per_trip + h;
            let (set, other) = comptime!((h % 2, (h + 1) % 2));
            #[unroll]
            for kk in 0..VECTOR {
                if comptime!(h + 1 == per_trip && kk + 1 == VECTOR) {
                    if trip == comptime!(trips - 1) {
                        // The tile's copies committed; tile t + 1 has landed; and past the
                        // barrier every unit has loaded tile t's last fragments, so that the
                        // next tile may refill its stage. (Nested: without asynchronous
                        // copies there are no barriers to index, even in code not run.)
                        if comptime!(asynchronous) {
                            let bar = full.index(comptime!(refill_bar as usize));
                            bar.commit_copy_async();
                            bar.arrive();
                            if t + 1 < tiles {
                                full.index(comptime!(next_bar as usize)).wait_parity(next_parity);
                            }
                        }
                        sync_cube();
                    }
                }
                if comptime!(kk + 1 < VECTOR) {
                    load_k::<F>(
                        shared_a, shared_b, base_a, base_b, frags, kc, comptime!(kk + 1), held,
                        config, layouts,
                    );
                } else if comptime!(h + 1 < per_trip) {
                    load_head::<F>(
                        shared_a, shared_b, base_a, base_b, frags, kc + 1, held, other, config,
                        layouts,
                    );
                } else {
                    // The next chunk: this tile's, or after the last trip the next tile's
                    // first. (Unconditional: after the last tile, what is loaded is unused.)
                    let last = trip == comptime!(trips - 1);
                    load_head::<F>(
                        shared_a,
                        shared_b,
                        select(last, next_a, base_a),
                        select(last, next_b, base_b),
                        frags,
                        select(last, 0u32, kc + 1),
                        held,
                        other,
                        config,
                        layouts,
                    );
                }
                multiply::<F>(held, acc, kk, set, layouts);
            }
        }
    }
}

/// One trip's share (of `trips`) of a unit's copies of `run_a` and `run_b` into the stages at
/// `base_a` and `base_b`: the next ones, `bounded` or whole ([`copy_run`]).
#[cube]
#[allow(clippy::too_many_arguments)]
fn copy_trips<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    plan_a: &CopyPlan,
    plan_b: &CopyPlan,
    run_a: &mut PieceRun,
    run_b: &mut PieceRun,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    base_a: u32,
    base_b: u32,
    #[comptime] trips: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] bounded: bool,
    #[comptime] asynchronous: bool,
) {
    let (tile_a, tile_b) = comptime!(config.tiles(layouts));
    let units = comptime!(config.units());
    let (count_a, count_b) =
        comptime!((copies_per_unit(tile_a, units) / trips, copies_per_unit(tile_b, units) / trips));
    copy_run::<F>(
        a, plan_a, run_a, shared_a, base_a, count_a, tile_a, units, bounded, !asynchronous,
    );
    copy_run::<F>(
        b, plan_b, run_b, shared_b, base_b, count_b, tile_b, units, bounded, !asynchronous,
    );
}

/// A unit's copies of K tile `t` of A (`is_a`) or B along its plan into the stage at
/// `stage_base` ([`PieceRun`]), bounded by the operand's edges and the slab's end (past them
/// zero-filled). A tile past the end (`t` ≥ `tiles`) reads nothing: its K coordinates may
/// have wrapped past 2³², so its end along K is taken as 0 rather than compared.
#[cube]
#[allow(clippy::too_many_arguments)]
fn tile_run(
    plan: &CopyPlan,
    dims: &Dims,
    row0: u32,
    col0: u32,
    t: u32,
    tiles: u32,
    stage_base: u32,
    #[comptime] config: PipelinedConfig,
    #[comptime] layouts: Layouts,
    #[comptime] is_a: bool,
) -> PieceRun {
    let (tile_a, tile_b) = comptime!(config.tiles(layouts));
    let staged = comptime!(if is_a { tile_a } else { tile_b });
    let k0 = dims.k_begin + t * comptime!(config.bk);
    let k_end = select(t < tiles, dims.k_end, 0u32);
    // Where the stored rows and the chunks along them run, and end: A's rows and K (K and M,
    // column-major), B's K and N (N and K).
    let (corner, end) = if comptime!(is_a) {
        (row0, dims.m)
    } else {
        (col0, dims.n)
    };
    if comptime!(is_a != staged.by_cols) {
        piece_run(plan, t, stage_base, corner, end, k0, k_end, staged)
    } else {
        piece_run(plan, t, stage_base, k0, k_end, corner, end, staged)
    }
}

/// How [`stage_pair`] stages this kernel's tiles.
fn staging(
    config: PipelinedConfig,
    layouts: Layouts,
    width_a: u32,
    width_b: u32,
    asynchronous: bool,
) -> PairStaging {
    let (tile_a, tile_b) = config.tiles(layouts);
    PairStaging {
        tile_a,
        tile_b,
        block: (config.bm, config.bn, config.bk),
        units: config.units(),
        widths: (width_a, width_b),
        emulate: !asynchronous,
        rolled_plans: false,
        rolled_bounded: asynchronous,
    }
}

/// A unit's 16-byte copies of one operand's tile.
const fn copies_per_unit(staged: StagedTile, units: u32) -> u32 {
    staged.rows * staged.swizzle.chunks / units
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
    const COPIES_ASYNC: bool = true;

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
        // The barriers and the arrays' 128-byte alignment take 128 bytes more. A tile of BK is
        // BK / (4 · PER_TRIP) + 1 trips (with the K loop's), under BK / 4, so a slab of
        // LOOP_TRIP_LIMIT · 4 elements of K stays under 65535 trips.
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
