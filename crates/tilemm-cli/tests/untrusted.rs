//! Every cache, path and setting as untrusted input: damaged kernel caches, FIFOs and locks at
//! cache paths, config files in the working directory, dependencies' environment variables,
//! non-UTF-8 paths, and a soak of random damage. Each run must exit 0 (with a note where
//! something was repaired) or 2 with one line, never panic (101), abort (134) or hang.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any run here takes, shorter than a hang.
const HANG: Duration = Duration::from_secs(120);

/// tilemm with `args` in `cwd`, its caches under `cache`, and `env` on top; killed past
/// [`HANG`], which fails the test.
fn tilemm_in(cwd: &Path, cache: &OsStr, args: &[&str], env: &[(&str, &OsStr)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tilemm"));
    command
        .args(args)
        .current_dir(cwd)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("TILEMM_CACHE_DIR", cache)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the tilemm binary runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HANG {
            let _ = child.kill();
            panic!("tilemm {args:?} hung for {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A small product on the device with a fixed kernel: fast, and it compiles a kernel.
fn run(cache: &Path, kernel: &str) -> Output {
    tilemm_in(
        Path::new("."),
        cache.as_os_str(),
        &[
            "run", "--kernel", kernel, "-m", "33", "-k", "20", "-n", "17",
        ],
        &[],
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit 0 and PASS, or exit 2 with one line: never a panic, an abort or a signal.
fn assert_clean(out: &Output, what: &str) {
    let err = text(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(
            text(&out.stdout).contains("PASS"),
            "{what}: {}",
            text(&out.stdout)
        ),
        Some(2) => assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err:?}"),
        other => panic!("{what}: exit {other:?}, stderr {err:?}"),
    }
}

/// Exit 0 and PASS.
fn assert_passes(out: &Output, what: &str) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: stdout {stdout} stderr {}",
        text(&out.stderr)
    );
    assert!(stdout.contains("PASS"), "{what}: {stdout}");
    stdout
}

/// The build's kernel folder under `cache` (the only one there).
fn build_dir(cache: &Path) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cache.join("kernels"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        // The build's identity: 16 hex digits (what was moved aside has a suffix).
        .filter(|p| p.is_dir() && p.file_name().unwrap().len() == 16)
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "{}",
        path.display()
    );
}

/// Removes what is at `path`, whatever it is.
fn clear(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).unwrap(),
        Ok(_) => std::fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
}

/// The store's size: more than its header once kernels are kept.
fn store_len(cache: &Path) -> u64 {
    std::fs::metadata(build_dir(cache).join("kernels.bin")).map_or(0, |m| m.len())
}

#[test]
fn each_kind_of_damaged_kernel_cache_is_repaired_with_a_note_and_works_again() {
    type Damage = fn(&Path);
    let kinds: [(&str, Damage, bool); 11] = [
        ("a flipped bit", |b| flip(&b.join("kernels.bin"), 40), true),
        ("truncated", |b| truncate(&b.join("kernels.bin"), 30), true),
        (
            "junk appended",
            |b| append(&b.join("kernels.bin"), b"junk"),
            true,
        ),
        (
            "empty",
            |b| std::fs::write(b.join("kernels.bin"), b"").unwrap(),
            true,
        ),
        (
            "a directory",
            |b| replace_with_dir(&b.join("kernels.bin")),
            true,
        ),
        (
            "a FIFO",
            |b| replace_with_fifo(&b.join("kernels.bin")),
            true,
        ),
        (
            "a link",
            |b| replace_with_link(&b.join("kernels.bin")),
            true,
        ),
        ("build folder a file", |b| replace_with_file(b), true),
        ("lock a FIFO", |b| replace_with_fifo(&b.join("lock")), false),
        (
            "lock a directory",
            |b| replace_with_dir(&b.join("lock")),
            false,
        ),
        ("work a file", |b| replace_with_file(&b.join("work")), false),
    ];
    for (what, damage, noted) in kinds {
        let cache = tempfile::tempdir().unwrap();
        assert_passes(&run(cache.path(), "tiled"), what);
        let kept = store_len(cache.path());
        assert!(
            kept > 64,
            "{what}: the first run kept no kernel ({kept} bytes)"
        );
        damage(&build_dir(cache.path()));
        let out = assert_passes(&run(cache.path(), "tiled"), what);
        if noted {
            assert!(
                out.contains("note        kernel cache") && out.contains("compiled again")
                    || out.contains("was not a directory"),
                "{what}: no note in {out}"
            );
        } else {
            assert!(!out.contains("kernel cache"), "{what}: {out}");
        }
        // Usable again: the kernel is kept, and the next run has nothing to repair.
        assert_eq!(
            store_len(cache.path()),
            kept,
            "{what}: the store was not rebuilt"
        );
        let out = assert_passes(&run(cache.path(), "tiled"), what);
        assert!(!out.contains("note        kernel cache"), "{what}: {out}");
        assert!(!out.contains("not kept"), "{what}: {out}");
    }
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x04;
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path, by: u64) {
    let len = std::fs::metadata(path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len.saturating_sub(by)).unwrap();
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn replace_with_dir(path: &Path) {
    clear(path);
    std::fs::create_dir_all(path.join("inside")).unwrap();
}

fn replace_with_fifo(path: &Path) {
    clear(path);
    mkfifo(path);
}

fn replace_with_link(path: &Path) {
    clear(path);
    std::os::unix::fs::symlink("/etc/hostname", path).unwrap();
}

fn replace_with_file(path: &Path) {
    clear(path);
    std::fs::write(path, b"not a folder").unwrap();
}

#[test]
fn a_lock_held_or_left_behind_costs_no_wait_and_a_live_holder_at_most_a_note() {
    let cache = tempfile::tempdir().unwrap();
    assert_passes(&run(cache.path(), "naive"), "first");
    let build = build_dir(cache.path());
    // What a killed process leaves: a lock file, and a work folder holding CubeCL's own lock
    // (which CubeCL would wait 30 s on, or spin on if empty).
    let dead = build.join("work").join("999999-1");
    let spirv = dead.join("vulkan/0.10.0/spirv");
    std::fs::create_dir_all(&spirv).unwrap();
    std::fs::write(spirv.join("toc.json.log.lock"), b"").unwrap();
    std::fs::write(dead.join("owner"), b"").unwrap();
    let start = Instant::now();
    let out = assert_passes(&run(cache.path(), "naive"), "left behind");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    assert!(!out.contains("note        "), "{out}");
    assert!(!dead.exists(), "a dead process's work folder was kept");

    // A live holder (flock(1) holding the store's lock): a wait of seconds, then a note.
    // In a process group of its own: its sleep holds the lock too (the descriptor it inherits),
    // and is stopped with it rather than left for a minute holding the test's output open.
    let mut holder = Command::new("flock")
        .arg(build.join("lock"))
        .args(["sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("flock(1) from util-linux");
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let out = assert_passes(&run(cache.path(), "naive"), "held");
    let group = format!("-{}", holder.id());
    let killed = Command::new("kill").args(["-KILL", "--", &group]).status();
    assert!(
        matches!(killed, Ok(s) if s.success()),
        "kill {group}: {killed:?}"
    );
    holder.wait().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "took {:?}",
        start.elapsed()
    );
    assert!(out.contains("locked by another process"), "{out}");
}

#[test]
fn config_files_nearby_and_dependency_variables_change_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let sub = cwd.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    // CubeCL reads these from the working directory and every one above it.
    std::fs::write(cwd.path().join("cubecl.toml"), "garbage [[[").unwrap();
    std::fs::write(cwd.path().join("burn.toml"), "[cubecl\ncompilation = 3").unwrap();
    std::fs::write(
        sub.join("cubecl.toml"),
        "[compilation]\ncache = { file = \"/proc/x\" }\n",
    )
    .unwrap();
    let args = [
        "run", "--kernel", "tiled", "-m", "40", "-k", "30", "-n", "20",
    ];
    let none: [(&str, &OsStr); 0] = [];
    for env in [&none[..], &[("TILEMM_KERNEL_CACHE", OsStr::new("off"))]] {
        for dir in [cwd.path(), &sub] {
            let out = tilemm_in(dir, cache.path().as_os_str(), &args, env);
            assert_passes(&out, &format!("{} {env:?}", dir.display()));
        }
    }
    // emit reads CubeCL's configuration too.
    let out = tilemm_in(
        &sub,
        cache.path().as_os_str(),
        &["emit", "--target", "wgsl"],
        &none,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Variables CubeCL reads itself: ignored where tilemm sets the setting, checked where it
    // passes one on.
    let with = |name: &str, value: &str| {
        tilemm_in(
            cwd.path(),
            cache.path().as_os_str(),
            &args,
            &[(name, OsStr::new(value))],
        )
    };
    for (name, value) in [
        ("CUBECL_DEBUG_LOG", "/etc/hostname/x"),
        ("CUBECL_DEBUG_OPTION", "bogus"),
        ("CUBECL_AUTOTUNE_LEVEL", "bogus"),
    ] {
        assert_passes(&with(name, value), name);
    }
    for (name, value) in [
        ("CUBECL_WGPU_MAX_TASKS", "abc"),
        ("CUBECL_WGPU_MAX_TASKS", "0"),
        ("CUBECL_DEBUG_SPIRV", "/etc/hostname/x"),
    ] {
        let out = with(name, value);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}={value}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(name) && err.contains(value), "{err}");
    }
    assert_passes(
        &with("CUBECL_WGPU_MAX_TASKS", "4"),
        "CUBECL_WGPU_MAX_TASKS=4",
    );
}

#[test]
fn fifos_at_every_cache_path_give_a_note_not_a_hang() {
    let cache = tempfile::tempdir().unwrap();
    // `auto` reads and writes the tuning cache; one candidate keeps it short.
    let auto = [
        "run",
        "-m",
        "24",
        "-k",
        "24",
        "-n",
        "24",
        "--tune-budget",
        "0",
    ];
    let none: [(&str, &OsStr); 0] = [];
    assert_passes(
        &tilemm_in(Path::new("."), cache.path().as_os_str(), &auto, &none),
        "first",
    );
    let build = build_dir(cache.path());
    for path in [
        cache.path().join("tuning.json"),
        cache.path().join("tuning.json.lock"),
        build.join("kernels.bin"),
        build.join("lock"),
    ] {
        replace_with_fifo(&path);
        let out = tilemm_in(Path::new("."), cache.path().as_os_str(), &auto, &none);
        let stdout = assert_passes(&out, &path.display().to_string());
        let name = path.file_name().unwrap().to_str().unwrap();
        if name.ends_with(".json") || name == "kernels.bin" {
            assert!(stdout.contains("FIFO"), "{name}: {stdout}");
        }
        // Repaired for the next run.
        let stdout = assert_passes(
            &tilemm_in(Path::new("."), cache.path().as_os_str(), &auto, &none),
            name,
        );
        assert!(!stdout.contains("FIFO"), "{name}: {stdout}");
    }
}

#[test]
fn non_utf8_paths_are_shown_lossily_and_never_panic() {
    let root = tempfile::tempdir().unwrap();
    let odd = |name: &[u8]| root.path().join(OsString::from_vec(name.to_vec()));
    let cache = odd(b"cache-\xff");
    let home = odd(b"home-\xfe");
    std::fs::create_dir(&home).unwrap();
    let none: [(&str, &OsStr); 0] = [];
    let quick = ["--tune-budget", "0", "-m", "20", "-k", "20", "-n", "20"];
    let run_json = [&["run", "--json"][..], &quick].concat();
    // A cache directory that is not UTF-8, given or found from $HOME.
    let out = tilemm_in(root.path(), cache.as_os_str(), &run_json, &none);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report.to_string().contains("cache-\u{fffd}"), "{report}");
    let out = tilemm_in(
        root.path(),
        OsStr::new(""),
        &run_json,
        &[
            ("HOME", home.as_os_str()),
            ("XDG_CACHE_HOME", OsStr::new("")),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bench = [
        "bench",
        "--json",
        "--sizes",
        "20",
        "--repeat",
        "1",
        "--kernels",
        "auto,naive",
    ];
    let out = tilemm_in(
        root.path(),
        cache.as_os_str(),
        &[&bench[..], &["--tune-budget", "0"]].concat(),
        &none,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();

    // Input and output files whose names are not UTF-8.
    let (a, b, c) = (odd(b"a-\xff.npy"), odd(b"b-\xff.npy"), odd(b"c-\xff.npy"));
    // A is 5×4 with a[i][j] = i + j, B is 4×3 with b[i][j] = i·j: exact in f32.
    let a_data: Vec<f32> = (0..20).map(|x| (x / 4 + x % 4) as f32).collect();
    let b_data: Vec<f32> = (0..12).map(|x| ((x / 3) * (x % 3)) as f32).collect();
    tilemm_lab::inputs::write_matrix(&a, 5, 4, &a_data).unwrap();
    tilemm_lab::inputs::write_matrix(&b, 4, 3, &b_data).unwrap();
    let mut args: Vec<OsString> = ["run", "--json", "--kernel", "tiled", "--a"]
        .map(OsString::from)
        .to_vec();
    args.extend([
        a.into_os_string(),
        "--b".into(),
        b.into_os_string(),
        "--out".into(),
    ]);
    args.push(c.clone().into_os_string());
    let out = Command::new(env!("CARGO_BIN_EXE_tilemm"))
        .args(&args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("TILEMM_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("a-\u{fffd}.npy"), "{report}");
    let (shape, product) = tilemm_lab::inputs::read_matrix(&c).unwrap();
    let expected: Vec<f32> = (0..15)
        .map(|x| {
            (0..4)
                .map(|l| a_data[(x / 3) * 4 + l] * b_data[l * 3 + x % 3])
                .sum()
        })
        .collect();
    assert_eq!((shape, product), ((5, 3), expected));
}

#[test]
fn bench_leaves_out_the_default_rungs_the_device_cannot_run_in_every_precision() {
    let cache = tempfile::tempdir().unwrap();
    let none: [(&str, &OsStr); 0] = [];
    for dtype in ["f32", "f16", "bf16", "f64"] {
        let args = [
            "bench",
            "--dtype",
            dtype,
            "--sizes",
            "32",
            "--repeat",
            "1",
            "--tune-budget",
            "0",
        ];
        let out = tilemm_in(Path::new("."), cache.path().as_os_str(), &args, &none);
        assert_eq!(
            out.status.code(),
            Some(0),
            "bench --dtype {dtype}: {}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        assert!(stdout.contains("naive"), "{dtype}: {stdout}");
        println!("bench --dtype {dtype}:\n{stdout}");
    }
}

#[test]
fn conflicting_tile_sizes_are_refused_naming_both() {
    let cache = tempfile::tempdir().unwrap();
    let none: [(&str, &OsStr); 0] = [];
    for args in [
        &["run", "--kernel", "tiled:tpb=8", "--tpb", "16"][..],
        &["bench", "--kernels", "naive,tiled:tpb=8", "--tpb", "16,8"],
        &[
            "emit",
            "--target",
            "wgsl",
            "--kernel",
            "tiled:tpb=32",
            "--tpb",
            "8",
        ],
    ] {
        let out = tilemm_in(Path::new("."), cache.path().as_os_str(), args, &none);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("--tpb") && (err.contains("tpb=8") || err.contains("tpb=32")),
            "{err}"
        );
    }
    // The same tile size twice is no conflict.
    let out = tilemm_in(
        Path::new("."),
        cache.path().as_os_str(),
        &[
            "run",
            "--kernel",
            "tiled:tpb=8",
            "--tpb",
            "8",
            "-m",
            "16",
            "-k",
            "16",
            "-n",
            "16",
        ],
        &none,
    );
    assert_passes(&out, "same tpb");
}

/// The records of the store under `cache`: (chunk path, entry), read as its format says
/// (cache/store.rs: a header line, then u16 path length, path, u32 entry length, entry, u64
/// checksum).
fn store_records(cache: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(build_dir(cache).join("kernels.bin")).unwrap();
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut rest = &bytes[header..];
    let mut records = Vec::new();
    while !rest.is_empty() {
        let len = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let path = String::from_utf8(rest[2..2 + len].to_vec()).unwrap();
        rest = &rest[2 + len..];
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        records.push((path, rest[4..4 + len].to_vec()));
        rest = &rest[4 + len + 8..];
    }
    records
}

#[test]
fn processes_running_at_once_keep_every_kernel_once() {
    let cache = tempfile::tempdir().unwrap();
    let kernels = ["naive", "tiled", "tiled:tpb=8", "naive:tpb=8"];
    let spawn = |kernel: &str| {
        Command::new(env!("CARGO_BIN_EXE_tilemm"))
            .args([
                "run", "--kernel", kernel, "-m", "33", "-k", "20", "-n", "17",
            ])
            .env("XDG_RUNTIME_DIR", std::env::temp_dir())
            .env("TILEMM_CACHE_DIR", cache.path())
            .output()
    };
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = kernels.iter().map(|k| s.spawn(move || spawn(k))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    for (kernel, out) in kernels.iter().zip(&runs) {
        assert_passes(out, kernel);
    }
    let records = store_records(cache.path());
    let mut distinct = records.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), records.len(), "a kernel was kept twice");
    assert!(records.len() >= kernels.len(), "{} records", records.len());
    // The store is stable: running them again adds nothing.
    for kernel in kernels {
        assert_passes(&run(cache.path(), kernel), kernel);
    }
    assert_eq!(store_records(cache.path()), records);
    let work = build_dir(cache.path()).join("work");
    assert_eq!(
        std::fs::read_dir(work).unwrap().count(),
        0,
        "work folders were left"
    );
}

/// A small deterministic generator (xorshift): the soak is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn soak_a_cache_damaged_at_random_200_times() {
    let runs: usize = std::env::var("TILEMM_SOAK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let cache = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x7115_6d6d_2026_1124);
    let kernels = ["naive", "tiled", "tiled:tpb=8", "naive:tpb=8"];
    let mut outcomes = [0usize; 2];
    for i in 0..runs {
        let damage = if i == 0 {
            "none".to_string()
        } else {
            damage_at_random(&build_dir(cache.path()), &mut rng)
        };
        let out = run(cache.path(), kernels[i % kernels.len()]);
        assert_clean(&out, &format!("run {i} after {damage}"));
        outcomes[usize::from(out.status.code() == Some(2))] += 1;
    }
    println!(
        "soak: {runs} runs, {} passed, {} refused in one line",
        outcomes[0], outcomes[1]
    );
    // Damage is repaired, not refused: every run computes.
    assert_eq!(outcomes[1], 0, "some runs were refused");
}

/// One kind of damage at one place in the build's folder, described.
fn damage_at_random(build: &Path, rng: &mut Rng) -> String {
    let targets = [
        "kernels.bin",
        "lock",
        "work",
        "kernels.bin",
        "kernels.bin",
        ".",
    ];
    let target = targets[rng.below(targets.len())];
    let path = match target {
        "." => build.to_path_buf(),
        _ => build.join(target),
    };
    let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
    let kind = rng.below(8);
    match kind {
        0..=2 if is_file && target != "lock" => {
            let mut bytes = std::fs::read(&path).unwrap();
            if bytes.is_empty() {
                return format!("{target} empty already");
            }
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
            std::fs::write(&path, bytes).unwrap();
            format!("{flips} bit flips in {target}")
        }
        3 if is_file => {
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            let to = rng.below(len + 1) as u64;
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.set_len(to).unwrap();
            format!("{target} cut to {to} bytes")
        }
        4 if target != "." => {
            replace_with_dir(&path);
            format!("{target} a directory")
        }
        5 if target != "." => {
            replace_with_fifo(&path);
            format!("{target} a FIFO")
        }
        6 => {
            replace_with_file(&path);
            format!("{target} a file")
        }
        _ if target != "." => {
            let junk: Vec<u8> = (0..rng.below(64)).map(|_| rng.next() as u8).collect();
            clear(&path);
            std::fs::write(&path, &junk).unwrap();
            format!("{target} {} bytes of junk", junk.len())
        }
        _ => "nothing".into(),
    }
}

#[test]
fn a_kernel_cache_left_by_another_user_is_moved_aside_and_rebuilt() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Files of another user can only be made as root; CI runs as root and sets this.
        assert!(
            std::env::var_os("TILEMM_EXPECT_ROOT").is_none(),
            "TILEMM_EXPECT_ROOT is set but the tests do not run as root"
        );
        println!("branch: not root, so the two-user case did not run (CI runs it as root)");
        return;
    }
    println!("branch: root, acting as root and then as nobody (setpriv)");
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let chmod = |path: &Path, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(root.path(), 0o755);
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    // One `sudo tilemm run` into the user's cache: root's kernels/ and store.
    assert_passes(&run(&cache, "naive"), "as root");
    let as_nobody = || {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_tilemm"))
            .args([
                "run", "--kernel", "naive", "-m", "33", "-k", "20", "-n", "17",
            ])
            .env("XDG_RUNTIME_DIR", std::env::temp_dir())
            .env("TILEMM_CACHE_DIR", &cache)
            .env("HOME", "/nonexistent")
            .output()
            .expect("setpriv from util-linux");
        assert_passes(&out, "as nobody")
    };
    let out = as_nobody();
    assert!(out.contains("belongs to another user"), "{out}");
    let out = as_nobody();
    assert!(
        !out.contains("note"),
        "the cache was not usable again: {out}"
    );
    // Root's files inside the user's own build folder: the folder is moved aside too.
    for name in ["lock", "kernels.bin"] {
        std::os::unix::fs::chown(build_dir(&cache).join(name), Some(0), Some(0)).unwrap();
        let out = as_nobody();
        assert!(
            out.contains(&format!("its {name} belongs to user 0")),
            "{out}"
        );
        assert!(!as_nobody().contains("note"), "{name}: not usable again");
    }
}
