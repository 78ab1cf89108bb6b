//! Products larger than one device buffer, in panels: row panels of A and C, column panels of B,
//! slabs of K (accumulated through β = 1, in the accumulator's type) and chunks of the batch, each block copied into a
//! buffer of its own. A product that fits is one block and runs on its views as they are.

use std::ops::Range;

use serde::Serialize;

use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::host;
use crate::host::format_bytes;
use crate::plan::{device_bytes, Launches, Plan};
use crate::problem::{Layout, MatrixDesc, Problem};
use crate::types::element::{Element, HostData, HostSlice};

/// How a product is cut into blocks: the sizes of one block along M, K, N and the batch (the
/// last block along each may be smaller), and how many blocks there are along each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Panels {
    /// Rows of A and C per row panel.
    pub rows: usize,
    /// Elements of K per slab.
    pub depth: usize,
    /// Columns of B and C per column panel.
    pub cols: usize,
    /// Batch entries per chunk.
    pub batch: usize,
    /// Blocks along M, K, N and the batch.
    pub counts: [usize; 4],
}

/// One block of a product cut into [`Panels`]: ranges of rows (M), K, columns (N) and batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Rows of A and C.
    pub rows: Range<usize>,
    /// Range of K: columns of A, rows of B.
    pub depth: Range<usize>,
    /// Columns of B and C.
    pub cols: Range<usize>,
    /// Entries of the batch.
    pub batch: Range<usize>,
}

/// What a product will run as on a device: its canonical form, its panels, the launches of
/// its largest block, and how often each entry of C is rounded on the way.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// The product as given.
    #[serde(skip)]
    pub problem: Problem,
    /// What runs it.
    pub plan: Plan,
    /// The product as the kernels see it (C row-major or strided; [`Problem::canonical`]).
    #[serde(skip)]
    pub canonical: Problem,
    /// Whether A and B swapped places in `canonical` (Cᵀ = Bᵀ·Aᵀ).
    pub swapped: bool,
    /// The blocks.
    pub panels: Panels,
    /// The launches of the first (largest) block.
    pub launches: Launches,
    /// Passes over K that sum each entry of C: one per slab (in panels and within a block),
    /// each continuing the sum in the accumulator's type; C is rounded to its type once.
    pub passes: usize,
}

impl Panels {
    /// Panels for `problem` (canonical) on `device`: the whole product where its buffers fit
    /// one binding each (and 32-bit indexing) and the device's memory together; else blocks,
    /// halved along the dimension that matters (the batch first, since it costs nothing; then
    /// M or N before K, since each slab of K is one more pass over C's partial sums) until every block's buffers fit
    /// a binding and half of the device's memory (room to allocate the next block before the
    /// last is freed).
    pub fn plan(problem: &Problem, device: &DeviceInfo) -> Result<Panels> {
        let limits = &device.limits;
        let binding = limits.max_binding_bytes.min(limits.max_buffer_bytes);
        let dims = [problem.m, problem.k, problem.n, problem.batch];
        let mut counts = [1usize; 4];
        loop {
            let whole = counts == [1; 4];
            let panels = Panels::with_counts(dims, counts);
            let block = if whole {
                *problem
            } else {
                panels.block_problem(problem, &panels.block(0, 0, 0, 0), true)?
            };
            let summed = panels.summed(&block);
            let bytes = device_bytes(&summed, device);
            let spans = [block.a_len(), block.b_len(), block.c_len()];
            let mut over: [bool; 3] =
                std::array::from_fn(|i| bytes[i] as u64 > binding || spans[i] > u32::MAX as usize);
            // Beside a C narrower than the accumulator, a K that may take several launches
            // sums in partials of the accumulator's type (Launches::uses_partials): a buffer
            // of C's size in f32, cut as C is.
            let narrow = crate::kernels::stored_output(summed.precision, !device.types.bf16)
                != summed.precision.accumulate;
            let partials = if narrow && summed.k > crate::plan::LOOP_TRIP_LIMIT as usize {
                (summed.m as u128)
                    * (summed.n as u128)
                    * (summed.batch as u128)
                    * summed.precision.accumulate.size_bytes() as u128
            } else {
                0
            };
            over[2] |= partials > binding as u128;
            let total = bytes.iter().map(|&b| b as u128).sum::<u128>() + partials;
            let memory = limits
                .memory_bytes
                .map(|m| if whole { m } else { m / 2 } as u128);
            let over_memory = memory.is_some_and(|m| total > m);
            if !over.contains(&true) && !over_memory {
                return Ok(panels);
            }
            let [m, k, n, batch] = [panels.rows, panels.depth, panels.cols, panels.batch];
            let split = if batch > 1 {
                3
            } else if over[2] {
                if m >= n {
                    0
                } else {
                    2
                }
            } else if over[0] {
                if m >= k {
                    0
                } else {
                    1
                }
            } else if over[1] {
                if n >= k {
                    2
                } else {
                    1
                }
            } else {
                // Memory alone: the longest side.
                [(m, 0), (n, 2), (k, 1)]
                    .into_iter()
                    .max()
                    .map_or(0, |(_, i)| i)
            };
            let sizes = [m, k, n, batch];
            if sizes[split] == 1 {
                let (m, k, n) = (problem.m, problem.k, problem.n);
                return Err(Error::DeviceLimit {
                    what: format!("the smallest block of problem {m}×{k}×{n}"),
                    needed: format_bytes(total.min(u64::MAX as u128) as u64),
                    limit: format!(
                        "{} of device memory",
                        format_bytes(limits.memory_bytes.unwrap_or(0))
                    ),
                    device: device.name.clone(),
                });
            }
            counts[split] = (counts[split] * 2).min(dims[split]);
        }
    }

    fn with_counts(dims: [usize; 4], counts: [usize; 4]) -> Panels {
        // Even blocks: the counts a size gives, from the size the counts give.
        let sizes: [usize; 4] = std::array::from_fn(|i| dims[i].div_ceil(counts[i]));
        Panels {
            rows: sizes[0],
            depth: sizes[1],
            cols: sizes[2],
            batch: sizes[3],
            counts: std::array::from_fn(|i| dims[i].div_ceil(sizes[i])),
        }
    }

    /// Whether the product is one block (it runs on its views, with no copy).
    pub fn is_whole(&self) -> bool {
        self.counts == [1; 4]
    }

    /// Blocks in all.
    pub fn count(&self) -> usize {
        self.counts.iter().product()
    }

    fn block(&self, i: usize, s: usize, j: usize, b: usize) -> Block {
        let range = |index: usize, size: usize| index * size..(index + 1) * size;
        Block {
            rows: range(i, self.rows),
            depth: range(s, self.depth),
            cols: range(j, self.cols),
            batch: range(b, self.batch),
        }
    }

    /// The blocks of `problem`, each clipped to it: for each chunk of the batch, row panel and
    /// column panel, its slabs of K in order (the first starts C's sum, the others continue it).
    pub fn blocks(&self, problem: &Problem) -> impl Iterator<Item = Block> + '_ {
        let [cm, ck, cn, cb] = self.counts;
        let clip = |r: Range<usize>, len: usize| r.start..r.end.min(len);
        let (m, k, n, batch) = (problem.m, problem.k, problem.n, problem.batch);
        (0..cb).flat_map(move |b| {
            (0..cm).flat_map(move |i| {
                (0..cn).flat_map(move |j| {
                    (0..ck).map(move |s| {
                        let block = self.block(i, s, j, b);
                        Block {
                            rows: clip(block.rows, m),
                            depth: clip(block.depth, k),
                            cols: clip(block.cols, n),
                            batch: clip(block.batch, batch),
                        }
                    })
                })
            })
        })
    }

    /// `problem` as its blocks compute it: where slabs of K continue the sum in C's blocks and
    /// C's type is narrower than the accumulator, with C in the accumulator's type (rounded to
    /// its own once, after the last slab), so that no partial sum is rounded to C's type.
    pub fn summed(&self, problem: &Problem) -> Problem {
        let mut summed = *problem;
        if self.counts[1] > 1 {
            summed.precision.output = problem.precision.accumulate;
        }
        summed
    }

    /// The product one block computes, on dense buffers of its own (each operand keeps its
    /// orientation, so the kernel walks it the same way; a broadcast operand stays one
    /// matrix). The first slab of K has `problem`'s β; later ones continue the sum (β = 1).
    pub fn block_problem(&self, problem: &Problem, block: &Block, first: bool) -> Result<Problem> {
        let (m, k, n, batch) = (
            block.rows.len(),
            block.depth.len(),
            block.cols.len(),
            block.batch.len(),
        );
        let dense = |view: &MatrixDesc, rows: usize, cols: usize| {
            let desc = if view.layout() == Layout::ColMajor {
                MatrixDesc::col_major(rows, cols)
            } else {
                MatrixDesc::row_major(rows, cols)
            };
            if view.batch_stride == 0 {
                desc.broadcast()
            } else {
                desc
            }
        };
        Problem::general(
            (m, k, n, batch),
            dense(&problem.a, m, k),
            dense(&problem.b, k, n),
            MatrixDesc::row_major(m, n),
            (problem.alpha, if first { problem.beta } else { 1.0 }),
            problem.precision,
        )
    }
}

impl Schedule {
    /// Plans `problem` with `plan` on `device`: canonical form, panels, and the checks of the
    /// largest block's launches.
    pub fn new(problem: &Problem, plan: &Plan, device: &DeviceInfo) -> Result<Schedule> {
        let (canonical, swapped) = problem.canonical();
        let panels = Panels::plan(&canonical, device)?;
        let mut blocks = panels.blocks(&canonical);
        let first = blocks.next().expect("a product has a block");
        let launches = if panels.is_whole() {
            plan.check(&canonical, device)?
        } else {
            plan.check(&panels.block_problem(&canonical, &first, true)?, device)?
        };
        // Each slab of K (a panel's, and a launch's within it) is one pass.
        let slabs_of = |depth: usize| {
            let step = plan.k_per_launch(&canonical) as usize;
            depth.div_ceil(step.max(1))
        };
        let passes = std::iter::once(first)
            .chain(blocks)
            .take(panels.counts[1])
            .map(|b| slabs_of(b.depth.len()))
            .sum();
        Ok(Schedule {
            problem: *problem,
            plan: *plan,
            canonical,
            swapped,
            panels,
            launches,
            passes,
        })
    }
}

/// The elements of `view` (over `src`) in `block`'s rows and columns of `view`, as laid out
/// by `dense` (a dense desc of the block, broadcast when `view` is).
pub(crate) fn gather(
    src: HostSlice<'_>,
    view: &MatrixDesc,
    (batch, rows, cols): (Range<usize>, Range<usize>, Range<usize>),
    dense: &MatrixDesc,
    what: &str,
) -> Result<HostData> {
    fn typed<T: Element>(
        src: &[T],
        view: &MatrixDesc,
        (batch, rows, cols): (Range<usize>, Range<usize>, Range<usize>),
        dense: &MatrixDesc,
        what: &str,
    ) -> Result<HostData> {
        let entries = if dense.batch_stride == 0 {
            1
        } else {
            batch.len()
        };
        let len = dense.span(entries).expect("a block fits");
        let mut out = host::with_capacity(len, what)?;
        out.resize(len, src[0]);
        for_each_line(
            dense,
            entries,
            rows.len(),
            cols.len(),
            |b, i, j, count, along_rows| {
                let at = view.index(batch.start + b, rows.start + i, cols.start + j);
                let to = dense.index(b, i, j);
                copy_line(src, at, view, &mut out, to, dense, count, along_rows);
            },
        );
        Ok(HostData::from(out))
    }
    crate::with_slice!(src, v => typed(v, view, (batch, rows, cols), dense, what))
}

/// Writes the dense `block` (laid out as `dense`) into `view` of `dst` at the block's rows
/// and columns.
pub(crate) fn scatter(
    dst: &mut HostData,
    view: &MatrixDesc,
    (batch, rows, cols): (Range<usize>, Range<usize>, Range<usize>),
    block: &HostData,
    dense: &MatrixDesc,
) {
    fn typed<T: Element>(
        dst: &mut [T],
        view: &MatrixDesc,
        (batch, rows, cols): (Range<usize>, Range<usize>, Range<usize>),
        block: &HostData,
        dense: &MatrixDesc,
    ) {
        let src = T::slice(block).expect("C's block has C's type");
        for_each_line(
            dense,
            batch.len(),
            rows.len(),
            cols.len(),
            |b, i, j, count, along_rows| {
                let from = dense.index(b, i, j);
                let at = view.index(batch.start + b, rows.start + i, cols.start + j);
                copy_line(src, from, dense, dst, at, view, count, along_rows);
            },
        );
    }
    crate::with_data!(dst, v => typed(v, view, (batch, rows, cols), block, dense))
}

/// Calls `line(b, i, j, count, along_rows)` for each line of a `rows`×`cols` block: along a
/// row (j..j+count) where `dense` is row-major, else down a column.
fn for_each_line(
    dense: &MatrixDesc,
    entries: usize,
    rows: usize,
    cols: usize,
    mut line: impl FnMut(usize, usize, usize, usize, bool),
) {
    let along_rows = dense.layout() != Layout::ColMajor;
    for b in 0..entries {
        if along_rows {
            (0..rows).for_each(|i| line(b, i, 0, cols, true));
        } else {
            (0..cols).for_each(|j| line(b, 0, j, rows, false));
        }
    }
}

/// Copies `count` elements of a line (along a row, or down a column), a slice copy where
/// both sides are contiguous along it.
#[allow(clippy::too_many_arguments)]
fn copy_line<T: Copy>(
    src: &[T],
    from: usize,
    src_view: &MatrixDesc,
    dst: &mut [T],
    to: usize,
    dst_view: &MatrixDesc,
    count: usize,
    along_rows: bool,
) {
    let step = |v: &MatrixDesc| {
        if along_rows {
            v.col_stride
        } else {
            v.row_stride
        }
    };
    let (s, d) = (step(src_view), step(dst_view));
    if s == 1 && d == 1 {
        dst[to..to + count].copy_from_slice(&src[from..from + count]);
    } else {
        for x in 0..count {
            dst[to + x * d] = src[from + x * s];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{DType, Precision, Shape};

    fn lavapipe() -> DeviceInfo {
        crate::device::test_lavapipe()
    }

    fn covers_once(panels: &Panels, p: &Problem) {
        let mut hits = vec![0u8; p.batch * p.m * p.n * p.k];
        for block in panels.blocks(p) {
            for b in block.batch.clone() {
                for i in block.rows.clone() {
                    for j in block.cols.clone() {
                        for s in block.depth.clone() {
                            hits[((b * p.m + i) * p.n + j) * p.k + s] += 1;
                        }
                    }
                }
            }
        }
        assert!(hits.iter().all(|&h| h == 1), "{panels:?}");
    }

    #[test]
    fn a_product_that_fits_is_one_block() {
        let p = Problem::new(5792, 5792, 5792).unwrap();
        let panels = Panels::plan(&p, &lavapipe()).unwrap();
        assert!(panels.is_whole());
        assert_eq!(panels.count(), 1);
    }

    #[test]
    fn a_tall_a_over_the_binding_is_cut_into_row_panels() {
        // A: 12000×3000 f32 = 137 MiB > 128 MiB.
        let p = Problem::new(12000, 3000, 16).unwrap();
        let panels = Panels::plan(&p, &lavapipe()).unwrap();
        assert_eq!(panels.counts, [2, 1, 1, 1]);
        assert_eq!(panels.rows, 6000);
        let device = lavapipe();
        for block in panels.blocks(&p) {
            let sub = panels.block_problem(&p, &block, true).unwrap();
            assert!(device_bytes(&sub, &device)
                .iter()
                .all(|&b| b as u64 <= device.limits.max_binding_bytes));
        }
    }

    #[test]
    fn a_long_k_is_cut_into_slabs_each_one_more_pass() {
        // A 16 × 3·10⁷ f32: a single row panel is all of M, so K is cut.
        let p = Problem::new(16, 30_000_000, 2).unwrap();
        let device = lavapipe();
        let panels = Panels::plan(&p, &device).unwrap();
        assert_eq!(panels.counts[0], 1);
        assert!(panels.counts[1] >= 4, "{panels:?}");
        let plan = Plan::new("tiled".parse().unwrap());
        let schedule = Schedule::new(&p, &plan, &device).unwrap();
        assert!(schedule.passes >= panels.counts[1], "{schedule:?}");
        let later = panels
            .blocks(&p)
            .nth(1)
            .map(|b| panels.block_problem(&p, &b, false).unwrap())
            .unwrap();
        assert_eq!(later.beta, 1.0);
        // In f16, C's blocks hold the partial sums in f32 (and count so against the binding).
        let half = Shape {
            precision: Precision::of(DType::F16),
            ..Shape::new(16, 30_000_000, 2)
        }
        .problem()
        .unwrap();
        let panels = Panels::plan(&half, &device).unwrap();
        assert!(panels.counts[1] > 1, "{panels:?}");
        assert_eq!(panels.summed(&half).precision.output, DType::F32);
        assert_eq!(panels.summed(&half).precision.input, DType::F16);
        let whole = Panels::plan(&Problem::new(16, 64, 2).unwrap(), &device).unwrap();
        assert_eq!(whole.summed(&half).precision.output, DType::F16);
    }

    #[test]
    fn partial_sums_beside_a_narrow_c_count_against_the_binding() {
        // f16, K past one launch: C (1.25 GB) fits a 2 GiB binding, its f32 partials (2.5 GB)
        // do not, so C is cut; A (1.65 GB) and B fit.
        let mut device = lavapipe();
        device.limits.max_binding_bytes = (1 << 31) - 1;
        let p = Shape {
            precision: Precision::of(DType::F16),
            ..Shape::new(25_000, 33_000, 25_000)
        }
        .problem()
        .unwrap();
        let panels = Panels::plan(&p, &device).unwrap();
        assert_eq!(panels.counts[1], 1, "{panels:?}");
        assert!(panels.counts[0] * panels.counts[2] > 1, "{panels:?}");
        let plan = Plan::new("naive".parse().unwrap());
        Schedule::new(&p, &plan, &device).unwrap();
    }

    #[test]
    fn blocks_cover_every_term_once() {
        let mut device = lavapipe();
        // Tiny bindings force cuts along every axis.
        device.limits.max_binding_bytes = 4 * 60;
        for (shape, broadcast) in [((13, 17, 11, 3), false), ((9, 40, 7, 5), true)] {
            let (m, k, n, batch) = shape;
            let p = Shape {
                batch,
                trans_b: true,
                broadcast_a: broadcast,
                ..Shape::new(m, k, n)
            }
            .problem()
            .unwrap();
            let panels = Panels::plan(&p, &device).unwrap();
            assert!(panels.count() > 1);
            covers_once(&panels, &p);
            for block in panels.blocks(&p) {
                let sub = panels.block_problem(&p, &block, true).unwrap();
                assert_eq!(sub.b.layout(), Layout::ColMajor, "B keeps its orientation");
                assert_eq!(sub.a.batch_stride == 0, broadcast);
                assert!(device_bytes(&sub, &device)
                    .iter()
                    .all(|&b| b as u64 <= device.limits.max_binding_bytes));
            }
        }
    }

    #[test]
    fn products_beyond_memory_stream_through_blocks_and_a_block_too_big_is_refused() {
        let mut device = lavapipe();
        device.limits.memory_bytes = Some(64 << 20);
        let p = Problem::new(4096, 4096, 4096).unwrap();
        let panels = Panels::plan(&p, &device).unwrap();
        assert!(panels.count() > 1);
        device.limits.memory_bytes = Some(8);
        let err = Panels::plan(&p, &device).unwrap_err().to_string();
        assert!(err.contains("device memory"), "{err}");
    }

    #[test]
    fn gather_and_scatter_move_a_block_between_a_view_and_a_dense_buffer() {
        // A 5×4 view, column-major with padding, of a buffer of integers.
        let view = MatrixDesc {
            row_stride: 1,
            col_stride: 7,
            offset: 2,
            ..MatrixDesc::col_major(5, 4)
        };
        let src = HostData::from_f64(DType::F32, (0..40).map(f64::from));
        let dense = MatrixDesc::col_major(3, 2);
        let got = gather(src.lend(), &view, (0..1, 1..4, 2..4), &dense, "test").unwrap();
        for i in 0..3 {
            for j in 0..2 {
                assert_eq!(
                    got.get(dense.index(0, i, j)),
                    src.get(view.index(0, i + 1, j + 2))
                );
            }
        }
        let mut dst = HostData::from_f64(DType::F32, std::iter::repeat_n(-1.0, 40));
        scatter(&mut dst, &view, (0..1, 1..4, 2..4), &got, &dense);
        let written = (0..40).filter(|&x| dst.get(x) != -1.0).count();
        assert_eq!(written, 6);
        assert_eq!(dst.get(view.index(0, 3, 3)), src.get(view.index(0, 3, 3)));
    }
}
