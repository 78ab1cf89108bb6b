//! The CPU path: the `gemm` crate (AVX-512/AVX2/NEON picked at run time, all cores), over the
//! problem's strided views as they are.

use std::sync::{Arc, Mutex};

use gemm::Parallelism;

use crate::error::{Error, Result};
use crate::host;
use crate::problem::{DType, MatrixDesc, Problem};
use crate::types::element::{Element, HostData};

/// The crate and version that computes CPU products, for reports.
pub const CPU_GEMM: &str = "gemm 0.19";

/// Threads the CPU path uses (gemm runs on the path's own rayon pool, one thread per core).
pub fn threads() -> usize {
    // Read once, as rayon reads it once: available_parallelism reads the cgroup's files, tens
    // of microseconds that a small product (a BLAS call) would pay every time.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// The CPU path's thread pool, built by the first product of each process: a child forked
/// after the parent's products gets its own (the parent's pool has no threads there, and a
/// job sent to it would wait forever).
fn pool() -> Result<Arc<rayon::ThreadPool>> {
    static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let current = || {
        let pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.as_ref()
            .filter(|(owner, _)| *owner == pid)
            .map(|(_, built)| built.clone())
    };
    if let Some(built) = current() {
        return Ok(built);
    }
    // Built outside the lock, so that a fork while threads start leaves it free in the child.
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .thread_name(|i| format!("tilemm-cpu-{i}"))
        .build()
        .map_err(|e| Error::Threads(e.to_string()))?;
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match &*pool {
        // Another thread built one meanwhile: its pool serves, this one is dropped.
        Some((owner, built)) if *owner == pid => Ok(built.clone()),
        _ => {
            // The parent's pool, in a child: its threads do not exist here, so it is never
            // dropped (dropping it would signal threads that are not there).
            if let Some(inherited) = pool.take() {
                std::mem::forget(inherited);
            }
            let built = Arc::new(built);
            *pool = Some((pid, built.clone()));
            Ok(built)
        }
    }
}

/// The CPU path's speed in f32, GFLOPS, measured once per process (the better of two 256³
/// products on its threads): what the cost model weighs a device's transfers against.
pub fn measured_gflops() -> Result<f64> {
    static MEASURED: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    if let Some(&gflops) = MEASURED.get() {
        return Ok(gflops);
    }
    let problem = Problem::new(256, 256, 256)?;
    let ones = HostData::F32(vec![1.0; 256 * 256]);
    let mut c = HostData::F32(vec![0.0; 256 * 256]);
    let mut best = f64::INFINITY;
    for _ in 0..2 {
        let start = std::time::Instant::now();
        gemm(&problem, &ones, &ones, &mut c)?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    let gflops = problem.flops() / best.max(1e-9) / 1e9;
    Ok(*MEASURED.get_or_init(|| gflops))
}

/// `work` on the CPU path's thread pool (its own, per process: see [`pool`]).
pub(crate) fn on_pool<R: Send>(work: impl FnOnce() -> R + Send) -> Result<R> {
    Ok(pool()?.install(work))
}

/// Elements of K one call of the `gemm` crate sums: C's sum runs through fixed slabs of K in
/// order, whatever the shape, so an entry's rounding depends on K alone. (The crate cuts K
/// into blocks that depend on M and N above 512, and sums a slab of at most 512 in one pass.)
pub const K_SLAB: usize = 512;

/// The least rows and columns of one call: the crate sums matrix-vector products (M or N of 1)
/// in another order, so thinner blocks are computed in padded copies. So are blocks of at most
/// 256 entries whose A runs along K and B down K (the crate's dot-product kernel).
const MIN_SIDE: usize = 2;

/// The most entries of C a block may have to meet the crate's dot-product kernel.
const DOT_KERNEL_ENTRIES: usize = 256;

/// The least K of one call: the crate sums K ≤ 2 with α folded into one operand, whose side
/// depends on C's layout, so shorter slabs go through copies padded with zero terms.
const MIN_DEPTH: usize = 3;

/// About the floating-point operations of one piece of a product, between which an
/// interruption is noticed: about 10 ms on 2 cores. Smaller pieces pack B's slab again for
/// each panel of rows (2²⁸ cost 10% at 2048³ against one gemm call).
const PIECE_FLOPS: usize = 1 << 31;

/// C = α·A·B + β·C for `problem` on the CPU, all cores: tilemm's CPU backend. `c` holds C's
/// buffer (its initial contents are read only when β ≠ 0).
///
/// Reproducible: C[i, j] depends on row i of A, column j of B, K, α, β and C₀[i, j] only, not
/// on M, N, the batch, where the call's block starts or the number of threads (fixed slabs of
/// K, summed in order; the crate's one summation order within each).
///
/// f32 and f64 run on the views as they are, strides and all. For f16 and bf16 the operands are
/// widened to f32 first (a copy of each): the gemm crate's f16 kernel rounds C to f16 between
/// its K blocks, which is not the f32 accumulation the precision promises, and it has no bf16.
pub fn gemm(problem: &Problem, a: &HostData, b: &HostData, c: &mut HostData) -> Result<()> {
    gemm_until(problem, a, b, c, &|| false)
}

/// [`gemm()`], stopped with [`Error::Interrupted`] at the first piece (a slab of K over a
/// panel of rows: about 2³¹ operations) after `stop` returns true; C is then partly written.
pub fn gemm_until(
    problem: &Problem,
    a: &HostData,
    b: &HostData,
    c: &mut HostData,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let p = problem.precision;
    // tf32 inputs are f32 data, multiplied here in f32: more precisely than asked.
    for (what, data, dtype) in [("A", a, p.input.storage()), ("B", b, p.input.storage())] {
        if data.dtype() != dtype {
            return Err(wrong_type(what, data.dtype(), dtype));
        }
    }
    if c.dtype() != p.output {
        return Err(wrong_type("C", c.dtype(), p.output));
    }
    problem.check_operands(a.len(), b.len())?;
    problem.check_output(c.len())?;
    // SAFETY: the buffers hold every element of the problem's validated views (checked just
    // above), and `c` is borrowed mutably, so no one else reads or writes it meanwhile.
    unsafe {
        match (a, b, c) {
            (HostData::F32(a), HostData::F32(b), HostData::F32(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            (HostData::F64(a), HostData::F64(b), HostData::F64(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            (HostData::F16(a), HostData::F16(b), HostData::F16(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            (HostData::F16(a), HostData::F16(b), HostData::F32(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            (HostData::BF16(a), HostData::BF16(b), HostData::BF16(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            (HostData::BF16(a), HostData::BF16(b), HostData::F32(c)) => {
                gemm_in_place(problem, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), stop)
            }
            _ => unreachable!("types checked against the precision above"),
        }
    }
}

/// The three operands' first elements, handed to the pool's threads.
#[derive(Clone, Copy)]
struct Operands<I, O> {
    a: *const I,
    b: *const I,
    c: *mut O,
}

impl<I, O> Operands<I, O> {
    /// The pointers (a method, so that a closure captures the whole value, which is Send, not
    /// its fields).
    fn get(self) -> (*const I, *const I, *mut O) {
        (self.a, self.b, self.c)
    }
}

// SAFETY: the pointers are read (A, B) and written (C, each entry by one thread) under the
// contract of gemm_in_place, whose caller keeps them valid until it returns.
unsafe impl<I, O> Send for Operands<I, O> {}
unsafe impl<I, O> Sync for Operands<I, O> {}

/// [`gemm_until`] on memory where it lies: A, B and C are the views `problem` describes from
/// `a`, `b` and `c`, the caller's own arrays (any non-negative strides, zero included for A
/// and B), read and written in place: no staging, no copy of C (f16 and bf16 are widened, as
/// [`gemm()`] says).
///
/// # Safety
/// Every element of `problem`'s views of A and B from `a` and `b` is readable, every element of
/// its view of C from `c` is writable, and until this returns no one else writes them or reads
/// C. (The problem's validation guarantees that C's entries are distinct.)
pub unsafe fn gemm_in_place<I: Element, O: Element>(
    problem: &Problem,
    a: *const I,
    b: *const I,
    c: *mut O,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let p = problem.precision;
    if I::DTYPE != p.input.storage() {
        return Err(wrong_type("A and B", I::DTYPE, p.input.storage()));
    }
    if O::DTYPE != p.output {
        return Err(wrong_type("C", O::DTYPE, p.output));
    }
    let at = Operands { a, b, c };
    let compute = |parallel: bool| {
        let (a, b, c) = at.get();
        // SAFETY: the caller's contract; the casts change nothing where the types are equal.
        unsafe {
            match (I::DTYPE, O::DTYPE) {
                (DType::F32, DType::F32) => {
                    native::<f32>(problem, a.cast(), b.cast(), c.cast(), stop, parallel)
                }
                (DType::F64, DType::F64) => {
                    native::<f64>(problem, a.cast(), b.cast(), c.cast(), stop, parallel)
                }
                _ => widened(problem, a, b, c, stop, parallel),
            }
        }
    };
    // A product under the crate's threading threshold (multiply-adds of one call), which the
    // crate would run on one thread of the pool anyway, runs on the calling thread: handing
    // it over costs more than such a product (2× at 64³ on 2 cores; a BLAS program's many
    // small calls). The threads split rows and columns, never K, so the bits are the same
    // either way.
    let fmas = [problem.n, problem.k, problem.batch]
        .iter()
        .fold(problem.m, |x, &y| x.saturating_mul(y));
    if fmas < gemm::get_threading_threshold() {
        return compute(false);
    }
    pool()?.install(|| compute(true))
}

/// C = α·A·B + β·C into a new buffer: zeros, or a copy of `c0` when β ≠ 0.
pub fn product(
    problem: &Problem,
    a: &HostData,
    b: &HostData,
    c0: Option<&HostData>,
) -> Result<HostData> {
    product_until(problem, a, b, c0, &|| false)
}

/// [`product`], stopped as [`gemm_until`] stops.
pub fn product_until(
    problem: &Problem,
    a: &HostData,
    b: &HostData,
    c0: Option<&HostData>,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<HostData> {
    let mut c = match c0 {
        Some(c0) if problem.reads_c() => host::copy_of(c0, "C on the CPU")?,
        _ => host::zeros_of(problem.precision.output, problem.c_len(), "C on the CPU")?,
    };
    gemm_until(problem, a, b, &mut c, stop)?;
    Ok(c)
}

fn wrong_type(what: &'static str, got: DType, expected: DType) -> Error {
    Error::Precision(format!(
        "{what} holds {got} elements but the problem computes {expected}"
    ))
}

/// A block of a strided matrix: its first element and its strides (row, column).
#[derive(Clone, Copy)]
struct Strided<T> {
    at: *const T,
    row: isize,
    col: isize,
}

/// The batch as the rows of one product, where that reads and writes the same elements: B one
/// matrix for every entry, and each entry of A and of C beginning where the rows of the one
/// before would go on (numpy's stacked `x @ w`): the rows (batch·M) and A's and C's views of
/// them, or `None` where the batch stays entries.
/// On this route an entry depends on its row, column and K alone, so the bits are the same;
/// one tall product packs B once and splits its rows over the threads, where a loop of small
/// ones did neither.
pub(crate) fn batch_as_rows(problem: &Problem) -> Option<(usize, MatrixDesc, MatrixDesc)> {
    let (m, batch) = (problem.m, problem.batch);
    // A matrix of one row is stepped along only by its batch stride.
    let continues = |d: &MatrixDesc| m == 1 || m.checked_mul(d.row_stride) == Some(d.batch_stride);
    // Blocks of one column or of K under 3 go through padded copies, column by column: a
    // block of the whole stack's rows would be a copy as tall as A (3× slower at 50 × 1000
    // rows than the entries one by one), so such a batch stays entries.
    let whole_blocks = problem.n >= MIN_SIDE && problem.k >= MIN_DEPTH;
    if batch > 1
        && whole_blocks
        && problem.b.batch_stride == 0
        && continues(&problem.a)
        && continues(&problem.c)
    {
        let rows = |d: &MatrixDesc| MatrixDesc {
            rows: m * batch,
            row_stride: if m == 1 { d.batch_stride } else { d.row_stride },
            ..*d
        };
        return Some((m * batch, rows(&problem.a), rows(&problem.c)));
    }
    None
}

/// Per batch entry, panel of rows and slab of K (in order), one call of the crate on the
/// strided views; blocks the crate would sum in another order go through padded copies. The
/// batch is folded into the rows where it can be ([`batch_as_rows`]); entries too small for
/// the crate's threads run side by side on the pool, each on one thread.
///
/// # Safety
/// As [`gemm_in_place`].
unsafe fn native<T: Element + gemm_element::GemmElement>(
    problem: &Problem,
    a: *const T,
    b: *const T,
    c: *mut T,
    stop: &(dyn Fn() -> bool + Sync),
    parallel: bool,
) -> Result<()> {
    let (batch, m, da, dc) = match batch_as_rows(problem) {
        Some((rows, da, dc)) => (1, rows, da, dc),
        None => (problem.batch, problem.m, problem.a, problem.c),
    };
    let (k, n) = (problem.k, problem.n);
    let (alpha, beta) = (T::from_f64(problem.alpha), T::from_f64(problem.beta));
    let reads_c = problem.reads_c();
    let stride = |s: usize| s as isize;
    let db = problem.b;
    // Rows per piece: about PIECE_FLOPS per slab, at least 256 (B's slab is packed again for
    // each panel).
    let rows = (PIECE_FLOPS / (2 * K_SLAB * n).max(1)).clamp(256, m.max(256));
    let at = Operands { a, b, c };
    let entry = |batch: usize, scratch: &mut Scratch, parallelism: Parallelism| -> Result<()> {
        let (a, b, c) = at.get();
        for r0 in (0..m).step_by(rows) {
            let r = rows.min(m - r0);
            for k0 in (0..k).step_by(K_SLAB) {
                if stop() {
                    return Err(Error::Interrupted);
                }
                let d = K_SLAB.min(k - k0);
                // SAFETY: these blocks' first elements are elements of the views (the
                // caller's contract).
                let (lhs, rhs, dst) = unsafe {
                    (
                        Strided {
                            at: a.add(da.index(batch, r0, k0)),
                            row: stride(da.row_stride),
                            col: stride(da.col_stride),
                        },
                        Strided {
                            at: b.add(db.index(batch, k0, 0)),
                            row: stride(db.row_stride),
                            col: stride(db.col_stride),
                        },
                        Strided {
                            at: c.add(dc.index(batch, r0, 0)).cast_const(),
                            row: stride(dc.row_stride),
                            col: stride(dc.col_stride),
                        },
                    )
                };
                // The first slab scales C₀ by β (or ignores it); later ones add to the sum.
                let (read_dst, scale) = if k0 == 0 {
                    (reads_c, beta)
                } else {
                    (true, T::from_f64(1.0))
                };
                let call = Call {
                    m: r,
                    n,
                    k: d,
                    lhs,
                    rhs,
                    dst: dst.at.cast_mut(),
                    dst_row: dst.row,
                    dst_col: dst.col,
                    read_dst,
                    scale,
                    alpha,
                    parallelism,
                };
                let dot_kernel =
                    r * n <= DOT_KERNEL_ENTRIES && call.lhs.col == 1 && call.rhs.row == 1;
                if r >= MIN_SIDE && n >= MIN_SIDE && d >= MIN_DEPTH && !dot_kernel {
                    // SAFETY: as above; C's entries are distinct (validated).
                    unsafe { call.run() };
                } else {
                    scratch.padded(call)?;
                }
            }
        }
        Ok(())
    };
    let threshold = gemm::get_threading_threshold();
    let entry_fmas = m.saturating_mul(n).saturating_mul(k);
    if parallel && batch > 1 && entry_fmas < threshold {
        // Entries the crate would run on one thread each: side by side, in runs of about a
        // quarter of its threshold, so that a task is worth handing over. Each entry is
        // computed as alone, so the bits are the same.
        use rayon::prelude::*;
        let run = (threshold / 4 / entry_fmas.max(1)).max(1);
        return (0..batch)
            .into_par_iter()
            .with_min_len(run)
            .try_for_each_init(Scratch::default, |scratch, e| {
                entry(e, scratch, Parallelism::None)
            });
    }
    let parallelism = if parallel {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    let mut scratch = Scratch::default();
    for e in 0..batch {
        entry(e, &mut scratch, parallelism)?;
    }
    Ok(())
}

/// One call of the crate: dst (m×n) = scale·dst + alpha·lhs (m×k)·rhs (k×n), dst read only
/// when `read_dst`.
struct Call<T> {
    m: usize,
    n: usize,
    k: usize,
    lhs: Strided<T>,
    rhs: Strided<T>,
    dst: *mut T,
    dst_row: isize,
    dst_col: isize,
    read_dst: bool,
    scale: T,
    alpha: T,
    parallelism: Parallelism,
}

impl<T: Element + gemm_element::GemmElement> Call<T> {
    /// # Safety
    /// Every element of the three blocks is inside its buffer, and dst's are distinct.
    unsafe fn run(&self) {
        // gemm computes dst = α'·dst + β'·lhs·rhs: α' is the scale of C and β' our α.
        gemm::gemm(
            self.m,
            self.n,
            self.k,
            self.dst,
            self.dst_col,
            self.dst_row,
            self.read_dst,
            self.lhs.at,
            self.lhs.col,
            self.lhs.row,
            self.rhs.at,
            self.rhs.col,
            self.rhs.row,
            self.scale,
            self.alpha,
            false,
            false,
            false,
            self.parallelism,
        );
    }
}

/// Buffers for blocks computed in padded copies, reused across a product's pieces.
#[derive(Default)]
struct Scratch {
    words: Vec<f64>,
}

impl Scratch {
    /// `call` through copies padded with zeros to at least [`MIN_SIDE`] rows and columns (lhs
    /// column-major, so never the dot-product kernel's layout; rhs and dst row-major), so that
    /// the crate takes the same path, and sums in the same order, as for a larger block.
    fn padded<T: Element + gemm_element::GemmElement>(&mut self, call: Call<T>) -> Result<()> {
        let (m, n, k) = (
            call.m.max(MIN_SIDE),
            call.n.max(MIN_SIDE),
            call.k.max(MIN_DEPTH),
        );
        let len = m * k + k * n + m * n;
        let words = (len * size_of::<T>()).div_ceil(8);
        if self.words.len() < words {
            self.words = host::zeros(words, "a padded block on the CPU")?;
        }
        let all: &mut [T] = bytemuck::cast_slice_mut(&mut self.words[..]);
        let (lhs, rest) = all.split_at_mut(m * k);
        let (rhs, rest) = rest.split_at_mut(k * n);
        let dst = &mut rest[..m * n];
        let zero = T::from_f64(0.0);
        // SAFETY: the caller's blocks are inside their buffers (native's contract).
        unsafe {
            for i in 0..m {
                for l in 0..k {
                    lhs[i + l * m] = if i < call.m && l < call.k {
                        *call
                            .lhs
                            .at
                            .offset(i as isize * call.lhs.row + l as isize * call.lhs.col)
                    } else {
                        zero
                    };
                }
            }
            for l in 0..k {
                for j in 0..n {
                    rhs[l * n + j] = if j < call.n && l < call.k {
                        *call
                            .rhs
                            .at
                            .offset(l as isize * call.rhs.row + j as isize * call.rhs.col)
                    } else {
                        zero
                    };
                }
            }
            let dst_at = |i: usize, j: usize| {
                call.dst
                    .offset(i as isize * call.dst_row + j as isize * call.dst_col)
            };
            for i in 0..m {
                for j in 0..n {
                    dst[i * n + j] = if call.read_dst && i < call.m && j < call.n {
                        *dst_at(i, j)
                    } else {
                        zero
                    };
                }
            }
            let padded = Call {
                m,
                n,
                k,
                lhs: Strided {
                    at: lhs.as_ptr(),
                    row: 1,
                    col: m as isize,
                },
                rhs: Strided {
                    at: rhs.as_ptr(),
                    row: n as isize,
                    col: 1,
                },
                dst: dst.as_mut_ptr(),
                dst_row: n as isize,
                dst_col: 1,
                read_dst: call.read_dst,
                ..call
            };
            padded.run();
            for i in 0..call.m {
                for j in 0..call.n {
                    *dst_at(i, j) = dst[i * n + j];
                }
            }
        }
        Ok(())
    }
}

/// Half-precision inputs: A, B (and C when read, unless it is f32) widened into dense f32
/// copies, computed in f32, and C rounded once to its type; an f32 C is written in place.
///
/// # Safety
/// As [`gemm_in_place`].
unsafe fn widened<I: Element, O: Element>(
    problem: &Problem,
    a: *const I,
    b: *const I,
    c: *mut O,
    stop: &(dyn Fn() -> bool + Sync),
    parallel: bool,
) -> Result<()> {
    let (m, k, n, batch) = (problem.m, problem.k, problem.n, problem.batch);
    let dense = |view: &MatrixDesc, rows, cols| {
        let desc = MatrixDesc::row_major(rows, cols);
        if view.batch_stride == 0 {
            desc.broadcast()
        } else {
            desc
        }
    };
    let (da, db) = (dense(&problem.a, m, k), dense(&problem.b, k, n));
    // SAFETY: the caller's contract covers the views' elements.
    let (a32, b32) = unsafe {
        (
            gathered_f32(a, &problem.a, batch, &da, "A widened to f32")?,
            gathered_f32(b, &problem.b, batch, &db, "B widened to f32")?,
        )
    };
    let wide = Problem {
        a: da,
        b: db,
        ..*problem
    };
    if O::DTYPE == DType::F32 {
        // SAFETY: O is f32; the caller's contract covers C.
        return unsafe { native(&wide, a32.as_ptr(), b32.as_ptr(), c.cast(), stop, parallel) };
    }
    let dc = dense(&problem.c, m, n);
    // SAFETY: as above.
    let mut c32 = if problem.reads_c() {
        unsafe { gathered_f32(c.cast_const(), &problem.c, batch, &dc, "C widened to f32")? }
    } else {
        host::zeros(dc.span(batch).expect("a dense C fits"), "C in f32")?
    };
    let wide = Problem { c: dc, ..wide };
    // SAFETY: the three dense buffers hold their descriptions' elements.
    unsafe {
        native(
            &wide,
            a32.as_ptr(),
            b32.as_ptr(),
            c32.as_mut_ptr(),
            stop,
            parallel,
        )?
    };
    for e in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let x = c32[dc.index(e, i, j)];
                // SAFETY: the caller's contract covers C's elements.
                unsafe { *c.add(problem.c.index(e, i, j)) = O::from_f64(f64::from(x)) };
            }
        }
    }
    Ok(())
}

/// The elements of `view` (from `at`) widened to f32, laid out as `dense`.
///
/// # Safety
/// Every element of `view`'s `batch` entries from `at` is readable.
unsafe fn gathered_f32<T: Element>(
    at: *const T,
    view: &MatrixDesc,
    batch: usize,
    dense: &MatrixDesc,
    what: &str,
) -> Result<Vec<f32>> {
    let entries = if dense.batch_stride == 0 { 1 } else { batch };
    let len = dense.span(entries).expect("a dense copy fits");
    let mut out: Vec<f32> = host::zeros(len, what)?;
    for e in 0..entries {
        for i in 0..view.rows {
            for j in 0..view.cols {
                // SAFETY: (e, i, j) is an element of the view.
                out[dense.index(e, i, j)] =
                    unsafe { (*at.add(view.index(e, i, j))).to_f64() } as f32;
            }
        }
    }
    Ok(out)
}

/// The element types the `gemm` crate computes natively.
mod gemm_element {
    /// f32 and f64.
    pub trait GemmElement: 'static {}
    impl GemmElement for f32 {}
    impl GemmElement for f64 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Precision, Shape};

    #[test]
    fn cpu_gemm_matches_a_hand_computed_product() {
        // [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154]
        let p = Problem::new(2, 3, 2).unwrap();
        let a = HostData::F32(vec![1., 2., 3., 4., 5., 6.]);
        let b = HostData::F32(vec![7., 8., 9., 10., 11., 12.]);
        let c = product(&p, &a, &b, None).unwrap();
        assert_eq!(c, HostData::F32(vec![58., 64., 139., 154.]));
    }

    #[test]
    fn transposes_batches_and_scalars_follow_the_views() {
        // A stored transposed (3×2), B broadcast over a batch of 2, C = 0.5·A·B + 2·C.
        let mut shape = Shape::new(2, 3, 2);
        shape.trans_a = true;
        shape.batch = 2;
        shape.broadcast_b = true;
        shape.alpha = 0.5;
        shape.beta = 2.0;
        shape.precision = Precision::of(DType::F64);
        let p = shape.problem().unwrap();
        // Batch 0: A = [1 2 3; 4 5 6]; batch 1: 2·A.
        let a = HostData::F64(vec![1., 4., 2., 5., 3., 6., 2., 8., 4., 10., 6., 12.]);
        let b = HostData::F64(vec![7., 8., 9., 10., 11., 12.]);
        let c0 = HostData::F64(vec![1.0; 8]);
        let c = product(&p, &a, &b, Some(&c0)).unwrap();
        let want = [58., 64., 139., 154., 116., 128., 278., 308.].map(|x| 0.5 * x + 2.0);
        assert_eq!(c, HostData::F64(want.to_vec()));
    }

    #[test]
    fn beta_zero_never_reads_c() {
        let mut shape = Shape::new(2, 2, 2);
        shape.precision = Precision::of(DType::F32);
        let p = shape.problem().unwrap();
        let a = HostData::F32(vec![1.0; 4]);
        let mut c = HostData::F32(vec![f32::NAN; 4]);
        gemm(&p, &a, &a, &mut c).unwrap();
        assert_eq!(c, HostData::F32(vec![2.0; 4]));
    }

    #[test]
    fn half_inputs_accumulate_in_f32_and_round_once() {
        // 4096 terms of 1 + 1: f16 accumulation would stop at 2048 (the next f16 is 2050... and
        // 2048 + 1 rounds back to 2048); f32 accumulation gets 4096 exactly.
        let p = Shape {
            precision: Precision::of(DType::F16),
            ..Shape::new(1, 4096, 1)
        }
        .problem()
        .unwrap();
        let ones = HostData::from_f64(DType::F16, std::iter::repeat_n(1.0, 4096));
        let c = product(&p, &ones, &ones, None).unwrap();
        assert_eq!(c.get(0), 4096.0);
    }

    /// [`native`] on whole buffers.
    fn native_on<T: Element + gemm_element::GemmElement>(
        p: &Problem,
        a: &[T],
        b: &[T],
        c: &mut [T],
        parallel: bool,
    ) {
        p.check_operands(a.len(), b.len()).unwrap();
        p.check_output(c.len()).unwrap();
        // SAFETY: the buffers hold the views' elements (checked above).
        unsafe {
            native(
                p,
                a.as_ptr(),
                b.as_ptr(),
                c.as_mut_ptr(),
                &|| false,
                parallel,
            )
        }
        .unwrap();
    }

    /// A batched product's entries against the same entries computed one at a time, bit for
    /// bit: A, B (`batch_b`: one per entry, else one for all) and C row-major per entry, A
    /// stored transposed where `trans_a`. Returns whether the batch was folded into rows.
    fn batch_against_entries<T: Element + gemm_element::GemmElement>(
        dtype: DType,
        (m, k, n, batch): (usize, usize, usize, usize),
        batch_b: bool,
        trans_a: bool,
    ) -> bool {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64((m * 31 + k * 7 + n + batch) as u64);
        let mut random = |len: usize| -> Vec<T> {
            (0..len)
                .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
                .collect()
        };
        let b_entries = if batch_b { batch } else { 1 };
        let (a, b, c0) = (
            random(batch * m * k),
            random(b_entries * k * n),
            random(batch * m * n),
        );
        let a_desc = if trans_a {
            MatrixDesc::row_major(k, m).t()
        } else {
            MatrixDesc::row_major(m, k)
        };
        let b_desc = if batch_b {
            MatrixDesc::row_major(k, n)
        } else {
            MatrixDesc::row_major(k, n).broadcast()
        };
        let problem = |batch| {
            Problem::general(
                (m, k, n, batch),
                a_desc,
                b_desc,
                MatrixDesc::row_major(m, n),
                (0.7, -1.5),
                Precision::of(dtype),
            )
            .unwrap()
        };
        let whole = problem(batch);
        let mut got = c0.clone();
        native_on(&whole, &a, &b, &mut got, true);
        let one = problem(1);
        for e in 0..batch {
            let b_at = if batch_b { e * k * n } else { 0 };
            let mut want = c0[e * m * n..(e + 1) * m * n].to_vec();
            native_on(
                &one,
                &a[e * m * k..(e + 1) * m * k],
                &b[b_at..b_at + k * n],
                &mut want,
                false,
            );
            let bits = |x: &[T]| bytemuck::cast_slice::<T, u8>(x).to_vec();
            assert_eq!(
                bits(&got[e * m * n..(e + 1) * m * n]),
                bits(&want),
                "{dtype} {m}×{k}×{n}, entry {e} of {batch} (B per entry: {batch_b}, Aᵀ: {trans_a})"
            );
        }
        batch_as_rows(&whole).is_some()
    }

    /// [`batch_against_entries`] in f64 and in f32: whether the batch was folded into rows
    /// (the same in both).
    fn in_both(shape: (usize, usize, usize, usize), batch_b: bool, trans_a: bool) -> bool {
        let folded = batch_against_entries::<f64>(DType::F64, shape, batch_b, trans_a);
        let folded_f32 = batch_against_entries::<f32>(DType::F32, shape, batch_b, trans_a);
        assert_eq!(folded, folded_f32, "{shape:?}");
        folded
    }

    #[test]
    fn a_batch_over_one_b_is_one_product_of_its_rows_with_each_entrys_bits() {
        for shape in [
            (1, 5, 7, 9),
            (3, 40, 20, 6),
            (64, 64, 64, 6),
            (2, 600, 3, 4),
            (17, 3, 130, 40),
        ] {
            assert!(in_both(shape, false, false), "{shape:?}");
        }
        // A's entries stored transposed do not go on from each other's rows, a B per entry
        // is not one B, and blocks of one column or of K under 3 are computed in padded
        // copies, which a stack's rows would make as tall as A: entry by entry.
        assert!(!in_both((20, 30, 10, 5), false, true));
        assert!(!in_both((20, 30, 10, 5), true, false));
        assert!(!in_both((20, 30, 1, 5), false, false));
        assert!(!in_both((20, 2, 10, 5), false, false));
    }

    #[test]
    fn small_entries_run_side_by_side_with_each_entrys_bits() {
        // Each entry under the crate's threading threshold, the batch over it: the entries are
        // spread over the pool, one thread each.
        let (m, k, n, batch) = (12, 12, 12, 400);
        assert!(m * k * n < gemm::get_threading_threshold());
        assert!(m * k * n * batch >= gemm::get_threading_threshold());
        assert!(!in_both((m, k, n, batch), true, false));
        assert!(!in_both((m, k, n, batch), true, true));
        // Entries past the threshold, each on the crate's threads.
        assert!(!in_both((100, 90, 80, 3), true, false));
    }

    /// A product's entries, bit for bit, against the same rows and columns computed inside
    /// products of other shapes, offsets, layouts and thread counts.
    fn reproducible<T: Element + gemm_element::GemmElement>(dtype: DType) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for k in [1, 2, 3, 100, 511, 512, 513, 1500] {
            let (m, n) = (70, 90);
            let a: Vec<T> = (0..m * k)
                .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
                .collect();
            let b: Vec<T> = (0..k * n)
                .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
                .collect();
            let c0: Vec<T> = (0..m * n)
                .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
                .collect();
            let full = |shape: Shape| Shape {
                precision: Precision::of(dtype),
                alpha: 0.7,
                beta: -1.5,
                ..shape
            };
            let whole = full(Shape::new(m, k, n)).problem().unwrap();
            let mut want = c0.clone();
            native_on(&whole, &a, &b, &mut want, true);
            // Blocks of rows and columns at other offsets, as their own products; A also
            // column-major (a copy), and with one thread.
            for (rows, cols) in [
                (0..1, 0..1),
                (3..4, 5..90),
                (0..70, 7..8),
                (5..21, 2..19),
                (1..70, 0..90),
                (64..70, 30..31),
                (9..26, 40..57),
                (3..13, 4..24),
                (0..2, 0..2),
            ] {
                let (bm, bn) = (rows.len(), cols.len());
                let sub_a: Vec<T> = rows
                    .clone()
                    .flat_map(|i| a[i * k..(i + 1) * k].iter().copied())
                    .collect();
                let sub_b: Vec<T> = (0..k)
                    .flat_map(|l| cols.clone().map(move |j| (l, j)))
                    .map(|(l, j)| b[l * n + j])
                    .collect();
                let sub_c: Vec<T> = rows
                    .clone()
                    .flat_map(|i| cols.clone().map(move |j| (i, j)))
                    .map(|(i, j)| c0[i * n + j])
                    .collect();
                let mut shape = full(Shape::new(bm, k, bn));
                let p = shape.problem().unwrap();
                let mut got = sub_c.clone();
                native_on(&p, &sub_a, &sub_b, &mut got, false);
                // A transposed in memory (k×bm) and one thread.
                shape.trans_a = true;
                let pt = shape.problem().unwrap();
                let at: Vec<T> = (0..k)
                    .flat_map(|l| (0..bm).map(move |i| (l, i)))
                    .map(|(l, i)| sub_a[i * k + l])
                    .collect();
                let mut got_t = sub_c.clone();
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .unwrap()
                    .install(|| native_on(&pt, &at, &sub_b, &mut got_t, true));
                // B transposed in memory (bn×k), A as it was: both run along K, the layout of
                // the crate's dot-product kernel for small blocks.
                let mut shape_b = full(Shape::new(bm, k, bn));
                shape_b.trans_b = true;
                let pb = shape_b.problem().unwrap();
                let bt: Vec<T> = (0..bn)
                    .flat_map(|j| (0..k).map(move |l| (l, j)))
                    .map(|(l, j)| sub_b[l * bn + j])
                    .collect();
                let mut got_b = sub_c.clone();
                native_on(&pb, &sub_a, &bt, &mut got_b, false);
                // C column-major, as every BLAS call has it.
                let pc = Problem::general(
                    (bm, k, bn, 1),
                    MatrixDesc::row_major(bm, k),
                    MatrixDesc::row_major(k, bn),
                    MatrixDesc::col_major(bm, bn),
                    (p.alpha, p.beta),
                    p.precision,
                )
                .unwrap();
                let mut got_c: Vec<T> = (0..bm * bn)
                    .map(|q| sub_c[(q % bm) * bn + q / bm])
                    .collect();
                native_on(&pc, &sub_a, &sub_b, &mut got_c, false);
                for (q, (i, j)) in rows
                    .clone()
                    .flat_map(|i| cols.clone().map(move |j| (i, j)))
                    .enumerate()
                {
                    assert_eq!(
                        bytemuck::bytes_of(&got_b[q]),
                        bytemuck::bytes_of(&want[i * n + j]),
                        "{dtype} K {k}, C[{i}, {j}] in block {rows:?}×{cols:?}, Bᵀ"
                    );
                    let (bi, bj) = (i - rows.start, j - cols.start);
                    assert_eq!(
                        bytemuck::bytes_of(&got_c[bi + bj * bm]),
                        bytemuck::bytes_of(&want[i * n + j]),
                        "{dtype} K {k}, C[{i}, {j}] in block {rows:?}×{cols:?}, C column-major"
                    );
                    let bits = |x: T| bytemuck::bytes_of(&x).to_vec();
                    assert_eq!(
                        bits(got[q]),
                        bits(want[i * n + j]),
                        "{dtype} K {k}, C[{i}, {j}] in block {rows:?}×{cols:?}"
                    );
                    assert_eq!(
                        bits(got_t[q]),
                        bits(want[i * n + j]),
                        "{dtype} K {k}, C[{i}, {j}], Aᵀ, 1 thread"
                    );
                }
            }
        }
    }

    #[test]
    fn an_entry_depends_on_its_row_column_and_k_only_not_on_the_shape_around_it() {
        reproducible::<f64>(DType::F64);
        reproducible::<f32>(DType::F32);
    }

    #[test]
    fn a_stop_request_interrupts_between_pieces() {
        let p = Problem::new(300, 2000, 300).unwrap();
        let ones = HostData::F32(vec![1.0; 300 * 2000]);
        let mut c = HostData::F32(vec![0.0; 300 * 300]);
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let stop = || asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2;
        let err = gemm_until(&p, &ones, &ones, &mut c, &stop).unwrap_err();
        assert!(matches!(err, Error::Interrupted), "{err}");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
        // Not stopped, the same product is right.
        gemm(&p, &ones, &ones, &mut c).unwrap();
        assert_eq!(c.get(0), 2000.0);
    }

    #[test]
    fn operands_of_the_wrong_type_or_length_are_refused() {
        let p = Problem::new(2, 3, 2).unwrap();
        let short = HostData::F32(vec![1.0; 5]);
        let full = HostData::F32(vec![1.0; 6]);
        assert!(product(&p, &short, &full, None).is_err());
        let f64s = HostData::F64(vec![1.0; 6]);
        assert!(matches!(
            product(&p, &f64s, &full, None),
            Err(Error::Precision(_))
        ));
    }
}
