//! The drop-in BLAS's argument checks, CBLAS conversion and last resort, through its rlib (the
//! whole library under programs is tested by `scripts/test-blas`).

use tilemm_blas::call::{cblas, Call, Complex, Routine, Work};
use tilemm_blas::route::forward;
use tilemm_blas::symbols;

fn call(trans: [u8; 2], mnk: [i64; 3], lds: [i64; 3]) -> Call<f64> {
    Call {
        chars: [trans[0], trans[1], b'N', b'N'],
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
        ..Call::new(Routine::Gemm)
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
    unsafe { tilemm_blas::route::scale(&c) };
    assert_eq!(data[..2], [0.0, 0.0]);
    assert_eq!(data[2], -7.0);
    assert_eq!(data[3..5], [0.0, 0.0]);
    c.beta = 2.0;
    data[0] = 1.5;
    unsafe { tilemm_blas::route::scale(&c) };
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
    let cblas_call = Call {
        m: 2,
        n: 3,
        k: 4,
        alpha: 1.0,
        a,
        lda: 5,
        b,
        ldb: 6,
        beta: 0.0,
        c,
        ldc: 7,
        ..Call::new(Routine::Gemm)
    };
    let (call, row) = cblas_call
        .from_cblas(cblas::ROW_MAJOR, &[cblas::TRANS, cblas::NO_TRANS])
        .unwrap();
    assert!(row);
    assert_eq!((call.m, call.n, call.k), (3, 2, 4));
    assert_eq!(call.given_chars(), b"NT");
    assert_eq!((call.a, call.lda, call.b, call.ldb), (b, 6, a, 5));
    let refused = |layout, ta, tb| cblas_call.from_cblas(layout, &[ta, tb]).unwrap_err().number;
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
        chars: *b"TNNN",
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
        ..Call::new(Routine::Gemm)
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

/// A call of `routine` with the given characters, dimensions (m, n, k) and leading dimensions
/// (lda, ldb, ldc), for its checks.
fn level3<T: tilemm_blas::call::Scalar>(
    routine: Routine,
    chars: &[u8],
    [m, n, k]: [i64; 3],
    [lda, ldb, ldc]: [i64; 3],
) -> Call<T> {
    let mut all = [b'N'; 4];
    all[..chars.len()].copy_from_slice(chars);
    Call {
        chars: all,
        m,
        n,
        k,
        alpha: T::one(),
        lda,
        ldb,
        ldc,
        ..Call::new(routine)
    }
}

#[test]
fn every_routine_is_refused_with_its_reference_numbers() {
    use Routine::*;
    // SYMM: SIDE 1, UPLO 2, M 3, N 4, LDA 7 (A is M×M on the left), LDB 9, LDC 12.
    let symm = |chars: &[u8], mn: [i64; 2], lds| {
        level3::<f64>(Symm, chars, [mn[0], mn[1], 0], lds).check()
    };
    assert_eq!(symm(b"LU", [3, 2], [3, 3, 3]), Ok(Work::Product));
    assert_eq!(symm(b"XU", [3, 2], [3, 3, 3]), Err(1));
    assert_eq!(symm(b"LX", [3, 2], [3, 3, 3]), Err(2));
    assert_eq!(symm(b"LU", [-1, 2], [3, 3, 3]), Err(3));
    assert_eq!(symm(b"LU", [3, -1], [3, 3, 3]), Err(4));
    assert_eq!(symm(b"LU", [3, 2], [2, 3, 3]), Err(7));
    assert_eq!(symm(b"RU", [3, 4], [3, 3, 3]), Err(7));
    assert_eq!(symm(b"LU", [3, 2], [3, 2, 3]), Err(9));
    assert_eq!(symm(b"LU", [3, 2], [3, 3, 2]), Err(12));
    // SYRK: UPLO 1, TRANS 2, N 3, K 4, LDA 7, LDC 10; SYR2K: LDB 9, LDC 12.
    let rank = |routine, chars: &[u8], nk: [i64; 2], lds| {
        level3::<f64>(routine, chars, [nk[0], nk[0], nk[1]], lds).check()
    };
    assert_eq!(rank(Syrk, b"UN", [3, 2], [3, 0, 3]), Ok(Work::Product));
    assert_eq!(
        rank(Syrk, b"UC", [3, 2], [2, 0, 3]),
        Ok(Work::Product),
        "dsyrk takes C as T"
    );
    assert_eq!(rank(Syrk, b"XN", [3, 2], [3, 0, 3]), Err(1));
    assert_eq!(rank(Syrk, b"UX", [3, 2], [3, 0, 3]), Err(2));
    assert_eq!(rank(Syrk, b"UN", [-1, 2], [3, 0, 3]), Err(3));
    assert_eq!(rank(Syrk, b"UN", [3, -1], [3, 0, 3]), Err(4));
    assert_eq!(rank(Syrk, b"UT", [3, 2], [1, 0, 3]), Err(7));
    assert_eq!(rank(Syrk, b"UN", [3, 2], [3, 0, 2]), Err(10));
    assert_eq!(rank(Syr2k, b"UN", [3, 2], [3, 2, 3]), Err(9));
    assert_eq!(rank(Syr2k, b"UN", [3, 2], [3, 3, 2]), Err(12));
    // The complex updates: zsyrk has no C, zherk no T.
    let complex = |routine, chars: &[u8]| {
        level3::<Complex<f64>>(routine, chars, [3, 3, 2], [3, 3, 3]).check()
    };
    assert_eq!(complex(Syrk, b"UC"), Err(2));
    assert_eq!(complex(Herk, b"UT"), Err(2));
    assert_eq!(complex(Herk, b"UC"), Ok(Work::Product));
    assert_eq!(complex(Her2k, b"LT"), Err(2));
    // TRMM and TRSM: SIDE 1, UPLO 2, TRANSA 3, DIAG 4, M 5, N 6, LDA 9, LDB 11.
    let tri = |chars: &[u8], mn: [i64; 2], lds| {
        level3::<f32>(Trsm, chars, [mn[0], mn[1], 0], lds).check()
    };
    assert_eq!(tri(b"LUNN", [3, 2], [3, 0, 3]), Ok(Work::Product));
    assert_eq!(tri(b"XUNN", [3, 2], [3, 0, 3]), Err(1));
    assert_eq!(tri(b"LXNN", [3, 2], [3, 0, 3]), Err(2));
    assert_eq!(tri(b"LUXN", [3, 2], [3, 0, 3]), Err(3));
    assert_eq!(tri(b"LUNX", [3, 2], [3, 0, 3]), Err(4));
    assert_eq!(tri(b"LUNN", [-1, 2], [3, 0, 3]), Err(5));
    assert_eq!(tri(b"LUNN", [3, -1], [3, 0, 3]), Err(6));
    assert_eq!(tri(b"RUNN", [3, 4], [3, 0, 3]), Err(9));
    assert_eq!(tri(b"LUNN", [3, 2], [3, 0, 2]), Err(11));
    // The quick returns: an empty B; α = 0 writes zeros (TRMM has no β to keep C).
    assert_eq!(tri(b"LUNN", [0, 2], [3, 0, 3]), Ok(Work::None));
    let zero = Call {
        alpha: 0.0,
        ..level3::<f32>(Trmm, b"LUNN", [3, 2, 0], [3, 0, 3])
    };
    assert_eq!(zero.check(), Ok(Work::Scale));
    // An update with K = 0 and β = 1 changes nothing; with β = 2 it scales the triangle.
    let empty = level3::<f64>(Syrk, b"UN", [3, 3, 0], [3, 0, 3]);
    assert_eq!(Call { beta: 1.0, ..empty }.check(), Ok(Work::None));
    assert_eq!(Call { beta: 2.0, ..empty }.check(), Ok(Work::Scale));
}

#[test]
fn row_major_calls_become_the_reference_cblas_column_major_ones() {
    use Routine::*;
    let base = |routine| Call::<Complex<f64>> {
        m: 2,
        n: 5,
        k: 3,
        alpha: Complex::new(1.0, 2.0),
        ..Call::new(routine)
    };
    let row = |routine, enums: &[i32]| base(routine).from_cblas(cblas::ROW_MAJOR, enums);
    // Sides and triangles swap, M and N too.
    let (trsm, _) = row(
        Trsm,
        &[cblas::LEFT, cblas::UPPER, cblas::CONJ_TRANS, cblas::UNIT],
    )
    .unwrap();
    assert_eq!(trsm.given_chars(), b"RLCU");
    assert_eq!((trsm.m, trsm.n), (5, 2));
    let (hemm, _) = row(Hemm, &[cblas::RIGHT, cblas::LOWER]).unwrap();
    assert_eq!(hemm.given_chars(), b"LU");
    // The updates' transposes turn; her2k's α is conjugated.
    let (her2k, _) = row(Her2k, &[cblas::UPPER, cblas::NO_TRANS]).unwrap();
    assert_eq!(her2k.given_chars(), b"LC");
    assert_eq!(her2k.alpha, Complex::new(1.0, -2.0));
    let (herk, _) = row(Herk, &[cblas::LOWER, cblas::CONJ_TRANS]).unwrap();
    assert_eq!(
        (herk.given_chars(), herk.alpha),
        (&b"UN"[..], Complex::new(1.0, 2.0))
    );
    let (syrk, _) = row(Syrk, &[cblas::UPPER, cblas::TRANS]).unwrap();
    assert_eq!(syrk.given_chars(), b"LN");
    // A transpose the row-major form cannot express is parameter 3; a wrong enumeration is
    // its place after the layout.
    assert_eq!(
        row(Herk, &[cblas::UPPER, cblas::TRANS]).unwrap_err().number,
        3
    );
    assert_eq!(
        row(Syrk, &[cblas::UPPER, cblas::CONJ_TRANS])
            .unwrap_err()
            .number,
        3
    );
    assert_eq!(
        row(Trmm, &[cblas::LEFT, cblas::UPPER, cblas::NO_TRANS, 7])
            .unwrap_err()
            .number,
        5
    );
    assert_eq!(row(Symm, &[7, cblas::UPPER]).unwrap_err().number, 2);
    let real = Call::<f64> {
        m: 2,
        n: 2,
        k: 2,
        ..Call::new(Syrk)
    };
    let (dsyrk, _) = real
        .from_cblas(cblas::ROW_MAJOR, &[cblas::UPPER, cblas::CONJ_TRANS])
        .unwrap();
    assert_eq!(
        dsyrk.given_chars(),
        b"LN",
        "dsyrk's conjugate transpose is its transpose"
    );
    // Column-major calls keep their characters, even those the Fortran check refuses.
    let (col, row_major) = base(Herk)
        .from_cblas(cblas::COL_MAJOR, &[cblas::UPPER, cblas::TRANS])
        .unwrap();
    assert!(!row_major);
    assert_eq!((col.given_chars(), col.check()), (&b"UT"[..], Err(2)));
}

#[test]
fn the_last_resort_solves_a_triangular_system() {
    // op(A)·X = 2·B, A 3×3 upper (lda 4) stored with junk below, B 3×2 (ldb 3): X exact.
    let a = [2.0, 9.0, 9.0, 9.0, 1.0, 4.0, 9.0, 9.0, -1.0, 3.0, 2.0, 9.0];
    let x = [1.0, -2.0, 3.0, 4.0, 0.0, -1.0];
    // B = A·X / 2, column by column (A's upper triangle: [[2, 1, -1], [0, 4, 3], [0, 0, 2]]).
    let mut b: Vec<f64> = (0..2)
        .flat_map(|j| {
            let x = &x[3 * j..3 * j + 3];
            [
                (2.0 * x[0] + x[1] - x[2]) / 2.0,
                (4.0 * x[1] + 3.0 * x[2]) / 2.0,
                (2.0 * x[2]) / 2.0,
            ]
        })
        .collect();
    let call = Call {
        chars: *b"LUNN",
        m: 3,
        n: 2,
        alpha: 2.0,
        a: a.as_ptr(),
        lda: 4,
        c: b.as_mut_ptr(),
        ldc: 3,
        ..Call::new(Routine::Trsm)
    };
    assert_eq!(call.check(), Ok(Work::Product));
    // SAFETY: the buffers hold what the call describes.
    unsafe { forward(&call, Work::Product) };
    assert_eq!(b, x);
}

#[test]
fn an_update_without_a_product_reads_neither_a_nor_the_other_triangle() {
    // zherk, K = 0, A null (legal: it is not referenced), β = 2 on the upper triangle of a 2×2
    // C (ldc 3) whose diagonal's imaginary parts are NaN (they need not be set).
    let nan = f64::NAN;
    let mut c = [
        Complex::new(1.0, nan),
        Complex::new(7.0, 7.0),
        Complex::new(9.0, 9.0),
        Complex::new(2.0, 3.0),
        Complex::new(4.0, nan),
        Complex::new(9.0, 9.0),
    ];
    let call = Call {
        chars: *b"UNNN",
        m: 2,
        n: 2,
        k: 0,
        alpha: Complex::new(1.0, 0.0),
        lda: 2,
        beta: Complex::new(2.0, 0.0),
        c: c.as_mut_ptr(),
        ldc: 3,
        ..Call::new(Routine::Herk)
    };
    assert_eq!(call.check(), Ok(Work::Scale));
    // SAFETY: C holds what the call describes; A is never read.
    unsafe { forward(&call, Work::Scale) };
    assert_eq!(
        c.map(|z| (z.re, z.im)),
        [
            (2.0, 0.0),
            (7.0, 7.0),
            (9.0, 9.0),
            (4.0, 6.0),
            (8.0, 0.0),
            (9.0, 9.0)
        ],
        "upper triangle scaled, diagonal real, lower triangle and padding untouched"
    );
}
