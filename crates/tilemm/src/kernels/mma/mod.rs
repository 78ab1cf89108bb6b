//! NVIDIA's matrix units the way the fastest Ampere-class kernels drive them (CUTLASS's sm80
//! multistage GEMM): warp-level `mma.sync` on fragments the kernel lays out itself, loaded
//! from shared memory with `ldmatrix`, fed by a pipeline of 16-byte asynchronous copies
//! (`cp.async`) several K tiles deep. f16 and bf16 inputs, and tf32 (f32 data), f32
//! accumulation.
//!
//! - **Block and warp tiles.** A cube of WM×WN warps (times WK groups along K, below)
//!   computes a BM×BN block of C; each warp a 64×64 warp tile: per step of 16 along K it loads
//!   4 fragments of A and 8 of B with 8 `ldmatrix.x4` and issues 32 `mma.m16n8k16`, 4 per
//!   load.
//! - **Pipeline.** STAGES buffers of the BM×BK and BK×BN tiles in shared memory, filled with
//!   `cp.async` (each copy 16 bytes, zero-filled past the edges) and completed on one
//!   `mbarrier` per stage: while the warps compute on tile t, tiles t+1 … t+STAGES−1 are in
//!   flight.
//! - **Schedule** (CUTLASS's sm80 `mma_multistage.h`). Two sets of fragments: each step's MMAs
//!   issue on fragments loaded during the step before, the last step loading the next tile's
//!   first. The copies of the tile fetched are spread over the steps, between the MMAs; the one
//!   cube barrier per K tile (after the wait for the next tile) comes a step before the tile's
//!   end, so that the last step's MMAs follow it at once. Stage offsets are run-time values, so
//!   that addresses take a few registers and the second set of fragments fits; a lane keeps one
//!   fragment address per operand and moves it by XOR. The compile check holds the interior
//!   loop to at most 16 instructions without an HMMA on sm_80 and sm_90, with no `ldmatrix`
//!   beside the barrier.
//! - **Conflict-free shared memory.** Each operand's tile lies as it lies in global memory (A
//!   row-major: rows of K; column-major: rows of M), in 16-byte chunks whose position within a
//!   row is XORed with the row
//!   ([`Swizzle`]): the 8 rows an `ldmatrix` phase reads, and the 8
//!   chunks a phase of copies writes, fall in 8 distinct bank groups. `ldmatrix.trans` turns
//!   the operands stored the other way into the fragments `mma` wants, so neither is
//!   transposed on its way to shared memory.
//! - **Epilogue** (CUTLASS's). Each lane holds pairs of adjacent columns of C. Where C's rows
//!   take 16-byte vectors, each warp passes its tile through shared memory 8 rows at a time
//!   (α applied, in f32) and stores whole 16-byte vectors of a row, β·C read the same way
//!   (`store_staged`: a lane's 16 stores of 16 bytes in f16 where the pairs took 64 of 4);
//!   else the pairs go out as 2-vectors from the registers. Inside C, without bounds checks
//!   and with β tested once.
//! - **Rasterized grid.** Blocks walk C in groups of 8 rows of blocks, for L2 reuse.
//! - **Sliced K** (`wk`, CUTLASS's warp count in K). WK groups of WM×WN warps share the
//!   pipeline, each taking its own steps of every K tile into accumulators of the whole block;
//!   after the K loop the groups after the first leave their sums in shared memory and the
//!   first adds them and stores C. Twice the warps per cube, and no second launch, for
//!   products of few blocks (split-K's slices each launch a partial of C).
//!
//! - **tf32** (`mma.m16n8k8`). A step of K is the same 32 bytes of each row: where K is
//!   contiguous, tiles, copies and `ldmatrix` addresses are f16's chunk for chunk (`ldmatrix`
//!   of 16-bit pairs gives each lane the 32-bit elements it wants). Where M or N is, which
//!   `ldmatrix.trans` cannot turn (it moves 16-bit elements), each lane loads its registers
//!   as 32-bit words from rows padded by 8 words ([`Swizzle::words`]): conflict-free, and every
//!   address its first plus an immediate. The f32 registers go to the units as they are,
//!   which drop the low 13 bits of each significand.
//!
//! The contract is whole: operands whose rows are not 16-byte aligned, or strided ones, are
//! copied element by element into the same layout (synchronously), C that is not row-major
//! with even strides is stored element by element, and every edge is guarded.

use crate::kernels::common::args::GemmInput;
use cubecl::cmma::MmaDefinition;
use cubecl::ir::MatrixIdent;
use cubecl::prelude::barrier::Barrier;
use cubecl::prelude::*;
use serde::Serialize;

use crate::kernels::common::args::{at, Dims, Layouts, View, GemmArgs};
use crate::kernels::common::async_copy::{
    copy_plan, stage_pair, swizzled, within, CopyPlan, PairStaging, Share, StagedTile, Swizzle,
    CHUNK_BYTES,
};
pub use crate::kernels::common::async_copy::{copy_width, store_width};

mod emulated;
use emulated::*;
use crate::kernels::{LaunchShape, Rung};
use crate::device::{DeviceInfo, MatrixUnit};
use crate::error::Unavailable;
use crate::problem::{DType, Precision, Problem};


/// The instruction's shape for inputs of `bytes` bytes: m16n8k16 for f16 and bf16, m16n8k8
/// for tf32 (f32 data). A step of K is 32 bytes of each row of A either way: two chunks.
pub const fn instruction(bytes: u32) -> (u32, u32, u32) {
    (16, 8, 32 / bytes)
}

/// Lanes of a warp.
const WARP: u32 = 32;

/// The manual-MMA rung.
pub struct Mma;

/// The rung's settings: the block tile, its warps and the pipeline's depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MmaConfig {
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
    /// Slices of K computed side by side (split-K): each cube sums one slice of its block
    /// into an f32 partial, and a second launch adds the partials, with α and β, into C. For
    /// products whose blocks alone would leave most of the GPU idle (1024³ is 64 blocks of
    /// 128×128 on an H100's 132 SMs).
    pub split: u32,
    /// Warps along K within the cube (CUTLASS's sliced K, its warp count in K): WK groups of
    /// WM×WN warps each compute the whole block of C over their own steps of each K tile, and
    /// the groups' sums are added in shared memory before the epilogue. More warps per cube
    /// with no second launch, for products of few blocks.
    pub wk: u32,
    /// Carry out `ldmatrix`, `mma.sync` and `cp.async` as the PTX ISA defines them, with
    /// ordinary shared-memory loads and stores and cube barriers, around the same staging,
    /// swizzle, fragment addresses and epilogue: so that any device (lavapipe in CI) checks
    /// every index the CUDA kernel computes. Slow, and never registered: tests build it.
    pub emulate: bool,
}

impl MmaConfig {
    const KEYS: [&'static str; 8] = ["bm", "bn", "bk", "wm", "wn", "stages", "split", "wk"];

    /// Rows of a warp's tile.
    pub fn warp_m(&self) -> u32 {
        self.bm / self.wm
    }

    /// Whether `fragment_offset` XORs a lane's base before adding the stage's and the
    /// fragment's rows (one XOR per step of A or pair of B, the rows in `ldmatrix`'s immediate),
    /// rather than XORing the sum (an add and an XOR per load), for `bytes`-byte inputs: in
    /// warp tiles of 64 rows (4 fragments of A a step) with 4 steps or more per K tile. There
    /// NVRTC 12.9's loop for 128×256 at BK 64 in f16 holds 51% HMMA against 47% on sm_80 and
    /// 45% against 44% on sm_90, and 128×128 at BK 64 49% against 45% with its longest run
    /// without an HMMA 11 against 16 on sm_90. In the 64×128 configurations' 32-row warp tiles,
    /// and with 2 steps a tile (tf32 at BK 16), the same form had ptxas gather the copies into
    /// runs of 17–22 (the compile check's limit is 16). The emulation takes it wherever its
    /// warp tile has 64 rows, whatever its steps, so that lavapipe runs both forms (4 steps of
    /// 64-row warps do not fit in its 32 KiB of shared memory).
    pub fn xor_first(&self, bytes: u32) -> bool {
        self.warp_m() >= 64 && (self.steps_per_group(bytes) >= 4 || self.emulate)
    }

    /// Columns of a warp's tile.
    pub fn warp_n(&self) -> u32 {
        self.bn / self.wn
    }

    /// Warps per cube: WK groups of WM×WN.
    pub fn warps(&self) -> u32 {
        self.wm * self.wn * self.wk
    }

    /// Units per cube.
    pub fn units(&self) -> u32 {
        WARP * self.warps()
    }

    /// Steps of K (of the instruction's K) each group of warps takes in a K tile of
    /// `bytes`-byte inputs.
    pub fn steps_per_group(&self, bytes: u32) -> u32 {
        self.bk / instruction(bytes).2 / self.wk
    }

    /// A's and B's tiles for operands of `bytes`-byte elements in `layouts`. 32-bit operands
    /// stored with M or N contiguous, whose fragments are read a word per lane
    /// ([`MmaConfig::reads_words`]), take [`Swizzle::words`].
    pub fn tiles(&self, bytes: u32, layouts: Layouts) -> (StagedTile, StagedTile) {
        let tile = |outer, inner, by_cols, is_a| {
            let plain = StagedTile::new(outer, inner, bytes, by_cols);
            if Self::reads_words(bytes, is_a, by_cols) {
                StagedTile {
                    swizzle: Swizzle::words(plain.swizzle.chunks),
                    ..plain
                }
            } else {
                plain
            }
        };
        (
            tile(self.bm, self.bk, layouts.a_by_cols, true),
            tile(self.bk, self.bn, layouts.b_by_cols, false),
        )
    }

    /// Whether an operand's fragments are loaded a 32-bit word per lane rather than with
    /// `ldmatrix`: tf32 stored with M or N contiguous (A by columns, B by rows), which
    /// `ldmatrix.trans` cannot turn (it moves 16-bit elements).
    pub const fn reads_words(bytes: u32, is_a: bool, by_cols: bool) -> bool {
        bytes == 4 && is_a == by_cols
    }

    /// Shared memory of the pipeline for `bytes`-byte inputs in their most padded layouts, of
    /// the emulation's scratch and the sliced groups' sums, in bytes (the barriers and
    /// alignment add 128 bytes more; the wide epilogue's staging, where the device has room,
    /// [`MmaConfig::staging_bytes`]).
    pub fn shared_bytes(&self, bytes: u32) -> usize {
        let stage = Self::all_layouts()
            .iter()
            .map(|&layouts| {
                let (ta, tb) = self.tiles(bytes, layouts);
                ta.elements() + tb.elements()
            })
            .max()
            .unwrap_or(0);
        ((self.stages * stage + self.scratch(bytes)) * bytes) as usize + self.sums_bytes()
    }

    /// Shared memory where the groups of warps along K after the first leave their sums of the
    /// block (f32), in bytes.
    pub fn sums_bytes(&self) -> usize {
        (self.wk.saturating_sub(1) * self.bm * self.bn * 4) as usize
    }

    /// Elements (f32) of the wide epilogue's staging (`store_staged`): for each warp of a
    /// group, [`STAGED_ROWS`] rows of its tile, each padded by 8 so that the 8 rows of a
    /// fragment's pairs fall in 4 distinct bank groups (two wavefronts, the least for 256
    /// bytes).
    pub fn staging_elements(&self) -> u32 {
        self.wm * self.wn * STAGED_ROWS * (self.warp_n() + 8)
    }

    /// Bytes of the wide epilogue's staging.
    pub fn staging_bytes(&self) -> usize {
        (self.staging_elements() * 4) as usize
    }

    /// Whether the wide epilogue's staging fits beside the pipeline for `bytes`-byte inputs
    /// in `limit` bytes of shared memory per cube (the device's). Where it does not (tf32's
    /// 128×256 blocks on an A100's 163 KiB), C goes out in the fragments' pairs.
    pub fn stages_c(&self, bytes: u32, limit: usize) -> bool {
        self.shared_bytes(bytes) + 128 + self.staging_bytes() <= limit
    }

    /// Elements of scratch the emulation needs after B's stages.
    fn scratch(&self, bytes: u32) -> u32 {
        if self.emulate {
            self.scratch_per_warp(bytes) * self.warps()
        } else {
            0
        }
    }

    /// Elements of one warp's scratch in the emulation: its two sets of fragments for a step
    /// of K, A's 16×IK and B's IK×8 each.
    fn scratch_per_warp(&self, bytes: u32) -> u32 {
        let (im, in_, ik) = instruction(bytes);
        ((self.warp_m() / im) * im * ik + (self.warp_n() / in_) * ik * in_) * 2
    }

    /// Whether the configuration is laid out for 16-bit or for 32-bit inputs
    /// ([`MmaConfig::valid_for`]).
    pub fn valid(&self) -> bool {
        self.valid_for(2) || self.valid_for(4)
    }

    /// Whether the tiles of `bytes`-byte inputs divide into warps, fragments, chunks and
    /// units evenly, in every layout ([`MmaConfig::fits`]), and every lane's fragment
    /// addresses move as `fragment_offset` and `word_offset` move them.
    pub fn valid_for(&self, bytes: u32) -> bool {
        self.fits(bytes)
            && self.xor_moves_hold(bytes)
            && (bytes != 4 || self.word_moves_hold())
    }

    /// [`MmaConfig::valid_for`]'s arithmetic alone, without walking every lane's addresses:
    /// what `computes` asks on each plan check (the registered configurations are `valid`).
    pub fn fits(&self, bytes: u32) -> bool {
        let (im, in_, ik) = instruction(bytes);
        let units = self.units();
        let tiles_fit = Self::all_layouts().iter().all(|&layouts| {
            let (ta, tb) = self.tiles(bytes, layouts);
            [ta, tb].iter().all(|t| {
                let chunks = t.swizzle.chunks;
                // Offsets within the stages under 2¹⁶ (`within`).
                units.is_multiple_of(chunks)
                    && (t.rows * chunks).is_multiple_of(units)
                    && self.stages * t.elements() <= 1 << 16
            })
        });
        self.split >= 1
            && self.wk >= 1
            && self.bm.is_multiple_of(self.wm)
            && self.bn.is_multiple_of(self.wn)
            && self.warp_m().is_multiple_of(im)
            && self.warp_n().is_multiple_of(2 * in_)
            // An even number of steps of K for each group of warps, at least 2: the next tile's
            // first fragments go to set 0, and the barrier comes a step before the tile's end. A
            // power of two, from a multiple of it: a group's fragment addresses move by XOR.
            && self.bk.is_multiple_of(2 * ik * self.wk)
            && self.steps_per_group(bytes).is_power_of_two()
            && self.stages >= 2
            && tiles_fit
    }

    /// The four layouts of A and B.
    fn all_layouts() -> [Layouts; 4] {
        [(false, false), (true, false), (false, true), (true, true)].map(|(a, b)| Layouts {
            a_by_cols: a,
            b_by_cols: b,
        })
    }

    /// Whether every lane's `ldmatrix` addresses are its first one's with the chunk XORed
    /// (`fragment_offset`), as
    /// [`Swizzle::position`](crate::kernels::common::async_copy::Swizzle::position) places
    /// them: for `bytes`-byte inputs, in every layout of each operand read with `ldmatrix`,
    /// for every warp, lane, fragment and step, each group of warps along K from its own first
    /// step. It holds where a warp's fragments cover an aligned power of two of chunks within a
    /// row (warp tiles of 64 hold 8 of 16 or more, a group's steps 2·BK/(IK·WK) of BK/(16
    /// bytes), from a multiple of their count).
    pub fn xor_moves_hold(&self, bytes: u32) -> bool {
        let (im, in_, ik) = instruction(bytes);
        let steps = self.steps_per_group(bytes);
        Self::all_layouts().iter().all(|&layouts| {
            let (ta, tb) = self.tiles(bytes, layouts);
            let a = (ta, true, self.warp_m(), self.warp_m() / im, self.wm);
            let b = (tb, false, self.warp_n(), self.warp_n() / in_ / 2, self.wn);
            [a, b].iter().all(|&(t, is_a, warp_span, outer, warps)| {
                if Self::reads_words(bytes, is_a, t.by_cols) {
                    return true;
                }
                let row_elems = t.swizzle.stride * t.per_chunk;
                let rows_are_outer = is_a != t.by_cols;
                let place = |row: u32, along: u32| t.swizzle.position(row, along / t.per_chunk);
                (0..warps).all(|w| {
                    let origin = w * warp_span;
                    (0..WARP).all(|lane| {
                        let (quad, sub) = (lane / 8, lane % 8);
                        let (outer_quad, k_quad) = if is_a {
                            ((quad % 2) * 8, quad / 2)
                        } else {
                            ((quad / 2) * 8, quad % 2)
                        };
                        let at = |o: u32, kk: u32| {
                            if rows_are_outer {
                                let along = kk * ik + k_quad * t.per_chunk;
                                place(origin + o * 16 + outer_quad + sub, along)
                            } else {
                                place(kk * ik + k_quad * 8 + sub, origin + o * 16 + outer_quad)
                            }
                        };
                        (0..self.wk).all(|group| {
                            let first = group * steps;
                            let base = at(0, first) * t.per_chunk;
                            (0..outer).all(|o| {
                                (0..steps).all(|kk| {
                                    let (rows, xor) = if rows_are_outer {
                                        (o * 16 * row_elems, 2 * kk * t.per_chunk)
                                    } else {
                                        (kk * ik * row_elems, 2 * o * t.per_chunk)
                                    };
                                    let moved = if self.xor_first(bytes) {
                                        (base ^ xor) + rows
                                    } else {
                                        (base + rows) ^ xor
                                    };
                                    moved == at(o, first + kk) * t.per_chunk
                                })
                            })
                        })
                    })
                })
            })
        })
    }

    /// Whether every lane's 32-bit fragment loads (tf32 stored with M or N contiguous) lie
    /// where `word_offset` places them from its first one, as
    /// [`Swizzle::position`](crate::kernels::common::async_copy::Swizzle::position) places
    /// them: for every stage, warp, lane, 8-wide fragment `u` (A's rows, B's columns),
    /// register half `h` (4 more of K) and step, each group of warps along K from its own first
    /// step.
    pub fn word_moves_hold(&self) -> bool {
        let steps = self.steps_per_group(4);
        let layouts = Layouts {
            a_by_cols: true,
            b_by_cols: false,
        };
        let (ta, tb) = self.tiles(4, layouts);
        let a = (ta, self.warp_m(), self.wm);
        let b = (tb, self.warp_n(), self.wn);
        [a, b].iter().all(|&(t, warp_span, warps)| {
            let row_elems = t.swizzle.stride * t.per_chunk;
            let place = |row: u32, col: u32| {
                t.swizzle.position(row, col / t.per_chunk) * t.per_chunk + col % t.per_chunk
            };
            (0..self.stages).all(|stage| {
                    let stage_base = stage * t.elements();
                    (0..warps).all(|w| {
                        let origin = w * warp_span;
                        (0..WARP * self.wk).all(|unit| {
                            let (lane, first) = (unit % WARP, unit / WARP * steps);
                            let (g, q) = (lane / 4, lane % 4);
                            let base = place(8 * first + q, origin + g);
                            (0..warp_span / 8).all(|u| {
                                (0..2).all(|h| {
                                    (0..steps).all(|kk| {
                                        let moved = base
                                            + stage_base
                                            + (4 * h + 8 * kk) * row_elems
                                            + 8 * u;
                                        let k = 8 * (first + kk) + 4 * h + q;
                                        moved == stage_base + place(k, origin + 8 * u + g)
                                    })
                                })
                            })
                        })
                    })
                })
        })
    }
}


/// A lane's `ldmatrix.x4` address into one operand's stage (in elements from the stage's
/// start) for its warp tile's first fragment at step `first` of K (its group's first, along
/// K), the warp tile starting at `origin` (its first row of A, or column of B);
/// [`fragment_offset`] derives the others.
///
/// Lane `l` gives the address of row `l % 8` of 8×8 matrix `l / 8` (of 16-bit elements: a
/// row is one 16-byte chunk). Of a 16×IK fragment of A the matrices are rows (quad % 2)·8..
/// and chunk quad / 2 of K; of a pair of IK×8 fragments of B, chunk quad % 2 of K and columns
/// (quad / 2)·8... (For tf32, a chunk of K is 4 elements, and `ldmatrix` of 16-bit pairs
/// hands each lane the 32-bit elements m16n8k8 wants: the step is the same 32 bytes.)
#[cube]
fn fragment_bases(
    lane: u32,
    origin: u32,
    first: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
    #[comptime] xor_first: bool,
) -> Array<u32> {
    let (quad, sub) = (lane / 8, lane % 8);
    let per_chunk = comptime!(staged.per_chunk);
    let (outer_quad, k_chunk) = if comptime!(is_a) {
        ((quad % 2) * 8, quad / 2)
    } else {
        ((quad / 2) * 8, quad % 2)
    };
    // A step of K is two chunks: 16 elements of 16 bits, 8 of 32.
    let k = first * comptime!(2 * per_chunk);
    let (row, along) = if comptime!(is_a != staged.by_cols) {
        (origin + outer_quad + sub, k + k_chunk * per_chunk)
    } else {
        (k + k_chunk * 8 + sub, origin + outer_quad)
    };
    let mut bases = Array::<u32>::new(1usize);
    let base = swizzled(row, along / per_chunk, staged.swizzle) * per_chunk;
    // Under 2¹⁶ (the stages' elements), said so where `fragment_offset` XORs it alone: the
    // compiler then folds the constant after the XOR into the load's address.
    bases[0] = if comptime!(xor_first) {
        within(base)
    } else {
        base
    };
    bases
}

/// The lane's address for outer fragment `o` at step `kk` in the stage at `stage_base`,
/// from its [`fragment_bases`]. Where the stored rows are the fragments' outer axis (A
/// row-major, B column-major), the step moves the address along its row by 2·`kk` chunks and
/// the fragment down by 16·`o` rows; otherwise the fragment moves it along by 2·`o` chunks
/// and the step down by IK·`kk` rows. Moving along is an XOR of the chunk (CUTLASS's
/// crosswise iterators): the chunks a lane's fragments cover are an aligned power of two whose
/// bits the swizzle only permutes ([`MmaConfig::xor_moves_hold`]), so one register holds the
/// lane's base rather than one per step or fragment.
///
/// `xor_first` ([`MmaConfig::xor_first`]): the base XORed alone and the whole rows added
/// after, the stage's in a register and the fragment's or step's in `ldmatrix`'s immediate
/// (`LDSM [R+UR+0x800]`), where XORing the sum costs an add and an XOR per load: the same
/// address, since the rows added are whole multiples of the XOR's span.
#[cube]
fn fragment_offset(
    bases: &Array<u32>,
    stage_base: u32,
    #[comptime] o: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
    #[comptime] xor_first: bool,
) -> u32 {
    let row_elems = comptime!(staged.swizzle.stride * staged.per_chunk);
    let per_chunk = comptime!(staged.per_chunk);
    // A step of K is two chunks: 16 elements of 16 bits, 8 of 32.
    let ik = comptime!(2 * per_chunk);
    let rows_outer = comptime!(is_a != staged.by_cols);
    let (rows, moved) = comptime!(if rows_outer {
        (o * 16 * row_elems, 2 * kk * per_chunk)
    } else {
        (kk * ik * row_elems, 2 * o * per_chunk)
    });
    if comptime!(xor_first) {
        (bases[0] ^ moved) + within(stage_base) + rows
    } else {
        (bases[0] + stage_base + rows) ^ moved
    }
}

/// A lane's first 32-bit fragment element in an operand's stage (tf32 stored with M or N
/// contiguous: rows of K, [`Swizzle::words`]): lane (g, q) = (`lane` / 4, `lane` % 4) holds,
/// in m16n8k8, A's rows g and g + 8 and B's column g, at K q and q + 4, so its first is row
/// q of step `first` (its group's first, along K) of the stage, at column `origin` + g.
/// [`word_offset`] derives the others.
#[cube]
fn word_bases(lane: u32, origin: u32, first: u32, #[comptime] staged: StagedTile) -> Array<u32> {
    let (g, q) = (lane / 4, lane % 4);
    let per_chunk = comptime!(staged.per_chunk);
    let col = origin + g;
    let row = first * comptime!(instruction(4).2) + q;
    let mut bases = Array::<u32>::new(1usize);
    bases[0] = swizzled(row, col / per_chunk, staged.swizzle) * per_chunk + col % per_chunk;
    bases
}

/// The lane's element of the 8-wide fragment `u` (A's rows 8·`u`.., B's columns 8·`u`.. of
/// the warp tile) at K 4·`h` + q of step `kk`, in the stage at `stage_base`, from its
/// [`word_bases`]: the rows are padded, not swizzled ([`Swizzle::words`]), so every element is
/// the first plus a constant ([`MmaConfig::word_moves_hold`]), which `LDS [R+imm]` takes in its
/// immediate where the first is known not to wrap ([`within`]: the stages hold under 2¹⁶
/// elements).
#[cube]
fn word_offset(
    bases: &Array<u32>,
    stage_base: u32,
    #[comptime] u: u32,
    #[comptime] h: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
) -> u32 {
    let row_elems = comptime!(staged.swizzle.stride * staged.per_chunk);
    within(bases[0] + stage_base) + comptime!((4 * h + 8 * kk) * row_elems + 8 * u)
}

/// Where register `r` of A's fragment `o` (`is_a`), or of B's pair `o`, comes from in
/// [`word_offset`]'s terms: (`u`, `h`), the 8-wide fragment and the half of K. In m16n8k8,
/// A's register r holds rows 8·(r % 2).. of the fragment at K 4·(r / 2)..; B's pair holds
/// fragment 2o + h in registers 2h (K 0..) and 2h + 1 (K 4..). The kernel loads by it and the
/// emulation both loads by it and places each register by the PTX layout, so that a wrong
/// mapping shows there.
const fn word_register(o: u32, r: u32, is_a: bool) -> (u32, u32) {
    if is_a {
        (2 * o + r % 2, r / 2)
    } else {
        (2 * o + r / 2, r % 2)
    }
}

/// Loads fragment registers with `ldmatrix.x4` (transposed where the operand is stored across
/// the fragments' rows) from `offset`, the lane's row address: 16-bit pairs, which for tf32
/// are the 32-bit elements themselves (`ldmatrix` moves b16 elements only: the row is read as
/// 16-bit halves and each register taken as the word it is).
#[cube]
fn load_x4<F: Float, NF: Size, A: Float>(
    def: MmaDefinition<F, F, A>,
    tile: &SharedMemory<F>,
    offset: u32,
    #[comptime] per_chunk: u32,
    #[comptime] ident: MatrixIdent,
    #[comptime] transpose: bool,
) -> Array<Vector<F, NF>> {
    let start = offset as usize;
    let row = tile.slice(start, start + per_chunk as usize);
    if comptime!(per_chunk == 8) {
        def.load_matrix::<F, NF>(&row, ident, 4usize, transpose)
    } else {
        // SAFETY: the 16 bytes the lane addresses, read as the 16-bit halves `ldmatrix` moves
        // (never transposed: `reads_words` operands are loaded by `word_offset`).
        let halves = unsafe { row.downcast_unchecked::<half::f16>() };
        let words = def.load_matrix::<half::f16, Const<2>>(&halves, ident, 4usize, false);
        let mut regs = Array::<Vector<F, NF>>::new(4usize);
        #[unroll]
        for r in 0..4usize {
            regs[r] = Vector::<F, NF>::reinterpret(words[r]);
        }
        regs
    }
}


/// A warp's fragments for one step of K, two sets (`slot` 0 and 1) so that one step's are
/// loaded while the other's MMAs issue: A's MI 16×IK fragments and B's NI IK×8 in pairs, four
/// 32-bit registers each (`NF` elements of `F` apiece: two 16-bit, one tf32). Emulated, they
/// live in the warp's scratch in shared memory instead.
#[derive(CubeType)]
struct Fragments<F: Float, NF: Size> {
    a: Sequence<Array<Vector<F, NF>>>,
    b: Sequence<Array<Vector<F, NF>>>,
}

#[cube]
impl<F: Float, NF: Size> Fragments<F, NF> {
    fn new(
        #[comptime] mi: u32,
        #[comptime] pairs: u32,
        #[comptime] emulate: bool,
    ) -> Fragments<F, NF> {
        let mut a = Sequence::<Array<Vector<F, NF>>>::new();
        let mut b = Sequence::<Array<Vector<F, NF>>>::new();
        if !comptime!(emulate) {
            #[unroll]
            for _ in 0..2 * mi {
                a.push(Array::<Vector<F, NF>>::new(4usize));
            }
            #[unroll]
            for _ in 0..2 * pairs {
                b.push(Array::<Vector<F, NF>>::new(4usize));
            }
        }
        Fragments::<F, NF> { a, b }
    }
}

/// Where a warp's emulated fragments of `slot` lie in `shared_b`: A's MI 16×IK, then B's NI
/// IK×8, after B's stages and the other warps' scratch (for `bytes`-byte inputs).
#[cube]
fn scratch_slot(
    #[comptime] slot: u32,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
    #[comptime] bytes: u32,
) -> (u32, u32) {
    let (_, tile_b) = comptime!(config.tiles(bytes, layouts));
    let (fm, fn_, fk) = comptime!(instruction(bytes));
    let (mi, ni) = comptime!((config.warp_m() / fm, config.warp_n() / fn_));
    let per_slot = comptime!(mi * fm * fk + ni * fk * fn_);
    let a_scratch = comptime!(config.stages * tile_b.elements() + slot * per_slot)
        + UNIT_POS_Y * comptime!(config.scratch_per_warp(bytes));
    (a_scratch, a_scratch + comptime!(mi * fm * fk))
}

/// Loads step `kk` of the warp's group (from its step `first` of K; the lane's `bases` start
/// there) of the tile in `stage` (a run-time value: offsets fixed at compile time per stage
/// would each hold a register) into fragment set `slot`: MI `ldmatrix.x4` of A and
/// NI/2 of B (transposed where the operand is stored across the fragments' rows), or for tf32
/// stored so, 4 32-bit loads per fragment of A and pair of B.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_step<F: Float, NF: Size, A: Float>(
    def: MmaDefinition<F, F, A>,
    shared_a: &SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    bases_a: &Array<u32>,
    bases_b: &Array<u32>,
    frags: &mut Fragments<F, NF>,
    warp_row: u32,
    warp_col: u32,
    first: u32,
    stage: u32,
    #[comptime] slot: u32,
    #[comptime] kk: u32,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
) {
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let (tile_a, tile_b) = comptime!(config.tiles(bytes, layouts));
    let (fm, fn_, _) = comptime!(instruction(bytes));
    let (mi, ni) = comptime!((config.warp_m() / fm, config.warp_n() / fn_));
    let words_a = comptime!(MmaConfig::reads_words(bytes, true, tile_a.by_cols));
    let words_b = comptime!(MmaConfig::reads_words(bytes, false, tile_b.by_cols));
    let xor_first = comptime!(config.xor_first(bytes));
    let base_a = stage * comptime!(tile_a.elements());
    let base_b = stage * comptime!(tile_b.elements());
    if comptime!(config.emulate) {
        let (a_scratch, b_scratch) = scratch_slot(slot, config, layouts, bytes);
        #[unroll]
        for i in 0..mi {
            if comptime!(words_a) {
                emulated_words::<F>(
                    shared_a, shared_b, a_scratch, UNIT_POS_X, bases_a, base_a, i, kk, tile_a,
                    true,
                );
            } else {
                emulated_ldmatrix::<F>(
                    shared_a, shared_b, a_scratch, UNIT_POS_X, warp_row, first, base_a, i, kk,
                    tile_a, true, comptime!(tile_a.by_cols), xor_first,
                );
            }
        }
        #[unroll]
        for p in 0..comptime!(ni / 2) {
            if comptime!(words_b) {
                emulated_words::<F>(
                    shared_a, shared_b, b_scratch, UNIT_POS_X, bases_b, base_b, p, kk, tile_b,
                    false,
                );
            } else {
                emulated_ldmatrix::<F>(
                    shared_a, shared_b, b_scratch, UNIT_POS_X, warp_col, first, base_b, p, kk,
                    tile_b, false, comptime!(!tile_b.by_cols), xor_first,
                );
            }
        }
    } else {
        #[unroll]
        for i in 0..mi {
            let frag = frags.a.index_mut(comptime!((slot * mi + i) as usize));
            load_fragment::<F, NF, A>(
                def, shared_a, bases_a, base_a, frag, i, kk, tile_a, true, xor_first,
            );
        }
        #[unroll]
        for p in 0..comptime!(ni / 2) {
            let frag = frags.b.index_mut(comptime!((slot * (ni / 2) + p) as usize));
            load_fragment::<F, NF, A>(
                def, shared_b, bases_b, base_b, frag, p, kk, tile_b, false, xor_first,
            );
        }
    }
}

/// One operand's 4 fragment registers of step `kk` into `frag`: A's fragment `o` (`is_a`), or
/// B's pair `o`, from the stage at `stage_base` of `tile`. One `ldmatrix.x4` (transposed where
/// the operand is stored across the fragments' rows), or for tf32 stored so, 4 32-bit loads.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_fragment<F: Float, NF: Size, A: Float>(
    def: MmaDefinition<F, F, A>,
    tile: &SharedMemory<F>,
    bases: &Array<u32>,
    stage_base: u32,
    frag: &mut Array<Vector<F, NF>>,
    #[comptime] o: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
    #[comptime] xor_first: bool,
) {
    let size = F::type_size();
    // Stored with M or N contiguous: across A's rows (by columns) or B's columns (by rows).
    let across = comptime!(is_a == staged.by_cols);
    if comptime!(MmaConfig::reads_words(size as u32, is_a, staged.by_cols)) {
        #[unroll]
        for r in 0..4u32 {
            let (u, h) = comptime!(word_register(o, r, is_a));
            let offset = word_offset(bases, stage_base, u, h, kk, staged);
            frag[r as usize] = Vector::cast_from(tile[offset as usize]);
        }
    } else {
        let offset = fragment_offset(bases, stage_base, o, kk, staged, is_a, xor_first);
        let ident = comptime!(if is_a { MatrixIdent::A } else { MatrixIdent::B });
        let x4 = load_x4::<F, NF, A>(def, tile, offset, comptime!(staged.per_chunk), ident, across);
        #[unroll]
        for r in 0..4usize {
            frag[r] = x4[r];
        }
    }
}

/// The warp's MI·NI `mma.m16n8k16` (tf32: `mma.m16n8k8`) on fragment set `slot`, into `acc`
/// (emulated, into `emulated_acc`).
#[cube]
#[allow(clippy::too_many_arguments)]
fn mma_step<F: Float, NF: Size, A: Float>(
    def: MmaDefinition<F, F, A>,
    shared_b: &SharedMemory<F>,
    frags: &Fragments<F, NF>,
    acc: &mut Sequence<Array<Vector<A, Const<2>>>>,
    emulated_acc: &mut Array<A>,
    #[comptime] slot: u32,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
) {
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let (fm, fn_, fk) = comptime!(instruction(bytes));
    let (mi, ni) = comptime!((config.warp_m() / fm, config.warp_n() / fn_));
    if comptime!(config.emulate) {
        let (a_scratch, b_scratch) = scratch_slot(slot, config, layouts, bytes);
        emulated_mma::<F, A>(shared_b, a_scratch, b_scratch, UNIT_POS_X, emulated_acc, mi, ni, fk);
    } else {
        #[unroll]
        for p in 0..comptime!(ni / 2) {
            let pair = frags.b.index(comptime!((slot * (ni / 2) + p) as usize));
            #[unroll]
            for h in 0..2u32 {
                // Registers 2h and 2h + 1 of the x4 are fragment 2p + h.
                let mut frag_b = Array::<Vector<F, NF>>::new(2usize);
                frag_b[0] = pair[(2 * h) as usize];
                frag_b[1] = pair[(2 * h + 1) as usize];
                let j = 2 * p + h;
                #[unroll]
                for i in 0..mi {
                    let acc_ij = acc.index_mut(comptime!((i * ni + j) as usize));
                    def.execute_inplace::<NF, NF, Const<2>>(
                        frags.a.index(comptime!((slot * mi + i) as usize)),
                        &frag_b,
                        acc_ij,
                    );
                }
            }
        }
    }
}

/// Issues part `share` of a unit's copies of K tile `t` into `stage`: along the plans where
/// `fast` (whole tiles, 16-byte copies), else each piece placed and bounded on its own. Past
/// the slab's end (`live` false) the copies read nothing: `guarded` where that can be so (the
/// bounded pieces are bounded by the slab anyway).
#[cube]
#[allow(clippy::too_many_arguments)]
fn fetch<F: Float>(
    a: &Array<F>,
    b: &Array<F>,
    va: &View,
    vb: &View,
    dims: &Dims,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    plan_a: &CopyPlan,
    plan_b: &CopyPlan,
    t: u32,
    live: bool,
    batch: u32,
    row0: u32,
    col0: u32,
    stage: u32,
    #[comptime] share: Share,
    #[comptime] guarded: bool,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] fast: bool,
) {
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let (tile_a, tile_b) = comptime!(config.tiles(bytes, layouts));
    let pair = comptime!(PairStaging {
        tile_a,
        tile_b,
        block: (config.bm, config.bn, config.bk),
        units: config.units(),
        widths: (width_a, width_b),
        emulate: config.emulate,
        rolled_plans: config.emulate,
        rolled_bounded: config.emulate,
    });
    stage_pair::<F>(
        a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, t, live, batch, row0, col0,
        stage * comptime!(tile_a.elements()), stage * comptime!(tile_b.elements()), pair, share,
        guarded, fast,
    );
}

/// The K loop, on CUTLASS's sm80 multistage schedule (`mma_multistage.h`): tiles in flight
/// STAGES − 1 ahead on the stages' barriers; within a tile, each step's MMAs issue on
/// fragments loaded during the step before (the last step loading the next tile's first), the
/// copies of the tile fetched are spread over the steps, and the one cube barrier per tile
/// (after waiting for the next tile) comes a step before the tile's end, so that the MMAs of
/// the last step cover it. `fast`: every tile whole and both operands copied in 16-byte
/// pieces, so copies follow precomputed plans with no bounds; else each piece is placed and
/// bounded on its own.
///
/// Stage `t − 1` is refilled during tile t: its last fragments were loaded before tile t − 1's
/// barrier. Emulated, copies and fragment loads are synchronous stores to shared memory, and a
/// cube barrier at each step keeps one step's fragments from the other's.
#[cube]
#[allow(clippy::too_many_arguments)]
fn k_loop<F: Float, NF: Size, A: Float>(
    a: &Array<F>,
    b: &Array<F>,
    va: &View,
    vb: &View,
    dims: &Dims,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    full: &Sequence<Shared<Barrier>>,
    acc: &mut Sequence<Array<Vector<A, Const<2>>>>,
    emulated_acc: &mut Array<A>,
    batch: u32,
    row0: u32,
    col0: u32,
    warp_row: u32,
    warp_col: u32,
    first: u32,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] fast: bool,
) {
    let (bk, stages) = comptime!((config.bk, config.stages));
    let units = comptime!(config.units());
    let emulate = comptime!(config.emulate);
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let (tile_a, tile_b) = comptime!(config.tiles(bytes, layouts));
    let (fm, fn_, fk) = comptime!(instruction(bytes));
    let (mi, ni) = comptime!((config.warp_m() / fm, config.warp_n() / fn_));
    let def = MmaDefinition::<F, F, A>::new(fm as usize, fn_ as usize, fk as usize);
    let lane = UNIT_POS_X;
    let xor_first = comptime!(config.xor_first(bytes));
    let bases_a = if comptime!(MmaConfig::reads_words(bytes, true, tile_a.by_cols)) {
        word_bases(lane, warp_row, first, tile_a)
    } else {
        fragment_bases(lane, warp_row, first, tile_a, true, xor_first)
    };
    let bases_b = if comptime!(MmaConfig::reads_words(bytes, false, tile_b.by_cols)) {
        word_bases(lane, warp_col, first, tile_b)
    } else {
        fragment_bases(lane, warp_col, first, tile_b, false, xor_first)
    };
    let plan_a = copy_plan(va, batch, row0, dims.k_begin, tile_a, units, bk, false);
    let plan_b = copy_plan(vb, batch, dims.k_begin, col0, tile_b, units, bk, true);
    let mut frags = Fragments::<F, NF>::new(mi, comptime!(ni / 2), emulate);

    let tiles = (dims.k_end - dims.k_begin).div_ceil(bk);
    // The first STAGES − 1 tiles in flight.
    #[unroll]
    for s in 0..comptime!(stages - 1) {
        if s < tiles {
            fetch::<F>(
                a, b, va, vb, dims, shared_a, shared_b, &plan_a, &plan_b, s, true, batch, row0,
                col0, s, Share::WHOLE, false, config, layouts, width_a, width_b, fast,
            );
            if !comptime!(emulate) {
                let bar = full.index(comptime!(s as usize));
                bar.commit_copy_async();
                bar.arrive();
            }
        }
    }
    // Tile 0's first fragments.
    if tiles > 0 {
        if comptime!(emulate) {
            sync_cube();
        } else {
            full.index(0usize).wait_parity(0u32);
        }
        load_step::<F, NF, A>(
            def, shared_a, shared_b, &bases_a, &bases_b, &mut frags, warp_row, warp_col, first,
            0u32, 0u32, 0u32, config, layouts,
        );
    }

    // Tiles in groups of STAGES, so that each tile's stage (and barrier, and the stage it
    // refills) is known at compile time. Every unit runs every trip (the barriers need them
    // all); at most LOOP_TRIP_LIMIT of them (k_per_trip = BK): the host splits K.
    // Tile t's stage is t mod STAGES (= s), but kept as a value the compiler does not fold,
    // so that the fragments' and copies' addresses are a few registers plus this offset.
    // Whole groups first, with no bound on the tiles (no branch between them), then the rest.
    // (Emulated, every tile bounded in one loop: half the code for lavapipe to compile.)
    let mut stage = 0u32;
    let groups = if comptime!(emulate) {
        tiles.div_ceil(stages)
    } else {
        tiles / stages
    };
    for group in 0..groups {
        #[unroll]
        for s in 0..stages {
            let t = group * stages + s;
            if comptime!(emulate) {
                if t < tiles {
                    stage = k_tile::<F, NF, A>(
                        a, b, va, vb, dims, shared_a, shared_b, full, acc, emulated_acc,
                        &mut frags, &bases_a, &bases_b, &plan_a, &plan_b, batch, row0, col0,
                        warp_row, warp_col, first, t, tiles, group, stage, s, config, layouts,
                        width_a, width_b, fast,
                    );
                }
            } else {
                stage = k_tile::<F, NF, A>(
                    a, b, va, vb, dims, shared_a, shared_b, full, acc, emulated_acc, &mut frags,
                    &bases_a, &bases_b, &plan_a, &plan_b, batch, row0, col0, warp_row, warp_col,
                    first, t, tiles, group, stage, s, config, layouts, width_a, width_b, fast,
                );
            }
        }
    }
    if !comptime!(emulate) {
        #[unroll]
        for s in 0..comptime!(stages - 1) {
            let t = groups * stages + s;
            if t < tiles {
                stage = k_tile::<F, NF, A>(
                    a, b, va, vb, dims, shared_a, shared_b, full, acc, emulated_acc, &mut frags,
                    &bases_a, &bases_b, &plan_a, &plan_b, batch, row0, col0, warp_row, warp_col,
                    first, t, tiles, groups, stage, s, config, layouts, width_a, width_b, fast,
                );
            }
        }
    }
}

/// Tile `t` of the K loop ([`k_loop`]), the `s`-th of its group `group` (its stage's barrier
/// `s`, whose phase `group` it is), in stage `stage` (= `s`, at run time): returns the next
/// tile's stage.
#[cube]
#[allow(clippy::too_many_arguments)]
fn k_tile<F: Float, NF: Size, A: Float>(
    a: &Array<F>,
    b: &Array<F>,
    va: &View,
    vb: &View,
    dims: &Dims,
    shared_a: &mut SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    full: &Sequence<Shared<Barrier>>,
    acc: &mut Sequence<Array<Vector<A, Const<2>>>>,
    emulated_acc: &mut Array<A>,
    frags: &mut Fragments<F, NF>,
    bases_a: &Array<u32>,
    bases_b: &Array<u32>,
    plan_a: &CopyPlan,
    plan_b: &CopyPlan,
    batch: u32,
    row0: u32,
    col0: u32,
    warp_row: u32,
    warp_col: u32,
    first: u32,
    t: u32,
    tiles: u32,
    group: u32,
    stage: u32,
    #[comptime] s: u32,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] fast: bool,
) -> u32 {
    let size = F::type_size();
    let (fm, fn_, fk) = comptime!(instruction(size as u32));
    let stages = comptime!(config.stages);
    let emulate = comptime!(config.emulate);
    // The steps of the warp's group of K.
    let steps = comptime!(config.bk / fk / config.wk);
    // The copies spread over every step but the last, and committed with the barrier's wait
    // (as CUTLASS's): the last step is its fragments' loads and its MMAs alone.
    let parts = comptime!(steps - 1);
    let def = MmaDefinition::<F, F, A>::new(fm as usize, fn_ as usize, fk as usize);
    let fetched = t + stages - 1;
    let next = select(stage + 1 == stages, 0u32, stage + 1);
    let refill = select(stage == 0, comptime!(stages - 1), stage - 1);
    let (next_bar, refill_bar) = comptime!(((s + 1) % stages, (s + stages - 1) % stages));
    // Tile t + 1 is phase (t + 1) / STAGES of its stage's barrier.
    let next_parity = if comptime!(s + 1 < stages) {
        group % 2
    } else {
        (group + 1) % 2
    };
    #[unroll]
    for kk in 0..steps {
        if comptime!(emulate) {
            sync_cube();
        }
        // The next step's fragments: this tile's, or the next tile's first (the
        // step count is even, so that one is always in set 0).
        // (Unconditional, as are the copies, so that the step is one basic block
        // the compiler can interleave: after the last tile, the fragments loaded
        // are never used, and the copies read nothing.)
        if comptime!(kk + 1 < steps) {
            load_step::<F, NF, A>(
                def, shared_a, shared_b, bases_a, bases_b, frags, warp_row,
                warp_col, first, stage, comptime!((kk + 1) % 2), comptime!(kk + 1), config,
                layouts,
            );
        } else {
            load_step::<F, NF, A>(
                def, shared_a, shared_b, bases_a, bases_b, frags, warp_row,
                warp_col, first, next, 0u32, 0u32, config, layouts,
            );
        }
        if comptime!(kk < parts) {
            fetch::<F>(
                a, b, va, vb, dims, shared_a, shared_b, plan_a, plan_b, fetched,
                fetched < tiles, batch, row0, col0, refill,
                comptime!(Share { part: kk, parts }), true, config, layouts, width_a,
                width_b, fast,
            );
        }
        mma_step::<F, NF, A>(
            def, shared_b, frags, acc, emulated_acc, comptime!(kk % 2), config,
            layouts,
        );
        // The tile's copies committed after the MMAs: the commit ends a basic
        // block, which the MMAs would otherwise wait behind. (Past the end, an
        // arrival on a phase nobody waits for.)
        if comptime!(kk + 1 == parts && !emulate) {
            let bar = full.index(comptime!(refill_bar as usize));
            bar.commit_copy_async();
            bar.arrive();
        }
        if comptime!(kk + 2 == steps) {
            // Tile t + 1 has landed; and past the barrier every warp has loaded
            // tile t's last fragments, so that tile t + 1 may refill its stage.
            // (Nested: emulated, there are no barriers to index, even in code not run.)
            #[allow(clippy::collapsible_if)]
            if !comptime!(emulate) {
                if t + 1 < tiles {
                    full.index(comptime!(next_bar as usize)).wait_parity(next_parity);
                }
            }
            sync_cube();
        }
    }
    next
}


/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, f16 or bf16 inputs (`F`) accumulated
/// in `A` (f32). Cube (X, Y) computes the BM×BN block at (Y·BM, X·BN); warp `UNIT_POS_Y`
/// (row-major over WK×WM×WN: its group along K, then its place in the group) its warp tile
/// over its group's steps of K. A and B are copied in pieces of `width_a` and
/// `width_b` elements (16 bytes, or 1 where they are not aligned), C stored in vectors of
/// `NC` = `width_c` (2, or 1).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
// `%` and `/` are what the kernel language has.
#[allow(clippy::manual_is_multiple_of, clippy::manual_div_ceil)]
pub fn mma_matmul<F: Float, NF: Size, A: Float + CubeElement, O: Float, NC: Size>(
    a: &Array<F>,
    b: &Array<F>,
    c: &mut Array<Vector<O, NC>>,
    args: GemmArgs<A>,
    #[comptime] config: MmaConfig,
    #[comptime] layouts: Layouts,
    #[comptime] width_a: u32,
    #[comptime] width_b: u32,
    #[comptime] width_c: u32,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (bm, bn, bk, stages) = comptime!((config.bm, config.bn, config.bk, config.stages));
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let (tile_a, tile_b) = comptime!(config.tiles(bytes, layouts));
    let (stage_a, stage_b) = comptime!((tile_a.elements(), tile_b.elements()));
    let (fm, fn_, _) = comptime!(instruction(bytes));
    let (mi, ni) = comptime!((config.warp_m() / fm, config.warp_n() / fn_));

    let mut shared_a =
        SharedMemory::<F>::new_aligned(comptime!((stages * stage_a) as usize), 128usize);
    // Emulated, each warp's scratch follows B's stages.
    let mut shared_b = SharedMemory::<F>::new_aligned(
        comptime!((stages * stage_b + config.scratch(bytes)) as usize),
        128usize,
    );
    // One barrier per stage: every unit arrives once its copies into the stage have landed.
    let mut full = Sequence::<Shared<Barrier>>::new();
    if !comptime!(config.emulate) {
        #[unroll]
        for _ in 0..stages {
            full.push(Barrier::shared(CUBE_DIM, UNIT_POS == 0));
        }
    }

    let (tile_row, tile_col) = rasterized();
    let row0 = tile_row * bm;
    let col0 = tile_col * bn;
    // Split-K: the grid's z runs over slices × batch entries; slice s sums K tiles
    // [s·chunk, (s + 1)·chunk) of the launch's K into the partial at z of C (the partials).
    let (batch, c_batch, dims) = if comptime!(config.split > 1) {
        let entries = CUBE_COUNT_Z / comptime!(config.split);
        let slice = CUBE_POS_Z / entries;
        let tiles = (dims.k_end - dims.k_begin + bk - 1) / bk;
        let chunk = (tiles + comptime!(config.split - 1)) / comptime!(config.split) * bk;
        let k_begin = (dims.k_begin + slice * chunk).min(dims.k_end);
        let sliced = Dims {
            m: dims.m,
            n: dims.n,
            k_begin,
            k_end: (k_begin + chunk).min(dims.k_end),
            batch_begin: dims.batch_begin,
        };
        (CUBE_POS_Z % entries + dims.batch_begin, CUBE_POS_Z, sliced)
    } else {
        let batch = CUBE_POS_Z + dims.batch_begin;
        (batch, batch, dims)
    };
    let warp = UNIT_POS_Y;
    // The warp's group along K (sliced K), and its place among the group's WM×WN warps.
    let (group, warp) = if comptime!(config.wk > 1) {
        let per_group = comptime!(config.wm * config.wn);
        (warp / per_group, warp % per_group)
    } else {
        (0u32, warp)
    };
    let first = group * comptime!(config.steps_per_group(bytes));
    let warp_row = (warp / comptime!(config.wn)) * comptime!(config.warp_m());
    let warp_col = (warp % comptime!(config.wn)) * comptime!(config.warp_n());

    // The warp tile's accumulators: fragment (i, j) holds rows g and g + 8 (g = lane / 4) and
    // columns 2·(lane % 4) + {0, 1} of the 16×8 tile at (16·i, 8·j), as two 2-vectors.
    // (Emulated, they are made from the emulation's after the K loop: values live across
    // barriers cost lavapipe's compiler dearly.)
    let mut acc = Sequence::<Array<Vector<A, Const<2>>>>::new();
    if !comptime!(config.emulate) {
        #[unroll]
        for _ in 0..mi * ni {
            let mut frag = Array::<Vector<A, Const<2>>>::new(2usize);
            frag[0] = Vector::cast_from(A::new(0.0));
            frag[1] = Vector::cast_from(A::new(0.0));
            acc.push(frag);
        }
    }

    // The emulation accumulates in a plain array, fragment (i, j)'s vector h element e at
    // ((i·NI + j)·2 + h)·2 + e, and hands it to the fragments for the epilogue.
    let emulated = comptime!(if config.emulate { mi * ni * 4 } else { 1 });
    let mut emulated_acc = Array::<A>::new(comptime!(emulated as usize));
    for e in 0..emulated {
        emulated_acc[e as usize] = A::new(0.0);
    }

    // The fast path: a block inside C whose K tiles are all whole, both operands aligned.
    let whole = row0 + bm <= dims.m
        && col0 + bn <= dims.n
        && (dims.k_end - dims.k_begin) % bk == 0;
    // (A comptime condition of its own: `comptime && runtime` would compile the fast path for
    // unaligned operands too, doubling their JIT time for a path they never take.)
    if comptime!(width_a > 1 && width_b > 1) {
        if whole {
            k_loop::<F, NF, A>(
                a, b, &va, &vb, &dims, &mut shared_a, &mut shared_b, &full, &mut acc,
                &mut emulated_acc, batch, row0, col0, warp_row, warp_col, first, config,
                layouts, width_a, width_b, true,
            );
        } else {
            k_loop::<F, NF, A>(
                a, b, &va, &vb, &dims, &mut shared_a, &mut shared_b, &full, &mut acc,
                &mut emulated_acc, batch, row0, col0, warp_row, warp_col, first, config,
                layouts, width_a, width_b, false,
            );
        }
    } else {
        k_loop::<F, NF, A>(
            a, b, &va, &vb, &dims, &mut shared_a, &mut shared_b, &full, &mut acc,
            &mut emulated_acc, batch, row0, col0, warp_row, warp_col, first, config, layouts,
            width_a, width_b, false,
        );
    }
    if comptime!(config.emulate) {
        #[unroll]
        for ij in 0..mi * ni {
            let mut frag = Array::<Vector<A, Const<2>>>::new(2usize);
            #[unroll]
            for h in 0..2u32 {
                let mut pair = Vector::<A, Const<2>>::empty();
                pair[0] = emulated_acc[((ij * 2 + h) * 2) as usize];
                pair[1] = emulated_acc[((ij * 2 + h) * 2 + 1) as usize];
                frag[h as usize] = pair;
            }
            acc.push(frag);
        }
    }

    // The wide epilogue's staging (C in 16-byte vectors), in f32.
    let staged = comptime!(width_c > 2);
    let mut staging = SharedMemory::<A>::new_aligned(
        comptime!((if staged { config.staging_elements() } else { 1 }) as usize),
        16usize,
    );
    // Sliced K: the first group adds the others' sums, and stores the block alone (emulated,
    // with the others beside it through the staged epilogue's cube barriers).
    if comptime!(config.wk > 1) {
        sum_groups::<A>(&mut acc, group, warp, comptime!(mi * ni), config);
        if comptime!(staged && config.emulate) {
            epilogue::<A, O, NC>(
                c, &vc, &dims, &acc, &mut staging, c_batch, row0, col0, warp, warp_row,
                warp_col, alpha, beta, group == 0, mi, ni, width_c, config,
            );
        } else if group == 0 {
            epilogue::<A, O, NC>(
                c, &vc, &dims, &acc, &mut staging, c_batch, row0, col0, warp, warp_row,
                warp_col, alpha, beta, true, mi, ni, width_c, config,
            );
        }
    } else {
        epilogue::<A, O, NC>(
            c, &vc, &dims, &acc, &mut staging, c_batch, row0, col0, warp, warp_row, warp_col,
            alpha, beta, true, mi, ni, width_c, config,
        );
    }
}

/// Adds into the first group of warps along K the sums of the others, through shared memory:
/// each unit's accumulators as pairs (one 8-byte access each) at a stride of the group's
/// units, so that a warp's 256 bytes take two wavefronts, the least. (Behind the pipeline's
/// stages: the copies past the slab's end that may still land there zero-fill stages, not
/// this.)
#[cube]
fn sum_groups<A: Float>(
    acc: &mut Sequence<Array<Vector<A, Const<2>>>>,
    group: u32,
    warp: u32,
    #[comptime] fragments: u32,
    #[comptime] config: MmaConfig,
) {
    let units = comptime!(WARP * config.wm * config.wn);
    let per_group = comptime!(fragments * 4 * units);
    // Aligned for pairs: each unit's 2-vector at an even offset, one 8-byte access.
    let mut sums = SharedMemory::<A>::new_aligned(
        comptime!(((config.wk - 1) * per_group) as usize),
        8usize,
    );
    let unit = warp * WARP + UNIT_POS_X;
    if group > 0 {
        let base = (group - 1) * per_group + 2 * unit;
        #[unroll]
        for f in 0..fragments {
            let frag = acc.index(comptime!(f as usize));
            #[unroll]
            for h in 0..2u32 {
                let pair = frag[h as usize];
                #[unroll]
                for e in 0..2u32 {
                    sums[(base + comptime!((f * 2 + h) * 2 * units + e)) as usize] =
                        pair[e as usize];
                }
            }
        }
    }
    sync_cube();
    if group == 0 {
        #[unroll]
        for other in 0..comptime!(config.wk - 1) {
            let base = comptime!(other * per_group) + 2 * unit;
            #[unroll]
            for f in 0..fragments {
                let frag = acc.index_mut(comptime!(f as usize));
                #[unroll]
                for h in 0..2u32 {
                    let mut pair = frag[h as usize];
                    #[unroll]
                    for e in 0..2u32 {
                        pair[e as usize] +=
                            sums[(base + comptime!((f * 2 + h) * 2 * units + e)) as usize];
                    }
                    frag[h as usize] = pair;
                }
            }
        }
    }
}

/// The fragments' accumulators in one array, fragment (i, j)'s vector h element e at
/// ((i·NI + j)·2 + h)·2 + e, where `emulate` (the epilogue's loops over them are not unrolled
/// there); else an array of one, unused.
#[cube]
fn flattened<A: Float>(
    acc: &Sequence<Array<Vector<A, Const<2>>>>,
    #[comptime] fragments: u32,
    #[comptime] emulate: bool,
) -> Array<A> {
    let mut flat = Array::<A>::new(comptime!((if emulate { fragments * 4 } else { 1 }) as usize));
    if comptime!(emulate) {
        #[unroll]
        for f in 0..fragments {
            let frag = acc.index(comptime!(f as usize));
            #[unroll]
            for h in 0..2u32 {
                let pair = frag[h as usize];
                #[unroll]
                for e in 0..2u32 {
                    flat[comptime!(((f * 2 + h) * 2 + e) as usize)] = pair[e as usize];
                }
            }
        }
    }
    flat
}

/// α·(the warp's tile) + β·C into C, from the fragments: lane (g, q) = (lane / 4, lane % 4)
/// holds columns 2q, 2q + 1 of rows g and g + 8 of each 16×8 fragment. Where C is stored in
/// vectors wider than those pairs (`width_c` > 2: 16 bytes), through the warp's `staging`
/// ([`store_staged`]); else from the fragments, pair by pair ([`store_tile`]). `active`: this
/// warp stores (sliced K's first group; the emulation's other groups run the staged path's
/// barriers with it).
#[cube]
#[allow(clippy::too_many_arguments)]
fn epilogue<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    acc: &Sequence<Array<Vector<A, Const<2>>>>,
    staging: &mut SharedMemory<A>,
    c_batch: u32,
    row0: u32,
    col0: u32,
    warp: u32,
    warp_row: u32,
    warp_col: u32,
    alpha: A,
    beta: A,
    active: bool,
    #[comptime] mi: u32,
    #[comptime] ni: u32,
    #[comptime] width_c: u32,
    #[comptime] config: MmaConfig,
) {
    let (bm, bn) = comptime!((config.bm, config.bn));
    let lane = UNIT_POS_X;
    let g = lane / 4;
    let q = lane % 4;
    let inside = row0 + bm <= dims.m && col0 + bn <= dims.n;
    let flat = flattened::<A>(acc, comptime!(mi * ni), comptime!(config.emulate));
    // (Comptime conditions of their own: `comptime && runtime` would compile the pairs' path
    // for C stored element by element too.)
    if comptime!(width_c > 2) {
        let (row, col) = (row0 + warp_row, col0 + warp_col);
        if inside {
            if beta == A::new(0.0) {
                store_staged::<A, O, NC>(
                    c, vc, dims, acc, &flat, staging, c_batch, row, col, warp, alpha, beta, active,
                    mi, ni, width_c, true, false, config,
                );
            } else {
                store_staged::<A, O, NC>(
                    c, vc, dims, acc, &flat, staging, c_batch, row, col, warp, alpha, beta, active,
                    mi, ni, width_c, true, true, config,
                );
            }
        } else {
            store_staged::<A, O, NC>(
                c, vc, dims, acc, &flat, staging, c_batch, row, col, warp, alpha, beta, active, mi,
                ni, width_c, false, true, config,
            );
        }
    } else {
        let (row, col) = (row0 + warp_row + g, col0 + warp_col + 2 * q);
        if comptime!(width_c == 2) {
            if inside {
                if beta == A::new(0.0) {
                    store_tile::<A, O, NC>(
                        c, vc, dims, acc, &flat, c_batch, row, col, alpha, beta, mi, ni, width_c,
                        true, false, config.emulate,
                    );
                } else {
                    store_tile::<A, O, NC>(
                        c, vc, dims, acc, &flat, c_batch, row, col, alpha, beta, mi, ni, width_c,
                        true, true, config.emulate,
                    );
                }
            } else {
                store_tile::<A, O, NC>(
                    c, vc, dims, acc, &flat, c_batch, row, col, alpha, beta, mi, ni, width_c, false,
                    true, config.emulate,
                );
            }
        } else {
            store_tile::<A, O, NC>(
                c, vc, dims, acc, &flat, c_batch, row, col, alpha, beta, mi, ni, width_c, false,
                true, config.emulate,
            );
        }
    }
}

/// Rows of its tile a warp stages at a time in the wide epilogue (`store_staged`): the
/// rows h of one row of fragments.
pub const STAGED_ROWS: u32 = 8;

/// The wide epilogue (CUTLASS's, through shared memory): α·(the warp's tile) + β·C into C
/// stored in vectors of `NC` = `width_c` columns (16 bytes), for the warp tile at (`row`,
/// `col`) of C. [`STAGED_ROWS`] rows at a time, the lanes leave α·(their pairs) in f32 in the
/// warp's `staging`, and then each lane reads back whole vectors of a row, adds β·C read as
/// vectors, and stores them: in f16, 16 stores of 16 bytes a lane where the pairs took 64 of 4
/// (a warp's store 4 rows of 128 bytes, not 8 of 16), and C rounded once, from f32.
///
/// `inside`: the block lies inside C, so no store is bounded, and C is read only with
/// `read_c` (β ≠ 0, tested once by the caller). Otherwise each vector is stored where its row
/// and first column lie inside C (N is a multiple of the vector), and β tested for each.
/// `active`: this warp stores; else it only keeps the barriers company (emulated, a "warp"
/// is 32 units of a cube, and the staging is guarded by cube barriers).
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_staged<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    acc: &Sequence<Array<Vector<A, Const<2>>>>,
    flat: &Array<A>,
    staging: &mut SharedMemory<A>,
    batch: u32,
    row: u32,
    col: u32,
    warp: u32,
    alpha: A,
    beta: A,
    active: bool,
    #[comptime] mi: u32,
    #[comptime] ni: u32,
    #[comptime] width_c: u32,
    #[comptime] inside: bool,
    #[comptime] read_c: bool,
    #[comptime] config: MmaConfig,
) {
    // C's fragments are 16×8 whatever the inputs.
    let (fm, fn_, _) = comptime!(instruction(2));
    let lane = UNIT_POS_X;
    let (g, q) = (lane / 4, lane % 4);
    let stride = comptime!(config.warp_n() + 8);
    let base = warp * comptime!(STAGED_ROWS * stride);
    let per_row = comptime!(config.warp_n() / width_c);
    let (r0, along) = (lane / per_row, (lane % per_row) * comptime!(width_c));
    // Staging offsets said to lie in the staging (`within`: under 2¹⁶ elements), so that each
    // constant after them folds into the access (`STS [R+imm]`).
    let written = within(base + g * stride + 2 * q);
    let read = within(base + r0 * stride + along);
    // C's vector of the lane's first, and the vectors between rows (C's strides are
    // multiples of the vector: `store_width`).
    let (i0, j0) = (row + r0, col + along);
    let first = (vc.offset + batch * vc.batch_stride + i0 * vc.row_stride + j0) / width_c;
    let at = StagedRows {
        read,
        first,
        vector_row: vc.row_stride / width_c,
        i0,
        j0,
    };
    if comptime!(config.emulate) {
        // A loop over the rows of fragments, not unrolled (in one loop, not nested loops of
        // few trips, which lavapipe's compiler unrolls): an unrolled copy of each would take
        // lavapipe's compiler longer than the rest of the kernel. The same staging offsets and
        // stores, with the fragment's row a value.
        for ih in 0..comptime!(mi * 2) {
            let (i, h) = (ih / 2, ih % 2);
            if active {
                for je in 0..comptime!(ni * 2) {
                    let (j, e) = (je / 2, je % 2);
                    staging[(written + j * fn_ + e) as usize] =
                        alpha * flat[(((i * ni + j) * 2 + h) * 2 + e) as usize];
                }
            }
            sync_cube();
            store_staged_rows::<A, O, NC>(
                c, dims, staging, &at, i * fm + h * STAGED_ROWS, beta, active, width_c, inside,
                read_c, config,
            );
            sync_cube();
        }
    } else {
        #[unroll]
        for i in 0..mi {
            #[unroll]
            for h in 0..2u32 {
                if active {
                    #[unroll]
                    for j in 0..ni {
                        let pair = acc.index(comptime!((i * ni + j) as usize))[h as usize];
                        #[unroll]
                        for e in 0..2u32 {
                            staging[(written + comptime!(j * fn_ + e)) as usize] =
                                alpha * pair[e as usize];
                        }
                    }
                }
                sync_plane();
                store_staged_rows::<A, O, NC>(
                    c, dims, staging, &at, comptime!(i * fm + h * STAGED_ROWS), beta, active,
                    width_c, inside, read_c, config,
                );
                // Every lane has read the rows before any writes the next.
                sync_plane();
            }
        }
    }
}

/// Where a lane of the staged epilogue ([`store_staged`]) reads the staging and stores C: its
/// first staged vector `read`, C's vector `first` at (`i0`, `j0`) and the vectors between
/// rows of C.
#[derive(CubeType)]
struct StagedRows {
    read: u32,
    first: u32,
    vector_row: u32,
    i0: u32,
    j0: u32,
}

/// The stores of one row h of a row i of fragments from the staging ([`store_staged`]), whose
/// rows lie `rows` = 16·i + 8·h below the warp tile's first: each lane's whole vectors of the
/// staged rows, with β·C read as vectors.
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_staged_rows<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    dims: &Dims,
    staging: &SharedMemory<A>,
    at: &StagedRows,
    rows: u32,
    beta: A,
    active: bool,
    #[comptime] width_c: u32,
    #[comptime] inside: bool,
    #[comptime] read_c: bool,
    #[comptime] config: MmaConfig,
) {
    let lane = UNIT_POS_X;
    let stride = comptime!(config.warp_n() + 8);
    // The vectors of a staged row (a power of two up to a warp: `rows_take`), of all the staged
    // rows, and a lane's share of them: its vector v lies 32·v / per_row rows below its
    // first, at the same columns.
    let per_row = comptime!(config.warp_n() / width_c);
    let vectors = comptime!(STAGED_ROWS * per_row);
    let per_lane = comptime!(vectors.div_ceil(WARP));
    let rows_apart = comptime!(WARP / per_row);
    #[unroll]
    for v in 0..per_lane {
        // Rows below the lane's first: of the staging, and of C.
        let down = comptime!(v * rows_apart);
        let below = rows + comptime!(v * rows_apart);
        let stores = if comptime!(inside) {
            active
        } else {
            active && at.i0 + below < dims.m && at.j0 < dims.n
        };
        // (Where the staged rows hold fewer vectors than a warp has lanes.)
        let stores = if comptime!(vectors < WARP) {
            stores && lane < comptime!(vectors)
        } else {
            stores
        };
        if stores {
            let index = (at.first + below * at.vector_row) as usize;
            let from = at.read + comptime!(down * stride);
            let mut out = Vector::<O, NC>::empty();
            #[unroll]
            for e in 0..width_c {
                out[e as usize] = O::cast_from(staging[(from + e) as usize]);
            }
            // β·C where C is read: β ≠ 0 (tested once by the caller inside C, here
            // for each vector at the edges; β = 0 leaves α·AB as it is, −0 included).
            // (Nested: `comptime && runtime` would compile the read where C is not.)
            #[allow(clippy::collapsible_if)]
            if comptime!(read_c) {
                if comptime!(inside) || beta != A::new(0.0) {
                    let old = c[index];
                    #[unroll]
                    for e in 0..width_c {
                        let value = staging[(from + e) as usize]
                            + beta * A::cast_from(old[e as usize]);
                        out[e as usize] = O::cast_from(value);
                    }
                }
            }
            c[index] = out;
        }
    }
}

/// Rows of blocks a group of the rasterized grid spans.
const RASTER_ROWS: u32 = 8;

/// This cube's block of C, (row, column) in blocks, with the grid walked in groups of
/// [`RASTER_ROWS`] rows of blocks, column by column within a group (Triton's `GROUP_M`,
/// CUTLASS's threadblock swizzle): cubes that run at once share a few panels of A and of B in
/// L2, where row by row they would read every panel of B for a few of A.
#[cube]
#[allow(clippy::manual_is_multiple_of)]
fn rasterized() -> (u32, u32) {
    let across = CUBE_COUNT_X;
    let linear = CUBE_POS_Y * across + CUBE_POS_X;
    let per_group = comptime!(RASTER_ROWS) * across;
    let first_row = (linear / per_group) * comptime!(RASTER_ROWS);
    let rows = (CUBE_COUNT_Y - first_row).min(comptime!(RASTER_ROWS));
    let in_group = linear % per_group;
    (first_row + in_group % rows, in_group / rows)
}

/// Writes α·acc + β·C for the warp tile whose lane holds, first, columns `col`, `col` + 1 of
/// row `row`; fragment (i, j)'s rows h lie 16·i + 8·h rows and 8·j columns further.
///
/// `inside`: the block lies inside C, stored in pairs (`NC` = 2), so each store is its offset
/// from the lane's first pair with no bounds check, and C is read only with `read_c` (β ≠ 0,
/// tested once by the caller). Otherwise each pair is checked against C's bounds and tests β
/// itself ([`store_pair`]).
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_tile<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    acc: &Sequence<Array<Vector<A, Const<2>>>>,
    flat: &Array<A>,
    batch: u32,
    row: u32,
    col: u32,
    alpha: A,
    beta: A,
    #[comptime] mi: u32,
    #[comptime] ni: u32,
    #[comptime] width_c: u32,
    #[comptime] inside: bool,
    #[comptime] read_c: bool,
    #[comptime] emulate: bool,
) {
    // In pairs, C is row-major with even strides: a pair's index is half its first element's.
    let first = (vc.offset + batch * vc.batch_stride + row * vc.row_stride + col) / 2;
    let tile = TilePairs {
        first,
        pair_row: vc.row_stride / 2,
        row,
        col,
    };
    if comptime!(emulate) {
        // One loop over the fragments' pairs, not unrolled (see `store_staged`).
        for ijh in 0..comptime!(mi * ni * 2) {
            let (ij, h) = (ijh / 2, ijh % 2);
            let mut pair = Vector::<A, Const<2>>::empty();
            pair[0] = flat[(ijh * 2) as usize];
            pair[1] = flat[(ijh * 2 + 1) as usize];
            store_fragment_pair::<A, O, NC>(
                c, vc, dims, batch, &tile, ij / ni, ij % ni, h, pair, alpha, beta, width_c,
                inside, read_c,
            );
        }
    } else {
        #[unroll]
        for i in 0..mi {
            #[unroll]
            for j in 0..ni {
                let frag = acc.index(comptime!((i * ni + j) as usize));
                #[unroll]
                for h in 0..2u32 {
                    store_fragment_pair::<A, O, NC>(
                        c, vc, dims, batch, &tile, i, j, h, frag[h as usize], alpha, beta,
                        width_c, inside, read_c,
                    );
                }
            }
        }
    }
}

/// Where [`store_tile`] stores a warp tile: its lane's first pair in C, `first`, the pairs
/// between rows, and the lane's first row and column.
#[derive(CubeType)]
struct TilePairs {
    first: u32,
    pair_row: u32,
    row: u32,
    col: u32,
}

/// α·`pair` + β·C for row h of fragment (i, j) of [`store_tile`]'s warp tile.
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_fragment_pair<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    batch: u32,
    tile: &TilePairs,
    i: u32,
    j: u32,
    h: u32,
    pair: Vector<A, Const<2>>,
    alpha: A,
    beta: A,
    #[comptime] width_c: u32,
    #[comptime] inside: bool,
    #[comptime] read_c: bool,
) {
    // C's fragments are 16×8 whatever the inputs.
    let (fm, fn_, _) = comptime!(instruction(2));
    if comptime!(inside) {
        let index = (tile.first + (i * fm + h * 8) * tile.pair_row + j * (fn_ / 2)) as usize;
        let mut out = Vector::<O, NC>::empty();
        #[unroll]
        for e in 0..2usize {
            let mut value = alpha * pair[e];
            if comptime!(read_c) {
                value += beta * A::cast_from(c[index][e]);
            }
            out[e] = O::cast_from(value);
        }
        c[index] = out;
    } else {
        store_pair::<A, O, NC>(
            c,
            vc,
            dims,
            batch,
            tile.row + i * fm + h * 8,
            tile.col + j * fn_,
            pair,
            alpha,
            beta,
            width_c,
        );
    }
}

/// Writes α·`pair` + β·C to columns `col`, `col` + 1 of row `row` of C, those inside C: as one
/// 2-vector where C is stored in them (`NC` = 2: row-major, even strides and N), else element
/// by element. With β = 0, C is not read.
#[cube]
#[allow(clippy::too_many_arguments)]
fn store_pair<A: Float, O: Float, NC: Size>(
    c: &mut Array<Vector<O, NC>>,
    vc: &View,
    dims: &Dims,
    batch: u32,
    row: u32,
    col: u32,
    pair: Vector<A, Const<2>>,
    alpha: A,
    beta: A,
    #[comptime] width: u32,
) {
    if row < dims.m {
        if comptime!(width == 2) {
            // N is even, so a pair is inside C whenever its first column is.
            if col < dims.n {
                let index = at(vc, batch, row, col) / 2;
                let mut out = Vector::<O, NC>::empty();
                #[unroll]
                for e in 0..2usize {
                    let mut value = alpha * pair[e];
                    if beta != A::new(0.0) {
                        value += beta * A::cast_from(c[index][e]);
                    }
                    out[e] = O::cast_from(value);
                }
                c[index] = out;
            }
        } else {
            #[unroll]
            for e in 0..2u32 {
                if col + e < dims.n {
                    let index = at(vc, batch, row, col + e);
                    let mut value = alpha * pair[e as usize];
                    if beta != A::new(0.0) {
                        value += beta * A::cast_from(c[index][0]);
                    }
                    let mut out = Vector::<O, NC>::empty();
                    out[0] = O::cast_from(value);
                    c[index] = out;
                }
            }
        }
    }
}


/// Whether the staged epilogue can store a warp tile's rows in vectors of `wide` columns: a
/// row of them is a power of two up to a warp's lanes ([`store_staged`]'s lanes walk rows so).
fn rows_take(config: &MmaConfig, wide: u32) -> bool {
    let per_row = config.warp_n() / wide;
    config.warp_n().is_multiple_of(wide) && per_row.is_power_of_two() && per_row <= WARP
}

/// C's vector width (`NC`) for `config`'s kernel on `input`-byte operands, C of
/// `output`-byte elements laid out as `c`, on a device of `limit` bytes of shared memory per
/// cube. The staged epilogue's (`store_staged`) where the staging fits
/// ([`MmaConfig::stages_c`]): 16 bytes (emulated, at most 4 elements, the widest vector of
/// Vulkan's shaders), halved down to 4 elements while C's layout (row-major, offset, strides
/// and N multiples of it) or the warp tile's rows (`rows_take`) refuse it. Else 2 where C's
/// are even (the fragments' pairs), else 1 (element by element).
pub fn c_width(
    config: &MmaConfig,
    c: &crate::problem::MatrixDesc,
    input: u32,
    output: u32,
    limit: usize,
) -> u32 {
    let mut wide = CHUNK_BYTES / output;
    if config.emulate {
        wide = wide.min(4);
    }
    let staged = config.stages_c(input, limit);
    while wide > 2 && !(staged && rows_take(config, wide) && store_width(c, wide) == wide) {
        wide /= 2;
    }
    if wide > 2 {
        wide
    } else {
        store_width(c, 2)
    }
}

/// Shared memory per cube `expand` (the compile check, `tilemm emit`) takes the device to
/// have: an A100's 163 KiB, the least of the targets it compiles the rung for (sm_80,
/// sm_90).
const EXPAND_SHARED_LIMIT: usize = 163 * 1024;

impl Rung for Mma {
    const NAME: &'static str = "mma";
    const ABOUT: &'static str = "NVIDIA mma.sync from ldmatrix fragments, cp.async pipeline, \
                                 swizzled shared memory, f16/bf16/tf32 inputs (CUDA sm_80+)";
    type Config = MmaConfig;
    const MATRIX_UNITS: bool = true;
    const CUDA_ONLY: bool = true;
    const COPIES_ASYNC: bool = true;

    fn configs() -> Vec<MmaConfig> {
        let config = |bm, bn, bk, wm, wn, stages, split| MmaConfig {
            bm,
            bn,
            bk,
            wm,
            wn,
            stages,
            split,
            wk: 1,
            emulate: false,
        };
        // 64×64 warp tiles, CUTLASS's large configurations: 4 HMMA per ldmatrix (a 64×32 warp
        // tile gets 2.7, and a smaller share of HMMA), BK of 32 and of 64 (CUTLASS's sm80 f16
        // default: 3 stages of 128×64 and 64×128, 96 KiB).
        // Split-K in 2 and 4 slices for products of few blocks; the tuner times them against
        // the rest. For them too, 64×128 in 4 warps of 32×64 (2.7 HMMA per ldmatrix): 1024³
        // is 128 of its blocks on an H100's 132 SMs, each SM's 4 schedulers fed, where 64
        // blocks of 128×128 leave half of the SMs idle (one slice took 0.016 ms there, 2 and 4
        // slices 0.084–0.088). 128×64 compiles to a run of 26 without an HMMA on sm_90. For
        // tf32, BK = 16 of 32-bit elements is the same 64 bytes of K as 32 of 16-bit ones
        // (CUTLASS's sm80 tf32 128×128×16 in 4 stages and 128×256×16 in 3); the others
        // compute tf32 too, with twice the steps.
        [
            config(128, 128, 32, 2, 2, 3, 1),
            config(128, 128, 16, 2, 2, 4, 1),
            config(128, 256, 16, 2, 4, 3, 1),
            config(128, 128, 64, 2, 2, 3, 1),
            config(128, 256, 32, 2, 4, 3, 1),
            config(128, 256, 64, 2, 4, 3, 1),
            config(256, 128, 32, 4, 2, 3, 1),
            config(128, 128, 32, 2, 2, 3, 2),
            config(128, 128, 32, 2, 2, 3, 4),
            config(64, 128, 32, 2, 2, 3, 1),
            MmaConfig {
                wk: 2,
                ..config(64, 128, 64, 2, 2, 3, 1)
            },
        ]
        .into_iter()
        .filter(MmaConfig::valid)
        .collect()
    }

    fn default_config() -> MmaConfig {
        MmaConfig {
            bm: 128,
            bn: 128,
            bk: 32,
            wm: 2,
            wn: 2,
            stages: 3,
            split: 1,
            wk: 1,
            emulate: false,
        }
    }

    fn parse(text: &str) -> Result<MmaConfig, String> {
        // wk may be left out: 1, as the configurations were named before it.
        let text = if text.split(':').any(|part| part.starts_with("wk=")) {
            text.to_string()
        } else {
            format!("{text}:wk=1")
        };
        let v = super::parse_settings(&text, &MmaConfig::KEYS)?;
        let config = MmaConfig {
            bm: v[0],
            bn: v[1],
            bk: v[2],
            wm: v[3],
            wn: v[4],
            stages: v[5],
            split: v[6],
            wk: v[7],
            emulate: false,
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &MmaConfig) -> String {
        format!(
            "bm={}:bn={}:bk={}:wm={}:wn={}:stages={}:split={}{}{}",
            c.bm,
            c.bn,
            c.bk,
            c.wm,
            c.wn,
            c.stages,
            c.split,
            if c.wk != 1 {
                format!(":wk={}", c.wk)
            } else {
                String::new()
            },
            if c.emulate { " (emulated)" } else { "" }
        )
    }

    fn k_splits(c: &MmaConfig) -> u32 {
        c.split
    }

    fn k_groups(c: &MmaConfig) -> u32 {
        c.wk
    }

    fn quick_to_compile(c: &MmaConfig, precision: Precision) -> bool {
        // Two steps of K per tile (64 bytes of each row of A) in groups of 3 tiles: 4 steps
        // unroll twice the MMAs (6–7 s of NVRTC for sm_90 here), 4 stages a third more tiles
        // (5.3 s for tf32's 128×128): tuned in the background rather than a first call's
        // kernel.
        c.bk * precision.input.size_bytes() as u32 <= 64 && c.stages <= 3
    }

    fn computes(config: &MmaConfig, precision: Precision) -> bool {
        // tf32 up to BK = 32 (4 steps of K; 128 bytes of each row of A): BK = 64 would take
        // 192 KiB of shared memory and more, and 8 steps to compile. And not split: the split
        // configurations' 4 steps spill (1.6–1.8 KB on sm_80 and sm_90). And on the device in
        // 64×64 warp tiles: 64×128's tf32 stages its tiles element by element and runs 30
        // without an HMMA (the emulation, which checks index arithmetic, takes any).
        let (bytes, fits) = match precision.input {
            DType::F16 | DType::BF16 => (2, true),
            DType::TF32 => (
                4,
                config.bk <= 32
                    && config.split == 1
                    && (config.emulate || (config.warp_m(), config.warp_n()) == (64, 64)),
            ),
            _ => return false,
        };
        precision.accumulate == DType::F32 && fits && config.fits(bytes)
    }

    fn emulates_matrix_units(config: &MmaConfig) -> bool {
        config.emulate
    }

    fn plane_width(config: &MmaConfig) -> Option<u32> {
        // Emulated, a warp is 32 units of the cube, whatever the device's planes.
        (!config.emulate).then_some(WARP)
    }

    fn supports(
        config: &MmaConfig,
        problem: &Problem,
        device: &DeviceInfo,
    ) -> Result<(), Unavailable> {
        let input = problem.precision.input;
        if config.emulate {
            // The kernel's type must be the device's own (not bf16 packed into words); tf32
            // is emulated on f32, which every device has.
            let native = match input {
                DType::F16 => device.types.f16,
                DType::TF32 => true,
                _ => device.types.bf16,
            };
            return if native {
                Ok(())
            } else {
                Err(Unavailable::Precision(problem.precision))
            };
        }
        let (m, n, k) = instruction(input.size_bytes() as u32);
        let wanted = MatrixUnit {
            a: input,
            b: input,
            cd: DType::F32,
            m,
            n,
            k,
        };
        if !device.register_mma.contains(&wanted) {
            return Err(Unavailable::RegisterMma { wanted });
        }
        if !device.copy_async {
            return Err(Unavailable::AsyncCopy);
        }
        Ok(())
    }

    fn shape(c: &MmaConfig, problem: &Problem) -> LaunchShape {
        let bytes = problem.precision.input.size_bytes() as u32;
        // The barriers and the arrays' 128-byte alignment take 128 bytes more.
        super::block_tiled_shape(
            problem,
            [c.bn, c.bm],
            [WARP, c.warps()],
            c.shared_bytes(bytes) + 128,
            c.bk,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &MmaConfig,
        launch: super::Launch<'_, R>,
    ) {
        let super::Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        // Copies and stores are sized by the buffers' elements (u32 words for packed bf16).
        let bytes = size_of::<I>() as u32;
        let (width_a, width_b) = (
            copy_width(&args.views[0], bytes),
            copy_width(&args.views[1], bytes),
        );
        let width_c = c_width(
            config,
            &args.views[2],
            size_of::<I::Fragment>() as u32,
            size_of::<O>() as u32,
            client.properties().hardware.max_shared_memory_size,
        );
        let dim = CubeDim::new_2d(WARP, config.warps());
        let layouts = args.layouts();
        let gemm = args.gemm::<A, R>();
        // f32 data are multiplied as tf32 (`computes` takes no f32 precision): as tf32 on the
        // device, as f32 in the emulation, whose devices have no tf32.
        // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid covers C
        // once, every copy and store is guarded by the operands' edges and the slab's end,
        // 16-byte copies and 2-vectors of C are aligned (`copy_width`, `store_width`), and the
        // device has mma.sync for this type and cp.async (`supports`). A and B are read as the
        // fragments' type, of their own size (f32 as tf32, which is stored as f32).
        macro_rules! go {
            ($f:ty, $nf:expr) => {
                unsafe {
                    mma_matmul::launch_unchecked::<$f, A, O, R>(
                        client, count, dim, $nf, width_c as usize, a, b, c, gemm, *config,
                        layouts, width_a, width_b, width_c,
                    )
                }
            };
        }
        match (size_of::<I::Fragment>(), config.emulate) {
            (4, false) => go!(tf32, 1),
            (4, true) => go!(f32, 1),
            _ => go!(I::Fragment, 2),
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &MmaConfig,
        kernel: super::Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let mut kernel = kernel;
        // The fast path: 16-byte copies of both operands, C in 16-byte vectors (the wide
        // epilogue); f32 as tf32.
        // C row-major and aligned, as the fast path's products are.
        let aligned = crate::problem::MatrixDesc {
            rows: 1024,
            cols: 1024,
            row_stride: 1024,
            col_stride: 1,
            offset: 0,
            batch_stride: 0,
        };
        let wide = c_width(
            config,
            &aligned,
            size_of::<I::Fragment>() as u32,
            size_of::<O>() as u32,
            EXPAND_SHARED_LIMIT,
        );
        kernel.register_size::<mma_matmul::NC>(wide as usize);
        macro_rules! go {
            ($f:ty) => {{
                let bytes = size_of::<$f>() as u32;
                let width = CHUNK_BYTES / bytes;
                kernel.register_size::<mma_matmul::NF>((4 / bytes) as usize);
                let t = kernel.typed_with::<$f, $f, A, Vector<O, mma_matmul::NC>>();
                mma_matmul::expand::<$f, mma_matmul::NF, A, O, mma_matmul::NC>(
                    t.scope, (4 / bytes) as usize, wide as usize, t.a, t.b, t.c, t.args,
                    *config, layouts, width, width, wide,
                );
            }};
        }
        if size_of::<I::Fragment>() == 4 {
            go!(tf32)
        } else {
            go!(I::Fragment)
        }
        CubeDim::new_2d(WARP, config.warps())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernels::common::async_copy::tests::wavefronts;

    #[test]
    fn every_tile_layout_serves_ldmatrix_and_copies_in_one_wavefront_per_phase() {
        for bytes in [2, 4] {
            for config in Mma::configs().into_iter().filter(|c| c.valid_for(bytes)) {
                for layouts in MmaConfig::all_layouts() {
                    let (ta, tb) = config.tiles(bytes, layouts);
                    for (staged, is_a) in [(ta, true), (tb, false)] {
                        let s = staged.swizzle;
                        let words = MmaConfig::reads_words(bytes, is_a, staged.by_cols);
                        // ldmatrix: each phase is 8 consecutive stored rows (from a multiple of
                        // 8) at one chunk position.
                        for row0 in (0..staged.rows).step_by(8).filter(|_| !words) {
                            for chunk in 0..s.chunks {
                                let phase: Vec<u32> =
                                    (0..8).map(|r| s.position(row0 + r, chunk)).collect();
                                assert_eq!(
                                    wavefronts(&phase),
                                    1,
                                    "{config:?} {staged:?}: ldmatrix rows {row0}.., chunk {chunk}"
                                );
                            }
                        }
                        // Copies: lanes 8p..8p+7 of a warp write pieces 8p..8p+7 of the warp's
                        // 32 (consecutive pieces are consecutive chunks of a row, then the next
                        // row).
                        let chunks = staged.rows * s.chunks;
                        for first in (0..chunks).step_by(8) {
                            let phase: Vec<u32> = (first..first + 8)
                                .map(|piece| s.position(piece / s.chunks, piece % s.chunks))
                                .collect();
                            assert_eq!(
                                wavefronts(&phase),
                                1,
                                "{config:?} {staged:?}: copies {first}.."
                            );
                        }
                    }
                }
            }
        }
    }

    /// The most distinct 32-bit words one load of 32 lanes reads from any one of the 32
    /// banks: the load's shared-memory wavefronts.
    fn word_wavefronts(words: &[u32]) -> usize {
        let mut distinct = words.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        (0..32)
            .map(|bank| distinct.iter().filter(|&&w| w % 32 == bank).count())
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn tf32_fragments_stored_m_or_n_contiguous_load_in_one_wavefront_per_register() {
        let tf32 = Mma::configs().into_iter().filter(|c| c.valid_for(4));
        for config in tf32.chain([small(64, 64, 16, 1, 1), small(32, 64, 16, 1, 2)]) {
            let layouts = Layouts {
                a_by_cols: true,
                b_by_cols: false,
            };
            let (ta, tb) = config.tiles(4, layouts);
            for (staged, span, warps) in [
                (ta, config.warp_m(), config.wm),
                (tb, config.warp_n(), config.wn),
            ] {
                let place = |row: u32, col: u32| {
                    staged.swizzle.position(row, col / 4) * 4 + col % 4
                };
                for w in 0..warps {
                    for u in 0..span / 8 {
                        for row0 in (0..config.bk).step_by(4) {
                            let load: Vec<u32> = (0..WARP)
                                .map(|lane| place(row0 + lane % 4, w * span + 8 * u + lane / 4))
                                .collect();
                            assert_eq!(
                                word_wavefronts(&load),
                                1,
                                "{config:?} {staged:?}: warp {w}, fragment {u}, rows {row0}.."
                            );
                        }
                    }
                }
                // Unpadded, the 4 rows would fall in the same 8 banks; swizzled as for
                // `ldmatrix`, rows q and q ^ 1 in the same 16.
                let chunks = staged.swizzle.chunks;
                let unpadded = Swizzle {
                    stride: chunks,
                    ..staged.swizzle
                };
                for (layout, wavefronts) in [(unpadded, 4), (Swizzle::new(chunks), 2)] {
                    let load: Vec<u32> = (0..WARP)
                        .map(|lane| layout.position(lane % 4, lane / 16) * 4 + lane / 4 % 4)
                        .collect();
                    assert_eq!(word_wavefronts(&load), wavefronts, "{config:?} {layout:?}");
                }
            }
        }
    }

    /// A configuration of the emulation's size.
    fn small(bm: u32, bn: u32, bk: u32, wm: u32, wn: u32) -> MmaConfig {
        MmaConfig {
            bm,
            bn,
            bk,
            wm,
            wn,
            stages: 3,
            split: 1,
            wk: 1,
            emulate: true,
        }
    }

    #[test]
    fn c_goes_out_in_sixteen_byte_vectors_where_its_rows_allow_else_in_pairs_or_elements() {
        use crate::problem::MatrixDesc;
        let row_major = |rows, cols, row_stride| MatrixDesc {
            rows,
            cols,
            row_stride,
            col_stride: 1,
            offset: 0,
            batch_stride: 0,
        };
        let device = Mma::default_config();
        let big = MmaConfig {
            bm: 128,
            bn: 256,
            bk: 64,
            wm: 2,
            wn: 4,
            ..device
        };
        // An H100's shared memory per cube, and an A100's.
        let (h100, a100) = (227 * 1024, 163 * 1024);
        let square = row_major(64, 1024, 1024);
        for config in [device, big] {
            for limit in [h100, a100] {
                // 16 bytes: 8 f16, 4 f32 (f16 inputs; C in f32 from f16 in the pairs on an
                // A100 only where the staging does not fit: it fits both here).
                assert_eq!(c_width(&config, &square, 2, 2, limit), 8);
                assert_eq!(c_width(&config, &square, 2, 4, limit), 4);
                // f16 rows of a multiple of 4: vectors of 4.
                assert_eq!(c_width(&config, &row_major(64, 1028, 1028), 2, 2, limit), 4);
                // Rows of an even length, not of the vector's: the fragments' pairs.
                assert_eq!(c_width(&config, &row_major(64, 1026, 1026), 2, 2, limit), 2);
                assert_eq!(c_width(&config, &row_major(64, 1024, 1030), 2, 4, limit), 2);
                // Odd, or column-major: element by element.
                assert_eq!(c_width(&config, &row_major(64, 1023, 1023), 2, 2, limit), 1);
                let col_major = MatrixDesc {
                    row_stride: 1,
                    col_stride: 64,
                    ..row_major(64, 1024, 1)
                };
                assert_eq!(c_width(&config, &col_major, 2, 4, limit), 1);
            }
        }
        // tf32 in 128×256 at BK 32: 150 KiB of stages, and 18 KiB of staging fit an H100's
        // shared memory, not an A100's.
        let tf32_big = MmaConfig { bk: 32, ..big };
        assert_eq!(c_width(&tf32_big, &square, 4, 4, h100), 4);
        assert_eq!(c_width(&tf32_big, &square, 4, 4, a100), 2);
        // Emulated, at most 4 elements (Vulkan's widest vector), in lavapipe's 32 KiB; a warp
        // tile 16 wide holds 4 vectors of 4 in a row, a power of two.
        let emulated = small(32, 16, 32, 1, 1);
        let lavapipe = 32 * 1024;
        assert_eq!(c_width(&emulated, &square, 2, 2, lavapipe), 4);
        assert_eq!(c_width(&emulated, &square, 2, 4, lavapipe), 4);
        // A row of 12 vectors (a warp tile 48 wide) is not a power of two of them: pairs.
        let odd = MmaConfig {
            bn: 48,
            ..emulated
        };
        assert_eq!(c_width(&odd, &square, 2, 4, lavapipe), 2);
    }

    #[test]
    fn the_registered_configurations_include_the_large_tiles() {
        let configs = Mma::configs();
        for (bm, bn) in [(128, 128), (128, 256)] {
            assert!(
                configs.iter().any(|c| c.bm == bm
                    && c.bn == bn
                    && c.bk == 32
                    && c.warp_m() == 64
                    && c.warp_n() == 64
                    && c.stages >= 3),
                "{bm}×{bn}"
            );
        }
        assert_eq!(configs.len(), 11);
        // For products of few blocks, 64×128 in 4 warps of 32×64, and in 8 of them, two groups
        // along K of BK = 64 (2 steps each).
        for wk in [1, 2] {
            assert!(configs.iter().any(|c| (c.bm, c.bn, c.warp_m(), c.warp_n(), c.split, c.wk)
                == (64, 128, 32, 64, 1, wk)));
        }
        let sliced: Vec<_> = configs.iter().filter(|c| c.wk > 1).collect();
        assert_eq!(sliced.len(), 1);
        assert_eq!((sliced[0].warps(), sliced[0].steps_per_group(2)), (8, 2));
        assert_eq!(sliced[0].sums_bytes(), 64 * 128 * 4);
        // tf32's own (BK = 16: 64 bytes of K, as 32 halves), and those of BK = 32 compute it
        // too but split ones and 64×128; BK = 64, f16 and bf16 only.
        let tf32 = Precision::new(DType::TF32, DType::F32).unwrap();
        let f16 = Precision::new(DType::F16, DType::F32).unwrap();
        for c in &configs {
            assert!(c.valid_for(4), "{c:?}");
            assert_eq!(c.valid_for(2), c.bk >= 32, "{c:?}");
            let wide_warps = (c.warp_m(), c.warp_n()) == (64, 64);
            assert_eq!(
                Mma::computes(c, tf32),
                c.bk <= 32 && c.split == 1 && wide_warps,
                "{c:?}"
            );
            assert_eq!(Mma::computes(c, f16), c.bk >= 32, "{c:?}");
        }
        // CUTLASS's sm80 f16 default among them: BK = 64, 3 stages.
        assert!(configs
            .iter()
            .any(|c| (c.bm, c.bn, c.bk, c.stages) == (128, 128, 64, 3)));
        // Split-K only for the 128×128 block, in 2 and 4 slices.
        let splits: Vec<u32> = configs.iter().map(|c| c.split).filter(|&s| s > 1).collect();
        assert_eq!(splits, [2, 4]);
        assert!(configs.iter().all(|c| c.valid()));
    }

    #[test]
    fn sixty_four_row_warps_of_four_steps_xor_their_fragment_bases_first() {
        let named = |text: &str| Mma::parse(text).unwrap_or_else(|e| panic!("{e}"));
        for (text, f16, tf32) in [
            // (BK 64 is 8 steps of tf32, which it does not compute: `computes`.)
            ("bm=128:bn=256:bk=64:wm=2:wn=4:stages=3:split=1", true, true),
            ("bm=128:bn=128:bk=64:wm=2:wn=2:stages=3:split=1", true, true),
            ("bm=128:bn=256:bk=32:wm=2:wn=4:stages=3:split=1", false, true),
            ("bm=128:bn=128:bk=32:wm=2:wn=2:stages=3:split=1", false, true),
            ("bm=128:bn=128:bk=16:wm=2:wn=2:stages=4:split=1", false, false),
            ("bm=64:bn=128:bk=32:wm=2:wn=2:stages=3:split=1", false, false),
            ("bm=64:bn=128:bk=64:wm=2:wn=2:stages=3:split=1:wk=2", false, false),
        ] {
            let c = named(text);
            assert_eq!((c.xor_first(2), c.xor_first(4)), (f16, tf32), "{text}");
        }
        // Both forms place every lane's loads where the swizzle does: the registered
        // configurations in theirs, and in the other where the emulation's flag flips it.
        for c in Mma::configs() {
            let flipped = MmaConfig {
                emulate: true,
                ..c
            };
            for bytes in [2, 4].into_iter().filter(|&b| c.fits(b)) {
                assert!(c.xor_moves_hold(bytes), "{c:?}");
                assert!(flipped.xor_moves_hold(bytes), "{flipped:?}");
            }
        }
    }

    #[test]
    fn fragment_addresses_move_by_xor_only_where_the_warp_tile_is_aligned() {
        let config = |bm, bn, wm, wn| MmaConfig {
            bm,
            bn,
            bk: 32,
            wm,
            wn,
            stages: 3,
            split: 1,
            wk: 1,
            emulate: false,
        };
        // The registered tiles, and the emulation's small ones (warp tiles of 32).
        for c in Mma::configs()
            .into_iter()
            .chain([config(32, 64, 1, 2), config(64, 32, 2, 1), config(64, 64, 1, 1)])
        {
            assert!(c.xor_moves_hold(2), "{c:?}");
        }
        // tf32: ldmatrix where K is contiguous, 32-bit loads where M or N is.
        for c in Mma::configs()
            .into_iter()
            .chain([small(64, 64, 16, 1, 1), small(32, 64, 16, 1, 2)])
        {
            assert!(c.xor_moves_hold(4) && c.word_moves_hold(), "{c:?}");
        }
        // Groups of warps along K, each from its own first step: two groups of 2 steps (as the
        // registered 64×128's, above), four of 2, two of 4.
        for (bk, wk) in [(64, 2), (128, 4), (128, 2)] {
            let c = MmaConfig {
                bk,
                wk,
                ..config(32, 32, 1, 1)
            };
            assert!(c.valid_for(2) && c.valid_for(4), "{c:?}");
        }
        // Groups of 6 steps start at step 6, whose chunks 12.. are not an aligned power of two.
        let six = MmaConfig {
            bk: 192,
            wk: 2,
            ..config(32, 32, 1, 1)
        };
        assert!(!six.xor_moves_hold(2) && !six.fits(2));
        // Warp tiles of 48 columns start at chunk 6 of B's rows: the fragments' chunks are not
        // an aligned power of two, and a carry crosses the XORed bits.
        let unaligned = config(64, 96, 1, 2);
        assert!(!unaligned.xor_moves_hold(2));
        // tf32's 32-bit loads from padded rows move by adding, aligned or not.
        assert!(unaligned.word_moves_hold());
        assert!(!unaligned.valid());
    }
}
