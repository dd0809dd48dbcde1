//! The glue floor without wasm-bindgen (benchmark only): the same work as `crates/glue-floor`
//! and its JavaScript twin, `bench/glue-floor.js` (one header read, the body awaited, the
//! receive log line, the fixed receipt), with the log line composed in the wasm and nothing
//! between the wasm and JS but raw exports and a buffer in the wasm's memory: no wasm-bindgen,
//! no workers-rs, no externref table, no closures. `index.js` beside it is its JS side.
//! Measures how much of the glue floor's cost is wasm itself and how much the glue.
#![no_std]

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// The event id is written at `BUFFER[..ID_MAX]` by JS; the line is composed at `LINE`.
const ID_MAX: usize = 256;
const LINE: usize = 512;
static mut BUFFER: [u8; 1024] = [0; 1024];

/// Where JS writes the id and reads the line.
#[no_mangle]
pub extern "C" fn buffer() -> *mut u8 {
    core::ptr::addr_of_mut!(BUFFER).cast()
}

/// The receive log line for the id of `id_len` bytes at the buffer's start, written at
/// `buffer() + 512`; returns its length.
#[no_mangle]
pub extern "C" fn line(id_len: usize) -> usize {
    // SAFETY: one thread, and JS does not touch the buffer while the wasm runs
    let buffer = unsafe { &mut *core::ptr::addr_of_mut!(BUFFER) };
    let id_len = id_len.min(ID_MAX);
    let mut at = LINE;
    put(buffer, &mut at, br#"{"stage":"receive","event_id":""#);
    buffer.copy_within(..id_len, at);
    at += id_len;
    put(buffer, &mut at, br#"","outcome":"duplicate","status":200}"#);
    at - LINE
}

fn put(buffer: &mut [u8], at: &mut usize, bytes: &[u8]) {
    buffer[*at..*at + bytes.len()].copy_from_slice(bytes);
    *at += bytes.len();
}
