//! Fuzzes communication matrices (`numaff map --matrix M.csv`): any text gives a matrix or an
//! error, never a panic; a matrix that loads writes back to CSV that loads the same, and every
//! algorithm that needs only the matrix maps it on a catalog machine (or says why it cannot), with
//! the quality figures `numaff map` prints.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_policy::comm::CommMatrix;
use numaff_policy::{map, quality, tree::Tree, Algorithm, MapInput};

/// Past this many tasks the algorithms are not run (kmaf-sim-4x2 has 8 PUs; more tasks than PUs
/// share them).
const TASKS_TO_MAP: usize = 24;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(comm) = CommMatrix::from_csv(text, "fuzz.csv") else {
        return;
    };
    let again =
        CommMatrix::from_csv(&comm.to_csv(), "rewritten.csv").expect("a written matrix loads");
    assert_eq!(
        comm.to_csv(),
        again.to_csv(),
        "round trip changed the matrix"
    );
    if comm.len() > TASKS_TO_MAP {
        return;
    }
    let machine = numaff_machine::catalog::load("kmaf-sim-4x2").expect("catalog machine");
    let tree = Tree::from_machine(&machine);
    let input = MapInput::with_comm(&machine, &comm);
    for algo in Algorithm::ALL {
        let Ok(p) = map(algo, &input) else {
            continue;
        };
        assert_eq!(p.len(), comm.len(), "{} placed every task", algo.name());
        let _ = quality::hop_cost(&tree, &comm, &p);
        let _ = quality::latency_cost(&machine, &comm, &p);
        let _ = quality::shares(&machine, &comm, &p);
        let _ = quality::busiest_edge(&tree, &comm, &p);
    }
});
