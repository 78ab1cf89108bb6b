//! The schedule of the transfer engine, which overlaps host-to-device copies with compute.
//!
//! A product whose operands live in host memory is cut into pieces (slabs of K over panels of
//! C). Each piece is staged on the host into a staging slot, uploaded on a copy queue into the
//! device slot of the same index, and computed on a compute queue once its upload's event has
//! fired. [`run`] drives any [`Engine`] through a ring of slots (piece `i` uses slot
//! `i % slots`) with two guarantees:
//!
//! - no slot is reused before the event of its previous use has fired: the host waits for a
//!   staging slot's last upload before staging into it again, and for a device slot's last
//!   compute before uploading into it again;
//! - with two or more slots, as in NVBLAS and cuBLASXt, piece `i + 1` is staged and uploaded
//!   while piece `i` is computed, so the run takes about the longer of all copies and all
//!   computes plus one piece, instead of their sum.
//!
//! [`slab_pieces`] cuts K into the slabs that the pieces are made of.

use std::ops::Range;

/// What the schedule drives: host staging, a copy queue and a compute queue, with events.
pub trait Engine {
    /// A point on a queue that the host or the other queue can wait for.
    type Event;
    /// Why a step failed.
    type Error;

    /// Fills staging slot `slot` with piece `piece`'s operands, on the host; returns when done.
    fn stage(&mut self, piece: usize, slot: usize) -> Result<(), Self::Error>;

    /// Enqueues the copy of staging slot `slot` into device slot `slot` on the copy queue. The
    /// event fires when the copy is done, and the staging slot is then free.
    fn upload(&mut self, piece: usize, slot: usize) -> Result<Self::Event, Self::Error>;

    /// Enqueues piece `piece`'s compute on device slot `slot`, to start after `uploaded` fires.
    /// The event fires when the compute is done, and the device slot is then free.
    fn compute(
        &mut self,
        piece: usize,
        slot: usize,
        uploaded: &Self::Event,
    ) -> Result<Self::Event, Self::Error>;

    /// Blocks the host until `event` has fired.
    fn wait(&mut self, event: &Self::Event) -> Result<(), Self::Error>;
}

/// The events of a slot's last use that the host has not waited for yet.
struct Pending<Event> {
    upload: Option<Event>,
    compute: Option<Event>,
}

impl<Event> Pending<Event> {
    /// Waits for the pending upload, if any, and forgets it so that it is waited for only once.
    fn wait_upload<E: Engine<Event = Event>>(&mut self, engine: &mut E) -> Result<(), E::Error> {
        match self.upload.take() {
            Some(event) => engine.wait(&event),
            None => Ok(()),
        }
    }

    /// Waits for the pending compute, if any, and forgets it so that it is waited for only once.
    fn wait_compute<E: Engine<Event = Event>>(&mut self, engine: &mut E) -> Result<(), E::Error> {
        match self.compute.take() {
            Some(event) => engine.wait(&event),
            None => Ok(()),
        }
    }
}

/// Runs pieces `0..pieces` through a ring of `slots` slots and returns once the last compute has
/// finished.
///
/// Piece `i` uses slot `s = i % slots`. Before staging it, the host waits for the upload of
/// piece `i - slots` (the last copy out of staging slot `s`); before uploading it, the host
/// waits for the compute of piece `i - slots` (the last reader of device slot `s`); its compute
/// is then enqueued after its own upload's event. Every event is waited for exactly once: at the
/// end, the host waits for the events of the last pieces that it has not waited for yet.
///
/// `slots == 0` is treated as 1 (no overlap), and no more slots are tracked than there are
/// pieces. On the first error the run stops and returns it without waiting for the events still
/// pending: the engine owns the slots and must finish or drain its queues before freeing them.
pub fn run<E: Engine>(engine: &mut E, pieces: usize, slots: usize) -> Result<(), E::Error> {
    let slots = slots.max(1);
    // Slot indices stay below `pieces`, so a ring larger than that would never be used.
    let ring = slots.min(pieces);
    let mut pending: Vec<Pending<E::Event>> = std::iter::repeat_with(|| Pending {
        upload: None,
        compute: None,
    })
    .take(ring)
    .collect();

    for piece in 0..pieces {
        let slot = piece % slots;
        let pending = &mut pending[slot];
        // The copy queue may still be reading this staging slot for piece `piece - slots`.
        pending.wait_upload(engine)?;
        engine.stage(piece, slot)?;
        // The compute of piece `piece - slots` may still be reading this device slot. Waiting
        // only now lets the staging above run on the host while that compute runs.
        pending.wait_compute(engine)?;
        let uploaded = engine.upload(piece, slot)?;
        let computed = engine.compute(piece, slot, &uploaded)?;
        pending.upload = Some(uploaded);
        pending.compute = Some(computed);
    }

    // The last `ring` pieces, oldest first, each in its own slot.
    for piece in pieces - ring..pieces {
        let pending = &mut pending[piece % slots];
        pending.wait_upload(engine)?;
        pending.wait_compute(engine)?;
    }
    Ok(())
}

/// Cuts `0..k` into consecutive ranges of at most `slab` elements (`slab` is clamped to at least
/// 1); only the last range may be shorter. Yields nothing for `k == 0`.
pub fn slab_pieces(k: usize, slab: usize) -> impl Iterator<Item = Range<usize>> {
    let slab = slab.max(1);
    // `start + slab` could overflow for a huge `slab`; `k - start` cannot.
    (0..k)
        .step_by(slab)
        .map(move |start| start..start + slab.min(k - start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        Stage,
        Upload,
        Compute,
    }

    /// One operation as the simulated engine ran it, in virtual time.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Op {
        kind: Kind,
        piece: usize,
        slot: usize,
        start: u64,
        end: u64,
    }

    impl Op {
        fn new(kind: Kind, piece: usize, slot: usize, start: u64, end: u64) -> Op {
            Op {
                kind,
                piece,
                slot,
                start,
                end,
            }
        }
    }

    /// An event of the simulated engine: which operation it ends, and when.
    #[derive(Debug)]
    struct SimEvent {
        kind: Kind,
        piece: usize,
        time: u64,
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Failed {
        piece: usize,
    }

    /// An engine on a virtual clock. The host runs staging and waits; the copy queue and the
    /// compute queue each run one operation at a time, in enqueue order.
    #[derive(Default)]
    struct Sim {
        stage_time: u64,
        copy_time: u64,
        compute_time: u64,
        host: u64,
        copy_free: u64,
        compute_free: u64,
        trace: Vec<Op>,
        waits: Vec<(Kind, usize)>,
        fail_upload_at: Option<usize>,
    }

    impl Sim {
        fn new(stage_time: u64, copy_time: u64, compute_time: u64) -> Sim {
            Sim {
                stage_time,
                copy_time,
                compute_time,
                ..Sim::default()
            }
        }
    }

    impl Engine for Sim {
        type Event = SimEvent;
        type Error = Failed;

        fn stage(&mut self, piece: usize, slot: usize) -> Result<(), Failed> {
            let start = self.host;
            self.host += self.stage_time;
            self.trace
                .push(Op::new(Kind::Stage, piece, slot, start, self.host));
            Ok(())
        }

        fn upload(&mut self, piece: usize, slot: usize) -> Result<SimEvent, Failed> {
            if self.fail_upload_at == Some(piece) {
                return Err(Failed { piece });
            }
            let start = self.copy_free.max(self.host);
            self.copy_free = start + self.copy_time;
            self.trace
                .push(Op::new(Kind::Upload, piece, slot, start, self.copy_free));
            Ok(SimEvent {
                kind: Kind::Upload,
                piece,
                time: self.copy_free,
            })
        }

        fn compute(
            &mut self,
            piece: usize,
            slot: usize,
            uploaded: &SimEvent,
        ) -> Result<SimEvent, Failed> {
            let start = self.compute_free.max(self.host).max(uploaded.time);
            self.compute_free = start + self.compute_time;
            self.trace.push(Op::new(
                Kind::Compute,
                piece,
                slot,
                start,
                self.compute_free,
            ));
            Ok(SimEvent {
                kind: Kind::Compute,
                piece,
                time: self.compute_free,
            })
        }

        fn wait(&mut self, event: &SimEvent) -> Result<(), Failed> {
            self.host = self.host.max(event.time);
            self.waits.push((event.kind, event.piece));
            Ok(())
        }
    }

    /// Test-only wrong schedule: the same operations as [`run`], but the host never waits.
    fn run_unsafe<E: Engine>(engine: &mut E, pieces: usize, slots: usize) -> Result<(), E::Error> {
        for piece in 0..pieces {
            let slot = piece % slots;
            engine.stage(piece, slot)?;
            let uploaded = engine.upload(piece, slot)?;
            engine.compute(piece, slot, &uploaded)?;
        }
        Ok(())
    }

    /// The operations of one kind, checked to cover pieces `0..pieces` once each, in order, each
    /// in slot `piece % slots`.
    fn ops_of(trace: &[Op], kind: Kind, pieces: usize, slots: usize) -> Result<Vec<Op>, String> {
        let ops: Vec<Op> = trace.iter().filter(|op| op.kind == kind).copied().collect();
        let order: Vec<usize> = ops.iter().map(|op| op.piece).collect();
        if !order.iter().copied().eq(0..pieces) {
            return Err(format!(
                "{kind:?} ran pieces {order:?}, expected 0..{pieces} once each in order"
            ));
        }
        if let Some(op) = ops.iter().find(|op| op.slot != op.piece % slots) {
            return Err(format!("{op:?} is not in slot {}", op.piece % slots));
        }
        Ok(ops)
    }

    /// Checks a recorded trace, independently of how the schedule was made, against the rules of
    /// the ring; `host` is the host clock when the run returned.
    fn check(trace: &[Op], pieces: usize, slots: usize, host: u64) -> Result<(), String> {
        let stages = ops_of(trace, Kind::Stage, pieces, slots)?;
        let uploads = ops_of(trace, Kind::Upload, pieces, slots)?;
        let computes = ops_of(trace, Kind::Compute, pieces, slots)?;
        for (piece, ((stage, upload), compute)) in
            stages.iter().zip(&uploads).zip(&computes).enumerate()
        {
            if upload.start < stage.end {
                return Err(format!("{upload:?} starts before {stage:?} ends"));
            }
            if compute.start < upload.end {
                return Err(format!("{compute:?} starts before {upload:?} ends"));
            }
            if let Some(previous) = piece.checked_sub(slots) {
                if stage.start < uploads[previous].end {
                    return Err(format!(
                        "{stage:?} restages before {:?} ends",
                        uploads[previous]
                    ));
                }
                if upload.start < computes[previous].end {
                    return Err(format!(
                        "{upload:?} overwrites the device slot before {:?} ends",
                        computes[previous]
                    ));
                }
            }
        }
        if let Some(compute) = computes.iter().find(|op| op.end > host) {
            return Err(format!("run returned at {host}, before {compute:?} ended"));
        }
        Ok(())
    }

    #[test]
    fn schedule_obeys_the_ring_rules() {
        let durations = [0, 1, 3, 10];
        for pieces in [0, 1, 2, 3, 7, 20] {
            for slots in [1, 2, 3] {
                for h in durations {
                    for c in durations {
                        for k in durations {
                            let mut sim = Sim::new(h, c, k);
                            run(&mut sim, pieces, slots).unwrap();
                            let case = format!("pieces {pieces}, slots {slots}, h {h} c {c} k {k}");
                            check(&sim.trace, pieces, slots, sim.host)
                                .unwrap_or_else(|err| panic!("{case}: {err}"));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_event_is_waited_for_exactly_once() {
        for pieces in [0, 1, 2, 3, 7] {
            for slots in [1, 2, 3, 10] {
                let mut sim = Sim::new(1, 3, 10);
                run(&mut sim, pieces, slots).unwrap();
                let mut waits = sim.waits;
                waits.sort_by_key(|&(kind, piece)| (piece, kind == Kind::Compute));
                let expected: Vec<(Kind, usize)> = (0..pieces)
                    .flat_map(|piece| [(Kind::Upload, piece), (Kind::Compute, piece)])
                    .collect();
                assert_eq!(waits, expected, "pieces {pieces}, slots {slots}");
            }
        }
    }

    #[test]
    fn two_slots_overlap_upload_with_compute() {
        let (h, c, k, pieces) = (1, 10, 10, 8);
        let mut sim = Sim::new(h, c, k);
        run(&mut sim, pieces, 2).unwrap();
        check(&sim.trace, pieces, 2, sim.host).unwrap();
        let uploads = ops_of(&sim.trace, Kind::Upload, pieces, 2).unwrap();
        let computes = ops_of(&sim.trace, Kind::Compute, pieces, 2).unwrap();
        for (upload, compute) in uploads[1..].iter().zip(&computes) {
            assert!(
                upload.start.max(compute.start) < upload.end.min(compute.end),
                "{upload:?} does not overlap {compute:?}"
            );
        }
        // One piece's staging and upload, then the computes back to back.
        let slack = 2;
        assert!(
            sim.host <= h + c + pieces as u64 * k + slack,
            "took {}",
            sim.host
        );
    }

    #[test]
    fn one_slot_is_serial() {
        let (h, c, k, pieces) = (1, 10, 10, 8);
        let mut sim = Sim::new(h, c, k);
        run(&mut sim, pieces, 1).unwrap();
        check(&sim.trace, pieces, 1, sim.host).unwrap();
        // Each upload waits for the previous compute: copies and computes never overlap.
        assert!(sim.host >= pieces as u64 * (c + k), "took {}", sim.host);
        let two_slots = {
            let mut sim = Sim::new(h, c, k);
            run(&mut sim, pieces, 2).unwrap();
            sim.host
        };
        assert!(two_slots < sim.host, "{two_slots} vs {}", sim.host);
    }

    #[test]
    fn slot_count_is_clamped() {
        let mut sim = Sim::new(1, 3, 10);
        run(&mut sim, 5, 0).unwrap();
        check(&sim.trace, 5, 1, sim.host).unwrap();

        // A ring far larger than the number of pieces allocates nothing for unused slots.
        let mut sim = Sim::new(1, 3, 10);
        run(&mut sim, 5, usize::MAX).unwrap();
        check(&sim.trace, 5, usize::MAX, sim.host).unwrap();
    }

    #[test]
    fn checker_rejects_a_schedule_that_never_waits() {
        let mut sim = Sim::new(1, 10, 10);
        run_unsafe(&mut sim, 4, 2).unwrap();
        let err = check(&sim.trace, 4, 2, sim.host).unwrap_err();
        assert!(err.contains("restages"), "{err}");
    }

    #[test]
    fn checker_rejects_bad_traces() {
        let good = vec![
            Op::new(Kind::Stage, 0, 0, 0, 1),
            Op::new(Kind::Upload, 0, 0, 1, 2),
            Op::new(Kind::Compute, 0, 0, 2, 3),
        ];
        check(&good, 1, 1, 3).unwrap();

        let early_return = check(&good, 1, 1, 2).unwrap_err();
        assert!(early_return.contains("before"), "{early_return}");

        let mut early_compute = good.clone();
        early_compute[2] = Op::new(Kind::Compute, 0, 0, 1, 2);
        assert!(check(&early_compute, 1, 1, 3).is_err());

        let mut early_upload = good.clone();
        early_upload[1] = Op::new(Kind::Upload, 0, 0, 0, 2);
        assert!(check(&early_upload, 1, 1, 3).is_err());

        let mut wrong_slot = good.clone();
        wrong_slot[1].slot = 1;
        assert!(check(&wrong_slot, 1, 2, 3).is_err());

        let missing = &good[..2];
        assert!(check(missing, 1, 1, 3).is_err());

        // Restaging waits for the upload, but the second upload overwrites device slot 0 while
        // the first compute still reads it.
        let overwrite = [
            Op::new(Kind::Stage, 0, 0, 0, 1),
            Op::new(Kind::Upload, 0, 0, 1, 2),
            Op::new(Kind::Compute, 0, 0, 2, 10),
            Op::new(Kind::Stage, 1, 0, 2, 3),
            Op::new(Kind::Upload, 1, 0, 3, 4),
            Op::new(Kind::Compute, 1, 0, 10, 11),
        ];
        let err = check(&overwrite, 2, 1, 11).unwrap_err();
        assert!(err.contains("overwrites"), "{err}");

        let mut twice = good.clone();
        twice.push(Op::new(Kind::Compute, 0, 0, 3, 4));
        assert!(check(&twice, 1, 1, 4).is_err());
    }

    #[test]
    fn upload_error_stops_the_run() {
        let mut sim = Sim::new(1, 3, 10);
        sim.fail_upload_at = Some(3);
        assert_eq!(run(&mut sim, 8, 2), Err(Failed { piece: 3 }));
        let last_staged = sim
            .trace
            .iter()
            .filter(|op| op.kind == Kind::Stage)
            .map(|op| op.piece)
            .max();
        assert_eq!(last_staged, Some(3));
        assert!(!sim
            .trace
            .iter()
            .any(|op| op.kind != Kind::Stage && op.piece >= 3));
    }

    #[test]
    fn slab_pieces_cover_k() {
        let collect = |k, slab| slab_pieces(k, slab).collect::<Vec<_>>();
        assert!(collect(0, 4).is_empty());
        assert_eq!(collect(10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(collect(8, 4), vec![0..4, 4..8]);
        assert_eq!(collect(3, 0), vec![0..1, 1..2, 2..3]);
        assert_eq!(collect(5, 100), vec![0..5]);
        assert_eq!(collect(5, usize::MAX), vec![0..5]);
    }
}
