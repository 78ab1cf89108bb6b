//! Matrix units (NVIDIA tensor cores, AMD matrix cores, Vulkan cooperative matrices) through
//! CubeCL's `cmma`: each plane (warp, wavefront, subgroup) multiplies an M×K fragment of A by a
//! K×N fragment of B into an M×N accumulator in one instruction sequence, f16 or bf16 inputs
//! with f32 accumulation.
//!
//! A cube of WM×WN planes stages its BM×BK tile of A and BK×BN tile of B (BM = WM·TM·M,
//! BN = WN·TN·N, BK = K) in shared memory with the shared staging of [`super::stage`],
//! zero-padded past every edge, so that the fragments load whole; each plane accumulates its
//! TM×TN fragments of C (the warp tile: per step of K it loads TM fragments of A and TN of B for
//! TM·TN products, where one fragment loads two for one), stores them to shared memory, and all
//! units write C with the α/β epilogue, guarded by C's edges. So any
//! M, K, N, stride and batch runs, and the fragment shapes are the device's own: a configuration
//! runs only where the device registers its (A, B, C) types and shape, and a device with none
//! (or another plane width) is refused before launch ([`Rung::supports`]).

use cubecl::cmma::{self, MatrixIdent, MatrixLayout};
use cubecl::prelude::*;
use serde::Serialize;

use super::args::{at, store, Dims, Layouts, View};
use super::stage::{stage_tiles, Tiles};
use super::{LaunchShape, Rung};
use crate::device::DeviceInfo;
use crate::error::Unavailable;
use crate::problem::{DType, Precision, Problem};

/// C = α·A·B + β·C over the slab `k_begin..k_end` of K, fragments of type `F`. Cube (X, Y)
/// computes the BM×BN block at (Y·BM, X·BN); plane p (`UNIT_POS_Y`) the TM×TN fragments from
/// row `(p / WN)·TM·M` and column `(p % WN)·TN·N` of it.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn tensorcore_matmul<I: Scalar, A: Float + CubeElement, O: Float, F: Float>(
    a: &Array<I>,
    b: &Array<I>,
    c: &mut Array<O>,
    va: View,
    vb: View,
    vc: View,
    dims: Dims,
    alpha: A,
    beta: A,
    #[comptime] packed_bf16: bool,
    #[comptime] config: TensorcoreConfig,
    #[comptime] layouts: Layouts,
) {
    let (fm, fn_, fk) = comptime!((config.m, config.n, config.k));
    let (bm, bn) = comptime!((config.bm(), config.bn()));
    let units = comptime!(config.units());
    // A's tile is stored transposed (`tile_a[k·BM + r]`): column-major with stride BM.
    // WMMA loads and stores need 256-bit aligned pointers, cooperative-matrix ones 128-bit:
    // fragments start at multiples of M (or N) elements, 16 for WMMA's shapes (`FRAGMENTS`).
    let mut tile_a = SharedMemory::<F>::new_aligned(comptime!((bm * fk) as usize), 32usize);
    let mut tile_b = SharedMemory::<F>::new_aligned(comptime!((fk * bn) as usize), 32usize);
    let mut tile_c = SharedMemory::<A>::new_aligned(comptime!((bm * bn) as usize), 32usize);
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
        stage_tiles::<I, F>(
            a,
            b,
            &va,
            &vb,
            &mut tile_a,
            &mut tile_b,
            &dims,
            batch,
            row0,
            col0,
            k0,
            comptime!(config.tiles()),
            layouts,
            packed_bf16,
        );
        let mut frags_a = Sequence::<cmma::Matrix<F>>::new();
        #[unroll]
        for i in 0..tm {
            frags_a.push(cmma::Matrix::<F>::from_slice(
                MatrixIdent::A,
                comptime!(fm as usize),
                comptime!(fn_ as usize),
                comptime!(fk as usize),
                MatrixLayout::ColMajor,
                &tile_a.slice(
                    (a_start + comptime!(i as u32 * fm)) as usize,
                    comptime!((bm * fk) as usize),
                ),
                bm,
            ));
        }
        #[unroll]
        for j in 0..tn {
            let frag_b = cmma::Matrix::<F>::from_slice(
                MatrixIdent::B,
                comptime!(fm as usize),
                comptime!(fn_ as usize),
                comptime!(fk as usize),
                MatrixLayout::RowMajor,
                &tile_b.slice(
                    (b_start + comptime!(j as u32 * fn_)) as usize,
                    comptime!((fk * bn) as usize),
                ),
                bn,
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

    #[unroll]
    for i in 0..tm {
        #[unroll]
        for j in 0..tn {
            let c_start = (a_start + comptime!(i as u32 * fm)) * bn
                + b_start
                + comptime!(j as u32 * fn_);
            cmma::store(
                &mut tile_c.slice_mut(c_start as usize, comptime!((bm * bn) as usize)),
                acc.index(comptime!(i * tn + j)),
                bn,
                MatrixLayout::RowMajor,
            );
        }
    }
    sync_cube();
    #[unroll]
    for i in 0..comptime!(bm * bn / units) {
        let e = i * units + UNIT_POS;
        let (r, col) = (e / bn, e % bn);
        if row0 + r < dims.m && col0 + col < dims.n {
            store::<A, O>(
                c,
                at(&vc, batch, row0 + r, col0 + col),
                tile_c[e as usize],
                alpha,
                beta,
            );
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

    /// Whether every unit stages and writes the same number of elements.
    fn divides(&self) -> bool {
        let units = self.units();
        [self.bm() * self.k, self.k * self.bn(), self.bm() * self.bn()]
            .iter()
            .all(|e| e.is_multiple_of(units))
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
        let staged = (c.bm() * c.k + c.k * c.bn()) as usize * problem.precision.input.size_bytes();
        let result = (c.bm() * c.bn()) as usize * problem.precision.accumulate.size_bytes();
        super::block_tiled_shape(
            problem,
            [c.bn(), c.bm()],
            [c.plane, c.wm * c.wn],
            staged + result,
            c.k,
        )
    }

    fn launch<R: Runtime, I: Scalar, A: Float + CubeElement, O: Float>(
        config: &TensorcoreConfig,
        launch: super::Launch<'_, R>,
        packed_bf16: bool,
    ) {
        let super::Launch {
            client,
            count,
            buffers: [a, b, c],
            args,
        } = launch;
        let layouts = args.layouts();
        let dim = CubeDim::new_2d(config.plane, config.wm * config.wn);
        macro_rules! go {
            ($f:ty) => {
                // SAFETY: (the caller's contract) the buffers hold the views' spans, the grid
                // covers C once, staging is guarded by C's edges and the slab's end, and the
                // device registers this fragment shape and plane width (`supports`).
                unsafe {
                    tensorcore_matmul::launch_unchecked::<I, A, O, $f, R>(
                        client,
                        count,
                        dim,
                        a,
                        b,
                        c,
                        args.view(0),
                        args.view(1),
                        args.view(2),
                        args.dims(),
                        super::args::scalar::<A>(args.alpha),
                        super::args::scalar::<A>(args.beta),
                        packed_bf16,
                        *config,
                        layouts,
                    )
                }
            };
        }
        // The fragments hold the inputs' own type (bf16 also when it arrives packed in u32
        // words); `supports` refuses every other.
        if packed_bf16 || is_bf16::<I>() {
            go!(half::bf16)
        } else {
            go!(half::f16)
        }
    }

    fn expand<I: Scalar, A: Float + CubeElement, O: Float>(
        config: &TensorcoreConfig,
        kernel: super::Expand,
        packed_bf16: bool,
    ) -> CubeDim {
        let layouts = kernel.layouts;
        let t = kernel.typed::<I, A, O>();
        let [va, vb, vc] = t.views;
        macro_rules! go {
            ($f:ty) => {
                tensorcore_matmul::expand::<I, A, O, $f>(
                    t.scope,
                    t.a,
                    t.b,
                    t.c,
                    va,
                    vb,
                    vc,
                    t.dims,
                    t.alpha,
                    t.beta,
                    packed_bf16,
                    *config,
                    layouts,
                )
            };
        }
        if packed_bf16 || is_bf16::<I>() {
            go!(half::bf16)
        } else {
            go!(half::f16)
        }
        CubeDim::new_2d(config.plane, config.wm * config.wn)
    }
}

fn is_bf16<I: 'static>() -> bool {
    std::any::TypeId::of::<I>() == std::any::TypeId::of::<half::bf16>()
}
