//! The routing model: how long each route took per multiply-add, by size, kept in tilemm's
//! cache (`blas-routes.json`) so that later processes start from what earlier ones measured.
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

/// Timings a route needs in a bucket before the bucket's choice is final: the first of a
/// process can include one-time costs (a kernel's compilation), and the smaller one counts.
pub const SAMPLES: u32 = 2;

/// A route expected to take more than this factor times the fastest timing in the bucket is
/// not tried there.
pub const PRUNE: f64 = 2.0;

/// The file's format; files of another are ignored.
const FORMAT: u32 = 1;

/// A routing file larger than this is not read (a full one is tens of KiB).
const MAX_BYTES: u64 = 4 << 20;

/// How long a saver waits for another.
const LOCK_WAIT: Duration = Duration::from_secs(2);

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

#[derive(Debug, Serialize, Deserialize)]
struct File {
    format: u32,
    /// `"<route> | <precision> | <bucket>"` → what it measured.
    entries: BTreeMap<String, Measured>,
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

/// The model: the file's entries, plus what this process measured.
#[derive(Debug, Default)]
pub struct Model {
    entries: BTreeMap<String, Measured>,
    path: Option<PathBuf>,
}

impl Model {
    /// The model kept at `path` (`None`: this process's own only). A file that cannot be used
    /// is ignored with a note.
    pub fn load(path: Option<PathBuf>, notes: &mut Vec<String>) -> Self {
        let entries = path
            .as_deref()
            .map(|p| Self::read(p, notes))
            .unwrap_or_default();
        Model { entries, path }
    }

    fn read(path: &Path, notes: &mut Vec<String>) -> BTreeMap<String, Measured> {
        let bytes = match tilemm::io::files::read_regular(path, MAX_BYTES) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
            Err(e) => {
                notes.push(format!(
                    "routing model {} is unreadable ({e}); ignored",
                    path.display()
                ));
                return BTreeMap::new();
            }
        };
        match serde_json::from_slice::<File>(&bytes) {
            Ok(file) if file.format == FORMAT => file
                .entries
                .into_iter()
                .filter(|(_, m)| m.ns_per_fma.is_finite() && m.ns_per_fma >= 0.0)
                .collect(),
            Ok(file) => {
                notes.push(format!(
                    "routing model {} has format {}, not {FORMAT}; ignored and replaced",
                    path.display(),
                    file.format
                ));
                BTreeMap::new()
            }
            Err(e) => {
                notes.push(format!(
                    "routing model {} is corrupt ({e}); ignored and replaced",
                    path.display()
                ));
                BTreeMap::new()
            }
        }
    }

    /// What `route` measured in `bucket`.
    pub fn measured(&self, route: &str, precision: &str, bucket: i32) -> Option<Measured> {
        self.entries.get(&key(route, precision, bucket)).copied()
    }

    /// What `route` (see [`Candidate::steady`]) is expected to take for `fmas` multiply-adds,
    /// in nanoseconds, from what it measured in other buckets (`None`: nothing yet). A steady
    /// route: its time per multiply-add in the nearest bucket. Another: a lower bound, since a
    /// product takes no less time than a smaller one, nor less per multiply-add than a larger
    /// one: only from buckets timed in full, since a GPU's first timing may include a kernel's
    /// compilation.
    fn expected(&self, route: &Candidate, precision: &str, fmas: f64) -> Option<f64> {
        let prefix = format!("{} | {precision} | ", route.id);
        let here = bucket(fmas);
        let full = self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, m)| route.steady || m.samples >= SAMPLES)
            .filter_map(|(k, m)| Some((k[prefix.len()..].parse::<i32>().ok()?, m.ns_per_fma)));
        if route.steady {
            full.min_by_key(|&(b, _)| ((b - here).abs(), b))
                .map(|(_, ns)| ns * fmas)
        } else {
            full.map(|(b, ns)| if b < here { ns * center(b) } else { ns * fmas })
                .reduce(f64::max)
        }
    }

    /// Which of `candidates` (route identities, at least one) computes a call of `fmas`
    /// multiply-adds in `precision`.
    ///
    /// A route with nothing measured is tried first. In the call's bucket each route is then
    /// timed until it has [`SAMPLES`] timings, unless it is expected to take more than
    /// [`PRUNE`] times the fastest timing there; then the fastest is chosen.
    pub fn choose(&self, candidates: &[Candidate], precision: &str, fmas: f64) -> Choice {
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
        let Some(best) = (0..candidates.len()).filter_map(timed).reduce(f64::min) else {
            // Nothing timed in this bucket yet: the most promising first.
            let i = (0..candidates.len())
                .min_by(|&x, &y| expected[x].total_cmp(&expected[y]))
                .unwrap_or(0);
            return Choice::Explore(i);
        };
        let samples = |i: usize| here[i].map_or(0, |m| m.samples);
        if let Some(i) =
            (0..candidates.len()).find(|&i| samples(i) < SAMPLES && expected[i] <= PRUNE * best)
        {
            return Choice::Explore(i);
        }
        let fastest = (0..candidates.len())
            .filter_map(|i| Some((i, timed(i)?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map_or(0, |(i, _)| i);
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
        let saved = tilemm::io::files::replace_locked(&path, LOCK_WAIT, || {
            // What other processes saved since, with this process's timing of this key.
            let mut entries = Self::read(&path, &mut Vec::new());
            let merged = entries.entry(key).or_default();
            if merged.samples < entry.samples {
                *merged = entry;
            }
            self.entries.extend(entries.clone());
            let file = File {
                format: FORMAT,
                entries,
            };
            let mut text = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
            text.push(b'\n');
            Ok(text)
        });
        if let Err(e) = saved {
            notes.push(format!(
                "routing model {} not saved ({e}); this process keeps its own",
                path.display()
            ));
            self.path = None;
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
        // blas 3 ns per multiply-add, cpu 1, gpu 1.5: blas, over twice the fastest once
        // timed, is not timed again.
        let order = settle(&mut model, [3.0, 1.0, 1.5], fmas);
        assert_eq!(
            order,
            [
                Explore(0),
                Explore(1),
                Explore(2),
                Explore(1),
                Explore(2),
                Fastest(1)
            ]
        );
        assert_eq!(model.choose(&routes(), F32, fmas * 1.1), Fastest(1));
        // Another precision is measured on its own.
        assert_eq!(model.choose(&routes(), "f64", fmas), Explore(0));
    }

    #[test]
    fn a_cpu_route_slower_nearby_is_not_tried_but_a_gpu_is() {
        use Choice::*;
        let mut model = Model::default();
        // At 16³, the GPU's launch costs 20 µs: 5 ns per multiply-add, against the CPU's 0.1.
        settle(&mut model, [1.0, 0.1, 5.0], 16f64.powi(3));
        // The GPU, timed once there (its first timing may be a compilation), is tried at
        // 1024³, where it costs 0.01 ns and is kept: the CPU routes, expected at 10 and 100
        // times that from 16³, are not tried.
        let large = 1024f64.powi(3);
        let order = settle(&mut model, [1.0, 0.1, 0.01], large);
        assert_eq!(order, [Explore(2), Explore(2), Fastest(2)]);
        // Between the two, at 64³, the GPU's bound from 1024³ (2.6 µs) is the lowest: it is
        // tried first, and takes 20 µs; the CPU, expected at 26 µs from 16³, is within twice
        // that and is tried; the GPU stays the fastest.
        let mid = 64f64.powi(3);
        let order = settle(&mut model, [1.0, 0.1, 20e3 / mid], mid);
        assert_eq!(
            order,
            [Explore(2), Explore(1), Explore(1), Explore(2), Fastest(2)]
        );
        assert!(model.measured("blas", F32, bucket(large)).is_none());
    }

    #[test]
    fn the_file_is_shared_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blas-routes.json");
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
