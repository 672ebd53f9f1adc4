//! CIMAR (core level) and NIMAR (node level) thread migration (001 §4.1-4.3, Algorithms 1-2) on
//! per-task 3DyRM metrics: performance P = O·I/L (eq. 1, 4), relative performance (eq. 5), scores q1..q4.
//!
//! Both only move tasks that perform poorly relative to their process, and only when a move scores
//! higher than keeping them. Counts: more tasks than PUs or PUs than tasks change nothing, since
//! both start from the current placement: a "free" core (PU) or a node "with free cores" is simply
//! one hosting no task / fewer tasks than cores, and a destination that hosts tasks is a swap.

use numaff_machine::Machine;

use crate::tree::Tree;
use crate::Placement;

/// 3DyRM metrics of one task over the last interval τ_t (001 §3, §4.1).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskMetrics {
    /// Process π_i the task belongs to (relative performance is per process, eq. 5).
    pub process: u32,
    /// Operations O (instructions or FLOPs).
    pub operations: f64,
    /// Memory accesses A (off-core data reads), all nodes together (eq. 1).
    pub accesses: f64,
    /// Mean latency L of its memory operations, ns.
    pub latency_ns: f64,
    /// Accesses per node position (`Machine::nodes` order) for the preferred node (eq. 2); empty
    /// when unknown, in which case the current node is taken as preferred.
    pub accesses_by_node: Vec<f64>,
    /// Last performance P recorded while running on each node position (q3); `None` when never.
    pub history: Vec<Option<f64>>,
}

/// Parameters of CIMAR and NIMAR with the paper's defaults (001 §4.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImarParams {
    /// δ_perf: only tasks with relative performance at most δ_perf are candidates (0.8).
    pub delta_perf: f64,
    /// q1: destination free (2).
    pub q1: f64,
    /// q̂2: distance score scale (4).
    pub q2_hat: f64,
    /// q4: swap partner also under δ_perf (3).
    pub q4: f64,
    /// m: at most this many candidates and migrations (5).
    pub m: usize,
    /// S_cache: bytes of a cache line (eq. 1).
    pub line_bytes: f64,
}

impl Default for ImarParams {
    fn default() -> Self {
        ImarParams {
            delta_perf: 0.8,
            q1: 2.0,
            q2_hat: 4.0,
            q4: 3.0,
            m: 5,
            line_bytes: 64.0,
        }
    }
}

/// A proposed migration: a single move or an interchange of two tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    /// Tasks moved (one, or two for an interchange).
    pub tasks: Vec<usize>,
    /// Destination of each task: a PU (CIMAR) or a node id (NIMAR).
    pub dest: Vec<u32>,
    /// Q: the sum of the scores of the moves.
    pub score: f64,
    /// The score of keeping the same tasks where they are (Q_ref, plus the partner's for a swap).
    pub keep_score: f64,
}

/// Operational intensity I = O / (A · S_cache) (001 eq. 1); `None` without accesses.
pub fn intensity(t: &TaskMetrics, line_bytes: f64) -> Option<f64> {
    (t.accesses > 0.0 && line_bytes > 0.0).then(|| t.operations / (t.accesses * line_bytes))
}

/// Performance P = O · I / L (001 eq. 4); `None` without accesses or latency.
pub fn performance(t: &TaskMetrics, line_bytes: f64) -> Option<f64> {
    let i = intensity(t, line_bytes)?;
    (t.latency_ns > 0.0).then(|| t.operations * i / t.latency_ns)
}

/// Relative performance P̂ = P / P̄(process) (001 eq. 5), P̄ the mean P of the tasks of the same
/// process with a defined P; `None` where P or P̄ is undefined or P̄ is 0.
pub fn relative_performance(ts: &[TaskMetrics], line_bytes: f64) -> Vec<Option<f64>> {
    let p: Vec<Option<f64>> = ts.iter().map(|t| performance(t, line_bytes)).collect();
    ts.iter()
        .zip(&p)
        .map(|(t, &pt)| {
            let same: Vec<f64> = ts
                .iter()
                .zip(&p)
                .filter(|(o, _)| o.process == t.process)
                .filter_map(|(_, &x)| x)
                .collect();
            let mean = same.iter().sum::<f64>() / same.len().max(1) as f64;
            pt.filter(|_| mean > 0.0).map(|x| x / mean)
        })
        .collect()
}

struct Ctx<'a> {
    m: &'a Machine,
    ts: &'a [TaskMetrics],
    perf: Vec<Option<f64>>,
    rel: Vec<Option<f64>>,
    /// Node position of each task's current PU.
    node: Vec<usize>,
    params: ImarParams,
}

impl Ctx<'_> {
    /// SLIT distance between node positions; without a matrix 10 local, 20 remote.
    fn dist(&self, a: usize, b: usize) -> f64 {
        match &self.m.distances {
            Some(d) => d
                .get(a)
                .and_then(|r| r.get(b))
                .map_or(if a == b { 10.0 } else { 20.0 }, |&x| f64::from(x.max(1))),
            None if a == b => 10.0,
            None => 20.0,
        }
    }

    /// Preferred node (eq. 2): the node with most accesses; the current one when unknown.
    fn pref(&self, t: usize) -> usize {
        let a = &self.ts[t].accesses_by_node;
        let best = a
            .iter()
            .enumerate()
            .filter(|(_, &x)| x > 0.0)
            .max_by(|x, y| x.1.total_cmp(y.1).then(y.0.cmp(&x.0)));
        best.map_or(self.node[t], |(i, _)| i)
    }

    /// Score(θ, destination) (001 §4.2 for cores, §4.3 for nodes): `free` gives q1, the destination
    /// node `dest` gives q2 = q̂2 · d(v_k, v_pref) / d(v_k', v_pref) (eq. 6, v_k the task's current
    /// node) and q3 from the task's history on `dest` (better 4, worse 1, none or equal 2), and a swap
    /// partner under δ_perf gives q4.
    fn score(&self, t: usize, dest: usize, free: bool, partner: Option<usize>) -> f64 {
        let p = &self.params;
        let pref = self.pref(t);
        let q1 = if free { p.q1 } else { 0.0 };
        let q2 = p.q2_hat * self.dist(self.node[t], pref) / self.dist(dest, pref);
        let q3 = match (
            self.ts[t].history.get(dest).copied().flatten(),
            self.perf[t],
        ) {
            (Some(h), Some(now)) if h > now => 4.0,
            (Some(h), Some(now)) if h < now => 1.0,
            _ => 2.0,
        };
        let q4 = match partner.and_then(|o| self.rel[o]) {
            Some(r) if r < p.delta_perf => p.q4,
            _ => 0.0,
        };
        q1 + q2 + q3 + q4
    }

    /// Θ̂: the m tasks of lowest P̂, all with P̂ ≤ δ_perf (001 §4.2's prose: "verifying that
    /// P̂ ≤ δ_perf"; the pseudocode of Algorithms 1-2, line 2, writes `<`, we follow the prose; q4
    /// below uses the strict P̂ < δ_perf the paper gives for it).
    fn candidates(&self) -> Vec<usize> {
        let mut c: Vec<(f64, usize)> = self
            .rel
            .iter()
            .enumerate()
            .filter_map(|(t, r)| r.filter(|&r| r <= self.params.delta_perf).map(|r| (r, t)))
            .collect();
        c.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        c.truncate(self.params.m);
        c.into_iter().map(|(_, t)| t).collect()
    }
}

fn context<'a>(
    m: &'a Machine,
    ts: &'a [TaskMetrics],
    current: &Placement,
    params: ImarParams,
) -> Ctx<'a> {
    let node = current
        .iter()
        .map(|&pu| {
            m.node_of_pu(pu)
                .and_then(|id| m.node_index(id))
                .unwrap_or(0)
        })
        .collect();
    Ctx {
        m,
        ts,
        perf: ts
            .iter()
            .map(|t| performance(t, params.line_bytes))
            .collect(),
        rel: relative_performance(ts, params.line_bytes),
        node,
        params,
    }
}

/// The m best migrations, highest Q first, skipping those that touch a task or destination already
/// chosen (Algorithm 1-2 line 17; the paper does not say what to do with conflicting candidates).
fn select(mut cands: Vec<Migration>, m: usize) -> Vec<Migration> {
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut out: Vec<Migration> = Vec::new();
    for c in cands {
        if out.len() >= m {
            break;
        }
        let clash = out.iter().any(|o| {
            o.tasks.iter().any(|t| c.tasks.contains(t)) || o.dest.iter().any(|d| c.dest.contains(d))
        });
        if !clash {
            out.push(c);
        }
    }
    out
}

/// CIMAR's migrations (001 §4.2, Algorithm 1). "Cores" are the kernel's cpus (PUs). For each
/// candidate θ on PU ζ_kl of node v_k, every PU of another node is a destination: a free PU gives a
/// single move scored Score(θ, ζ'), kept if above Q_ref = Score(θ, ζ_kl) (line 10); an occupied PU
/// gives, for each task θ' on it, an interchange scored Score(θ, ζ') + Score(θ', ζ_kl), kept if
/// above Q_ref + Score(θ', ζ') (line 15). Keeping scores q1 = 0 (the core hosts θ itself).
pub fn cimar_migrations(
    m: &Machine,
    ts: &[TaskMetrics],
    current: &Placement,
    params: ImarParams,
) -> Vec<Migration> {
    let cx = context(m, ts, current, params);
    let tree = Tree::from_machine(m);
    let n = current.len().min(ts.len());
    let mut cands = Vec::new();
    for t in cx.candidates().into_iter().filter(|&t| t < n) {
        let (here, vk) = (current[t], cx.node[t]);
        let q_ref = cx.score(t, vk, false, None);
        for &pu in tree.pus() {
            let Some(vd) = m.node_of_pu(pu).and_then(|id| m.node_index(id)) else {
                continue;
            };
            if vd == vk {
                continue;
            }
            let hosted: Vec<usize> = (0..n).filter(|&o| current[o] == pu).collect();
            if hosted.is_empty() {
                let q = cx.score(t, vd, true, None);
                if q > q_ref {
                    cands.push(Migration {
                        tasks: vec![t],
                        dest: vec![pu],
                        score: q,
                        keep_score: q_ref,
                    });
                }
            } else {
                for o in hosted {
                    let q = cx.score(t, vd, false, Some(o)) + cx.score(o, vk, false, Some(t));
                    let keep = q_ref + cx.score(o, vd, false, None);
                    if q > keep {
                        cands.push(Migration {
                            tasks: vec![t, o],
                            dest: vec![pu, here],
                            score: q,
                            keep_score: keep,
                        });
                    }
                }
            }
        }
    }
    select(cands, params.m)
}

/// NIMAR's migrations (001 §4.3, Algorithm 2), destinations are node ids. A node "has free cores"
/// when it hosts fewer tasks than it has cores (C_n); that gives q1 and a single move, else an
/// interchange with each task on it. Keeping is scored the same way on the task's own node (q1 when
/// that node hosts fewer tasks than cores, itself included). Algorithm 2 line 5 reads "v_n' := node
/// hosting θ" and line 6 "Score(θ, v_n)": we read both as the current node v_n.
pub fn nimar_migrations(
    m: &Machine,
    ts: &[TaskMetrics],
    current: &Placement,
    params: ImarParams,
) -> Vec<Migration> {
    let cx = context(m, ts, current, params);
    let n = current.len().min(ts.len());
    let cores: Vec<usize> = m
        .nodes
        .iter()
        .map(|nd| {
            m.cores()
                .filter(|(_, c)| c.pus.intersects(&nd.cpus))
                .count()
        })
        .collect();
    let hosted: Vec<usize> = (0..m.nodes.len())
        .map(|v| (0..n).filter(|&t| cx.node[t] == v).count())
        .collect();
    let free = |v: usize| hosted[v] < cores[v];
    let mut cands = Vec::new();
    for t in cx.candidates().into_iter().filter(|&t| t < n) {
        let vn = cx.node[t];
        let q_ref = cx.score(t, vn, free(vn), None);
        for (vd, nd) in m.nodes.iter().enumerate() {
            if vd == vn || nd.cpus.is_empty() {
                continue;
            }
            if free(vd) {
                let q = cx.score(t, vd, true, None);
                if q > q_ref {
                    cands.push(Migration {
                        tasks: vec![t],
                        dest: vec![nd.id],
                        score: q,
                        keep_score: q_ref,
                    });
                }
            } else {
                for o in (0..n).filter(|&o| cx.node[o] == vd) {
                    let q = cx.score(t, vd, false, Some(o)) + cx.score(o, vn, free(vn), Some(t));
                    let keep = q_ref + cx.score(o, vd, false, None);
                    if q > keep {
                        cands.push(Migration {
                            tasks: vec![t, o],
                            dest: vec![nd.id, m.nodes[vn].id],
                            score: q,
                            keep_score: keep,
                        });
                    }
                }
            }
        }
    }
    select_with_room(
        cands,
        params.m,
        |mig| match mig.tasks[..] {
            [t] => m.nodes[..]
                .iter()
                .position(|nd| nd.id == mig.dest[0])
                .map(|vd| (cx.node[t], vd)),
            _ => None,
        },
        (0..m.nodes.len())
            .map(|v| cores[v].saturating_sub(hosted[v]))
            .collect(),
    )
}

/// [`select`] for NIMAR, whose destinations are nodes: a single move also needs a free core left
/// on its destination node once the better migrations are done (each move takes one there and
/// frees one on its source node; `room[v]` = free cores of node v now, `moves` gives a single
/// move's (source, destination) node indexes, None for an interchange). Without this, two moves
/// chosen against the same last free core would put two tasks on one core while another node has
/// free ones.
fn select_with_room(
    mut cands: Vec<Migration>,
    m: usize,
    moves: impl Fn(&Migration) -> Option<(usize, usize)>,
    mut room: Vec<usize>,
) -> Vec<Migration> {
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut out: Vec<Migration> = Vec::new();
    for c in cands {
        if out.len() >= m {
            break;
        }
        if out
            .iter()
            .any(|o| o.tasks.iter().any(|t| c.tasks.contains(t)))
        {
            continue;
        }
        if let Some((from, to)) = moves(&c) {
            if room.get(to).copied().unwrap_or(0) == 0 {
                continue;
            }
            room[to] -= 1;
            if let Some(r) = room.get_mut(from) {
                *r += 1;
            }
        }
        out.push(c);
    }
    out
}

/// CIMAR as a placement: the current placement with the selected migrations applied.
pub fn cimar(
    m: &Machine,
    ts: &[TaskMetrics],
    current: &Placement,
    params: ImarParams,
) -> Placement {
    let mut p = current.clone();
    for mig in cimar_migrations(m, ts, current, params) {
        for (&t, &d) in mig.tasks.iter().zip(&mig.dest) {
            p[t] = d;
        }
    }
    p
}

/// NIMAR as a placement. NIMAR binds a thread to a node and lets the OS pick the core; a placement
/// names one PU, so a single move takes a PU of the destination node hosting no task (the least
/// loaded one otherwise), and an interchange swaps the two tasks' PUs.
pub fn nimar(
    m: &Machine,
    ts: &[TaskMetrics],
    current: &Placement,
    params: ImarParams,
) -> Placement {
    let mut p = current.clone();
    for mig in nimar_migrations(m, ts, current, params) {
        if let [a, b] = mig.tasks[..] {
            p.swap(a, b);
            continue;
        }
        let (t, node) = (mig.tasks[0], mig.dest[0]);
        let Some(nd) = m.nodes.iter().find(|x| x.id == node) else {
            continue;
        };
        if let Some(pu) = nd
            .cpus
            .iter()
            .min_by_key(|&pu| p.iter().filter(|&&x| x == pu).count())
        {
            p[t] = pu;
        }
    }
    p
}
