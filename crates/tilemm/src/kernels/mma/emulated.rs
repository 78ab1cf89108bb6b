//! The mma rung on a device without NVIDIA's instructions (lavapipe, for the tests): `ldmatrix`
//! and `mma.m16n8k16` (`m16n8k8` for tf32) emulated with shared-memory loads and FMAs exactly
//! as the PTX ISA defines them, so that the fragment layouts the real rung relies on are tested
//! where it cannot run.

use cubecl::prelude::*;

use super::*;

/// One `ldmatrix.x4` of the emulation, as the PTX ISA defines it, with shared-memory loads,
/// each register element stored into the warp's `scratch` where `mma` takes it from.
///
/// Register r of lane l holds, of the 8×8 matrix of 16-bit elements whose row x lane 8r + x
/// addresses, row l / 4 at columns 2(l % 4) and 2(l % 4) + 1 (transposed: rows 2(l % 4) and
/// 2(l % 4) + 1 at column l / 4), each source lane's address being what [`fragment_bases`]
/// gives that lane for outer fragment `o` at step `kk` after its group's first, `first`: for
/// 32-bit elements (tf32, never transposed), the one element at column l % 4. With E
/// elements per register (2, or 1 for tf32) and K of IK per step (16, or 8), in `mma`
/// (g = l / 4, t = l % 4) A's register r holds row g + 8·(r % 2), columns
/// E·t + IK/2·(r / 2) + {0, E − 1}; B's register r of fragment f rows (of K)
/// E·t + IK/2·r + {0, E − 1} of column g; the x4 of B holds fragment 2o in registers 0, 1 and
/// 2o + 1 in 2, 3. A's fragment `o` goes to `scratch[base + 16·IK·o ..]` (16×IK, row-major),
/// B's fragment f to `scratch[base + 8·IK·f ..]` (IK×8, by K). The scratch follows B's stages
/// in `shared_b`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn emulated_ldmatrix<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    base: u32,
    lane: u32,
    origin: u32,
    first: u32,
    stage_base: u32,
    #[comptime] o: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
    #[comptime] transpose: bool,
    #[comptime] xor_first: bool,
) {
    let (g, t) = (lane / 4, lane % 4);
    let size = F::type_size();
    let bytes = comptime!(size as u32);
    let per_reg = comptime!(4 / bytes);
    let ik = comptime!(instruction(bytes).2);
    let half = comptime!(ik / 2);
    // Register r's element e (a loop, not unrolled: see `transfer`).
    for idx in 0..comptime!(4 * per_reg) {
        let (r, e) = (idx / per_reg, idx % per_reg);
        let (source, column) = if comptime!(transpose) {
            (r * 8 + 2 * t + e, g)
        } else {
            (r * 8 + g, per_reg * t + e)
        };
        let bases = fragment_bases(source, origin, first, staged, is_a, xor_first);
        let row = fragment_offset(&bases, stage_base, o, kk, staged, is_a, xor_first);
        let at = if comptime!(is_a) {
            base + o * 16 * ik + (g + 8 * (r % 2)) * ik + per_reg * t + half * (r / 2) + e
        } else {
            base + (2 * o + r / 2) * ik * 8 + (per_reg * t + half * (r % 2) + e) * 8 + g
        };
        let value = if comptime!(is_a) {
            shared_a[(row + column) as usize]
        } else {
            shared_b[(row + column) as usize]
        };
        shared_b[at as usize] = value;
    }
}

/// The 32-bit fragment loads of the emulation (tf32 stored with M or N contiguous): each of
/// the lane's 4 registers for A's fragment `o` (B's pair `o`) read from where the kernel reads
/// it ([`word_register`], [`word_offset`]), and stored into the warp's `scratch` where
/// `mma.m16n8k8` takes it from, by the PTX ISA's layout: A's register r is row g + 8·(r % 2),
/// K t + 4·(r / 2); B's register 2h + e is fragment 2o + h at K t + 4·e, column g (the layouts
/// of [`emulated_ldmatrix`], E = 1).
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn emulated_words<F: Float>(
    shared_a: &SharedMemory<F>,
    shared_b: &mut SharedMemory<F>,
    base: u32,
    lane: u32,
    bases: &Array<u32>,
    stage_base: u32,
    #[comptime] o: u32,
    #[comptime] kk: u32,
    #[comptime] staged: StagedTile,
    #[comptime] is_a: bool,
) {
    let (g, t) = (lane / 4, lane % 4);
    let ik = comptime!(instruction(4).2);
    let half = comptime!(ik / 2);
    #[unroll]
    for r in 0..4u32 {
        // Loaded from where the kernel loads register r, placed where m16n8k8 reads it.
        let (u, h) = comptime!(word_register(o, r, is_a));
        let offset = word_offset(bases, stage_base, u, h, kk, staged) as usize;
        if comptime!(is_a) {
            let at = base + o * 16 * ik + (g + 8 * (r % 2)) * ik + t + half * (r / 2);
            let value = shared_a[offset];
            shared_b[at as usize] = value;
        } else {
            let at = base + (2 * o + r / 2) * ik * 8 + (t + half * (r % 2)) * 8 + g;
            let value = shared_b[offset];
            shared_b[at as usize] = value;
        }
    }
}

/// The emulation's `mma` (m16n8k`ik`) of a whole warp tile at one step of K, from the
/// fragments [`emulated_ldmatrix`] placed (A's MI from `a_base`, B's NI from `b_base`), the
/// inputs read as the unit reads them ([`as_unit_reads`]): C's vector h of fragment (i, j) is
/// row g + 8h, columns 2t + {0, 1}, added to `acc[((i·NI + j)·2 + h)·2 + e]`.
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
    #[comptime] ik: u32,
) {
    let (g, t) = (lane / 4, lane % 4);
    // One loop over the lane's MI·NI·4 sums, not loops of 2 nested in others: lavapipe's
    // compiler unrolls loops of a few trips, and copies of the K loop would multiply the
    // emulation's loads (its compile time grows faster than its code).
    for at in 0..comptime!(mi * ni * 4) {
        let (ij, h, e) = (at / 4, (at / 2) % 2, at % 2);
        let (i, j) = (ij / ni, ij % ni);
        let (row, col) = (g + 8 * h, 2 * t + e);
        let mut sum = A::new(0.0);
        for k in 0..ik {
            let a = scratch[(a_base + i * 16 * ik + row * ik + k) as usize];
            let b = scratch[(b_base + j * ik * 8 + k * 8 + col) as usize];
            sum += A::cast_from(as_unit_reads::<F>(a, ik))
                * A::cast_from(as_unit_reads::<F>(b, ik));
        }
        acc[at as usize] += sum;
    }
}

/// `x` as the matrix unit of m16n8k`ik` reads it: for tf32 (k = 8), an f32 register with the
/// 13 low bits of its significand dropped (truncated to tf32's 10); 16-bit inputs as they are.
#[cube]
fn as_unit_reads<F: Float>(x: F, #[comptime] ik: u32) -> F {
    if comptime!(ik == 8) {
        F::reinterpret(u32::reinterpret(x) & 0xffff_e000u32)
    } else {
        x
    }
}
