//! The `tilemm` binary as a user meets it: reports, files, exit codes and one-line errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tilemm_lab::inputs::{read_matrix, write_matrix};

fn tilemm(args: &[&str]) -> Output {
    tilemm_with_env(args, &[])
}

fn tilemm_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = command(args);
    command.envs(env.iter().copied());
    command.output().expect("the tilemm binary runs")
}

/// The tuning cache of this test process: fresh, so that `auto` tunes here at least once and
/// the user's own cache is neither read nor written.
fn tune_cache() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tilemm"));
    command
        .args(args)
        // Silences libwayland's "XDG_RUNTIME_DIR is invalid" notice, which the Vulkan loader
        // triggers on headless machines, so stderr holds only tilemm's own words.
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("TILEMM_CACHE_DIR", tune_cache());
    command
}

/// tilemm under a resource limit (`prlimit --RESOURCE=bytes`), set in the child before exec.
fn tilemm_limited(args: &[&str], resource: libc::__rlimit_resource_t, bytes: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut command = command(args);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(resource, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    command.output().expect("the tilemm binary runs")
}

/// tilemm with its standard output going to `path` (`> /dev/full`).
fn tilemm_to(args: &[&str], path: &str) -> Output {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    command(args)
        .stdout(file)
        .output()
        .expect("the tilemm binary runs")
}

/// The request exits 2 with one line on stderr containing each of `expected`, never a panic.
fn assert_one_line_refusal(out: &Output, what: &str, expected: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: stderr {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err:?}");
    assert!(err.starts_with("tilemm: error"), "{what}: {err:?}");
    for word in expected {
        assert!(
            err.contains(word),
            "{what}: {err:?} does not mention {word:?}"
        );
    }
}

/// A CSV line's fields, split at commas outside quotes (implementations' names have some).
fn csv_fields(line: &str) -> Vec<String> {
    let mut quoted = false;
    line.split(|c| {
        quoted ^= c == '"';
        c == ',' && !quoted
    })
    .map(str::to_owned)
    .collect()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The request is refused with exit code 2 and one line naming the problem, never a panic.
fn assert_refused(args: &[&str], expected: &[&str]) {
    let out = tilemm(args);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: stderr {err:?}, stdout {:?}",
        stdout(&out)
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err:?}"
    );
    assert!(err.starts_with("tilemm: error"), "{args:?}: {err:?}");
    for word in expected {
        assert!(
            err.contains(word),
            "{args:?}: {err:?} does not mention {word:?}"
        );
    }
    assert!(
        stdout(&out).is_empty(),
        "{args:?} printed a report: {}",
        stdout(&out)
    );
}

/// The first bytes of a version-1 .npy file with `header` (a Python dict literal), made by
/// hand so that it can say anything, true or not.
fn npy_header(header: &str) -> Vec<u8> {
    let padded = format!("{header:<117}\n");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    bytes
}

/// A .npy file with `header` and `data_bytes` zero bytes.
fn write_raw_npy(path: &Path, header: &str, data_bytes: usize) {
    let mut bytes = npy_header(header);
    bytes.resize(bytes.len() + data_bytes, 0);
    std::fs::write(path, bytes).unwrap();
}

fn write(path: &Path, rows: usize, cols: usize, data: &[f32]) {
    write_matrix(path, rows, cols, data).unwrap();
}

#[test]
fn run_prints_the_full_report_and_passes_for_both_kernels() {
    for kernel in ["tiled", "naive"] {
        let out = tilemm(&[
            "run", "--kernel", kernel, "-m", "100", "-k", "77", "-n", "51",
        ]);
        let text = stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kernel}: {text}{}",
            stderr(&out)
        );
        for line in [
            "C[100×51] = A[100×77] · B[77×51], f32",
            "device      #",
            &format!("kernel      {kernel}:tpb=16: grid 4×7×1, block 16×16×1"),
            "1st GPU",
            "JIT compile",
            "2nd GPU",
            "CPU ",
            "f64 reference",
            "bound       |c − ref| ≤",
            "result      PASS",
        ] {
            assert!(text.contains(line), "{kernel}: missing {line:?} in\n{text}");
        }
    }
}

#[test]
fn the_gemm_contracts_flags_each_pass_on_the_device() {
    for (flags, shown) in [
        (
            &["-m", "30", "-k", "20", "-n", "10", "--trans-a"][..],
            "A[30×20, column-major]",
        ),
        (
            &["-m", "30", "-k", "20", "-n", "10", "--trans-b"],
            "B[20×10, column-major]",
        ),
        (
            &["-m", "6", "-k", "9", "-n", "8", "--batch", "7"],
            "7 × C[6×8]",
        ),
        (
            &[
                "--alpha", "0.5", "--beta", "2", "-m", "9", "-k", "9", "-n", "9",
            ],
            "+ 2·C",
        ),
        (
            &["--dtype", "f16", "-m", "16", "-k", "16", "-n", "16"],
            "f16 inputs",
        ),
        (
            &["--dtype", "bf16", "-m", "16", "-k", "16", "-n", "16"],
            "bf16 inputs",
        ),
        (
            &["--dtype", "f64", "-m", "16", "-k", "16", "-n", "16"],
            "f64",
        ),
    ] {
        let mut args = vec!["run", "--backend", "wgpu"];
        args.extend_from_slice(flags);
        let out = tilemm(&args);
        let text = stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flags:?}: {text}{}",
            stderr(&out)
        );
        assert!(
            text.contains(shown) && text.contains("result      PASS"),
            "{flags:?}: {text}"
        );
    }
}

#[test]
fn json_report_carries_the_same_facts() {
    let out = tilemm(&[
        "run", "--json", "--tpb", "8", "-m", "9", "-k", "10", "-n", "11",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(v["pass"], true);
    assert_eq!(v["problem"]["k"], 10);
    assert_eq!(v["kernel"]["plan"]["config"]["Tiled"]["tpb"], 8);
    assert_eq!(
        v["kernel"]["launch"]["shape"]["grid"],
        serde_json::json!([2, 2, 1])
    );
    assert_eq!(v["verification"]["reference"]["held"], "whole");
    assert_eq!(v["inputs"]["kind"], "random");
    assert!(v["first_run"]["compile_ms"].as_f64().unwrap() > 0.0);
    assert!(v["second_run"]["kernel_ms"].as_f64().unwrap() > 0.0);
    assert!(v["first_run"]["total_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn npy_inputs_give_the_product_in_the_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let (m, k, n) = (13, 29, 7);
    // Small integers: the product is exact in f32, so C must equal it bit for bit.
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 13) as f32 - 6.0).collect();
    write(&dir.path().join("A.npy"), m, k, &a);
    write(&dir.path().join("B.npy"), k, n, &b);
    let c_path = dir.path().join("C.npy");
    let out = tilemm(&[
        "run",
        "--a",
        dir.path().join("A.npy").to_str().unwrap(),
        "--b",
        dir.path().join("B.npy").to_str().unwrap(),
        "--out",
        c_path.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let (shape, c) = read_matrix(&c_path).unwrap();
    assert_eq!(shape, (m, n));
    for i in 0..m {
        for j in 0..n {
            let exact: f32 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            assert_eq!(c[i * n + j], exact, "C[{i},{j}]");
        }
    }
}

#[test]
fn cpu_backend_runs_without_a_gpu() {
    let out = tilemm(&[
        "run",
        "--backend",
        "cpu",
        "-m",
        "64",
        "-k",
        "64",
        "-n",
        "64",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("device      CPU only"), "{text}");
    assert!(!text.contains("1st GPU"), "{text}");
    assert!(text.contains("result      PASS"), "{text}");
}

/// The wgpu backend's entry in `tilemm devices --json`.
fn wgpu_entry(devices: &serde_json::Value) -> &serde_json::Value {
    devices["backends"]
        .as_array()
        .and_then(|b| b.iter().find(|e| e["backend"] == "wgpu"))
        .unwrap_or_else(|| panic!("no wgpu backend in {devices}"))
}

#[test]
fn devices_lists_the_adapter_and_its_limits() {
    let out = tilemm(&["devices"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(text.contains("wgpu #0"), "{text}");
    for limit in [
        "shared per block",
        "threads per block",
        "largest binding",
        "largest buffer",
    ] {
        assert!(text.contains(limit), "{text}");
    }
    // The adapter `run` would pick is marked.
    assert!(
        text.contains("wgpu #0:") && text.contains("[default]"),
        "{text}"
    );
    let out = tilemm(&["devices", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["default"]["backend"], "wgpu", "{v}");
    let devices = &wgpu_entry(&v)["devices"];
    assert!(
        devices[0]["limits"]["max_binding_bytes"].as_u64().unwrap() > 0,
        "{v}"
    );
}

#[test]
fn zero_and_absurd_sizes_are_refused() {
    assert_refused(
        &["run", "-m", "0", "-k", "4", "-n", "4"],
        &["dimension m is 0"],
    );
    assert_refused(&["run", "-n", "0"], &["dimension n is 0"]);
    assert_refused(&["run", "-m", "-3"], &["'-3'"]);
    assert_refused(&["run", "-m", "99999999999999999999999"], &["too large"]);
    // Fits no device binding (or, on the CPU, no host memory) and must say so before
    // allocating anything.
    assert_refused(
        &["run", "-m", "100000", "-k", "100000", "-n", "100000"],
        &["needs"],
    );
    assert_refused(
        &[
            "run",
            "--backend",
            "cpu",
            "-m",
            "1000000",
            "-k",
            "1000000",
            "-n",
            "1000000",
        ],
        &["host memory"],
    );
}

#[test]
fn a_matrix_over_the_binding_limit_runs_in_panels_shown_in_the_report() {
    // 8185×4100 f32 is just over lavapipe's (and WebGPU's default) 128 MiB binding.
    let devices: serde_json::Value =
        serde_json::from_str(&stdout(&tilemm(&["devices", "--json"]))).unwrap();
    let limit = wgpu_entry(&devices)["devices"][0]["limits"]["max_binding_bytes"]
        .as_u64()
        .expect("a wgpu device");
    let rows = (limit / 4 / 4100 + 1).to_string();
    let out = tilemm(&[
        "run",
        "--backend",
        "wgpu",
        "-m",
        &rows,
        "-k",
        "4100",
        "-n",
        "1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["pass"], true);
    let panels = &report["kernel"]["panels"];
    assert_eq!(
        panels["counts"],
        serde_json::json!([2, 1, 1, 1]),
        "{report}"
    );
}

#[test]
fn c0_is_read_from_a_file_with_beta_and_left_unread_with_beta_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (a, b, c0, c) = (path("A.npy"), path("B.npy"), path("C0.npy"), path("C.npy"));
    write(Path::new(&a), 2, 2, &[1.0, 2.0, 3.0, 4.0]);
    write(Path::new(&b), 2, 2, &[1.0, 0.0, 0.0, 1.0]);
    write(Path::new(&c0), 2, 2, &[10.0, 20.0, 30.0, 40.0]);
    let out = tilemm(&[
        "run", "--a", &a, "--b", &b, "--c", &c0, "--beta", "2", "--alpha", "-1", "--out", &c,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("C₀ "), "{}", stdout(&out));
    assert_eq!(
        read_matrix(Path::new(&c)).unwrap().1,
        vec![19.0, 38.0, 57.0, 76.0]
    );
    // β = 0 (the default): C₀ is not read, as in BLAS, and a note says so. A NaN in it does not
    // reach C.
    write(Path::new(&c0), 2, 2, &[f32::NAN, 20.0, 30.0, 40.0]);
    let out = tilemm(&["run", "--a", &a, "--b", &b, "--c", &c0, "--out", &c]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not read: β = 0"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        read_matrix(Path::new(&c)).unwrap().1,
        vec![1.0, 2.0, 3.0, 4.0]
    );
    assert_refused(&["run", "--c", &c0], &["--a"]);
}

#[test]
fn files_compose_with_transposes_and_a_dtype_that_agrees_as_blas_users_expect() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (a, b, c) = (path("A.npy"), path("B.npy"), path("C.npy"));
    // A is stored 2×3 and used as Aᵀ (3×2); B is stored 2×2 and used as Bᵀ.
    write(Path::new(&a), 2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    write(Path::new(&b), 2, 2, &[1.0, 2.0, 0.0, 1.0]);
    let args = [
        "run",
        "--a",
        &a,
        "--b",
        &b,
        "--trans-a",
        "--trans-b",
        "--dtype",
        "f32",
        "--out",
        &c,
    ];
    let out = tilemm(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("C[3×2]"), "{}", stdout(&out));
    // Aᵀ = [[1,4],[2,5],[3,6]], Bᵀ = [[1,0],[2,1]]: Aᵀ·Bᵀ = [[9,4],[12,5],[15,6]].
    assert_eq!(
        read_matrix(Path::new(&c)).unwrap().1,
        vec![9.0, 4.0, 12.0, 5.0, 15.0, 6.0]
    );
    // A dtype the files are not is refused, naming both.
    assert_refused(
        &["run", "--a", &a, "--b", &b, "--trans-a", "--dtype", "f16"],
        &["holds f32 but f16 was asked for"],
    );
}

#[test]
fn bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("A.npy");
    let b = dir.path().join("B.npy");
    write(&a, 3, 4, &[1.0; 12]);
    write(&b, 5, 2, &[1.0; 10]);
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    assert_refused(
        &["run", "--a", a_s, "--b", b_s],
        &["don't chain", "3×4", "5×2"],
    );

    let missing = dir.path().join("missing.npy");
    assert_refused(
        &["run", "--a", missing.to_str().unwrap(), "--b", b_s],
        &["missing.npy", "No such file"],
    );

    // Each file, as A: its name and what the one-line refusal must say.
    let corrupt = npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)");
    let mut i64_file = npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }");
    i64_file.resize(i64_file.len() + 32, 0);
    for (name, bytes, expected) in [
        ("text.npy", b"not a matrix".to_vec(), "not a .npy file"),
        ("empty.npy", Vec::new(), "empty"),
        // A header that is not a Python dict: one line, no parser excerpt.
        ("corrupt.npy", corrupt, "corrupt .npy header"),
        ("i64.npy", i64_file, "float16, float32 or float64"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        assert_refused(
            &["run", "--a", path.to_str().unwrap(), "--b", b_s],
            &[name, expected],
        );
    }

    assert_refused(&["run", "--a", a_s], &["--b"]);
    assert_refused(&["run", "--a", a_s, "--b", b_s, "-m", "4"], &["-m"]);
}

#[test]
fn unknown_kernels_tiles_and_backends_are_refused() {
    assert_refused(
        &["run", "--kernel", "fastest"],
        &["unknown kernel 'fastest'", "naive, tiled"],
    );
    assert_refused(&["run", "--tpb", "12"], &["tpb=12", "8, 16 or 32"]);
    assert_refused(
        &["run", "--kernel", "tiled:tpb=12"],
        &["tpb=12", "8, 16 or 32"],
    );
    assert_refused(
        &["run", "--backend", "opencl"],
        &["unknown backend 'opencl'"],
    );
    assert_refused(&["run", "--device", "99"], &["no device #99"]);
    // The CPU has no devices to pick from: --device is refused, not ignored.
    assert_refused(
        &["run", "--backend", "cpu", "--device", "99"],
        &["device index", "cpu backend"],
    );
    // A negative size is a bad size, not an unknown flag.
    assert_refused(&["run", "-m", "-5"], &["'-5' is not a matrix dimension"]);
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_in_a_build_without_it_is_refused() {
    assert_refused(
        &["run", "--backend", "cuda"],
        &["without the cuda backend", "--features cuda"],
    );
}

#[test]
fn bad_output_path_is_refused_before_the_run() {
    assert_refused(
        &[
            "run",
            "-m",
            "4",
            "-k",
            "4",
            "-n",
            "4",
            "--out",
            "/nonexistent-dir/C.npy",
        ],
        &[
            "cannot write /nonexistent-dir/C.npy",
            "directory does not exist",
        ],
    );
    // A directory as the file: the run happens, the write fails, and no report claims success.
    let dir = tempfile::tempdir().unwrap();
    let out = tilemm(&[
        "run",
        "-m",
        "4",
        "-k",
        "4",
        "-n",
        "4",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot write"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("PASS"), "{}", stdout(&out));
}

#[test]
fn bench_measures_every_kernel_and_the_cpu_and_checks_them() {
    let out = tilemm(&[
        "bench", "--sizes", "33x17x9", "--repeat", "2", "--tpb", "8,16",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    for row in [
        "naive:tpb=8",
        "naive:tpb=16",
        "tiled:tpb=8",
        "tiled:tpb=16",
        "cpu (gemm",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(row))
            .unwrap_or_else(|| panic!("{row}: {text}"));
        assert!(
            line.starts_with("33×17×9") && line.ends_with("PASS"),
            "{line}"
        );
    }
    let out = tilemm(&[
        "bench",
        "--json",
        "--sizes",
        "8",
        "--repeat",
        "3",
        "--kernels",
        "tiled",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let measurements = v["measurements"].as_array().unwrap();
    assert_eq!(measurements.len(), 2, "{v}");
    assert_eq!(measurements[0]["samples_ms"].as_array().unwrap().len(), 3);
    // --no-cpu: the kernel's row alone, still checked; without a GPU the CPU path is measured,
    // with a note.
    let out = tilemm(&[
        "bench",
        "--json",
        "--sizes",
        "8",
        "--repeat",
        "1",
        "--kernels",
        "tiled",
        "--no-cpu",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let measurements = v["measurements"].as_array().unwrap();
    assert_eq!(measurements.len(), 1, "{v}");
    assert_eq!(measurements[0]["verified"], true, "{v}");
    assert!(
        measurements[0]["implementation"]
            .as_str()
            .unwrap()
            .starts_with("tiled"),
        "{v}"
    );
    let out = tilemm(&["bench", "--backend", "cpu", "--sizes", "8", "--no-cpu"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("--no-cpu: no GPU device"), "{text}");
    assert!(text.contains("cpu (gemm"), "{text}");
}

#[test]
fn bench_tunes_auto_writes_csv_and_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let stem = dir.path().join("sweep");
    let out = tilemm(&[
        "bench",
        "--csv",
        "--sizes",
        "16,24x40x8",
        "--repeat",
        "1",
        "--kernels",
        "auto,naive",
        "--plot",
        stem.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "m,k,n,dtype,implementation,computed,median_ms,min_ms,host_median_ms,gflops,\
             percent_of_peak,timing,verified"
        )
    );
    let rows: Vec<Vec<String>> = lines.map(csv_fields).collect();
    // auto, naive and the CPU at each size, each computing the f32 asked for.
    assert_eq!(rows.len(), 6, "{text}");
    assert!(
        rows.iter()
            .all(|r| r.len() == 13 && r[3] == "f32" && r[5] == "f32" && r[12] == "true"),
        "{text}"
    );
    assert!(rows[0][4].starts_with("\"auto → "), "{text}");
    assert_eq!(rows[3][..3], ["24", "40", "8"]);
    for (path, magic) in [("sweep.svg", &b"<svg"[..]), ("sweep.png", &b"\x89PNG"[..])] {
        let bytes = std::fs::read(dir.path().join(path)).unwrap();
        assert!(bytes.starts_with(magic), "{path}");
    }
    assert_refused(&["bench", "--csv", "--json"], &["--csv"]);
    assert_refused(
        &["bench", "--plot", "/nonexistent/dir/sweep"],
        &["/nonexistent/dir", "does not exist"],
    );
}

#[test]
fn bench_measures_other_dtypes_and_each_gpu_row_against_the_peak_given() {
    let out = tilemm(&[
        "bench",
        "--csv",
        "--sizes",
        "40x70x24",
        "--repeat",
        "1",
        "--dtype",
        "f16",
        "--kernels",
        "naive,register",
        "--peak",
        "50",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let rows: Vec<Vec<String>> = text.lines().skip(1).map(csv_fields).collect();
    // naive, register and the CPU, all in f16 and verified.
    assert_eq!(rows.len(), 3, "{text}");
    for row in &rows {
        assert_eq!(
            (&*row[3], &*row[5], &*row[12]),
            ("f16", "f16", "true"),
            "{text}"
        );
    }
    for row in &rows[..2] {
        let gflops: f64 = row[9].parse().unwrap();
        let percent: f64 = row[10].parse().unwrap();
        assert!(
            (percent - 2.0 * gflops).abs() <= 1e-9 * percent.max(1.0),
            "{text}"
        );
    }
    // The CPU is not measured against the GPU's peak.
    assert_eq!(rows[2][10], "", "{text}");
    // Every row has its host-clock median; the CPU's is its only clock.
    for row in &rows {
        let host: f64 = row[8].parse().unwrap();
        assert!(host.is_finite() && host > 0.0, "{text}");
    }
    assert_eq!(
        (&*rows[2][8], &*rows[2][11]),
        (&*rows[2][6], "host clock"),
        "{text}"
    );
    assert_refused(&["bench", "--peak", "0"], &["--peak"]);
    assert_refused(&["bench", "--dtype", "f8"], &["--dtype"]);
}

/// Whether the device `run` takes by default has tf32 matrix units, as `tilemm devices --json`
/// says.
fn default_device_has_tf32() -> bool {
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&tilemm(&["devices", "--json"]))).unwrap();
    let chosen = &v["default"];
    let Some(index) = chosen["index"].as_u64() else {
        return false;
    };
    let entry = v["backends"]
        .as_array()
        .and_then(|b| b.iter().find(|e| e["backend"] == chosen["backend"]))
        .unwrap_or_else(|| panic!("the default backend is not listed: {v}"));
    entry["devices"][index as usize]["types"]["tf32"]
        .as_bool()
        .unwrap_or_else(|| panic!("no tf32 entry in {v}"))
}

#[test]
fn tf32_is_refused_in_one_line_where_there_are_no_tf32_matrix_units() {
    // The CPU path has no tf32 unit: nothing would compute tf32, and f32 must not be passed
    // off as it.
    let refused = [
        "cannot compute in tf32",
        "tf32 matrix units",
        "f32 is computed on every device",
    ];
    assert_refused(&["run", "--dtype", "tf32", "--backend", "cpu"], &refused);
    assert_refused(
        &[
            "bench",
            "--dtype",
            "tf32",
            "--backend",
            "cpu",
            "--sizes",
            "16",
        ],
        &refused,
    );
    assert_refused(&["run", "--dtype", "tf33"], &["tf32"]);
    // The default device: refused where it has no tf32 units (lavapipe, in CI), computed and
    // labelled tf32 where it has them (NVIDIA from sm_80 through CUDA).
    let run = ["run", "--dtype", "tf32", "-m", "16", "-k", "16", "-n", "16"];
    let bench = ["bench", "--dtype", "tf32", "--sizes", "16", "--repeat", "1"];
    if default_device_has_tf32() {
        eprintln!("branch: the default device has tf32 units; tf32 runs");
        for args in [&run[..], &bench[..]] {
            let out = tilemm(args);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
            assert!(stdout(&out).contains("tf32"), "{args:?}: {}", stdout(&out));
        }
    } else {
        eprintln!("branch: the default device has no tf32 units; tf32 is refused");
        for args in [&run[..], &bench[..]] {
            assert_refused(args, &refused);
        }
    }
}

#[test]
fn bench_refuses_a_named_rung_that_does_not_compute_the_dtype() {
    // The tensor-core rung takes 16-bit inputs only.
    let out = tilemm(&[
        "bench",
        "--sizes",
        "16",
        "--repeat",
        "1",
        "--dtype",
        "f64",
        "--kernels",
        "tensorcore",
    ]);
    assert_one_line_refusal(&out, "bench", &["tensorcore"]);
}

#[cfg(feature = "peers")]
#[test]
fn bench_peers_measure_cubek_matmul_on_the_same_device_and_verify_it() {
    let out = tilemm(&[
        "bench",
        "--peers",
        "--sizes",
        "64",
        "--repeat",
        "1",
        "--kernels",
        "naive",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    for strategy in ["auto", "simple-unit", "double-unit", "naive"] {
        let row = format!("cubek-matmul 0.2 {strategy} ");
        let line = text
            .lines()
            .find(|l| l.contains(&row))
            .unwrap_or_else(|| panic!("no {row}row in\n{text}"));
        assert!(line.ends_with("PASS"), "{line}");
    }
}

#[cfg(feature = "peers")]
#[test]
fn bench_peers_run_in_the_dtype_measured_or_are_skipped_with_a_note() {
    let bench = |dtype: &str| {
        let out = tilemm(&[
            "bench",
            "--peers",
            "--sizes",
            "40x56x24",
            "--repeat",
            "1",
            "--kernels",
            "naive",
            "--dtype",
            dtype,
        ]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
        text
    };
    // f16 inputs and output, f32 accumulation: cubek-matmul's unit strategies and auto compute
    // them here; its tensor-core strategies where the device has matrix units (lavapipe 26),
    // else each is a note.
    let text = bench("f16");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("cubek-matmul") && !l.starts_with("note:"))
        .collect();
    assert!(rows.len() >= 4, "{text}");
    assert!(rows.iter().all(|l| l.ends_with("PASS")), "{text}");
    for unit in ["auto (", "simple-unit", "double-unit", "naive"] {
        assert!(rows.iter().any(|l| l.contains(unit)), "{unit}: {text}");
    }
    let notes = text
        .lines()
        .filter(|l| l.starts_with("note: cubek-matmul"))
        .count();
    assert_eq!(rows.len() + notes, 9, "{text}");
    // Where the device has no bf16 type (lavapipe; tilemm packs bf16 there), each strategy is a
    // note, not a row.
    let text = bench("bf16");
    let passed = text
        .lines()
        .filter(|l| l.contains("cubek-matmul") && l.ends_with("PASS"))
        .count();
    assert!(
        passed >= 4 || (passed == 0 && text.contains("needs a bf16 type")),
        "{text}"
    );
}

#[cfg(not(feature = "peers"))]
#[test]
fn bench_peers_without_the_feature_say_how_to_build_them() {
    assert_refused(&["bench", "--peers"], &["--features peers"]);
}

#[test]
fn bench_refuses_bad_sizes_before_measuring() {
    assert_refused(&["bench", "--sizes", "64,0"], &["dimension m is 0"]);
    assert_refused(&["bench", "--sizes", "4x4"], &["size '4x4'"]);
    assert_refused(&["bench", "--repeat", "0"], &["--repeat"]);
}

#[test]
fn without_any_adapter_run_says_so_and_still_verifies_the_cpu_path() {
    // Pointing the Vulkan loader at no driver is what a machine without one looks like.
    let no_vulkan = [("VK_ICD_FILENAMES", "/nonexistent/icd.json")];
    let out = tilemm_with_env(&["run", "-m", "32", "-k", "48", "-n", "16"], &no_vulkan);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("no GPU device found"), "{text}");
    assert!(text.contains("mesa-vulkan-drivers"), "{text}");
    assert!(text.contains("device      CPU only"), "{text}");
    assert!(text.contains("result      PASS"), "{text}");

    let out = tilemm_with_env(&["run", "--backend", "wgpu"], &no_vulkan);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no Vulkan, Metal or DX12 adapter found")
            && err.contains("mesa-vulkan-drivers"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// Whether the dynamic loader finds every one of `libs`: in `folders`, in `LD_LIBRARY_PATH`
/// (containers mount drivers elsewhere) or through ld.so's cache.
#[cfg(any(feature = "cuda", feature = "hip"))]
fn loader_finds(libs: &[&str], folders: &[&str]) -> bool {
    let ld_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let dirs: Vec<&str> = folders
        .iter()
        .copied()
        .chain(ld_path.split(':').filter(|d| !d.is_empty()))
        .collect();
    let cache = Command::new("/sbin/ldconfig")
        .arg("-p")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    libs.iter().all(|lib| {
        cache.contains(&format!("{lib} "))
            || dirs.iter().any(|dir| Path::new(dir).join(lib).exists())
    })
}

/// Whether the NVIDIA driver library is installed (then `--backend cuda` must work, not refuse).
#[cfg(feature = "cuda")]
fn nvidia_driver_present() -> bool {
    loader_finds(
        &["libcuda.so.1"],
        &[
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib/wsl/lib",
        ],
    )
}

#[test]
fn emit_prints_each_targets_source_without_any_device() {
    // No Vulkan driver and (on these machines) no GPU: emitting needs no device.
    let no_vulkan = [("VK_ICD_FILENAMES", "/nonexistent/icd.json")];
    let emit = |kernel: &str, target: &str, tpb: &str| {
        let out = tilemm_with_env(
            &["emit", "--kernel", kernel, "--target", target, "--tpb", tpb],
            &no_vulkan,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kernel} {target}: {}",
            stderr(&out)
        );
        stdout(&out)
    };
    let cuda = emit("tiled", "cuda", "16");
    assert!(
        cuda.contains("extern \"C\" __global__") && cuda.contains("tiled_matmul_a_f32_o_f32"),
        "{cuda}"
    );
    assert!(cuda.contains("extern __shared__"), "{cuda}");
    assert_eq!(cuda.matches("__syncthreads();").count(), 2, "{cuda}");
    assert!(cuda.contains("__launch_bounds__(256)"), "{cuda}");
    assert!(emit("tiled", "cuda", "32").contains("__launch_bounds__(1024)"));
    let hip = emit("tiled", "hip", "16");
    assert!(hip.contains("#include <hip/hip_runtime.h>"), "{hip}");
    assert_eq!(hip.matches("__syncthreads();").count(), 2, "{hip}");
    let wgsl = emit("tiled", "wgsl", "8");
    assert!(
        wgsl.contains("var<workgroup>") && wgsl.contains("@workgroup_size(8, 8, 1)"),
        "{wgsl}"
    );
    assert_eq!(wgsl.matches("workgroupBarrier()").count(), 2, "{wgsl}");
    let naive = emit("naive", "cuda", "16");
    assert!(
        !naive.contains("__syncthreads") && !naive.contains("__shared__"),
        "{naive}"
    );
}

#[test]
fn emit_refuses_unknown_targets_and_tiles() {
    assert_refused(
        &["emit", "--target", "opencl"],
        &["unknown target 'opencl'"],
    );
    assert_refused(&["emit", "--target", "cuda", "--tpb", "7"], &["tpb=7"]);
    assert_refused(&["emit", "--kernel", "tiled"], &["--target"]);
}

#[test]
fn compile_check_reports_amd_resources_through_clang() {
    // Needs clang (scripts/setup installs clang-15); without it tilemm says what to install,
    // and this test fails showing that message.
    let report = compile_check_json(&[
        "--archs",
        "gfx90a,gfx1100",
        "--kernels",
        "naive,tiled",
        "--tpb",
        "16",
        "--dtypes",
        "f32",
    ]);
    // No NVIDIA target, so no NVRTC to time the pace probe with: the limit as measured on the
    // development machine.
    assert!(report["pace"].is_null(), "{}", report["pace"]);
    for (kernel, arch) in [
        ("naive", "gfx90a"),
        ("naive", "gfx1100"),
        ("tiled", "gfx90a"),
        ("tiled", "gfx1100"),
    ] {
        let row = compile_check_row(&report, &format!("{kernel}:tpb=16"), arch);
        assert_eq!(row["dtype"], "f32", "{row}");
        assert_eq!(row["outcome"], "compiled", "{row}");
        assert_eq!(row["failures"], serde_json::json!([]), "{row}");
        let usage = &row["usage"];
        let vgprs = usage["registers"].as_u64().unwrap();
        assert!(vgprs > 0 && vgprs <= 256, "{row}");
        assert!(usage["scalar_registers"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(usage["spills"], 0, "{row}");
        let dynamic = if kernel == "tiled" { 2048 } else { 0 };
        assert_eq!(usage["dynamic_shared_bytes"], dynamic, "{row}");
        // The main loop's FMAs, from clang's assembly.
        let main_loop = &usage["main_loop"];
        let fma = main_loop["fma"].as_u64().unwrap();
        assert!(
            fma > 0 && main_loop["instructions"].as_u64().unwrap() > fma,
            "{row}"
        );
    }
    assert_eq!(
        (&report["compiled"], &report["skipped"], &report["failed"]),
        (
            &serde_json::json!(4),
            &serde_json::json!(0),
            &serde_json::json!(0)
        ),
        "{report}"
    );
    // Every precision is a row, by default: those the rung computes compiled, tf32 (the mma
    // rung's alone) skipped with the reason; the table says so, under its header, and says
    // whether the sources were also checked against ROCm's own headers.
    let out = tilemm(&["compile-check", "--archs", "gfx90a", "--kernels", "tiled"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.starts_with("kernel") && text.contains("registers") && text.contains("occupancy"),
        "{text}"
    );
    for dtype in ["f32", "f16", "bf16", "f64"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("tiled:") && l.contains(&format!(" {dtype} "))),
            "no {dtype} row in\n{text}"
        );
    }
    assert!(
        text.lines().any(|l| l.starts_with("tiled:")
            && l.contains(" tf32 ")
            && l.contains("skipped: it does not compute tf32")),
        "no skipped tf32 row in\n{text}"
    );
    assert!(text.contains("HIP headers"), "{text}");
    assert!(
        text.trim_end().ends_with("4 compiled, 1 skipped, 0 failed"),
        "{text}"
    );
}

/// `tilemm compile-check --json ARGS`, which must succeed.
fn compile_check_json(args: &[&str]) -> serde_json::Value {
    let out = tilemm(&[&["compile-check", "--json"], args].concat());
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The row of `report` for the plan `kernel` (as `--kernels` takes it) on `arch`.
fn compile_check_row<'a>(
    report: &'a serde_json::Value,
    kernel: &str,
    arch: &str,
) -> &'a serde_json::Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"] == kernel && r["arch"] == arch)
        .unwrap_or_else(|| panic!("no {kernel} × {arch} row in {report}"))
}

#[test]
fn compile_check_shows_matrix_instructions_of_the_tensor_core_rung_on_amd() {
    // CDNA (gfx90a, gfx940) through rocWMMA (third_party/rocwmma and Debian's HIP headers,
    // which scripts/setup installs), RDNA 3 (gfx1100) through WMMA intrinsics. The check itself
    // fails a tensor-core row with no matrix instruction; this also reads the count.
    let plane64 = "tensorcore:m=16:n=16:k=16:wm=2:wn=2:tm=1:tn=1:plane=64";
    let plane32 = "tensorcore:m=16:n=16:k=16:wm=2:wn=2:tm=2:tn=2:plane=32";
    let report = compile_check_json(&[
        "--archs",
        "gfx90a,gfx940,gfx1100",
        "--kernels",
        &format!("{plane64},{plane32}"),
        "--dtypes",
        "f16",
    ]);
    for (kernel, arch) in [
        (plane64, "gfx90a"),
        (plane64, "gfx940"),
        (plane32, "gfx1100"),
    ] {
        let row = compile_check_row(&report, kernel, arch);
        assert_eq!(row["outcome"], "compiled", "{row}");
        let matrix = row["usage"]["matrix_ops"].as_u64().unwrap();
        assert!(matrix > 0, "no matrix instruction in {row}");
        assert_eq!(row["usage"]["spills"], 0, "{row}");
    }
    // Each layout is skipped on the targets of the other plane width.
    for (kernel, arch) in [
        (plane32, "gfx90a"),
        (plane32, "gfx940"),
        (plane64, "gfx1100"),
    ] {
        assert_eq!(
            compile_check_row(&report, kernel, arch)["outcome"],
            "skipped"
        );
    }
    let rocwmma = "CDNA's tensor-core rows are what a `--features hip,rocwmma` build JITs";
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with(rocwmma)),
        "{report}"
    );
    assert_eq!(
        (&report["compiled"], &report["skipped"], &report["failed"]),
        (
            &serde_json::json!(3),
            &serde_json::json!(3),
            &serde_json::json!(0)
        ),
        "{report}"
    );
}

#[test]
fn compile_check_refuses_unknown_architectures_and_missing_compilers() {
    assert_refused(
        &["compile-check", "--archs", "sm_100x"],
        &["unknown architecture 'sm_100x'"],
    );
    assert_refused(
        &[
            "compile-check",
            "--archs",
            "gfx90a",
            "--clang",
            "/nonexistent/clang",
        ],
        &["clang", "apt-get install clang-15"],
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn compile_check_for_nvidia_needs_the_cuda_build() {
    assert_refused(&["compile-check", "--archs", "sm_80"], &["--features cuda"]);
}

#[cfg(feature = "cuda")]
#[test]
fn compile_check_reports_nvidia_resources_through_nvrtc() {
    // Needs NVRTC and the CUDA headers (scripts/setup's ensure_compile_tools puts the PyPI
    // wheels on LD_LIBRARY_PATH); without them tilemm says what to install.
    let report = compile_check_json(&[
        "--archs",
        "sm_80,sm_90",
        "--kernels",
        "tiled",
        "--tpb",
        "8,32",
        "--dtypes",
        "f32",
    ]);
    for (tpb, arch, dynamic) in [("8", "sm_80", 512), ("32", "sm_90", 8192)] {
        let row = compile_check_row(&report, &format!("tiled:tpb={tpb}"), arch);
        let usage = &row["usage"];
        let registers = usage["registers"].as_u64().unwrap();
        assert!(registers > 0 && registers <= 255, "{row}");
        assert_eq!(usage["spills"], 0, "{row}");
        assert_eq!(usage["dynamic_shared_bytes"], dynamic, "{row}");
        // The main loop's FFMAs, from nvdisasm (scripts/setup installs it): the tiled kernel's
        // inner product is FFMAs among shared loads and index arithmetic.
        let main_loop = &usage["main_loop"];
        assert!(
            main_loop.is_object(),
            "no main loop (is nvdisasm on PATH?) in {row}"
        );
        let fma = main_loop["fma"].as_u64().unwrap();
        let length = main_loop["instructions"].as_u64().unwrap();
        assert!(fma > 0 && fma < length && length > 4, "{row}");
    }
    // The first call's compile-time limit is scaled by this machine's pace, measured through
    // NVRTC: a positive time, named in the notes with the limit it gives.
    let probe = report["pace"]["probe_seconds"].as_f64().unwrap();
    assert!(probe > 0.0 && probe.is_finite(), "{}", report["pace"]);
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("pace probe compiled in")),
        "{}",
        report["notes"]
    );
}

/// Whether ROCm's HIP runtime and hiprtc are both installed (then `--backend hip` must work,
/// not refuse).
#[cfg(feature = "hip")]
fn rocm_present() -> bool {
    loader_finds(
        &["libamdhip64.so", "libhiprtc.so"],
        &["/opt/rocm/lib", "/usr/lib/x86_64-linux-gnu"],
    )
}

#[cfg(not(feature = "hip"))]
#[test]
fn hip_in_a_build_without_it_is_refused() {
    assert_refused(
        &["run", "--backend", "hip"],
        &["without the hip backend", "--features hip"],
    );
}

/// With its driver, `--backend B` runs and passes; without it, `run` and `bench` refuse in one
/// line naming what is missing, `devices` says so, and a run without `--backend` moves on to the
/// next backend instead of failing.
#[cfg(any(feature = "cuda", feature = "hip"))]
fn vendor_backend_runs_or_says_what_is_missing(
    backend: &str,
    driver_present: bool,
    missing: &[&str],
) {
    if driver_present {
        let out = tilemm(&[
            "run",
            "--backend",
            backend,
            "-m",
            "97",
            "-k",
            "131",
            "-n",
            "53",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(stdout(&out).contains("result      PASS"));
        return;
    }
    assert_refused(&["run", "--backend", backend], missing);
    assert_refused(&["bench", "--backend", backend], missing);
    let devices = stdout(&tilemm(&["devices"]));
    assert!(
        devices.contains(&format!("{backend}: no device found")),
        "{devices}"
    );
    let auto = tilemm(&["run", "-m", "8", "-k", "8", "-n", "8"]);
    assert_eq!(auto.status.code(), Some(0), "{}", stderr(&auto));
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_runs_or_says_the_driver_is_missing() {
    vendor_backend_runs_or_says_what_is_missing(
        "cuda",
        nvidia_driver_present(),
        &["no NVIDIA driver found", "libcuda.so"],
    );
}

#[cfg(feature = "hip")]
#[test]
fn hip_backend_runs_or_says_rocm_is_missing() {
    vendor_backend_runs_or_says_what_is_missing(
        "hip",
        rocm_present(),
        &["no AMD ROCm runtime found", "libamdhip64.so"],
    );
}

/// A stand-in clang: answers `--version`, then prints `stderr` and exits with `code`.
fn fake_clang(dir: &Path, stderr_text: &str, code: i32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("clang");
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\ncat >&2 <<'EOF'\n{stderr_text}\nEOF\nexit {code}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn compile_check_fails_on_a_compile_error_and_on_a_spill() {
    let dir = tempfile::tempdir().unwrap();
    let args = |clang: &Path| {
        tilemm(&[
            "compile-check",
            "--archs",
            "gfx90a",
            "--kernels",
            "tiled",
            "--tpb",
            "16",
            "--dtypes",
            "f32",
            "--clang",
            clang.to_str().unwrap(),
        ])
    };
    let broken = fake_clang(
        dir.path(),
        "kernel.hip:3:1: error: unknown type name 'uint3'",
        1,
    );
    let out = args(&broken);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        text.contains("FAIL") && text.contains("unknown type name 'uint3'"),
        "{text}"
    );
    assert!(text.contains("0 compiled, 0 skipped, 1 failed"), "{text}");

    let remarks = [
        "SGPRs: 20",
        "VGPRs: 256",
        "ScratchSize [bytes/lane]: 64",
        "Occupancy [waves/SIMD]: 2",
        "SGPRs Spill: 0",
        "VGPRs Spill: 12",
        "LDS Size [bytes/block]: 0",
    ]
    .map(|r| format!("k.hip:1:1: remark:     {r} [-Rpass-analysis=kernel-resource-usage]"))
    .join("\n");
    let spilling = dir.path().join("spilling");
    std::fs::create_dir(&spilling).unwrap();
    let out = args(&fake_clang(&spilling, &remarks, 0));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let row = text.lines().find(|l| l.starts_with("tiled")).unwrap();
    assert!(
        row.contains("256 V + 20 S") && row.ends_with("FAIL: spills"),
        "{row}"
    );
}

#[test]
fn a_truncated_npy_file_is_refused_not_allocated() {
    // The header claims 100000×100000 f32 (40 GB); the file holds 64 bytes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lying.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }";
    write_raw_npy(&path, header, 64);
    let p = path.to_str().unwrap();
    assert_refused(&["run", "--a", p, "--b", p], &["lying.npy", "truncated"]);
}

/// ones(1×K)·ones(K×1) written as .npy files.
fn ones_files(dir: &Path, k: usize) -> (String, String) {
    let (a, b) = (dir.join("A.npy"), dir.join("B.npy"));
    write(&a, 1, k, &vec![1.0; k]);
    write(&b, k, 1, &vec![1.0; k]);
    (a.to_str().unwrap().into(), b.to_str().unwrap().into())
}

#[test]
fn k_beyond_a_drivers_loop_cap_gives_the_exact_sum_and_says_exact() {
    // The case: on Debian 12's lavapipe the naive kernel returned 65535, reported PASS.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ones_files(dir.path(), 65536);
    let c = dir.path().join("C.npy");
    for kernel in ["naive", "tiled"] {
        let out = tilemm(&[
            "run",
            "--kernel",
            kernel,
            "--a",
            &a,
            "--b",
            &b,
            "--out",
            c.to_str().unwrap(),
        ]);
        let text = stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kernel}: {text}{}",
            stderr(&out)
        );
        assert!(text.contains("bound       exact:"), "{kernel}: {text}");
        assert_eq!(read_matrix(&c).unwrap().1, vec![65536.0], "{kernel}");
    }
    let out = tilemm(&["run", "--kernel", "naive", "--a", &a, "--b", &b]);
    assert!(stdout(&out).contains("K in 2 launches"), "{}", stdout(&out));
}

#[test]
fn structured_data_gets_no_random_data_warning_and_overflow_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // 0.1 summed 4096 times: every rounding error has the same sign, so a correct sequential
    // f32 sum is off by far more than √K units, and that is not a precision bug.
    let (a, b) = (dir.path().join("A.npy"), dir.path().join("B.npy"));
    write(&a, 2, 4096, &vec![0.1; 2 * 4096]);
    write(&b, 4096, 2, &vec![1.0; 2 * 4096]);
    let out = tilemm(&[
        "run",
        "--kernel",
        "naive",
        "--a",
        a.to_str().unwrap(),
        "--b",
        b.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("WARNING"), "{text}");
    assert!(text.contains("not held to a precision limit"), "{text}");

    // Products of 1e30: C overflows f32. Said so, with the reference's magnitude; no NaN.
    write(&a, 2, 2, &[1e30; 4]);
    write(&b, 2, 2, &[1e30; 4]);
    let out = tilemm(&[
        "run",
        "--a",
        a.to_str().unwrap(),
        "--b",
        b.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("C overflows the f32 range"), "{text}");
    assert!(text.contains("the reference reaches 2.000e60"), "{text}");
    assert!(!text.contains("NaN") && !text.contains("WARNING"), "{text}");
}

#[test]
fn the_report_measures_compilation_on_its_own() {
    let out = tilemm(&["run", "-m", "33", "-k", "17", "-n", "9", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let r = &v["first_run"];
    let part = |name: &str| r[name].as_f64().unwrap();
    assert!(part("compile_ms") > 0.0, "{r}");
    // The first run is the sum of measured parts, not a difference of two runs.
    let sum = part("tuning_ms")
        + part("compile_ms")
        + part("upload_ms")
        + part("launch_ms")
        + part("download_ms");
    assert!((part("total_ms") - sum).abs() < 1e-6 * sum.max(1.0), "{r}");
}

/// A process's caches in `dir`: tilemm's (`TILEMM_CACHE_DIR`) and, on lavapipe, Mesa's shader
/// cache, enabled. A first process then compiles each kernel through the driver too, as on a
/// new machine, rather than finding it in the Mesa cache that earlier tests filled: with CubeCL's
/// part of a compile fast, that cache alone made a first compile of the register kernel 56 ms.
fn private_caches(dir: &Path) -> [(&'static str, String); 3] {
    [
        ("TILEMM_CACHE_DIR", dir.to_str().unwrap().to_string()),
        (
            "MESA_SHADER_CACHE_DIR",
            dir.join("mesa").to_str().unwrap().to_string(),
        ),
        ("MESA_SHADER_CACHE_DISABLE", "false".to_string()),
    ]
}

/// The files under `dir` named `name`, with their sizes.
fn files_named(dir: &Path, name: &str) -> Vec<(PathBuf, u64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, name));
        } else if entry.file_name() == name {
            found.push((path.clone(), entry.metadata().unwrap().len()));
        }
    }
    found
}

#[test]
fn a_second_process_loads_the_kernels_the_first_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let caches = private_caches(dir.path());
    let cache = caches.each_ref().map(|(k, v)| (*k, v.as_str()));
    let args = [
        "run", "--kernel", "register", "-m", "20", "-k", "30", "-n", "12", "--json",
    ];
    let run = || {
        let out = tilemm_with_env(&args, &cache);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["pass"], true, "{report}");
        assert!(!report.to_string().contains("not kept"), "{report}");
        let store = files_named(&dir.path().join("kernels"), "kernels.bin");
        // Each process works on a copy of its own, removed when it ends.
        let work = files_named(&dir.path().join("kernels"), "chunk0.cbor");
        assert!(work.is_empty(), "{work:?}");
        (report["first_run"]["compile_ms"].as_f64().unwrap(), store)
    };
    // CubeCL's compilation cache (SPIR-V on Vulkan), kept per build of tilemm in its store.
    let (cold, first) = run();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].1 > 100, "{first:?}");
    // Loading the register-tiled kernel takes tens of milliseconds; compiling it, seconds on
    // lavapipe (BENCHMARKS.md): the second process loaded it, and kept nothing twice.
    let (warm, second) = run();
    assert_eq!(second, first);
    assert!(warm < cold / 4.0, "compile {cold} ms, then {warm} ms");
}

#[test]
fn a_cache_directory_that_cannot_hold_kernels_is_a_note_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"x").unwrap();
    let out = tilemm_with_env(
        &["run", "--kernel", "naive", "-m", "9", "-k", "5", "-n", "7"],
        &[("TILEMM_CACHE_DIR", file.to_str().unwrap())],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("compiled kernels are not kept for the next process")
            && text.contains("not-a-directory"),
        "{text}"
    );
    assert!(text.contains("result      PASS"), "{text}");
}

#[test]
fn a_second_process_takes_autos_choice_from_the_cache_and_tuning_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let caches = private_caches(dir.path());
    let cache = caches.each_ref().map(|(k, v)| (*k, v.as_str()));
    // The default budget (none): the best-ranked candidate alone, no search, and the choice is
    // final for the class until a search is asked for.
    let args = ["run", "-m", "40", "-k", "24", "-n", "72"];
    let first = tilemm_with_env(&[&args[..], &["--json"]].concat(), &cache);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let v: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    let first_ms = v["first_run"]["total_ms"].as_f64().unwrap();
    let first = tilemm_with_env(&args, &cache);
    let text = stdout(&first);
    assert_eq!(first.status.code(), Some(0), "{text}{}", stderr(&first));
    // (The JSON run above chose and saved; this one reads the cache.)
    let line = text
        .lines()
        .find(|l| l.starts_with("tuning"))
        .unwrap_or_else(|| panic!("no tuning line in\n{text}"));
    assert!(
        line.contains("tuning cache hit") && line.contains("first-call choice: 1 of the"),
        "{line}"
    );
    assert_eq!(v["kernel"]["tuning"]["cache"], "miss", "{v}");
    assert_eq!(v["kernel"]["tuning"]["budget"], "none", "{v}");
    assert_eq!(
        v["kernel"]["tuning"]["timed"].as_array().unwrap().len(),
        1,
        "{v}"
    );
    assert_eq!(v["kernel"]["tuning"]["saved"], true, "{v}");

    let second = tilemm_with_env(&[&args[..], &["--json"]].concat(), &cache);
    let v: serde_json::Value = serde_json::from_str(&stdout(&second)).unwrap();
    let tuning = &v["kernel"]["tuning"];
    assert_eq!(tuning["cache"], "hit", "{tuning}");
    assert_eq!(tuning["timed"].as_array().unwrap().len(), 0, "{tuning}");
    assert_eq!(tuning["tried"], 1, "{tuning}");
    assert!(
        v["first_run"]["tuning_ms"].as_f64().unwrap() < 1000.0,
        "a hit reads a file"
    );
    // The second process finds the kernel chosen and compiled: its first GPU run takes at most
    // half the first process's.
    let second_ms = v["first_run"]["total_ms"].as_f64().unwrap();
    assert!(
        second_ms <= first_ms / 2.0,
        "1st GPU run: {first_ms:.1} ms in the first process, {second_ms:.1} ms in the second"
    );

    // Any budget above 0 goes on from the cached choice: one more candidate at least.
    let more = [&args[..], &["--tune-budget", "0.001", "--json"]].concat();
    let third = tilemm_with_env(&more, &cache);
    let v: serde_json::Value = serde_json::from_str(&stdout(&third)).unwrap();
    let tuning = &v["kernel"]["tuning"];
    assert_eq!(tuning["cache"], "continued", "{tuning}");
    assert_eq!(tuning["tried"], 2, "{tuning}");
    assert_eq!(tuning["timed"].as_array().unwrap().len(), 1, "{tuning}");
    assert_eq!(tuning["budget"], "0.001 s", "{tuning}");
    assert_eq!(v["pass"], true, "{v}");

    // A corrupt cache is a note, and the run goes on (and replaces it).
    std::fs::write(dir.path().join("tuning.json"), "{").unwrap();
    let fourth = tilemm_with_env(&args, &cache);
    let text = stdout(&fourth);
    assert_eq!(fourth.status.code(), Some(0), "{text}{}", stderr(&fourth));
    assert!(
        text.contains("is corrupt") && text.contains("tuning cache miss"),
        "{text}"
    );

    // `tilemm tune` fills the cache for a sweep; a run of the class then hits.
    let other = tempfile::tempdir().unwrap();
    let cache = [("TILEMM_CACHE_DIR", other.path().to_str().unwrap())];
    let tune = [
        "tune",
        "--sizes",
        "40x24x72",
        "--dtype",
        "f32",
        "--tune-budget",
        "0",
        "--json",
    ];
    let tuned = tilemm_with_env(&tune, &cache);
    assert_eq!(tuned.status.code(), Some(0), "{}", stderr(&tuned));
    let v: serde_json::Value = serde_json::from_str(&stdout(&tuned)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["cache"], "miss", "{v}");
    assert_eq!(v[0]["verified"], true, "{v}");
    let run = tilemm_with_env(&args, &cache);
    assert!(
        stdout(&run).contains("tuning cache hit"),
        "{}",
        stdout(&run)
    );
    assert_refused(&["tune", "--backend", "cpu"], &["tune needs a GPU device"]);

    assert_refused(
        &["run", "--kernel", "auto", "--tpb", "8"],
        &["--tpb needs a rung"],
    );
    assert_refused(&["run", "--tune-budget", "-1"], &["--tune-budget"]);
}

#[test]
fn memory_limits_give_one_line_never_an_abort() {
    // Under `prlimit --as=…`: the run needs about 860 MB (A, C, the CPU's C, the reference's
    // blocks), more than a 600 MB address space, and says so before allocating.
    let args = [
        "run",
        "-m",
        "100000000",
        "-k",
        "1",
        "-n",
        "1",
        "--backend",
        "cpu",
    ];
    let out = tilemm_limited(&args, libc::RLIMIT_AS, 600_000_000);
    assert_one_line_refusal(&out, "600 MB", &["host memory", "ulimit -v"]);
    // With room, the same run completes and is verified.
    let out = tilemm_limited(&args, libc::RLIMIT_AS, 3_000_000_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("result      PASS"));

    // A GPU driver is not started where it could not map itself (lavapipe crashed there):
    // the run falls back to the CPU and says why.
    let out = tilemm_limited(
        &["run", "-m", "8", "-k", "8", "-n", "8"],
        libc::RLIMIT_AS,
        500_000_000,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("not starting the wgpu driver"), "{text}");
    assert!(text.contains("result      PASS"), "{text}");

    // Sizes whose byte counts overflow 64 bits.
    let out = tilemm(&[
        "bench",
        "--backend",
        "cpu",
        "--sizes",
        "2147483647x1x1073741824",
    ]);
    assert_one_line_refusal(&out, "bench", &["host memory"]);
}

#[test]
fn a_pipe_is_read_as_a_stream() {
    use std::io::Write as _;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ones_files(dir.path(), 300);
    // `--a /dev/stdin` (and `--a <(cat A.npy)`, a pipe too).
    let mut child = command(&["run", "--a", "/dev/stdin", "--b", &b])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&a).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("bound       exact"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn native_endian_float32_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("native.npy");
    let mut bytes = npy_header("{'descr': '=f4', 'fortran_order': False, 'shape': (2, 2), }");
    bytes.extend([1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|x| x.to_ne_bytes()));
    std::fs::write(&a, bytes).unwrap();
    let c = dir.path().join("C.npy");
    let a = a.to_str().unwrap();
    let out = tilemm(&["run", "--a", a, "--b", a, "--out", c.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(read_matrix(&c).unwrap().1, vec![7.0, 10.0, 15.0, 22.0]);
}

#[test]
fn a_file_over_the_binding_limit_is_refused_before_its_data_is_read() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    // A is a FIFO whose writer sends the header of a 1×2³⁰ f32 matrix (4 GiB, over lavapipe's
    // 128 MiB binding) and then nothing: a reader that wanted the data before checking limits
    // would wait for it, then find it truncated, instead of refusing at once.
    let fifo = dir.path().join("A.npy");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let writer_path = fifo.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(writer_path)
            .unwrap();
        file.write_all(&npy_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1073741824), }",
        ))
        .unwrap();
        // Hold the pipe open until tilemm is done (or give up after a minute).
        let _ = done_rx.recv_timeout(std::time::Duration::from_secs(60));
    });
    // B is a sparse 4 GiB regular file: its length is right, and no disk is used.
    let b = dir.path().join("B.npy");
    let header = npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1), }");
    std::fs::write(&b, &header).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&b)
        .unwrap()
        .set_len(header.len() as u64 + (1 << 32))
        .unwrap();
    let out = tilemm(&[
        "run",
        "--backend",
        "wgpu",
        "--a",
        fifo.to_str().unwrap(),
        "--b",
        b.to_str().unwrap(),
    ]);
    done_tx.send(()).unwrap();
    writer.join().unwrap();
    // Refused before the data: panels would fit the device, but not the host's memory.
    assert_one_line_refusal(&out, "4 GiB", &["host memory"]);
}

#[test]
fn a_failed_out_write_leaves_the_existing_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("C.npy");
    write(&c, 1, 3, &[1.0, 2.0, 3.0]);
    let before = std::fs::read(&c).unwrap();
    // A file-size limit of 1000 bytes: C (64×64 f32, 16 KiB) cannot be written whole, as on a
    // full disk.
    let out = tilemm_limited(
        &[
            "run",
            "-m",
            "64",
            "-k",
            "8",
            "-n",
            "64",
            "--backend",
            "cpu",
            "--out",
            c.to_str().unwrap(),
        ],
        libc::RLIMIT_FSIZE,
        1000,
    );
    assert_one_line_refusal(&out, "fsize", &["cannot write", "C.npy"]);
    assert!(!stdout(&out).contains("PASS"), "{}", stdout(&out));
    assert_eq!(std::fs::read(&c).unwrap(), before);
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_report_that_cannot_be_written_is_an_error_and_a_closed_pipe_is_not() {
    for args in [
        &["run", "-m", "8", "-k", "8", "-n", "8"][..],
        &["run", "-m", "8", "-k", "8", "-n", "8", "--json"],
        &["devices"],
        &["devices", "--json"],
        &["emit", "--target", "cuda"],
        &["bench", "--sizes", "8", "--repeat", "1", "--backend", "cpu"],
    ] {
        let out = tilemm_to(args, "/dev/full");
        assert_one_line_refusal(
            &out,
            &format!("{args:?}"),
            &["cannot write to standard output"],
        );
    }
    // `tilemm devices | head -1`: the reader leaves early; tilemm stops quietly.
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = command(&["emit", "--target", "cuda"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!first.is_empty());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn compile_check_skips_what_a_target_cannot_compile_and_says_why() {
    // The tensor-core rung in f32 (it multiplies f16 and bf16 only) and laid out for warps of
    // 32 on CDNA's wavefronts of 64: both skipped with the reason, counted apart, never handed
    // to the compiler (this clang fails whatever it is given).
    let dir = tempfile::tempdir().unwrap();
    let clang = fake_clang(dir.path(), "the compiler was called", 1);
    let out = tilemm(&[
        "compile-check",
        "--archs",
        "gfx90a",
        "--kernels",
        "tensorcore:m=16:n=16:k=16:wm=2:wn=2:tm=2:tn=2:plane=32",
        "--dtypes",
        "f32,f16",
        "--clang",
        clang.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("skipped: it does not compute f32"), "{text}");
    assert!(
        text.contains("skipped: it is laid out for planes of 32 units, the device's are 64 wide"),
        "{text}"
    );
    assert!(!text.contains("the compiler was called"), "{text}");
    assert!(text.contains("0 compiled, 2 skipped, 0 failed"), "{text}");
}

#[test]
fn a_run_stays_within_the_host_memory_it_planned() {
    // The estimate that refuses what the host cannot hold (measure/run.rs) against the
    // process's measured peak: the peak may rise above what the process held when the run was
    // planned by at most the plan, and the plan is not many times the rise (beyond its fixed
    // margins for threads and the driver, 256 MiB). On the CPU path, where the operands
    // dominate; and on the default device (lavapipe here, whose buffers are host memory).
    for args in [
        &["--backend", "cpu", "-m", "2048", "-k", "2048", "-n", "2048"][..],
        &[
            "-m",
            "1536",
            "-k",
            "1536",
            "-n",
            "1536",
            "--tune-budget",
            "0",
        ][..],
    ] {
        let out = tilemm(&[&["run", "--json"], args].concat());
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_str(&text).unwrap();
        let memory = &report["host_memory"];
        let bytes = |field: &str| {
            memory[field]
                .as_u64()
                .unwrap_or_else(|| panic!("no {field} in {memory}"))
        };
        let (planned, before, peak) = (
            bytes("planned_bytes"),
            bytes("before_bytes"),
            bytes("peak_bytes"),
        );
        let rise = peak.saturating_sub(before);
        eprintln!("{args:?}: planned {planned} B, rose {rise} B (peak {peak} B)");
        assert!(
            rise <= planned,
            "{args:?}: rose {rise} B over a plan of {planned} B"
        );
        assert!(
            planned <= 3 * rise + (256 << 20),
            "{args:?}: planned {planned} B for a rise of {rise} B"
        );
    }
}

#[test]
fn ctrl_c_ends_by_sigint_and_leaves_no_partial_out() {
    // ^C a moment into a run that writes --out: the process ends by SIGINT (a shell's 130),
    // and neither the file nor the
    // partial file beside it (tilemm writes --out through a temporary file, renamed at the end).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.npy");
    let mut child = command(&["run", "-m", "2048", "-k", "2048", "-n", "2048", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The partial file appears once --out is opened, before the products.
    let started = std::time::Instant::now();
    while std::fs::read_dir(dir.path()).unwrap().count() == 0 {
        assert!(
            started.elapsed().as_secs() < 60,
            "tilemm never opened --out"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    // Ended by SIGINT itself, which a shell reports as 130.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn complex_runs_on_the_device_and_the_cpu_each_checked() {
    // complex64 on the wgpu device, Bᵀ, β reading C: both device runs and the CPU route pass,
    // each checked (a nonzero error measured against its bound and its precision limit).
    let out = tilemm(&[
        "run",
        "--json",
        "--dtype",
        "c64",
        "--backend",
        "wgpu",
        "-m",
        "33",
        "-k",
        "65",
        "-n",
        "17",
        "--trans-b",
        "--beta",
        "0.5",
        "--alpha",
        "-2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(v["pass"], true);
    assert_eq!(v["dtype"], "complex64");
    assert_eq!(v["problem"], "C[33×17] = A[33×65] · Bᵀ[17×65]");
    assert_eq!(v["flops"], 8.0 * 33.0 * 17.0 * 65.0);
    for run in ["first_gpu", "second_gpu", "cpu"] {
        let check = &v[run]["check"];
        assert_eq!(check["pass"], true, "{run}: {v}");
        for ratio in ["worst_err_over_bound", "worst_err_over_limit"] {
            let r = check[ratio].as_f64().unwrap();
            assert!(r > 0.0 && r <= 1.0, "{run} {ratio} {r}");
        }
    }
    assert!(
        v["first_gpu"]["route"].as_str().unwrap().contains("wgpu"),
        "{v}"
    );
    assert!(v["cpu"]["route"].as_str().unwrap().contains("CPU"), "{v}");
    // complex128 on the CPU alone, as text.
    let out = tilemm(&[
        "run",
        "--dtype",
        "c128",
        "--backend",
        "cpu",
        "-m",
        "20",
        "-k",
        "30",
        "-n",
        "10",
        "--batch",
        "2",
        "--trans-a",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("2 × C[20×10] = Aᵀ[30×20] · B[30×10], complex128 (f64 parts)"),
        "{text}"
    );
    assert!(!text.contains("1st GPU"), "{text}");
    assert!(text.contains("result      PASS"), "{text}");
}

#[test]
fn complex_runs_refuse_files_and_unknown_types() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.npy");
    write(&a, 2, 2, &[1.0, 2.0, 3.0, 4.0]);
    let a = a.to_str().unwrap();
    assert_refused(
        &["run", "--dtype", "c64", "--a", a, "--b", a],
        &["--dtype complex64 takes random inputs"],
    );
    assert_refused(
        &["run", "--dtype", "c32"],
        &["unknown dtype 'c32'", "c64, c128"],
    );
    // Sizes past the host's memory or the address space: refused before any input exists,
    // not an out-of-memory abort.
    assert_refused(
        &[
            "run", "--dtype", "c64", "-m", "200000", "-k", "200000", "-n", "200000",
        ],
        &["host memory"],
    );
    assert_refused(
        &["run", "--dtype", "c128", "-k", "9223372036854775807"],
        &["too large", "256×9223372036854775807×256"],
    );
}
