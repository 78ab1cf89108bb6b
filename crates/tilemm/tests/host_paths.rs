//! The front door's host paths: operands read where they lie and C written in place, on the
//! CPU route and on the test device (lavapipe without a GPU), whole and in panels (the tiled
//! transfers a product too large for one binding takes). Views of every kind (contiguous,
//! transposed, blocks of larger arrays, steps on both axes, reversed, zero strides, batches
//! broadcast or strided), with β = 0 and β ≠ 0, on integer data: every result must be exact,
//! against an f64 product computed here, and no element outside C may change.

mod common;

use common::gpu;
use ndarray::{s, Array2, Array3, ArrayView2, ArrayView3, ArrayViewMut3, Axis};
use tilemm::{Backend, Gemm, GpuSession, Kernel, Plan};

/// Small integers, different for each (seed, i, j): exact in f32 sums of a few thousand terms.
fn ints(rows: usize, cols: usize, seed: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        ((i * 7 + j * 13 + seed * 5) % 9) as f32 - 4.0
    })
}

fn wide(x: ArrayView2<f32>) -> Array2<f64> {
    x.mapv(f64::from)
}

/// The views of an m×k matrix the tests take, with their names: each holds `ints(m, k, seed)`
/// (or, for the zero-stride one, a row repeated).
fn views(m: usize, k: usize, seed: usize) -> Vec<(&'static str, Array2<f32>, Layout)> {
    let plain = ints(m, k, seed);
    vec![
        ("contiguous", plain.clone(), Layout::Plain),
        ("transposed", plain.t().to_owned(), Layout::Transposed),
        ("a block of a larger array", plain.clone(), Layout::Block),
        ("steps on both axes", plain.clone(), Layout::Steps),
        ("reversed rows", plain.clone(), Layout::Reversed),
        (
            "a row repeated (zero stride)",
            plain.row(0).to_owned().insert_axis(Axis(0)),
            Layout::Repeated(m),
        ),
    ]
}

/// How a view is made from its data.
#[derive(Clone, Copy)]
enum Layout {
    Plain,
    /// The data is the transpose: viewed through `.t()`.
    Transposed,
    /// Inside a larger array (a leading dimension larger than the columns).
    Block,
    /// Every 2nd row and 3rd column of a larger array.
    Steps,
    /// Stored bottom row first, viewed with a negative row stride.
    Reversed,
    /// One row, broadcast to this many rows.
    Repeated(usize),
}

/// `data` viewed as `layout` says, in `store` (which keeps the larger arrays alive).
fn view<'s>(
    data: &Array2<f32>,
    layout: Layout,
    store: &'s mut Option<Array2<f32>>,
) -> ArrayView2<'s, f32> {
    let (r, c) = data.dim();
    match layout {
        Layout::Plain => store.insert(data.clone()).view(),
        Layout::Transposed => store.insert(data.clone()).t(),
        Layout::Block => {
            let mut big = Array2::from_elem((r + 5, c + 7), f32::NAN);
            big.slice_mut(s![2..2 + r, 3..3 + c]).assign(data);
            store.insert(big).slice(s![2..2 + r, 3..3 + c])
        }
        Layout::Steps => {
            let mut big = Array2::from_elem((2 * r, 3 * c), f32::NAN);
            big.slice_mut(s![..;2, ..;3]).assign(data);
            store.insert(big).slice(s![..;2, ..;3])
        }
        Layout::Reversed => {
            let flipped = data.slice(s![..;-1, ..]).to_owned();
            store.insert(flipped).slice(s![..;-1, ..])
        }
        Layout::Repeated(rows) => store.insert(data.clone()).broadcast((rows, c)).unwrap(),
    }
}

/// The routes checked: the CPU; the test device whole with the tiled kernel; the test device
/// with 4 KiB bindings, where every product here runs in panels and slabs of K.
fn routes() -> Vec<(&'static str, Gemm<'static>)> {
    static SMALL: std::sync::OnceLock<GpuSession> = std::sync::OnceLock::new();
    let small = SMALL.get_or_init(|| common::with_bindings(4096));
    let tiled = Plan::default_for(Kernel::Tiled);
    vec![
        ("cpu", Gemm::new().device(Backend::Cpu, None)),
        ("device", Gemm::new().on(gpu()).plan(tiled)),
        ("device in panels", Gemm::new().on(small).plan(tiled)),
    ]
}

#[test]
fn every_view_of_a_and_b_gives_the_exact_product_on_every_route() {
    let (m, k, n) = (37, 300, 29);
    for (route, gemm) in routes() {
        for (a_name, a_data, a_layout) in views(m, k, 1) {
            for (b_name, b_data, b_layout) in views(k, n, 2) {
                let (mut sa, mut sb) = (None, None);
                let a = view(&a_data, a_layout, &mut sa);
                let b = view(&b_data, b_layout, &mut sb);
                let want = wide(a).dot(&wide(b));
                let got = gemm
                    .product(a, b)
                    .unwrap_or_else(|e| panic!("{route}: A {a_name}, B {b_name}: {e}"));
                assert_eq!(wide(got.view()), want, "{route}: A {a_name}, B {b_name}");
            }
        }
    }
}

#[test]
fn c_is_written_in_place_in_every_layout_with_beta_and_nothing_else_changes() {
    let (m, k, n) = (33, 260, 21);
    let a = ints(m, k, 3);
    let b = ints(k, n, 4);
    let c0 = ints(m, n, 5);
    for (route, gemm) in routes() {
        for beta in [0.0, -2.0] {
            for (c_name, layout) in [
                ("contiguous", Layout::Plain),
                ("a block of a larger array", Layout::Block),
                ("column-major", Layout::Transposed),
                ("steps on both axes", Layout::Steps),
                ("reversed rows", Layout::Reversed),
            ] {
                let data = match layout {
                    Layout::Transposed => c0.t().to_owned(),
                    _ => c0.clone(),
                };
                let mut store = None;
                let _ = view(&data, layout, &mut store);
                let mut whole = store.take().unwrap();
                let before = whole.clone();
                let want = 3.0 * wide(a.view()).dot(&wide(b.view())) + beta * wide(c0.view());
                {
                    let c = match layout {
                        Layout::Plain => whole.view_mut(),
                        Layout::Transposed => whole.view_mut().reversed_axes(),
                        Layout::Block => whole.slice_mut(s![2..2 + m, 3..3 + n]),
                        Layout::Steps => whole.slice_mut(s![..;2, ..;3]),
                        Layout::Reversed => whole.slice_mut(s![..;-1, ..]),
                        Layout::Repeated(_) => unreachable!(),
                    };
                    let run = gemm
                        .alpha(3.0)
                        .beta(beta)
                        .write(a.view(), b.view(), c)
                        .unwrap_or_else(|e| panic!("{route}: C {c_name}, beta {beta}: {e}"));
                    // The routes are what they say: whole, or in panels.
                    let panels = run.schedule.map(|s| !s.panels.is_whole());
                    let expected = match route {
                        "cpu" => None,
                        "device" => Some(false),
                        _ => Some(true),
                    };
                    assert_eq!(panels, expected, "{route}: in panels");
                }
                let got = match layout {
                    Layout::Plain => whole.view(),
                    Layout::Transposed => whole.view().reversed_axes(),
                    Layout::Block => whole.slice(s![2..2 + m, 3..3 + n]),
                    Layout::Steps => whole.slice(s![..;2, ..;3]),
                    Layout::Reversed => whole.slice(s![..;-1, ..]),
                    Layout::Repeated(_) => unreachable!(),
                };
                assert_eq!(wide(got), want, "{route}: C {c_name}, beta {beta}");
                // Everything outside C as it was (NaN included: compared bit for bit).
                let mut outside = whole.clone();
                let mut untouched = before.clone();
                for x in [&mut outside, &mut untouched] {
                    let block = match layout {
                        Layout::Block => x.slice_mut(s![2..2 + m, 3..3 + n]),
                        Layout::Steps => x.slice_mut(s![..;2, ..;3]),
                        _ => x.view_mut(),
                    };
                    let mut block = block;
                    block.fill(0.0);
                }
                let bits = |x: &Array2<f32>| x.mapv(f32::to_bits);
                assert_eq!(
                    bits(&outside),
                    bits(&untouched),
                    "{route}: C {c_name}: elements outside C changed"
                );
            }
        }
    }
}

#[test]
fn batches_broadcast_and_strided_batches_are_exact_on_every_route() {
    let (batch, m, k, n) = (4, 19, 140, 23);
    let a = Array3::from_shape_fn((batch, m, k), |(e, i, j)| {
        ((e * 3 + i * 5 + j) % 7) as f32 - 3.0
    });
    let b = ints(k, n, 6);
    let b1 = b.view().insert_axis(Axis(0));
    // A batch axis with steps: every other matrix of a larger batch.
    let mut a_big = Array3::from_elem((2 * batch, m, k), f32::NAN);
    a_big.slice_mut(s![..;2, .., ..]).assign(&a);
    let a_steps = a_big.slice(s![..;2, .., ..]);
    for (route, gemm) in routes() {
        for (a_name, a_view) in [("contiguous", a.view()), ("every other matrix", a_steps)] {
            let mut c = Array3::from_elem((batch, m, n), 1.0f32);
            let c_view: ArrayViewMut3<f32> = c.view_mut();
            let run = gemm
                .beta(0.5)
                .write_batched(a_view, b1, c_view)
                .unwrap_or_else(|e| panic!("{route}: A {a_name}: {e}"));
            // A contiguous stack over one B (numpy's `x @ w`) runs as one product of all its
            // rows; every other matrix of a larger batch does not go on from the last's rows.
            if let Some(schedule) = run.schedule {
                let folded = a_name == "contiguous";
                let want = if folded { (1, batch * m) } else { (batch, m) };
                assert_eq!(
                    (schedule.problem.batch(), schedule.problem.m()),
                    want,
                    "{route}: A {a_name}"
                );
            }
            for e in 0..batch {
                let want = wide(a.index_axis(Axis(0), e)).dot(&wide(b.view())) + 0.5;
                assert_eq!(
                    wide(c.index_axis(Axis(0), e)),
                    want,
                    "{route}: A {a_name}, entry {e}"
                );
            }
        }
        // A broadcast over the batch by a zero stride, not a batch of 1.
        let b_zero: ArrayView3<f32> = b.broadcast((batch, k, n)).unwrap();
        let got = gemm.product_batched(a.view(), b_zero).unwrap();
        for e in 0..batch {
            let want = wide(a.index_axis(Axis(0), e)).dot(&wide(b.view()));
            assert_eq!(
                wide(got.index_axis(Axis(0), e)),
                want,
                "{route}: B zero batch stride, entry {e}"
            );
        }
    }
}

#[test]
fn every_thread_computes_on_the_sessions_one_stream_and_reuses_its_device_memory() {
    // A session of its own, so that no other test's buffers count.
    let session = GpuSession::open(common::backend(), None).unwrap();
    let gemm = Gemm::new()
        .on(&session)
        .plan(Plan::default_for(Kernel::Tiled));
    let (a, b) = (ints(256, 192, 7), ints(192, 160, 8));
    let want = wide(a.view()).dot(&wide(b.view()));
    let product = || {
        let c = gemm.product(a.view(), b.view()).unwrap();
        assert_eq!(wide(c.view()), want);
    };
    product();
    let reserved = session.memory().unwrap().reserved;
    // CubeCL gives each thread a stream and pools of its own unless told otherwise (its
    // memory figures are the calling thread's stream's): a new thread would see none of the
    // session's memory, and reserve its buffers again.
    for _ in 0..3 {
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(
                    session.memory().unwrap().reserved,
                    reserved,
                    "a new thread's pools"
                );
                product();
            });
        });
    }
    let after = session.memory().unwrap().reserved;
    assert_eq!(
        after, reserved,
        "device memory reserved by new threads: {reserved} -> {after}"
    );
}

#[test]
fn the_link_is_measured_once_per_session_through_the_products_own_paths() {
    let link = gpu().link().unwrap();
    println!(
        "{}: {} bytes up at {:.2} GB/s, down at {:.2} GB/s",
        gpu().info().name,
        link.bytes,
        link.upload_gb_s,
        link.download_gb_s
    );
    assert!(link.bytes >= 4096);
    assert!(link.upload_gb_s > 0.0 && link.upload_gb_s.is_finite());
    assert!(link.download_gb_s > 0.0 && link.download_gb_s.is_finite());
    // Kept for the session: the same figures again, not a new measurement.
    assert_eq!(gpu().link().unwrap(), link);
}
