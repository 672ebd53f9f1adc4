//! The C entry points of numaff.h. Every one catches panics (none crosses into C), turns errors
//! into the NUMAFF_E* codes and records the message for numaff_last_error. The state is one
//! process-wide mutex: every call is safe from several threads (calls on one array are serialised).
#![allow(clippy::missing_safety_doc)] // documented in numaff.h

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use crate::core::{Library, Policy, Sched};
use crate::error::{self, Error, Result, EINTERNAL, EINVAL, ENOTINIT};

struct State {
    lib: Option<Library>,
    /// numaff_init calls not yet matched by numaff_final.
    refs: u32,
}

static STATE: Mutex<State> = Mutex::new(State { lib: None, refs: 0 });

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn set_last(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs `f` with the library, catching panics; returns its value or the error code.
fn with_lib<T>(f: impl FnOnce(&mut Library) -> Result<T>) -> Result<T> {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut st = state();
        match st.lib.as_mut() {
            Some(lib) => f(lib),
            None => Err(Error::new(ENOTINIT, "numaff_init has not been called")),
        }
    }));
    let r = r.unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::new(EINTERNAL, format!("internal error: {what}")))
    });
    if let Err(e) = &r {
        set_last(&e.to_string());
    }
    r
}

fn code(r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.code,
    }
}

fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(EINTERNAL)
}

fn addr(array: *mut c_void) -> Result<usize> {
    if array.is_null() {
        Err(Error::new(EINVAL, "array is NULL"))
    } else {
        Ok(array as usize)
    }
}

fn slice<'a>(p: *const c_int, n: c_int) -> Result<&'a [c_int]> {
    if n < 0 || (n > 0 && p.is_null()) {
        return Err(Error::new(EINVAL, format!("list of {n} entries at {p:?}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller passes n readable ints at p (numaff.h).
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

#[no_mangle]
pub extern "C" fn numaff_init() -> c_int {
    guarded(|| {
        let mut st = state();
        if st.lib.is_none() {
            let machine = match numaff_machine::discover_host() {
                Ok(m) => m,
                Err(e) => {
                    set_last(&format!("cannot discover the machine: {e}"));
                    return error::ETOPO;
                }
            };
            match Library::new(machine) {
                Ok(l) => st.lib = Some(l),
                Err(e) => {
                    set_last(&e.to_string());
                    return e.code;
                }
            }
        }
        st.refs += 1;
        0
    })
}

#[no_mangle]
pub extern "C" fn numaff_final() -> c_int {
    guarded(|| {
        let mut st = state();
        if st.refs == 0 {
            set_last("numaff_final without numaff_init");
            return ENOTINIT;
        }
        st.refs -= 1;
        if st.refs == 0 {
            // Arrays still allocated stay mapped (the program may still use them) until exit.
            st.lib = None;
        }
        0
    })
}

fn alloc(dims: &[u64], elem_size: usize) -> *mut c_void {
    with_lib(|l| l.alloc(dims, elem_size as u64))
        .map(|a| a as *mut c_void)
        .unwrap_or(std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn numaff_alloc_1d(nelem: usize, elem_size: usize) -> *mut c_void {
    alloc(&[nelem as u64], elem_size)
}

#[no_mangle]
pub extern "C" fn numaff_alloc_2d(rows: usize, cols: usize, elem_size: usize) -> *mut c_void {
    alloc(&[rows as u64, cols as u64], elem_size)
}

#[no_mangle]
pub extern "C" fn numaff_alloc_3d(
    nx: usize,
    ny: usize,
    nz: usize,
    elem_size: usize,
) -> *mut c_void {
    alloc(&[nx as u64, ny as u64, nz as u64], elem_size)
}

#[no_mangle]
pub extern "C" fn numaff_free(array: *mut c_void) -> c_int {
    code(with_lib(|l| l.free(addr(array)?)))
}

fn apply(array: *mut c_void, policy: impl FnOnce(&Library, usize) -> Result<Policy>) -> c_int {
    code(with_lib(|l| {
        let a = addr(array)?;
        l.array(a)?;
        let p = policy(l, a)?;
        l.apply(a, p)
    }))
}

fn block_rows(l: &Library, a: usize, rows: usize) -> Result<u64> {
    if rows > 0 {
        return Ok(rows as u64);
    }
    let arr = l.array(a)?;
    Ok(crate::map::auto_block_rows(arr.rows(), l.thread_count()))
}

#[no_mangle]
pub unsafe extern "C" fn numaff_bind_all(
    array: *mut c_void,
    nodes: *const c_int,
    nnodes: c_int,
) -> c_int {
    apply(array, |l, _| {
        Ok(Policy::BindAll(l.check_nodes(slice(nodes, nnodes)?)?))
    })
}

#[no_mangle]
pub extern "C" fn numaff_bind_block(array: *mut c_void) -> c_int {
    apply(array, |l, a| {
        Ok(Policy::BindBlock {
            block_rows: block_rows(l, a, 0)?,
        })
    })
}

#[no_mangle]
pub extern "C" fn numaff_cyclic(array: *mut c_void) -> c_int {
    apply(array, |_, _| Ok(Policy::Cyclic))
}

#[no_mangle]
pub extern "C" fn numaff_cyclic_block(array: *mut c_void, block_rows_: usize) -> c_int {
    apply(array, |l, a| {
        Ok(Policy::CyclicBlock {
            block_rows: block_rows(l, a, block_rows_)?,
        })
    })
}

#[no_mangle]
pub extern "C" fn numaff_skew_mapp(array: *mut c_void) -> c_int {
    apply(array, |_, _| Ok(Policy::SkewMapp))
}

#[no_mangle]
pub extern "C" fn numaff_prime_mapp(array: *mut c_void) -> c_int {
    apply(array, |_, _| Ok(Policy::PrimeMapp))
}

#[no_mangle]
pub extern "C" fn numaff_random(array: *mut c_void) -> c_int {
    apply(array, |l, _| Ok(Policy::Random { seed: l.seed }))
}

#[no_mangle]
pub extern "C" fn numaff_random_block(array: *mut c_void, block_rows_: usize) -> c_int {
    apply(array, |l, a| {
        Ok(Policy::RandomBlock {
            block_rows: block_rows(l, a, block_rows_)?,
            seed: l.seed,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn numaff_migrate(
    array: *mut c_void,
    first_row: usize,
    nrows: usize,
    nodes: *const c_int,
    nnodes: c_int,
) -> c_int {
    code(with_lib(|l| {
        let a = addr(array)?;
        let nodes = slice(nodes, nnodes)?;
        if nodes.is_empty() {
            return Err(Error::new(EINVAL, "numaff_migrate needs at least one node"));
        }
        let nodes = l.check_nodes(nodes)?;
        l.migrate(a, first_row as u64, nrows as u64, &nodes)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn numaff_migrate_cols(
    array: *mut c_void,
    first_col: usize,
    ncols: usize,
    nodes: *const c_int,
    nnodes: c_int,
) -> c_int {
    code(with_lib(|l| {
        let a = addr(array)?;
        let nodes = slice(nodes, nnodes)?;
        if nodes.is_empty() {
            return Err(Error::new(
                EINVAL,
                "numaff_migrate_cols needs at least one node",
            ));
        }
        let nodes = l.check_nodes(nodes)?;
        l.migrate_cols(a, first_col as u64, ncols as u64, &nodes)
    }))
}

#[no_mangle]
pub extern "C" fn numaff_set_threads(nthreads: c_int) -> c_int {
    code(with_lib(|l| {
        if nthreads < 0 {
            return Err(Error::new(EINVAL, format!("{nthreads} threads")));
        }
        l.threads = (nthreads > 0).then_some(nthreads as u32);
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn numaff_set_sched(mode: c_int) -> c_int {
    code(with_lib(|l| {
        l.sched = match mode {
            0 => Sched::Pin,
            1 => Sched::Os,
            2 => Sched::User,
            m => return Err(Error::new(EINVAL, format!("unknown schedule {m}"))),
        };
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn numaff_set_thread_cpus(cpus: *const c_int, ncpus: c_int) -> c_int {
    code(with_lib(|l| {
        let c = l.check_cpus(slice(cpus, ncpus)?)?;
        l.user_cpus = c;
        l.sched = if l.user_cpus.is_empty() {
            Sched::Pin
        } else {
            Sched::User
        };
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn numaff_bind_thread(thread: c_int) -> c_int {
    code(with_lib(|l| {
        if thread < 0 {
            return Err(Error::new(EINVAL, format!("thread {thread}")));
        }
        l.bind_thread(thread as u32)
    }))
}

#[no_mangle]
pub extern "C" fn numaff_thread_node(thread: c_int) -> c_int {
    match with_lib(|l| {
        if thread < 0 {
            return Err(Error::new(EINVAL, format!("thread {thread}")));
        }
        Ok(l.node_of_thread(thread as u32) as c_int)
    }) {
        Ok(n) => n,
        Err(e) => e.code,
    }
}

#[no_mangle]
pub extern "C" fn numaff_set_seed(seed: u64) -> c_int {
    code(with_lib(|l| {
        l.seed = seed;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn numaff_node_count() -> c_int {
    with_lib(|l| Ok(l.nodes.len() as c_int)).unwrap_or_else(|e| e.code)
}

#[no_mangle]
pub unsafe extern "C" fn numaff_nodes(out: *mut c_int, max: c_int) -> c_int {
    with_lib(|l| {
        if max < 0 || (max > 0 && out.is_null()) {
            return Err(Error::new(EINVAL, "bad output buffer"));
        }
        for (i, n) in l.nodes.iter().take(max as usize).enumerate() {
            // SAFETY: the caller gives room for `max` ints at `out`; i < max.
            unsafe { *out.add(i) = *n as c_int };
        }
        Ok(l.nodes.len() as c_int)
    })
    .unwrap_or_else(|e| e.code)
}

#[no_mangle]
pub extern "C" fn numaff_cpu_count() -> c_int {
    with_lib(|l| Ok(l.pus.len() as c_int)).unwrap_or_else(|e| e.code)
}

#[no_mangle]
pub extern "C" fn numaff_pages_on_node(array: *mut c_void, node: c_int) -> i64 {
    with_lib(|l| {
        let per = l.pages_per_node(addr(array)?)?;
        let n = if node < 0 { u32::MAX } else { node as u32 };
        Ok(per.get(&n).copied().unwrap_or(0) as i64)
    })
    .unwrap_or_else(|e| i64::from(e.code))
}

#[no_mangle]
pub extern "C" fn numaff_migrated_pages() -> i64 {
    with_lib(|l| Ok(l.migrated_pages as i64)).unwrap_or_else(|e| i64::from(e.code))
}

#[no_mangle]
pub extern "C" fn numaff_print_stats() -> c_int {
    code(with_lib(|l| {
        use std::io::Write;
        let text = l.report();
        // SAFETY: fflush(NULL) flushes every C output stream, so the report follows what the
        // program printed before through stdio.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Error::new(error::ESYS, format!("writing statistics: {e}")))
    }))
}

#[no_mangle]
pub extern "C" fn numaff_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        0 => c"success",
        error::ENOTINIT => c"numaff is not initialised: call numaff_init first",
        EINVAL => c"invalid argument",
        error::ENOMEM => c"out of memory",
        error::ENOARRAY => c"not an array allocated by numaff_alloc_*",
        error::ENODE => c"no such node or cpu on this machine",
        error::ESYS => c"a system call failed",
        error::EPARTIAL => c"some pages could not be placed",
        error::ETOPO => c"the machine topology could not be discovered",
        EINTERNAL => c"internal error in libnumaff",
        _ => c"unknown error code",
    };
    s.as_ptr()
}

#[no_mangle]
pub extern "C" fn numaff_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn numaff_version() -> *const c_char {
    static V: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"0.0.0",
        };
    V.as_ptr()
}
