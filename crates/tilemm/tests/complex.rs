//! Complex products (`Gemm::complex`, `tilemm::complex::matmul`) on the CPU route and on the
//! test device (wgpu on lavapipe here, `TILEMM_TEST_BACKEND` names another), checked exactly against a complex product in f64 on small
//! Gaussian integers: every transpose and conjugate, real and complex α and β, strided,
//! reversed and batched views, and the reference BLAS's special cases.

use ndarray::{s, Array2, Array3, ArrayView2, Axis};
use tilemm::complex::{Complex, ComplexPart};
use tilemm::{Backend, Gemm, Route};

mod common;

type C64 = Complex<f64>;

/// Small Gaussian integers: every sum below is exact in f32.
fn ints<T: ComplexPart>(rows: usize, cols: usize, seed: usize) -> Array2<Complex<T>> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        let re = ((i * 7 + j * 3 + seed) % 7) as f64 - 3.0;
        let im = ((i * 5 + j * 11 + 2 * seed) % 5) as f64 - 2.0;
        Complex::new(T::from_f64(re), T::from_f64(im))
    })
}

fn wide<T: ComplexPart>(x: ArrayView2<Complex<T>>, conj: bool) -> Array2<C64> {
    x.mapv(|z| {
        let z = C64::new(z.re.to_f64(), z.im.to_f64());
        if conj {
            z.conj()
        } else {
            z
        }
    })
}

/// α·op(A)·op(B) + β·C in f64, by the definition.
fn expected<T: ComplexPart>(
    a: ArrayView2<Complex<T>>,
    b: ArrayView2<Complex<T>>,
    c: ArrayView2<Complex<T>>,
    conj: [bool; 2],
    alpha: C64,
    beta: C64,
) -> Array2<C64> {
    let (a, b) = (wide(a, conj[0]), wide(b, conj[1]));
    let c = wide(c, false);
    Array2::from_shape_fn(c.dim(), |(i, j)| {
        let sum: C64 = (0..a.ncols()).map(|l| a[[i, l]] * b[[l, j]]).sum();
        let scaled = if beta == C64::new(0.0, 0.0) {
            C64::new(0.0, 0.0)
        } else {
            beta * c[[i, j]]
        };
        alpha * sum + scaled
    })
}

fn same<T: ComplexPart>(got: ArrayView2<Complex<T>>, want: &Array2<C64>, what: &str) {
    assert_eq!(got.dim(), want.dim(), "{what}");
    for ((i, j), z) in got.indexed_iter() {
        let w = want[[i, j]];
        assert_eq!(
            (z.re.to_f64(), z.im.to_f64()),
            (w.re, w.im),
            "{what}: C[{i}, {j}]"
        );
    }
}

/// The CPU route, and the test device (wgpu, or `TILEMM_TEST_BACKEND`'s).
fn devices() -> Vec<(&'static str, Gemm<'static>)> {
    vec![
        ("cpu", Gemm::new().device(Backend::Cpu, None)),
        ("gpu", Gemm::new().device(common::backend(), None)),
    ]
}

fn every_case<T: ComplexPart>() {
    let (m, k, n) = (13, 17, 11);
    let scalars = [
        (C64::new(1.0, 0.0), C64::new(0.0, 0.0)),
        (C64::new(2.0, 0.0), C64::new(-1.0, 0.0)),
        (C64::new(1.0, 2.0), C64::new(0.5, -1.0)),
        (C64::new(-1.0, 0.0), C64::new(0.0, 1.0)),
    ];
    for (device, gemm) in devices() {
        for conj in [[false, false], [true, false], [false, true], [true, true]] {
            for (transposed, (alpha, beta)) in [false, true].into_iter().zip(scalars) {
                // op(A) as a view: A itself, or the transpose of a k×m matrix.
                let a_store = if transposed {
                    ints::<T>(k, m, 1)
                } else {
                    ints::<T>(m, k, 1)
                };
                let a = if transposed {
                    a_store.t()
                } else {
                    a_store.view()
                };
                let b = ints::<T>(k, n, 2);
                let c0 = ints::<T>(m, n, 3);
                let mut c = c0.clone();
                let what = format!("{device} conj {conj:?} Aᵀ {transposed} α {alpha} β {beta}");
                let run = gemm
                    .complex()
                    .conjugate(conj[0], conj[1])
                    .alpha(alpha)
                    .beta(beta)
                    .write(a, b.view(), c.view_mut())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    matches!(run.route, Route::Gpu { .. }),
                    device == "gpu",
                    "{what}: {}",
                    run.route
                );
                same(
                    c.view(),
                    &expected(a, b.view(), c0.view(), conj, alpha, beta),
                    &what,
                );
            }
            for (alpha, beta) in scalars {
                // Strided and reversed operands, C a block of a larger array.
                let big = ints::<T>(2 * m, k + 3, 4);
                let a = big.slice(s![..;-2, 1..k + 1]);
                let b_big = ints::<T>(k, 2 * n, 5);
                let b = b_big.slice(s![.., ..;2]);
                let mut c_big = ints::<T>(m + 2, n + 4, 6);
                let c0 = c_big.slice(s![1..m + 1, 2..n + 2]).to_owned();
                let what = format!("{device} strided conj {conj:?} α {alpha} β {beta}");
                gemm.complex()
                    .conjugate(conj[0], conj[1])
                    .alpha(alpha)
                    .beta(beta)
                    .write(a, b, c_big.slice_mut(s![1..m + 1, 2..n + 2]))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                same(
                    c_big.slice(s![1..m + 1, 2..n + 2]),
                    &expected(a, b, c0.view(), conj, alpha, beta),
                    &what,
                );
                // The border is untouched.
                let fresh = ints::<T>(m + 2, n + 4, 6);
                assert_eq!(c_big.row(0), fresh.row(0), "{what}: the border");
                assert_eq!(
                    c_big.column(n + 3),
                    fresh.column(n + 3),
                    "{what}: the border"
                );
            }
        }
    }
}

#[test]
fn complex64_products_are_exact_for_every_op_scalar_and_view() {
    every_case::<f32>();
}

#[test]
fn complex128_products_are_exact_for_every_op_scalar_and_view() {
    every_case::<f64>();
}

#[test]
fn the_reference_blas_special_cases_hold() {
    let (m, k, n) = (5, 4, 3);
    for (device, gemm) in devices() {
        // β = 0 does not read C: a NaN there does not survive.
        let (a, b) = (ints::<f64>(m, k, 1), ints::<f64>(k, n, 2));
        let mut c = Array2::from_elem((m, n), Complex::new(f64::NAN, f64::NAN));
        gemm.complex()
            .alpha(C64::new(0.0, 1.0))
            .write(a.view(), b.view(), c.view_mut())
            .unwrap();
        let zero = Array2::from_elem((m, n), Complex::new(0.0, 0.0));
        same(
            c.view(),
            &expected(
                a.view(),
                b.view(),
                zero.view(),
                [false; 2],
                C64::new(0.0, 1.0),
                C64::new(0.0, 0.0),
            ),
            &format!("{device}: β = 0"),
        );
        // α = 0 reads neither A nor B: C = β·C.
        let mut nan_a = a.clone();
        nan_a[[0, 0]] = Complex::new(f64::NAN, 0.0);
        let c0 = ints::<f64>(m, n, 3);
        let mut c = c0.clone();
        let beta = C64::new(2.0, -1.0);
        gemm.complex()
            .alpha(C64::new(0.0, 0.0))
            .beta(beta)
            .write(nan_a.view(), b.view(), c.view_mut())
            .unwrap();
        same(
            c.view(),
            &c0.mapv(|z| beta * z),
            &format!("{device}: α = 0"),
        );
        // Shapes that do not chain are refused, α = 0 or not.
        for alpha in [C64::new(0.0, 0.0), C64::new(1.0, 0.0)] {
            let err = gemm
                .complex()
                .alpha(alpha)
                .write(a.view(), a.view(), c.view_mut())
                .unwrap_err();
            assert!(err.to_string().contains("m×k"), "{device}: {err}");
        }
    }
}

#[test]
fn batches_broadcast_and_matmul_returns_the_product() {
    let (batch, m, k, n) = (3, 6, 5, 4);
    let a = Array3::from_shape_fn((1, m, k), |(_, i, j)| {
        Complex::new((i + j) as f32 - 4.0, i as f32 - j as f32)
    });
    let b = Array3::from_shape_fn((batch, k, n), |(e, i, j)| {
        Complex::new((e + i) as f32 - j as f32, (e * j) as f32 - 2.0)
    });
    let mut c = Array3::from_elem((batch, m, n), Complex::new(0f32, 0.0));
    Gemm::new()
        .device(Backend::Cpu, None)
        .complex()
        .write_batched(a.view(), b.view(), c.view_mut())
        .unwrap();
    let zero = Array2::from_elem((m, n), Complex::new(0f32, 0.0));
    for e in 0..batch {
        let want = expected(
            a.index_axis(Axis(0), 0),
            b.index_axis(Axis(0), e),
            zero.view(),
            [false; 2],
            C64::new(1.0, 0.0),
            C64::new(0.0, 0.0),
        );
        same(c.index_axis(Axis(0), e), &want, &format!("entry {e}"));
    }
    let (a2, b2) = (ints::<f64>(m, k, 7), ints::<f64>(k, n, 8));
    let product = tilemm::complex::matmul(a2.view(), b2.view()).unwrap();
    let zero = Array2::from_elem((m, n), Complex::new(0f64, 0.0));
    same(
        product.view(),
        &expected(
            a2.view(),
            b2.view(),
            zero.view(),
            [false; 2],
            C64::new(1.0, 0.0),
            C64::new(0.0, 0.0),
        ),
        "matmul",
    );
}
