//! Device arrays (`tilemm::DeviceArray`) on the test device (wgpu on lavapipe here,
//! `TILEMM_TEST_BACKEND` names another): uploads, chains of products that stay on the device
//! with no byte moved, views (transposes, strided slices, offsets, broadcast batches), C
//! overlapping an operand, K = 0, read-back, and the refusals. Integer data: every result is
//! exact.

use ndarray::{s, Array2, Array3, Axis};
use tilemm::{DeviceArray, Gemm, KernelChoice, MatrixDesc};

mod common;

fn gemm() -> Gemm<'static> {
    Gemm::new().on(common::gpu())
}

fn ints(rows: usize, cols: usize, seed: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        ((i * 7 + j * 3 + seed) % 9) as f32 - 4.0
    })
}

fn on_device(x: &Array2<f32>) -> DeviceArray<'static, f32> {
    gemm().to_device_2d(x.view()).unwrap()
}

fn host(x: &DeviceArray<f32>) -> Array2<f32> {
    x.to_host().unwrap().index_axis_move(Axis(0), 0)
}

#[test]
fn a_chain_of_products_stays_on_the_device_and_comes_back_exact() {
    println!("backend: {}", common::backend());
    let (a, b, w) = (ints(70, 45, 1), ints(45, 33, 2), ints(33, 20, 3));
    let (da, db, dw) = (on_device(&a), on_device(&b), on_device(&w));
    let c = gemm().product_device(&da, &db).unwrap();
    let run = gemm().write_device(&c, &dw, &gemm().device_empty::<f32>((1, 70, 20)).unwrap());
    assert_eq!(
        run.unwrap().moved,
        tilemm::Moved::default(),
        "no byte crosses the link"
    );
    let d = gemm().product_device(&c, &dw).unwrap();
    assert_eq!(host(&d), a.dot(&b).dot(&w));
    // Transposed views of device arrays: (A·B)ᵀ·(A·B).
    let e = gemm().product_device(&c.t(), &c).unwrap();
    let ab = a.dot(&b);
    assert_eq!(host(&e), ab.t().dot(&ab));
}

#[test]
fn column_major_and_strided_uploads_keep_their_layout_and_views_compute_in_place() {
    let a = ints(40, 31, 4);
    let b_f = ints(31, 26, 5)
        .reversed_axes()
        .as_standard_layout()
        .reversed_axes()
        .to_owned();
    assert!(b_f.t().is_standard_layout(), "B is in Fortran order");
    let (da, db) = (on_device(&a), gemm().to_device_2d(b_f.view()).unwrap());
    assert_eq!(
        db.desc().row_stride,
        1,
        "a Fortran-order upload stays column-major"
    );
    assert_eq!(host(&db), b_f);
    // Every other row of A and a block of B's columns: strided views, no copy.
    let rows = da
        .view(
            1,
            MatrixDesc {
                rows: 20,
                row_stride: 62,
                ..da.desc()
            },
        )
        .unwrap();
    let cols = db
        .view(
            1,
            MatrixDesc {
                cols: 10,
                offset: db.desc().offset + 5 * db.desc().col_stride,
                ..db.desc()
            },
        )
        .unwrap();
    let c = gemm().product_device(&rows, &cols).unwrap();
    assert_eq!(
        host(&c),
        a.slice(s![..;2, ..]).dot(&b_f.slice(s![.., 5..15]))
    );
}

#[test]
fn alpha_beta_batches_and_an_output_block_of_a_larger_array() {
    let a = Array3::from_shape_fn((3, 17, 12), |(e, i, j)| ((e + i * 2 + j) % 7) as f64 - 3.0);
    let b = ints(12, 9, 6).mapv(f64::from);
    let mut big = Array2::from_shape_fn((60, 30), |(i, j)| (i as f64) - (j as f64));
    let da = gemm().to_device(a.view()).unwrap();
    let db = gemm().to_device_2d(b.view()).unwrap();
    let dbig = gemm().to_device_2d(big.view()).unwrap();
    // Three 17×9 blocks of C stacked in rows 0.., 20.., 40.. of `big`, columns 4..13.
    let c = dbig
        .view(
            3,
            MatrixDesc {
                rows: 17,
                cols: 9,
                offset: 4,
                batch_stride: 20 * 30,
                ..dbig.desc()
            },
        )
        .unwrap();
    gemm()
        .alpha(0.5)
        .beta(-2.0)
        .write_device(&da, &db, &c)
        .unwrap();
    for e in 0..3 {
        let mut block = big.slice_mut(s![20 * e..20 * e + 17, 4..13]);
        let want = a.index_axis(Axis(0), e).dot(&b) * 0.5 - &block * 2.0;
        block.assign(&want);
    }
    assert_eq!(dbig.to_host().unwrap().index_axis(Axis(0), 0), big);
}

#[test]
fn an_output_overlapping_an_operand_reads_the_operand_before_writing() {
    // C = A·B written over A itself (square B): every kernel must see A's old values.
    let (a, b) = (ints(48, 48, 7), ints(48, 48, 8));
    let (da, db) = (on_device(&a), on_device(&b));
    let tile = KernelChoice::Fixed(tilemm::Kernel::Tiled.default_config());
    gemm().kernel(tile).write_device(&da, &db, &da).unwrap();
    assert_eq!(host(&da), a.dot(&b));
    // β = 1 over a transposed view of B: C = A·B + C with C sharing B's memory.
    let (da, db) = (on_device(&a), on_device(&b));
    let bt = db.t();
    gemm().beta(1.0).write_device(&da, &db, &bt).unwrap();
    assert_eq!(host(&bt), a.dot(&b) + b.t());
}

#[test]
fn k_zero_scales_c_and_empty_products_do_nothing() {
    let c0 = ints(5, 6, 9);
    let dc = on_device(&c0);
    let (da, db) = (
        gemm().device_empty::<f32>((1, 5, 0)).unwrap(),
        gemm().device_empty::<f32>((1, 0, 6)).unwrap(),
    );
    gemm().beta(3.0).write_device(&da, &db, &dc).unwrap();
    assert_eq!(host(&dc), &c0 * 3.0);
    let none = gemm()
        .to_device(Array3::<f32>::zeros((1, 0, 6)).view())
        .unwrap();
    let dk = gemm().device_empty::<f32>((1, 6, 4)).unwrap();
    let run = gemm().write_device(&none, &dk, &gemm().device_empty::<f32>((1, 0, 4)).unwrap());
    assert!(run.is_ok());
    assert_eq!(none.to_host().unwrap().dim(), (1, 0, 6));
}

#[test]
fn refusals_are_typed_errors() {
    let da = on_device(&ints(8, 5, 1));
    let db = on_device(&ints(6, 4, 2));
    let e = gemm().product_device(&da, &db).unwrap_err();
    assert_eq!(e.kind(), tilemm::ErrorKind::Shape, "{e}");
    let e = da
        .view(
            1,
            MatrixDesc {
                rows: 9,
                ..da.desc()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("past its device buffer"), "{e}");
    // Another session of the same backend is another device as far as buffers go.
    let other = tilemm::GpuSession::open(common::backend(), None).unwrap();
    let other = Box::leak(Box::new(other));
    let dx = Gemm::new()
        .on(other)
        .to_device_2d(ints(5, 4, 3).view())
        .unwrap();
    let e = gemm().product_device(&da, &dx).unwrap_err();
    assert_eq!(e.kind(), tilemm::ErrorKind::Argument, "{e}");
    assert!(e.to_string().contains("share one device"), "{e}");
    let e = Gemm::new()
        .device(tilemm::Backend::Cpu, None)
        .to_device_2d(ints(2, 2, 0).view())
        .unwrap_err();
    assert_eq!(e.kind(), tilemm::ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("device arrays live on a GPU"), "{e}");
}
