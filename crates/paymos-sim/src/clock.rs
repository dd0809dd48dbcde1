//! Simulated time, for SQLite too.
//!
//! The shared SQL stamps times with `strftime(…, 'now')`. SQLite reads "now" from its VFS
//! (`xCurrentTimeInt64`), so the simulator registers a VFS that is the platform's default in
//! every respect but the clock, which it reads from a per-thread simulated clock. The SQL
//! text is untouched; every timestamp, the sweeper's `older than 300 s` and the ordering of
//! rows by time are then functions of the seed alone, and a seed replays byte for byte.

use std::cell::Cell;
use std::ffi::{c_int, CStr};
use std::sync::Once;

use rusqlite::ffi;

/// 2025-12-01T00:00:00Z, the simulated clock's start, in Unix milliseconds.
pub const EPOCH_MS: i64 = 1_764_547_200_000;

/// The Unix epoch as a Julian day number, in milliseconds (what SQLite's VFS speaks).
const UNIX_EPOCH_JULIAN_MS: i64 = 210_866_760_000_000;

pub const VFS_NAME: &CStr = c"paymos_sim_clock";

thread_local! {
    static NOW_MS: Cell<i64> = const { Cell::new(EPOCH_MS) };
}

/// The simulated Unix time in milliseconds on this thread.
pub fn now_ms() -> i64 {
    NOW_MS.with(Cell::get)
}

pub fn set_now_ms(ms: i64) {
    NOW_MS.with(|c| c.set(ms));
}

unsafe extern "C" fn current_time_int64(_vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    // SAFETY: SQLite passes a valid pointer to write the time to.
    unsafe { *out = now_ms() + UNIX_EPOCH_JULIAN_MS };
    ffi::SQLITE_OK
}

unsafe extern "C" fn current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    // SAFETY: as above.
    unsafe { *out = (now_ms() + UNIX_EPOCH_JULIAN_MS) as f64 / 86_400_000.0 };
    ffi::SQLITE_OK
}

static REGISTER: Once = Once::new();

/// Registers the simulated-clock VFS (once per process).
pub fn register_vfs() {
    REGISTER.call_once(|| {
        // SAFETY: sqlite3_initialize is idempotent; the default VFS is a static struct that
        // SQLite never frees, and our copy is leaked so it lives as long as the process. The
        // copy keeps the default's pAppData and methods (open, access, …), which only read
        // what the copy carries; only the two clock methods differ.
        unsafe {
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
            let default = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!default.is_null(), "no default SQLite VFS");
            let mut vfs: ffi::sqlite3_vfs = std::ptr::read(default);
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.xCurrentTime = Some(current_time);
            if vfs.iVersion >= 2 {
                vfs.xCurrentTimeInt64 = Some(current_time_int64);
            }
            let leaked: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(vfs));
            assert_eq!(ffi::sqlite3_vfs_register(leaked, 0), ffi::SQLITE_OK);
        }
    });
}
