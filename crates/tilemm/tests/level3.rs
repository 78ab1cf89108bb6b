//! The Level-3 routines (`tilemm::level3`) against their definitions, computed here from the
//! full matrices in complex f64: exact on integer data for every side, triangle, transpose,
//! conjugate and diagonal, for block sizes that split small matrices many ways, on the CPU
//! route, on the test device and with the loop `Definition`. The triangle a routine must not
//! write holds NaN and must keep it; β = 0 must not read a C of NaN.

use ndarray::{Array2, ArrayView2};
use tilemm::level3::{
    Definition, Level3, Multiply, OnRoute, Operand, Scalar, Side, Triangular, Uplo,
};
use tilemm::{Backend, Complex, Gemm};

mod common;

type C64 = Complex<f64>;

/// Made from a complex f64 (a real type keeps the real part: its data have none other).
trait Make: Scalar {
    const COMPLEX: bool;
    fn make(z: C64) -> Self;
}
impl Make for f32 {
    const COMPLEX: bool = false;
    fn make(z: C64) -> Self {
        z.re as f32
    }
}
impl Make for f64 {
    const COMPLEX: bool = false;
    fn make(z: C64) -> Self {
        z.re
    }
}
impl Make for Complex<f32> {
    const COMPLEX: bool = true;
    fn make(z: C64) -> Self {
        Complex::new(z.re as f32, z.im as f32)
    }
}
impl Make for C64 {
    const COMPLEX: bool = true;
    fn make(z: C64) -> Self {
        z
    }
}

/// A rows×cols matrix of small integers (Gaussian integers for a complex type).
fn integers<T: Make>(rows: usize, cols: usize, seed: usize) -> Array2<T> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        let v = (i * 7 + j * 3 + seed * 5) % 9;
        let re = v as f64 - 4.0;
        let im = if T::COMPLEX {
            ((i + 2 * j + seed) % 5) as f64 - 2.0
        } else {
            0.0
        };
        T::make(C64::new(re, im))
    })
}

fn widen<T: Scalar>(x: ArrayView2<T>) -> Array2<C64> {
    x.map(|v| v.widen())
}

/// The scalars tried: 0, 1 and a value with an imaginary part where the type has one.
fn scalars<T: Make>() -> Vec<T> {
    let mut s = vec![T::make(C64::new(0.0, 0.0)), T::make(C64::new(1.0, 0.0))];
    s.push(T::make(C64::new(2.0, if T::COMPLEX { -1.0 } else { 0.0 })));
    s
}

const NAN: C64 = C64::new(f64::NAN, f64::NAN);
const SHAPES: [(usize, usize); 4] = [(0, 3), (1, 1), (5, 7), (7, 4)];
const DEPTHS: [usize; 3] = [0, 1, 5];

/// `got` equals `want` exactly, NaN where `want` has NaN.
fn same<T: Scalar>(got: ArrayView2<T>, want: &Array2<C64>, what: &str) {
    for ((i, j), x) in got.indexed_iter() {
        let (g, w) = (x.widen(), want[[i, j]]);
        let ok = if w.re.is_nan() { g.re.is_nan() } else { g == w };
        assert!(ok, "{what}: [{i}, {j}] is {g}, want {w}");
    }
}

/// C's start: integers, or NaN where β = 0 (never read then).
fn start<T: Make>(rows: usize, cols: usize, beta: T) -> Array2<T> {
    if beta == T::zero() {
        Array2::from_elem((rows, cols), T::make(NAN))
    } else {
        integers(rows, cols, 3)
    }
}

/// The full matrix whose `uplo` triangle `a` stores (Hermitian: the diagonal real).
fn full(a: &Array2<C64>, uplo: Uplo, hermitian: bool) -> Array2<C64> {
    Array2::from_shape_fn(a.dim(), |(i, j)| {
        if i == j && hermitian {
            C64::new(a[[i, i]].re, 0.0)
        } else if uplo.holds(i, j) {
            a[[i, j]]
        } else if hermitian {
            a[[j, i]].conj()
        } else {
            a[[j, i]]
        }
    })
}

/// The transposes the routines take: N, T and (complex) C.
fn ops<T: Make>() -> Vec<char> {
    if T::COMPLEX {
        vec!['N', 'T', 'C']
    } else {
        vec!['N', 'T']
    }
}

/// op(x) as an operand over `store` (x itself for N, else `store` holds x's transpose).
fn operand<T: Scalar>(store: &Array2<T>, op: char) -> Operand<'_, T> {
    match op {
        'N' => Operand::new(store.view()),
        'T' => Operand::new(store.view()).t(),
        _ => Operand::new(store.view()).h(),
    }
}

/// op(x) from `store`, in C64.
fn op_of(store: &Array2<C64>, op: char) -> Array2<C64> {
    match op {
        'N' => store.clone(),
        'T' => store.t().to_owned(),
        _ => store.t().map(|z| z.conj()),
    }
}

/// Every routine, every option, against its definition, with `multiply` at block size `block`.
fn every_routine<T: Make>(multiply: &mut dyn Multiply<T>, block: Option<usize>, what: &str) {
    let mut l3 = Level3::new(&mut *multiply);
    if let Some(b) = block {
        l3 = l3.block(b);
    }
    let hermitians: &[bool] = if T::COMPLEX { &[false, true] } else { &[false] };
    let scalars = scalars::<T>();
    for &(m, n) in &SHAPES {
        for &alpha in &scalars {
            for &beta in &scalars {
                let (al, be) = (alpha.widen(), beta.widen());
                // symm and hemm.
                for side in [Side::Left, Side::Right] {
                    for uplo in [Uplo::Upper, Uplo::Lower] {
                        for &hermitian in hermitians {
                            let order = if side == Side::Left { m } else { n };
                            let a = integers::<T>(order, order, 1);
                            let b = integers::<T>(m, n, 2);
                            let mut c = start::<T>(m, n, beta);
                            let c0 = widen(c.view());
                            let fa = full(&widen(a.view()), uplo, hermitian);
                            let fb = widen(b.view());
                            let product = if side == Side::Left {
                                fa.dot(&fb)
                            } else {
                                fb.dot(&fa)
                            };
                            let want = Array2::from_shape_fn((m, n), |(i, j)| {
                                al * product[[i, j]]
                                    + if beta == T::zero() {
                                        C64::new(0.0, 0.0)
                                    } else {
                                        be * c0[[i, j]]
                                    }
                            });
                            let case = format!("{what}: symm {side:?} {uplo:?} hermitian {hermitian} {m}×{n} α {al} β {be}");
                            l3.symm(
                                side,
                                uplo,
                                hermitian,
                                alpha,
                                a.view(),
                                b.view(),
                                beta,
                                c.view_mut(),
                            )
                            .unwrap_or_else(|e| panic!("{case}: {e}"));
                            same(c.view(), &want, &case);
                        }
                    }
                }
                // The rank-k and rank-2k updates of C (m×m), over depth k.
                for &k in &DEPTHS {
                    for uplo in [Uplo::Upper, Uplo::Lower] {
                        for &hermitian in hermitians {
                            // herk's and her2k's β (and herk's α) are real.
                            if hermitian && (be.im != 0.0 || (al.im != 0.0 && k == 1)) {
                                continue;
                            }
                            for op in ops::<T>() {
                                if op == if hermitian { 'T' } else { 'C' } {
                                    continue;
                                }
                                let store = |seed| {
                                    if op == 'N' {
                                        integers::<T>(m, k, seed)
                                    } else {
                                        integers::<T>(k, m, seed)
                                    }
                                };
                                let (a, b) = (store(1), store(2));
                                let (pa, pb) =
                                    (op_of(&widen(a.view()), op), op_of(&widen(b.view()), op));
                                let tr = |x: &Array2<C64>| {
                                    if hermitian {
                                        x.t().map(|z| z.conj())
                                    } else {
                                        x.t().to_owned()
                                    }
                                };
                                let c_start = {
                                    let mut c = start::<T>(m, m, beta);
                                    // The triangle not written holds NaN.
                                    for ((i, j), x) in c.indexed_iter_mut() {
                                        if !uplo.holds(i, j) {
                                            *x = T::make(NAN);
                                        }
                                    }
                                    c
                                };
                                let c0 = widen(c_start.view());
                                let finish = |sum: Array2<C64>| {
                                    Array2::from_shape_fn((m, m), |(i, j)| {
                                        if !uplo.holds(i, j) {
                                            return NAN;
                                        }
                                        let mut z = sum[[i, j]]
                                            + if beta == T::zero() {
                                                C64::new(0.0, 0.0)
                                            } else {
                                                be * c0[[i, j]]
                                            };
                                        if hermitian && i == j {
                                            z.im = 0.0;
                                        }
                                        z
                                    })
                                };
                                // rank k (herk's α real: the real part of α is the α given).
                                if !(hermitian && al.im != 0.0) {
                                    let mut c = c_start.clone();
                                    let case = format!("{what}: rank k {uplo:?} hermitian {hermitian} op {op} n {m} k {k} α {al} β {be}");
                                    l3.rank_k(
                                        uplo,
                                        hermitian,
                                        alpha,
                                        operand(&a, op),
                                        beta,
                                        c.view_mut(),
                                    )
                                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                                    let want = if (al == C64::new(0.0, 0.0) || k == 0)
                                        && be == C64::new(1.0, 0.0)
                                    {
                                        c0.clone()
                                    } else {
                                        finish(pa.dot(&tr(&pa)).map(|z| z * al))
                                    };
                                    same(c.view(), &want, &case);
                                }
                                let mut c = c_start.clone();
                                let case = format!("{what}: rank 2k {uplo:?} hermitian {hermitian} op {op} n {m} k {k} α {al} β {be}");
                                l3.rank_2k(
                                    uplo,
                                    hermitian,
                                    alpha,
                                    operand(&a, op),
                                    operand(&b, op),
                                    beta,
                                    c.view_mut(),
                                )
                                .unwrap_or_else(|e| panic!("{case}: {e}"));
                                let second = if hermitian { al.conj() } else { al };
                                let want = if (al == C64::new(0.0, 0.0) || k == 0)
                                    && be == C64::new(1.0, 0.0)
                                {
                                    c0.clone()
                                } else {
                                    finish(
                                        pa.dot(&tr(&pb)).map(|z| z * al)
                                            + pb.dot(&tr(&pa)).map(|z| z * second),
                                    )
                                };
                                same(c.view(), &want, &case);
                            }
                        }
                    }
                }
                if beta != scalars[1] {
                    continue;
                }
                // trmm and trsm (no β): op(A) triangular, its diagonal powers of two (and i).
                for side in [Side::Left, Side::Right] {
                    for uplo in [Uplo::Upper, Uplo::Lower] {
                        for op in ops::<T>() {
                            for unit in [false, true] {
                                let order = if side == Side::Left { m } else { n };
                                let diagonal =
                                    [(1.0, 0.0), (2.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (-2.0, 0.0)];
                                let mut a = integers::<T>(order, order, 4);
                                for i in 0..order {
                                    let (re, im) = diagonal[i % if T::COMPLEX { 5 } else { 3 }];
                                    a[[i, i]] = if unit {
                                        T::make(NAN)
                                    } else {
                                        T::make(C64::new(re, im))
                                    };
                                }
                                // The stored triangle's other side holds NaN, never read.
                                for ((i, j), x) in a.indexed_iter_mut() {
                                    if i != j && !uplo.holds(i, j) {
                                        *x = T::make(NAN);
                                    }
                                }
                                let stored = Array2::from_shape_fn((order, order), |(i, j)| {
                                    if i == j && unit {
                                        C64::new(1.0, 0.0)
                                    } else if uplo.holds(i, j) {
                                        a[[i, j]].widen()
                                    } else {
                                        C64::new(0.0, 0.0)
                                    }
                                });
                                let t = op_of(&stored, op);
                                let effective = if op == 'N' { uplo } else { uplo.flip() };
                                let tri = Triangular {
                                    a: operand(&a, op),
                                    uplo: effective,
                                    unit,
                                };
                                let x = integers::<T>(m, n, 5);
                                let fx = widen(x.view());
                                let tx = if side == Side::Left {
                                    t.dot(&fx)
                                } else {
                                    fx.dot(&t)
                                };
                                let case = format!(
                                    "{what}: {side:?} {uplo:?} op {op} unit {unit} {m}×{n} α {al}"
                                );
                                // trmm: B = α·op(A)·X.
                                let mut b = x.clone();
                                l3.trmm(side, tri, alpha, b.view_mut())
                                    .unwrap_or_else(|e| panic!("trmm {case}: {e}"));
                                same(b.view(), &tx.map(|z| z * al), &format!("trmm {case}"));
                                // trsm: op(A)·Y = α·(op(A)·X) gives Y = α·X exactly.
                                let mut b = tx.map(|&z| T::make(z));
                                l3.trsm(side, tri, alpha, b.view_mut())
                                    .unwrap_or_else(|e| panic!("trsm {case}: {e}"));
                                same(b.view(), &fx.map(|z| z * al), &format!("trsm {case}"));
                            }
                        }
                    }
                }
            }
        }
    }
}

fn cpu() -> OnRoute<'static> {
    OnRoute::new(Gemm::new().device(Backend::Cpu, None))
}

fn on_cpu<T: Make>(name: &str) {
    for block in [None, Some(1), Some(2), Some(3)] {
        every_routine::<T>(&mut cpu(), block, &format!("{name} cpu block {block:?}"));
    }
}

#[test]
fn f64_on_the_cpu_route() {
    on_cpu::<f64>("f64");
}

#[test]
fn f32_on_the_cpu_route() {
    on_cpu::<f32>("f32");
}

#[test]
fn complex128_on_the_cpu_route() {
    on_cpu::<C64>("complex128");
}

#[test]
fn complex64_on_the_cpu_route() {
    on_cpu::<Complex<f32>>("complex64");
}

#[test]
fn the_definition() {
    every_routine::<C64>(&mut Definition, Some(2), "complex128 definition");
    every_routine::<f64>(&mut Definition, None, "f64 definition");
}

/// On the test device (wgpu on lavapipe here, `TILEMM_TEST_BACKEND` names another): every
/// GEMM of the routines ran there.
#[test]
fn on_the_test_device() {
    let backend = common::backend();
    let mut on = OnRoute::new(Gemm::new().device(backend, None));
    every_routine::<Complex<f32>>(&mut on, Some(3), &format!("complex64 {backend}"));
    every_routine::<f64>(&mut on, None, &format!("f64 {backend}"));
    assert!(!on.runs.is_empty(), "no GEMM ran");
    for run in &on.runs {
        assert!(
            matches!(run.route, tilemm::Route::Gpu { .. }),
            "a GEMM ran on {}",
            run.route
        );
    }
}

/// A diagonal past 1e154 (LAPACK's scaled test matrices): trsm's division does not overflow,
/// as the textbook complex division's |d|² would.
#[test]
fn complex_division_is_scaled() {
    let a = ndarray::arr2(&[[C64::new(3e200, 4e200)]]);
    let x = C64::new(1.0, 2.0);
    let mut b = ndarray::arr2(&[[a[[0, 0]] * x]]);
    let t = Triangular {
        a: Operand::new(a.view()),
        uplo: Uplo::Upper,
        unit: false,
    };
    Level3::new(Definition)
        .trsm(Side::Left, t, C64::new(1.0, 0.0), b.view_mut())
        .unwrap();
    let got = b[[0, 0]];
    assert!((got - x).norm() < 1e-14, "{got}");
}

/// A Hermitian diagonal's imaginary parts need not be set (the reference's words): NaN there
/// is neither read nor kept, by the update and by its α = 0 scaling.
#[test]
fn a_hermitian_diagonal_is_read_as_real() {
    let a = integers::<C64>(3, 2, 1);
    for alpha in [1.0, 0.0] {
        let mut c = integers::<C64>(3, 3, 2);
        let c0 = c.clone();
        for i in 0..3 {
            c[[i, i]].im = f64::NAN;
        }
        let (al, be) = (C64::new(alpha, 0.0), C64::new(2.0, 0.0));
        Level3::new(cpu())
            .rank_k(
                Uplo::Upper,
                true,
                al,
                Operand::new(a.view()),
                be,
                c.view_mut(),
            )
            .unwrap();
        let full = a.dot(&a.t().map(|z| z.conj()));
        for i in 0..3 {
            let want = al.re * full[[i, i]].re + 2.0 * c0[[i, i]].re;
            assert_eq!(c[[i, i]], C64::new(want, 0.0), "α {alpha}: C[{i}, {i}]");
        }
    }
}

/// A zero right side on a singular diagonal stays zero, as in the reference (no 0/0).
#[test]
fn a_zero_unknown_is_not_divided() {
    let a = ndarray::arr2(&[[0.0, 1.0], [0.0, 2.0]]);
    let mut b = ndarray::arr2(&[[0.0], [4.0]]);
    let t = Triangular {
        a: Operand::new(a.view()),
        uplo: Uplo::Upper,
        unit: false,
    };
    Level3::new(cpu())
        .trsm(Side::Left, t, 1.0, b.view_mut())
        .unwrap();
    // x₂ = 4/2 = 2; x₁ = (0 − 1·2)/0 = −inf, as the reference divides.
    assert_eq!(b[[1, 0]], 2.0);
    assert_eq!(b[[0, 0]], f64::NEG_INFINITY);
    let mut zero = ndarray::arr2(&[[0.0], [0.0]]);
    Level3::new(cpu())
        .trsm(Side::Left, t, 1.0, zero.view_mut())
        .unwrap();
    assert_eq!(zero, ndarray::arr2(&[[0.0], [0.0]]));
}
