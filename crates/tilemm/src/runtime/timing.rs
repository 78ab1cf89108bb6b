//! The one way an implementation is timed: rungs, peers (cubek), vendor BLAS, the CPU path and
//! the tuner all take [`Samples`], each from a run that reports its own time (device timestamps
//! or events where the device has them, [`GpuSession::time_ms`] for tilemm's sessions).

use crate::error::Result;
use crate::runtime::backend::GpuSession;

/// Times of one implementation's runs, in milliseconds, in the order taken.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// `count` runs of `run`, each returning its own time in milliseconds.
    pub fn take<E>(count: usize, run: impl FnMut() -> Result<f64, E>) -> Result<Samples, E> {
        let mut samples = Samples::default();
        samples.extend(count, run)?;
        Ok(samples)
    }

    /// `count` more runs of `run`.
    pub fn extend<E>(
        &mut self,
        count: usize,
        mut run: impl FnMut() -> Result<f64, E>,
    ) -> Result<(), E> {
        self.0.reserve(count);
        for _ in 0..count {
            self.0.push(run()?);
        }
        Ok(())
    }

    /// The median (the mean of the middle two for an even count); NaN for none.
    pub fn median(&self) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        }
    }

    /// The fastest: what candidates are ranked by, since noise on a shared machine only ever
    /// adds time. NaN for none.
    pub fn min(&self) -> f64 {
        self.0.iter().copied().reduce(f64::min).unwrap_or(f64::NAN)
    }
}

impl GpuSession {
    /// How long `launch` (work enqueued on this session) takes on the device, in milliseconds:
    /// device timestamps where the device has them, else the host clock around a flush and a
    /// sync ([`GpuSession::has_device_timestamps`]).
    ///
    /// `launch`'s own errors are of any type that takes tilemm's (a peer's, in the lab).
    pub fn time_ms<E: From<crate::Error> + Send>(
        &self,
        launch: impl FnOnce() -> Result<(), E> + Send,
    ) -> Result<f64, E> {
        Ok(self.profile(launch)?.as_secs_f64() * 1e3)
    }

    /// How [`GpuSession::time_ms`] takes its times, as a report names it.
    pub fn timing(&self) -> &'static str {
        if self.has_device_timestamps() {
            "device timestamps"
        } else {
            "host clock"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let s = Samples(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.median(), 2.5);
        assert_eq!(s.min(), 1.0);
        assert_eq!(Samples(vec![5.0, 1.0, 3.0]).median(), 3.0);
        assert!(Samples::default().median().is_nan());
    }

    #[test]
    fn samples_are_taken_in_order_and_stop_at_the_first_error() {
        let mut next = 0.0;
        let mut s = Samples::take(2, || {
            next += 1.0;
            Ok::<_, crate::Error>(next)
        })
        .unwrap();
        s.extend(1, || Ok::<_, crate::Error>(10.0)).unwrap();
        assert_eq!(s.0, vec![1.0, 2.0, 10.0]);
        let mut calls = 0;
        let failed = Samples::take(3, || {
            calls += 1;
            Err(crate::error::Error::NoKernel("x".into()))
        });
        assert!(failed.is_err());
        assert_eq!(calls, 1);
    }
}
