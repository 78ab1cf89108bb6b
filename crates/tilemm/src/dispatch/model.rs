//! The measured route model: how long each route took per multiply-add, by size, kept in
//! tilemm's cache (`routes.json`) so that later processes start from what earlier ones
//! measured. The drop-in BLAS measures its routes into it; the front door reads it
//! ([`crate::dispatch::route`]), and falls back on the link's cost model where a size has not
//! been measured on both the CPU and the GPU.
//!
//! Like NVBLAS's size heuristic, a call's route follows its size, here M·N·K in half-octave
//! buckets of its cube root (64³ and 90³ are neighbours). Unlike it, the threshold is measured
//! on this machine: the first calls of a bucket go to each route in turn (each call's answer is
//! real, only its speed is at stake) until every route that could win has two timings there;
//! then the bucket's calls take the fastest. A route slower by more than [`PRUNE`] in the
//! nearest measured bucket is not tried (the reference BLAS at 2048³ would cost seconds).
//! Each route is keyed by what it is (the GPU's name and driver, the BLAS underneath's file,
//! tilemm's CPU path and its threads), so a new GPU or a switched BLAS is measured afresh.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::io::store::Store;

/// Timings a route needs in a bucket before the bucket's choice is final: the first of a
/// process can include one-time costs (a kernel's compilation), and the smaller one counts.
pub const SAMPLES: u32 = 2;

/// A route expected to take more than this factor times the fastest timing in the bucket is
/// not tried there.
pub const PRUNE: f64 = 2.0;

/// The smallest bucket (64³) whose time per multiply-add predicts a steady route's in buckets
/// further than two away.
pub const STEADY_FROM: i32 = 12;

/// Every this many final choices in a bucket, another route is timed again.
pub const RECHECK: u64 = 64;

/// The routes timed again are those expected within this factor of the fastest.
pub const RECHECK_FACTOR: f64 = 4.0;

/// The route model kept at `path`: format 1, for every tilemm version (timings of routes do not
/// depend on it); a full one is tens of KiB, so a file over 4 MiB is not read; a saver waits up
/// to 2 s for another.
fn store(path: &Path) -> Store {
    Store {
        what: "route model",
        path: path.to_path_buf(),
        format: 1,
        per_version: false,
        max_bytes: 4 << 20,
        lock_wait: Duration::from_secs(2),
    }
}

/// The bucket of a call of `fmas` multiply-adds: twice the base-2 logarithm of its cube root,
/// rounded (64³ is 12, 2048³ is 22).
pub fn bucket(fmas: f64) -> i32 {
    (fmas.max(1.0).log2() * 2.0 / 3.0).round() as i32
}

/// The multiply-adds at the center of `bucket`.
fn center(bucket: i32) -> f64 {
    (bucket as f64 * 1.5).exp2()
}

/// What one route measured in one bucket.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// Timings taken.
    pub samples: u32,
    /// The fastest, in nanoseconds per multiply-add.
    pub ns_per_fma: f64,
}

fn key(route: &str, precision: &str, bucket: i32) -> String {
    format!("{route} | {precision} | {bucket}")
}

/// A route as the model sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// What it is (`gpu wgpu llvmpipe … (driver)`, `blas /usr/lib/…`, `cpu gemm 0.19, 2
    /// threads`): its timings are kept under this.
    pub id: &'a str,
    /// Whether its time per multiply-add is about the same at every size (a CPU's), so that
    /// a bucket's timing predicts the others'; a GPU's falls with size (launch and transfer
    /// costs first), so that a smaller bucket's timing only expected it from below.
    pub steady: bool,
}

/// The decision for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Candidate `i` is being measured in this bucket.
    Explore(usize),
    /// Candidate `i` is the fastest measured.
    Fastest(usize),
}

impl Choice {
    /// The candidate chosen.
    pub fn index(self) -> usize {
        match self {
            Choice::Explore(i) | Choice::Fastest(i) => i,
        }
    }
}

/// A final choice and how often it was made.
#[derive(Debug)]
struct Decided {
    precision: String,
    bucket: i32,
    index: usize,
    calls: u64,
}

/// The model: the file's entries, plus what this process measured.
#[derive(Debug, Default)]
pub struct Model {
    entries: BTreeMap<String, Measured>,
    path: Option<PathBuf>,
    /// Final choices, per precision and bucket, until a timing or failure changes what is
    /// known.
    decided: Vec<Decided>,
    /// Routes that failed in a bucket in this process (out of memory at that size, say): not
    /// chosen there again by this process, nor kept for others (the failure may pass).
    failed: std::collections::BTreeSet<String>,
}

impl Model {
    /// The model kept at `path` (`None`: this process's own only). A file that cannot be used
    /// is ignored with a note.
    pub fn load(path: Option<PathBuf>, notes: &mut Vec<String>) -> Self {
        let entries = path
            .as_deref()
            .map(|p| Self::read(p, notes))
            .unwrap_or_default();
        Model {
            entries,
            path,
            ..Model::default()
        }
    }

    fn read(path: &Path, notes: &mut Vec<String>) -> BTreeMap<String, Measured> {
        let mut entries: BTreeMap<String, Measured> = store(path).load(notes);
        entries.retain(|_, m| m.ns_per_fma.is_finite() && m.ns_per_fma >= 0.0);
        entries
    }

    /// What `route` measured in `bucket`.
    pub fn measured(&self, route: &str, precision: &str, bucket: i32) -> Option<Measured> {
        self.entries.get(&key(route, precision, bucket)).copied()
    }

    /// What `route` (see [`Candidate::steady`]) is expected to take for `fmas` multiply-adds,
    /// in nanoseconds, from what it measured in other buckets (`None`: nothing yet). A steady
    /// route: its time per multiply-add in the nearest bucket of 64³ or more, or one within
    /// two buckets. Another: a lower bound, since a
    /// product takes no less time than a smaller one, nor less per multiply-add than a larger
    /// one. Only buckets timed in full count: one timing may be a disturbed one.
    fn expected(&self, route: &Candidate, precision: &str, fmas: f64) -> Option<f64> {
        let prefix = format!("{} | {precision} | ", route.id);
        let here = bucket(fmas);
        let full = self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, m)| m.samples >= SAMPLES)
            .filter_map(|(k, m)| Some((k[prefix.len()..].parse::<i32>().ok()?, m.ns_per_fma)));
        if route.steady {
            // A bucket under 64³ mostly times the call's fixed costs: it predicts only its
            // neighbours.
            full.filter(|&(b, _)| b >= STEADY_FROM || (b - here).abs() <= 2)
                .min_by_key(|&(b, _)| ((b - here).abs(), b))
                .map(|(_, ns)| ns * fmas)
        } else {
            full.map(|(b, ns)| if b < here { ns * center(b) } else { ns * fmas })
                .reduce(f64::max)
        }
    }

    /// Which of `candidates` (route identities, at least one) computes a call of `fmas`
    /// multiply-adds in `precision`.
    ///
    /// A route with nothing to go on is tried first, then, in the call's bucket, each route
    /// until it has [`SAMPLES`] timings, unless it is expected to take more than [`PRUNE`]
    /// times the fastest timing there; then the fastest is chosen. Every [`RECHECK`]th choice
    /// of a bucket tries the most promising other route within [`RECHECK_FACTOR`] of the
    /// fastest again, so that a route judged on a disturbed timing (another process busy) can
    /// recover.
    pub fn choose(&mut self, candidates: &[Candidate], precision: &str, fmas: f64) -> Choice {
        let b = bucket(fmas);
        // A final choice is looked up, not worked out again, on every call of the bucket (the
        // bucket compared first: integers before strings).
        let known = self
            .decided
            .iter_mut()
            .find(|d| d.bucket == b && d.precision == precision);
        let recheck = match known {
            Some(d) => {
                d.calls += 1;
                if d.calls % RECHECK != 0 {
                    return Choice::Fastest(d.index);
                }
                true
            }
            None => false,
        };
        let choice = self.choose_usable(candidates, precision, fmas, recheck);
        if let (Choice::Fastest(index), false) = (choice, recheck) {
            self.decided.push(Decided {
                precision: precision.to_string(),
                bucket: b,
                index,
                calls: 1,
            });
        }
        choice
    }

    fn choose_usable(
        &mut self,
        candidates: &[Candidate],
        precision: &str,
        fmas: f64,
        recheck: bool,
    ) -> Choice {
        let b = bucket(fmas);
        let usable: Vec<usize> = (0..candidates.len())
            .filter(|&i| !self.failed.contains(&key(candidates[i].id, precision, b)))
            .collect();
        if usable.is_empty() {
            return Choice::Fastest(0);
        }
        let others: Vec<Candidate> = usable.iter().map(|&i| candidates[i]).collect();
        match self.choose_among(&others, precision, fmas, recheck) {
            Choice::Explore(i) => Choice::Explore(usable[i]),
            Choice::Fastest(i) => Choice::Fastest(usable[i]),
        }
    }

    /// Records that `route` failed for a call of `fmas` multiply-adds in `precision`.
    pub fn failed(&mut self, route: &str, precision: &str, fmas: f64) {
        self.failed.insert(key(route, precision, bucket(fmas)));
        self.decided.clear();
    }

    fn choose_among(
        &self,
        candidates: &[Candidate],
        precision: &str,
        fmas: f64,
        recheck: bool,
    ) -> Choice {
        let b = bucket(fmas);
        let here: Vec<Option<Measured>> = candidates
            .iter()
            .map(|c| self.measured(c.id, precision, b))
            .collect();
        let timed = |i: usize| here[i].map(|m| m.ns_per_fma * fmas);
        let expected: Vec<Option<f64>> = (0..candidates.len())
            .map(|i| {
                let elsewhere = self.expected(&candidates[i], precision, fmas);
                match (timed(i), elsewhere) {
                    // The lower: a single timing here may include one-time costs.
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                }
            })
            .collect();
        if let Some(i) = expected.iter().position(Option::is_none) {
            return Choice::Explore(i);
        }
        let expected: Vec<f64> = expected.into_iter().flatten().collect();
        let least = |among: &mut dyn Iterator<Item = usize>| {
            among.min_by(|&x, &y| expected[x].total_cmp(&expected[y]))
        };
        let Some(best) = (0..candidates.len()).filter_map(timed).reduce(f64::min) else {
            // Nothing timed in this bucket yet: the most promising first.
            return Choice::Explore(least(&mut (0..candidates.len())).unwrap_or(0));
        };
        let samples = |i: usize| here[i].map_or(0, |m| m.samples);
        // A route begun here is timed in full: one timing may be a disturbed one.
        let begun = (0..candidates.len()).find(|&i| samples(i) > 0 && samples(i) < SAMPLES);
        let promising =
            (0..candidates.len()).find(|&i| samples(i) == 0 && expected[i] <= PRUNE * best);
        if let Some(i) = begun.or(promising) {
            return Choice::Explore(i);
        }
        let fastest = (0..candidates.len())
            .filter_map(|i| Some((i, timed(i)?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map_or(0, |(i, _)| i);
        if recheck {
            let mut others = (0..candidates.len())
                .filter(|&i| i != fastest && expected[i] <= RECHECK_FACTOR * best);
            if let Some(i) = least(&mut others) {
                return Choice::Explore(i);
            }
        }
        Choice::Fastest(fastest)
    }

    /// Records that `route` took `time` for a call of `fmas` multiply-adds in `precision`, and
    /// saves the model (a file that cannot be written costs a note).
    pub fn record(
        &mut self,
        route: &str,
        precision: &str,
        fmas: f64,
        time: Duration,
        notes: &mut Vec<String>,
    ) {
        let bucket = bucket(fmas);
        let ns = time.as_secs_f64() * 1e9 / fmas.max(1.0);
        let key = key(route, precision, bucket);
        self.decided.clear();
        let entry = self.entries.entry(key.clone()).or_default();
        entry.ns_per_fma = if entry.samples == 0 {
            ns
        } else {
            entry.ns_per_fma.min(ns)
        };
        entry.samples += 1;
        let entry = *entry;
        let Some(path) = self.path.clone() else {
            return;
        };
        // What other processes saved since, with this process's timing of this key.
        let saved = store(&path).update(|entries: &mut BTreeMap<String, Measured>| {
            entries.retain(|_, m| m.ns_per_fma.is_finite() && m.ns_per_fma >= 0.0);
            let merged = entries.entry(key).or_default();
            if merged.samples < entry.samples {
                *merged = entry;
            }
        });
        match saved {
            Ok(entries) => self.entries.extend(entries),
            Err(e) => {
                notes.push(format!(
                    "route model {} not saved ({e}); this process keeps its own",
                    path.display()
                ));
                self.path = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: &str = "f32";

    fn time(ns_per_fma: f64, fmas: f64) -> Duration {
        Duration::from_secs_f64(ns_per_fma * fmas / 1e9)
    }

    #[test]
    fn buckets_are_half_octaves_of_the_cube_root() {
        assert_eq!(bucket(64f64.powi(3)), 12);
        assert_eq!(bucket(90f64.powi(3)), 13);
        assert_eq!(bucket(2048f64.powi(3)), 22);
        assert_eq!(bucket(0.0), 0);
    }

    fn routes() -> [Candidate<'static>; 3] {
        [
            Candidate {
                id: "blas",
                steady: true,
            },
            Candidate {
                id: "cpu",
                steady: true,
            },
            Candidate {
                id: "gpu",
                steady: false,
            },
        ]
    }

    /// Calls of `fmas` until the choice is final, each taking `ns[i]` per multiply-add on
    /// route `i`: the choices made.
    fn settle(model: &mut Model, ns: [f64; 3], fmas: f64) -> Vec<Choice> {
        let mut order = Vec::new();
        let mut notes = Vec::new();
        loop {
            let choice = model.choose(&routes(), F32, fmas);
            order.push(choice);
            let Choice::Explore(i) = choice else {
                return order;
            };
            model.record(routes()[i].id, F32, fmas, time(ns[i], fmas), &mut notes);
            assert!(order.len() < 20 && notes.is_empty(), "{order:?} {notes:?}");
        }
    }

    #[test]
    fn every_route_that_could_win_is_timed_twice_then_the_fastest_is_kept() {
        use Choice::*;
        let mut model = Model::default();
        let fmas = 100f64.powi(3);
        // blas 3 ns per multiply-add, cpu 1, gpu 1.5: each is timed once, each begun is timed
        // twice, then cpu is kept.
        let order = settle(&mut model, [3.0, 1.0, 1.5], fmas);
        assert_eq!(
            order,
            [
                Explore(0),
                Explore(1),
                Explore(2),
                Explore(0),
                Explore(1),
                Explore(2),
                Fastest(1)
            ]
        );
        // Every RECHECK-th choice (settle made the first) times the most promising other route
        // within 4× again: the GPU (1.5), not blas (3).
        let choices: Vec<Choice> = (2..RECHECK)
            .map(|_| model.choose(&routes(), F32, fmas * 1.1))
            .collect();
        assert!(choices.iter().all(|c| *c == Fastest(1)), "{choices:?}");
        assert_eq!(model.choose(&routes(), F32, fmas), Explore(2));
        // Another precision is measured on its own.
        assert_eq!(model.choose(&routes(), "f64", fmas), Explore(0));
        // A route that failed here is not chosen again in this process.
        model.failed("cpu", F32, fmas);
        assert_eq!(model.choose(&routes(), F32, fmas), Fastest(2));
        // Elsewhere it is.
        assert_eq!(model.choose(&routes()[..2], F32, fmas * 100.0), Explore(1));
    }

    #[test]
    fn a_disturbed_timing_is_not_final() {
        use Choice::*;
        let mut model = Model::default();
        let fmas = 100f64.powi(3);
        let mut notes = Vec::new();
        // blas timed twice at 3 ns; cpu once at 10 (disturbed): cpu is timed again, at 1.
        for _ in 0..SAMPLES {
            model.record("blas", F32, fmas, time(3.0, fmas), &mut notes);
        }
        model.record("cpu", F32, fmas, time(10.0, fmas), &mut notes);
        let routes = &routes()[..2];
        assert_eq!(model.choose(routes, F32, fmas), Explore(1));
        model.record("cpu", F32, fmas, time(1.0, fmas), &mut notes);
        assert_eq!(model.choose(routes, F32, fmas), Fastest(1));
    }

    #[test]
    fn a_cpu_route_slower_nearby_is_not_tried_but_a_gpu_is() {
        use Choice::*;
        let mut model = Model::default();
        // At 64³, the GPU costs 5 ns per multiply-add (its launch), the CPU 0.1.
        settle(&mut model, [1.0, 0.1, 5.0], 64f64.powi(3));
        // At 1024³ the GPU's bound (1.3 ms, its time at 64³) is the lowest: it is tried, costs
        // 0.01 ns there and is kept; the CPU routes, expected at 10 and 100 times that, are
        // not tried.
        let large = 1024f64.powi(3);
        let order = settle(&mut model, [1.0, 0.1, 0.01], large);
        assert_eq!(order, [Explore(2), Explore(2), Fastest(2)]);
        assert!(model.measured("blas", F32, bucket(large)).is_none());
        // At 256³ the GPU's bound is still the lowest; tried first, it takes 1.5 ms; the CPU,
        // expected at 1.7 ms, is within twice that and is tried; blas (17 ms) is not; the GPU
        // stays the fastest.
        let mid = 256f64.powi(3);
        let order = settle(&mut model, [1.0, 0.1, 1.5e6 / mid], mid);
        assert_eq!(
            order,
            [Explore(2), Explore(2), Explore(1), Explore(1), Fastest(2)]
        );
    }

    #[test]
    fn a_tiny_bucket_predicts_only_its_neighbours() {
        use Choice::*;
        let mut model = Model::default();
        // At 8³ a call's fixed costs dominate: the CPU path's 2 µs is 4 ns per multiply-add,
        // blas's 0.5 µs 1 ns.
        settle(&mut model, [1.0, 4.0, 100.0], 8f64.powi(3));
        // At 64³ that would make the CPU path 1 ms against blas's 0.26: it is tried all the
        // same (and wins), the 8³ timings being too far away to predict it.
        let order = settle(&mut model, [0.33, 0.054, 100.0], 64f64.powi(3));
        assert_eq!(
            order,
            [Explore(0), Explore(1), Explore(0), Explore(1), Fastest(1)]
        );
    }

    #[test]
    fn the_file_is_shared_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("routes.json");
        let mut notes = Vec::new();
        let mut first = Model::load(Some(path.clone()), &mut notes);
        first.record("cpu", F32, 1e6, time(1.0, 1e6), &mut notes);
        let mut second = Model::load(Some(path.clone()), &mut notes);
        assert_eq!(second.measured("cpu", F32, bucket(1e6)).unwrap().samples, 1);
        second.record("blas", F32, 1e6, time(2.0, 1e6), &mut notes);
        let third = Model::load(Some(path.clone()), &mut notes);
        assert!(third.measured("cpu", F32, bucket(1e6)).is_some());
        assert!(third.measured("blas", F32, bucket(1e6)).is_some());
        assert!(notes.is_empty(), "{notes:?}");

        std::fs::write(&path, b"{\"format\": 1, \"entries\": {\"x\": ").unwrap();
        let damaged = Model::load(Some(path.clone()), &mut notes);
        assert!(damaged.entries.is_empty());
        assert!(notes[0].contains("corrupt"), "{notes:?}");
        // A FIFO at the path is refused, not waited on.
        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut notes = Vec::new();
        let model = Model::load(Some(path.clone()), &mut notes);
        assert!(model.entries.is_empty());
        assert!(notes[0].contains("unreadable"), "{notes:?}");
    }
}
