//! The mma rung on a device without NVIDIA's instructions (lavapipe, for the tests): `ldmatrix`
//! and `mma.m16n8k16` emulated with shared-memory loads and FMAs exactly as the PTX ISA defines
//! them, so that the fragment layouts the real rung relies on are tested where it cannot run.

use cubecl::prelude::*;

use super::*;

/// One `ldmatrix.x4` of the emulation, as the PTX ISA defines it, with shared-memory loads,
/// each register element stored into the warp's `scratch` where `mma.m16n8k16` takes it from.
///
/// Register r of lane l holds, of the 8×8 matrix whose row x lane 8r + x addresses, row l / 4
/// at columns 2(l % 4) and 2(l % 4) + 1 (transposed: rows 2(l % 4) and 2(l % 4) + 1 at column
/// l / 4), each source lane's address being what [`fragment_bases`] gives that lane for outer
/// fragment `o` at step `kk`. In `mma` (g = l / 4, t = l % 4), A's register r holds row
/// g + 8·(r % 2), columns 2t + 8·(r / 2) + {0, 1}; B's register r of fragment f rows (of K)
/// 2t + 8r + {0, 1} of column g; the x4 of B holds fragment 2o in registers 0, 1 and 2o + 1
/// in 2, 3. A's fragment `o` goes to `scratch[base + 256·o ..]` (16×16, row-major), B's
/// fragment f to `scratch[base + 128·f ..]` (16×8, by K). The scratch follows B's stages in
/// `shared_b`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn emulated_ldmatrix<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    base: u32,
    lane: u32,
    origin: u32,
    stage_base: u32,
    #[comptime] o: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
    #[comptime] transpose: bool,
) {
    let (g, t) = (lane / 4, lane % 4);
    // Register r's element e (a loop, not unrolled: see `transfer`).
    for idx in 0..8u32 {
        let (r, e) = (idx / 2, idx % 2);
        let (source, column) = if comptime!(transpose) {
            (r * 8 + 2 * t + e, g)
        } else {
            (r * 8 + g, 2 * t + e)
        };
        let bases = fragment_bases(source, origin, staged, is_a);
        let row = fragment_offset(&bases, stage_base, o, kk, staged, is_a);
        let at = if comptime!(is_a) {
            base + o * 256 + (g + 8 * (r % 2)) * 16 + 2 * t + 8 * (r / 2) + e
        } else {
            base + (2 * o + r / 2) * 128 + (2 * t + 8 * (r % 2) + e) * 8 + g
        };
        let value = if comptime!(is_a) {
            shared_a[(row + column) as usize]
        } else {
            shared_b[(row + column) as usize]
        };
        shared_b[at as usize] = value;
    }
}

/// The emulation's `mma.m16n8k16` of a whole warp tile at one step of K, from the fragments
/// [`emulated_ldmatrix`] placed (A's MI from `a_base`, B's NI from `b_base`): C's vector h
/// of fragment (i, j) is row g + 8h, columns 2t + {0, 1}, added to `acc[((i·NI + j)·2 + h)·2
/// + e]`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn emulated_mma<F: Float, A: Float>(
    scratch: &SharedMemory<F>,
    a_base: u32,
    b_base: u32,
    lane: u32,
    acc: &mut Array<A>,
    #[comptime] mi: u32,
    #[comptime] ni: u32,
) {
    let (g, t) = (lane / 4, lane % 4);
    for i in 0..mi {
        for j in 0..ni {
            for h in 0..2u32 {
                for e in 0..2u32 {
                    let (row, col) = (g + 8 * h, 2 * t + e);
                    let mut sum = A::new(0.0);
                    for k in 0..16u32 {
                        sum += A::cast_from(scratch[(a_base + i * 256 + row * 16 + k) as usize])
                            * A::cast_from(scratch[(b_base + j * 128 + k * 8 + col) as usize]);
                    }
                    let at = (((i * ni + j) * 2 + h) * 2 + e) as usize;
                    acc[at] += sum;
                }
            }
        }
    }
}
