//! libnumaff: MAi-style (004 §3.1) array allocation and placement for C programs, on the machine
//! numaff discovers. The C API is declared in include/numaff.h and defined in [`ffi`]; the page ->
//! node functions of the policies are pure functions in [`map`]; [`core`] holds the state.

pub mod core;
pub mod error;
pub mod ffi;
pub mod map;
