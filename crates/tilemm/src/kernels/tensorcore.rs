//! Matrix units (NVIDIA tensor cores, AMD matrix cores, Vulkan cooperative matrices) through
//! CubeCL's `cmma`: each plane (warp, wavefront, subgroup) multiplies an M×K fragment of A by a
//! K×N fragment of B into an M×N accumulator in one instruction sequence, f16 or bf16 inputs
//! with f32 accumulation.
//!
//! A cube of WM×WN planes stages its BM×BK tile of A and BK×BN tile of B (BM = WM·TM·M,
//! BN = WN·TN·N, BK = K) in shared memory, read from global memory in vectors of up to 16
//! bytes along the axis each operand is contiguous on (`Args::staging_line`). Where the target
//! loads fragments in either layout at full width (CUDA, Vulkan), each is staged as it lies in
//! memory (a row-major operand by rows, a column-major one by columns, never transposed on the
//! way); on HIP, whose fragment loads go element by element along K, A by rows and B by
//! columns, so that those loads merge into wide ones ([`super::FragmentLoads`]). Stored lines
//! are an odd number of 16-byte chunks apart ([`PAD`]) so that the 8 lines a fragment load
//! reads at once fall in distinct banks, with zeros past every edge, so that the fragments
//! load whole.
//! Each plane accumulates its TM×TN fragments of C (the warp tile: per step of K it loads TM
//! fragments of A and TN of B for TM·TN products). The epilogue takes a plane's fragments one
//! at a time through a tile of one fragment in shared memory, where its units apply α and β
//! and write C guarded by its edges: no tile of the whole block's C. So any M, K, N, stride
//! and batch runs, and the fragment shapes are the device's own: a configuration runs only
//! where the device registers its (A, B, C) types and shape, and a device with none (or
//! another plane width) is refused before launch ([`Rung::supports`]).

use super::common::args::GemmInput;
use cubecl::cmma::{self, MatrixIdent, MatrixLayout};
use cubecl::prelude::*;
use serde::Serialize;

use super::common::args::{at, fetch, store, Layouts, View, GemmArgs};
use super::common::stage::Tiles;
use super::{Compiler, FragmentLoads, LaunchShape, Rung};
use crate::device::DeviceInfo;
use crate::error::Unavailable;
use crate::problem::{DType, Layout, Precision, Problem};

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, fragments of type `F`. Cube (X, Y)
/// computes the BM×BN block at (Y·BM, X·BN); plane p (`UNIT_POS_Y`) the TM×TN fragments from
/// row `(p / WN)·TM·M` and column `(p % WN)·TN·N` of it. A and B are read as vectors of
/// `line_a` and `line_b` elements (`NA`, `NB`) along the axis each is contiguous on.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn tensorcore_matmul<I: GemmInput, A: Float + CubeElement, O: Float, F: Float, NA: Size, NB: Size>(
    a: &Array<Vector<I, NA>>,
    b: &Array<Vector<I, NB>>,
    c: &mut Array<O>,
    args: GemmArgs<A>,
    #[comptime] config: TensorcoreConfig,
    #[comptime] layouts: Layouts,
    #[comptime] staging: Layouts,
    #[comptime] line_a: u32,
    #[comptime] line_b: u32,
) {
    let va = args.va;
    let vb = args.vb;
    let vc = args.vc;
    let dims = args.dims;
    let alpha = args.alpha;
    let beta = args.beta;
    let (fm, fn_, fk) = comptime!((config.m, config.n, config.k));
    let (bm, bn) = comptime!((config.bm(), config.bn()));
    let units = comptime!(config.units());
    let (sa, sb) = comptime!(config.staged(staging));
    // WMMA loads and stores need 256-bit aligned pointers, cooperative-matrix ones 128-bit:
    // fragments start at multiples of M (or N) elements, or of M rows of a padded stride, 16
    // for WMMA's shapes (`FRAGMENTS`).
    let mut tile_a = SharedMemory::<F>::new_aligned(comptime!(sa.elements() as usize), 32usize);
    let mut tile_b = SharedMemory::<F>::new_aligned(comptime!(sb.elements() as usize), 32usize);
    // One fragment of C per plane: the epilogue's way from the fragments to C (below).
    let planes = comptime!(config.wm * config.wn);
    let mut tile_c =
        SharedMemory::<A>::new_aligned(comptime!((planes * fm * fn_) as usize), 32usize);
    let row0 = CUBE_POS_Y * bm;
    let col0 = CUBE_POS_X * bn;
    let batch = CUBE_POS_Z + dims.batch_begin;
    let plane_row = UNIT_POS_Y / comptime!(config.wn);
    let plane_col = UNIT_POS_Y % comptime!(config.wn);

    let (tm, tn) = comptime!((config.tm as usize, config.tn as usize));
    // The plane's fragments of C, row-major: fragment (i, j) is `acc[i·TN + j]`.
    let mut acc = Sequence::<cmma::Matrix<A>>::new();
    #[unroll]
    for _ in 0..comptime!(tm * tn) {
        acc.push(cmma::Matrix::<A>::from_value(
            MatrixIdent::Accumulator,
            comptime!(fm as usize),
            comptime!(fn_ as usize),
            comptime!(fk as usize),
            MatrixLayout::Undefined,
            A::new(0.0),
        ));
    }
    let a_start = plane_row * comptime!(tm as u32 * fm);
    let b_start = plane_col * comptime!(tn as u32 * fn_);

    // Every unit runs every trip (the planes share the staged tiles across barriers); at most
    // LOOP_TRIP_LIMIT of them (k_per_trip = K): the host splits K.
    let tiles = (dims.k_end - dims.k_begin).div_ceil(fk);
    for t in 0..tiles {
        let k0 = dims.k_begin + t * fk;
        stage::<I, F, NA>(
            a, &va, &mut tile_a, batch, row0, k0, dims.m, dims.k_end, layouts.a_by_cols, sa,
            units, line_a,
        );
        stage::<I, F, NB>(
            b, &vb, &mut tile_b, batch, k0, col0, dims.k_end, dims.n, layouts.b_by_cols, sb,
            units, line_b,
        );
        sync_cube();
        let mut frags_a = Sequence::<cmma::Matrix<F>>::new();
        #[unroll]
        for i in 0..tm {
            frags_a.push(cmma::Matrix::<F>::from_slice(
                MatrixIdent::A,
                comptime!(fm as usize),
                comptime!(fn_ as usize),
                comptime!(fk as usize),
                comptime!(sa.layout()),
                &tile_a.slice(
                    ((a_start + comptime!(i as u32 * fm)) * comptime!(sa.row_step())) as usize,
                    comptime!(sa.elements() as usize),
                ),
                comptime!(sa.stride),
            ));
        }
        #[unroll]
        for j in 0..tn {
            let frag_b = cmma::Matrix::<F>::from_slice(
                MatrixIdent::B,
                comptime!(fm as usize),
                comptime!(fn_ as usize),
                comptime!(fk as usize),
                comptime!(sb.layout()),
                &tile_b.slice(
                    ((b_start + comptime!(j as u32 * fn_)) * comptime!(sb.col_step())) as usize,
                    comptime!(sb.elements() as usize),
                ),
                comptime!(sb.stride),
            );
            #[unroll]
            for i in 0..tm {
                let acc_ij = acc.index(comptime!(i * tn + j));
                cmma::execute::<F, F, A, A>(frags_a.index(i), &frag_b, acc_ij, acc_ij);
            }
        }
        // Nobody may restage the tiles while a plane still loads its fragments.
        sync_cube();
    }

    // The epilogue, a fragment at a time: each plane stores its fragment to its own M×N tile
    // of shared memory, and its units write α·acc + β·C from there, guarded by C's edges (a
    // fragment holds its elements in an order only the device knows). The block's f32 tile of
    // C is never needed: shared memory holds one fragment per plane.
    let (plane, lanes) = comptime!((config.plane, fm * fn_));
    let scratch = UNIT_POS_Y * lanes;
    #[unroll]
    for i in 0..tm {
        #[unroll]
        for j in 0..tn {
            cmma::store(
                &mut tile_c.slice_mut(scratch as usize, (scratch + lanes) as usize),
                acc.index(comptime!(i * tn + j)),
                fn_,
                MatrixLayout::RowMajor,
            );
            // (A cube barrier: SPIR-V's subgroup barrier orders no memory.)
            sync_cube();
            let r0 = row0 + a_start + comptime!(i as u32 * fm);
            let c0 = col0 + b_start + comptime!(j as u32 * fn_);
            #[unroll]
            for e in 0..comptime!(lanes / plane) {
                let x = e * plane + UNIT_POS_X;
                let (r, col) = (x / fn_, x % fn_);
                if r0 + r < dims.m && c0 + col < dims.n {
                    store::<A, O>(
                        c,
                        at(&vc, batch, r0 + r, c0 + col),
                        tile_c[(scratch + x) as usize],
                        alpha,
                        beta,
                    );
                }
            }
            // The plane's tile is rewritten with its next fragment.
            sync_cube();
        }
    }
}

/// Elements a stored line of a staged tile is padded by where its length is an even number of
/// 16-byte chunks: 16 bytes of 16-bit elements. A fragment load reads 8 lines of 16 bytes at
/// once; lines an odd number of 16-byte chunks apart fall in the 8 distinct bank groups of 128
/// bytes (unpadded, lines of 32, 64 or 128 bytes share them 2 to 8 ways).
pub const PAD: u32 = 8;

/// One operand's tile in shared memory, stored as the operand lies in memory: by rows (a
/// row-major operand) or by columns (a column-major one), each stored line `stride` elements
/// apart (its length, plus [`PAD`] where that is an even number of 16-byte chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Staged {
    /// Rows of the tile (A: BM, B: BK).
    pub rows: u32,
    /// Columns of the tile (A: BK, B: BN).
    pub cols: u32,
    /// Whether it is stored by columns.
    pub by_cols: bool,
    /// Elements from one stored line to the next.
    pub stride: u32,
}

impl Staged {
    /// A `rows`×`cols` tile stored by columns (`by_cols`) or by rows.
    pub const fn new(rows: u32, cols: u32, by_cols: bool) -> Self {
        let line = if by_cols { rows } else { cols };
        Staged {
            rows,
            cols,
            by_cols,
            stride: if (line / PAD).is_multiple_of(2) {
                line + PAD
            } else {
                line
            },
        }
    }

    /// Elements of shared memory it takes.
    pub const fn elements(&self) -> u32 {
        (if self.by_cols { self.cols } else { self.rows }) * self.stride
    }

    /// Elements from one row of the tile to the next.
    pub const fn row_step(&self) -> u32 {
        if self.by_cols {
            1
        } else {
            self.stride
        }
    }

    /// Elements from one column of the tile to the next.
    pub const fn col_step(&self) -> u32 {
        if self.by_cols {
            self.stride
        } else {
            1
        }
    }

    /// The layout fragments load it in.
    pub fn layout(&self) -> MatrixLayout {
        if self.by_cols {
            MatrixLayout::ColMajor
        } else {
            MatrixLayout::RowMajor
        }
    }
}

/// Stages an operand's tile at (`row0`, `col0`) as [`Staged`] lays it out, read in vectors of
/// `line` elements along the axis the operand is contiguous on (`by_cols`: down its columns),
/// so that loads coalesce: consecutive units take consecutive vectors. Where the tile is
/// staged along that axis too, a vector is stored whole in consecutive banks; across it (HIP's
/// [`super::FragmentLoads::AlongK`]), element by element. A vector lies wholly inside the
/// operand or wholly outside (`Args::staging_line`); outside, it is zeros.
#[cube]
#[allow(clippy::too_many_arguments)]
fn stage<I: GemmInput, F: Float, N: Size>(
    src: &Array<Vector<I, N>>,
    view: &View,
    tile: &mut SharedMemory<F>,
    batch: u32,
    row0: u32,
    col0: u32,
    rows_end: u32,
    cols_end: u32,
    #[comptime] by_cols: bool,
    #[comptime] staged: Staged,
    #[comptime] units: u32,
    #[comptime] line: u32,
) {
    let (rows, cols) = comptime!((staged.rows, staged.cols));
    let (row_step, col_step) = comptime!((staged.row_step(), staged.col_step()));
    // From one element of a vector to the next in the tile.
    let step = comptime!(if by_cols { row_step } else { col_step });
    let pieces = comptime!(rows * cols / line);
    // A line of the operand's tile (BK or a multiple of 8) is a multiple of `line`; a tile of
    // fewer vectors than units (lavapipe's 8×8 fragments) leaves the last units idle.
    #[unroll]
    for i in 0..comptime!(pieces.div_ceil(units)) {
        let piece = i * units + UNIT_POS;
        if comptime!(pieces % units == 0) || piece < pieces {
            let e = piece * line;
            let (r, c) = if comptime!(by_cols) {
                (e % rows, e / rows)
            } else {
                (e / cols, e % cols)
            };
            let offset = r * row_step + c * col_step;
            let inside = row0 + r < rows_end && col0 + c < cols_end;
            if comptime!(line == 1) {
                let mut value = F::new(0.0);
                if inside {
                    value = fetch::<I, F, N>(src, at(view, batch, row0 + r, col0 + c), 1u32);
                }
                tile[offset as usize] = value;
            } else {
                let mut v = Vector::<I, N>::empty();
                if inside {
                    v = src[at(view, batch, row0 + r, col0 + c) / comptime!(line as usize)];
                }
                #[unroll]
                for x in 0..line {
                    tile[(offset + x * step) as usize] = select(inside, F::cast_from(v[x as usize]), F::new(0.0));
                }
            }
        }
    }
}

/// The matrix-unit rung.
pub struct Tensorcore;

/// The matrix-unit rung's settings: the fragment shape, the planes per cube, the fragments per
/// plane and the plane width the launch is laid out for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TensorcoreConfig {
    /// Rows of a fragment of A and C.
    pub m: u32,
    /// Columns of a fragment of B and C.
    pub n: u32,
    /// Columns of a fragment of A, rows of B.
    pub k: u32,
    /// Planes per cube along the rows of C.
    pub wm: u32,
    /// Planes per cube along the columns of C.
    pub wn: u32,
    /// Fragments per plane along the rows of C.
    pub tm: u32,
    /// Fragments per plane along the columns of C.
    pub tn: u32,
    /// Units per plane (the device's warp, wavefront or subgroup width).
    pub plane: u32,
}

impl TensorcoreConfig {
    const KEYS: [&'static str; 8] = ["m", "n", "k", "wm", "wn", "tm", "tn", "plane"];

    /// Rows of C per cube.
    pub fn bm(&self) -> u32 {
        self.wm * self.tm * self.m
    }

    /// Columns of C per cube.
    pub fn bn(&self) -> u32 {
        self.wn * self.tn * self.n
    }

    /// Units per cube.
    pub fn units(&self) -> u32 {
        self.plane * self.wm * self.wn
    }

    /// The block tile, as staging takes it.
    pub fn tiles(&self) -> Tiles {
        Tiles {
            bm: self.bm(),
            bn: self.bn(),
            bk: self.k,
            units: self.units(),
        }
    }

    /// How A's and B's tiles are staged for operands in `layouts` on a target whose fragment
    /// loads are `loads`: as the operands lie in memory, or both along K where the target
    /// loads fragments element by element along K (HIP).
    pub fn staging(layouts: Layouts, loads: FragmentLoads) -> Layouts {
        match loads {
            FragmentLoads::EitherLayout => layouts,
            FragmentLoads::AlongK => Layouts {
                a_by_cols: false,
                b_by_cols: true,
            },
        }
    }

    /// A's BM×K and B's K×BN tiles as staged in `staging` (by columns or by rows).
    pub fn staged(&self, staging: Layouts) -> (Staged, Staged) {
        (
            Staged::new(self.bm(), self.k, staging.a_by_cols),
            Staged::new(self.k, self.bn(), staging.b_by_cols),
        )
    }

    /// Whether every unit stages the same number of elements, and writes the same number of
    /// each fragment of C.
    fn divides(&self) -> bool {
        let units = self.units();
        [self.bm() * self.k, self.k * self.bn()]
            .iter()
            .all(|e| e.is_multiple_of(units))
            && (self.m * self.n).is_multiple_of(self.plane)
    }
}

/// The fragment shapes of the matrix units tilemm uses, with the plane widths they come with:
/// 8×8×8 on lavapipe (subgroups of 8); 16×16×16 on NVIDIA (warps of 32) and AMD (wavefronts of
/// 32 on RDNA, 64 on CDNA). NVIDIA's 32×8×16 and 8×32×16 are left out: a plane's fragment of
/// B (or A) would start 8 elements into the shared tile, off the 256-bit alignment WMMA loads
/// need.
const FRAGMENTS: [(u32, u32, u32, u32); 3] = [(8, 8, 8, 8), (16, 16, 16, 32), (16, 16, 16, 64)];

impl Rung for Tensorcore {
    const NAME: &'static str = "tensorcore";
    const ABOUT: &'static str =
        "matrix units (tensor cores, cooperative matrices) through CubeCL cmma, f16/bf16 inputs";
    type Config = TensorcoreConfig;
    const MATRIX_UNITS: bool = true;

    fn configs() -> Vec<TensorcoreConfig> {
        FRAGMENTS
            .iter()
            .flat_map(|&(m, n, k, plane)| {
                [(1, 1), (2, 2), (4, 2), (2, 4)]
                    .into_iter()
                    .flat_map(move |(wm, wn)| {
                        // A 2×2 warp tile of fragments per plane first (a fallback to
                        // another plane width takes the first), or one fragment.
                        [(2, 2), (1, 1)].map(|(tm, tn)| TensorcoreConfig {
                            m,
                            n,
                            k,
                            wm,
                            wn,
                            tm,
                            tn,
                            plane,
                        })
                    })
            })
            // And 4×4 fragments per plane in 2×2 planes: 128×128 blocks of 64×64 warp tiles
            // from 16×16 fragments, the tile the fastest tensor-core kernels use.
            .chain(FRAGMENTS.iter().map(|&(m, n, k, plane)| TensorcoreConfig {
                m,
                n,
                k,
                wm: 2,
                wn: 2,
                tm: 4,
                tn: 4,
                plane,
            }))
            .filter(|c| c.divides() && c.units() <= 1024)
            .collect()
    }

    fn default_config() -> TensorcoreConfig {
        TensorcoreConfig {
            m: 16,
            n: 16,
            k: 16,
            wm: 2,
            wn: 2,
            tm: 2,
            tn: 2,
            plane: 32,
        }
    }

    fn parse(text: &str) -> Result<TensorcoreConfig, String> {
        let v = super::parse_settings(text, &TensorcoreConfig::KEYS)?;
        let config = TensorcoreConfig {
            m: v[0],
            n: v[1],
            k: v[2],
            wm: v[3],
            wn: v[4],
            tm: v[5],
            tn: v[6],
            plane: v[7],
        };
        super::one_of(config, Self::configs(), Self::show)
    }

    fn show(c: &TensorcoreConfig) -> String {
        format!(
            "m={}:n={}:k={}:wm={}:wn={}:tm={}:tn={}:plane={}",
            c.m, c.n, c.k, c.wm, c.wn, c.tm, c.tn, c.plane
        )
    }

    fn computes(_config: &TensorcoreConfig, precision: Precision) -> bool {
        matches!(precision.input, DType::F16 | DType::BF16) && precision.accumulate == DType::F32
    }

    /// 4×4 fragments of 16×16 f32 accumulators take 128 VGPRs per lane on RDNA 3 (8 each)
    /// before A's and B's: gfx1100 spills them (650 spills in the compile check), where
    /// NVIDIA keeps them in 194 registers.
    fn may_spill(config: &TensorcoreConfig, _precision: Precision, compiler: Compiler) -> bool {
        compiler == Compiler::Amd && config.tm * config.tn >= 16
    }

    fn plane_width(config: &TensorcoreConfig) -> Option<u32> {
        Some(config.plane)
    }

    fn supports(
        config: &TensorcoreConfig,
        problem: &Problem,
        device: &DeviceInfo,
    ) -> Result<(), Unavailable> {
        let precision = problem.precision;
        let wanted = crate::device::MatrixUnit {
            a: precision.input,
            b: precision.input,
            cd: DType::F32,
            m: config.m,
            n: config.n,
            k: config.k,
        };
        if !device.matrix_units.contains(&wanted) {
            return Err(Unavailable::MatrixUnit {
                wanted,
                registered: device.matrix_units.clone(),
            });
        }
        Ok(())
    }

    fn shape(c: &TensorcoreConfig, problem: &Problem) -> LaunchShape {
        let by_cols = |d: &crate::problem::MatrixDesc| d.layout() == Layout::ColMajor;
        let layouts = Layouts {
            a_by_cols: by_cols(&problem.a),
            b_by_cols: by_cols(&problem.b),
        };
        // The larger of the targets' stagings (the device is not known here).
        let staged = [FragmentLoads::EitherLayout, FragmentLoads::AlongK]
            .map(|loads| {
                let (sa, sb) = c.staged(TensorcoreConfig::staging(layouts, loads));
                (sa.elements() + sb.elements()) as usize
            })
            .into_iter()
            .max()
            .unwrap_or(0)
            * problem.precision.input.size_bytes();
        // One fragment of C per plane (the epilogue's).
        let result =
            (c.wm * c.wn * c.m * c.n) as usize * problem.precision.accumulate.size_bytes();
        super::block_tiled_shape(
            problem,
            [c.bn(), c.bm()],
            [c.plane, c.wm * c.wn],
            staged + result,
            c.k,
        )
    }

    fn launch<R: Runtime, I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &TensorcoreConfig,
        launch: super::Launch<'_, R>,
    ) {
        let super::Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        let layouts = args.layouts();
        let staging =
            TensorcoreConfig::staging(layouts, FragmentLoads::of_runtime(R::name(client)));
        let dim = CubeDim::new_2d(config.plane, config.wm * config.wn);
        let widest = staging_width::<I>(client.properties().hardware.max_vector_size);
        let line_a = args.staging_line::<I>(0, widest);
        let line_b = args.staging_line::<I>(1, widest);
        // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid covers C
        // once, staging is guarded by C's edges and the slab's end, vectors lie wholly inside
        // an operand or outside (`staging_line`), and the device registers this fragment shape
        // and plane width (`supports`). The fragments hold the inputs' own type (bf16 also when
        // it arrives packed in u32 words); `computes` refuses every other.
        unsafe {
            tensorcore_matmul::launch_unchecked::<I, A, O, I::Fragment, R>(
                client,
                count,
                dim,
                line_a as usize,
                line_b as usize,
                a,
                b,
                c,
                args.gemm::<A, R>(),
                *config,
                layouts,
                staging,
                line_a,
                line_b,
            )
        }
    }

    fn expand<I: GemmInput, A: Float + CubeElement, O: Float>(
        config: &TensorcoreConfig,
        kernel: super::Expand,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let staging = TensorcoreConfig::staging(layouts, kernel.fragment_loads);
        // The interior case: both operands row-major and aligned, read in the target's widest
        // vectors (CUDA's and HIP's 16 bytes).
        let line = if I::PACKED_BF16 {
            1
        } else {
            staging_width::<I>(kernel.max_vector_size().unwrap_or(kernel.line as usize))
        };
        let mut kernel = kernel;
        kernel.register_size::<tensorcore_matmul::NA>(line as usize);
        kernel.register_size::<tensorcore_matmul::NB>(line as usize);
        let t = kernel.typed_with::<Vector<I, tensorcore_matmul::NA>, Vector<I, tensorcore_matmul::NB>, A, O>();
        tensorcore_matmul::expand::<I, A, O, I::Fragment, tensorcore_matmul::NA, tensorcore_matmul::NB>(
            t.scope,
            line as usize,
            line as usize,
            t.a,
            t.b,
            t.c,
            t.args,
            *config,
            layouts,
            staging,
            line,
            line,
        );
        CubeDim::new_2d(config.plane, config.wm * config.wn)
    }
}

/// Elements of `I` in the widest vector staging reads: 16 bytes (8 elements of 16 bits), or
/// the target's widest vector where that is shorter (wgpu's 4).
fn staging_width<I: GemmInput>(max_vector_size: usize) -> u32 {
    let per_16_bytes = 16 / std::mem::size_of::<I>().max(1);
    per_16_bytes.min(max_vector_size).max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every configuration, in every layout: the 8 stored lines a fragment load reads at once
    /// (16 bytes of 16-bit elements each, from any fragment's start) fall in the 8 distinct
    /// 16-byte bank groups of 128 bytes, and fragments start 32-byte aligned (WMMA).
    #[test]
    fn staged_lines_of_a_fragment_load_fall_in_distinct_banks() {
        let bytes = 2;
        for config in Tensorcore::configs() {
            for (a_by_cols, b_by_cols) in [(false, false), (true, false), (false, true), (true, true)] {
                let (sa, sb) = config.staged(Layouts {
                    a_by_cols,
                    b_by_cols,
                });
                for staged in [sa, sb] {
                    let groups: std::collections::BTreeSet<u32> =
                        (0..8).map(|line| (line * staged.stride * bytes / 16) % 8).collect();
                    assert_eq!(groups.len(), 8, "{config:?} {staged:?}");
                    assert_eq!((staged.stride * bytes) % 16, 0, "{config:?} {staged:?}");
                }
                // Fragment starts: A's at multiples of M rows, B's of N columns.
                let a_start = config.m * sa.row_step() * bytes;
                let b_start = config.n * sb.col_step() * bytes;
                let align = if config.m == 16 { 32 } else { 16 };
                assert_eq!(a_start % align, 0, "{config:?}");
                assert_eq!(b_start % align, 0, "{config:?}");
            }
        }
    }
}
