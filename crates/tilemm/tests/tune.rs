//! `auto` on a real device: it tunes, verifies and saves; the next call hits the cache; a
//! cache it cannot use costs a note, never the run.

mod common;

use std::time::Duration;

use tilemm::io::inputs;
use tilemm::tune::{self, CacheUse, TuneBudget, TuneOptions};
use tilemm::verify::Reference;
use tilemm::Shape;

fn options(dir: &std::path::Path, budget_s: f64) -> TuneOptions {
    TuneOptions {
        budget: TuneBudget::Time(Duration::from_secs_f64(budget_s)),
        cache: Some(dir.join("tuning.json")),
        retune: false,
        on_tuning: None,
    }
}

#[test]
fn auto_tunes_verifies_and_saves_and_the_next_call_of_the_class_hits_the_cache() {
    let gpu = common::gpu();
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path(), 1.5);
    // 70, 50 and 90 all anchor at 64 (the nearest power of two in ratio); A is read in vectors
    // of 2 (K = 50), so the proxy's K is 62, which reads the same.
    let problem = Shape {
        trans_b: true,
        ..Shape::new(70, 50, 90)
    }
    .problem()
    .unwrap();
    let first = tune::choose(gpu, &problem, &options).unwrap();
    assert_eq!(first.cache, CacheUse::Miss, "{first}");
    assert_eq!(first.proxy, [64, 62, 64]);
    assert!(first.verified && first.saved, "{first}");
    assert!(first.notes.is_empty(), "{:?}", first.notes);
    assert!(!first.timed.is_empty());
    assert!(first.pruned > 0, "the model prunes the naive rung: {first}");
    assert_eq!(
        first.chosen, first.timed[0].plan,
        "the fastest verified wins"
    );
    assert!(first
        .timed
        .windows(2)
        .all(|w| w[0].min_ms <= w[1].min_ms && w[0].min_ms <= w[0].median_ms));
    // Each run timed launches back to back where one launch was short of a run's span.
    let launches: Vec<usize> = first.timed.iter().map(|t| t.launches).collect();
    println!("launches per run: {launches:?}");
    assert!(
        launches
            .iter()
            .all(|l| (1..=tune::MAX_LAUNCHES).contains(l)),
        "{launches:?}"
    );

    // The choice computes the problem itself within the bound.
    let ops = inputs::random_operands(&problem, 5).unwrap();
    let run = gpu
        .gemm(&problem, &first.chosen, &ops.a, &ops.b, None)
        .unwrap();
    let check = Reference::new(&problem, &ops.a, &ops.b, None)
        .unwrap()
        .random_inputs()
        .check_passes(&run.c, run.schedule.passes)
        .unwrap();
    assert!(check.pass, "{check:?}");

    // Another product of the class hits; another layout, or vector width (K = 60 reads A in
    // fours), is another class.
    let same_class = Shape {
        trans_b: true,
        ..Shape::new(64, 58, 64)
    }
    .problem()
    .unwrap();
    // A budget of 0 takes the cached choice as it is, fully tuned or not.
    let zero = TuneOptions {
        budget: TuneBudget::None,
        ..options.clone()
    };
    let hit = tune::choose(gpu, &same_class, &zero).unwrap();
    assert_eq!(hit.cache, CacheUse::Hit, "{hit}");
    assert_eq!(hit.chosen, first.chosen);
    assert!(hit.timed.is_empty() && hit.verified && !hit.saved);
    for other in [
        Shape::new(64, 58, 64),
        Shape {
            trans_b: true,
            ..Shape::new(64, 60, 64)
        },
    ] {
        let other = tune::choose(gpu, &other.problem().unwrap(), &options).unwrap();
        assert_eq!(other.cache, CacheUse::Miss, "{other}");
        assert_ne!(other.key, first.key);
    }

    let retuned = tune::choose(
        gpu,
        &problem,
        &TuneOptions {
            retune: true,
            ..options.clone()
        },
    )
    .unwrap();
    assert_eq!(retuned.cache, CacheUse::Retuned);
    assert!(!retuned.timed.is_empty() && retuned.saved);
}

#[test]
fn a_corrupt_or_unwritable_cache_is_noted_and_tuning_goes_on() {
    let gpu = common::gpu();
    let dir = tempfile::tempdir().unwrap();
    let problem = Shape::new(20, 30, 40).problem().unwrap();
    // No budget: the best-ranked candidate alone is timed.
    let options = options(dir.path(), 0.0);
    let path = options.cache.clone().unwrap();
    std::fs::write(&path, b"\x00 not json").unwrap();
    let report = tune::choose(gpu, &problem, &options).unwrap();
    assert_eq!(report.cache, CacheUse::Miss);
    assert_eq!(report.timed.len(), 1, "{report}");
    assert!(
        report.notes.iter().any(|n| n.contains("corrupt")),
        "{:?}",
        report.notes
    );
    assert!(report.saved, "the corrupt file is replaced");
    assert_eq!(
        tune::choose(gpu, &problem, &options).unwrap().cache,
        CacheUse::Hit
    );

    // A cache file that is a directory can be neither read nor replaced.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir(&blocked).unwrap();
    let blocked = TuneOptions {
        cache: Some(blocked),
        ..options.clone()
    };
    let report = tune::choose(gpu, &problem, &blocked).unwrap();
    assert!(!report.saved && report.verified);
    assert!(
        report.notes.iter().any(|n| n.contains("unreadable")),
        "{:?}",
        report.notes
    );
    assert!(
        report.notes.iter().any(|n| n.contains("not saved")),
        "{:?}",
        report.notes
    );

    let off = TuneOptions {
        cache: None,
        ..options
    };
    let report = tune::choose(gpu, &problem, &off).unwrap();
    assert_eq!(report.cache, CacheUse::Off);
    assert!(!report.saved && report.notes.is_empty());
}

#[test]
fn a_partly_tuned_class_goes_on_where_it_stopped_until_it_is_fully_tuned() {
    let gpu = common::gpu();
    let dir = tempfile::tempdir().unwrap();
    let problem = Shape::new(24, 40, 24).problem().unwrap();
    // A budget of 0 times the best-ranked candidate alone, and takes a partial choice as final.
    let quick = options(dir.path(), 0.0);
    let first = tune::choose(gpu, &problem, &quick).unwrap();
    assert_eq!(first.cache, CacheUse::Miss, "{first}");
    assert_eq!((first.tried, first.timed.len()), (1, 1), "{first}");
    assert!(
        first.kept > 1 && !first.complete() && first.saved,
        "{first}"
    );
    assert!(
        first.to_string().contains("first-call choice: 1 of the"),
        "{first}"
    );
    let hit = tune::choose(gpu, &problem, &quick).unwrap();
    assert_eq!((hit.cache, hit.tried), (CacheUse::Hit, 1), "{hit}");

    // Any other budget goes on: the next candidate in the model's order, never one timed before.
    let on = options(dir.path(), 0.001);
    let second = tune::choose(gpu, &problem, &on).unwrap();
    assert_eq!(second.cache, CacheUse::Continued, "{second}");
    assert_eq!((second.tried, second.timed.len()), (2, 1), "{second}");
    assert_ne!(second.timed[0].plan, first.timed[0].plan);
    assert!(
        [first.chosen, second.timed[0].plan].contains(&second.chosen),
        "{second}"
    );
    assert!(second.verified && second.saved);

    // Once every candidate the model keeps has been timed, the class is fully tuned: a hit,
    // whatever the budget. (Marked here by hand; timing them all takes a minute on lavapipe.)
    let path = on.cache.clone().unwrap();
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let every: Vec<String> = tilemm::Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .map(|c| c.to_string())
        .collect();
    for entry in file["entries"].as_object_mut().unwrap().values_mut() {
        entry["tried"] = serde_json::json!(every);
    }
    std::fs::write(&path, file.to_string()).unwrap();
    let done = tune::choose(gpu, &problem, &on).unwrap();
    assert_eq!(done.cache, CacheUse::Hit, "{done}");
    assert!(
        done.complete() && done.to_string().contains("fully tuned"),
        "{done}"
    );
    assert_eq!(done.chosen, second.chosen);

    // An entry that says its choice was not verified is never used: the class is tuned again.
    for entry in file["entries"].as_object_mut().unwrap().values_mut() {
        entry["verified"] = serde_json::json!(false);
    }
    std::fs::write(&path, file.to_string()).unwrap();
    let again = tune::choose(gpu, &problem, &quick).unwrap();
    assert_eq!(again.cache, CacheUse::Miss, "{again}");
    assert!(again.verified && again.timed.len() == 1, "{again}");
    assert!(
        again.notes.iter().any(|n| n.contains("was not verified")),
        "{:?}",
        again.notes
    );
}
