//! gemm and faer on the same row-major f32 matrices, in one run: the measurement behind the
//! choice of tilemm's CPU path; and tilemm's CPU route (the front door, `Backend::Cpu`) on the
//! same data, which calls gemm in fixed slabs of K on the caller's arrays and must stay within
//! 1.1x of it. `cargo bench -p cpu-gemm-compare`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use ndarray::{ArrayView2, ArrayViewMut2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn gemm_crate(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: n×n row-major slices (column stride 1, row stride n); C is not read.
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            n as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        )
    }
}

fn faer_crate(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let a = MatRef::from_row_major_slice(a, n, n);
    let b = MatRef::from_row_major_slice(b, n, n);
    let c = MatMut::from_row_major_slice_mut(c, n, n);
    matmul(c, Accum::Replace, a, b, 1.0f32, Par::rayon(0));
}

fn compare(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("sgemm");
    group.sample_size(20);
    for n in [512usize, 1024, 2048] {
        let mut rng = StdRng::seed_from_u64(n as u64);
        let a: Vec<f32> = (0..n * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..n * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut c = vec![0.0f32; n * n];
        group.throughput(Throughput::Elements((2 * n * n * n) as u64));
        group.bench_with_input(BenchmarkId::new("gemm-0.19-x86-v4", n), &n, |bench, &n| {
            bench.iter(|| gemm_crate(n, black_box(&a), black_box(&b), &mut c))
        });
        group.bench_with_input(BenchmarkId::new("faer-0.24", n), &n, |bench, &n| {
            bench.iter(|| faer_crate(n, black_box(&a), black_box(&b), &mut c))
        });
        group.bench_with_input(BenchmarkId::new("tilemm-cpu-route", n), &n, |bench, &n| {
            let route = tilemm::Gemm::new().device(tilemm::Backend::Cpu, None);
            let a = ArrayView2::from_shape((n, n), &a).unwrap();
            let b = ArrayView2::from_shape((n, n), &b).unwrap();
            bench.iter(|| {
                let c = ArrayViewMut2::from_shape((n, n), &mut c[..]).unwrap();
                route.write(black_box(a), black_box(b), c).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, compare);
criterion_main!(benches);
