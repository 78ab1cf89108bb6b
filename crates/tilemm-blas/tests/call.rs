//! The drop-in BLAS's argument checks, CBLAS conversion and last resort, through its rlib (the
//! whole library under programs is tested by `scripts/test-blas`).

use tilemm_blas::call::{cblas, from_cblas, Call, Work};
use tilemm_blas::route::forward;
use tilemm_blas::symbols;

fn call(trans: [u8; 2], mnk: [i64; 3], lds: [i64; 3]) -> Call<f64> {
    Call {
        trans,
        m: mnk[0],
        n: mnk[1],
        k: mnk[2],
        alpha: 1.0,
        a: std::ptr::null(),
        lda: lds[0],
        b: std::ptr::null(),
        ldb: lds[1],
        beta: 0.0,
        c: std::ptr::null_mut(),
        ldc: lds[2],
    }
}

#[test]
fn arguments_are_refused_with_the_reference_numbers_in_its_order() {
    let ok = call(*b"NN", [2, 3, 4], [2, 4, 2]);
    assert_eq!(ok.check(), Ok(Work::Product));
    assert_eq!(call(*b"/N", [2, 3, 4], [2, 4, 2]).check(), Err(1));
    assert_eq!(call(*b"N/", [2, 3, 4], [2, 4, 2]).check(), Err(2));
    // TRANSA is checked before TRANSB, M before N.
    assert_eq!(call(*b"//", [-1, -1, 4], [2, 4, 2]).check(), Err(1));
    assert_eq!(call(*b"NN", [-1, -1, 4], [2, 4, 2]).check(), Err(3));
    assert_eq!(call(*b"NN", [2, -1, 4], [2, 4, 2]).check(), Err(4));
    assert_eq!(call(*b"NN", [2, 3, -1], [2, 4, 2]).check(), Err(5));
    assert_eq!(call(*b"NN", [2, 3, 4], [1, 4, 2]).check(), Err(8));
    assert_eq!(call(*b"NN", [2, 3, 4], [2, 3, 2]).check(), Err(10));
    assert_eq!(call(*b"NN", [2, 3, 4], [2, 4, 1]).check(), Err(13));
    // Transposed, A is k×m and B n×k as stored; lowercase and 'C' are accepted.
    assert_eq!(
        call(*b"tc", [2, 3, 4], [4, 3, 2]).check(),
        Ok(Work::Product)
    );
    assert_eq!(call(*b"TN", [2, 3, 4], [3, 4, 2]).check(), Err(8));
    assert_eq!(call(*b"NT", [2, 3, 4], [2, 2, 2]).check(), Err(10));
    // A leading dimension is at least 1, even of an empty matrix.
    assert_eq!(call(*b"NN", [0, 0, 0], [0, 1, 1]).check(), Err(8));
}

#[test]
fn the_reference_special_cases_are_kept() {
    let mut c = call(*b"NN", [0, 3, 4], [1, 4, 1]);
    assert_eq!(c.check(), Ok(Work::None));
    c = call(*b"NN", [2, 3, 0], [2, 1, 2]);
    assert_eq!(c.check(), Ok(Work::Scale));
    c.beta = 1.0;
    assert_eq!(c.check(), Ok(Work::None));
    c = call(*b"NN", [2, 3, 4], [2, 4, 2]);
    c.alpha = 0.0;
    assert_eq!(c.check(), Ok(Work::Scale));
}

#[test]
fn scaling_by_zero_clears_nan_and_leaves_the_padding() {
    let mut data = [f64::NAN, 2.0, -7.0, f64::INFINITY, 3.0, -7.0];
    let mut c = call(*b"NN", [2, 2, 0], [2, 1, 3]);
    c.c = data.as_mut_ptr();
    unsafe { c.scale() };
    assert_eq!(data[..2], [0.0, 0.0]);
    assert_eq!(data[2], -7.0);
    assert_eq!(data[3..5], [0.0, 0.0]);
    c.beta = 2.0;
    data[0] = 1.5;
    unsafe { c.scale() };
    assert_eq!(data[0], 3.0);
}

#[test]
fn row_major_is_the_transposed_column_major_product() {
    // Three distinct addresses (never read).
    let mut x = [0f32; 3];
    let c = x.as_mut_ptr();
    let (a, b) = (
        c.wrapping_add(1) as *const f32,
        c.wrapping_add(2) as *const f32,
    );
    let (call, row) = from_cblas(
        cblas::ROW_MAJOR,
        cblas::TRANS,
        cblas::NO_TRANS,
        2,
        3,
        4,
        1.0,
        a,
        5,
        b,
        6,
        0.0,
        c,
        7,
    )
    .unwrap();
    assert!(row);
    assert_eq!((call.m, call.n, call.k), (3, 2, 4));
    assert_eq!(call.trans, *b"NT");
    assert_eq!((call.a, call.lda, call.b, call.ldb), (b, 6, a, 5));
    let refused = |layout, ta, tb| {
        from_cblas(layout, ta, tb, 1, 1, 1, 1.0, a, 1, b, 1, 0.0, c, 1)
            .unwrap_err()
            .number
    };
    assert_eq!(refused(7, cblas::NO_TRANS, cblas::NO_TRANS), 1);
    assert_eq!(refused(cblas::COL_MAJOR, 7, cblas::NO_TRANS), 2);
    assert_eq!(refused(cblas::COL_MAJOR, cblas::NO_TRANS, 7), 3);
    assert_eq!(refused(cblas::ROW_MAJOR, 7, cblas::NO_TRANS), 2);
    // The reference CBLAS 3.11's row-major quirk: TransB is parameter 2 there.
    assert_eq!(refused(cblas::ROW_MAJOR, cblas::NO_TRANS, 7), 2);
}

/// C = α·op(A)·op(B) + β·C with op(A) 3×4 stored transposed (lda 5), op(B) 4×2 as it is
/// (ldb 6), C 3×2 (ldc 4): its padding must stay as it was.
fn product_call(a: &[f64], b: &[f64], c: &mut [f64], alpha: f64, beta: f64) -> Call<f64> {
    Call {
        trans: *b"TN",
        m: 3,
        n: 2,
        k: 4,
        alpha,
        a: a.as_ptr(),
        lda: 5,
        b: b.as_ptr(),
        ldb: 6,
        beta,
        c: c.as_mut_ptr(),
        ldc: 4,
    }
}

#[test]
fn the_last_resort_computes_the_definition_and_keeps_the_special_cases() {
    // A is 4×3 as stored (op(A) = Aᵀ), B 4×2; exact integers.
    let a: Vec<f64> = (0..15).map(|i| (i % 7) as f64 - 3.0).collect();
    let b: Vec<f64> = (0..12).map(|i| (i % 5) as f64 - 2.0).collect();
    let mut c: Vec<f64> = (0..8).map(|i| i as f64).collect();
    let c0 = c.clone();
    let expected = |i: usize, j: usize, alpha: f64, beta: f64, c0: f64| {
        let sum: f64 = (0..4).map(|l| a[l + i * 5] * b[l + j * 6]).sum();
        alpha * sum + beta * c0
    };
    assert!(
        symbols::next::<f64>().is_none(),
        "no BLAS underneath in the test binary"
    );
    let product = product_call(&a, &b, &mut c, 2.0, -1.0);
    assert_eq!(product.check(), Ok(Work::Product));
    // SAFETY: the buffers hold what the call describes.
    unsafe { forward(&product, Work::Product) };
    for j in 0..2 {
        for i in 0..3 {
            assert_eq!(c[i + j * 4], expected(i, j, 2.0, -1.0, c0[i + j * 4]));
        }
        assert_eq!(c[3 + j * 4], c0[3 + j * 4], "padding");
    }
    // α = 0, β = 0: zeros, a NaN in C not kept and A not read (a NaN there neither).
    let mut nan_a = a.clone();
    nan_a[0] = f64::NAN;
    c[0] = f64::NAN;
    let scale = product_call(&nan_a, &b, &mut c, 0.0, 0.0);
    assert_eq!(scale.check(), Ok(Work::Scale));
    unsafe { forward(&scale, Work::Scale) };
    assert_eq!([c[0], c[1], c[2], c[4], c[5], c[6]], [0.0; 6]);
    assert_eq!(c[3], c0[3], "padding");
}
