//! The front door as a Rust user meets it: `tilemm::matmul` and `tilemm::Gemm` with their
//! defaults, checked exactly against ndarray's own product on integer data.

use std::sync::Once;

use half::{bf16, f16};
use ndarray::{Array2, ArrayView2};
use tilemm::tune::{CacheUse, TuneBudget};
use tilemm::{Backend, DeviceKind, Element, Gemm, Route};

/// Small integers: every product and sum below is exact in f16 accumulation's f32 and in f32.
fn ints<T: Element>(rows: usize, cols: usize, seed: usize) -> Array2<T> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        T::from_f64(((i * 7 + j * 3 + seed) % 9) as f64 - 4.0)
    })
}

fn exact<T: Element>(a: ArrayView2<T>, b: ArrayView2<T>) -> Array2<f64> {
    a.mapv(|x| x.to_f64()).dot(&b.mapv(|x| x.to_f64()))
}

/// The tuning cache of these tests: a folder of their own, not the user's.
fn private_cache() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        let dir = std::env::temp_dir().join(format!("tilemm-front-door-{}", std::process::id()));
        std::env::set_var("TILEMM_CACHE_DIR", dir);
    });
}

/// The route `Gemm::new()` should take here: the CPU unless wgpu (or a vendor runtime) finds a
/// GPU that is not a CPU emulation. `TILEMM_EXPECT_DEFAULT_ROUTE` (`cpu` or `gpu`) says which
/// this machine must take; CI sets `cpu`, since its only adapter is lavapipe.
fn expected_default_is_cpu() -> bool {
    let gpus: Vec<_> = Backend::GPU
        .into_iter()
        .flat_map(tilemm::runtime::backend::list_devices)
        .filter(|d| d.kind != DeviceKind::Cpu)
        .collect();
    let cpu = gpus.is_empty();
    eprintln!(
        "branch: the default route here is {}",
        if cpu {
            "the CPU (no GPU, or only a CPU adapter)"
        } else {
            "a GPU"
        }
    );
    match std::env::var("TILEMM_EXPECT_DEFAULT_ROUTE").as_deref() {
        Ok("cpu") => assert!(cpu, "a GPU was found: {gpus:?}"),
        Ok("gpu") => assert!(!cpu, "no GPU found that is not a CPU adapter"),
        Ok(other) => panic!("TILEMM_EXPECT_DEFAULT_ROUTE={other}: write cpu or gpu"),
        Err(_) => {}
    }
    cpu
}

#[test]
fn matmul_with_one_use_gives_the_exact_product_in_f32_and_f64_and_takes_the_fastest_route() {
    private_cache();
    let cpu = expected_default_is_cpu();
    let route = Gemm::new().route().unwrap();
    assert_eq!(matches!(route, Route::Cpu { .. }), cpu, "{route}");

    let (a, b) = (ints::<f32>(64, 48, 1), ints::<f32>(48, 30, 2));
    let c = tilemm::matmul(a.view(), b.view()).unwrap();
    assert_eq!(c.mapv(f64::from), exact(a.view(), b.view()));
    let (a, b) = (ints::<f64>(64, 48, 3), ints::<f64>(48, 30, 4));
    assert_eq!(
        tilemm::matmul(a.view(), b.view()).unwrap(),
        exact(a.view(), b.view())
    );
    // A transposed view (48×64 stored, used as 64×48), read in its memory order.
    let at = ints::<f64>(48, 64, 5);
    assert_eq!(
        tilemm::matmul(at.t(), b.view()).unwrap(),
        exact(at.t(), b.view())
    );
    // Half types: f16 and bf16 in, their own type out, accumulated in f32.
    let (a, b) = (ints::<f16>(20, 16, 6), ints::<f16>(16, 12, 7));
    let c = tilemm::matmul(a.view(), b.view()).unwrap();
    assert_eq!(c.mapv(|x| x.to_f64()), exact(a.view(), b.view()));
    let (a, b) = (ints::<bf16>(20, 16, 8), ints::<bf16>(16, 12, 9));
    let c = tilemm::matmul(a.view(), b.view()).unwrap();
    assert_eq!(c.mapv(|x| x.to_f64()), exact(a.view(), b.view()));

    // Mismatched shapes are an error, not a panic.
    let err = tilemm::matmul(a.view(), a.view()).unwrap_err();
    assert!(err.to_string().contains("A must be m×k"), "{err}");
}

#[test]
fn a_named_device_runs_there_with_the_tuners_verified_choice_shared_by_threads() {
    private_cache();
    let on_wgpu = Gemm::new().device(Backend::Wgpu, None);
    let route = on_wgpu.route().unwrap_or_else(|e| {
        panic!("this test runs on a wgpu device (lavapipe: scripts/setup installs it): {e}")
    });
    assert!(
        matches!(
            route,
            Route::Gpu {
                backend: Backend::Wgpu,
                ..
            }
        ),
        "{route}"
    );
    let (a, b) = (ints::<f32>(64, 48, 1), ints::<f32>(48, 30, 2));
    let mut c = Array2::<f32>::zeros((64, 30));
    let run = on_wgpu.write(a.view(), b.view(), c.view_mut()).unwrap();
    assert_eq!(c.mapv(f64::from), exact(a.view(), b.view()));
    assert_eq!(run.route, route);
    let tuning = run.tuning.expect("auto tunes on a GPU");
    assert!(tuning.verified, "{tuning}");
    assert_eq!(Some(tuning.chosen), run.plan);
    assert!(run.kernel.is_some() && run.schedule.is_some());

    // Threads share the one session (it is opened once) and each gets its own exact product.
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    let (a, b) = (ints::<f32>(30 + t, 17, t), ints::<f32>(17, 9, t + 1));
                    let c = Gemm::new()
                        .device(Backend::Wgpu, None)
                        .product(a.view(), b.view())
                        .unwrap();
                    c.mapv(f64::from) == exact(a.view(), b.view())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results, [true; 4]);

    // The CPU, named; it has no devices to number.
    let err = Gemm::new()
        .device(Backend::Cpu, Some(0))
        .route()
        .unwrap_err();
    assert!(matches!(err, tilemm::Error::CpuDeviceIndex), "{err}");
    let cpu = Gemm::new().device(Backend::Cpu, None);
    assert!(matches!(cpu.route().unwrap(), Route::Cpu { .. }));
    assert_eq!(
        cpu.product(a.view(), b.view()).unwrap().mapv(f64::from),
        exact(a.view(), b.view())
    );
}

#[test]
fn a_tuning_budget_of_zero_times_one_kernel_for_a_new_class_then_takes_it_as_it_is() {
    private_cache();
    // What the drop-in BLAS asks for: no search inside a caller's product.
    let zero = Gemm::new()
        .device(Backend::Wgpu, None)
        .tune_budget(TuneBudget::None);
    let (a, b) = (ints::<f64>(200, 150, 3), ints::<f64>(150, 170, 4));
    let mut c = Array2::<f64>::zeros((200, 170));
    let first = zero.write(a.view(), b.view(), c.view_mut()).unwrap();
    assert_eq!(c, exact(a.view(), b.view()));
    let first = first.tuning.expect("auto tunes on a GPU");
    assert_eq!(first.timed.len(), 1, "{first}");
    assert!(first.verified, "{first}");

    c.fill(f64::NAN);
    let again = zero.write(a.view(), b.view(), c.view_mut()).unwrap();
    assert_eq!(c, exact(a.view(), b.view()));
    let again = again.tuning.expect("auto tunes on a GPU");
    assert!(again.timed.is_empty(), "{again}");
    assert_eq!(again.cache, CacheUse::Hit, "{again}");
    assert_eq!(again.chosen, first.chosen);
}

#[test]
fn the_issues_long_k_f16_products_are_exact_on_every_route() {
    // Reported on the wgpu route: 1×98304 · 98304×1 worth 32768 came back inf (the partial sum
    // 65536 rounded to f16 between slabs of 32768), and 1×32769 worth 2050 came back 2048.
    private_cache();
    let mut cases = Vec::new();
    let mut a = vec![0.0; 32769];
    a[32768 - 2049..].fill(1.0);
    cases.push((a, 2050.0));
    let mut a = vec![1.0; 98304];
    a[65536..].fill(-1.0);
    cases.push((a, 32768.0));
    let routes = [
        ("cpu", Gemm::new().device(Backend::Cpu, None)),
        (
            "wgpu",
            Gemm::new()
                .device(Backend::Wgpu, None)
                .tune_budget(TuneBudget::None),
        ),
        ("default", Gemm::new()),
    ];
    for (route, gemm) in &routes {
        for (values, want) in &cases {
            let k = values.len();
            let a = Array2::from_shape_fn((1, k), |(_, j)| f16::from_f64(values[j]));
            let b = Array2::from_elem((k, 1), f16::ONE);
            let c = gemm.product(a.view(), b.view()).unwrap();
            assert_eq!(c[[0, 0]].to_f64(), *want, "{route}, K = {k}");
            let a = a.mapv(|x| bf16::from_f32(x.to_f32()));
            let b = b.mapv(|x| bf16::from_f32(x.to_f32()));
            let c = gemm.product(a.view(), b.view()).unwrap();
            // The exact sum, rounded once to bf16 (2050 is 2048 there).
            let want = bf16::from_f64(*want).to_f64();
            assert_eq!(c[[0, 0]].to_f64(), want, "{route}, bf16, K = {k}");
        }
    }
}
