//! The ndarray interface on a real Vulkan device (lavapipe on machines without a GPU): views
//! of every kind against an f64 product computed here by ndarray, independent of tilemm.

mod common;

use common::gpu;
use half::f16;
use ndarray::{s, Array, Array2, Array3, ArrayView2, Axis, ShapeBuilder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilemm::Gemm;
use tilemm::{Element, Error, Kernel, Plan};

/// The ndarray interface on the test device, with the example's tiled kernel: what is checked
/// here is how views reach the kernels, not the tuner (`tests/front_door.rs` runs the defaults).
fn gemm() -> Gemm<'static> {
    Gemm::new().on(gpu()).plan(Plan::default_for(Kernel::Tiled))
}

fn random<Sh: ShapeBuilder>(shape: Sh, integers: bool, rng: &mut StdRng) -> Array<f32, Sh::Dim> {
    Array::from_shape_simple_fn(shape, || {
        if integers {
            rng.random_range(-4i32..=4) as f32
        } else {
            rng.random_range(-1.0f32..1.0)
        }
    })
}

fn wide<T: Element>(x: ArrayView2<T>) -> Array2<f64> {
    x.mapv(|v| v.to_f64())
}

/// |c − (α·A·B + β·C₀)| ≤ γ_{K+2}·(|α|·|A|·|B| + |β|·|C₀|) in f64, entry by entry.
fn assert_within_bound(
    c: ArrayView2<f64>,
    (alpha, a, b): (f64, ArrayView2<f64>, ArrayView2<f64>),
    (beta, c0): (f64, ArrayView2<f64>),
    u: f64,
) {
    let exact = alpha * a.dot(&b) + beta * &c0;
    let scale =
        alpha.abs() * a.mapv(f64::abs).dot(&b.mapv(f64::abs)) + beta.abs() * c0.mapv(f64::abs);
    let k = (a.ncols() + 2) as f64;
    let gamma = k * u / (1.0 - k * u);
    for ((i, j), &x) in c.indexed_iter() {
        let err = (x - exact[(i, j)]).abs();
        assert!(
            err <= gamma * scale[(i, j)],
            "C[{i},{j}] = {x}, expected {}, error {err} over the bound {}",
            exact[(i, j)],
            gamma * scale[(i, j)]
        );
    }
}

#[test]
fn transposes_strided_slices_and_reversed_views_meet_the_bound() {
    let mut rng = StdRng::seed_from_u64(1);
    let a = random((40, 70), false, &mut rng); // viewed as Aᵀ: 70×40
    let b = random((40, 90), false, &mut rng); // every other column: 40×45
    let gemm = gemm();
    let u = f32::EPSILON as f64 / 2.0;
    let zero = Array2::<f64>::zeros((70, 45));
    let c = gemm.product(a.t(), b.slice(s![.., ..;2])).unwrap();
    assert_eq!(c.dim(), (70, 45));
    let (wa, wb) = (wide(a.t()), wide(b.slice(s![.., ..;2])));
    assert_within_bound(
        wide(c.view()).view(),
        (1.0, wa.view(), wb.view()),
        (0.0, zero.view()),
        u,
    );
    // Rows reversed (a negative stride) and a transposed slice.
    let a2 = a.slice(s![..;-1, 5..45]); // 40×40
    let b2 = b.slice(s![.., 10..50]).reversed_axes(); // 40×40
    let c = gemm.alpha(-3.0).product(a2, b2).unwrap();
    let zero = Array2::<f64>::zeros((40, 40));
    assert_within_bound(
        wide(c.view()).view(),
        (-3.0, wide(a2).view(), wide(b2).view()),
        (0.0, zero.view()),
        u,
    );
}

#[test]
fn writing_into_a_slice_gives_the_exact_result_and_touches_nothing_else() {
    let mut rng = StdRng::seed_from_u64(2);
    let a = random((30, 50), true, &mut rng);
    let b = random((50, 20), true, &mut rng);
    let big = random((64, 64), true, &mut rng);
    let before = big.clone();
    let target = s![3..33;1, 40..60];
    let c0 = wide(big.slice(target));
    // A column-major C (the slice of a transposed array) goes through Cᵀ = Bᵀ·Aᵀ.
    for transposed in [false, true] {
        let mut big = before.clone();
        let expected = 2.0 * wide(a.view()).dot(&wide(b.view())) - 1.0 * &c0;
        if transposed {
            let mut bt = big.t().as_standard_layout().into_owned();
            bt.swap_axes(0, 1); // the same array, in Fortran order
            big = bt;
        }
        let run = gemm()
            .alpha(2.0)
            .beta(-1.0)
            .write(a.view(), b.view(), big.slice_mut(target))
            .unwrap();
        let schedule = run.schedule.unwrap();
        assert!(schedule.panels.is_whole());
        assert_eq!(schedule.swapped, transposed, "transposed: {transposed}");
        assert_eq!(
            wide(big.slice(target)),
            expected,
            "transposed: {transposed}"
        );
        let mut outside = big.clone();
        outside.slice_mut(target).assign(&before.slice(target));
        assert_eq!(outside, before, "entries outside C changed");
    }
}

#[test]
fn batches_broadcast_a_single_matrix_over_the_others() {
    let mut rng = StdRng::seed_from_u64(3);
    let a: Array3<f32> = random((5, 17, 23), true, &mut rng);
    let b = random((23, 11), true, &mut rng);
    let b3 = b.view().insert_axis(Axis(0));
    let c = gemm().product_batched(a.view(), b3).unwrap();
    assert_eq!(c.dim(), (5, 17, 11));
    for (i, entry) in c.outer_iter().enumerate() {
        let expected = wide(a.index_axis(Axis(0), i)).dot(&wide(b.view()));
        assert_eq!(wide(entry), expected, "batch entry {i}");
    }
    // Every other entry of the batch: a strided batch axis.
    let every_other = a.slice(s![..;2, .., ..]);
    let c = gemm().product_batched(every_other, b3).unwrap();
    assert_eq!(c.dim().0, 3);
    let expected = wide(a.index_axis(Axis(0), 4)).dot(&wide(b.view()));
    assert_eq!(wide(c.index_axis(Axis(0), 2)), expected);
}

#[test]
fn half_inputs_accumulate_and_land_in_f32_and_f64_computes_in_f64() {
    let mut rng = StdRng::seed_from_u64(4);
    if gpu().info().types.f16 {
        let a = random((33, 300), false, &mut rng).mapv(f16::from_f32);
        let b = random((300, 21), false, &mut rng).mapv(f16::from_f32);
        let mut c = Array2::<f32>::zeros((33, 21));
        gemm().write(a.view(), b.view(), c.view_mut()).unwrap();
        let zero = Array2::<f64>::zeros((33, 21));
        let u = f32::EPSILON as f64 / 2.0;
        assert_within_bound(
            wide(c.view()).view(),
            (1.0, wide(a.view()).view(), wide(b.view()).view()),
            (0.0, zero.view()),
            u,
        );
    }
    if gpu().info().types.f64 {
        let a = random((20, 40), false, &mut rng).mapv(f64::from) / 3.0;
        let b = random((40, 10), false, &mut rng).mapv(f64::from) / 7.0;
        let c = gemm().product(a.t().t(), b.view()).unwrap();
        let zero = Array2::<f64>::zeros((20, 10));
        let u = f64::EPSILON / 2.0;
        assert_within_bound(c.view(), (1.0, a.view(), b.view()), (0.0, zero.view()), u);
    }
}

#[test]
fn mismatched_views_are_refused_with_a_message() {
    let a = Array2::<f32>::zeros((4, 5));
    let b = Array2::<f32>::zeros((6, 3));
    let err = gemm().product(a.view(), b.view()).unwrap_err();
    assert!(matches!(err, Error::InvalidView(_)), "{err}");
    assert!(err.to_string().contains("A must be m×k"), "{err}");
    let a3 = Array3::<f32>::zeros((3, 4, 5));
    let b3 = Array3::<f32>::zeros((2, 5, 3));
    let err = gemm().product_batched(a3.view(), b3.view()).unwrap_err();
    assert!(err.to_string().contains("batch of 2"), "{err}");
    // f32 inputs with an f16 C is not a precision tilemm computes.
    let mut c = Array2::<f16>::from_elem((4, 3), f16::ZERO);
    let b = Array2::<f32>::zeros((5, 3));
    let err = gemm().write(a.view(), b.view(), c.view_mut()).unwrap_err();
    assert!(matches!(err, Error::Precision(_)), "{err}");
}
