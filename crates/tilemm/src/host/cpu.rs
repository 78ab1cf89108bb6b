//! The CPU path: the `gemm` crate (AVX-512/AVX2/NEON picked at run time, all cores), over the
//! problem's strided views as they are.

use std::sync::{Arc, Mutex};

use gemm::Parallelism;
use half::{bf16, f16};

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
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, built)) = &*pool {
        if *owner == pid {
            return Ok(built.clone());
        }
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .thread_name(|i| format!("tilemm-cpu-{i}"))
        .build()
        .map_err(|e| Error::Threads(e.to_string()))?;
    // The parent's pool, in a child: its threads do not exist here, so it is never dropped
    // (dropping it would signal threads that are not there).
    if let Some(inherited) = pool.take() {
        std::mem::forget(inherited);
    }
    let built = Arc::new(built);
    *pool = Some((pid, built.clone()));
    Ok(built)
}

/// C = α·A·B + β·C for `problem` on the CPU, all cores: tilemm's CPU backend. `c` holds C's
/// buffer (its initial contents are read only when β ≠ 0).
///
/// f32 and f64 run on the views as they are, strides and all. For f16 and bf16 the operands are
/// widened to f32 first (a copy of each): the gemm crate's f16 kernel rounds C to f16 between
/// its K blocks, which is not the f32 accumulation the precision promises, and it has no bf16.
pub fn gemm(problem: &Problem, a: &HostData, b: &HostData, c: &mut HostData) -> Result<()> {
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
    let pool = pool()?;
    pool.install(|| {
        match (a, b, &mut *c) {
            (HostData::F32(a), HostData::F32(b), HostData::F32(c)) => native(problem, a, b, c),
            (HostData::F64(a), HostData::F64(b), HostData::F64(c)) => native(problem, a, b, c),
            (HostData::F16(a), HostData::F16(b), _) => widened::<f16>(problem, a, b, c)?,
            (HostData::BF16(a), HostData::BF16(b), _) => widened::<bf16>(problem, a, b, c)?,
            _ => unreachable!("types checked against the precision above"),
        }
        Ok(())
    })
}

/// C = α·A·B + β·C into a new buffer: zeros, or a copy of `c0` when β ≠ 0.
pub fn product(
    problem: &Problem,
    a: &HostData,
    b: &HostData,
    c0: Option<&HostData>,
) -> Result<HostData> {
    let mut c = match c0 {
        Some(c0) if problem.reads_c() => host::copy_of(c0, "C on the CPU")?,
        _ => host::zeros_of(problem.precision.output, problem.c_len(), "C on the CPU")?,
    };
    gemm(problem, a, b, &mut c)?;
    Ok(c)
}

fn wrong_type(what: &'static str, got: DType, expected: DType) -> Error {
    Error::Precision(format!(
        "{what} holds {got} elements but the problem computes {expected}"
    ))
}

/// One `gemm` call per product of the batch, on the strided views.
fn native<T: Element + gemm_element::GemmElement>(
    problem: &Problem,
    a: &[T],
    b: &[T],
    c: &mut [T],
) {
    let (m, k, n) = (problem.m, problem.k, problem.n);
    let (alpha, beta) = (T::from_f64(problem.alpha), T::from_f64(problem.beta));
    let reads_c = problem.reads_c();
    let stride = |s: usize| s as isize;
    let (da, db, dc): (&MatrixDesc, &MatrixDesc, &MatrixDesc) =
        (&problem.a, &problem.b, &problem.c);
    for batch in 0..problem.batch {
        let (ia, ib, ic) = (
            da.index(batch, 0, 0),
            db.index(batch, 0, 0),
            dc.index(batch, 0, 0),
        );
        // SAFETY: the problem was validated (every index of the three views fits) and the
        // buffers hold at least a_len, b_len and c_len elements (checked by the caller), so
        // every element gemm touches at these strides is inside them; C's entries are
        // distinct (validated). gemm computes dst = α'·dst + β'·lhs·rhs: α' is our β and
        // β' our α, and with read_dst false C's old contents are not read.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr().add(ic),
                stride(dc.col_stride),
                stride(dc.row_stride),
                reads_c,
                a.as_ptr().add(ia),
                stride(da.col_stride),
                stride(da.row_stride),
                b.as_ptr().add(ib),
                stride(db.col_stride),
                stride(db.row_stride),
                beta,
                alpha,
                false,
                false,
                false,
                Parallelism::Rayon(0),
            );
        }
    }
}

/// Half-precision inputs: A, B (and C when read) widened to f32, computed in f32, and C
/// rounded once to its type.
fn widened<T: Element>(problem: &Problem, a: &[T], b: &[T], c: &mut HostData) -> Result<()> {
    let widen = |v: &[T], what| -> Result<Vec<f32>> {
        let mut out = host::with_capacity(v.len(), what)?;
        out.extend(v.iter().map(|x| x.to_f64() as f32));
        Ok(out)
    };
    let (a32, b32) = (widen(a, "A widened to f32")?, widen(b, "B widened to f32")?);
    let mut c32 = match &*c {
        HostData::F32(_) => None,
        other => {
            let mut v = host::with_capacity(other.len(), "C widened to f32")?;
            v.extend((0..other.len()).map(|i| other.get(i) as f32));
            Some(v)
        }
    };
    match (&mut c32, &mut *c) {
        (Some(c32), _) => native(problem, &a32, &b32, c32),
        (None, HostData::F32(c)) => native(problem, &a32, &b32, c),
        _ => unreachable!(),
    }
    if let Some(c32) = c32 {
        *c = HostData::from_f64(c.dtype(), c32.iter().map(|&x| f64::from(x)));
    }
    Ok(())
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
