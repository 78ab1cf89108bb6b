//! The CPU path: the `gemm` crate (AVX-512/AVX2/NEON picked at run time, all cores).

use gemm::Parallelism;

use crate::error::Result;
use crate::host;
use crate::problem::Problem;

/// The crate and version that computes CPU products, for reports.
pub const CPU_GEMM: &str = "gemm 0.19";

/// Threads the CPU path uses (gemm runs on rayon's global pool, one thread per core).
pub fn threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// C = A·B in f32 on the CPU, all cores: tilemm's CPU backend.
pub fn matmul(problem: &Problem, a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    problem.check_operands(a, b)?;
    let (m, k, n) = (problem.m, problem.k, problem.n);
    let mut c = host::zeros::<f32>(problem.c_len(), "C on the CPU")?;
    // SAFETY: the slices hold m·k, k·n and m·n elements laid out row-major, which is what the
    // strides below describe (column stride 1, row stride = columns); `read_dst` is false, so
    // C's initial contents are ignored.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            Parallelism::Rayon(0),
        );
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_matmul_matches_a_hand_computed_product() {
        // [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154]
        let p = Problem::new(2, 3, 2).unwrap();
        let c = matmul(&p, &[1., 2., 3., 4., 5., 6.], &[7., 8., 9., 10., 11., 12.]).unwrap();
        assert_eq!(c, vec![58., 64., 139., 154.]);
    }

    #[test]
    fn cpu_matmul_rejects_short_operands() {
        let p = Problem::new(2, 3, 2).unwrap();
        assert!(matmul(&p, &[1.0; 5], &[1.0; 6]).is_err());
    }
}
