//! A front end's routes chosen by the measured model ([`super::model`]): the drop-in BLAS's
//! (the BLAS underneath, tilemm's CPU path, the GPU), or any front end that can time a route
//! on a scratch copy of its output.
//!
//! A class (precision, size bucket) gets its route from its first call and keeps it for the
//! process, so that identical calls get identical bits. That first call first times the
//! routes that could win on scratch copies; later, every [`RECHECK`](super::model::RECHECK)th
//! call of the class times another route again, for the model and later processes, never for
//! a caller's result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::memo::Memo;
use super::model::{self, Candidate, Choice, Model};

/// The most routes one call times before its class's route is fixed.
const MAX_MEASURES: usize = 12;

/// A front end's routes for one precision, by index.
pub struct Router {
    candidates: Vec<Candidate<'static>>,
    /// Each class's route for the process: (bucket, precision) → index (the bucket first: a
    /// lookup a call compares integers before strings).
    fixed: Memo<(i32, &'static str), usize>,
    /// Whether each route has run in the process: a route's first run (a thread pool started,
    /// kernels loaded) says nothing of its speed.
    warm: Vec<AtomicBool>,
}

/// One route timed on a scratch copy while a call's route was chosen.
pub struct Explored {
    /// The route.
    pub index: usize,
    /// Its time (tuning excluded), or why it failed: a failed route is not chosen again for
    /// the class by this process.
    pub outcome: Result<Duration, String>,
    /// What the model said when it recorded the time (a file it could not save).
    pub notes: Vec<String>,
}

/// A call's route, and the routes timed to choose it.
pub struct Routed {
    /// The route.
    pub index: usize,
    /// The routes timed, in order.
    pub explored: Vec<Explored>,
}

impl Router {
    /// A router over routes named by `(id, steady)` as [`Candidate`] describes them; at least
    /// one.
    pub fn new(routes: impl IntoIterator<Item = (String, bool)>) -> Router {
        let candidates: Vec<Candidate<'static>> = routes
            .into_iter()
            // Kept for the process's life, as the routes are.
            .map(|(id, steady)| Candidate {
                id: String::leak(id),
                steady,
            })
            .collect();
        let warm = candidates.iter().map(|_| AtomicBool::new(false)).collect();
        Router {
            candidates,
            fixed: Memo::new(),
            warm,
        }
    }

    /// Route `index`'s identity in the model.
    pub fn id(&self, index: usize) -> &'static str {
        self.candidates[index].id
    }

    /// Marks route `index` run; whether it had run before.
    pub fn ran(&self, index: usize) -> bool {
        self.warm[index].swap(true, Ordering::Relaxed)
    }

    /// The route of a call of `fmas` multiply-adds in `precision`: its class's, fixed by the
    /// class's first call. `time(i)` times route `i` on scratch copies of the caller's output
    /// and returns its time with any tuning left out, or why it failed.
    pub fn route(
        &self,
        precision: &'static str,
        fmas: f64,
        mut time: impl FnMut(usize) -> Result<Duration, String>,
    ) -> Routed {
        let class = (model::bucket(fmas), precision);
        let known = self.fixed.get(&class);
        let mut explored = Vec::new();
        for _ in 0..MAX_MEASURES {
            let choice = self.model().choose(&self.candidates, precision, fmas);
            let index = match (choice, known) {
                (Choice::Fastest(_), Some(index)) => index,
                (Choice::Fastest(i), None) => self.fixed.keep(class, i),
                (Choice::Explore(i), _) => {
                    let warm = self.ran(i);
                    let outcome = time(i);
                    let mut notes = Vec::new();
                    match &outcome {
                        Ok(took) if warm => {
                            let id = self.id(i);
                            self.model().record(id, precision, fmas, *took, &mut notes);
                        }
                        Ok(_) => {}
                        Err(_) => self.failed(i, precision, fmas),
                    }
                    explored.push(Explored {
                        index: i,
                        outcome,
                        notes,
                    });
                    match known {
                        Some(index) => index,
                        None => continue,
                    }
                }
            };
            return Routed { index, explored };
        }
        // The timings did not settle (routes that keep failing): the first route.
        let index = known.unwrap_or_else(|| self.fixed.keep(class, 0));
        Routed { index, explored }
    }

    /// Records that route `index` failed at this size: the process does not choose it there
    /// again.
    pub fn failed(&self, index: usize, precision: &str, fmas: f64) {
        self.model().failed(self.id(index), precision, fmas);
    }

    fn model(&self) -> std::sync::MutexGuard<'static, Model> {
        super::route::model()
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}
