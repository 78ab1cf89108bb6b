//! Asynchronous staging through swizzled shared memory, as CUTLASS's sm80 multistage GEMM
//! stages: each operand's K tile copied in 16-byte `cp.async` chunks (zero-filled past the
//! edges; element by element, synchronously, where the operand's rows are not 16-byte aligned)
//! into a layout whose chunks are XORed with the row ([`Swizzle`]), so that `ldmatrix` reads
//! and the copies' writes fall in distinct bank groups. The mma and pipelined rungs stage so.

use cubecl::prelude::barrier::{copy_async, copy_async_checked, Barrier};
use cubecl::prelude::*;
use serde::Serialize;

use super::args::{at, Dims, View};
use crate::problem::MatrixDesc;

/// Bytes of one asynchronous copy (`cp.async`'s widest), and of a chunk of the shared layout.
pub const CHUNK_BYTES: u32 = 16;

/// Where a 16-byte chunk of a tile lies in shared memory: the tile's rows are `chunks` chunks
/// long and start `stride` chunks apart (`stride` > `chunks`: padded rows), and chunk `c` of
/// row `r` sits at position `c ^ ((r >> shift) & mask)` of its row.
///
/// With `shift` and `mask` from [`Swizzle::new`], any 8 consecutive rows (aligned to 8) at
/// one chunk position, and any 8 consecutive chunks of a 128-byte line, land in the 8
/// distinct 16-byte bank groups of the 32 banks: what an `ldmatrix` phase reads and a phase
/// of 8 lanes' 16-byte copies writes (tested in this module's tests from this function alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Swizzle {
    /// Chunks per row.
    pub chunks: u32,
    /// Chunks from one row's start to the next's.
    pub stride: u32,
    /// Rows sharing a 128-byte line: log2.
    pub shift: u32,
    /// Chunk positions XORed: `min(chunks, 8) − 1`.
    pub mask: u32,
}

impl Swizzle {
    /// The swizzle of rows `chunks` chunks long (a power of two).
    pub const fn new(chunks: u32) -> Self {
        let per_line = if chunks >= 8 { 1 } else { 8 / chunks };
        Swizzle {
            chunks,
            stride: chunks,
            shift: per_line.trailing_zeros(),
            mask: if chunks >= 8 { 7 } else { chunks - 1 },
        }
    }

    /// The layout of rows of `chunks` ≥ 8 chunks (a multiple of 8) of 32-bit words read a
    /// word per lane, as the mma rung reads tf32 fragments from an operand stored with M or N
    /// contiguous: each 32-bit load reads 4 consecutive rows at 8 consecutive words. Rows
    /// padded by 2 chunks (8 words) start 8 banks apart, so the 4 rows' 8 words fall in 32
    /// distinct banks; a phase of copies, 8 chunks of one row, in 8 distinct bank groups; and
    /// every address is a lane's first plus a constant.
    pub const fn words(chunks: u32) -> Self {
        Swizzle {
            chunks,
            stride: chunks + 2,
            shift: 0,
            mask: 0,
        }
    }

    /// Rows after which the pattern repeats.
    pub const fn period(&self) -> u32 {
        (self.mask + 1) << self.shift
    }

    /// The position of chunk `chunk` of row `row`, in chunks from the tile's start.
    pub const fn position(&self, row: u32, chunk: u32) -> u32 {
        row * self.stride + (chunk ^ ((row >> self.shift) & self.mask))
    }
}

/// [`Swizzle::position`] in a kernel.
#[cube]
pub fn swizzled(row: u32, chunk: u32, #[comptime] swizzle: Swizzle) -> u32 {
    row * swizzle.stride + (chunk ^ ((row >> swizzle.shift) & swizzle.mask))
}

/// `offset`, an element of a shared-memory tile's stages (under 2¹⁶ of them: the rungs'
/// `valid`), said so with a mask: the compiler then knows that adding a constant cannot wrap,
/// and folds each load's constant into its address (`LDS [R+imm]`) instead of keeping a
/// register per offset.
#[cube]
pub fn within(offset: u32) -> u32 {
    offset & 0xffff
}

/// One operand's tile in shared memory: `rows` rows of `swizzle.chunks` 16-byte chunks (each
/// `swizzle.stride` chunks of memory), the
/// rows running along the operand's contiguous axis' partner (A row-major: rows of A, chunks
/// along K; column-major: rows of K, chunks along M).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct StagedTile {
    /// Rows stored.
    pub rows: u32,
    /// Their layout.
    pub swizzle: Swizzle,
    /// Elements per chunk (8 for 16-bit types).
    pub per_chunk: u32,
    /// Whether the stored rows are the operand's columns (a column-major operand).
    pub by_cols: bool,
}

impl StagedTile {
    /// An operand's `outer`×`inner` tile (rows × columns of the operand: A's BM×BK, B's
    /// BK×BN) of `bytes`-byte elements, stored as the operand lies (`by_cols`: column-major).
    pub const fn new(outer: u32, inner: u32, bytes: u32, by_cols: bool) -> Self {
        let per_chunk = CHUNK_BYTES / bytes;
        let (rows, along) = if by_cols {
            (inner, outer)
        } else {
            (outer, inner)
        };
        StagedTile {
            rows,
            swizzle: Swizzle::new(along / per_chunk),
            per_chunk,
            by_cols,
        }
    }

    /// Elements the tile takes in memory.
    pub const fn elements(&self) -> u32 {
        self.rows * self.swizzle.stride * self.per_chunk
    }
}

/// Moves `width` elements from `src[index..]` into `tile[offset..]`: one asynchronous 16-byte
/// copy (`cp.async`), of which only `valid` elements are read and the rest zero-filled where
/// `bounded`; emulated, synchronous loads and stores of the same elements.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn transfer<F: Float>(
    src: &Array<F>,
    index: usize,
    valid: u32,
    tile: &mut SharedMemory<F>,
    offset: u32,
    #[comptime] width: u32,
    #[comptime] bounded: bool,
    #[comptime] emulate: bool,
    #[comptime] rolled: bool,
) {
    if comptime!(emulate || width == 1) {
        // Selects, not branches, and emulated a loop: lavapipe's compiler takes time
        // superlinear in the code of a kernel with barriers. Out of range, element 0 is read
        // and dropped.
        #[unroll(!rolled)]
        for e in 0..width {
            let inside = !comptime!(bounded) || e < valid;
            let from = select(inside, index + e as usize, 0usize);
            tile[(offset + e) as usize] = select(inside, src[from], F::new(0.0));
        }
    } else if comptime!(bounded) {
        // Out of range (valid = 0), the copy reads nothing.
        copy_async_checked(
            &src.slice(index, index + valid as usize),
            &mut tile.slice_mut(offset as usize, (offset + width) as usize),
            width,
        );
    } else {
        copy_async(
            &src.slice(index, index + width as usize),
            &mut tile.slice_mut(offset as usize, (offset + width) as usize),
            width,
        );
    }
}

/// Which of a unit's copies of a tile a call issues: part `part` of `parts` (CUTLASS spreads a
/// tile's copies over the steps of the tile computed meanwhile, between the MMAs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Share {
    /// Which part.
    pub part: u32,
    /// Parts in all.
    pub parts: u32,
}

impl Share {
    /// All of the copies at once.
    pub const WHOLE: Share = Share { part: 0, parts: 1 };

    /// This part's range of `count` copies.
    pub const fn range(&self, count: u32) -> (u32, u32) {
        (
            self.part * count / self.parts,
            (self.part + 1) * count / self.parts,
        )
    }
}

/// What staging one K tile of both operands knows at compile time: their tiles, the block
/// (BM, BN, BK), the units copying, the operands' piece widths, and how the copies run
/// (`emulate`: loads and stores of the same elements; `rolled_plans`, `rolled_bounded`: the
/// loops over the plans' copies and over bounded pieces kept rolled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PairStaging {
    pub tile_a: StagedTile,
    pub tile_b: StagedTile,
    pub block: (u32, u32, u32),
    pub units: u32,
    pub widths: (u32, u32),
    pub emulate: bool,
    pub rolled_plans: bool,
    pub rolled_bounded: bool,
}

/// Issues part `share` of the copies of K tile `t` (of the slab in `dims`) of A and B into
/// the stages at `stage_a` and `stage_b`: along the copy plans where `fast` (whole tiles, both
/// operands in 16-byte pieces), else each piece placed and bounded on its own
/// ([`stage_operand`]). Past the slab's end (`live` false) the plans' copies read nothing
/// where `guarded` (the bounded pieces are bounded by the slab anyway).
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_pair<F: Float>(
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
    stage_a: u32,
    stage_b: u32,
    #[comptime] pair: PairStaging,
    #[comptime] share: Share,
    #[comptime] guarded: bool,
    #[comptime] fast: bool,
) {
    let (bm, bn, bk) = comptime!(pair.block);
    let (width_a, width_b) = comptime!(pair.widths);
    let (tile_a, tile_b, units) = comptime!((pair.tile_a, pair.tile_b, pair.units));
    let (emulate, rolled) = comptime!((pair.emulate, pair.rolled_plans));
    if comptime!(fast) {
        copy_tile::<F>(
            a, plan_a, shared_a, t, live, stage_a, tile_a, units, share, guarded, emulate, rolled,
        );
        copy_tile::<F>(
            b, plan_b, shared_b, t, live, stage_b, tile_b, units, share, guarded, emulate, rolled,
        );
    } else {
        let rolled = comptime!(pair.rolled_bounded);
        let k0 = dims.k_begin + t * bk;
        let k_inside = k0 + bk <= dims.k_end;
        stage_operand::<F>(
            a,
            va,
            shared_a,
            stage_a,
            batch,
            row0,
            k0,
            dims.m,
            dims.k_end,
            row0 + bm <= dims.m && k_inside,
            tile_a,
            units,
            width_a,
            share,
            emulate,
            rolled,
        );
        stage_operand::<F>(
            b,
            vb,
            shared_b,
            stage_b,
            batch,
            k0,
            col0,
            dims.k_end,
            dims.n,
            col0 + bn <= dims.n && k_inside,
            tile_b,
            units,
            width_b,
            share,
            emulate,
            rolled,
        );
    }
}

/// Copies one K tile of an operand into its stage: `units` units, each a share of the tile's
/// pieces of `width` elements (a whole 16-byte chunk with `cp.async`, zero-filled past the
/// operand's edges; or, for `width` 1, single elements loaded and stored synchronously).
/// The tile's corner is (`row0`, `col0`) of the operand, whose valid rows and columns end at
/// `rows_end` and `cols_end`; `inside` says the whole tile lies within them, so that no copy
/// needs a bound (the interior tiles: every one of a large product but those at its edges).
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_operand<F: Float>(
    src: &Array<F>,
    view: &View,
    tile: &mut SharedMemory<F>,
    stage_base: u32,
    batch: u32,
    row0: u32,
    col0: u32,
    rows_end: u32,
    cols_end: u32,
    inside: bool,
    #[comptime] staged: StagedTile,
    #[comptime] units: u32,
    #[comptime] width: u32,
    #[comptime] share: Share,
    #[comptime] emulate: bool,
    #[comptime] rolled: bool,
) {
    let per_chunk = comptime!(staged.per_chunk);
    let pieces_per_chunk = comptime!(per_chunk / width);
    let pieces_per_row = comptime!(staged.swizzle.chunks * pieces_per_chunk);
    let pieces = comptime!(staged.rows * pieces_per_row);
    let (from, to) = comptime!(share.range(pieces / units));
    #[unroll(!rolled)]
    for q in from..to {
        let piece = q * units + UNIT_POS;
        let row = piece / pieces_per_row;
        let rest = piece % pieces_per_row;
        let chunk = rest / pieces_per_chunk;
        let along = chunk * per_chunk + (rest % pieces_per_chunk) * width;
        // The operand's coordinates of the piece's first element, and how many of its
        // `width` elements lie inside the operand.
        let (i, j) = if comptime!(staged.by_cols) {
            (row0 + along, col0 + row)
        } else {
            (row0 + row, col0 + along)
        };
        let offset = stage_base
            + swizzled(row, chunk, staged.swizzle) * per_chunk
            + (rest % pieces_per_chunk) * width;
        // (A comptime condition of its own: `comptime && runtime` would compile the unbounded
        // copy for single elements too, which never take it.)
        if comptime!(width > 1) {
            if inside {
                let index = at(view, batch, i, j);
                transfer::<F>(
                    src, index, width, tile, offset, width, false, emulate, rolled,
                );
            } else {
                copy_bounded::<F>(
                    src, view, tile, offset, batch, i, j, rows_end, cols_end, staged, width,
                    emulate, rolled,
                );
            }
        } else {
            copy_bounded::<F>(
                src, view, tile, offset, batch, i, j, rows_end, cols_end, staged, width, emulate,
                rolled,
            );
        }
    }
}

/// One piece's copy to `offset` of the stage from (`i`, `j`) of the operand, with as many of
/// its `width` elements as lie before `rows_end` and `cols_end` (none past them: then nothing
/// is read, and the piece is zero-filled).
#[cube]
#[allow(clippy::too_many_arguments)]
fn copy_bounded<F: Float>(
    src: &Array<F>,
    view: &View,
    tile: &mut SharedMemory<F>,
    offset: u32,
    batch: u32,
    i: u32,
    j: u32,
    rows_end: u32,
    cols_end: u32,
    #[comptime] staged: StagedTile,
    #[comptime] width: u32,
    #[comptime] emulate: bool,
    #[comptime] rolled: bool,
) {
    let (fixed_ok, along_pos, along_end) = if comptime!(staged.by_cols) {
        (j < cols_end, i, rows_end)
    } else {
        (i < rows_end, j, cols_end)
    };
    let mut valid = 0u32;
    // Out of range, no element is read (and the index is a harmless 0).
    let mut index = 0usize;
    if fixed_ok && along_pos < along_end {
        valid = (along_end - along_pos).min(width);
        index = at(view, batch, i, j);
    }
    transfer::<F>(
        src, index, valid, tile, offset, width, true, emulate, rolled,
    );
}

/// A unit's share of one operand's copies on the fast path (whole tiles, 16-byte copies): the
/// buffer index of its first piece in K tile 0, the index steps between its pieces and between
/// K tiles, and the stored row and chunk of its first piece (the others follow `units /
/// chunks` rows further each).
#[derive(CubeType, Clone, Copy)]
pub(crate) struct CopyPlan {
    first: usize,
    step_piece: usize,
    step_tile: usize,
    row: u32,
    chunk: u32,
}

/// [`CopyPlan`] for an operand whose tile 0 has its corner at (`row0`, `col0`); K runs along
/// the operand's rows (`k_down`: B) or columns (A).
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_plan(
    view: &View,
    batch: u32,
    row0: u32,
    col0: u32,
    #[comptime] staged: StagedTile,
    #[comptime] units: u32,
    #[comptime] bk: u32,
    #[comptime] k_down: bool,
) -> CopyPlan {
    let chunks = comptime!(staged.swizzle.chunks);
    let per_chunk = comptime!(staged.per_chunk);
    let row = UNIT_POS / chunks;
    let chunk = UNIT_POS % chunks;
    let along = chunk * per_chunk;
    let (i, j) = if comptime!(staged.by_cols) {
        (row0 + along, col0 + row)
    } else {
        (row0 + row, col0 + along)
    };
    let stored_rows_stride = if comptime!(staged.by_cols) {
        view.col_stride
    } else {
        view.row_stride
    };
    let k_stride = if comptime!(k_down) {
        view.row_stride
    } else {
        view.col_stride
    };
    CopyPlan {
        first: at(view, batch, i, j),
        step_piece: (comptime!(units / chunks) * stored_rows_stride) as usize,
        step_tile: (comptime!(bk) * k_stride) as usize,
        row,
        chunk,
    }
}

/// Where a unit's piece `q` after the one at stored row `row` (chunk `chunk`, at `offset` of the
/// stage) lies in the stage at `stage_base`: pieces lie `units / chunks` rows apart, a constant
/// apart in the stage where that is a multiple of the swizzle's period (every registered
/// configuration), else each placed by the swizzle.
#[cube]
#[allow(clippy::too_many_arguments)]
fn piece_offset(
    offset: u32,
    row: u32,
    chunk: u32,
    q: u32,
    stage_base: u32,
    #[comptime] staged: StagedTile,
    #[comptime] units: u32,
) -> u32 {
    let per_chunk = comptime!(staged.per_chunk);
    let rows_apart = comptime!(units / staged.swizzle.chunks);
    if comptime!(rows_apart % staged.swizzle.period() == 0) {
        offset + q * comptime!(rows_apart * staged.swizzle.stride * per_chunk)
    } else {
        swizzled(row + q * rows_apart, chunk, staged.swizzle) * per_chunk + stage_base
    }
}

/// Copies K tile `t` of an operand into the stage at `stage_base` along `plan`: one 16-byte
/// `cp.async` per piece, no bounds (the fast path's tiles are whole). Where a unit's pieces
/// lie a multiple of the swizzle's period apart (every registered configuration), the stage
/// offsets are the first one's plus constants. `guarded`: the copies read nothing (and fill
/// the stage with zeros) unless `live`, so that a tile past the slab's end costs no branch.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_tile<F: Float>(
    src: &Array<F>,
    plan: &CopyPlan,
    tile: &mut SharedMemory<F>,
    t: u32,
    live: bool,
    stage_base: u32,
    #[comptime] staged: StagedTile,
    #[comptime] units: u32,
    #[comptime] share: Share,
    #[comptime] guarded: bool,
    #[comptime] emulate: bool,
    #[comptime] rolled: bool,
) {
    let per_chunk = comptime!(staged.per_chunk);
    let chunks = comptime!(staged.swizzle.chunks);
    let pieces = comptime!(staged.rows * chunks);
    let (from, to) = comptime!(share.range(pieces / units));
    let base = plan.first + t as usize * plan.step_tile;
    // Said to lie in the stages (`within`), so that each piece's constant after it folds into
    // the copy's shared address (`LDGSTS [R+imm]`) rather than costing an add per piece.
    let first = within(swizzled(plan.row, plan.chunk, staged.swizzle) * per_chunk + stage_base);
    #[unroll(!rolled)]
    for q in from..to {
        let index = base + q as usize * plan.step_piece;
        let offset = piece_offset(first, plan.row, plan.chunk, q, stage_base, staged, units);
        let valid = select(live || !comptime!(guarded), per_chunk, 0u32);
        transfer::<F>(
            src, index, valid, tile, offset, per_chunk, guarded, emulate, rolled,
        );
    }
}

/// Where a unit's next copy of one K tile of an operand along its [`CopyPlan`] stands, bounded:
/// its buffer index and stage offset, its stored row in the tile and in the operand, where
/// stored rows end, and how many elements of its chunk lie before the end along the rows
/// (every piece of the unit is in the same chunk column). Computed once per tile and moved
/// along by [`copy_run`], so that a loop that spreads the pieces over its trips pays a few
/// instructions per piece.
#[derive(CubeType, Clone, Copy)]
pub(crate) struct PieceRun {
    index: u32,
    offset: u32,
    row: u32,
    outer: u32,
    outer_end: u32,
    along_valid: u32,
}

/// The [`PieceRun`] of K tile `t` along `plan` into the stage at `stage_base`, at the unit's
/// first piece: the tile's first stored row lies at `outer0` of the operand and its first
/// chunk at `along0`; stored rows end at `outer_end`, chunks at `along_end`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn piece_run(
    plan: &CopyPlan,
    t: u32,
    stage_base: u32,
    outer0: u32,
    outer_end: u32,
    along0: u32,
    along_end: u32,
    #[comptime] staged: StagedTile,
) -> PieceRun {
    let per_chunk = comptime!(staged.per_chunk);
    let along = along0 + plan.chunk * per_chunk;
    let mut along_valid = 0u32;
    if along < along_end {
        along_valid = (along_end - along).min(per_chunk);
    }
    PieceRun {
        index: plan.first as u32 + t * plan.step_tile as u32,
        offset: stage_base + swizzled(plan.row, plan.chunk, staged.swizzle) * per_chunk,
        row: plan.row,
        outer: outer0 + plan.row,
        outer_end,
        along_valid,
    }
}

/// Copies the next `count` of the unit's pieces of `run` into the stage at `stage_base`, and
/// moves `run` past them. `bounded`: a piece whose stored row lies at or past the end reads
/// nothing, one whose chunk runs past the end along the rows reads only the elements before
/// it, and the rest of each 16-byte chunk is zero-filled, with no branch. Not `bounded`, for a
/// tile known to be whole: every piece is copied whole, without the bounds' dozen instructions
/// a piece.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_run<F: Float>(
    src: &Array<F>,
    plan: &CopyPlan,
    run: &mut PieceRun,
    tile: &mut SharedMemory<F>,
    stage_base: u32,
    #[comptime] count: u32,
    #[comptime] staged: StagedTile,
    #[comptime] units: u32,
    #[comptime] bounded: bool,
    #[comptime] emulate: bool,
) {
    let per_chunk = comptime!(staged.per_chunk);
    let chunks = comptime!(staged.swizzle.chunks);
    let rows_apart = comptime!(units / chunks);
    let offset_apart = comptime!(rows_apart * staged.swizzle.stride * per_chunk);
    let step = plan.step_piece as u32;
    #[unroll]
    for p in 0..count {
        let index = run.index + p * step;
        let offset = piece_offset(
            run.offset, run.row, plan.chunk, p, stage_base, staged, units,
        );
        // (Not bounded, the transfer copies whole pieces and never reads the count.)
        let valid = select(
            run.outer + comptime!(p * rows_apart) < run.outer_end,
            run.along_valid,
            0u32,
        );
        transfer::<F>(
            src,
            index as usize,
            valid,
            tile,
            offset,
            per_chunk,
            bounded,
            emulate,
            false,
        );
    }
    run.index += comptime!(count) * step;
    run.offset += comptime!(count * offset_apart);
    run.row += comptime!(count * rows_apart);
    run.outer += comptime!(count * rows_apart);
}

/// Waits, after a pipeline's K loop over `tiles` tiles with one barrier per stage (of
/// `stages`), for the tiles past the slab's end that it fetched anyway: each tile t fetched
/// tile t + STAGES − 1, zero-filled past the end, so tiles `max(tiles, STAGES − 1)` to
/// `tiles + STAGES − 2` (the prologue fetched only tiles inside the slab), at most one per
/// barrier, phase tile / STAGES. Their copies would otherwise still be writing shared memory
/// as the cube moves on (CUTLASS drains its mainloop's the same way, `cp_async_wait<0>`).
#[cube]
pub(crate) fn drain_past_end(
    full: &Sequence<Shared<Barrier>>,
    tiles: u32,
    #[comptime] stages: u32,
) {
    let first = tiles.max(comptime!(stages - 1));
    let last = tiles + comptime!(stages - 2);
    #[unroll]
    for b in 0..stages {
        // The tile from `first` on that stage `b` holds.
        let tile = first + (b + stages - first % stages) % stages;
        if tile <= last {
            full.index(comptime!(b as usize))
                .wait_parity((tile / stages) % 2);
        }
    }
}

/// The widest piece (in elements: a whole 16-byte chunk, else 1) operand `d` can be copied in
/// along its contiguous axis: every chunk of a tile must start 16-byte aligned in the buffer.
/// Tiles start at multiples of the chunk along that axis (K slabs at multiples of BK), so the
/// offset and the other strides decide. Strided operands go element by element.
pub fn copy_width(d: &MatrixDesc, bytes: u32) -> u32 {
    let chunk = (CHUNK_BYTES / bytes) as usize;
    let along_rows = d.col_stride == 1 || d.cols == 1;
    let along_cols = d.row_stride == 1 || d.rows == 1;
    let other = if along_rows {
        d.row_stride
    } else if along_cols {
        d.col_stride
    } else {
        return 1;
    };
    let aligned = [d.offset, other, d.batch_stride]
        .iter()
        .all(|x| x.is_multiple_of(chunk));
    if aligned {
        chunk as u32
    } else {
        1
    }
}

/// C's vector width for a kernel that stores `widest` adjacent columns at a time, from a
/// multiple of `widest`: `widest` where C is row-major with offset, strides and N multiples of
/// it, so that each group is one aligned vector, inside C or outside; else 1.
pub fn store_width(d: &MatrixDesc, widest: u32) -> u32 {
    let aligned = [d.offset, d.row_stride, d.batch_stride, d.cols]
        .iter()
        .all(|x| x.is_multiple_of(widest as usize));
    if d.col_stride == 1 && aligned {
        widest
    } else {
        1
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The 16-byte bank group (of 8) a chunk at `position` (in chunks) falls in.
    pub(crate) fn group(position: u32) -> u32 {
        position % 8
    }

    /// Wavefronts (passes through the 32 banks) one phase of 8 chunk accesses needs: the most
    /// chunks in any one bank group (distinct chunks; the same chunk twice is a broadcast).
    pub(crate) fn wavefronts(positions: &[u32]) -> usize {
        let mut distinct: Vec<u32> = positions.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        (0..8)
            .map(|g| distinct.iter().filter(|&&p| group(p) == g).count())
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn an_unswizzled_64_byte_row_would_conflict_which_is_why_there_is_a_swizzle() {
        // Rows of 4 chunks (BK = 32 halves) without the XOR: rows r and r + 2 share groups.
        let plain = |row: u32, chunk: u32| row * 4 + chunk;
        let phase: Vec<u32> = (0..8).map(|r| plain(r, 0)).collect();
        assert_eq!(wavefronts(&phase), 4);
        let s = Swizzle::new(4);
        assert_eq!((s.shift, s.mask), (1, 3));
        let phase: Vec<u32> = (0..8).map(|r| s.position(r, 0)).collect();
        assert_eq!(wavefronts(&phase), 1);
    }

    #[test]
    fn the_swizzle_is_a_permutation_within_each_row() {
        for chunks in [1, 2, 4, 8, 16, 32] {
            let s = Swizzle::new(chunks);
            for row in 0..64 {
                let mut seen: Vec<u32> = (0..chunks).map(|c| s.position(row, c)).collect();
                seen.sort_unstable();
                let expected: Vec<u32> = (row * chunks..(row + 1) * chunks).collect();
                assert_eq!(seen, expected, "{chunks} chunks, row {row}");
            }
        }
    }

    #[test]
    fn copy_widths_follow_alignment_and_layout() {
        let dense = MatrixDesc::row_major(64, 40);
        assert_eq!(copy_width(&dense, 2), 8);
        assert_eq!(copy_width(&MatrixDesc::row_major(64, 41), 2), 1);
        assert_eq!(copy_width(&MatrixDesc::col_major(48, 40), 2), 8);
        let offset = MatrixDesc { offset: 4, ..dense };
        assert_eq!(copy_width(&offset, 2), 1);
        let strided = MatrixDesc {
            col_stride: 2,
            row_stride: 80,
            ..dense
        };
        assert_eq!(copy_width(&strided, 2), 1);
        assert_eq!(store_width(&dense, 2), 2);
        assert_eq!(store_width(&MatrixDesc::row_major(64, 41), 2), 1);
        assert_eq!(store_width(&MatrixDesc::col_major(64, 40), 2), 1);
    }
}
