//! What `numaff profile` says and records about a recording: the sampler and induced faults at the
//! start, the trace's rates (samples, losses, induced faults, huge pages) and the summary at the end.

use numaff_behave::TraceMeta;
use numaff_linux::induce::{self, AgentStatus, Induce, SoftDirtyRearmer};
use numaff_linux::sampler::AccessSampler;
use numaff_linux::thp::{self, ThpMode};

use super::plan::{budget_words, Plan, Program};
use super::record::{Agent, Recorded, Target};

/// Says which sampler and induced faults are used and whether transparent huge pages are on;
/// returns the huge-page mode (recorded in the trace).
pub(super) fn announce(plan: &Plan, target: &Target) -> Option<ThpMode> {
    if let Some(s) = target.samplers.first() {
        eprintln!("numaff: sampler {}", s.describe());
    }
    eprintln!(
        "numaff: induced faults: {}",
        describe_induce(plan.induce, plan.induce_rate, plan.induce_budget)
    );
    // Transparent huge pages: a first touch of a huge page faults once per 2 MiB, so the sampler
    // sees one sample for 512 base pages there. Said at start, watched while the program runs.
    let thp = thp::thp_mode();
    if let Some(m) = thp.filter(|&m| m != ThpMode::Never) {
        eprintln!(
            "numaff: transparent huge pages: {} (a first touch of a huge page faults once per 2 MiB: one sample for its 512 pages)",
            m.as_str()
        );
    }
    thp
}

/// The samplers' totals at the end of a recording.
pub(super) struct Totals {
    pub samples: u64,
    pub lost: u64,
    /// What the events counted: page faults, or qualifying loads, stores or ops.
    pub counted: u64,
}

impl Totals {
    pub(super) fn of(samplers: &mut [AccessSampler]) -> Self {
        Totals {
            samples: samplers.iter().map(|s| s.samples()).sum(),
            lost: samplers.iter_mut().map(|s| s.lost_total()).sum(),
            counted: samplers.iter_mut().map(|s| s.counted()).sum(),
        }
    }
}

/// The name of what the events counted, in the trace's rates and the summary.
fn counted_name(plan: &Plan) -> &'static str {
    if plan.hardware {
        "events"
    } else {
        "faults"
    }
}

/// Puts the recording's rates into `meta`: samples, losses, what the events counted, the period,
/// the induced-fault settings, the wall time and the huge pages seen.
pub(super) fn add_rates(
    meta: &mut TraceMeta,
    plan: &Plan,
    totals: &Totals,
    recorded: &Recorded,
    thp: Option<ThpMode>,
) {
    let secs = recorded.wall.as_secs_f64().max(1e-9);
    meta.rates.insert("samples".into(), totals.samples as f64);
    meta.rates.insert("lost".into(), totals.lost as f64);
    // samples / counted is the share sampled.
    meta.rates
        .insert(counted_name(plan).into(), totals.counted as f64);
    meta.rates.insert("period".into(), plan.period.0 as f64);
    if plan.induce != Induce::Off {
        // The way as a key (`induce_uffd`, `induce_soft-dirty`, `induce_balancing`) set to 1.
        meta.rates.insert(format!("induce_{}", plan.induce), 1.0);
        meta.rates.insert("induce_rate".into(), plan.induce_rate);
        if let (Some(b), Induce::Uffd | Induce::SoftDirty) = (plan.induce_budget, plan.induce) {
            meta.rates.insert("induce_budget".into(), b);
        }
    }
    meta.rates
        .insert("wall_s".into(), recorded.wall.as_secs_f64());
    meta.rates
        .insert("samples_per_s".into(), totals.samples as f64 / secs);
    if let Some(m) = thp {
        meta.rates.insert("thp_mode".into(), m.as_rate());
        meta.rates
            .insert("thp_bytes_max".into(), recorded.thp_bytes_max as f64);
    }
}

/// What the induced faults did, as rates in `meta` and a summary line: the soft-dirty re-armer's
/// counts, or the uffd agent's status (its status files are read and removed).
pub(super) fn induced_faults(
    meta: &mut TraceMeta,
    plan: &Plan,
    soft_dirty: Option<&SoftDirtyRearmer>,
    agent: &Agent,
    pid: i32,
) -> Option<String> {
    let mut line = soft_dirty.map(|r| soft_dirty_summary(meta, r, plan.induce_budget));
    if plan.induce == Induce::Uffd {
        line = Some(uffd_summary(
            meta,
            agent.take_status(pid),
            plan.induce_budget,
        ));
    }
    line
}

/// The soft-dirty re-armer's rates and summary line.
fn soft_dirty_summary(meta: &mut TraceMeta, r: &SoftDirtyRearmer, budget: Option<f64>) -> String {
    meta.rates.insert("induce_rearms".into(), r.rearms() as f64);
    meta.rates
        .insert("induce_deferred".into(), r.deferred() as f64);
    meta.rates
        .insert("induce_resident_rearmed".into(), r.pages() as f64);
    let waited = match r.deferred() {
        0 => String::new(),
        n => format!(
            "; a due re-arm waited for the budget at {n} checks ({})",
            budget_words(budget)
        ),
    };
    format!(
        "soft-dirty: {} re-arms of every page ({} resident pages re-armed in all), {:.3} ms in clear_refs{waited}",
        r.rearms(),
        r.pages(),
        r.spent().as_secs_f64() * 1e3
    )
}

/// The uffd agent's rates and summary line, from its status.
fn uffd_summary(meta: &mut TraceMeta, status: Option<AgentStatus>, budget: Option<f64>) -> String {
    match status {
        Some(st) => {
            meta.rates
                .insert("induce_private_rearmed".into(), st.private_rearmed as f64);
            meta.rates
                .insert("induce_shared_rearmed".into(), st.shared_rearmed as f64);
            meta.rates.insert("induce_wanted".into(), st.wanted as f64);
            meta.rates
                .insert("induce_agent_cpu_ms".into(), st.agent_cpu_ms);
            meta.rates
                .insert("induce_limited_ticks".into(), st.limited_ticks as f64);
            let limited = match st.limited_ticks {
                0 => String::new(),
                n => format!(
                    "; the budget ({}) limited {n} ticks: {} of the {} pages the rate asked for re-armed",
                    budget_words(budget),
                    st.private_rearmed + st.shared_rearmed,
                    st.wanted
                ),
            };
            let last = match &st.last_error {
                Some((call, e)) => format!(
                    " (the last: {call}, {})",
                    std::io::Error::from_raw_os_error(*e)
                ),
                None => String::new(),
            };
            let vanished = match st.vanished {
                0 => String::new(),
                n => format!(" ({n} calls on ranges the program had just unmapped)"),
            };
            format!(
                "uffd agent {} ({}): {} ticks, {} private pages write-protected ({}), {} shared pages unmapped, {} errors{last}{vanished}, {:.1} ms of cpu in the agent{limited}",
                st.state, st.uffd, st.ticks, st.private_rearmed, st.private, st.shared_rearmed, st.errors, st.agent_cpu_ms
            )
        }
        None => "uffd agent did not report (a static program, or one that ran under 100 ms)".into(),
    }
}

/// numaff's own cpu time and the program's over the recording, in seconds: a started program's
/// from its wait (numaff's waited-for children), a running process's (or a program still running)
/// from /proc/PID/stat since the samplers were opened; `None` for the program when it is gone.
pub(super) fn cpu_times(
    pid: i32,
    cpu_at_start: Option<f64>,
    recorded: &Recorded,
) -> Option<(f64, Option<f64>)> {
    let get = |who| {
        // SAFETY: getrusage writes one rusage struct into a live local.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::getrusage(who, &mut u) } == 0).then(|| {
            let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
            t(u.ru_utime) + t(u.ru_stime)
        })
    };
    let program = match recorded.status {
        Some(_) => get(libc::RUSAGE_CHILDREN),
        None => super::record::process_cpu_s(pid)
            .map(|now| (now - cpu_at_start.unwrap_or(0.0)).max(0.0)),
    };
    Some((get(libc::RUSAGE_SELF)?, program))
}

/// The summary on stderr (stdout is the program's): samples, induced faults, cpu
/// time, huge pages, losses, and what to run next.
pub(super) fn print_summary(
    plan: &Plan,
    totals: &Totals,
    recorded: &Recorded,
    threads_named: usize,
    induce_line: Option<String>,
    cpu: Option<(f64, Option<f64>)>,
) {
    let Totals {
        samples,
        lost,
        counted,
    } = *totals;
    let share = match plan.period.0 {
        1 => String::new(),
        n => format!(" of {counted} {} (one in {n})", counted_name(plan)),
    };
    eprintln!(
        "numaff: {samples} samples{share}, {lost} lost, {threads_named} threads named, in {:.3} s wall ({}); wrote {}",
        recorded.wall.as_secs_f64(),
        recorded.stopped_by,
        plan.output.display()
    );
    if samples == 0 && !plan.hardware && matches!(plan.program, Program::Running(_)) {
        eprintln!("numaff: {}", no_samples_from_a_running_process(plan.induce));
    }
    if let Some(l) = induce_line {
        eprintln!("numaff: induced faults: {l}");
    }
    if let Some((own, program)) = cpu {
        let per_sample = if samples > 0 {
            format!(" ({:.2} µs per sample)", own * 1e6 / samples as f64)
        } else {
            String::new()
        };
        match program {
            Some(p) => eprintln!(
                "numaff: cpu time: numaff {own:.3} s{per_sample}, the program {p:.3} s"
            ),
            None => eprintln!(
                "numaff: cpu time: numaff {own:.3} s{per_sample}, the program's not known (it was gone at the end)"
            ),
        }
    }
    if recorded.thp_bytes_max > 0 {
        eprintln!(
            "numaff: transparent huge pages: up to {:.1} MiB of the program's memory ({} huge pages) was in 2 MiB pages, each sampled as one first touch (recorded as thp_bytes_max)",
            recorded.thp_bytes_max as f64 / (1u64 << 20) as f64,
            recorded.thp_bytes_max >> 21
        );
    }
    if lost > 0 {
        eprintln!(
            "numaff: {lost} samples were lost (ring buffers full): the analysis sees fewer faults than happened"
        );
    }
    eprintln!("next: numaff analyze {}", plan.output.display());
    if let Some(st) = recorded.status {
        if st != 0 {
            eprintln!("numaff: the program exited with {}", describe_status(st));
        }
    }
}

fn describe_induce(i: Induce, rate: f64, budget: Option<f64>) -> String {
    let within = match budget {
        Some(_) => format!(", within {} (--induce-budget)", budget_words(budget)),
        None => ", no budget (--induce-budget off)".into(),
    };
    match i {
        Induce::Off => "off: each page is sampled at its first touch only".into(),
        Induce::Uffd => format!(
            "uffd agent (LD_PRELOAD), {rate} re-arms per page per second{within}: {}; cost: {}",
            induce::UFFD_SEES,
            induce::UFFD_COST
        ),
        Induce::SoftDirty => format!(
            "soft-dirty, every page re-armed every {:.3} s{within}: {}; cost: {}",
            1.0 / rate,
            induce::SOFT_DIRTY_SEES,
            induce::SOFT_DIRTY_COST
        ),
        Induce::Balancing => format!(
            "NUMA-balancing hinting faults: {}; cost: {}",
            induce::BALANCING_SEES,
            induce::BALANCING_COST
        ),
        Induce::Auto => "auto".into(),
    }
}

/// Why an attached process gave no page-fault samples, and what to do.
fn no_samples_from_a_running_process(induce: Induce) -> String {
    let induced = match induce {
        Induce::Off => "no faults were induced (--induce off)".to_string(),
        way => format!("the induced faults ({way}) made none either"),
    };
    format!(
        "no samples: an attached process shows only the first touches of pages it touches for the \
         first time after numaff attached, and a busy process working on memory it already touched \
         makes no page faults; {induced}. To see its accesses, profile it from its start \
         (numaff profile -- CMD), or induce faults on it: --induce soft-dirty (a kernel with \
         CONFIG_MEM_SOFT_DIRTY) or --induce balancing (NUMA balancing on, \
         kernel.numa_balancing=1; `numaff profile --list-samplers` says which work here)"
    )
}

/// The exit status that hands a program's wait status on: its exit status, or 128 + the signal
/// that killed it (as a shell does); 0 when the program's end was not seen.
pub(super) fn exit_code(status: Option<i32>) -> u8 {
    match status {
        Some(st) if libc::WIFEXITED(st) => libc::WEXITSTATUS(st) as u8,
        Some(st) if libc::WIFSIGNALED(st) => (128 + libc::WTERMSIG(st)).min(255) as u8,
        _ => 0,
    }
}

fn describe_status(st: i32) -> String {
    if libc::WIFEXITED(st) {
        format!("status {}", libc::WEXITSTATUS(st))
    } else if libc::WIFSIGNALED(st) {
        format!("signal {}", libc::WTERMSIG(st))
    } else {
        format!("wait status {st}")
    }
}
